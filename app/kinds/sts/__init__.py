"""The Standardised Test Suite (paper 004) on BabyAI: scenarios, agent continuations and
human success/failure markers (issue 11, in progress: scoring first)."""
