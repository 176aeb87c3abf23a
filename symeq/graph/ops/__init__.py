"""Join op units of graph models (docs/graphs.md): ``add``, ``concat``; see :mod:`.base` and :mod:`.registry`."""

from .registry import OP_UNITS, join_op, op_keys

__all__ = ["OP_UNITS", "join_op", "op_keys"]
