"""The paper catalog: taxonomy, record schema, loading and validation."""
