"""Voice: speaks approved replies through TTS and hands segments with visemes to the avatar renderer."""
