"""`specatlas audit`: the draw for a blind audit is reproducible from its seed."""

from specatlas.catalog.audit import draw


def test_same_seed_same_records_whatever_the_listing_order():
    ids = [f"paper{n:04d}x" for n in range(400)]
    first = draw(ids, seed=20261204, count=30)
    assert first == draw(list(reversed(ids)), seed=20261204, count=30)
    assert len(set(first)) == 30 and set(first) <= set(ids)
    assert first != draw(ids, seed=20261205, count=30)


def test_count_above_population_draws_everything_once():
    assert sorted(draw(["b2024x", "a2024x"], seed=1, count=5)) == ["a2024x", "b2024x"]


def test_cli_prints_the_seed_and_records(capsys):
    from specatlas.cli import main

    assert main(["audit", "--seed", "7", "--count", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("seed 7: 3 of ") and len(out) == 4
