"""The controlled venue vocabulary.

A record's `venue` is one of these keys; the year lives in the record's `year`. `kind` decides
the BibTeX entry type, `name` fills booktitle / journal.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Venue(NamedTuple):
    kind: str  # conference | journal | workshop | preprint | report | blog | software
    name: str


VENUES: dict[str, Venue] = {
    "arXiv": Venue("preprint", "arXiv"),
    "OpenReview": Venue("preprint", "OpenReview (under review)"),
    "technical-report": Venue("report", "Technical report"),
    "blog": Venue("blog", "Blog post"),
    "software": Venue("software", "Software release"),
    # NLP
    "ACL": Venue("conference", "Proceedings of the Annual Meeting of the Association for Computational Linguistics"),
    "ACL-Findings": Venue("conference", "Findings of the Association for Computational Linguistics: ACL"),
    "EMNLP": Venue("conference", "Proceedings of the Conference on Empirical Methods in Natural Language Processing"),
    "EMNLP-Findings": Venue("conference", "Findings of the Association for Computational Linguistics: EMNLP"),
    "NAACL": Venue("conference", "Proceedings of the Conference of the North American Chapter of the Association for Computational Linguistics"),
    "NAACL-Findings": Venue("conference", "Findings of the Association for Computational Linguistics: NAACL"),
    "NAACL-Industry": Venue("conference", "Proceedings of NAACL: Industry Track"),
    "EACL": Venue("conference", "Proceedings of the Conference of the European Chapter of the Association for Computational Linguistics"),
    "EACL-Findings": Venue("conference", "Findings of the Association for Computational Linguistics: EACL"),
    "COLING": Venue("conference", "Proceedings of the International Conference on Computational Linguistics"),
    "COLM": Venue("conference", "Conference on Language Modeling"),
    "TACL": Venue("journal", "Transactions of the Association for Computational Linguistics"),
    # Machine learning
    "NeurIPS": Venue("conference", "Advances in Neural Information Processing Systems"),
    "NeurIPS-Workshop": Venue("workshop", "NeurIPS Workshop"),
    "ICML": Venue("conference", "Proceedings of the International Conference on Machine Learning"),
    "ICML-Workshop": Venue("workshop", "ICML Workshop"),
    "ICLR": Venue("conference", "International Conference on Learning Representations"),
    "ICLR-Workshop": Venue("workshop", "ICLR Workshop"),
    "AAAI": Venue("conference", "Proceedings of the AAAI Conference on Artificial Intelligence"),
    "IJCAI": Venue("conference", "Proceedings of the International Joint Conference on Artificial Intelligence"),
    "KDD": Venue("conference", "Proceedings of the ACM SIGKDD Conference on Knowledge Discovery and Data Mining"),
    "WWW": Venue("conference", "Proceedings of the ACM Web Conference"),
    "SIGIR": Venue("conference", "Proceedings of the International ACM SIGIR Conference on Research and Development in Information Retrieval"),
    "TMLR": Venue("journal", "Transactions on Machine Learning Research"),
    "JMLR": Venue("journal", "Journal of Machine Learning Research"),
    "TPAMI": Venue("journal", "IEEE Transactions on Pattern Analysis and Machine Intelligence"),
    "TNNLS": Venue("journal", "IEEE Transactions on Neural Networks and Learning Systems"),
    "TKDE": Venue("journal", "IEEE Transactions on Knowledge and Data Engineering"),
    "TPDS": Venue("journal", "IEEE Transactions on Parallel and Distributed Systems"),
    "TC": Venue("journal", "IEEE Transactions on Computers"),
    "CSUR": Venue("journal", "ACM Computing Surveys"),
    "TOSEM": Venue("journal", "ACM Transactions on Software Engineering and Methodology"),
    "TACO": Venue("journal", "ACM Transactions on Architecture and Code Optimization"),
    "IJCV": Venue("journal", "International Journal of Computer Vision"),
    "MLJ": Venue("journal", "Machine Learning"),
    "SCIS": Venue("journal", "Science China Information Sciences"),
    "FCS": Venue("journal", "Frontiers of Computer Science"),
    # A journal of these publishers without its own key: name it in venue_note and bibtex.journal.
    "IEEE-journal": Venue("journal", "IEEE journal"),
    "ACM-journal": Venue("journal", "ACM journal"),
    "Springer-journal": Venue("journal", "Springer journal"),
    "Elsevier-journal": Venue("journal", "Elsevier journal"),
    # Vision, speech, signal processing, multimedia
    "CVPR": Venue("conference", "Proceedings of the IEEE/CVF Conference on Computer Vision and Pattern Recognition"),
    "CVPR-Workshop": Venue("workshop", "CVPR Workshop"),
    "ICCV": Venue("conference", "Proceedings of the IEEE/CVF International Conference on Computer Vision"),
    "ECCV": Venue("conference", "Proceedings of the European Conference on Computer Vision"),
    "ACM-MM": Venue("conference", "Proceedings of the ACM International Conference on Multimedia"),
    "ICASSP": Venue("conference", "IEEE International Conference on Acoustics, Speech and Signal Processing"),
    "Interspeech": Venue("conference", "Proceedings of Interspeech"),
    "EUSIPCO": Venue("conference", "European Signal Processing Conference"),
    # Systems and hardware
    "MLSys": Venue("conference", "Proceedings of Machine Learning and Systems"),
    "OSDI": Venue("conference", "USENIX Symposium on Operating Systems Design and Implementation"),
    "SOSP": Venue("conference", "Proceedings of the ACM Symposium on Operating Systems Principles"),
    "ASPLOS": Venue("conference", "Proceedings of the ACM International Conference on Architectural Support for Programming Languages and Operating Systems"),
    "EuroSys": Venue("conference", "Proceedings of the European Conference on Computer Systems"),
    "NSDI": Venue("conference", "USENIX Symposium on Networked Systems Design and Implementation"),
    "USENIX-ATC": Venue("conference", "USENIX Annual Technical Conference"),
    "SC": Venue("conference", "International Conference for High Performance Computing, Networking, Storage and Analysis"),
    "ISCA": Venue("conference", "Proceedings of the International Symposium on Computer Architecture"),
    "MICRO": Venue("conference", "Proceedings of the IEEE/ACM International Symposium on Microarchitecture"),
    "HPCA": Venue("conference", "IEEE International Symposium on High-Performance Computer Architecture"),
    "DAC": Venue("conference", "Proceedings of the ACM/IEEE Design Automation Conference"),
    "ICCAD": Venue("conference", "Proceedings of the IEEE/ACM International Conference on Computer-Aided Design"),
    "ISCAS": Venue("conference", "IEEE International Symposium on Circuits and Systems"),
    "INFOCOM": Venue("conference", "IEEE International Conference on Computer Communications"),
    "IVUS": Venue("conference", "International Conference on Information, Intelligence, Systems and Applications (IVUS)"),
    "other-conference": Venue("conference", "Conference paper"),
    "other-journal": Venue("journal", "Journal article"),
    "other-workshop": Venue("workshop", "Workshop paper"),
}

# Spellings seen in hand-edited lists, lower-cased, with years and decorations removed.
_BADGE_SYNONYMS = {
    "arxiv": "arXiv",
    "nips": "NeurIPS",
    "neurips": "NeurIPS",
    "technical report": "technical-report",
    "iclr submission": "OpenReview",
    "acmmm": "ACM-MM",
    "acm mm": "ACM-MM",
    "sc": "SC",
    "naacl-industry": "NAACL-Industry",
}


def normalize_badge(badge: str | None) -> str | None:
    """Map a free-form venue badge such as 'NIPS2024', 'EMNLP2025-Findings' or
    'ENLSP at NIPS2023' onto a controlled venue key, or None when it cannot be mapped."""
    if not badge:
        return None
    text = badge.strip()
    lowered = text.lower()
    if " at " in lowered or "workshop" in lowered:
        for host in ("neurips", "nips", "icml", "iclr", "cvpr"):
            if host in lowered:
                host_key = {"nips": "NeurIPS", "neurips": "NeurIPS", "icml": "ICML", "iclr": "ICLR", "cvpr": "CVPR"}[host]
                return f"{host_key}-Workshop"
        return "other-workshop"
    core = re.sub(r"\s*\b(oral|spotlight|poster)\b", "", lowered)
    core = re.sub(r"\s*(19|20)\d{2}\b|(?<=[a-z])\s*\d{2}\b", "", core).strip()
    findings = "findings" in core
    core = core.replace("-findings", "").replace("findings", "").strip(" -")
    if core in _BADGE_SYNONYMS:
        key = _BADGE_SYNONYMS[core]
    else:
        key = next((k for k in VENUES if k.lower() == core), None)
        if key is None:
            return None
    if findings and f"{key}-Findings" in VENUES:
        return f"{key}-Findings"
    return key
