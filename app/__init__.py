"""Proctor: human evaluation of grounded language agents."""

__version__ = "0.1.0"
