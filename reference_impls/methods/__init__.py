"""Methods as compositions of a drafter and verifiers, registered by paper id in `registry.py`."""
