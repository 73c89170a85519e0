"""Leaderboards: aggregate study results into ranked, uncertainty-aware tables."""
