"""Optimization agents: each proposes candidate sources for one operator; the pipeline verifies them."""
