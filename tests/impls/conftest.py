import pytest


@pytest.fixture(scope="session")
def embedded():
    """The embedded SmolLM2-135M-Instruct, loaded once per test process (converted once per machine)."""
    from specatlas.impls.engine.models import load_model, pick_device

    return load_model(None, device=pick_device("cpu"))
