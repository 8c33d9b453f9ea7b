"""The harness: skills, tools, hooks, prompt pipeline and rules, as versioned data."""
