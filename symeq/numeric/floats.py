"""The numbers of float model files: a JSON number, or a "p/q" or decimal string, as a finite float64
(:func:`float_value`), and rectangular lists of them as arrays (:func:`float_matrix`); every failure a
one-line :class:`~symeq.errors.InputError` or :class:`~symeq.errors.ShapeError` naming where.

>>> float_matrix([[1, "1/2"], ["0.25", 2.0]], "w").tolist()
[[1.0, 0.5], [0.25, 2.0]]
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InputError, ShapeError

__all__ = ["float_value", "float_matrix"]


def float_value(v, where: str) -> float:
    if isinstance(v, bool):
        raise InputError(f"{v!r} is a boolean, not a number (at {where})")
    if isinstance(v, (int, float)):
        x = float(v)
    elif isinstance(v, str):
        from ..numbers import parse_number

        try:
            x = float(v)
        except ValueError:
            q = parse_number(v, where)  # "p/q" strings
            x = int(q.p) / int(q.q)
    else:
        raise InputError(f"expected a number, got {type(v).__name__} {v!r} (at {where})")
    if not math.isfinite(x):
        raise InputError(f"{v!r} is not a finite number (at {where})")
    return x


def float_matrix(rows, where: str, cols: int | None = None, vector: bool = False) -> np.ndarray:
    if vector:
        if not isinstance(rows, list):
            raise InputError(f"expected a list of numbers at {where}")
        return np.array([float_value(v, f"{where}[{i}]") for i, v in enumerate(rows)])
    if not isinstance(rows, list) or not rows or not all(isinstance(r, list) for r in rows):
        raise InputError(f"expected a non-empty list of rows at {where}")
    width = len(rows[0])
    out = []
    for i, r in enumerate(rows):
        if len(r) != width:
            raise ShapeError(f"{where} is not rectangular: row {i} has {len(r)} entries, row 0 has {width}")
        out.append([float_value(v, f"{where}[{i}][{j}]") for j, v in enumerate(r)])
    if width == 0:
        raise ShapeError(f"{where} has empty rows")
    if cols is not None and width != cols:
        raise ShapeError(f"{where} has shape {len(rows)}x{width}, expected ?x{cols}")
    return np.array(out)
