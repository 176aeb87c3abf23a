"""The derivation of actions along a graph model and its exact layerwise check (docs/graphs.md,
"Actions along a graph").

Per generator g = (A, B), node by node in file order: a layer node with an activation takes its
actions from the layer kind's own matching (``match_action``, as in a chain; clones give several
candidates, tried depth first within a node budget); an affine layer node waits until a join forces its
action (the addition's, or G's output matrix at the output); an addition needs its known inputs'
actions equal (:mod:`symeq.graph.ops.add`), a concatenation takes their block sum
(:mod:`symeq.graph.ops.concat`); a join's activation must commute with the action
(:func:`symeq.graph.ops.base.activation_action`).  Every layer node is then checked exactly with the
kind's ``check_action``, and the actions with the homomorphism walk of the chain
(:func:`symeq.walk.cayley_homomorphism`).  Only linear actions are derived (no affine offsets).

Actions stay in the kinds' own objects: on an image space the channel-pixel action of a kind with
``sparse-actions`` (conv's ``ConvAction``), never a dense matrix (G's input matrix is read into one by
the convolution reading the image input); a dense layer reading an image space is matched and checked as
the whole-image convolution it is (:func:`_views`); on a vector space an ``fmpq_mat``.  Size guards
(:func:`_guard`) run before the walk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..budget import Deadline
from ..errors import LimitExceeded
from ..layers.base import NoPartner
from ..layers.registry import supports
from ..numbers import identity
from ..walk import cayley_homomorphism
from .model import INPUT, GraphModel
from .ops.base import action_key, activation_action, same_action
from .ops.registry import join_op

__all__ = ["GraphDerivation", "derive_graph_actions", "as_matrix", "MAX_SPACE_DIM", "MAX_IMAGE_SPACE_DIM",
           "MAX_KERNEL_WORK"]

MAX_SPACE_DIM = 2048
"""The largest vector space (no image shape) the graph walk holds actions on: there they are dense
``fmpq_mat`` (monomial or signed permutation matrices), n^2 entries for a space of size n; larger ones
are refused before the walk starts (exit 2)."""

MAX_IMAGE_SPACE_DIM = 4_000_000
"""The largest image space (C x H x W coordinates) the graph walk holds actions on.  There they are the
kinds' own sparse action objects (conv's ``ConvAction``: a channel action times a pixel permutation,
C + H W numbers), never a dense matrix."""

MAX_KERNEL_WORK = 500_000_000
"""The most multiply-adds of the layer checks (per generator, summed over the layer nodes: output neurons
times taps, the cost of the neuron-by-neuron check on sparse rows, an upper bound of the kernel check;
a dense layer's in x out), checked before the walk."""


def as_matrix(a):
    """An action as an ``fmpq_mat`` (a kind's own action class, conv's ConvAction, by its size-guarded
    ``to_matrix``)."""
    return a.to_matrix() if hasattr(a, "to_matrix") else a


def _identity_of(a):
    return a.identity() if hasattr(a, "identity") else identity(a.nrows())


@dataclass
class GraphDerivation:
    """The outcome: ``actions[space][g]`` for every node's space (the output's is G's output matrix),
    ``checks`` rows (space, generator, holds, detail), ``found``, ``homomorphism``, ``capped`` (the node
    budget ran out: nothing is proved) and ``failure`` (why no action was found)."""

    found: bool
    actions: dict = field(default_factory=dict)
    checks: list = field(default_factory=list)
    homomorphism: bool | None = None
    group_order: int | None = None
    capped: bool = False
    failure: str | None = None
    nodes_visited: int = 0


class _Walk:
    """Depth-first over the candidate actions of one generator (see the module docstring)."""

    def __init__(self, gm: GraphModel, A, B, gname: str, deadline: Deadline, max_nodes: int, refs: dict,
                 views: dict):
        self.gm, self.A, self.B, self.g = gm, A, B, gname
        self.deadline, self.max_nodes, self.refs, self.views = deadline, max_nodes, refs, views
        self.visited, self.capped, self.failure = 0, False, None

    def run(self):
        return self._at(0, {INPUT: self.A}, {}, [])

    def _fail(self, why: str) -> None:
        if self.failure is None:
            self.failure = why

    def _at(self, pos: int, acts: dict, pending: dict, checks: list):
        self.visited += 1
        if self.visited > self.max_nodes:
            self.capped = True
            return None
        self.deadline.check("deriving the actions along the graph")
        nodes = self.gm.nodes
        if pos == len(nodes):
            if pending:
                self._fail(f"no action reaches the affine node(s) {', '.join(pending)}")
                return None
            return acts, checks
        n = nodes[pos]
        if n.is_join:
            return self._join(pos, n, acts, pending, checks)
        return self._layer(pos, n, acts, pending, checks)

    def _row(self, name, holds, detail):
        return {"space": name, "generator": self.g, "holds": bool(holds), "detail": detail}

    def _layer(self, pos, n, acts, pending, checks):
        P = acts[n.inputs[0]]
        layer = self.views.get(n.name, n.layer)
        if layer is n.layer and hasattr(P, "to_matrix") and not supports(layer, "sparse-actions"):
            P = as_matrix(P)  # a kind without sparse actions reads an image space: the dense form, size-guarded
        if n.name == self.gm.output:
            holds, detail = layer.check_action(P, self.B)
            if not holds:
                self._fail(f"node {n.name}: {detail}")
                return None
            return self._at(pos + 1, dict(acts, **{n.name: self.B}), pending,
                            checks + [self._row(n.name, True, detail)])
        if layer.activation is None:  # affine: forced by the join that reads it
            return self._at(pos + 1, dict(acts, **{n.name: None}), dict(pending, **{n.name: P}), checks)
        try:
            _, cands = layer.match_action(P, None, reference=self.refs[n.name], affine=False, li=pos + 1)
            for rho, off in cands:
                if off is not None and any(x != 0 for x in off):
                    continue
                Q = rho  # the kind's own action object (conv: ConvAction), never expanded
                if self.gm.shape(n.name) is None and hasattr(Q, "to_matrix"):
                    Q = as_matrix(Q)  # a vector space (a dense layer read as a whole-image kernel): a matrix
                holds, detail = layer.check_action(P, Q)
                if not holds:
                    self._fail(f"node {n.name}: {detail}")
                    continue
                out = self._at(pos + 1, dict(acts, **{n.name: Q}), pending, checks + [self._row(n.name, True, detail)])
                if out is not None or self.capped:
                    return out
        except NoPartner as e:
            self._fail(f"node {n.name}: {e}")
            if e.inconclusive:
                self.capped = True
        return None

    def _join(self, pos, n, acts, pending, checks):
        op = join_op(n.op)
        gm = self.gm
        M, forced, detail = op.action([acts[i] for i in n.inputs], [gm.dim(i) for i in n.inputs],
                                      [gm.shape(i) for i in n.inputs])
        out_node = n.name == gm.output
        if M is None and out_node and n.activation is None and all(acts[i] is None for i in n.inputs):
            M, forced, detail = self.B, {k: self.B for k in range(len(n.inputs))}, "forced by G's output matrix"
        if M is None:
            self._fail(f"node {n.name}: {detail}")
            return None
        acts, pending, checks = dict(acts), dict(pending), list(checks)
        for k, F in forced.items():
            src = n.inputs[k]
            if src not in pending:
                continue
            holds, why = self.views.get(src, gm.node(src).layer).check_action(pending.pop(src), F)
            if not holds:
                self._fail(f"node {src} (action forced by {n.name}): {why}")
                return None
            acts[src] = F
            checks.append(self._row(src, True, f"{why} (action forced by {n.name})"))
        Q, why = activation_action(n.activation, M)
        if Q is None:
            self._fail(f"node {n.name}: {why}")
            return None
        if out_node and not same_action(Q, self.B):
            self._fail(f"node {n.name}: the action on the output is not G's output matrix")
            return None
        checks.append(self._row(n.name, True, f"{detail}; {why}"))
        acts[n.name] = Q
        return self._at(pos + 1, acts, pending, checks)


def _image_layer_above(gm: GraphModel, name: str):
    """The nearest layer with sparse actions that produces space ``name`` (through joins, by their first
    input), or None."""
    while name != INPUT:
        node = gm.node(name)
        if not node.is_join:
            return node.layer if supports(node.layer, "sparse-actions") else None
        name = node.inputs[0]
    return None


def _views(gm: GraphModel) -> dict:
    """The layers the walk matches and checks in place of a node's own: a dense layer reading an image
    space is the whole-image convolution of the kind above it (``from_dense_layer``, the same function,
    as :meth:`symeq.models.Model._dense_after_conv` reads a chain), so its input action stays sparse."""
    out = {}
    for n in gm.nodes:
        if n.is_join or gm.shape(n.inputs[0]) is None or not supports(n.layer, "plain-dense"):
            continue
        up = _image_layer_above(gm, n.inputs[0])
        if up is not None and hasattr(type(up), "from_dense_layer"):
            out[n.name] = type(up).from_dense_layer(n.layer, gm.shape(n.inputs[0]))
    return out


def _sparse_input(gm: GraphModel, A):
    """G's input matrix as the sparse action object of a kind that reads the image input (else A)."""
    if gm.input_shape is None:
        return A
    for r in gm.readers(INPUT):
        if not r.is_join and supports(r.layer, "sparse-actions"):
            a = r.layer.sparse_action(A, "in")
            if a is not None:
                return a
    return A


def _guard(gm: GraphModel, views: dict) -> None:
    """The size guards, from the graph alone, before the walk (see the limits above)."""
    vec = [s.dim for s in gm.spaces() if s.shape is None]
    img = [s.dim for s in gm.spaces() if s.shape is not None]
    if vec and max(vec) > MAX_SPACE_DIM:
        raise LimitExceeded(limit="space size", value=max(vec), maximum=MAX_SPACE_DIM,
                            what="deriving the actions along a graph model (dense actions on a vector space)")
    if img and max(img) > MAX_IMAGE_SPACE_DIM:
        raise LimitExceeded(limit="image space size", value=max(img), maximum=MAX_IMAGE_SPACE_DIM,
                            what="deriving the actions along a graph model (sparse actions on an image space)")
    work = 0
    for n in gm.nodes:
        if not n.is_join:
            layer = views.get(n.name, n.layer)
            taps = getattr(getattr(layer, "shape", None), "taps", None)
            work += layer.out_dim * (taps if isinstance(taps, int) else layer.in_dim)
    if work > MAX_KERNEL_WORK:
        raise LimitExceeded(limit="layer check work", value=work, maximum=MAX_KERNEL_WORK,
                            what="checking the layers of a graph model on their kernels (per generator)")


def derive_graph_actions(gm: GraphModel, group=None, deadline: Deadline | None = None,
                         max_nodes: int = 100000) -> GraphDerivation:
    """Derive and check the actions of every space of ``gm`` for every generator of ``group``."""
    group = group if group is not None else gm.group
    deadline = deadline or Deadline(None)
    views = _views(gm)
    _guard(gm, views)
    refs = {n.name: views.get(n.name, n.layer).match_reference(affine=False) for n in gm.nodes
            if not n.is_join and n.layer.activation is not None and n.name != gm.output}
    per_g, checks, visited = [], [], 0
    for (A, B), gname in zip(group.generators, group.names):
        w = _Walk(gm, _sparse_input(gm, A), B, gname, deadline, max_nodes, refs, views)
        got = w.run()
        visited += w.visited
        if got is None:
            return GraphDerivation(False, capped=w.capped, nodes_visited=visited,
                                   failure=f"generator {gname}: {w.failure or 'the node budget ran out'}")
        per_g.append(got[0])
        checks += got[1]
    names = [n.name for n in gm.nodes]
    actions = {s: [acts[s] for acts in per_g] for s in names}
    hidden = [s.name for s in gm.hidden_spaces()]
    inputs = [_sparse_input(gm, A) for A, _ in group.generators]
    r = cayley_homomorphism(inputs, [[acts[s] for s in hidden + [gm.output]] for acts in per_g],
                            compose=lambda a, b: a * b, identity=_identity_of, key=action_key,
                            deviation=lambda x, y: 0 if action_key(x) == action_key(y) else 1,
                            max_order=group.max_order, names=group.names, stop_at_first=True, deadline=deadline,
                            what=[f"the action on space {s}" for s in hidden + [gm.output]])
    if r.too_large:
        return GraphDerivation(False, actions, checks, None, r.order, capped=True, nodes_visited=visited,
                               failure=f"the group has more than {group.max_order} elements")
    ok = r.conflict is None
    return GraphDerivation(ok, actions, checks, ok, r.order, failure=r.conflict, nodes_visited=visited)
