"""The float derivation of the actions along a graph model: numeric-check on graphs (docs/graphs.md).

The float twin of docs/graphs.md "Actions along a graph", over a float
:class:`symeq.graph.GraphModel`, for each generator g = (A, B), node by node in file order:

* a **layer node** with an activation is matched by its layer kind's own matching (``match_action``,
  through :func:`symeq.numeric.layerwise._match_candidates`, the chain's step, with the same dense
  fallback for convolutions whose geometry does not carry the action): its residual is the chain's;
* an **affine layer node** (a branch's last layer, read by an addition or a concatenation) gets the
  action its reader forces, and is checked with it: |W rho_in - rho W| / |W| and the same for the
  bias (:func:`symeq.numeric.layerwise._commutator_residual`, sparse for convolutions);
* at an **addition**, the inputs whose action is known must agree: the node's residual is the largest
  entrywise deviation of each from the first (1 for different permutations); that action is the
  sum's, and it is forced on the affine inputs.  An addition of affine inputs only (a projection
  skip, relu(P x + W y)) with an activation is matched as one layer on the direct sum of its inputs'
  inputs (:func:`_joint_match`; the float twin goes beyond docs/graphs.md's exact rule here, which
  leaves such a network without layerwise actions), and that action is forced on each input; without
  an activation it has no action (undetermined, exit 3);
* at a **concatenation**, the block sum of the inputs' actions; affine inputs of a concatenation with an
  activation (relu(cat(conv_a(x), conv_b(y)))) are matched as one stacked layer on the direct sum of
  their inputs (:func:`_force_concat`), and the blocks of that action are forced on them (an action
  that moves neurons between inputs is no block sum: undetermined); without an activation their
  action is not known (undetermined);
* a join's activation must admit the action (its latent group K; for ReLU a positive monomial): a
  scaling it does not admit is residual 1; the action after it is q(alpha), as on a layer;
* the output node is checked against B (a layer by the commutator, a join by the deviation of its
  action from B).

Then g -> (rho_s(g))_s against the group's relations (:func:`symeq.numeric.layerwise._homomorphism_error`).
Residuals only, float64, never a proof: the result is "within tolerance" or not, never "verified".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..graph.ops.registry import join_op
from ..layers.base import NoPartner
from .layerwise import DEFAULT_TOL, NumericDerivation, _commutator_residual, _deviation, _homomorphism_error, \
    _match_candidates
from .match import _latent_action
from .models import _as_group
from .monomial import MonomialAction, as_action

__all__ = ["GraphDerivation", "SpaceResidual", "derive_graph_numeric"]


@dataclass
class SpaceResidual:
    """How well generator g's action holds at one node (its output space ``space``)."""

    space: str
    generator: str
    residual: float
    median_residual: float
    margin: float | None
    method: str

    @property
    def layer(self) -> str:  # the chain rows' field, for code that reads either
        return self.space

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class GraphDerivation(NumericDerivation):
    """:class:`~symeq.numeric.layerwise.NumericDerivation` of a graph: ``spaces`` are the hidden spaces'
    names, ``actions[i][g]`` the action on ``spaces[i]``, ``residuals`` one :class:`SpaceResidual` per
    (node, generator)."""

    spaces: list = field(default_factory=list)

    def report(self) -> str:
        lines = [f"numeric derivation of the actions along the graph (tolerance {self.tol:g}; float64, not a proof)"]
        for r in self.residuals:
            m = "" if r.margin is None else f", margin {r.margin:.3g}"
            lines.append(f"  node {r.space}, {r.generator}: max residual {r.residual:.3g}, "
                         f"median {r.median_residual:.3g}{m} ({r.method})")
        if self.homomorphism_unchecked:
            lines.append(f"  homomorphism on the group's relations: not checked ({self.why_undetermined})")
        elif self.homomorphism_error is not None:
            lines.append(f"  homomorphism on the group's relations (order {self.group_order}): "
                         f"max deviation {self.homomorphism_error:.3g}")
        for s, acts in zip(self.spaces, self.actions):
            lines.append(f"  rho_{s}: " + ", ".join(a.kind() if isinstance(a, MonomialAction) else
                                                    "not derived" if a is None else "dense" for a in acts))
        lines += [f"  note: {n}" for n in self.notes]
        if self.status == "undetermined":
            lines.append(f"undetermined: {self.why_undetermined} (best max residual {self.max_residual:.3g}, "
                         f"tolerance {self.tol:g}); {self.seconds:.2f} s")
            return "\n".join(lines)
        worst = max(self.residuals, key=lambda r: r.residual, default=None)
        at = "" if worst is None or self.within_tolerance else f", largest at node {worst.space}"
        verdict = "within" if self.within_tolerance else "NOT within"
        lines.append(f"every node equivariant through K {verdict} tolerance {self.tol:g} "
                     f"(max residual {self.max_residual:.3g}{at}); {self.seconds:.2f} s")
        return "\n".join(lines)

    def to_json(self) -> dict:
        out = super().to_json()
        out["spaces"] = list(self.spaces)
        return out


def _after_activation(act, rho):
    """The action on act(z) given rho on z, and the residual of the check that act admits it (0 or 1)."""
    if act is None:
        return rho, 0.0, ""
    if not isinstance(rho, MonomialAction):
        return rho, 1.0, f"; the action is not monomial, so it does not commute with {act.name}"
    after = _latent_action(act, rho.cols, rho.vals)
    if rho.offset is not None or not np.all(np.isfinite(after.vals)):
        return after, 1.0, f"; {act.name} after the join does not admit the action (not in its latent group)"
    cp = rho.__dict__.get("channel_pixel")
    if cp is not None:
        after.channel_pixel = cp
    return after, 0.0, f"; {act.name} admits it ({act.latent_group})"


def _block_sum(actions: list):
    """The block-diagonal sum of monomial actions (a concatenation), or None if one is not monomial."""
    if not all(isinstance(a, MonomialAction) for a in actions):
        return None
    cols, vals, offs, at = [], [], [], 0
    for a in actions:
        cols.append(a.cols + at)
        vals.append(a.vals)
        offs.append(a.offset_or_zero)
        at += a.n
    off = np.concatenate(offs)
    return MonomialAction(np.concatenate(cols), np.concatenate(vals), off if np.any(off) else None)


class _Walk:
    """One generator's walk along the graph: ``acts`` (space -> action), ``rows`` (SpaceResidual)."""

    def __init__(self, model, name: str, A, B):
        self.model, self.name, self.B = model, name, as_action(B)
        self.acts = {"input": as_action(A)}
        self.affine = {}  # affine layer node -> (layer, the action on its input)
        self.rows, self.why = [], None

    def row(self, space, r, how, med=None, margin=None):
        self.rows.append(SpaceResidual(space, self.name, float(r), float(r if med is None else med), margin, how))

    def layer_node(self, n, li: int):
        layer, prev = n.layer, self.acts.get(n.inputs[0])
        if prev is None:
            raise NoPartner(f"node {n.name}: the action on its input {n.inputs[0]!r} is not known")
        if n.name == self.model.output:
            self.row(n.name, _commutator_residual(layer, prev, self.B), "|W rho - rho_out W| / |W| and the same for b")
            self.acts[n.name] = self.B
        elif layer.activation is None:
            self.affine[n.name] = (layer, prev)
            self.acts[n.name] = None
        else:
            (rho, rec), = _match_candidates(layer, prev, layer.match_reference(), li)[:1]
            self.row(n.name, rec[0], rec[3], rec[1], rec[2])
            self.acts[n.name] = rho

    def force(self, space: str, target, where: str) -> None:
        layer, prev = self.affine.pop(space)
        self.row(space, _commutator_residual(layer, prev, target),
                 f"affine, the action forced by {where}: |W rho_in - rho W| / |W| and the same for b")
        self.acts[space] = target

    # -- what a join op's float rule (JoinOp.float_derive, symeq/graph/ops/) may ask of the walk ----------

    def deviation(self, a, b) -> float:
        """The largest entrywise difference of two float actions."""
        return _deviation(a, b)

    def block_sum(self, actions: list):
        """The block-diagonal sum of monomial actions, or None if one is not monomial."""
        return _block_sum(actions)

    def joint_match(self, n):
        """(action, residual, how) of an addition of affine inputs only, with an activation (:func:`_joint_match`)."""
        return _joint_match(self, n)

    def force_concat(self, n, missing: list):
        """(residual, how) of a concatenation's affine inputs matched as one layer (:func:`_force_concat`)."""
        return _force_concat(self, n, missing)

    def join_node(self, n):
        rule = getattr(join_op(n.op), "float_derive", None)
        if rule is None:
            raise InputError(f"node {n.name}: the float derivation has no rule for the join op {n.op!r}")
        out = n.name == self.model.output
        rho, r, how = rule(self, n, out)
        after, bad, note = _after_activation(n.activation, rho)
        if out:
            r = max(r, _deviation(after, self.B))
            how += "; checked against the output action"
            after = self.B
        self.row(n.name, max(r, bad), how + note)
        self.acts[n.name] = after


def _joint_match(w: _Walk, n):
    """An addition of affine inputs only, with an activation (a projection skip: relu(P x + W y)): the sum
    sigma(sum_i W_i x_i + b) is one layer on the direct sum of the inputs' inputs, matched as a layer (its
    rows, or its kernels over the concatenated channels, against theta's), with the block sum of their
    actions; the pre-activation action found is then forced on each input and checked there."""
    parts = [w.affine[i] for i in n.inputs]
    prev = _block_sum([p for _, p in parts])
    if prev is None:
        raise NoPartner(f"node {n.name}: an input's action is not monomial")
    joint = _joint_layer([l for l, _ in parts], n.activation, n.name)
    (rho, rec), = _match_candidates(joint, prev, joint.match_reference(), 0)[:1]
    act = n.activation
    with np.errstate(invalid="ignore"):
        fixed = np.allclose(act.scalings.q(rho.vals), rho.vals, equal_nan=False)
    if rho.offset is not None or not fixed:
        raise NoPartner(f"node {n.name}: the joint matching of the addition's affine inputs gives an action that "
                        f"{act.name} changes (q(alpha) != alpha); the float twin forces it only where they agree")
    how = (f"the addition's affine inputs matched as one layer on their inputs' direct sum ({rec[3]}; max residual "
           f"{rec[0]:.3g}), that action forced on each")
    pre = MonomialAction(rho.cols, rho.vals)
    if rho.__dict__.get("channel_pixel") is not None:  # the conv matching's sparse form, for the reports
        pre.channel_pixel = rho.channel_pixel
    return pre, float(rec[0]), how


def _joint_layer(layers: list, act, where: str, stacked: bool = False):
    """sum_i W_i x_i + b (or, ``stacked``, the rows of every W_i x_i + b_i one under the other: a
    concatenation) as one float layer on the concatenated inputs, with the activation ``act``: dense for
    plain dense layers, else the kind's own ``joint`` (a convolution over the concatenated channels with
    the kernels placed in one common window: ``ConvLayer.joint``, symeq/layers/conv/floating.py)."""
    from ..layers.registry import all_support

    if all_support(layers, "plain-dense"):
        return _joint_dense(layers, act, where, stacked)
    joint = getattr(type(layers[0]), "joint", None)
    if joint is None or len({type(l) for l in layers}) != 1:
        kinds = ", ".join(sorted({l.kind for l in layers}))
        raise NoPartner(f"node {where}: a join of affine inputs of kinds {kinds} (joined: plain dense layers, or "
                        "layers of one kind that joins its own)")
    return joint(layers, act, where, stacked)


def _joint_dense(layers: list, act, where: str, stacked: bool):
    from ..sizes import check_memory
    from .models import NumericDenseLayer

    check_memory(8 * sum(l.out_dim for l in layers) * sum(l.in_dim for l in layers),
                 f"node {where}: the joint layer of its affine inputs")
    if not stacked:
        return NumericDenseLayer(np.hstack([l.weight for l in layers]), sum(l.bias for l in layers), act)
    W, r, c = np.zeros((sum(l.out_dim for l in layers), sum(l.in_dim for l in layers))), 0, 0
    for l in layers:
        W[r:r + l.out_dim, c:c + l.in_dim] = l.weight
        r, c = r + l.out_dim, c + l.in_dim
    return NumericDenseLayer(W, np.concatenate([l.bias for l in layers]), act)


def _force_concat(w: _Walk, n, missing: list):
    """A concatenation with an activation of affine inputs (relu(cat(conv_a(x), conv_b(y)))): their rows,
    stacked, are one layer on the direct sum of their inputs, matched as a layer; the action found must
    keep each input's block (docs/graphs.md: a block sum), and its blocks are forced on the inputs."""
    parts = [w.affine[i] for i in missing]
    prev = _block_sum([p for _, p in parts])
    if prev is None:
        raise NoPartner(f"node {n.name}: an input's action is not monomial")
    joint = _joint_layer([l for l, _ in parts], n.activation, n.name, stacked=True)
    (rho, rec), = _match_candidates(joint, prev, joint.match_reference(), 0)[:1]
    with np.errstate(invalid="ignore"):
        fixed = np.allclose(n.activation.scalings.q(rho.vals), rho.vals, equal_nan=False)
    if rho.offset is not None or not fixed:
        raise NoPartner(f"node {n.name}: the joint matching of the concatenation's affine inputs gives an action "
                        f"that {n.activation.name} changes (q(alpha) != alpha)")
    at = 0
    for i, (layer, _) in zip(missing, parts):
        cols = rho.cols[at:at + layer.out_dim] - at
        if np.any(cols < 0) or np.any(cols >= layer.out_dim):
            raise NoPartner(f"node {n.name}: the matched action moves neurons of {i} to another input of the "
                            "concatenation (not a block sum)")
        w.force(i, MonomialAction(cols, rho.vals[at:at + layer.out_dim]), f"the concatenation {n.name}")
        at += layer.out_dim
    return float(rec[0]), (f"block sum; the affine inputs {', '.join(missing)} matched as one layer on their inputs' "
                           f"direct sum ({rec[3]}; max residual {rec[0]:.3g}), its blocks forced on each")


def derive_graph_numeric(model, group=None, *, tol: float = DEFAULT_TOL, deadline=None) -> GraphDerivation:
    """The numeric derivation of rho_s(g) on every hidden space of a float graph model (module docstring)."""
    group = _as_group(group) if group is not None else _as_group(model.group)
    if group is None:
        raise InputError("no group given: put a \"group\" in the model file or pass one (--group)")
    if model.exact:
        raise InputError("derive_graph_numeric takes a float graph model (the exact path derives exact graphs)")
    t0 = time.perf_counter()
    spaces = [s.name for s in model.hidden_spaces()]
    residuals, chains, undetermined = [], [], []
    for name, (A, B) in zip(group.names, group.generators):
        w = _Walk(model, name, A, B)
        try:
            for li, n in enumerate(model.nodes):
                if deadline is not None:
                    deadline.check(f"the float derivation along the graph (node {n.name})")
                w.join_node(n) if n.is_join else w.layer_node(n, li)
            for space in list(w.affine):  # an affine node read by no addition (a concatenation's input)
                raise NoPartner(f"node {space}: affine, and no addition forces its action")
        except NoPartner as e:
            undetermined.append(f"generator {name}: {e}")
            w.row(str(e).split(":", 1)[0].replace("node ", "") if str(e).startswith("node ") else "?", float("inf"),
                  f"not matched: {e}")
        residuals += w.rows
        chains.append([w.acts.get(s) for s in spaces])
    hom, order = None, None
    if spaces and not any(a is None for c in chains for a in c):
        hom, order = _homomorphism_error(group, chains)
    actions = [[chains[gi][i] for gi in range(len(chains))] for i in range(len(spaces))]
    notes = ["float derivation along the graph: actions forced at additions, block sums at concatenations "
             "(docs/graphs.md)"]
    d = GraphDerivation(actions, residuals, tol, hom, time.perf_counter() - t0, order, notes, spaces=spaces)
    d.undetermined = "; ".join(undetermined) or None
    return d
