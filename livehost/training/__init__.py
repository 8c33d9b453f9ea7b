"""Training-data exports of recorded trajectories (SFT, RL, raw) and their command line."""
