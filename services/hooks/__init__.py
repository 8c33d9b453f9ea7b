"""Hooks (Faust): merges close comments, screens input, and checks every policy action."""
