"""The checker's one optional accelerator, outside its trusted core: python-flint's ``nmod_mat`` rank.

Every verdict of :mod:`symeq_check` is reached by its own standard-library code, except one step where it
may hand a matrix to python-flint when that is importable: the rank modulo a prime of the Jacobian rows
recomputed for a ``jacobian-rank`` certificate (:mod:`symeq_check.identifiability.rank`).  The rows
themselves, the orbit tangent, the pivot columns and every other check stay in the standard library.  The
report then says "python-flint's nmod_mat" for that step; with ``SYMEQ_CHECK_STDLIB=1`` in the environment
(or without python-flint) the standard-library packed-integer elimination is used instead -- the same
rank, slower (minutes at 6 288 parameters; docs/identifiability.md has the figures).

This is the only module of the package that imports anything outside the standard library, and only
inside a function, guarded by ``ImportError`` (tests/test_architecture.py holds it to that).
"""
from __future__ import annotations

import os

#: ``SYMEQ_CHECK_STDLIB=1`` in the environment: eliminate with the standard library even where python-flint
#: is importable
STDLIB_ENV = "SYMEQ_CHECK_STDLIB"
#: FLINT threads for the elimination (the prover's default)
THREADS = 2


def nmod_rank():
    """A function ``rank(rows, q)`` (rows: lists of residues in [0, q), q prime < 2^64) by python-flint's
    ``nmod_mat``, or None when python-flint is not importable or :data:`STDLIB_ENV` is set."""
    if os.environ.get(STDLIB_ENV, "") not in ("", "0"):
        return None
    try:
        from flint import nmod_mat
    except ImportError:
        return None

    def rank(rows, q: int) -> int:
        if not rows:
            return 0
        import flint

        old = flint.ctx.threads
        try:
            flint.ctx.threads = THREADS  # as the prover eliminates (symeq/fibre/jacobian.py, threads=2)
            return nmod_mat(rows, q).rank()
        finally:
            flint.ctx.threads = old

    return rank


def nmod_reduced_rank():
    """A function ``reduced_rank(C, A, K, q)`` by python-flint, or None (as :func:`nmod_rank`).

    C: N rows of the last layer's columns (its input at each point, and 1 for its bias), A: N rows of the
    other columns, the K outputs of a point side by side (row n = A_1[n], ..., A_K[n]).  Returns
    ``(rank C, rank of [Q A_1; ...; Q A_K])``, Q the left null space basis e_n - sum_i g_ni e_{S_i} of C
    read off the echelon form of C^T (S its pivot columns): Q A = A[rest] - g A[S], one product, then the
    rows n of the result cut into K rows of len(A[0]) / K (docs/identifiability.md, the structured rank)."""
    if nmod_rank() is None:
        return None
    from flint import nmod_mat

    def reduced_rank(C, A, K: int, q: int) -> tuple[int, int]:
        import flint

        old = flint.ctx.threads
        try:
            flint.ctx.threads = THREADS
            N, m = len(C), len(C[0])
            E, rc = nmod_mat([[C[n][i] for n in range(N)] for i in range(m)], q).rref()
            S, j = [], 0
            for i in range(rc):
                while int(E[i, j]) == 0:
                    j += 1
                S.append(j)
                j += 1
            inS = set(S)
            rest = [n for n in range(N) if n not in inS]
            if not rest:
                return rc, 0
            g = nmod_mat([[int(E[i, n]) for i in range(rc)] for n in rest], q)
            R = nmod_mat([A[n] for n in rest], q) - g * nmod_mat([A[n] for n in S], q)
            width = len(A[0]) // K
            return rc, nmod_mat(len(rest) * K, width, R.entries(), q).rank()
        finally:
            flint.ctx.threads = old

    return reduced_rank

