"""Benchmarks and the fault suite: each module runs on its own (``python benchmarks/<name>.py`` or ``-m``)."""
