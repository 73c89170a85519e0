"""Studies, items, assignments, annotations, bundles and the assignment engine."""
