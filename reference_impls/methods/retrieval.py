"""Retrieval-based methods (LLMA, REST, SAM-Decoding, SuffixDecoding) as compositions on the shared loop.

Same builder signature as `methods/core.py`; none uses a draft model (SAM-Decoding[EAGLE-2] and
SAM-Decoding[PARD] hand short matches to a trained EAGLE head or PARD drafter). REST and SAM-Decoding read a
datastore: the loaded one their builder is given (`datastore_for`: a file the command names with
--datastore), else the one shipped for the embedded model, built by
`specatlas datastore build --self-generate` from the model's own answers to our instructions.
"""

from __future__ import annotations

from pathlib import Path

from specatlas.impls.families.checkpoints import load_head
from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import DraftLengthPolicy
from specatlas.impls.engine.errors import first_line
from specatlas.impls.methods.heads import parallel_drafter
from specatlas.impls.methods.parallel import recycling_template
from specatlas.impls.drafters.model_free.recycling import TokenRecycling
from specatlas.impls.engine.models import EMBEDDED, ModelLoadError
from specatlas.impls.drafters.model_free.retrieval import Datastore, ReferenceCopy, RetrievalTree, SuffixAutomatonDraft
from specatlas.impls.drafters.model_free.suffix_tree import SuffixDecoding
from specatlas.impls.families.eagle import EagleDrafter
from specatlas.impls.registry import METHODS

DEFAULT_DATASTORE = Path(__file__).resolve().parent.parent / "datastores" / f"{EMBEDDED}.npz"


def node_budget(sizes):
    """nodes(depth), a retrieval tree's node budget: the paper's fixed `nodes`, or the sized
    variant's `nodes_per_level` for each level drafted."""
    per_level = getattr(sizes, "nodes_per_level", None)
    return (lambda depth: per_level * depth) if per_level else (lambda depth: sizes.nodes)


def llma(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Yang et al. 2023: copy the reference span that follows the latest generated n-gram; the
    reference is the prompt (documents given with the question)."""
    copy = METHODS["yang2023inference"].paper.copy
    return SpeculativeDecoder(target, ReferenceCopy(copy=copy), draft_length=policy.controller(target, copy))


def rest(target, draft_model=None, policy=DraftLengthPolicy.paper(), datastore: Datastore | None = None) -> SpeculativeDecoder:
    """He et al. 2024: the frequency-pruned trie of datastore continuations of the longest
    matching suffix, verified as one token tree."""
    sizes = METHODS["he2024rest"].constants_for(policy, target)
    nodes = node_budget(sizes)
    datastore = used(target, datastore)
    drafter = RetrievalTree(datastore, nodes, sizes.longest_suffix, sizes.shortest_suffix, sizes.retrieved)
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(target, sizes.depth, nodes),
                              weights=datastore_files(datastore))


def sam_decoding(target, draft_model=None, policy=DraftLengthPolicy.paper(),
                 datastore: Datastore | None = None) -> SpeculativeDecoder:
    """Hu et al. 2025 (SAM-Decoding[T]): the longest suffix match in a suffix automaton of the
    context, or in the datastore when that match is clearly longer; its continuation is the draft.
    Short matches hand over to Token Recycling, which learns from every verification."""
    paper = METHODS["hu2025sam"].paper
    auxiliary = TokenRecycling(recycling_template(target, policy))
    length = policy.controller(target, paper.tokens)
    datastore = used(target, datastore)
    drafter = SuffixAutomatonDraft(datastore, paper.bias, auxiliary=auxiliary, threshold=paper.threshold,
                                   draft_length=length)
    return SpeculativeDecoder(target, drafter, draft_length=length, weights=datastore_files(datastore))


def sam_decoding_eagle2(target, draft_model=None, policy=DraftLengthPolicy.paper(),
                        drafter_checkpoint=None, datastore: Datastore | None = None) -> SpeculativeDecoder:
    """Hu et al. 2025 (SAM-Decoding[EAGLE-2]): the suffix automata's draft when the better match
    (the datastore's counted l_bias shorter) holds at least l_threshold tokens, else EAGLE-2's
    dynamic tree from the EAGLE head, which reads the target's features of every verified step.
    As its Spec-Bench row ran (the commit the record's results cite)."""
    paper = METHODS["hu2025sam-eagle2"].paper
    checkpoint = load_head(target, "eagle", drafter_checkpoint)
    auxiliary = EagleDrafter(checkpoint.head, target.model.embed_tokens.weight, target.lm_head.weight,
                             checkpoint.hidden_layers[0], tree=None, dynamic=(paper.total, paper.depth, paper.top_k),
                             label=checkpoint.describe())
    length = policy.controller(target, paper.tokens, lambda d: min(paper.total, paper.top_k * min(d, paper.depth)),
                               paper.tokens)
    # The controller gates the EAGLE head as it gates EAGLE-2 alone: no head forward on a step it makes plain.
    datastore = used(target, datastore)
    drafter = SuffixAutomatonDraft(datastore, paper.bias, auxiliary=auxiliary,
                                   threshold=paper.threshold, draft_length=length)
    return SpeculativeDecoder(target, drafter, draft_length=length, weights={**checkpoint.files, **datastore_files(datastore)})


def sam_decoding_pard(target, draft_model=None, policy=DraftLengthPolicy.paper(),
                      drafter_checkpoint=None, datastore: Datastore | None = None) -> SpeculativeDecoder:
    """SAM-Decoding[PARD], a labelled composition: SAM-Decoding's drafts while its match holds
    l_threshold tokens, else one forward of the trained PARD drafter drafts a block of at most
    PARD's K (the block it is trained for). Retrieval drafts cost nothing; the block drafter pays
    only on the steps where retrieval has nothing to propose."""
    paper = METHODS["hu2025sam-pard"].paper
    auxiliary, files = parallel_drafter(target, "an2025pard", drafter_checkpoint)
    length = policy.controller(target, paper.tokens)
    datastore = used(target, datastore)
    drafter = SuffixAutomatonDraft(datastore, paper.bias, auxiliary=auxiliary, threshold=paper.threshold,
                                   draft_length=length, auxiliary_depth=METHODS["an2025pard"].paper.block)
    return SpeculativeDecoder(target, drafter, draft_length=length, weights={**files, **datastore_files(datastore)})


def suffix_decoding(target, draft_model=None, policy=DraftLengthPolicy.paper()) -> SpeculativeDecoder:
    """Oliaro et al. 2025: suffix trees over this request (prompt and output so far) and over
    earlier outputs; the last p tokens matched in each, for every p, grow a speculation tree of
    the most frequent continuations (at most α·p nodes) and the best-scoring tree is verified.
    No datastore: what it retrieves from, it has seen. On the cost-aware policy the tree gets
    REST's CPU node budget."""
    sizes = METHODS["oliaro2025suffixdecoding"].constants_for(policy, target)
    nodes = node_budget(sizes)
    drafter = SuffixDecoding(sizes.depth, sizes.factor, sizes.min_probability, nodes)
    return SpeculativeDecoder(target, drafter, draft_length=policy.controller(target, sizes.depth, nodes))


def datastore_for(target, path: Path | None = None) -> Datastore:
    """The datastore at `path` (default: the one shipped for the embedded model), checked against the
    target's vocabulary; a one-line ModelLoadError when it is missing, unreadable or for another
    vocabulary. Commands load it once and give it to every builder (`datastore=`)."""
    path = Path(path or DEFAULT_DATASTORE).expanduser()
    build = "build one with `specatlas datastore build`"
    if not path.is_file():
        raise ModelLoadError(f"no datastore at {path}; {build}")
    try:
        datastore = Datastore.load(path, None if path.resolve() == DEFAULT_DATASTORE else path.name)
    except Exception as exc:  # noqa: BLE001 - not a zip, a pickled array refused, keys missing...
        raise ModelLoadError(f"datastore {path} cannot be read ({first_line(exc)}); {build}") from None
    if datastore.meta.get("vocab_size") != target.config.vocab_size:
        raise ModelLoadError(f"datastore {path} was built for {datastore.meta.get('model')!r}, whose vocabulary "
                             f"differs from the target's; build one with `specatlas datastore build --model ...` "
                             "and pass it with --datastore")
    return datastore


def used(target, datastore: Datastore | None) -> Datastore:
    """The datastore a builder was given, else the shipped one."""
    return datastore_for(target) if datastore is None else datastore


def datastore_files(datastore: Datastore) -> dict[str, Path]:
    """A datastore other than the shipped one as a trained file the method loaded (its decoder's
    `weights`), so a result row names its digest and the leaderboard never averages runs over
    different datastores; {} for the shipped one."""
    if datastore.label is None or datastore.path is None:
        return {}
    return {f"datastore {datastore.label}": datastore.path}
