"""Errors the commands report as one line, importable without torch (so that bad input is
answered before the heavy imports)."""


class ModelLoadError(Exception):
    """A model or tokenizer could not be loaded; the message is one line for the user."""


class CheckpointError(Exception):
    """A draft checkpoint cannot be used with this target; the message is one line for the user."""


def first_line(exc: BaseException) -> str:
    """An exception as one short line for a message (pickle and torch errors run to pages)."""
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def unpickle_failure(exc: BaseException) -> str:
    """Why torch.load(weights_only=True) refused a file, in one line. Torch's own message suggests
    turning unpickling on, which is exactly what must never be done with a foreign file."""
    import pickle

    if isinstance(exc, pickle.UnpicklingError):
        return "it holds Python objects other than tensors and numbers, which are never unpickled"
    return first_line(exc)
