"""The sympy engine: ``sympy.groebner`` over QQ in grevlex, in a python worker process.

Always installed; exact; slow beyond about 10-13 unknowns (benchmarks/FIBRE.md).  The polynomials
are built from exponent dicts, never from strings.  The worker is :mod:`symeq.fibre._sympy_worker`
(it also runs the flint engine).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from flint import fmpq

from .base import Engine
from .jobs import _Job
from .result import _result_from_lms


def _sympy_groebner(variables: list[str], polys: list[dict], method: str = "buchberger"):
    """Run sympy.groebner; returns (leading exponent tuples, basis as {exp: (p, q)} dicts)."""
    import sympy
    from sympy.polys.domains import QQ
    from sympy.polys.orderings import grevlex

    gens = tuple(sympy.Symbol(v) for v in variables)
    if not variables:
        return ([(())] if polys else []), [{(): (1, 1)}] if polys else []
    sp_polys = [
        sympy.Poly.from_dict({k: QQ(int(c.p), int(c.q)) for k, c in p.items()}, *gens, domain=QQ)
        for p in polys
    ]
    G = sympy.groebner(sp_polys, *gens, order="grevlex", domain=QQ, method=method)
    lms, basis = [], []
    for g in G.polys:
        terms = g.terms(order=grevlex)
        lms.append(tuple(int(e) for e in terms[0][0]))
        basis.append({tuple(int(e) for e in k): (int(c.numerator), int(c.denominator)) for k, c in terms})
    return lms, basis


def _python_job(method: str, variables, polys, tmp: Path, tag: str, want_basis=True) -> _Job:
    req = {"variables": variables, "method": method,
           "polys": [[[list(k), str(int(c.p)), str(int(c.q))] for k, c in d.items()] for d in polys]}
    (tmp / f"{tag}.json").write_text(json.dumps(req))

    def parse(job):
        payload = json.loads(job.stdout)
        lms = [tuple(m) for m in payload["lms"]]
        basis = [{tuple(e): fmpq(int(p), int(q)) for e, p, q in g} for g in payload["basis"]]
        return _result_from_lms(method if method == "flint" else "sympy", variables, lms, "QQ", 0.0, basis)

    return _Job(method if method == "flint" else "sympy", [sys.executable, "-m", "symeq.fibre._sympy_worker"],
                parse, tmp, stdin=tmp / f"{tag}.json", tag=tag)


class SympyEngine(Engine):
    name = "sympy"
    label = "sympy's groebner"
    exact = True
    install = "pip install sympy"
    auto_rank = (9, 9)  # the exact engine of last resort

    def available(self) -> bool:
        return True

    def jobs(self, variables, polys, tmp, *, want_basis=True, threads=1, tag=""):
        return [_python_job("buchberger", variables, polys, tmp, tag + "sympy")]


ENGINES = [SympyEngine()]
