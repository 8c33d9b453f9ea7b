"""Settings of the trajectory recorder: the shared settings (livehost.config) plus what is its own."""

APP_ID = "livehost-trajectories"
