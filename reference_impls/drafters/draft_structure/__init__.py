"""Draft structure: the shape and schedule of drafts, whichever drafter makes them (Sequoia's
hardware-aware tree, PEARL's drafting overlapped with verification)."""
