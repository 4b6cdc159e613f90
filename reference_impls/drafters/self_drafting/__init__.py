"""Self-drafting without a trained head: layer skipping (Draft & Verify, SWIFT) and Jacobi iteration."""
