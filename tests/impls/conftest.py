"""Fixtures shared by the reference-implementation tests."""

import pytest

from .tiny_world import TinyWorld


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The tiny world (a random Llama with a head of every family, a datastore and cached searches),
    its cache the user cache while a module's tests run."""
    world = TinyWorld(tmp_path_factory.mktemp("tiny-world"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECATLAS_CACHE", str(world.cache))
        yield world
