"""The catalog's recall (`specatlas recall`, the timeline page): capture-recapture of two blind sweeps
against the catalog, per quarter."""

import math

import pytest

from specatlas.catalog.capture_recapture import SweepError, chapman, estimate, read_sweep, read_sweeps, recall, wilson

HEADER = "sweep: {name}\nstrategy: test\nperiod: {{from: 2023-01, to: 2024-12}}\nended: 2026-12-06\npapers:\n"


def entry(arxiv, title, posted):
    arxiv = "null" if arxiv is None else f"'{arxiv}'"
    return f"  - arxiv: {arxiv}\n    title: '{title}'\n    posted: {posted}\n    source: https://arxiv.org/abs/x\n"


def write(folder, name, *entries):
    folder.mkdir(exist_ok=True)
    path = folder / f"sweep-{name}.yaml"
    path.write_text(HEADER.format(name=name) + "".join(entries))
    return path


def test_chapman_and_its_interval_match_the_formulas():
    n, low, high = chapman(40, 50, 20)
    assert n == pytest.approx(41 * 51 / 21 - 1)
    assert 70 <= low < n < high  # never below the 70 papers seen
    assert chapman(10, 10, 10) == (10.0, 10.0, 10.0)  # both found everything: nothing unseen
    p, lo, hi = wilson(19, 20)
    assert p == 0.95 and lo == pytest.approx(0.7639, abs=1e-3) and hi == pytest.approx(0.9911, abs=1e-3)
    assert math.isnan(wilson(0, 0)[0])
    # the catalog's records beyond the sweeps' finds count against the papers neither sweep found
    assert recall(90, 80, 75, (100.0, 90.0, 120.0)) == (90 / 100, 90 / 120, 90 / 95)


def test_recall_counts_the_sweeps_papers_with_a_record_by_arxiv_id_or_title(make_catalog, tmp_path):
    from specatlas.catalog.validate import validate

    root = make_catalog()  # holds 2302.00001 and "Verifying Token Trees in One Pass" (2401.00002)
    _, records, _ = validate(root=root)
    sweeps = tmp_path / "sweeps"
    write(sweeps, "a", entry("2302.00001", "Drafting Tokens with a Small Model", "2023-02"),
          entry("2302.00009", "Another Drafter", "2023-02"), entry(None, "Verifying token trees in one pass!", "2024-01"))
    write(sweeps, "b", entry("2302.00001", "Drafting tokens", "2023-02"), entry("2303.00007", "Third", "2023-03"))
    result = estimate([r.paper for r in records if r.paper], read_sweeps(sweeps))
    q1 = result["quarters"]["2023Q1"]
    assert (q1["sweep_a"], q1["sweep_b"], q1["both"], q1["found"], q1["catalogued"]) == (2, 2, 1, 3, 1)
    assert q1["missing"] == ["2302.00009", "2303.00007"] and q1["records"] == 1
    assert q1["share_catalogued"][0] == pytest.approx(1 / 3, abs=1e-3)
    # N = 3 x 3 / 2 - 1 = 3.5: half a paper neither sweep found beside the 3 found; 1 record of them
    assert q1["field_size"][0] == 3.5 and q1["recall"][0] == pytest.approx(1 / 3.5, abs=1e-3)
    assert result["quarters"]["2024Q1"]["catalogued"] == 1  # matched by its normalized title


@pytest.mark.parametrize("body, message", [
    (entry("2302.001", "T", "2023-02"), "papers[0].arxiv: '2302.001' is not a new-style arXiv id"),
    (entry("2302.00001", "T", "2023-03"), "papers[0].posted: 2023-03 is not the month of arXiv id 2302.00001"),
    (entry(None, "T", "2023-13"), "papers[0].posted: '2023-13' is not YYYY-MM"),
    ("  - just text\n", "papers[0]: an entry is a mapping"),
    (entry(None, "T", "2023-02").replace("https://arxiv.org/abs/x", "found it somewhere"), "papers[0].source:"),
])
def test_a_malformed_sweep_is_one_line_naming_the_entry_and_field(tmp_path, body, message):
    path = write(tmp_path, "a", body)
    with pytest.raises(SweepError) as error:
        read_sweep(path)
    assert message in str(error.value) and "\n" not in str(error.value) and str(path) in str(error.value)


def test_every_committed_round_reads_and_covers_the_whole_period():
    from specatlas.catalog.capture_recapture import SWEEPS, latest_round

    rounds = sorted(SWEEPS.glob("round-*"))
    assert len(rounds) >= 2 and latest_round() == SWEEPS / f"round-{len(rounds)}"
    for folder in rounds:
        sweeps = read_sweeps(folder)
        assert len(sweeps) == 2 and all(s.period == ("2025-01", "2026-10") for s in sweeps), folder
        assert all(len(s.papers) > 100 for s in sweeps), folder


def test_the_newest_round_is_the_one_measured(tmp_path):
    from specatlas.catalog.capture_recapture import latest_round

    for name in ("round-1", "round-2", "round-10", "round-x", "notes"):
        (tmp_path / name).mkdir()
    assert latest_round(tmp_path) == tmp_path / "round-10"
    assert latest_round(tmp_path / "notes") is None
