"""Gröbner engines behind one interface: dimension and degree of a polynomial ideal over Q.

One module per engine, each defining :class:`~.base.Engine` objects in a list ``ENGINES``; the
registry :data:`ENGINES` (name -> engine) collects them in the order of :data:`ENGINE_MODULES`
(fastest first, benchmarks/FIBRE.md).  :func:`groebner` runs one of them, or ``"auto"``, which
chooses from the registry by the number of CPUs and by what each engine is good at
(:mod:`.run`).  To add an engine, write one module like :mod:`.macaulay2` (an :class:`~.base.Engine`
with ``name``, ``label``, ``exact``, ``install``, ``available()``, ``jobs()`` and, when it needs
several runs, ``combine()``) and add its name to :data:`ENGINE_MODULES`.

Shared machinery: :mod:`.result` (:class:`GroebnerResult`, dimension and degree from the leading
monomials), :mod:`.jobs` (child processes through :mod:`symeq.procs`), :mod:`.text` (polynomials
to and from engine text), :mod:`.normal` (normal forms, multiplication matrices, Hermite counts).

>>> sorted(ENGINES)[:3]
['flint', 'giac', 'macaulay2']
>>> ENGINES["msolve"].exact, ENGINES["giac"].exact
(False, True)
"""

from __future__ import annotations

import importlib

from .base import Engine
from .result import GroebnerResult, monomial_dimension, standard_monomials

#: the engine modules, in the registry's order (modular msolve first, then the exact ones, fastest first)
ENGINE_MODULES = ("msolve", "singular", "giac", "macaulay2", "flint_engine", "sympy_engine")


def _registry() -> dict:
    out: dict = {}
    for mod in ENGINE_MODULES:
        for engine in importlib.import_module(f"{__name__}.{mod}").ENGINES:
            if engine.name in out or engine.name == "auto":
                raise ValueError(f"Gröbner engine name {engine.name!r} defined twice")
            out[engine.name] = engine
    return out


#: the registry: engine name -> :class:`~.base.Engine`
ENGINES: dict = _registry()

from .run import available_engines, best_exact_engine, groebner, install_command  # noqa: E402
from .normal import hermite_counts, multiplication_matrices, trace_form  # noqa: E402

__all__ = ["ENGINES", "ENGINE_MODULES", "Engine", "GroebnerResult", "available_engines", "best_exact_engine",
           "groebner", "install_command", "hermite_counts", "multiplication_matrices", "trace_form",
           "monomial_dimension", "standard_monomials"]
