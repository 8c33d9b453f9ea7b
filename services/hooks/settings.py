"""Settings of the hooks processor: the shared settings (livehost.config) plus what is its own."""

APP_ID = "livehost-hooks"
FLUSH_INTERVAL_S = 0.05  # how often merge windows are checked
