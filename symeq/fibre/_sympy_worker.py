"""Child process for the in-Python Gröbner engines under a time budget (``python -m symeq.fibre._sympy_worker``).

Reads ``{"variables": [...], "polys": [[[exponents], p, q], ...] per polynomial, "method": ...}``
as JSON on stdin (method "buchberger"/"f5b" for sympy, "flint" for python-flint's
``buchberger_naive``) and writes ``{"lms": [...], "basis": [[[exponents], p, q], ...]}`` on stdout.
A plain subprocess (not multiprocessing) so callers need no ``if __name__ == "__main__"`` guard,
and the parent can kill it cleanly past the budget.

The worker does not rely on its parent to stop it (the parent may be killed with SIGKILL):

* ``SYMEQ_WORKER_PARENT`` (the parent's pid): a thread exits the worker as soon as the parent is
  gone (:func:`symeq.procs.watch_parent`); on Linux the parent also set ``PR_SET_PDEATHSIG``;
* ``SYMEQ_WORKER_DEADLINE`` (seconds): a real-time timer with the default action of SIGALRM
  ends the process at that time even inside a long C call.
"""

import json
import os
import signal
import sys


def _own_limits() -> None:
    from symeq.procs import watch_parent

    parent = os.environ.get("SYMEQ_WORKER_PARENT")
    if parent:
        watch_parent(int(parent))
    deadline = os.environ.get("SYMEQ_WORKER_DEADLINE")
    if deadline:
        # SIG_DFL terminates the process in the kernel: no Python code (or GIL) needed
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, max(0.001, float(deadline)))


def main() -> None:  # pragma: no cover - exercised through engines in a child process
    _own_limits()
    from flint import fmpq

    from symeq.fibre.groebner.flint_engine import _flint_groebner
    from symeq.fibre.groebner.sympy_engine import _sympy_groebner

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
