"""Celery app and tasks (the only place that may import torch)."""
