"""Real servers that tests start and stop themselves (no mocks): see postgres.py."""
