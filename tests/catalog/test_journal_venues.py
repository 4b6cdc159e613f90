"""Journals are venues too: named journals have keys, others fall under their publisher."""

import pytest

from specatlas.catalog.venue_names import venue_key
from specatlas.catalog.venues import VENUES


@pytest.mark.parametrize("name, key", [
    ("IEEE Transactions on Pattern Analysis and Machine Intelligence", "TPAMI"),
    ("IEEE Trans. Pattern Anal. Mach. Intell.", "TPAMI"),
    ("ACM Comput. Surv.", "CSUR"),
    ("Trans. Assoc. Comput. Linguistics", "TACL"),
    ("J. Mach. Learn. Res.", "JMLR"),
    ("Int. J. Comput. Vis.", "IJCV"),
    ("IEEE Communications Letters", "IEEE-journal"),
    ("ACM Trans. Embed. Comput. Syst.", "ACM-journal"),
])
def test_journal_names_map_to_journal_keys(name, key):
    assert venue_key(name) == key and VENUES[key].kind == "journal"


@pytest.mark.parametrize("name, key", [
    ("IEEE International Conference on Acoustics, Speech and Signal Processing", "ICASSP"),
    ("ACM Multimedia", "ACM-MM"),
    ("IEEE Symposium on Security and Privacy", None),  # proceedings are not journals
])
def test_publisher_proceedings_are_not_journals(name, key):
    assert venue_key(name) == key
