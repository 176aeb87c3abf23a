"""The concatenation node ``{"name", "concat": [NAME, ...], "activation": SPEC or null}`` (docs/graphs.md).

Vectors are concatenated in order; images of the same height and width along channels, which in
symeq's channel-major layout is the concatenation of the flattened vectors.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from flint import fmpq_mat

from ...errors import ShapeError
from .base import JoinOp

__all__ = ["OP", "ConcatOp"]


class ConcatOp(JoinOp):
    """Inputs stacked in order; the action is the block-diagonal sum of the inputs' actions."""

    key = "concat"
    min_inputs = 1
    onnx = ("Concat", {"axis": 1})  # on channel-major rows: along channels (symeq/numeric/onnx_write_graph.py)

    def out_shape(self, dims, shapes, where):
        if all(s is not None for s in shapes):
            hw = {tuple(s[1:]) for s in shapes}
            if len(hw) != 1:
                raise ShapeError(f"{where}: a concatenation of images needs one height and width, got "
                                 f"{[list(s) for s in shapes]}")
            return sum(dims), (sum(s[0] for s in shapes),) + next(iter(hw))
        if any(s is not None for s in shapes):
            raise ShapeError(f"{where}: a concatenation takes images only or vectors only, got "
                             f"{[list(s) if s else None for s in shapes]}")
        return sum(dims), None

    def exact(self, Xs):
        cols = Xs[0].ncols()
        return fmpq_mat(sum(X.nrows() for X in Xs), cols, [x for X in Xs for x in X.entries()])

    def floating(self, Xs):
        return np.hstack(Xs)

    def ball(self, ys):
        return [v for y in ys for v in y]

    def action(self, actions, dims, shapes):
        missing = [i + 1 for i, a in enumerate(actions) if a is None]
        if missing:
            return None, {}, f"inputs {missing} of the concatenation have no known action (affine inputs)"
        sparse = [hasattr(a, "pixel") and hasattr(a, "source") for a in actions]
        if any(sparse):
            return _channel_block_sum(actions, sparse)
        n = sum(dims)
        M = fmpq_mat(n, n)
        at = 0
        for a, d in zip(actions, dims):
            for i in range(d):
                for j in range(d):
                    if a[i, j] != 0:
                        M[at + i, at + j] = a[i, j]
            at += d
        return M, {}, "block-diagonal sum of the inputs' actions"

    def float_derive(self, w, n, out: bool):
        """The float derivation at this node (symeq/numeric/graph.py, its walk ``w``): the block sum of its
        inputs' actions (each must be known, or, with an activation, the affine inputs matched as one layer)."""
        from ...layers.base import NoPartner

        missing = [i for i in n.inputs if w.acts.get(i) is None]
        r, how = 0.0, "block sum of the inputs' actions"
        if missing:
            if n.activation is None:
                raise NoPartner(f"node {n.name}: the concatenation reads affine inputs {missing} and has no "
                                "activation: their actions are not known")
            r, how = w.force_concat(n, missing)
        rho = w.block_sum([w.acts[i] for i in n.inputs])
        if rho is None:
            raise NoPartner(f"node {n.name}: an input's action is not monomial")
        return rho, r, how

    def float_combine(self, actions, same, block_sum):
        """The action on the node's value from its inputs' float actions (certify's candidates): their
        block sum."""
        return block_sum(actions)


def _channel_block_sum(actions, sparse):
    """The block sum of channel-pixel actions along channels (conv's ``ConvAction``): the channel parts
    stacked with their sources shifted, the one pixel permutation shared; refused by name when an input's
    action is not such an object or the pixel parts differ."""
    if not all(sparse):
        k = sparse.index(False) + 1
        return None, {}, (f"input {k} of the concatenation of images has an action that is not a channel action "
                          "times a pixel permutation")
    a0 = actions[0]
    for k, a in enumerate(actions[1:], 2):
        if tuple(a.pixel) != tuple(a0.pixel) or tuple(a.hw) != tuple(a0.hw):
            return None, {}, (f"the pixel permutations of inputs 1 and {k} of the concatenation differ: the block "
                              "sum is no channel action times one pixel permutation")
    source, factor, at = [], [], 0
    for a in actions:
        source += [at + s for s in a.source]
        factor += list(a.factor)
        at += len(a.source)
    return (replace(a0, source=tuple(source), factor=tuple(factor)), {},
            "block sum of the inputs' channel actions, one pixel permutation")


OP = ConcatOp()
