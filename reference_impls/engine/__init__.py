"""The engine every method runs on: the session and its loop, drafts and the drafter interface, verification rules, draft-length policies, the KV cache, model loading and CPU kernels."""
