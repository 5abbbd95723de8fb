"""Reusable explorer views: charts, heat maps, the spec editor, planning progress, exports."""
