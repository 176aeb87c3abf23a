"""Local identifiability of a graph model by the exact rank of its Jacobian modulo 2^61 - 1.

The chain method of :mod:`symeq.fibre.jacobian` along a graph (docs/graphs.md, docs/identifiability.md
"Graph models"): the parameters are those of every layer node (in file order, each layer's weights then
its declared biases), J = d(f(x_1; theta), ..., f(x_N; theta)) / d theta at N rational points, computed
by reverse mode over ``Modular(2^61 - 1)`` with each kind's own program (``jacobian_program``): one
forward pass along the nodes, then the output cotangents backwards -- an addition hands its cotangent
to every input, a concatenation splits it, a join's activation multiplies it by sigma' -- summed where a
node is read twice (a skip connection).

What the rank proves:

* **rank_p J = P** (every parameter): the map theta -> (f_theta(x_i))_i is an immersion at theta (a
  nonzero P x P minor mod p is a nonzero integer), so it is injective near theta: theta is
  **locally identifiable** -- no other parameter near theta has the same function, whatever the
  latent group.  This needs no orbit tangent.
* **rank_p J < P**: a lower bound only.  When no hidden space carries a continuous latent symmetry
  (every activation's K is finite at theta: tanh and sigmoid series, generic polynomials), no known
  symmetry explains the deficit, and the report says so as *evidence* (``unknown``); when one does
  (a monomial activation's scalings), the orbit tangent along a graph (scalings that must agree across
  an addition) is not computed here, and the status is ``unknown`` with that reason.  No exact family
  (dead units, clones) is looked for on graphs, so ``not-identifiable`` is never claimed here.

Not covered, by name: ReLU and other non-polynomial activations (the chain's symeq.relu.fdim reads chains
only) and kinds without the ``jacobian-rank`` capability (pooling).

A full rank comes with a ``symeq-identifiability/1`` certificate (method ``jacobian-rank``, keyed by the
graph's ``graph_sha256``): the sample points and r independent rows of J.  ``symeq check`` recomputes
those rows along its own reading of the graph, by its own reverse mode modulo a prime, and eliminates
them (symeq_check/identifiability/graph_rank.py; dense layers, additions and concatenations with
polynomial activations; a certificate of a graph with conv2d layers is reported as not re-verified).

>>> from symeq.io import model_from_json
>>> doc = {"format": "symeq-model/1", "input_dim": 2, "graph": [
...   {"name": "a", "input": "input", "layers": [{"type": "dense", "weight": [["1", "2"], ["3", "-1"]],
...     "bias": ["1", "0"], "activation": {"type": "tanh_series", "order": 3}}]},
...   {"name": "b", "input": "a", "layers": [{"type": "dense", "weight": [["2", "1"], ["-1", "1"]],
...     "bias": None, "activation": None}]},
...   {"name": "s", "add": ["a", "b"], "activation": {"type": "tanh_series", "order": 3}},
...   {"name": "out", "input": "s", "layers": [{"type": "dense", "weight": [["1", "1"]], "bias": ["0"],
...     "activation": None}]}]}
>>> r = graph_jacobian_identifiability(model_from_json(doc))
>>> r.status, r.rank, r.n_params
('locally-identifiable', 13, 13)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace

from ..budget import Deadline
from ..errors import BudgetExceeded
from ..layers.base import declared_biases
from ..layers.registry import supports
from ..backends import Denominator, NotPolynomial
from .jacobian import EXTRA_POINTS, MAX_PARAMS, MOD, _continuous, _points, _points_mod, _rank_rows

__all__ = ["GraphRankDecision", "graph_jacobian_identifiability"]


@dataclass
class GraphRankDecision:
    """The answer: ``status`` (locally-identifiable, unknown, not-applicable, undetermined), ``reason``,
    the rank and the parameter count, the points used, and the hidden spaces with a continuous latent
    symmetry (``continuous``)."""

    status: str
    reason: str
    rank: int | None = None
    n_params: int | None = None
    points: int | None = None
    continuous: list = field(default_factory=list)
    seconds: float = 0.0
    certificate: dict | None = field(default=None, repr=False)  # at full rank (module docstring)

    def to_json(self) -> dict:
        return {"method": "jacobian-rank", "status": self.status, "reason": self.reason, "over": "R",
                "rank": self.rank, "n_params": self.n_params, "points": self.points,
                "continuous_symmetries": list(self.continuous), "graph": True,
                "seconds": round(self.seconds, 3)}


def _programs(gm, bk=MOD) -> dict:
    """Each layer node's program over the backend ``bk`` (the kind's ``jacobian_program``; modular by default)."""
    layer_nodes = [n for n in gm.nodes if not n.is_join]
    flags = declared_biases(SimpleNamespace(layers=[n.layer for n in layer_nodes]))
    progs = {}
    for n, bias in zip(layer_nodes, flags):
        if not supports(n.layer, "jacobian-rank"):
            raise _Refused(f"node {n.name} ({n.layer.label}): {n.layer.kind} layers have no Jacobian rows (the "
                           "jacobian-rank capability)")
        try:
            progs[n.name] = n.layer.jacobian_program(bk, bias)
        except NotPolynomial as e:
            raise _Refused(f"node {n.name}: {e}") from None
    return progs


class _Refused(Exception):
    """The method does not apply (the reason names the node)."""


def _join_values(n, vals, bk):
    """A join's pre-activation over the backend ``bk`` (inputs: rows = units, columns = points)."""
    Xs = [vals[i] for i in n.inputs]
    if n.op == "add":
        Z = Xs[0]
        for X in Xs[1:]:
            Z = bk.add(Z, X)
        return Z
    if n.op == "concat":
        return bk.concat(Xs, axis=0)
    raise _Refused(f"node {n.name}: the Jacobian along a graph has no rule for the join op {n.op!r}")


def graph_reverse_jacobian(gm, progs: dict, X, check=None, bk=MOD):
    """J (N K x P, rows point-major) of the graph model ``gm`` at the points X (input x N), over the backend
    ``bk`` of the programs (modulo p by default; float64 for the tests' finite differences)."""
    vals, caches = {"input": X}, {}
    for n in gm.nodes:
        if check is not None:
            check("the forward pass along the graph")
        if n.is_join:
            Z = _join_values(n, vals, bk)
            act = bk.activation(n.activation)
            if act is None:
                vals[n.name], caches[n.name] = Z, None
            else:
                vals[n.name], caches[n.name] = bk.poly(act[0], Z), bk.poly(act[1], Z)
        else:
            vals[n.name], caches[n.name] = progs[n.name].forward(vals[n.inputs[0]], None)
    N, K = X.shape[1], gm.output_dim
    cols, c = {}, 0
    for n in gm.nodes:
        if not n.is_join:
            cols[n.name] = c
            c += progs[n.name].n_params
    J = bk.zeros((N * K, c))
    D = {gm.output: bk.eye_rows(K, N)}

    def give(name, Dn):
        if name != "input":
            D[name] = Dn if name not in D else bk.add(D[name], Dn)

    for n in reversed(gm.nodes):
        if check is not None:
            check("the backward pass along the graph")
        Dn = D.pop(n.name, None)
        if Dn is None:  # pragma: no cover - every node lies on a path to the output (docs/graphs.md)
            continue
        if not n.is_join:
            Din = progs[n.name].backward(caches[n.name], Dn, J, cols[n.name], need_input=n.inputs[0] != "input")
            if Din is not None:
                give(n.inputs[0], Din)
            continue
        S = caches[n.name]
        if S is not None:  # through the join's activation: times sigma'(z), per point and unit
            w = Dn.shape[1]
            Dn = bk.mul(Dn.reshape(N, K, w), bk.permute(S, (1, 0))[:, None, :]).reshape(N * K, w)
        if n.op == "add":
            for i in n.inputs:
                give(i, Dn)
        else:
            at = 0
            for i in n.inputs:
                d = gm.dim(i)
                give(i, Dn[:, at:at + d])
                at += d
    return J


def _continuous_spaces(gm) -> list:
    """The hidden spaces whose activation has continuous scalings (a monomial c (t - s)^d + e), by name."""
    out = []
    for n in gm.nodes:
        act = n.activation if n.is_join else n.layer.activation
        if n.name != gm.output and act is not None and _continuous(act, True, True) is not None:
            out.append(n.name)
    return out


#: the parameter vector of a graph certificate, in words (the checker uses its own order, the same one)
PARAMETER_ORDER = ("per layer node in the file's order (segments in order, their layers in order): W row-major, "
                   "then b when the layer declares biases; joins have none")


def graph_certificate(gm, pts, rows: list, r: int, P: int, seed: int) -> dict:
    """The ``symeq-identifiability/1`` certificate of a full rank along the graph (module docstring)."""
    from ..digest import graph_digest
    from ..graph.io import graph_nodes_json, graph_output_name

    return {"format": "symeq-identifiability/1", "method": "jacobian-rank", "verdict": "locally-identifiable",
            "graph_sha256": graph_digest(graph_nodes_json(gm), gm.input_dim, graph_output_name(gm)),
            "input_dim": gm.input_dim, "prime": str(MOD.p), "seed": seed, "parameters": P,
            "parameter_order": PARAMETER_ORDER, "points": [[str(x) for x in pt] for pt in pts], "rows": rows,
            "rank": r, "orbit_dimension": 0}


def graph_jacobian_identifiability(gm, *, timeout: float | None = None, deadline: Deadline | None = None,
                                   seed: int = 0, threads: int = 2, certificate: bool = True) -> GraphRankDecision:
    """Decide local identifiability of the graph model ``gm`` at its theta (module docstring)."""
    t0 = time.perf_counter()
    deadline = deadline if deadline is not None else Deadline(timeout)

    def done(status, reason, **kw):
        return GraphRankDecision(status, "jacobian-rank (graph): " + reason, seconds=time.perf_counter() - t0, **kw)

    acts = [n.activation if n.is_join else n.layer.activation for n in gm.nodes]
    bad = [a for a in acts if a is not None and not getattr(a, "is_polynomial", False)]
    if bad:
        return done("not-applicable", f"polynomial activations only ({bad[0].name} is not; ReLU networks: "
                                      "symeq.relu.fdim covers chains only)")
    try:
        progs = _programs(gm)
    except _Refused as e:
        return done("not-applicable", str(e))
    P = sum(p.n_params for p in progs.values())
    if P > MAX_PARAMS:
        return done("not-applicable", f"{P} parameters > the size guard {MAX_PARAMS}", n_params=P)
    K = gm.output_dim
    N = -(-P // K) + EXTRA_POINTS
    from ..sizes import check_memory

    width = sum(gm.dim(n.name) for n in gm.nodes)
    check_memory(N * K * P * 56 + 8 * N * (width * (K + 4)), "the Jacobian along the graph modulo p (uint64 "
                 "entries, then python-flint's copy) and the per-node values and cotangents")
    cont = _continuous_spaces(gm)
    try:
        pts = _points(gm.input_dim, N, seed)
        J = graph_reverse_jacobian(gm, progs, _points_mod(pts), deadline.check)
        deadline.check("the rank of the Jacobian modulo p")
        r, rows = _rank_rows(J, certificate, threads)
    except Denominator as e:
        return done("undetermined", f"the prime 2^61-1 divides the denominator of {e}", n_params=P)
    except BudgetExceeded as e:
        return done("undetermined", f"budget exceeded: {e}", n_params=P)
    except _Refused as e:
        return done("not-applicable", str(e), n_params=P)
    kw = dict(rank=r, n_params=P, points=N, continuous=cont)
    if r == P:
        kw["certificate"] = graph_certificate(gm, pts, rows, r, P, seed) if certificate else None
        return done("locally-identifiable", f"rank {r} = {P} parameters at {N} points modulo 2^61-1: the map theta "
                                            "-> f_theta is an immersion at theta, so no other parameter near theta "
                                            "has the same function (over R); the global question stays open", **kw)
    if cont:
        return done("unknown", f"rank {r} < {P} parameters; the hidden spaces {', '.join(cont)} carry continuous "
                               "scalings whose orbit tangent along a graph (scalings that must agree across an "
                               "addition) is not computed here, so the deficit is not decided", **kw)
    return done("unknown", f"rank {r} < {P} parameters and every latent group is finite at theta: a deficit of "
                           f"{P - r} that no known symmetry explains (evidence of a positive-dimensional fibre, not a "
                           "proof: no exact family is looked for on graphs)", **kw)
