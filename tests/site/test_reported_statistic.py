"""A reported number's aggregation (benchmark mean or "up to") is shown beside it."""

from specatlas.catalog.schema import ReportedResult
from specatlas.catalog.citations import statistic_label


def _result(**extra):
    return ReportedResult(metric="speedup", value=3.6, target_model="Vicuna-7B", benchmark="MT-Bench",
                          source="Abstract", **extra)


def test_label_says_up_to_or_mean_and_nothing_when_unknown():
    assert statistic_label(_result(statistic="up-to")) == " [up to (best setting)]"
    assert statistic_label(_result(statistic="mean")) == " [benchmark mean]"
    assert statistic_label(_result()) == ""
