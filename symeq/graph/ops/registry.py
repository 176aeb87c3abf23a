"""The registry of join ops: one line per unit (a module of ``symeq/graph/ops/`` defining ``OP``).

>>> sorted(op_keys())
['add', 'concat']
"""

from __future__ import annotations

from ...errors import InputError
from . import add, concat

__all__ = ["OP_UNITS", "op_keys", "join_op"]

OP_UNITS = (
    add,
    concat,
)
"""The join op units; a new one is its module and one line here."""

_OPS = {unit.OP.key: unit.OP for unit in OP_UNITS}


def op_keys() -> tuple:
    """The join ops' keys, as node objects of a model file spell them."""
    return tuple(_OPS)


def join_op(key: str):
    """The join op of ``key`` (an ``InputError`` for an unknown one)."""
    try:
        return _OPS[key]
    except KeyError:
        raise InputError(f"unknown join op {key!r}; known: {', '.join(_OPS)}") from None
