"""Token Recycling (Luo et al. 2025): draft trees from the candidates decoding throws away."""

from __future__ import annotations

from specatlas.impls.engine.drafting import Draft, Drafter


def _paths(spec: str) -> tuple[tuple[int, ...], ...]:
    """'0 1 00 10' -> ((0,), (1,), (0, 0), (1, 0)): each node is the path of candidate ranks from the root."""
    return tuple(tuple(int(rank) for rank in node) for node in spec.split())


# The paper's static tree (80 nodes, depth 6; widths 8, 21, 25, 15, 8, 3 by depth). Node (0, 2) is
# the 3rd candidate after the 1st candidate of the last token: a template over candidate ranks,
# filled from the adjacency table at every step.
PAPER_TREE = _paths("""
    0 1 2 3 4 5 6 7
    00 01 02 03 04 05 06 07 10 11 12 13 20 21 22 30 31 40 50 60 70
    000 001 002 003 004 005 006 007 010 011 012 020 021 030 040 050 060 070 100 101 110 200 300 400 500
    0000 0001 0002 0003 0004 0010 0011 0020 0030 0040 0100 0200 1000 2000 3000
    00000 00001 00002 00010 00020 00100 01000 10000
    000000 000001 000100
""")


class TokenRecycling(Drafter):
    """The algorithm (the paper's Figure 2):

    1. An adjacency table maps every token to the target's top-k next tokens the last time that
       token was scored (k = 8 in the paper; under 2 MB for a 32k vocabulary).
    2. Draft: fill the static tree template breadth-first from the table, starting at the last
       committed token (a node is dropped when its parent's token has no row yet).
    3. Verify the whole tree in one forward with tree attention; keep the longest accepted path.
    4. Recycle: every row of that forward (the pending token and every draft node, accepted or not)
       writes its top-k tokens into the table row of its token.

    The table is never reset: the paper inherits it from one query to the next ("hot start").
    `tree` is the template (the paper's 80 nodes by default); the cost-aware policy cuts it to
    the depth it can afford, and the compositions use a smaller template on a CPU.
    """

    def __init__(self, tree: tuple[tuple[int, ...], ...] = PAPER_TREE, k: int = 8):
        self.tree = sorted(tree, key=len)  # parents before children
        self.k = k
        self.table: dict[int, list[int]] = {}

    def propose(self, context, depth, sampling, rng):
        draft, node, token = Draft(), {(): -1}, {(): context[-1]}
        for path in self.tree:
            parent = path[:-1]
            if len(path) > depth or parent not in node:
                continue
            candidates = self.table.get(token[parent], ())
            if path[-1] < len(candidates):
                node[path], token[path] = len(draft.tokens), candidates[path[-1]]
                draft.tokens.append(token[path])
                draft.parents.append(node[parent])
        return draft

    def observe(self, step):
        # Whoever drafted (this drafter or another that shares the forward, as in SAM-Decoding),
        # every row's candidates are recycled.
        candidates = step.logits.topk(self.k).indices.tolist()
        for token, row in zip([step.pending] + step.draft.tokens, candidates):
            self.table[token] = row

    def describe(self):
        return f"token recycling (top-{self.k} adjacency table, {len(self.tree)}-node static tree)"


def template_nodes(tree: tuple[tuple[int, ...], ...]):
    """Number of template nodes of depth <= k: the verification width of a depth-k draft."""
    return lambda depth: sum(len(path) <= depth for path in tree)
