"""Child process for the in-Python Gröbner engines under a time budget (``python -m symeq.fibre._sympy_worker``).

Reads ``{"variables": [...], "polys": [[[exponents], p, q], ...] per polynomial, "method": ...}``
as JSON on stdin (method "buchberger"/"f5b" for sympy, "flint" for python-flint's
``buchberger_naive``) and writes ``{"lms": [...], "basis": [[[exponents], p, q], ...]}`` on stdout.
A plain subprocess (not multiprocessing) so callers need no ``if __name__ == "__main__"`` guard,
and the parent can kill it cleanly past the budget.
"""

import json
import sys


def main() -> None:  # pragma: no cover - exercised through engines in a child process
    from flint import fmpq

    from symeq.fibre.engines import _flint_groebner, _sympy_groebner

    req = json.load(sys.stdin)
    polys = [{tuple(e): fmpq(int(p), int(q)) for e, p, q in poly} for poly in req["polys"]]
    method = req.get("method", "buchberger")
    if method == "flint":
        lms, basis = _flint_groebner(req["variables"], polys)
    else:
        lms, basis = _sympy_groebner(req["variables"], polys, method)
    out = {"lms": [list(m) for m in lms],
           "basis": [[[list(e), str(p), str(q)] for e, (p, q) in g.items()] for g in basis]}
    json.dump(out, sys.stdout)


if __name__ == "__main__":  # pragma: no cover
    main()
