"""The Macaulay2 engine: ``gb`` over QQ in GRevLex, its leading monomials read with ``leadTerm``.

Exact.  The executable ``M2`` on PATH (Debian package ``macaulay2``: ``apt-get install macaulay2``),
run as ``M2 --script FILE``.  The script prints the exponent vector of each leading monomial of the
Gröbner basis (``exponents leadTerm``) and then the basis itself, between markers; they are read back
with :func:`~symeq.fibre.groebner.text._parse_poly` (no eval).  This module is the whole engine: the
registry (:data:`symeq.fibre.groebner.ENGINE_MODULES`) names it, and ``symeq fibre --engine macaulay2``
then works.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from ...errors import EngineFailed, EngineMissing
from .base import Engine
from .jobs import _Job
from .result import _result_from_lms
from .text import _integer_poly, _parse_poly, _poly_text

MACAULAY2_INSTALL = "apt-get install macaulay2"
_EXPONENTS = re.compile(r"\{\s*\d+(\s*,\s*\d+)*\s*\}")


def macaulay2_path() -> str | None:
    """The ``M2`` executable on PATH (Debian package ``macaulay2``)."""
    return shutil.which("M2")


def _macaulay2_script(variables, polys, want_basis: bool) -> str:
    n = len(variables)
    vs = ",".join(f"v{i}" for i in range(n))
    gens = ",\n  ".join(_poly_text(_integer_poly(p)) for p in polys)
    return (f"R = QQ[{vs}, MonomialOrder => GRevLex];\n"
            f"I = ideal(\n  {gens});\n"
            "G = gens gb I;\n"
            "print \"@@LEADS\";\n"
            "scan(flatten entries leadTerm G, m -> print toString first exponents m);\n"
            + ("print \"@@BASIS\";\nscan(flatten entries G, g -> print toString g);\n" if want_basis else "")
            + "print \"@@END\";\nexit 0\n")


def _parse_macaulay2(text: str, nvars: int, want_basis: bool):
    """(leading exponent tuples, basis or None) from the script's output."""
    if "@@LEADS" not in text or "@@END" not in text:
        raise EngineFailed("Macaulay2", f"no answer: {text[-300:]}")
    body = text.split("@@LEADS", 1)[1].split("@@END", 1)[0]
    leads, _, basis_text = body.partition("@@BASIS")
    lms = []
    for line in leads.splitlines():
        line = line.strip()
        if not line:
            continue
        if not _EXPONENTS.fullmatch(line):
            raise EngineFailed("Macaulay2", f"unexpected exponent vector {line[:200]!r}")
        e = tuple(int(x) for x in line.strip("{}").split(","))
        if len(e) != nvars:
            raise EngineFailed("Macaulay2", f"exponent vector {line[:200]!r} has not {nvars} entries")
        lms.append(e)
    basis = None
    if want_basis:
        basis = [_parse_poly(line, nvars) for line in basis_text.splitlines() if line.strip()]
    return lms, basis


def _macaulay2_job(variables, polys, tmp: Path, tag: str, want_basis: bool) -> _Job:
    exe = macaulay2_path()
    if exe is None:
        raise EngineMissing(f"the macaulay2 engine is not installed; install it with `{MACAULAY2_INSTALL}`")
    n = len(variables)
    path = tmp / f"{tag}.m2"
    path.write_text(_macaulay2_script(variables, polys, want_basis))

    def parse(job):
        lms, basis = _parse_macaulay2(job.stdout + "\n" + job.stderr, n, want_basis)
        return _result_from_lms("macaulay2", variables, lms, "QQ", 0.0, basis,
                                notes=["Macaulay2 gb over QQ in GRevLex (exact)"])

    return _Job("macaulay2", [exe, "--script", str(path)], parse, tmp, tag=tag)


class Macaulay2Engine(Engine):
    name = "macaulay2"
    label = "Macaulay2 gb"
    exact = True
    install = MACAULAY2_INSTALL
    auto_rank = (2, 2)  # after Singular and giac, before sympy

    def available(self) -> bool:
        return macaulay2_path() is not None

    def jobs(self, variables, polys, tmp, *, want_basis=True, threads=1, tag=""):
        return [_macaulay2_job(variables, polys, tmp, tag + "macaulay2", want_basis)]


ENGINES = [Macaulay2Engine()]
