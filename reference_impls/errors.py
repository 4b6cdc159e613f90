"""Errors the commands report as one line, importable without torch (so that bad input is
answered before the heavy imports)."""


class ModelLoadError(Exception):
    """A model or tokenizer could not be loaded; the message is one line for the user."""
