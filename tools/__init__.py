"""SpecAtlas: the reference knowledge base for speculative decoding."""

__version__ = "0.1.0"
