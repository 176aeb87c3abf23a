"""Polynomials in and out of the engines: exponent dicts, integer polynomials, engine text.

The engines read and write polynomials in the variables v0, v1, ...; :func:`_parse_poly` reads
their answers back into ``{exponents: fmpq}`` dicts with a regular expression, never with eval.
"""

from __future__ import annotations

import math
import re

from flint import fmpq

from ...errors import EngineFailed, InputError

_MONO = re.compile(r"v(\d+)(?:\^(\d+))?")


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
