"""The live-room demo: the main job of ``make run``."""
