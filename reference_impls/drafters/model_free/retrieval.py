"""Model-free drafters that retrieve drafts from text: a reference (LLMA), a datastore (REST), or
suffix automata over the context and a datastore (SAM-Decoding).

Their drafts are point masses (`Draft.q is None`): greedy decoding verifies them by exact match,
sampling by the engine's rejection sampling, which is lossless for deterministic drafts too.

A datastore is a token array and its suffix array, saved as one .npz (`specatlas datastore build`).
Every occurrence of a pattern is one contiguous interval of the suffix array, found by binary
search, so "where does the longest suffix of the context occur?" costs O(log n) per probe.
"""

from __future__ import annotations

import bisect
import io
import json
from pathlib import Path

import numpy as np

from specatlas.fsutil import atomic_write
from specatlas.impls.engine.drafting import Draft, Drafter


def suffix_array(tokens: np.ndarray) -> np.ndarray:
    """Start positions of all suffixes in lexicographic order, by prefix doubling (Manber & Myers):
    sort by the first 2^j tokens using the ranks of 2^(j-1)-token blocks, O(n log^2 n) in numpy."""
    n = len(tokens)
    rank = np.unique(np.asarray(tokens), return_inverse=True)[1].astype(np.int64).reshape(-1)
    order = np.arange(n, dtype=np.int64)
    span = 1
    while n > 1:
        second = np.full(n, -1, dtype=np.int64)  # -1: past the end, sorts before every token
        second[: n - span] = rank[span:]
        key = rank * (n + 1) + second + 1
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.concatenate([[0], np.cumsum(sorted_key[1:] != sorted_key[:-1])])
        if rank[order[-1]] == n - 1 or span >= n:  # every suffix has a distinct rank: sorted
            break
        span *= 2
    return order.astype(np.int32)


class Datastore:
    """Token sequences and their suffix array; `meta` records how the datastore was built. `path`:
    the file it was loaded from; `label`: how drafters name it in their description (None for the
    datastore shipped with the package, whose rows name only its size)."""

    def __init__(self, tokens, meta: dict | None = None, suffixes=None, path: Path | None = None,
                 label: str | None = None):
        tokens = np.asarray(tokens, dtype=np.int32)
        self.suffixes = np.asarray(suffix_array(tokens) if suffixes is None else suffixes, dtype=np.int32)
        self.array = tokens
        self.tokens = tokens.tolist()  # binary search compares Python list slices: fastest on CPU
        self.sorted = self.suffixes.tolist()
        self.meta = meta or {}
        self.path, self.label = path, label

    @classmethod
    def from_documents(cls, documents: list[list[int]], separator: int, meta: dict | None = None) -> Datastore:
        """Documents joined by `separator` (the EOS token): a draft running past a document's end
        proposes EOS there, as the model would."""
        tokens = [token for document in documents for token in (*document, separator)]
        return cls(tokens, meta)

    def save(self, path: Path) -> None:
        """Written whole, then renamed into place (fsutil.atomic_write): a kill never leaves a
        truncated datastore for the next run to load."""
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, tokens=self.array, suffixes=self.suffixes,
                            meta=np.array(json.dumps(self.meta, sort_keys=True)))
        atomic_write(path, buffer.getvalue())

    @classmethod
    def load(cls, path: Path, label: str | None = None) -> Datastore:
        """The datastore saved at `path`; a ValueError saying what is wrong when its arrays are not
        a token array and its suffix array (checked before use: a bad index would fail mid-decoding)."""
        with np.load(path, allow_pickle=False) as data:  # arrays only: a pickled object never loads
            tokens, suffixes, meta = data["tokens"], data["suffixes"], json.loads(str(data["meta"]))
        if tokens.ndim != 1 or suffixes.shape != tokens.shape or tokens.dtype.kind not in "iu" \
                or suffixes.dtype.kind not in "iu":
            raise ValueError(f"its arrays are not tokens and their suffix array (shapes {tokens.shape}, {suffixes.shape})")
        if len(tokens) and not (0 <= suffixes.min() and suffixes.max() < len(tokens) and tokens.min() >= 0):
            raise ValueError("its suffix array points outside its tokens, or a token id is negative")
        if not isinstance(meta, dict):
            raise ValueError("its meta is not a JSON object")
        return cls(tokens, meta, suffixes, path, label)

    def __len__(self) -> int:
        return len(self.tokens)

    def describe(self) -> str:
        return f"{len(self)} tokens" + (f", {self.label}" if self.label else "")

    def interval(self, pattern: list[int]) -> tuple[int, int]:
        """Suffix-array rows [lo, hi) whose suffixes start with `pattern`."""
        m, tokens = len(pattern), self.tokens
        key = lambda start: tokens[start : start + m]  # noqa: E731
        lo = bisect.bisect_left(self.sorted, pattern, key=key)
        return lo, bisect.bisect_right(self.sorted, pattern, lo, key=key)

    def longest_suffix(self, context: list[int], max_length: int) -> tuple[int, int, int]:
        """(length, lo, hi) of the longest suffix of `context`, at most `max_length` tokens, that
        occurs in the datastore. Occurrence is monotone in the length (a suffix of an occurring
        string occurs), so the length is found by binary search."""
        best, lo, hi = 0, 0, len(self.sorted)
        shortest, longest = 1, min(max_length, len(context))
        while shortest <= longest:
            length = (shortest + longest) // 2
            found = self.interval(context[-length:])
            if found[0] < found[1]:
                best, (lo, hi), shortest = length, found, length + 1
            else:
                longest = length - 1
        return best, lo, hi

    def continuations(self, lo: int, hi: int, skip: int, length: int, limit: int) -> np.ndarray:
        """The `length` tokens after the first `limit` matches in rows [lo, hi) (match length `skip`),
        one row each, padded with -1 past the end of the datastore."""
        starts = self.suffixes[lo : min(hi, lo + limit)].astype(np.int64) + skip
        index = starts[:, None] + np.arange(length)
        inside = index < len(self.array)
        return np.where(inside, self.array[np.minimum(index, len(self.array) - 1)], -1).astype(np.int64)


def match_key(length: int) -> int:
    """A match length as a draft key: longer matches predict better, up to a point."""
    return min(length, 8)


class ReferenceCopy(Drafter):
    """LLMA (Yang et al. 2023, "Inference with Reference"): when the latest n generated tokens occur
    in the reference documents, copy the k reference tokens that follow them.

    Paper defaults (its released code): trigger n-gram n = 1, tried longest first from 5 down to n;
    the first occurrence in the reference is copied; copy length k = 20 (capped here by the loop's
    depth budget). Unlike prompt lookup, only the reference is searched, never the generated text.
    `reference=None` makes the reference the prompt of each generation (documents given with it).
    """

    def __init__(self, reference: list[int] | None = None, trigger: int = 1, longest: int = 5, copy: int = 20):
        self.trigger, self.longest, self.copy = trigger, longest, copy
        self.fixed = reference is not None
        self.reference: list[int] = []
        self.first: dict[tuple[int, ...], int] = {}
        if reference is not None:
            self._index(reference)

    def _index(self, reference: list[int]) -> None:
        """Start position of the first occurrence of every n-gram, n = trigger..longest."""
        self.reference, self.first = list(reference), {}
        for n in range(self.trigger, self.longest + 1):
            for start in range(len(reference) - n + 1):
                self.first.setdefault(tuple(reference[start : start + n]), start)

    def start(self, prompt, prefill):
        if not self.fixed:
            self._index(prompt)

    def propose(self, context, depth, sampling, rng):
        for n in range(min(self.longest, len(context)), self.trigger - 1, -1):
            start = self.first.get(tuple(context[-n:]))
            if start is not None:
                copied = self.reference[start + n : start + n + min(depth, self.copy)]
                if copied:
                    return Draft.chain(copied, key=n)
        return Draft()

    def describe(self):
        source = f"a fixed reference of {len(self.reference)} tokens" if self.fixed else "the prompt as reference"
        return f"LLMA reference copy ({source}; n-gram {self.longest}..{self.trigger}, copy {self.copy})"


class RetrievalTree(Drafter):
    """REST (He et al. 2024): retrieve the datastore entries that continue the longest suffix of the
    context, count every prefix of their continuations (a trie weighted by frequency), keep the
    most frequent prefixes within a node budget and propose them as one token tree.

    Its constants (the registry's he2024rest entry, from the paper's code): suffix lengths tried
    from `longest_suffix` = 16 down to `shortest_suffix` = 2, only the first `retrieved` = 5000
    entries of the matching suffix-array interval read, 10 continuation tokens each, 64 tree
    nodes. The `retrieved` cap is what bounds a lookup: a common 2-gram of a large datastore
    occurs tens of thousands of times. Here the depth is the loop's budget and the node budget is
    `nodes(depth)`, so the cost-aware policy prices the tree it will get.
    """

    def __init__(self, datastore: Datastore, nodes, longest_suffix: int, shortest_suffix: int, retrieved: int):
        self.datastore, self.nodes = datastore, nodes
        self.longest_suffix, self.shortest_suffix, self.retrieved = longest_suffix, shortest_suffix, retrieved

    def propose(self, context, depth, sampling, rng):
        length, lo, hi = self.datastore.longest_suffix(context, self.longest_suffix)
        if length < self.shortest_suffix:
            return Draft()
        rows = self.datastore.continuations(lo, hi, length, depth, self.retrieved)
        draft = trie_draft(rows, self.nodes(depth))
        draft.key = match_key(length)
        return draft

    def describe(self):
        return f"REST retrieval tree (datastore of {self.datastore.describe()})"


def trie_draft(rows: np.ndarray, budget: int) -> Draft:
    """The `budget` most frequent prefixes of `rows` (-1 ends a row) as a token tree.

    A prefix is at least as frequent as its extensions, so ranking prefixes by (count desc,
    length asc) keeps parents before their children. One lexicographic sort of the rows makes
    every prefix a run of adjacent rows, so each depth's counts are run lengths (O(n log n) for
    the sort, O(n) a depth); only the `budget` most frequent prefixes of each length can make the
    cut, so only those are materialized, in lexicographic order among equal counts.
    """
    if not rows.size:
        return Draft()
    rows = rows[np.lexsort(rows.T[::-1])]  # column 0 the primary key; -1 sorts before every token
    candidates: dict[tuple[int, ...], int] = {}
    alive = np.ones(len(rows), dtype=bool)
    differs = np.zeros(len(rows), dtype=bool)  # row i's prefix so far differs from row i-1's
    differs[0] = True
    for column in range(rows.shape[1]):
        alive &= rows[:, column] >= 0
        differs[1:] |= rows[1:, column] != rows[:-1, column]
        members = np.flatnonzero(alive)
        if not len(members):
            break
        first = members[differs[members]]  # a prefix's run starts at its first alive row
        sizes = np.diff(np.searchsorted(members, first), append=len(members))
        for top in np.argsort(-sizes, kind="stable")[:budget]:
            candidates[tuple(rows[first[top], : column + 1].tolist())] = int(sizes[top])
    kept: dict[tuple[int, ...], int] = {}  # prefix -> node index
    for prefix in sorted(candidates, key=lambda prefix: (-candidates[prefix], len(prefix)))[:budget]:
        if len(prefix) == 1 or prefix[:-1] in kept:
            kept[prefix] = len(kept)
    return Draft([prefix[-1] for prefix in kept], [kept.get(prefix[:-1], -1) for prefix in kept])


class SuffixAutomaton:
    """The suffix automaton of a growing token sequence (Blumer et al. 1985), extended online.

    It also tracks the match: the state of the longest suffix of the text that occurs ending
    before the last token, so the tokens after that earlier occurrence are a draft. `first_end`
    of a state is the end of its earliest occurrence (SAM-Decoding copies from there).
    """

    def __init__(self):
        self.next: list[dict[int, int]] = [{}]
        self.link, self.length, self.first_end = [-1], [0], [0]
        self.last = 0
        self.text: list[int] = []
        self.state = self.matched = 0

    def extend(self, token: int) -> None:
        # Match first, against the text before `token`, so the match is an earlier occurrence.
        self.state, self.matched = self._step(self.state, self.matched, token)
        self.text.append(token)
        current = self._new_state(self.length[self.last] + 1, len(self.text))
        state = self.last
        while state != -1 and token not in self.next[state]:
            self.next[state][token] = current
            state = self.link[state]
        if state == -1:
            self.link[current] = 0
        else:
            child = self.next[state][token]
            if self.length[state] + 1 == self.length[child]:
                self.link[current] = child
            else:  # split: a clone takes the shorter strings of `child`
                clone = self._new_state(self.length[state] + 1, self.first_end[child])
                self.next[clone] = dict(self.next[child])
                self.link[clone] = self.link[child]
                while state != -1 and self.next[state].get(token) == child:
                    self.next[state][token] = clone
                    state = self.link[state]
                self.link[child] = self.link[current] = clone
        self.last = current
        # A split may have moved the matched length to the clone: keep the match in its own state.
        while self.state and self.matched <= self.length[self.link[self.state]]:
            self.state = self.link[self.state]

    def _new_state(self, length: int, first_end: int) -> int:
        self.next.append({})
        self.link.append(-1)
        self.length.append(length)
        self.first_end.append(first_end)
        return len(self.length) - 1

    def _step(self, state: int, matched: int, token: int) -> tuple[int, int]:
        while state and token not in self.next[state]:
            state = self.link[state]
            matched = self.length[state]
        if token in self.next[state]:
            return self.next[state][token], matched + 1
        return 0, 0

    def continuation(self, count: int) -> list[int]:
        if not self.matched:
            return []
        end = self.first_end[self.state]
        return self.text[end : end + count]


AUXILIARY = "auxiliary"  # the key of SAM-Decoding's auxiliary drafts


class SuffixAutomatonDraft(Drafter):
    """SAM-Decoding (Hu et al. 2025): a dynamic suffix automaton over the prompt and the generated
    text, updated with each committed token, finds the exact longest suffix of the context that
    occurred before, and the tokens after its earliest occurrence are the draft. A static index of
    a datastore finds the longest suffix there too; the static draft is used only when its match
    is longer than the dynamic one by more than `bias` tokens (paper default l_bias = 4), because
    the current text predicts itself better than a corpus does.

    When the better match (the static one counted `bias` tokens shorter) is shorter than
    `threshold` tokens, the draft comes from the `auxiliary` drafter instead (the paper pairs SAM
    with Token Recycling or EAGLE-2), which observes every verification, whoever drafted. Its
    drafts have a key of their own (`AUXILIARY`), and `draft_length`, the loop's controller, says
    how deep they pay before the auxiliary drafts (`depth_for`): a step handed to it that would
    be cut to a plain step runs none of its forwards (an EAGLE head's, on the cost-aware policy).

    Defaults of the paper's code: l_bias = 4, l_threshold = 4, 10 draft tokens (capped here by the
    loop's depth budget). The static match is served by the datastore's suffix array, which
    answers the same query (the longest occurring suffix and its earliest position) as the paper's
    static automaton. Without an auxiliary drafter short matches are proposed as they are.
    """

    def __init__(self, datastore: Datastore | None = None, bias: int = 4, longest_static: int = 64,
                 auxiliary: Drafter | None = None, threshold: int = 4, draft_length=None,
                 auxiliary_depth: int | None = None):
        self.datastore, self.bias, self.longest_static = datastore, bias, longest_static
        self.auxiliary, self.threshold, self.draft_length = auxiliary, threshold, draft_length
        self.auxiliary_depth = auxiliary_depth  # the deepest auxiliary draft (a block drafter's block)
        self.automaton = SuffixAutomaton()

    @property
    def hidden_layers(self):
        return self.auxiliary.hidden_layers if self.auxiliary is not None else ()

    def start(self, prompt, prefill):
        self.automaton = SuffixAutomaton()
        if self.auxiliary is not None:
            self.auxiliary.start(prompt, prefill)

    def propose(self, context, depth, sampling, rng):
        for token in context[len(self.automaton.text) :]:
            self.automaton.extend(token)
        matched = self.automaton.matched
        draft, key = self.automaton.continuation(depth), ("context", match_key(matched))
        if self.datastore is not None:
            length, lo, hi = self.datastore.longest_suffix(context, self.longest_static)
            if length - self.bias > matched:
                start = int(self.datastore.suffixes[lo:hi].min()) + length  # earliest occurrence
                draft, key = self.datastore.tokens[start : start + depth], ("datastore", match_key(length))
                matched = length - self.bias
        if self.auxiliary is not None and matched < self.threshold:
            if self.auxiliary_depth is not None:
                depth = min(depth, self.auxiliary_depth)
            if self.draft_length is not None:
                depth = self.draft_length.depth_for(AUXILIARY, depth)
            auxiliary = self.auxiliary.propose(context, depth, sampling, rng) if depth else Draft()
            auxiliary.key = AUXILIARY
            return auxiliary
        return Draft.chain(draft, key=key)

    def observe(self, step):
        if self.auxiliary is not None:
            self.auxiliary.observe(step)

    def describe(self):
        static = f" + static index of {self.datastore.describe()}" if self.datastore is not None else ""
        auxiliary = f"; below {self.threshold} matched tokens: {self.auxiliary.describe()}" if self.auxiliary else ""
        return f"SAM-Decoding (dynamic suffix automaton{static}{auxiliary})"
