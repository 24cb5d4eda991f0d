"""What is made from the history: weekly trend reports, trends, RL-trajectory export, ingest of results."""
