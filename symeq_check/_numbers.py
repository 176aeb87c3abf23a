"""Exact numbers as the checker reads them: :class:`fractions.Fraction` from JSON integers, ``"p/q"`` and
decimal strings (never a float), vectors and matrices of them, and the reader's error, :class:`CheckError`.
"""
from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache


_FRACTION = re.compile(r"([+-]?)(\d+)/(\d+)")
_DECIMAL = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")
_MAX_EXPONENT = 1000

Matrix = tuple[tuple[Fraction, ...], ...]
Sparse = tuple[tuple[tuple[int, Fraction], ...], ...]  # rows of (column, nonzero value), by column


class CheckError(Exception):
    """Malformed input: unreadable file, bad number, wrong shape, unknown kind (exit code 2)."""


# ----------------------------------------------------------------------------- parsing

def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _BadNumber(Exception):
    pass


@lru_cache(maxsize=1 << 16)
def _parse_text(value: str) -> Fraction:
    """A number written as a string; cached because weight sharing repeats the same strings
    (a Fraction is immutable, so sharing one object is safe)."""
    try:
        match = _FRACTION.fullmatch(value)
        if match:
            if int(match[3]) == 0:
                raise _BadNumber(f"zero denominator in {_short(value)}")
            return Fraction(int(match[1] + match[2]), int(match[3]))
        match = _DECIMAL.fullmatch(value)
        if match and (match[2] or match[3]):
            digits = (match[2] or "") + (match[3] or "")
            exponent = int(match[4] or 0) - len(match[3] or "")
            if abs(exponent) > _MAX_EXPONENT:
                raise _BadNumber(f"exponent too large in {_short(value)}")
            if exponent == 0:
                return Fraction(int(match[1] + digits))
            return int(match[1] + digits) * Fraction(10) ** exponent
    except ValueError:  # e.g. more digits than int() accepts
        raise _BadNumber(f"cannot read the number {_short(value)}") from None
    raise _BadNumber(f'{_short(value)} is not a number (an integer, "p/q" or a decimal string)')


def parse_number(value, where: str = "number") -> Fraction:
    """Parse one exact number: a JSON integer, or a string ``"p/q"``, ``"-3"``, ``"-1.5e-3"``.

    Examples
    --------
    >>> parse_number("-1.5e-3"), parse_number("2/6"), parse_number(7)
    (Fraction(-3, 2000), Fraction(1, 3), Fraction(7, 1))
    """
    if isinstance(value, bool):
        raise CheckError(f"{where}: a boolean is not a number")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        raise CheckError(f'{where}: JSON float {_short(value)} is not exact; write it as a string '
                         f'like "1/3" or "0.25"')
    if isinstance(value, str):
        try:
            return _parse_text(value)
        except _BadNumber as exc:
            raise CheckError(f"{where}: {exc}") from None
    raise CheckError(f'{where}: {_short(value)} is not a number (an integer, "p/q" or a decimal '
                     'string)')


def _vector(value, where: str, length: int | None = None) -> tuple[Fraction, ...]:
    if not isinstance(value, list) or not value:
        raise CheckError(f"{where}: expected a non-empty list of numbers, got {_short(value)}")
    if length is not None and len(value) != length:
        raise CheckError(f"{where}: expected {length} entries, got {len(value)}")
    try:  # the common case first (cached strings, no per-entry place name); an error is re-read with its index
        return tuple(_parse_text(x) if type(x) is str else parse_number(x) for x in value)
    except (_BadNumber, CheckError):
        return tuple(parse_number(x, f"{where}[{k}]") for k, x in enumerate(value))


def _matrix(value, where: str, rows: int | None = None, cols: int | None = None) -> Matrix:
    if not isinstance(value, list) or not value:
        raise CheckError(f"{where}: expected a non-empty list of rows, got {_short(value)}")
    if rows is not None and len(value) != rows:
        raise CheckError(f"{where}: expected {rows} rows, got {len(value)}")
    cols = cols if cols is not None else (len(value[0]) if isinstance(value[0], list) else None)
    return tuple(_vector(row, f"{where} row {r + 1}", cols) for r, row in enumerate(value))


def _dict(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise CheckError(f"{where}: expected a JSON object, got {_short(value)}")
    return value


def _count(value, where: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CheckError(f"{where}: expected an integer >= {minimum}, got {_short(value)}")
    if maximum is not None and value > maximum:
        raise CheckError(f"{where}: {value} exceeds the checker's limit {maximum}")
    return value


def _poly(c, t: Fraction) -> Fraction:
    value = Fraction(0)
    for coeff in reversed(c):
        value = value * t + coeff
    return value


def _fmt(vec) -> str:
    return "[" + ", ".join(str(v) for v in vec) + "]"


def _ratio(u, v) -> Fraction | None:
    """The alpha with u == alpha * v (v nonzero), or None if u is not a multiple of v."""
    k = next(k for k, x in enumerate(v) if x)
    alpha = u[k] / v[k]
    if alpha == 1:  # the common case (permutations): compare without multiplying
        return alpha if tuple(u) == tuple(v) else None
    if alpha == -1:
        return alpha if all(a == -b for a, b in zip(u, v)) else None
    return alpha if all(a == alpha * b for a, b in zip(u, v)) else None


def _indices(value, n: int, where: str) -> list[int]:
    if not isinstance(value, list) or len(value) != n:
        raise CheckError(f"{where}: expected a list of {n} indices, got {_short(value)}")
    if any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < n for c in value):
        raise CheckError(f"{where}: every entry must be an integer index in 0..{n - 1}")
    return value


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)
