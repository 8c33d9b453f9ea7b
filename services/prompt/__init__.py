"""Prompt assembly: renders the harness's prompt pipeline for each agent turn."""
