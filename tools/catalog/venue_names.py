"""Venue names as DBLP, Semantic Scholar, Crossref and arXiv journal-refs write them -> the
catalog's controlled venue keys (`specatlas.catalog.venues`); None for a preprint or a name not
recognised."""

from __future__ import annotations

import re
import unicodedata

from specatlas.catalog.venues import VENUES, normalize_badge

# "Forty-first International Conference on Machine Learning" (OpenReview, Semantic Scholar)
_ORDINAL_WORDS = (r"\b(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)[- ]?)?(?:first|second|third|fourth|fifth|"
                  r"sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|"
                  r"eighteenth|nineteenth|twentieth|thirtieth|fortieth|fiftieth|sixtieth)\b")


def _canon(name: str) -> str:
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    text = re.sub(r"\([^)]*\)", " ", text)
    text = re.sub(r"\bproceedings of\b|\b(19|20)\d{2}\b|\b\d+(st|nd|rd|th)\b|\bvolume \d+\b|" + _ORDINAL_WORDS, " ", text)
    words = re.sub(r"[^a-z0-9]+", " ", text).split()
    while words and (words[0] == "the" or words[-1].isdigit()):
        words = words[1:] if words[0] == "the" else words[:-1]
    return " ".join(words)


_PREPRINTS = {"corr", "arxiv", "arxiv org", "arxiv cornell university"}
_LONG_NAMES: dict[str, str] = {
    _canon(venue.name): key for key, venue in VENUES.items()
    if venue.kind in ("conference", "journal") and not key.startswith("other-") and not key.endswith("-journal")
}
_LONG_NAMES.update({
    _canon(alias): key for alias, key in {
        "Neural Information Processing Systems": "NeurIPS",
        "Conference on Neural Information Processing Systems": "NeurIPS",
        "North American Chapter of the Association for Computational Linguistics": "NAACL",
        "Conference of the North American Chapter of the Association for Computational Linguistics: Human Language Technologies": "NAACL",
        "NAACL-HLT": "NAACL",
        "Conference of the Nations of the Americas Chapter of the Association for Computational Linguistics: Human Language Technologies": "NAACL",
        "ACM SIGOPS Symposium on Operating Systems Principles": "SOSP",
        "Computer Vision and Pattern Recognition": "CVPR",
        "International Conference on Computer Vision": "ICCV",
        "ACM Multimedia": "ACM-MM",
        "Knowledge Discovery and Data Mining": "KDD",
        "The Web Conference": "WWW",
        "Machine Learning and Systems": "MLSys",
        "Conference on Machine Learning and Systems": "MLSys",
        "Trans. Mach. Learn. Res.": "TMLR",
        "Trans. Assoc. Comput. Linguistics": "TACL",
        "J. Mach. Learn. Res.": "JMLR",
        "IEEE Trans. Pattern Anal. Mach. Intell.": "TPAMI",
        "IEEE Trans. Neural Networks Learn. Syst.": "TNNLS",
        "IEEE Trans. Knowl. Data Eng.": "TKDE",
        "IEEE Trans. Parallel Distributed Syst.": "TPDS",
        "IEEE Trans. Computers": "TC",
        "ACM Comput. Surv.": "CSUR",
        "ACM Trans. Softw. Eng. Methodol.": "TOSEM",
        "ACM Trans. Archit. Code Optim.": "TACO",
        "Int. J. Comput. Vis.": "IJCV",
        "Mach. Learn.": "MLJ",
        "Sci. China Inf. Sci.": "SCIS",
        "Frontiers Comput. Sci.": "FCS",
        "International Symposium on Computer Architecture": "ISCA",
        "Annual International Symposium on Computer Architecture": "ISCA",
        "Design Automation Conference": "DAC",
        "USENIX ATC": "USENIX-ATC",
        "Symposium on Operating Systems Principles": "SOSP",
        "European Conference on Computer Systems": "EuroSys",
    }.items()
})
_WORKSHOP_HOSTS = {"neurips": "NeurIPS", "nips": "NeurIPS", "icml": "ICML", "iclr": "ICLR", "cvpr": "CVPR"}


def venue_key(name: str | None) -> str | None:
    """Map a venue as DBLP ('ACL (Findings)', 'ES-FoMo@ICML'), Semantic Scholar ('International
    Conference on Machine Learning') or Crossref ('Proceedings of the 62nd Annual Meeting of the
    ...') names it onto a key of venues.py; 'arXiv' for preprint servers; None when unknown."""
    if not name or not name.strip():
        return None
    lowered = name.lower()
    if _canon(name) in _PREPRINTS:
        return "arXiv"
    if re.search(r"\bfindings\b", lowered):
        host = re.search(r"\b(emnlp|naacl|eacl|acl)\b", lowered)
        key = f"{host.group(1).upper()}-Findings" if host else None
        return key if key in VENUES else None
    if "@" in name or re.search(r"\bworkshops?\b", lowered):
        host = next((v for k, v in _WORKSHOP_HOSTS.items() if re.search(rf"\b{k}\b", lowered)), None)
        return f"{host}-Workshop" if host else "other-workshop"
    candidates = [name, *re.findall(r"\(([^)]*)\)", name), *re.split(r"\s+-\s+|[:,]\s+", name)]
    for candidate in candidates:
        bare = re.sub(r"\([^)]*\)", "", candidate).strip()
        key = normalize_badge(bare) if bare and len(bare) <= 20 else None
        if key is None:
            key = _LONG_NAMES.get(_canon(candidate))
        if key:
            return key
    return _publisher_journal(name)


# Journals without a key of their own, by the publisher their name or abbreviation starts with
# ('IEEE Communications Letters', 'ACM Trans. Embed. Comput. Syst.'); conference proceedings excluded.
_PUBLISHER_JOURNALS = {"ieee": "IEEE-journal", "acm": "ACM-journal"}


def _publisher_journal(name: str) -> str | None:
    words = name.lower().split()
    key = _PUBLISHER_JOURNALS.get(words[0]) if words else None
    journal = re.search(r"\b(trans\.?|transactions|letters|journal|j\.|magazine|surveys?|comput\. surv\.)\b", name.lower())
    proceedings = re.search(r"\b(conference|symposium|proceedings|workshop|conf\.|symp\.)\b", name.lower())
    return key if key and journal and not proceedings else None
