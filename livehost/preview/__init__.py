"""Avatar preview page: see and hear a room's host (segments, audio, visemes) in a local browser."""
