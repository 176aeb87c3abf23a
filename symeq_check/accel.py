"""The checker's one optional accelerator, outside its trusted core: a hook for a faster rank mod p.

Every verdict of :mod:`symeq_check` is reached by its own standard-library code, except one step that may be
handed to an accelerator installed from outside: the rank modulo a prime of the Jacobian rows recomputed for
a ``jacobian-rank`` certificate (:mod:`symeq_check.identifiability.rank`).  The rows themselves, the orbit
tangent, the pivot columns and every other check stay in the standard library.  The checker never imports
one itself: ``symeq check`` (symeq/cli/verify.py) installs python-flint's ``nmod_mat`` rank with
:func:`install`; ``python -m symeq_check`` and the zipapp run with none.  The report names the elimination
used ("python-flint's nmod_mat" or "standard library"); with ``SYMEQ_CHECK_STDLIB=1`` in the environment an
installed accelerator is ignored and the standard-library packed-integer elimination is used -- the same
rank, slower (minutes at 6 288 parameters; docs/identifiability.md has the figures).

This module imports only the standard library, like the rest of the package (tests/test_architecture.py).
"""
from __future__ import annotations

import os

#: ``SYMEQ_CHECK_STDLIB=1`` in the environment: eliminate with the standard library even where an
#: accelerator is installed
STDLIB_ENV = "SYMEQ_CHECK_STDLIB"

#: the installed accelerator: ``rank(rows, q)``, ``reduced_rank(C, A, K, q)`` (or None) and its name
_HOOK: dict = {"rank": None, "reduced_rank": None, "name": None}


def install(rank, reduced_rank=None, name: str = "an installed accelerator") -> None:
    """Install ``rank(rows, q) -> int`` (rows: lists of residues in [0, q), q prime < 2^64) as the
    elimination of the rank step, and optionally ``reduced_rank(C, A, K, q) -> (rank C, rank of the reduced
    rows)`` for the structured elimination (:func:`symeq_check.identifiability.rank._structured_rank`
    describes C, A and K); ``name`` is what the report says it used.  Replaces any earlier one."""
    if not callable(rank) or (reduced_rank is not None and not callable(reduced_rank)):
        raise TypeError("install(rank, reduced_rank=None, name=...) takes functions")
    _HOOK.update(rank=rank, reduced_rank=reduced_rank, name=str(name))


def uninstall() -> None:
    """Remove the installed accelerator: the standard library eliminates again."""
    _HOOK.update(rank=None, reduced_rank=None, name=None)


def _active() -> bool:
    return _HOOK["rank"] is not None and os.environ.get(STDLIB_ENV, "") in ("", "0")


def nmod_rank():
    """The installed ``rank(rows, q)``, or None when none is installed or :data:`STDLIB_ENV` is set."""
    return _HOOK["rank"] if _active() else None


def nmod_reduced_rank():
    """The installed ``reduced_rank(C, A, K, q)``, or None (as :func:`nmod_rank`, or none was given)."""
    return _HOOK["reduced_rank"] if _active() else None


def accelerator_name() -> str | None:
    """What the report calls the installed accelerator, or None when the standard library eliminates."""
    return _HOOK["name"] if _active() else None
