"""Gold accuracy, the admin review queue, approvals and rejections."""
