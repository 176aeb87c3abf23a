"""Signed (and scaled) permutations in cycle notation: how symeq prints a monomial action.

A monomial matrix rho has one nonzero entry per row and column: ``(rho y)_j = c_j * y_{s(j)}``,
so rho carries the value of neuron ``s(j)`` to neuron ``j`` and multiplies it by ``c_j``. It is
written as the cycles of the permutation ``s(j) -> j`` (the direction the values move), with
neurons numbered **from 1** and each neuron's factor written in front of it where the value
*arrives*:

* ``j`` when ``c_j = 1``, ``-j`` when ``c_j = -1``, and ``c*j`` for any other factor, e.g.
  ``2*3`` or ``-1/2*3`` (``·`` and the minus sign ``−`` are read as well);
* a neuron that stays in place with factor 1 is left out; with another factor it is a cycle of
  length one, e.g. ``(-4)`` or ``(3*4)``; the identity is ``()``;
* every cycle starts at its smallest neuron, and the cycles are sorted by it.

So ``(1 -3 2)(4 5)`` on R^5 is the action y -> (y_2, y_3, -y_1, y_5, y_4): the value of neuron 1
goes to neuron 3 with a sign, that of 3 to 2, that of 2 back to 1, and neurons 4 and 5 swap.
Numbering from 1 keeps the sign of the first neuron readable (``-1``); the JSON forms (the
certificate's ``"source"`` and ``"factor"`` lists) number from 0, as arrays do.

Examples
--------
>>> format_cycles([1, 2, 0, 4, 3], [1, 1, -1, 1, 1])
'(1 -3 2)(4 5)'
>>> parse_cycles("(1 -3 2)(4 5)", 5)
([1, 2, 0, 4, 3], [1, 1, -1, 1, 1])
>>> format_cycles([0, 1], [1, fmpq(-1, 2)])
'(-1/2*2)'
"""

from __future__ import annotations

import re

from .errors import InputError
from .numbers import fmpq, monomial_parts

__all__ = ["format_cycles", "parse_cycles", "matrix_cycles", "wrap_cycles", "TEXT_WIDTH"]

#: the longest line of an action in text output; longer cycle strings wrap (:func:`wrap_cycles`)
TEXT_WIDTH = 100

_ENTRY = re.compile(r"\s*([+-]?)(?:(\d+(?:/\d+)?)\s*[*·]\s*)?(\d+)\s*")


def _label(j: int, c) -> str:
    if c == 1:
        return str(j + 1)
    if c == -1:
        return f"-{j + 1}"
    return f"{c}*{j + 1}"


def format_cycles(source, factor) -> str:
    """Cycle notation of the monomial action with ``(rho y)_j = factor[j] * y[source[j]]``.

    ``source`` numbers neurons from 0 (as the certificate does); the text numbers them from 1.
    """
    target = {s: j for j, s in enumerate(source)}  # the value of neuron s moves to neuron target[s]
    if len(target) != len(source) or any(not 0 <= s < len(source) for s in source):
        raise ValueError("source is not a permutation")
    seen, out = set(), []
    for start in range(len(source)):
        if start in seen:
            continue
        cycle, a = [], start
        while a not in seen:
            seen.add(a)
            cycle.append(a)
            a = target[a]
        if len(cycle) == 1 and factor[start] == 1:
            continue
        out.append("(" + " ".join(_label(j, factor[j]) for j in cycle) + ")")
    return "".join(out) or "()"


def wrap_cycles(head: str, cycles: str, width: int = TEXT_WIDTH, max_lines: int = 6,
                more: str = "--json gives them all") -> list[str]:
    """Lines of at most ``width`` characters showing ``head`` followed by a cycle string.

    Lines break between cycles (inside a cycle only when one cycle is longer than a line); the
    continuation lines are indented under the first cycle.  When the action needs more than
    ``max_lines`` lines, the last one says how many cycles were left out and where they are
    (``more``).

    >>> wrap_cycles("  rho: ", "(1 2)(3 4)(5 6)", width=18)
    ['  rho: (1 2)(3 4)', '        (5 6)']
    >>> wrap_cycles("rho: ", "".join(f"({2 * j + 1} {2 * j + 2})" for j in range(60)), width=40, max_lines=2)[-1]
    '     ... 54 more cycles (--json gives them all)'
    """
    indent = " " * min(len(head), 12)
    cycles_ = re.findall(r"\([^()]*\)", cycles) or [cycles]
    lines, cur, fresh = [], head, True  # fresh: nothing written after the head or indent yet
    complete = shown = 0  # cycles ended on the current line; cycles ended on lines already out

    def flush():
        nonlocal cur, fresh, complete, shown
        lines.append(cur)
        shown += complete
        cur, fresh, complete = indent, True, 0
        if len(lines) == max_lines - 1 and shown < len(cycles_):
            left = len(cycles_) - shown
            lines.append(f"{indent}... {left} more cycle{'s' if left != 1 else ''} ({more})")
            return True
        return False

    for cyc in cycles_:
        fits_a_line = len(indent) + len(cyc) <= width  # else it is broken, starting right here
        if not fresh and len(cur) + len(cyc) > width and fits_a_line and flush():
            return lines
        if len(cur) + len(cyc) <= width:
            cur, fresh = cur + cyc, False
        else:  # one cycle longer than a line: break it between its neurons
            for k, word in enumerate(cyc.split(" ")):
                sep = " " if k else ""
                if not fresh and len(cur) + len(sep) + len(word) > width:
                    if flush():
                        return lines
                    sep = ""
                cur, fresh = cur + sep + word, False
        complete += 1
    lines.append(cur)
    return lines


def matrix_cycles(M) -> str | None:
    """Cycle notation of a monomial ``fmpq_mat``; None when M is not monomial."""
    parts = monomial_parts(M)
    return None if parts is None else format_cycles(*parts)


def parse_cycles(text: str, n: int):
    """Read cycle notation back: ``(source, factor)`` with neurons from 0 and fmpq factors.

    Raises
    ------
    InputError
        If the text is not cycle notation of a monomial action on R^n.
    """
    source, factor = list(range(n)), [fmpq(1)] * n
    body = text.replace("−", "-").strip()
    cycles = re.findall(r"\(([^()]*)\)", body)
    if re.sub(r"\s*\([^()]*\)\s*", "", body):
        raise InputError(f"not cycle notation: {text!r}")
    used = set()
    for cycle in cycles:
        if not cycle.strip():
            continue
        entries = []
        for token in cycle.split():
            m = _ENTRY.fullmatch(token)
            if m is None:
                raise InputError(f"cannot read {token!r} in {text!r}")
            j = int(m[3]) - 1
            if not 0 <= j < n or j in used:
                raise InputError(f"neuron {m[3]} is out of range 1..{n} or repeated in {text!r}")
            used.add(j)
            c = fmpq(1) if m[2] is None else fmpq(*map(int, m[2].split("/")))
            if c == 0:
                raise InputError(f"a zero factor in {text!r}")
            entries.append((j, -c if m[1] == "-" else c))
        for (a, _), (b, c) in zip(entries, entries[1:] + entries[:1]):
            source[b], factor[b] = a, c  # the value of a arrives at b, times c
    return source, factor
