"""Facts about an operator for the agents: the fx tracer (run in the sandbox), rewrites found by
module name (rewrites_*.py), and the elementwise-epilogue description."""
