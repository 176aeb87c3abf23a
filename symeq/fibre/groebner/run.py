"""Running the engines of the registry: one engine under a budget, or ``auto``.

``auto`` picks its engines from the registry (:data:`symeq.fibre.groebner.ENGINES`) by what each is
good at (:attr:`~symeq.fibre.groebner.base.Engine.auto_rank`, ``racer``, ``companions``) and by the
number of CPUs (:func:`_cpus`): the best exact engine and msolve (modular) side by side; the exact
answer (``field="QQ"``) when it comes within the budget, otherwise msolve's, labelled modular.
On more than 2 CPUs Singular slimgb races Singular std during the head start and giac runs beside
it; on at most 2 CPUs no more than two engine processes run at once: the best exact engine there
(giac, else Singular slimgb) and one msolve prime at a time.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from pathlib import Path

from flint import fmpq

from ...errors import BudgetExceeded, EngineMissing, InputError
from . import ENGINES
from .jobs import _Job, _wait
from .result import GroebnerResult, _result_from_lms
from .sympy_engine import _sympy_groebner
from .text import _system

#: seconds the exact engine runs alone in ``engine="auto"`` before msolve starts beside it
HEAD_START = 0.15
#: ``engine="auto"`` with a budget stops waiting for the exact engine this long before the deadline
AUTO_MARGIN = 0.05
#: on at most this many CPUs ``auto`` runs at most two engine processes at once
FEW_CPUS = 2


def _cpus() -> int:
    """The number of CPUs ``auto`` plans for: ``os.cpu_count()``, less where this process may use fewer
    (its CPU affinity, a cgroup v2 quota in a container)."""
    n = os.cpu_count() or 1
    try:
        n = min(n, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        pass
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def available_engines() -> list[str]:
    """The engines installed here, in the registry's order: msolve (modular, fastest), then the exact ones."""
    return [name for name, e in ENGINES.items() if e.available()]


def best_exact_engine() -> str:
    """The exact engine ``auto`` runs here: Singular slimgb, else giac, else sympy (on at most 2 CPUs
    giac first); an installed engine of the registry with the smallest ``auto_rank``."""
    few = _cpus() <= FEW_CPUS
    ranked = [(e.auto_rank[1 if few else 0], i, name) for i, (name, e) in enumerate(ENGINES.items())
              if e.exact and e.auto_rank is not None and e.available()]
    return min(ranked)[2] if ranked else "sympy"


def _modular_engine() -> str | None:
    return next((name for name, e in ENGINES.items() if not e.exact and e.available()), None)


def install_command(engine: str) -> str:
    """The command that installs ``engine`` (for messages and docs)."""
    e = ENGINES.get(engine)
    return e.install if e is not None else ""


def _engine(name: str):
    if name not in ENGINES:
        raise InputError(f"unknown Gröbner engine {name!r}; known: auto, {', '.join(ENGINES)}")
    return ENGINES[name]


def _jobs_for(engine: str, variables, polys, tmp: Path, *, want_basis: bool, threads: int = 1,
              tag: str = "") -> list[_Job]:
    return _engine(engine).jobs(variables, polys, tmp, want_basis=want_basis, threads=threads, tag=tag)


def _run_sympy(variables, polys, timeout, method="buchberger"):
    """sympy in this process (no budget) or as a one-job run under the budget."""
    if timeout is None:
        t0 = time.perf_counter()
        lms, basis = _sympy_groebner(variables, polys, method)
        basis = [{k: fmpq(p, q) for k, (p, q) in d.items()} for d in basis]
        return _result_from_lms("sympy", variables, lms, "QQ", time.perf_counter() - t0, basis)
    return _run_single("sympy", variables, polys, timeout)


def _finish(engine: str, jobs: list[_Job], variables, polys, deadline, tmp, threads) -> GroebnerResult:
    e = _engine(engine)
    results = [j.result() for j in jobs]

    def extra():
        job = e.extra_job(variables, polys, tmp, threads)
        job.start(deadline)
        try:
            _wait([job], deadline)
            if not job.poll():
                raise BudgetExceeded(f"{e.label} ran past the time budget (its extra run)")
            return job.result()
        finally:
            job.kill()

    return e.combine(results, extra)


def _run_single(engine: str, variables, polys, timeout, *, want_basis=True, threads=1) -> GroebnerResult:
    deadline = None if timeout is None else time.perf_counter() + timeout
    with tempfile.TemporaryDirectory(prefix="symeq-gb-") as td:
        tmp = Path(td)
        jobs = _jobs_for(engine, variables, polys, tmp, want_basis=want_basis, threads=threads)
        try:
            for j in jobs:
                j.start(deadline)
            _wait(jobs, deadline)
            if not all(j.poll() for j in jobs):
                raise BudgetExceeded(f"{ENGINES[engine].label} ran past the time budget of {timeout:g} s")
            return _finish(engine, jobs, variables, polys, deadline, tmp, threads)
        finally:
            for j in jobs:
                j.kill()


def _exact_grace(exact_grace, deadline, t_mod: float):
    """``(grace, until)``: how long :func:`_run_auto`'s exact engine may go on once msolve answered (after
    ``t_mod`` seconds), and the wall-clock time that ends it: ``exact_grace`` when given; with a budget, all
    of it; without one, max(2 s, 3 x msolve's time)."""
    if exact_grace is not None:
        grace = exact_grace
    elif deadline is not None:  # a budget: the exact engine may use all of it
        grace = max(0.0, deadline - time.perf_counter() - AUTO_MARGIN)
    else:                       # no budget: a grace period proportional to msolve's time
        grace = max(2.0, 3.0 * t_mod)
    until = time.perf_counter() + grace
    if deadline is not None:
        until = min(until, deadline - AUTO_MARGIN)
    return grace, until


def _modular_answer(r, modular: str, exact_engine: str, seconds: list, t0: float):
    """:func:`_run_auto`'s modular result ``r``, labelled as such (the exact engines did not settle)."""
    also = f" (and {', '.join(seconds)})" if seconds else ""
    r.notes.append(f"symeq auto: the exact engine {exact_engine}{also} did not settle within "
                   f"{time.perf_counter() - t0:.3g} s; the answer is modular")
    r.engine = f"auto/{modular}"
    r.seconds = time.perf_counter() - t0
    return r


def _run_auto(variables, polys, timeout, *, want_basis=True, threads=1, exact_grace=None) -> GroebnerResult:
    """Exact and modular side by side; the exact answer when it comes in time, else the labelled modular one.

    The exact engine (:func:`best_exact_engine`) starts first; on more than 2 CPUs its ``racer``
    (Singular std beside Singular slimgb) races it for the first ``HEAD_START`` seconds.  Then
    msolve (two primes) starts beside it, and on more than 2 CPUs its installed ``companions`` (giac
    beside Singular); on at most 2 CPUs msolve's primes run one after the other, so that no more
    than two engine processes share the cores.  The first exact answer wins.  Once msolve has
    answered, the exact engine may go on: with a ``timeout``, until the deadline (so the answer is
    exact whenever the exact engine settles within the budget); without one, for max(2 s, 3 x
    msolve's time); ``exact_grace`` overrides both.  Then it is killed and msolve's answer, labelled
    "modular (2 primes agree)", is returned.  Past ``timeout`` with no answer at all: BudgetExceeded.
    """
    t0 = time.perf_counter()
    deadline = None if timeout is None else t0 + timeout
    few = _cpus() <= FEW_CPUS
    exact_engine = best_exact_engine()
    exact = ENGINES[exact_engine]
    modular = _modular_engine()
    with tempfile.TemporaryDirectory(prefix="symeq-gb-") as td:
        tmp = Path(td)
        ex = _jobs_for(exact_engine, variables, polys, tmp, want_basis=want_basis, tag="x")
        racer = (_jobs_for(exact.racer, variables, polys, tmp, want_basis=want_basis, tag="x")
                 if exact.racer and not few and ENGINES[exact.racer].available() else [])
        mo: list = []
        seconds = [] if few else [c for c in exact.companions if ENGINES[c].available()]
        ex2: list = []
        everything = ex + racer

        def exact_done():
            return next((j for j in ex + racer + ex2 if j.poll() and j.proc.returncode == 0), None) or \
                next((j for j in ex if j.poll()), None)

        def advance():
            # on few CPUs the modular jobs run one after the other: start the next when one is done
            if few and mo and all(j.poll() for j in mo if j.proc is not None):
                nxt = next((j for j in mo if j.proc is None), None)
                if nxt is not None:
                    nxt.start(deadline)
            return False

        def modular_done():
            return bool(mo) and all(j.poll() for j in mo)

        def answer(job, after=""):
            r = job.result()
            r.notes.append(f"symeq auto: exact engine {job.engine} answered{after}")
            r.engine = f"auto/{r.engine}"
            r.seconds = time.perf_counter() - t0
            return r

        try:
            # the exact engine gets a head start: small ideals settle in milliseconds, before msolve
            # would even compete for the cores
            for j in ex + racer:
                j.start(deadline)
            head = HEAD_START if deadline is None else min(HEAD_START, max(0.0, deadline - time.perf_counter()))
            _wait(ex + racer, time.perf_counter() + head, until=lambda js: exact_done() is not None)
            if exact_done() is None:
                for j in racer:
                    j.kill()
                for c in seconds:
                    ex2 += _jobs_for(c, variables, polys, tmp, want_basis=want_basis, tag="x2")
                everything += ex2
                if modular:
                    mo += _jobs_for(modular, variables, polys, tmp, want_basis=False, threads=threads, tag="m")
                    everything += mo
                for j in ex2 + (mo[:1] if few else mo):
                    j.start(deadline)
                _wait(ex + ex2 + mo, deadline,
                      until=lambda js: advance() or ex[0].poll() or exact_done() is not None or modular_done())
            done = exact_done()
            if done is not None:
                for j in everything:
                    if j is not done:
                        j.kill()
                return answer(done, " first")
            if not modular_done():
                raise BudgetExceeded(f"no engine settled within the time budget of {timeout:g} s "
                                     f"({exact_engine}{' and ' + modular if mo else ''} tried)")
            grace, d2 = _exact_grace(exact_grace, deadline, time.perf_counter() - t0)
            _wait(ex + ex2, d2, until=lambda js: exact_done() is not None)
            done = exact_done()
            if done is not None:
                return answer(done, f" within {grace:.3g} s after {modular}")
            for j in ex + ex2:
                j.kill()
            r = _finish(modular, mo, variables, polys, deadline, tmp, threads)
            return _modular_answer(r, modular, exact_engine, seconds, t0)
        finally:
            for j in everything:
                j.kill()


def groebner(ideal, engine: str = "auto", timeout: float | None = None, *, threads: int = 1,
             want_basis: bool = True, exact_grace: float | None = None) -> GroebnerResult:
    """Dimension and degree of an ideal over Q from a grevlex Gröbner basis.

    Parameters
    ----------
    ideal : FibreIdeal or (variables, polynomials)
        Polynomials as ``fmpq_mpoly`` or ``{exponent tuple: rational}`` dicts.
    engine : "auto" or a name of the registry :data:`symeq.fibre.groebner.ENGINES` ("sympy", "flint",
        "singular", "singular-std", "giac", "msolve", ...)
        ``"auto"``: an exact engine and msolve side by side (see :func:`_run_auto`); the answer is
        exact (``field="QQ"``) when the exact engine settles, else labelled modular.
    timeout : seconds, or None for no budget; past it the engine's process group is killed and
        :class:`~symeq.errors.BudgetExceeded` is raised.
    threads : msolve's ``-t``.
    want_basis : ask the exact external engines for the reduced basis too (needed for
        :func:`~symeq.fibre.groebner.normal.hermite_counts` and the fibre's points; costs printing
        time on big bases).
    exact_grace : ``auto`` only: seconds the exact engine may run on after msolve answered (default:
        until the deadline when there is a ``timeout``, else max(2 s, 3 x msolve's time)).

    Returns
    -------
    GroebnerResult
        ``dimension``, ``degree`` (complex points with multiplicity, when finite),
        ``is_zero_dimensional``, ``engine``, ``field`` ("QQ" exact; "modular (2 primes agree)" for msolve).

    Raises
    ------
    EngineMissing
        an engine requested but not installed (the message gives the install command).
    BudgetExceeded
        past ``timeout``.

    Examples
    --------
    >>> from flint import fmpq
    >>> r = groebner((["a"], [{(3,): fmpq(1), (0,): fmpq(-1)}]), engine="sympy")   # a^3 = 1
    >>> r.degree, r.field
    (3, 'QQ')
    """
    variables, polys = _system(ideal)
    if engine != "auto":
        e = _engine(engine)
        if not e.available():
            raise EngineMissing(e.missing_message())
    if not variables or not polys:  # nothing to compute
        lms = [tuple([0] * len(variables))] if polys else []
        basis = [{tuple([0] * len(variables)): fmpq(1)}] if polys else []
        return _result_from_lms(engine, variables, lms, "QQ", 0.0, basis)
    if engine == "sympy" and timeout is None:
        return _run_sympy(variables, polys, None)
    if engine == "auto":
        return _run_auto(variables, polys, timeout, want_basis=want_basis, threads=threads, exact_grace=exact_grace)
    return _run_single(engine, variables, polys, timeout, want_basis=want_basis, threads=threads)
