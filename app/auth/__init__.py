"""Accounts, roles, sessions, API tokens and crowd entry."""
