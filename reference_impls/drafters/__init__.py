"""Drafters that are not trained heads, grouped by the taxonomy's drafting axis (trained heads: `families/`)."""
