"""Policy: asks the policy model served by Triton for the next action of each turn."""
