"""Trajectory recorder (Faust): one stored trajectory per request, for training and audits."""
