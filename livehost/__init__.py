"""LiveHost: the shared core of the AI livestream-shopping host runtime."""
