"""Model-free drafting: retrieval from a datastore or the context, and n-gram pools (Token Recycling)."""
