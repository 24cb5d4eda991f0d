"""GitHub: the REST client, the event and its gate, the payload the publish step posts, and Actions I/O."""
