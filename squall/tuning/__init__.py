"""Tuning a topology by itself: the Storm@Twitter paper's max spout pending tuner (§3.3.3)."""
