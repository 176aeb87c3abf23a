"""Classes of an equivalence relation given by generating pairs (union-find, path halving).

>>> find = union_find(range(5), [(0, 1), (3, 4), (1, 0)])
>>> [find(a) == find(0) for a in range(5)]
[True, True, False, False, False]
"""

from __future__ import annotations

__all__ = ["union_find"]


def union_find(items, pairs):
    """``find(x)``: one representative per class after joining every pair (a, b) of ``items``."""
    parent = {x: x for x in items}

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    return find
