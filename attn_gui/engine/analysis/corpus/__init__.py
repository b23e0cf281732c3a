"""The corpus census: every head's statistics over a corpus, in shards (in process or on Ray)."""
