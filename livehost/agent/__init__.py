"""Transport-free logic of one request: state, merging, prompt assembly, hooks and the loop."""
