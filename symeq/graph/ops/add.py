"""The addition node ``{"name", "add": [NAME, ...], "activation": SPEC or null}`` (docs/graphs.md)."""

from __future__ import annotations


from ...errors import ShapeError
from ...layers.base import NoPartner
from .base import JoinOp, same_action

__all__ = ["OP", "AddOp"]


class AddOp(JoinOp):
    """Two or more inputs of the same size (and image shape) summed."""

    key = "add"
    min_inputs = 2
    onnx = ("Add", {})  # the ONNX operator and attributes it is written as (symeq/numeric/onnx_write_graph.py)

    def affine_output(self, inputs_affine) -> bool:
        """An addition with one input of known action has that action (forced on the others): it is affine
        only when every input is (a pre-activation block's ``x + f(x)`` is read by its next layer)."""
        return all(inputs_affine)

    def out_shape(self, dims, shapes, where):
        if len(set(dims)) != 1:
            raise ShapeError(f"{where}: an addition needs inputs of one size, got sizes {list(dims)}")
        known = {s for s in shapes if s is not None}
        if len(known) > 1 or (known and None in shapes):
            raise ShapeError(f"{where}: an addition needs inputs of one image shape, got "
                             f"{[list(s) if s else None for s in shapes]}")
        return dims[0], next(iter(known), None)

    def exact(self, Xs):
        out = Xs[0]
        for X in Xs[1:]:
            out = out + X
        return out

    def floating(self, Xs):
        out = Xs[0]
        for X in Xs[1:]:
            out = out + X
        return out

    def ball(self, ys):
        return [sum(vs[1:], vs[0]) for vs in zip(*ys)]

    def action(self, actions, dims, shapes):
        known = [(i, a) for i, a in enumerate(actions) if a is not None]
        if not known:
            return None, {}, "no input of the addition has a known action (all are affine)"
        i0, a0 = known[0]
        for i, a in known[1:]:
            if not same_action(a, a0):
                return None, {}, f"the actions on inputs {i0 + 1} and {i + 1} of the addition disagree"
        forced = {i: a0 for i, a in enumerate(actions) if a is None}
        return a0, forced, "the inputs' actions agree"

    def float_derive(self, w, n, out: bool):
        """The float derivation at this node (symeq/numeric/graph.py, its walk ``w``): the known inputs'
        actions agree (their largest deviation is the residual), and that action is forced on the affine
        inputs; with affine inputs only and an activation, they are matched as one layer."""
        ins = [w.acts.get(i) for i in n.inputs]
        known = [(i, a) for i, a in zip(n.inputs, ins) if a is not None]
        if not known and not out:
            if n.activation is None:
                raise NoPartner(f"node {n.name}: an addition of affine inputs only, without an activation, has no "
                                "layerwise action at theta")
            rho, r, how = w.joint_match(n)
        else:
            rho = known[0][1] if known else w.B
            r = max([w.deviation(a, rho) for _, a in known[1:]], default=0.0)
            how = (f"the known inputs' actions ({', '.join(i for i, _ in known)}) agree" if len(known) > 1 else
                   f"the action of {known[0][0]}" if known else "the output action")
        for i, a in zip(n.inputs, ins):
            if a is None:
                w.force(i, rho, f"the addition {n.name}")
        return rho, r, how

    def float_combine(self, actions, same, block_sum):
        """The action on the node's value from its inputs' float actions (certify's candidates,
        symeq/certify_graph.py): theirs when they all agree (``same``), else None."""
        return actions[0] if all(same(a, actions[0]) for a in actions) else None


OP = AddOp()
