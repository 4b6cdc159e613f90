"""Rendering a model folder's chat template, bounded in time, memory and output size.

A chat template is a Jinja program shipped with the model. transformers runs it in Jinja's
ImmutableSandboxedEnvironment, which keeps it from reaching Python, but not from looping for ever
(`range` is capped per loop, not across nested loops) or building a string of gigabytes (`~`
doubling through a namespace). So it is rendered in a forked child: a CPU-time and address-space
limit stop it, the parent stops waiting after RENDER_SECONDS and reads at most RENDER_BYTES of text.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import time

from specatlas.impls.engine.errors import ModelLoadError, first_line

RENDER_SECONDS = 10.0  # an honest template renders a turn in milliseconds
RENDER_BYTES = 64 << 20  # a 16 MB prompt (run's limit) with room for the template's own text
RENDER_MEMORY = 1 << 30  # address space the child may add to what it inherits
RENDER_PER_TURN = 0.05  # seconds each further turn of a batch adds to the time bound


class ChatTemplateError(ModelLoadError):
    """The model's chat template failed, ran too long or wrote too much; one line for the user."""


def render_chat(tokenizer, messages: list[dict]) -> str:
    """`messages` (role and content) rendered by the tokenizer's chat template, with the prompt for
    the assistant's answer."""
    return render_chats(tokenizer, [messages])[0]


def render_chats(tokenizer, conversations: list[list[dict]]) -> list[str]:
    """Each of `conversations` rendered as `render_chat` renders one, all in one child: a training
    set's thousands of prompts cost one fork, not one each. The time bound grows with their number
    (RENDER_PER_TURN each beyond RENDER_SECONDS); the output bound stays RENDER_BYTES a turn."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(reader)
        _render_child(tokenizer, conversations, writer)
    os.close(writer)
    seconds = RENDER_SECONDS + RENDER_PER_TURN * (len(conversations) - 1)
    try:
        data, finished = _read_bounded(reader, time.monotonic() + seconds, (RENDER_BYTES + 8) * len(conversations))
    finally:
        os.close(reader)
        if not finished:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if not finished:
        raise ChatTemplateError(f"the model's chat template did not finish within {seconds:g} s")
    if data[:1] == b"E":
        raise ChatTemplateError(f"the model's chat template failed: {data[1:].decode('utf-8', 'replace')}")
    if data[:1] == b"T":
        texts, at = [], 1
        while at + 8 <= len(data):
            size = int.from_bytes(data[at : at + 8], "big")
            texts.append(data[at + 8 : at + 8 + size].decode("utf-8", "surrogatepass"))
            at += 8 + size
        if at == len(data) and len(texts) == len(conversations):
            return texts
    raise ChatTemplateError("the model's chat template stopped without an answer (out of memory or CPU time)")


def _lower_limit(kind: int, value: int) -> None:
    """Set the soft and hard limit `kind` to `value`, or keep a lower one already set."""
    _, hard = resource.getrlimit(kind)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))


def _render_child(tokenizer, conversations: list[list[dict]], writer: int) -> None:
    """Writes "T" and each text as its length in 8 bytes and its UTF-8 bytes, or "E" and the first failure."""
    try:
        with open("/proc/self/statm") as f:
            _lower_limit(resource.RLIMIT_AS, int(f.read().split()[0]) * resource.getpagesize() + RENDER_MEMORY)
        _lower_limit(resource.RLIMIT_CPU, int(RENDER_SECONDS + RENDER_PER_TURN * len(conversations)) + 1)
        texts = []
        for messages in conversations:
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            if not isinstance(text, str):
                raise TypeError(f"it rendered {type(text).__name__}, not text")
            encoded = text.encode("utf-8", "surrogatepass")
            if len(encoded) > RENDER_BYTES:
                raise ValueError(f"it wrote over {RENDER_BYTES:,} bytes for one turn")
            texts.append(len(encoded).to_bytes(8, "big") + encoded)
        data = b"T" + b"".join(texts)
    except MemoryError:
        data = b"Eit needs more than " + f"{RENDER_MEMORY >> 20:,} MB of memory".encode()
    except BaseException as exc:  # noqa: BLE001 - the template's failure, reported by the parent
        data = b"E" + first_line(exc).encode("utf-8", "replace")
    try:
        view = memoryview(data[: (RENDER_BYTES + 8) * len(conversations) + 2])
        while view:
            view = view[os.write(writer, view):]
    finally:
        os._exit(0)


def _read_bounded(fd: int, deadline: float, limit: int) -> tuple[bytes, bool]:
    """What the child writes to `fd` until it closes it: (bytes, True), or (what came, False)
    at the deadline or past `limit` + 2 bytes."""
    chunks, size = [], 0
    while size <= limit + 1:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b"".join(chunks), False
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), True
