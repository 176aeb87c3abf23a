"""``jacobian-rank`` certificates of a graph model (docs/certificates.md, "Local identifiability of a graph
model"): theta is locally identifiable when the Jacobian of theta -> (f_theta(x_1), ..., f_theta(x_N)) along
the graph has full rank P (an immersion: no orbit tangent is needed).

The certificate names the graph by its ``graph_sha256`` (this checker's own digest of its own reading,
:mod:`symeq_check.graph`), rational points and r = P rows (point * K + output).  The checker recomputes
those rows modulo a prime by its own reverse mode along the graph -- the parameters of every layer, segment
by segment in the file's order: W row-major, then b when the layer declares biases (``"bias": null``
declares none); an addition hands its cotangent to each input, a concatenation splits it, an activation
multiplies it by sigma' -- and eliminates them (the elimination of :mod:`.rank`).  Rank P modulo a prime is
a nonzero P x P minor, so rank P over Q.

Covered: segments of dense layers (a flatten passes), additions and concatenations, polynomial activations or
none.  A certificate of another graph (conv2d, pooling, real activations) is reported as not re-verified
(exit 3), never accepted.
"""
from __future__ import annotations

from operator import mul

from .._numbers import CheckError, _dict, _short
from ..accel import accelerator_name, nmod_rank
from ..graph import graph_digest, read_graph_model
from ..model import Layers, declared_biases
from ..report import CheckReport
from ..schema import check_keys
from .rank import _CHECK_PRIMES, JACOBIAN_PRIME, MAX_JACOBIAN_ROW_WORK, MAX_JACOBIAN_WORK, _jac_mod, _jac_poly, \
    _jac_selection, _rank_mod

#: the keys of a graph's jacobian-rank certificate (the required ones first)
GRAPH_RANK_KEYS = ("format", "method", "verdict", "graph_sha256", "prime", "parameters", "points", "rows", "rank",
                   "input_dim", "seed", "parameter_order", "orbit_dimension")


def is_graph_rank(cert: dict) -> bool:
    """A ``jacobian-rank`` certificate about a graph model (it names the graph by ``graph_sha256``)."""
    return isinstance(cert, dict) and "graph_sha256" in cert


def check_graph_jacobian_rank(cert: dict, model: dict, *, max_group_size: int = 10000) -> CheckReport:
    """Re-verify a graph model's ``jacobian-rank`` certificate (module docstring), standard library only."""
    check_keys(_dict(cert, "certificate"), "certificate", GRAPH_RANK_KEYS, GRAPH_RANK_KEYS[:9], error=CheckError)
    if cert.get("verdict") != "locally-identifiable":
        raise CheckError(f"certificate: a jacobian-rank certificate says \"locally-identifiable\", got "
                         f"{_short(cert.get('verdict'))}")
    if not (isinstance(model, dict) and "graph" in model):
        raise CheckError("the certificate is about a graph model (it has \"graph_sha256\"), the model file is a "
                         "chain: give the graph model it was written for")
    gm = read_graph_model(model)
    report = CheckReport(None, "locally-identifiable")
    if cert["graph_sha256"] != graph_digest(gm):
        report.reasons.append("the certificate's graph_sha256 is not the digest of this graph model: another model")
        report.mismatch = True
        report.accepted = False
        return report
    segments = _segments(report, gm, model)
    if segments is None:
        return report
    P = sum(len(W) * len(W[0]) + (len(W) if b else 0) for layers in segments.values() for W, _, _, b in layers)
    K = gm.nodes[[n.name for n in gm.nodes].index(gm.output)].width
    r = cert.get("rank")
    if cert.get("parameters") != P or r != P:
        report.reasons.append(f"the graph has {P} parameters (the declared biases counted); the certificate says "
                              f"parameters {_short(cert.get('parameters'))}, rank {_short(r)}: only a full rank "
                              "(rank = parameters) is a graph certificate of local identifiability")
        report.accepted = False
        return report
    chosen = _jac_selection(report, cert, gm.n_in, K, P, P)  # the chain's reading (no pivot_columns key here)
    if chosen is None:
        return report
    points, rows, _ = chosen
    if _beyond_limits(report, segments, rows, P):
        return report
    return _verify(report, gm, segments, points, rows, K, P)


def _segments(report: CheckReport, gm, model: dict) -> dict | None:
    """Per segment node, its layers as (W, b, act, declares biases); None (the report not re-verified) when
    the graph has a layer or an activation outside what this module covers."""
    specs = {s["name"]: s.get("layers") for s in model["graph"] if isinstance(s, dict) and "layers" in s}
    out = {}
    for node in gm.nodes:
        if node.kind != "layers":
            if not _polynomial(node.act):
                return _not_covered(report, f"the join {node.name!r} has a non-polynomial activation")
            continue
        layers = node.layers
        flags = declared_biases(Layers(layers, specs[node.name], gm.n_in))  # "bias": null declares none
        got = []
        for j, (layer, b) in enumerate(zip(layers, flags), 1):
            if not layer.dense_matrix or layer.token_mixing or not _polynomial(layer.act):
                return _not_covered(report, f"segment {node.name!r} layer {j} is not a dense layer with a polynomial "
                                            "activation (or none)")
            got.append((layer.weight, layer.bias, layer.act, b))
        out[node.name] = got
    return out


def _polynomial(act) -> bool:
    return act is None or isinstance(act, tuple)


def _not_covered(report: CheckReport, why: str):
    report.checks.append(f"nothing this checker can re-verify: {why}; graph jacobian-rank certificates are "
                         "re-verified for dense layers, additions and concatenations with polynomial activations")
    report.accepted = None
    return None


def _beyond_limits(report: CheckReport, segments: dict, rows: list, P: int) -> bool:
    """Whether recomputing and eliminating the rows is beyond the checker's limits (then nothing is verified)."""
    row_work = len(rows) * 2 * sum(len(W) * len(W[0]) for layers in segments.values() for W, _, _, _ in layers)
    work = len(rows) * P * P
    if row_work <= MAX_JACOBIAN_ROW_WORK and work <= MAX_JACOBIAN_WORK:
        return False
    report.reasons.append(f"beyond the checker's size limit: {len(rows)} rows of {P} parameters need "
                          f"{row_work:.3g} multiplications and {work:.3g} slot operations (limits "
                          f"{MAX_JACOBIAN_ROW_WORK:.3g}, {MAX_JACOBIAN_WORK:.3g}); nothing was verified")
    report.accepted = None
    return True


def _forward(gm, segments: dict, point, p: int) -> tuple:
    """The values mod p per node, and per node what the backward pass needs: a segment's per-layer (input,
    W mod p, slopes), a join's slopes (None: affine)."""
    vals, cache = {"input": [_jac_mod(x, p) for x in point]}, {}
    for node in gm.nodes:
        ins = [vals[i] for i in node.inputs]
        if node.kind != "layers":
            z = [sum(col) % p for col in zip(*ins)] if node.kind == "add" else [v for x in ins for v in x]
            vals[node.name], cache[node.name] = _activate(node.act, z, p)
            continue
        h, steps = ins[0], []
        for W, b, act, _ in segments[node.name]:
            Wp = [[_jac_mod(x, p) for x in row] for row in W]
            z = [(sum(map(mul, row, h)) + _jac_mod(bj, p)) % p for row, bj in zip(Wp, b)]
            out, slopes = _activate(act, z, p)
            steps.append((h, Wp, slopes))
            h = out
        vals[node.name], cache[node.name] = h, steps
    return vals, cache


def _activate(act, z: list, p: int) -> tuple:
    """(sigma(z), sigma'(z)) mod p entrywise; (z, None) without an activation."""
    if act is None:
        return z, None
    c = [_jac_mod(x, p) for x in act]
    dc = [k * x % p for k, x in enumerate(c)][1:] or [0]
    return [_jac_poly(c, v, p) for v in z], [_jac_poly(dc, v, p) for v in z]


def _row(gm, segments: dict, cache: dict, offsets: dict, P: int, k: int, p: int) -> list[int]:
    """d f_k(x) / d theta mod p: the output's k-th cotangent pulled back along the graph."""
    width = {n.name: n.width for n in gm.nodes}
    D = {gm.output: [1 if i == k else 0 for i in range(width[gm.output])]}
    row = [0] * P

    def give(name, d):
        if name != "input":
            D[name] = d if name not in D else [(a + b) % p for a, b in zip(D[name], d)]

    for node in reversed(gm.nodes):
        d = D.pop(node.name, None)
        if d is None:
            continue
        if node.kind != "layers":
            slopes = cache[node.name]
            d = d if slopes is None else [a * s % p for a, s in zip(d, slopes)]
            if node.kind == "add":
                for i in node.inputs:
                    give(i, d)
            else:
                at = 0
                for i in node.inputs:
                    w = gm.n_in if i == "input" else width[i]
                    give(i, d[at:at + w])
                    at += w
            continue
        for (h, Wp, slopes), (W, _, _, has_b), at in zip(reversed(cache[node.name]),
                                                          reversed(segments[node.name]),
                                                          reversed(offsets[node.name])):
            g = d if slopes is None else [a * s % p for a, s in zip(d, slopes)]
            m = len(h)
            for i, gi in enumerate(g):
                if gi:
                    base = at + i * m
                    for j, hj in enumerate(h):
                        row[base + j] = gi * hj % p
            if has_b:
                row[at + len(W) * m:at + len(W) * m + len(W)] = g
            d = [sum(map(mul, col, g)) % p for col in zip(*Wp)]
        give(node.inputs[0], d)
    return row


def _offsets(segments: dict) -> dict:
    """Per segment, where each layer's parameters start in the certificate's parameter order."""
    out, c = {}, 0
    for name, layers in segments.items():
        out[name] = []
        for W, _, _, b in layers:
            out[name].append(c)
            c += len(W) * len(W[0]) + (len(W) if b else 0)
    return out


def _verify(report: CheckReport, gm, segments: dict, points: list, rows: list, K: int, P: int) -> CheckReport:
    """Recompute the certified rows modulo the checker's primes (the certificate's if both fall short) and
    conclude: rank P accepted, else rejected."""
    by_point: dict = {}
    for x in rows:
        by_point.setdefault(x // K, []).append(x % K)
    offsets = _offsets(segments)

    def block(q):
        for n in sorted(by_point):
            _, cache = _forward(gm, segments, points[n], q)
            for k in sorted(by_point[n]):
                yield _row(gm, segments, cache, offsets, P, k, q)

    fast = nmod_rank()
    rank, modulus = None, None
    for q in (*_CHECK_PRIMES, JACOBIAN_PRIME):
        try:
            rank = _rank_mod(block(q), P, q, fast)
        except CheckError:  # q divides a denominator of theta or of a point
            continue
        modulus = q
        if rank == P:
            break
    if modulus is None:
        report.reasons.append("every prime of this checker divides a denominator of theta or of a point")
        report.accepted = False
        return report
    if rank != P:
        report.reasons.append(f"the {len(rows)} certified rows of the Jacobian along the graph have rank "
                              f"{_short(rank)} modulo {_short(modulus)}, not the {P} parameters")
        report.accepted = False
        return report
    report.checks.append(f"{len(rows)} rows of the Jacobian along the graph at {len(points)} rational points "
                         f"recomputed mod {modulus} (this checker's reverse mode: additions hand the cotangent to "
                         f"each input, concatenations split it): rank {P} = the {P} parameters (a nonzero {P} x {P} "
                         "minor modulo a prime: rank over Q = P, an immersion at theta): locally identifiable")
    report.checks.append("the elimination: " + (f"{accelerator_name()} (an optional accelerator)" if fast is not None
                                                else "standard library (packed integers)"))
    report.accepted = True
    return report
