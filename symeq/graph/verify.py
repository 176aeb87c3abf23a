"""``symeq verify`` on graph models (docs/graphs.md): layerwise actions, else end-to-end, with a certificate.

1. The actions along the graph (:func:`symeq.graph.derive.derive_graph_actions`): found and checked
   exactly, with the homomorphism -> ``layerwise-equivariant`` (exit 0); composition along the graph
   gives f(g x) = g f(x).
2. Otherwise end-to-end equivariance: for polynomial activations exactly on the principal lattice of the
   graph's degree bound (unisolvent: a proof either way; past :data:`MAX_GRID` points only a refutation is
   looked for); for other activations a rational refutation by exact evaluation where every activation is
   rational there (ReLU), else an arb-ball witness (:func:`symeq.equivariance.refute_with_balls`).  A
   refutation is ``not-equivariant`` (exit 1) with its witness; anything else ``undetermined`` (exit 3).
   An equivariant network without layerwise actions at theta is ``undetermined`` too: the fibre is not
   searched for graphs.

The identifiability premise (``--identifiability``) is the Jacobian rank along the graph (symeq.fibre.graph_rank):
locally identifiable at full rank, undetermined otherwise; the chain methods say they cover chains only.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from math import comb

from flint import fmpq, fmpq_mat

from ..budget import Deadline
from ..digest import graph_digest
from ..equivariance import EquivarianceResult, Witness, principal_lattice, refute_with_balls
from ..errors import InputError, NotExactError
from .io import graph_from_json, graph_nodes_json, graph_output_name, graph_to_json
from ..io import CERTIFICATE_FORMAT
from ..notation import format_cycles
from ..numbers import format_matrix, format_number, monomial_parts
from ..version import __version__
from .derive import GraphDerivation, derive_graph_actions
from .model import GraphModel

__all__ = ["GraphVerification", "verify_graph", "MAX_GRID", "graph_degree"]

MAX_GRID = 20000
"""The most lattice points the end-to-end decision of a polynomial graph evaluates."""

RANDOM_POINTS = 16
"""Rational points tried for a refutation when no proof is in reach."""

# symeq.theorem (same level) imports this module for its graph dispatch, so these few lines are not
# imported from it (no import cycle, tests/test_architecture.py): its exit codes and sparse action form
EXIT_CODES = {"layerwise-equivariant": 0, "not-equivariant": 1, "no-layerwise-parameter": 1, "undetermined": 3}


def action_to_json(M) -> dict:
    """An action's sparse JSON form, as ``symeq.theorem.action_to_json`` writes a chain's (docs/certificates.md).

    >>> from symeq.numbers import matrix
    >>> action_to_json(matrix([[0, -1], [1, 0]]))
    {'kind': 'monomial', 'source': [1, 0], 'factor': ['-1', '1']}
    """
    if hasattr(M, "to_json"):  # a kind's sparse action (conv: ConvAction, "channel-pixel"), as a chain's
        return M.to_json()
    parts = monomial_parts(M)
    if parts is not None:
        return {"kind": "monomial", "source": parts[0], "factor": [format_number(c) for c in parts[1]]}
    return {"kind": "dense", "matrix": format_matrix(M)}


def _versions() -> dict:
    import platform

    import flint
    return {"symeq": __version__, "python-flint": flint.__version__, "python": platform.python_version()}


@dataclass
class GraphVerification:
    """The outcome of :func:`verify_graph` (the fields a chain's ``Verification`` has where they apply)."""

    verdict: str
    model: GraphModel
    group: object
    equivariance: EquivarianceResult
    derivation: GraphDerivation | None
    identifiability: dict
    notes: list = field(default_factory=list)
    seconds: float = 0.0
    steps: list = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        code = EXIT_CODES[self.verdict]
        if code == 0 and self.identifiability.get("status") == "undetermined":
            return EXIT_CODES["undetermined"]
        return code

    def certificate(self, dense: bool = False) -> dict:
        """The graph certificate of docs/graphs.md ("Certificates of graph models")."""
        gm, d = self.model, self.derivation
        hidden = [s for s in gm.hidden_spaces()]
        graph = graph_nodes_json(gm)
        output = graph_output_name(gm)
        eq = self.equivariance.to_json()
        layerwise = self.verdict == "layerwise-equivariant"
        return {
            "format": CERTIFICATE_FORMAT,
            "verdict": self.verdict,
            "theorem": "Shahverdi-Marchetti-Bokman-Kohn 2026, Theorem 4.1 (conclusion at theta), along a graph",
            "model_name": gm.name,
            "equivariance": eq,
            "identifiability": self.identifiability,
            "input_dim": gm.input_dim,
            "group": self.group.to_json(),
            "parameters": {"graph_sha256": graph_digest(graph, gm.input_dim, output), "graph": graph,
                           "output": output, "reparametrized": False},
            "spaces": [s.name for s in hidden],
            "latent_groups": [s.latent for s in hidden],
            "latent_actions": [[action_to_json(m) for m in d.actions[s.name]] for s in hidden]
            if layerwise else None,
            "latent_offsets": None,
            "checks": {
                "nodes": [] if d is None else d.checks,
                "homomorphism": None if d is None else d.homomorphism,
                "group_order": None if d is None else d.group_order,
                "derivation_method": "graph walk (docs/graphs.md)",
                "failure": None if d is None else d.failure,
            },
            "notes": self.notes,
            "versions": _versions(),
        }

    def to_json(self) -> dict:
        out = self.certificate()
        out["seconds"] = round(self.seconds, 3)
        out["exit_code"] = self.exit_code
        return out

    def report(self, matrix: bool = False) -> str:
        gm, eq, d = self.model, self.equivariance, self.derivation
        lines = [f"symeq verify: {gm.name} (graph model, {len(gm.nodes)} nodes)",
                 "  spaces " + ", ".join(f"{s.name} ({s.dim})" for s in gm.spaces()),
                 f"  group: {self.group.label}, generators {', '.join(self.group.names)}", ""]
        if d is not None and d.found:
            lines.append("Actions along the graph (cycles of neurons, numbered from 1):")
            for sp in gm.hidden_spaces():
                for gname, M in zip(self.group.names, d.actions[sp.name]):
                    text = _action_text(M)
                    lines.append(f"  rho_{sp.name}({gname}) = {text}")
            lines.append("Checks (exact):")
            lines += [f"  {r['space']}, {r['generator']}: {'ok' if r['holds'] else 'FAILED'} - {r['detail']}"
                      for r in d.checks]
            lines.append(f"  homomorphism: ok (|G| = {d.group_order})")
        elif d is not None:
            lines.append(f"Actions along the graph: not found ({d.failure})")
        lines.append(f"End-to-end: {'UNDECIDED' if eq.holds is None else 'holds' if eq.holds else 'FAILS'} "
                     f"({eq.method}): {eq.detail}")
        w = eq.witness
        if w is not None and hasattr(w, "lines"):
            lines += w.lines()
        elif w is not None:
            lines.append(f"  witness for generator {w.generator}: x = [{', '.join(map(str, w.x))}]")
            lines.append(f"    f(g x) = [{', '.join(map(str, w.lhs))}]")
            lines.append(f"    g f(x) = [{', '.join(map(str, w.rhs))}]")
        lines.append(f"Identifiability: {self.identifiability['status']} - {self.identifiability['detail']}")
        lines += [f"Note: {n}" for n in self.notes]
        lines.append(f"\nVerdict: {self.verdict} (exit {self.exit_code}; {self.seconds:.2f} s)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _action_text(M) -> str:
    """An action in cycles; a sparse one (conv's ConvAction) as its pixel map and its channels' cycles."""
    if hasattr(M, "describe") and hasattr(M, "source"):
        return f"{M.describe()} on the pixels, channels {format_cycles(list(M.source), list(M.factor))}"
    parts = monomial_parts(M)
    return format_cycles(*parts) if parts is not None else "(not monomial)"


def graph_degree(gm: GraphModel) -> int | None:
    """A bound on the total degree of f (None: some activation is not a polynomial)."""
    deg = {"input": 1}
    for n in gm.nodes:
        d = max(deg[i] for i in n.inputs)
        act = n.act
        if act is not None:
            if not getattr(act, "is_polynomial", False):
                return None
            d *= act.degree
        deg[n.name] = d
    return deg[gm.output]


def _check_points(gm: GraphModel, group, X: fmpq_mat, deadline: Deadline):
    """The first (generator, column, lhs, rhs) where f(A x) != B f(x) on the columns of X, else None."""
    fx = gm.forward(X)
    for gi, (A, B) in enumerate(group.generators):
        deadline.check("checking end-to-end equivariance on the graph")
        lhs, rhs = gm.forward(A * X), B * fx
        if lhs != rhs:
            for c in range(X.ncols()):
                col = [lhs[r, c] for r in range(lhs.nrows())], [rhs[r, c] for r in range(rhs.nrows())]
                if col[0] != col[1]:
                    return gi, c, col[0], col[1]
    return None


def _witness(gm, group, X, hit) -> Witness:
    gi, c, lhs, rhs = hit
    return Witness(group.names[gi], gi, [X[r, c] for r in range(X.nrows())], lhs, rhs)


def end_to_end(gm: GraphModel, group, deadline: Deadline, seed=0) -> EquivarianceResult:
    """Decide f(g x) = g f(x) on the graph where it can be done exactly (see the module docstring)."""
    n, D = gm.input_dim, graph_degree(gm)
    if D is not None and comb(n + D, D) <= MAX_GRID:
        pts = list(principal_lattice(n, D))
        X = fmpq_mat(n, len(pts), [p[i] for i in range(n) for p in pts])
        hit = _check_points(gm, group, X, deadline)
        if hit is not None:
            return EquivarianceResult(False, "grid", witness=_witness(gm, group, X, hit), points=len(pts),
                                      detail=f"fails at a point of the degree-{D} principal lattice")
        return EquivarianceResult(True, "grid", points=len(pts),
                                  detail=f"h_g = 0 on all {len(pts)} points of the principal lattice of degree {D} in "
                                         f"{n} variables, unisolvent for degree <= {D}: a proof")
    rng = random.Random(seed)
    X = fmpq_mat(n, RANDOM_POINTS, [fmpq(rng.randint(-8, 8), rng.choice([1, 2, 4])) for _ in range(n * RANDOM_POINTS)])
    try:
        # in batches of growing size (1, 3, the rest): a broken network is refuted at its first point, and a
        # wide one (exact convolutions at image size) does not pay for all the points at once
        done = 0
        for size in (1, 3, RANDOM_POINTS):
            cols = list(range(done, min(size + done, RANDOM_POINTS)))
            if not cols:
                break
            Xb = fmpq_mat(n, len(cols), [X[i, c] for i in range(n) for c in cols])
            done += len(cols)
            hit = _check_points(gm, group, Xb, deadline)
            if hit is not None:
                return EquivarianceResult(False, "exact-witness", witness=_witness(gm, group, Xb, hit), points=done,
                                          detail="fails at a rational point, evaluated exactly (a proof of failure)")
    except NotExactError:
        res = refute_with_balls(gm, group, deadline=deadline, rng=seed)
        if res is not None:
            return res
    return EquivarianceResult(None, "undetermined",
                              detail="no layerwise actions at theta, and end-to-end equivariance is neither proved nor "
                                     "refuted on this graph (no exact decision covers it)")


def _file_named(gm: GraphModel) -> GraphModel:
    """``gm`` with its nodes named as the spaces of its model file (docs/graphs.md, "Spaces"), which the
    certificate names: a graph built in Python with other names is written and read back once."""
    graph = graph_nodes_json(gm)
    names = []
    for node in graph:
        k = len(node.get("layers", ()))
        names += [f"{node['name']}.{j}" for j in range(1, k)] + [node["name"]]
    if names == [n.name for n in gm.nodes]:
        return gm
    data = graph_to_json(gm, include_group=False)
    out = graph_from_json(data, gm.input_dim)
    return out.with_group(gm.group) if gm.group is not None else out


def _graph_identifiability(gm: GraphModel, deadline) -> dict:
    """The identifiability premise on a graph: the Jacobian rank along the graph (symeq.fibre.graph_rank)
    proves local identifiability where its rank is full; the chain methods do not cover graphs."""
    from ..fibre.graph_rank import graph_jacobian_identifiability

    d = graph_jacobian_identifiability(gm, deadline=deadline, certificate=False)
    status = "locally-identifiable" if d.status == "locally-identifiable" else "undetermined"
    return {"status": status, "detail": d.reason + ("" if status != "undetermined" else
                                                    "; the other methods (affine, classical, tensor, groebner) "
                                                    "cover chains only (docs/limits.md)"), "result": d.to_json()}


def verify_graph(gm: GraphModel, group=None, *, timeout: float | None = None, identifiability: bool = False,
                 max_tie_nodes: int = 100000, seed: int | None = 0, **_ignored) -> GraphVerification:
    """Verify the conclusion of Theorem 4.1 along a graph model (see the module docstring)."""
    t0 = time.monotonic()
    group = group if group is not None else gm.group
    if group is None:
        raise InputError("no group given: put a \"group\" in the model file or pass one (--group)")
    if not gm.exact:
        raise InputError("symeq verify takes exact graph models; this one has float layers")
    gm = _file_named(gm)
    gm._check_group(group)
    group.validate()
    deadline = Deadline(timeout)
    ident = {"status": "not-checked", "detail": "pass identifiability=True (--identifiability) to decide it"}
    if identifiability:
        ident = _graph_identifiability(gm, deadline)
    d = derive_graph_actions(gm, group, deadline, max_nodes=max_tie_nodes)
    steps = [("graph_actions", None if d.found else d.failure)]
    if d.found:
        eq = EquivarianceResult(True, "layerwise along the graph", detail="every node is equivariant for the derived "
                                "actions and g -> rho_s(g) is a homomorphism: composition along the graph")
        verdict = "layerwise-equivariant"
    else:
        eq = end_to_end(gm, group, deadline, seed)
        steps.append(("graph_end_to_end", None))
        verdict = "not-equivariant" if eq.holds is False else "undetermined"
    notes = [] if d.found else [f"no layerwise actions at theta: {d.failure}"]
    if verdict == "undetermined" and eq.holds:
        notes.append("f is G-equivariant, but without layerwise actions at theta; the fibre is not searched for "
                     "graph models")
    return GraphVerification(verdict, gm, group, eq, d, ident, notes, time.monotonic() - t0, steps)
