"""Agent registry, imported outputs, generation jobs (enqueue only)."""
