"""The Singular engines: ``slimgb`` ("singular") and ``std`` ("singular-std") over QQ in ``dp``.

Exact.  The executable shipped by the PyPI package passagemath-singular
(``pip install --no-deps passagemath-singular``, at ``site-packages/sage_wheels/bin/Singular``) or
the Debian package ``singular`` on PATH.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import EngineFailed, EngineMissing
from .base import Engine
from .jobs import _Job, _wheel_binary
from .result import _result_from_lms
from .text import _integer_poly, _parse_poly, _poly_text

SINGULAR_INSTALL = "pip install --no-deps passagemath-singular"


def singular_path() -> str | None:
    """The Singular executable: inside passagemath-singular (sage_wheels/bin/Singular) or on PATH
    (the Debian package ``singular``)."""
    return _wheel_binary("Singular")


def _singular_job(variables, polys, tmp: Path, tag: str, algorithm: str, want_basis: bool) -> _Job:
    exe = singular_path()
    if exe is None:
        raise EngineMissing(f"the Singular engine is not installed; install it with `{SINGULAR_INSTALL}`")
    n = len(variables)
    vs = ",".join(f"v{i}" for i in range(n))
    gens = ",\n".join(_poly_text(_integer_poly(p)) for p in polys)
    script = (f"ring r=0,({vs}),dp;\n" + ("option(redSB);\n" if want_basis else "")
              + f"ideal i=\n{gens};\nideal g={algorithm}(i);\nint k;\nprint(\"@@LEADS\");\n"
              "for(k=1;k<=ncols(g);k++){ if(g[k]!=0){ print(string(leadexp(g[k]))); } }\n"
              + ("print(\"@@BASIS\");\nfor(k=1;k<=ncols(g);k++){ if(g[k]!=0){ print(string(g[k])); } }\n"
                 if want_basis else "")
              + "print(\"@@END\");\nquit;\n")
    path = tmp / f"{tag}.sing"
    path.write_text(script)
    name = "singular" if algorithm == "slimgb" else "singular-std"

    def parse(job):
        text = job.stdout
        if "@@END" not in text:
            raise EngineFailed("Singular", f"no answer: {text[-300:]} {job.stderr[-300:]}")
        body = text.split("@@LEADS", 1)[1].split("@@END", 1)[0]
        leads, _, basis_text = body.partition("@@BASIS")
        lms = [tuple(int(x) for x in line.split(",")) for line in leads.split() if line.strip()]
        basis = None
        if want_basis:
            basis = [_parse_poly(line, n) for line in basis_text.split("\n") if line.strip()]
        return _result_from_lms(name, variables, lms, "QQ", 0.0, basis,
                                notes=[f"Singular {algorithm} over QQ (exact)"])

    return _Job(name, [exe, "-q", "--no-rc", "--no-warn", str(path)], parse, tmp, tag=tag)


class SingularEngine(Engine):
    exact = True
    install = SINGULAR_INSTALL

    def __init__(self, name: str, algorithm: str, label: str, auto_rank=None, racer=None, companions=()):
        self.name, self.algorithm, self.label = name, algorithm, label
        self.auto_rank, self.racer, self.companions = auto_rank, racer, tuple(companions)

    def available(self) -> bool:
        return singular_path() is not None

    def jobs(self, variables, polys, tmp, *, want_basis=True, threads=1, tag=""):
        return [_singular_job(variables, polys, tmp, tag + self.name, self.algorithm, want_basis)]


ENGINES = [
    # slimgb settles everything hard first; std wins on some tiny ideals, so it races slimgb during
    # auto's head start; giac settles some ideals (the (3,3,3) tanh_series(3) fibre with biases) that
    # slimgb does not within a minute, so it runs beside it.  On 2 CPUs giac alone is faster.
    SingularEngine("singular", "slimgb", "Singular slimgb", auto_rank=(0, 1), racer="singular-std",
                   companions=("giac",)),
    SingularEngine("singular-std", "std", "Singular std"),
]
