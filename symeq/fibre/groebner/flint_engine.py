"""The flint engine: python-flint's ``fmpz_mpoly_vec.buchberger_naive`` over Q, then ``autoreduction``.

Exact over Q with primitive integer polynomials, in a python worker process.  Naive Buchberger:
only small ideals.
"""

from __future__ import annotations

from ...errors import EngineMissing
from .base import Engine
from .sympy_engine import _python_job
from .text import _integer_poly

FLINT_INSTALL = "pip install 'python-flint>=0.7'"


def _flint_groebner(variables: list[str], polys: list[dict]):
    """python-flint's naive Buchberger over Q (primitive integer polynomials), then autoreduction."""
    from flint import fmpz_mpoly_ctx, fmpz_mpoly_vec

    ctx = fmpz_mpoly_ctx.get(tuple(variables), "degrevlex")
    vec = fmpz_mpoly_vec([ctx.from_dict(_integer_poly(p)) for p in polys], ctx)
    G = vec.buchberger_naive().autoreduction()
    lms, basis = [], []
    for i in range(len(G)):
        g = G[i]
        if g == 0:
            continue
        monoms = [tuple(int(e) for e in m) for m in g.monoms()]
        lms.append(monoms[0])
        basis.append({m: (int(c), 1) for m, c in zip(monoms, g.coeffs())})
    return lms, basis


def _have_flint_groebner() -> bool:
    try:
        from flint import fmpz_mpoly_vec
    except ImportError:  # pragma: no cover - python-flint < 0.7
        return False
    return hasattr(fmpz_mpoly_vec, "buchberger_naive")


class FlintEngine(Engine):
    name = "flint"
    label = "python-flint's buchberger_naive"
    exact = True
    install = FLINT_INSTALL

    def available(self) -> bool:
        return _have_flint_groebner()

    def missing_message(self) -> str:
        return f"python-flint has no Gröbner routine here; install it with `{FLINT_INSTALL}`"

    def jobs(self, variables, polys, tmp, *, want_basis=True, threads=1, tag=""):
        if not self.available():
            raise EngineMissing(self.missing_message())
        return [_python_job("flint", variables, polys, tmp, tag + "flint")]


ENGINES = [FlintEngine()]
