"""One module per CLI command. Each has `register(subparsers)` and `run(args) -> int` (callable from tests)."""
