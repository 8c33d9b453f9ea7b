"""Hook kinds (code) evaluated with the hooks, parameters and failure policies of a harness (data)."""
