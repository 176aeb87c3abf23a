"""``jacobian-rank`` certificates of ``not-identifiable``: an exact family in the fibre (its condition
re-derived from the model) whose tangents, with the orbit's, span more than the orbit's exact dimension.
"""
from __future__ import annotations

from fractions import Fraction

from .._numbers import CheckError, _dict, _is_int, _poly, _short
from ..digest import _digest_differs
from ..model import _Layer, _model, bias_field, declared_biases
from ..report import CheckReport
from ..schema import check_keys
from .rank import JACOBIAN_PRIME, _jac_mod, _jac_rank, _jac_tangents


JACOBIAN_FAMILY_KEYS = ("format", "method", "verdict", "widths", "bias", "layers_sha256", "prime", "parameters",
                        "parameter_order", "family", "orbit_dimension", "orbit_generators", "dimension_lower_bound")
#: the exact (Fraction) rank of the orbit generators is computed up to this many generators x parameters
MAX_FAMILY_ENTRIES = 5 * 10 ** 6


def _fraction_rank(vectors: list[dict]) -> int:
    """Exact rank over Q of sparse vectors {index: Fraction} (Gaussian elimination on dicts)."""
    pivots: dict = {}
    rank = 0
    for v in vectors:
        v = {k: x for k, x in v.items() if x}
        while v:
            k = max(v)
            if k not in pivots:
                pivots[k] = v
                rank += 1
                break
            w = pivots[k]
            f = v[k] / w[k]
            for j, y in w.items():
                t = v.get(j, Fraction(0)) - f * y
                if t:
                    v[j] = t
                else:
                    v.pop(j, None)
    return rank


def _jac_family_tangents(layers, biases, offs, fam) -> tuple[list[dict] | None, str]:
    """The tangents of the named family, re-derived from the model, or (None, why the condition fails).

    ``biases``: per layer, whether it has bias parameters (the declared space); no family moves a missing
    bias: a constant neuron's outgoing weights move into the next bias only when the next layer has one."""
    check_keys(_dict(fam, "certificate.family"), "certificate.family", ("kind", "layer", "neurons"),
               ("kind", "layer", "neurons"))
    kind, li, neurons = fam["kind"], fam["layer"], fam["neurons"]
    if not _is_int(li) or isinstance(li, bool) or not 1 <= li < len(layers):
        return None, f"family layer {_short(li)} is not a hidden layer"
    layer, nxt = layers[li - 1], layers[li]
    n, nin, m = len(layer.weight), len(layer.weight[0]), len(nxt.weight)
    if not isinstance(neurons, list) or not neurons or len(set(map(str, neurons))) != len(neurons) \
            or any(not _is_int(j) or isinstance(j, bool) or not 1 <= j <= n for j in neurons):
        return None, f"family neurons {_short(neurons)} are not distinct neurons of hidden layer {li}"
    js = [j - 1 for j in neurons]
    bias, next_bias = biases[li - 1], biases[li]
    wi, bi, wn, bn = offs[2 * li - 2], offs[2 * li - 1], offs[2 * li], offs[2 * li + 1]
    rows, col = layer.weight, (lambda j: [nxt.weight[k][j] for k in range(m)])
    act = layer.act
    if kind == "dead-neuron" and len(js) == 1:
        j = js[0]
        if any(col(j)):
            return None, f"neuron {j + 1} of hidden layer {li} has a nonzero outgoing weight"
        return [{wi + j * nin + k: Fraction(1)} for k in range(nin)] + ([{bi + j: Fraction(1)}] if bias else []), ""
    if kind == "constant-neuron" and len(js) == 1:
        j = js[0]
        if any(rows[j]):
            return None, f"neuron {j + 1} of hidden layer {li} has a nonzero incoming weight"
        c = _poly(act, layer.bias[j]) if bias else _poly(act, Fraction(0))
        if not next_bias and c:
            return None, f"neuron {j + 1} of hidden layer {li} outputs {c} and layer {li + 1} has no bias to take it"
        vecs = []
        for k in range(m):
            v = {wn + k * n + j: Fraction(1)}
            if next_bias and c:
                v[bn + k] = -c
            vecs.append(v)
        return vecs, ""
    if kind == "clones" and len(js) >= 2:
        j1 = js[0]
        if not any(rows[j1]) or any(rows[j] != rows[j1] or (bias and layer.bias[j] != layer.bias[j1]) for j in js):
            return None, f"neurons {neurons} of hidden layer {li} are not clones (equal nonzero rows and biases)"
        return [{wn + k * n + j1: Fraction(1), wn + k * n + j2: Fraction(-1)} for j2 in js[1:] for k in range(m)], ""
    if kind == "rotation" and len(js) >= 2:
        if not isinstance(act, tuple) or len(act) != 3:
            return None, f"hidden layer {li} has no degree-2 activation"
        e = -act[1] / (2 * act[2])
        if not bias and e:
            return None, f"hidden layer {li}: the activation's centre {e} needs biases"
        ref = col(js[0])
        piv = next((k for k, x in enumerate(ref) if x), None)
        if piv is None:
            return None, f"neuron {neurons[0]} of hidden layer {li} has a zero outgoing column"
        mus = []
        for j in js:
            c = col(j)
            mu = c[piv] / ref[piv]
            if not mu or any(x != mu * y for x, y in zip(c, ref)) or not any(rows[j]):
                return None, f"neuron {j + 1} of hidden layer {li}: outgoing column not a nonzero multiple of " \
                             f"neuron {neurons[0]}'s, or a zero incoming row"
            mus.append(mu)
        u = [list(rows[j]) + ([layer.bias[j] - e] if bias else []) for j in js]
        vecs = []
        for t, j2 in enumerate(js[1:], 1):
            v = {}
            for k in range(nin + (1 if bias else 0)):
                i1 = wi + js[0] * nin + k if k < nin else bi + js[0]
                i2 = wi + j2 * nin + k if k < nin else bi + j2
                if u[t][k]:
                    v[i1] = u[t][k] / mus[0]
                if u[0][k]:
                    v[i2] = -u[0][k] / mus[t]
            vecs.append(v)
        return vecs, ""
    return None, f"unknown family {_short(kind)} with {len(js)} neuron(s)"


def _check_jacobian_family(cert: dict, n_in: int, layers) -> CheckReport:
    """``not-identifiable`` by an exact family in the fibre: its condition is re-derived from the model, and
    the rank of its tangents together with the orbit's (mod p: a lower bound) exceeds the orbit's exact rank."""
    check_keys(cert, "certificate", JACOBIAN_FAMILY_KEYS, JACOBIAN_FAMILY_KEYS, error=CheckError)
    report = CheckReport(None, "not-identifiable")
    if not all(isinstance(l, _Layer) and (l.act is None or isinstance(l.act, tuple)) for l in layers) \
            or any("token-wise" in l.label for l in layers):
        report.reasons.append("jacobian-rank certificates cover dense layers with polynomial activations")
        report.accepted = False
        return report
    if _digest_differs(report, cert.get("layers_sha256"), layers):
        report.accepted = False
        return report
    bias = declared_biases(layers)  # the declared parameter space, per layer (issue 25)
    widths = [n_in] + [len(l.weight) for l in layers]
    P = sum(len(l.weight) * len(l.weight[0]) + (len(l.weight) if b else 0) for l, b in zip(layers, bias))
    for key, want in (("widths", widths), ("bias", bias_field(layers, bias)), ("parameters", P),
                      ("prime", str(JACOBIAN_PRIME))):
        if cert.get(key) != want or isinstance(cert.get(key), bool) != isinstance(want, bool):
            report.reasons.append(f"certificate {key} {_short(cert.get(key))} differs from the model's {want}")
    claim = cert.get("dimension_lower_bound")
    if not _is_int(claim) or isinstance(claim, bool) or claim < 1:
        report.reasons.append(f"dimension_lower_bound {_short(claim)} is not a positive integer")
    if report.reasons:
        report.accepted = False
        return report
    offs, c = [], 0
    for l, b in zip(layers, bias):
        offs.append(c)
        c += len(l.weight) * len(l.weight[0])
        offs.append(c)
        c += len(l.weight) if b else 0
    offs.append(c)
    offs.append(c)
    vecs, why = _jac_family_tangents(layers, bias, offs, cert.get("family"))
    if vecs is None:
        report.reasons.append(f"the family's condition fails: {why}")
        report.accepted = False
        return report
    gens = _jac_tangents(layers, bias, offs)
    if (len(gens) + len(vecs)) * P > MAX_FAMILY_ENTRIES:
        report.reasons.append(f"beyond the checker's size limit: {len(gens) + len(vecs)} tangents x {P} parameters "
                              f"> {MAX_FAMILY_ENTRIES:.3g} (symeq_check.identifiability.family.MAX_FAMILY_ENTRIES); nothing was verified")
        return report
    dim = _fraction_rank([dict(g) for g in gens])
    if cert.get("orbit_dimension") != dim:
        report.reasons.append(f"certificate orbit_dimension {_short(cert.get('orbit_dimension'))} differs from the "
                              f"recomputed {dim}")
    dense = []
    for v in gens + vecs:
        row = [0] * P
        for k, x in v.items():
            row[k] = _jac_mod(x)
        dense.append(row)
    total = _jac_rank(dense, P)
    if total - dim < claim:
        report.reasons.append(f"the family's tangents add {total - dim} dimension(s) to the orbit's {dim}, not "
                              f"{claim}")
    if not report.reasons:
        report.checks.append(f"family {cert['family']['kind']} in hidden layer {cert['family']['layer']} (neurons "
                             f"{cert['family']['neurons']}): its condition holds exactly, so it lies in the fibre")
        report.checks.append(f"its tangents and the orbit's span >= {total} dimensions (rank mod 2^61 - 1) > dim "
                             f"K.theta = {dim} (exact): the fibre is larger than the orbit, by >= {claim}")
    report.accepted = not report.reasons
    return report


def check_jacobian_family(cert: dict, model: dict, *, max_group_size: int = 10000) -> CheckReport:
    """Re-verify a ``jacobian-rank`` certificate of ``not-identifiable`` (an exact family in the fibre)."""
    n_in, layers, _ = _model(model)
    return _check_jacobian_family(cert, n_in, layers)
