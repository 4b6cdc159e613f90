"""How a run counts the target's forwards: the widths every result row records."""

from specatlas.bench.contenders import counting_forwards
from specatlas.impls.engine import kv

from tests.impls.toy import tiny_llama


def test_forwards_fed_embeddings_count_their_rows():
    """PaSS feeds its look-ahead tokens as embeddings (no input ids): a forward over 0 tokens would
    be no valid width, and the run's result file would fail its schema."""
    model = tiny_llama(0)
    cache = kv.new_cache(model)
    with counting_forwards(model) as widths:
        kv.forward(model, cache, [1, 2, 3])
        kv.forward(model, cache, [4, 5], embed=model.get_input_embeddings())
    assert widths == [3, 2]
