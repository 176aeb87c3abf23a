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
        return nmod_mat(rows, q).rank() if rows else 0

    return rank
