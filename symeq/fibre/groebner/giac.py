"""The giac engine: ``gbasis(..., revlex)`` over QQ (exact; ``pip install --no-deps passagemath-giac``)."""

from __future__ import annotations

from pathlib import Path

from ...errors import EngineFailed, EngineMissing
from .base import Engine
from .jobs import _Job, _wheel_binary
from .normal import _grevlex_key
from .result import _result_from_lms
from .text import _integer_poly, _parse_poly, _poly_text

GIAC_INSTALL = "pip install --no-deps passagemath-giac"


def giac_path() -> str | None:
    """The giac executable: inside passagemath-giac (sage_wheels/bin/giac) or on PATH (Debian ``giac``)."""
    return _wheel_binary("giac")


def _giac_job(variables, polys, tmp: Path, tag: str) -> _Job:
    exe = giac_path()
    if exe is None:
        raise EngineMissing(f"the giac engine is not installed; install it with `{GIAC_INSTALL}`")
    n = len(variables)
    vs = ",".join(f"v{i}" for i in range(n))
    gens = ",".join(_poly_text(_integer_poly(p)) for p in polys)
    path = tmp / f"{tag}.giac"
    path.write_text(f"G:=gbasis([{gens}],[{vs}],revlex):;\nprint(\"@@BEGIN\");\n"
                    "for k from 0 to size(G)-1 do print(\"@@P \"+string(G[k])); od;\nprint(\"@@END\");\n")

    def parse(job):
        text = job.stdout + "\n" + job.stderr  # giac's print writes to stderr
        if "@@END" not in text:
            raise EngineFailed("giac", f"no answer: {text[-300:]} {job.stderr[-300:]}")
        basis = [_parse_poly(line[4:], n) for line in text.splitlines() if line.startswith("@@P ")]
        basis = [b for b in basis if b]
        lms = [max(b, key=_grevlex_key) for b in basis]
        return _result_from_lms("giac", variables, lms, "QQ", 0.0, basis, notes=["giac gbasis over QQ (exact)"])

    return _Job("giac", [exe, str(path)], parse, tmp, tag=tag)


class GiacEngine(Engine):
    name = "giac"
    label = "giac"
    exact = True
    install = GIAC_INSTALL
    auto_rank = (1, 0)  # the best exact engine alone on 2 CPUs (benchmarks/FIBRE.md)

    def available(self) -> bool:
        return giac_path() is not None

    def jobs(self, variables, polys, tmp, *, want_basis=True, threads=1, tag=""):
        return [_giac_job(variables, polys, tmp, tag + "giac")]


ENGINES = [GiacEngine()]
