"""``symeq-identifiability/1`` of method ``jacobian-factors``: deep networks with polynomial activations,
two or three hidden layers (docs/identifiability.md, "Deep networks"); every hypothesis of the theorem is
re-derived from the model, the theorem itself is the trusted part.
"""
from __future__ import annotations

from fractions import Fraction
from math import comb, factorial, gcd

from .._numbers import _dict, _is_int, _short, parse_number
from ..algebra import _int_columns, _minor_nonzero
from ..model import _Layer, uniform_bias
from ..report import CheckReport
from ..schema import IDENTIFIABILITY_FORMAT, MODEL_FORMAT, _strict
from .tensor import _open_identifiability, check_tensor


# ----------------------------------------------------------------------------- deep: Jacobian factors
# Two hidden layers, monomial activations c t^r (r >= 2; c (t - s)^r + kappa when the model has
# biases), widths (n0, n, n, n3) with n0 >= n <= n3: if W_1, W_2, W_3 have rank n and every row j of
# W_2 has >= 3 nonzero entries, or 2 with beta_j = b_2j + kappa_1 (row sum) - s_2 != 0, or 1 with
# beta_j = 0, the fibre is the
# orbit (docs/identifiability.md, "Deep networks", where the theorem is proved).  Three hidden layers
# (bias-free): the same for W_3's rows, and r_1^(|V_j| - 2) != r_2 for the rows of W_3 with >= 3
# entries (V_j: the columns of W_2 reached).  The checker re-verifies every hypothesis from the model;
# the theorem itself is the trusted part.

DEEP_METHOD = "jacobian-factors"
# the schemas (written by symeq.fibre.deep): every key is required (each one is read)
_DEEP_COMMON = ("format", "method", "verdict", "widths", "bias", "full_rank", "w2_row_supports", "orbit_size",
                "orbit_dimension")
DEEP_KEYS = {"monomial": _DEEP_COMMON + ("degrees", "w2_centred_biases"),
             "general": _DEEP_COMMON + ("activations", "layers"),
             "widening": _DEEP_COMMON + ("degrees", "w2_centred_biases", "top"),
             "widening-general": _DEEP_COMMON + ("activations", "layers", "top"),
             "widening3": _DEEP_COMMON + ("degrees", "tail"),
             "widening3-general": _DEEP_COMMON + ("activations", "layers", "tail")}
DEEP_W3_KEYS = ("w3_row_supports", "w3_row_spans")  # three hidden layers
DEEP_LAYER_KEYS = ("degree", "centre", "g", "lambdas")


def _monomial_degree(act, bias: bool):
    """(r, s, kappa) when the activation is c t^r with r >= 2 -- or, with biases (which absorb s and
    kappa), c (t - s)^r + kappa -- else None."""
    if not isinstance(act, tuple) or len(act) < 3 or act[-1] == 0:
        return None
    d = len(act) - 1
    s = -act[d - 1] / (d * act[d])
    tau = [sum((act[m] * comb(m, j) * s ** (m - j) for m in range(j, d + 1)), Fraction(0)) for j in range(d)]
    if any(t != 0 for t in tau[1:]) or (not bias and (s != 0 or tau[0] != 0)):
        return None
    return d, s, tau[0]


def _deep_full_rank(report: CheckReport, cert: dict, Ws: list, hidden: int, n: int) -> bool:
    """Every weight matrix of a deep certificate has rank n: a nonzero n x n minor at the columns
    (first ``hidden`` matrices) or rows (the last) the certificate names, recomputed here."""
    proofs = _dict(cert.get("full_rank"), "full_rank")
    mats = [(f"W{k}_columns", Ws[k - 1], f"W_{k}") for k in range(1, hidden + 1)]
    mats.append((f"W{hidden + 1}_rows", [list(c) for c in zip(*Ws[hidden])], f"W_{hidden + 1}"))
    _strict(proofs, "certificate.full_rank", [key for key, _, _ in mats])
    if set(proofs) != {key for key, _, _ in mats}:
        report.reasons.append(f"full_rank must prove exactly {[key for key, _, _ in mats]}")
        return False
    for key, rows, what in mats:
        cols = proofs.get(key)
        if not isinstance(cols, list) or len(cols) != n or not all(_is_int(c) for c in cols) \
                or len(set(cols)) != n or not all(0 <= c < len(rows[0]) for c in cols):
            report.reasons.append(f"full_rank.{key} must list {n} distinct indices of {what}")
            return False
        if not _minor_nonzero(_int_columns([[r[c] for c in cols] for r in rows])):
            report.reasons.append(f"full_rank.{key}: the {n} x {n} minor of {what} at {cols} is zero")
            return False
    return True


def _deep_w3_rows(report: CheckReport, cert: dict, Ws: list):
    """(supports, spans) of W_3's rows, recomputed and compared with the certificate's (None: differ)."""
    sup3 = [sum(1 for x in r if x != 0) for r in Ws[2]]
    spans = [len({c for i, x in enumerate(r) if x != 0 for c, y in enumerate(Ws[1][i]) if y != 0}) for r in Ws[2]]
    if cert.get("w3_row_supports") != sup3 or cert.get("w3_row_spans") != spans:
        report.reasons.append(f"w3_row_supports/w3_row_spans {_short(cert.get('w3_row_supports'))}/"
                              f"{_short(cert.get('w3_row_spans'))} differ from the model's {sup3}/{spans}")
        return None
    return sup3, spans


def _deep_declared_bias(report: CheckReport, cert: dict, layers):
    """The model's bias declaration (True or False), the same in every layer and the certificate's
    ``bias``; None (a reason added) when the layers differ or the certificate says otherwise."""
    bias = uniform_bias(layers)  # the declared parameter space: one declaration for every layer (issue 25)
    if bias is None:
        report.reasons.append("the Jacobian-factor certificates take biases in every layer or in none; this model "
                              "declares them in some layers only")
        return None
    if cert.get("bias") is not bias:
        report.reasons.append(f"certificate bias {_short(cert.get('bias'))} differs from the model's {bias}")
        return None
    return bias


def check_deep(cert: dict, model: dict, *, max_group_size: int = 10000) -> CheckReport:
    """Re-verify a ``symeq-identifiability/1`` certificate of method ``jacobian-factors`` (deep networks).

    The certificate's keys choose its theorem (equal widths, a widening top block, a widening tail, general
    polynomial activations); every hypothesis is re-derived from the model.  (``max_group_size`` is the
    dispatch's common keyword: no group is enumerated here.)
    """
    n_in, layers, report = _open_identifiability(cert, model)
    general = cert.get("activations") == "general"
    kind = (("widening-general" if general else "widening") if "top" in cert
            else ("widening3-general" if general else "widening3") if "tail" in cert
            else "general" if general else "monomial")
    _strict(cert, "certificate", DEEP_KEYS[kind] + (DEEP_W3_KEYS if len(layers) == 4 else ()))
    for i, entry in enumerate(cert.get("layers") if general and isinstance(cert.get("layers"), list)
                              else ()):
        _strict(entry, f"certificate.layers[{i}]", DEEP_LAYER_KEYS)
    _check_ident_deep(report, cert, n_in, layers)
    report.accepted = not report.reasons
    return report


def _check_ident_deep(report: CheckReport, cert: dict, n_in: int, layers) -> None:
    if cert.get("verdict") != "identifiable":
        report.reasons.append("a jacobian-factors certificate can only prove 'identifiable'")
        return
    hidden = len(layers) - 1
    if hidden not in (2, 3) or not all(isinstance(l, _Layer) for l in layers) or layers[-1].act is not None:
        report.reasons.append("a jacobian-factors certificate covers two or three hidden dense layers and an affine "
                              "output")
        return
    widths = [n_in] + [len(l.weight) for l in layers]
    if cert.get("widths") != widths:
        report.reasons.append(f"certificate widths {_short(cert.get('widths'))} differ from the model's {widths}")
        return
    n = widths[1]
    if "top" in cert:  # two hidden layers widening n < n2 <= n3
        _check_ident_deep_widening(report, cert, widths, layers)
        return
    if "tail" in cert:  # three hidden layers, the last widening
        _check_ident_deep_widening3(report, cert, widths, layers)
        return
    if any(w != n for w in widths[1:-1]) or widths[0] < n or widths[-1] < n:
        report.reasons.append(f"widths {widths} are not (n0, n, ..., n, nL) with n0 >= n <= nL")
        return
    bias = uniform_bias(layers)  # the declared parameter space: one declaration for every layer (issue 25)
    if bias is None:
        report.reasons.append("the Jacobian-factor certificates take biases in every layer or in none; this model "
                              "declares them in some layers only")
        return
    if cert.get("activations") == "general":  # any polynomial activations, two hidden layers
        _check_ident_deep_general(report, cert, n, bias, layers)
        return
    if hidden == 3 and bias:
        report.reasons.append("three hidden layers are certified only without biases")
        return
    mono = [_monomial_degree(l.act, bias) for l in layers[:-1]]
    if None in mono:
        report.reasons.append("a hidden activation is not a monomial c t^r with r >= 2 (c (t - s)^r with biases)")
        return
    degs = [r for r, _, _ in mono]
    if cert.get("degrees") != degs or not all(_is_int(r) for r in cert.get("degrees")):
        report.reasons.append(f"certificate degrees {_short(cert.get('degrees'))} differ from the model's {degs}")
        return
    if cert.get("bias") is not bias:
        report.reasons.append(f"certificate bias {_short(cert.get('bias'))} differs from the model's {bias}")
        return
    report.checks.append(f"{hidden} hidden layers, widths {widths}, {'biases' if bias else 'no biases'}, monomial "
                         f"activations of degrees {degs}")
    Ws = [[list(r) for r in l.weight] for l in layers]
    if not _deep_full_rank(report, cert, Ws, hidden, n):
        return
    report.checks.append(f"every weight matrix has rank {n} (nonzero {n} x {n} minors at the indices given)")
    supports = [sum(1 for x in r if x != 0) for r in Ws[1]]
    if cert.get("w2_row_supports") != supports:
        report.reasons.append(f"w2_row_supports {_short(cert.get('w2_row_supports'))} differ from the model's "
                              f"{supports}")
        return
    # sigma_1's constant kappa_1 reaches layer 2 through W_2: beta_j = b_2j + kappa_1 (row sum) - s_2
    betas = [b + mono[0][2] * sum(row, Fraction(0)) - mono[1][1] for b, row in zip(layers[1].bias, Ws[1])]
    listed = cert.get("w2_centred_biases")
    if not isinstance(listed, list) or len(listed) != n or \
            [parse_number(b, "w2_centred_biases") for b in listed] != betas:
        report.reasons.append(f"w2_centred_biases {_short(listed)} are not b_2 + kappa_1 W_2 1 - s_2 of the model")
        return
    bad = [j for j, (s, b) in enumerate(zip(supports, betas)) if s == 0 or (s == 2 and b == 0) or (s == 1 and b != 0)]
    if bad:
        report.reasons.append(f"rows {bad} of W_2: not >= 3 nonzero entries, 2 with b_2j != s_2, or 1 with b_2j = s_2")
        return
    report.checks.append("every row of W_2 has >= 3 nonzero entries, 2 with a bias off the centre or 1 with the bias "
                         "at the centre: its pre-activation has no degree-1 factor but a first-layer pre-activation")
    if hidden == 3:
        rows3 = _deep_w3_rows(report, cert, Ws)
        if rows3 is None:
            return
        sup3, spans = rows3
        bad = [j for j, (s, v) in enumerate(zip(sup3, spans))
               if s in (0, 2) or (s >= 3 and degs[0] ** (v - 2) == degs[1])]
        if bad:
            report.reasons.append(f"rows {bad} of W_3: not 1 or >= 3 nonzero entries, or r_1^(|V_j| - 2) = r_2")
            return
        report.checks.append("every row of W_3 has 1 or >= 3 nonzero entries, and r_1^(|V_j| - 2) != r_2 for the "
                             "latter (V_j: the first-layer neurons it reaches through W_2): no third-layer "
                             "pre-activation has a linear factor but a first-layer pre-activation")
    dim = hidden * n
    if cert.get("orbit_size") is not None or not _is_int(cert.get("orbit_dimension")) \
            or cert.get("orbit_dimension") != dim:
        report.reasons.append(f"orbit: expected a torus of dimension {dim} (orbit_size null), got "
                              f"{_short(cert.get('orbit_size'))}/{_short(cert.get('orbit_dimension'))}")
        return
    report.checks.append(f"fibre = orbit: a torus of dimension {dim} times S_{n}^{hidden} (Jacobian-factor theorem)")


def _check_ident_deep_widening(report: CheckReport, cert: dict, widths: list, layers) -> None:
    """Two hidden layers widening, widths (n0, n, n2, n3) with n0 >= n < n2 <= n3, monomial activations
    (docs/identifiability.md, "Deep networks, a widening last hidden layer"): rank W_1 = rank W_2 = n and
    rank W_3 = n2 (nonzero minors at the indices given), the rows of W_2 as for equal widths, and the
    top block u -> W_3 s_2(W_2 u + b_2 + kappa_1 W_2 1) + b_3 identifiable by its own one-hidden-layer
    certificate, re-checked here against the top block built from the model."""
    n0, n, n2, n3 = widths if len(widths) == 4 else (0, 1, 0, 0)
    if len(layers) != 3 or not (n0 >= n < n2 <= n3):
        report.reasons.append(f"a widening certificate covers two hidden layers of widths (n0, n, n2, n3) with "
                              f"n0 >= n < n2 <= n3, not {widths}")
        return
    bias = _deep_declared_bias(report, cert, layers)
    if bias is None:
        return
    general = cert.get("activations") == "general"
    lam1 = None
    if general:  # any polynomial activations: the first layer's scalings, recomputed
        if not all(isinstance(l.act, tuple) and len(l.act) >= 3 and l.act[-1] != 0 for l in layers[:-1]):
            report.reasons.append("a hidden activation is not a polynomial of degree >= 2")
            return
        lam1 = _deep_first_scalings(report, cert, layers[0].act, bias)
        if lam1 is None:
            return
        mono = None
    else:
        mono = [_monomial_degree(l.act, bias) for l in layers[:-1]]
        if None in mono:
            report.reasons.append("a hidden activation is not a monomial c t^r with r >= 2 (c (t - s)^r with biases)")
            return
        degs = [r for r, _, _ in mono]
        if cert.get("degrees") != degs:
            report.reasons.append(f"certificate degrees {_short(cert.get('degrees'))} differ from the model's {degs}")
            return
    Ws = [[list(r) for r in l.weight] for l in layers]
    proofs = _dict(cert.get("full_rank"), "full_rank")
    _strict(proofs, "certificate.full_rank", ["W1_columns", "W2_rows", "W3_rows"])
    for key, rows, k, what in (("W1_columns", Ws[0], n, "W_1"), ("W2_rows", [list(c) for c in zip(*Ws[1])], n, "W_2"),
                               ("W3_rows", [list(c) for c in zip(*Ws[2])], n2, "W_3")):
        idx = proofs.get(key)
        if not isinstance(idx, list) or len(idx) != k or not all(_is_int(c) for c in idx) or len(set(idx)) != k \
                or not all(0 <= c < len(rows[0]) for c in idx):
            report.reasons.append(f"full_rank.{key} must list {k} distinct indices of {what}")
            return
        if not _minor_nonzero(_int_columns([[r[c] for c in idx] for r in rows])):
            report.reasons.append(f"full_rank.{key}: the {k} x {k} minor of {what} at {idx} is zero")
            return
    report.checks.append(f"rank W_1 = rank W_2 = {n} and rank W_3 = {n2} (nonzero minors at the indices given): "
                         "W_3 is injective")
    supports = [sum(1 for x in r if x != 0) for r in Ws[1]]
    if cert.get("w2_row_supports") != supports:
        report.reasons.append("w2_row_supports differ from the model's")
        return
    if general:
        kappa1 = Fraction(0)  # the top block's input is sigma_1(z) itself
        if min(supports) < 3:
            report.reasons.append("every row of W_2 needs >= 3 nonzero entries (general activations)")
            return
        report.checks.append("every row of W_2 has >= 3 nonzero entries: no second pre-activation minus a root of "
                             "sigma_2' has a degree-1 factor")
    else:
        kappa1 = mono[0][2]
        betas = [b + kappa1 * sum(row, Fraction(0)) - mono[1][1] for b, row in zip(layers[1].bias, Ws[1])]
        listed = cert.get("w2_centred_biases")
        if not isinstance(listed, list) or len(listed) != n2 or \
                [parse_number(b, "w2_centred_biases") for b in listed] != betas:
            report.reasons.append("w2_centred_biases differ from the model's")
            return
        bad = [j for j, (s, b) in enumerate(zip(supports, betas))
               if s == 0 or (s == 2 and b == 0) or (s == 1 and b != 0)]
        if bad:
            report.reasons.append(f"rows {bad} of W_2: not >= 3 nonzero entries, 2 with b_2j != s_2, or 1 with "
                                  "b_2j = s_2")
            return
        report.checks.append("every row of W_2 has >= 3 nonzero entries, 2 with a bias off the centre or 1 with the "
                             "bias at the centre: the Jacobian's maximal minors have no degree-1 factor but the first "
                             "layer's")
    b2 = [b + kappa1 * sum(row, Fraction(0)) for b, row in zip(layers[1].bias, Ws[1])]
    if bias and not any(b2) and not any(layers[2].bias):
        report.reasons.append("the top block has no nonzero bias, so its certificate covers bias-free parameters only")
        return

    top_model = {"format": MODEL_FORMAT, "input_dim": n, "layers": [
        {"type": "dense", "weight": [_vec(r) for r in Ws[1]], "bias": _vec(b2) if bias else None,
         "activation": {"type": "polynomial", "coeffs": _vec(layers[1].act)}},
        {"type": "dense", "weight": [_vec(r) for r in Ws[2]], "bias": _vec(layers[2].bias) if bias else None}]}
    top = _dict(cert.get("top"), "certificate.top")
    if top.get("format") != IDENTIFIABILITY_FORMAT:
        report.reasons.append(f"certificate.top: format must be {IDENTIFIABILITY_FORMAT!r}, got "
                              f"{_short(top.get('format'))}")
        return
    if top.get("method") is not None or top.get("verdict") != "identifiable":
        report.reasons.append("certificate.top must be a one-hidden-layer (Kruskal) certificate of 'identifiable'")
        return
    orbit = _sub_block_orbit(report, cert, check_tensor(top, top_model), "the top block", "the top block u -> W_3 "
                             "s_2(W_2 u + b_2 + kappa_1 W_2 1) + b_3 (built here from the model)", n, lam1, top)
    if orbit is None:
        return
    size, dim = orbit
    report.checks.append(f"fibre = orbit: dimension {dim} (first layer pinned by the Jacobian's degree-1 factors, "
                         "then the top block's identifiability)")


def _vec(v) -> list:
    """A vector as the model file writes it: each number a string."""
    return [str(x) for x in v]


def _sub_block_orbit(report: CheckReport, cert: dict, sub: CheckReport, block: str, built: str, n: int, lam1,
                     sub_cert: dict):
    """The sub-block's own check ``sub`` (``block``: "the top block" or "the tail", ``built``: what it
    is), then the orbit: a first hidden layer of width n (scalings ``lam1``: None or "all" for a torus,
    else a list) times the sub-block's, as ``sub_cert`` gives it.  (size, dimension) when the
    certificate's orbit is that one (the size a string, None when infinite), else None (a reason added)."""
    if not sub.accepted:
        report.reasons.append(f"{block}'s certificate fails: " + "; ".join(sub.reasons))
        return None
    report.checks.append(f"{built} is identifiable: " + "; ".join(sub.checks))
    continuous = lam1 is None or lam1 == "all"
    dim = (n if continuous else 0) + sub_cert.get("orbit_dimension") if _is_int(sub_cert.get("orbit_dimension")) \
        else None
    size = None
    if not continuous and isinstance(sub_cert.get("orbit_size"), str):
        size = str(factorial(n) * len(lam1) ** n * int(sub_cert["orbit_size"]))
    if dim is None or cert.get("orbit_size") != size or cert.get("orbit_dimension") != dim:
        report.reasons.append(f"orbit: expected size {size} and dimension {dim} (the first layer's and {block}'s)")
        return None
    return size, dim


def _deep_first_scalings(report: CheckReport, cert: dict, act, bias: bool):
    """The first hidden layer's scalings (general activations), recomputed and compared with the
    certificate's single ``layers`` entry: the scalings ("all" or a list), or None (a reason added)."""
    got = _deep_layer_scalings(act, bias)
    if isinstance(got, str):
        report.reasons.append(f"hidden layer 1: {got}")
        return None
    m1, mu1, g1, lam1 = got
    listed = cert.get("layers")
    entry = listed[0] if isinstance(listed, list) and len(listed) == 1 and isinstance(listed[0], dict) else {}
    el = entry.get("lambdas")
    ok = (_is_int(entry.get("degree")) and entry.get("degree") == m1 and _is_int(entry.get("g"))
          and entry.get("g") == g1 and isinstance(entry.get("centre"), str)
          and parse_number(entry.get("centre"), "centre") == mu1
          and (el == "all" if lam1 == "all" else isinstance(el, list) and [parse_number(x, "lambda") for x in el] == lam1))
    if not ok:
        report.reasons.append(f"layers must list the first hidden layer's recomputed degree {m1}, centre {mu1}, "
                              f"g = {g1} and scalings {lam1 if lam1 == 'all' else [str(x) for x in lam1]}")
        return None
    report.checks.append("the first layer's scalings that can occur are "
                         f"{lam1 if lam1 == 'all' else [str(x) for x in lam1]}, each a symmetry of its activation")
    return lam1


def _check_ident_deep_widening3(report: CheckReport, cert: dict, widths: list, layers) -> None:
    """Three hidden layers, the last widening: widths (n0, n, n, n3, n4) with n0 >= n < n3 <= n4
    (docs/identifiability.md, "Deep networks, a widening last hidden layer"): the first layer's rank, the
    rows of W_2 and W_3 as for three equal hidden layers, and the tail (two hidden layers on C^n) by
    its own widening certificate, re-checked against the tail built from the model."""
    if len(layers) != 4 or len(widths) != 5 or not (widths[0] >= widths[1] == widths[2] < widths[3] <= widths[4]):
        report.reasons.append(f"a three-layer widening certificate covers widths (n0, n, n, n3, n4) with "
                              f"n0 >= n < n3 <= n4, not {widths}")
        return
    n = widths[1]
    bias = _deep_declared_bias(report, cert, layers)
    if bias is None:
        return
    general = cert.get("activations") == "general"
    if not all(isinstance(l.act, tuple) and len(l.act) >= 3 and l.act[-1] != 0 for l in layers[:-1]):
        report.reasons.append("a hidden activation is not a polynomial of degree >= 2")
        return
    lam1 = None
    if general:
        lam1 = _deep_first_scalings(report, cert, layers[0].act, bias)
        if lam1 is None:
            return
    else:
        mono = [_monomial_degree(l.act, False) for l in layers[:-1]]
        if bias or None in mono or cert.get("degrees") != [r for r, _, _ in mono]:
            report.reasons.append("three monomial hidden layers are certified without biases, with the model's "
                                  "degrees")
            return
    Ws = [[list(r) for r in l.weight] for l in layers]
    proofs = _dict(cert.get("full_rank"), "full_rank")
    _strict(proofs, "certificate.full_rank", ["W1_columns"])
    idx = proofs.get("W1_columns")
    if not isinstance(idx, list) or len(idx) != n or not all(_is_int(c) for c in idx) or len(set(idx)) != n \
            or not all(0 <= c < widths[0] for c in idx) or \
            not _minor_nonzero(_int_columns([[r[c] for c in idx] for r in Ws[0]])):
        report.reasons.append(f"full_rank.W1_columns must name {n} columns of W_1 with a nonzero minor")
        return
    sup2 = [sum(1 for x in r if x != 0) for r in Ws[1]]
    rows3 = _deep_w3_rows(report, cert, Ws)
    if rows3 is None or cert.get("w2_row_supports") != sup2:
        if rows3 is not None:
            report.reasons.append("w2_row_supports differ from the model's")
        return
    sup3, spans = rows3
    bad = [s for s in sup2 + sup3 if (s < 3 if general else s in (0, 2))]
    m1, m2 = len(layers[0].act) - 1, len(layers[1].act) - 1
    h5 = [j for j, (s, v) in enumerate(zip(sup3, spans)) if s >= 3 and m1 ** (v - 2) == m2]
    if bad or h5:
        report.reasons.append("rows of W_2 or W_3: " + (">= 3" if general else "1 or >= 3") + " nonzero entries, and "
                              "m_1^(|V_j| - 2) != m_2 for the rows of W_3 with >= 3")
        return
    report.checks.append(f"rank W_1 = {n}; the rows of W_2 and W_3 have " + (">= 3" if general else "1 or >= 3")
                         + " nonzero entries and m_1^(|V_j| - 2) != m_2: with W_4 injective (checked in the tail) the "
                           "Jacobian's maximal minors have no degree-1 factor but the first layer's")

    tail_model = {"format": MODEL_FORMAT, "input_dim": n, "layers": [
        {"type": "dense", "weight": [_vec(r) for r in Ws[k]], "bias": _vec(layers[k].bias) if bias else None,
         "activation": {"type": "polynomial", "coeffs": _vec(layers[k].act)}} for k in (1, 2)] + [
        {"type": "dense", "weight": [_vec(r) for r in Ws[3]], "bias": _vec(layers[3].bias) if bias else None}]}
    if bias and not any(x != 0 for l in layers[1:] for x in l.bias):
        report.reasons.append("the tail has no nonzero bias, so its certificate covers bias-free parameters only")
        return
    tail = _dict(cert.get("tail"), "certificate.tail")
    if tail.get("format") != IDENTIFIABILITY_FORMAT or tail.get("method") != DEEP_METHOD or "top" not in tail:
        report.reasons.append("certificate.tail must be a widening jacobian-factors certificate")
        return
    orbit = _sub_block_orbit(report, cert, check_deep(tail, tail_model), "the tail",
                             "the tail (two hidden layers on C^n, built here from the model)", n, lam1, tail)
    if orbit is None:
        return
    size, dim = orbit
    report.checks.append("fibre = orbit: " + (f"{size} points" if size else f"dimension {dim}"))


def _shifted_coeffs(act, lam: Fraction, c: Fraction) -> list:
    """Coefficients of s(lam t + c) (Taylor expansion in Fractions)."""
    d = len(act) - 1
    return [sum((act[m] * comb(m, j) * lam ** j * c ** (m - j) for m in range(j, d + 1)), Fraction(0))
            for j in range(d + 1)]


def _deep_layer_scalings(act, bias: bool):
    """(degree, centre, g, lambdas) of one hidden layer for the general Jacobian-factor theorem, or a
    failure text: lambda^g = 1 with g = gcd{m - j : tau_j != 0, 1 <= j < m} (tau(u) = s(u + centre));
    "all" for g = 0; without biases lambda = 1 only when the centre is nonzero."""
    if not isinstance(act, tuple) or len(act) < 3 or act[-1] == 0:
        return "a hidden activation is not a polynomial of degree >= 2"
    m = len(act) - 1
    mu = -act[m - 1] / (m * act[m])
    tau = _shifted_coeffs(act, Fraction(1), mu)
    g = 0
    for j in range(1, m):
        if tau[j] != 0:
            g = gcd(g, m - j)
    if g == 0:
        if bias or (mu == 0 and tau[0] == 0):
            return m, mu, g, "all"
        return (m, mu, g, [Fraction(1)]) if mu != 0 else "a constant without biases"
    if not bias and mu != 0:
        return m, mu, g, [Fraction(1)]
    if g >= 3:
        return f"lambda^{g} = 1 has complex solutions"
    lams = [Fraction(1), Fraction(-1)] if g == 2 else [Fraction(1)]
    for lam in lams:
        # the scaling is a symmetry: s(lam t + mu (1 - lam)) = lam^m s(t) + beta (beta = 0 without biases)
        c = mu * (1 - lam)
        lhs, alpha = _shifted_coeffs(act, lam, c), lam ** m
        beta = lhs[0] - alpha * act[0]
        if any(lhs[j] != alpha * act[j] for j in range(1, m + 1)) or (not bias and (c != 0 or beta != 0)):
            return f"lambda = {lam} is not a symmetry of the activation{'' if bias else ' without biases'}"
    return m, mu, g, lams


def _check_ident_deep_general(report: CheckReport, cert: dict, n: int, bias: bool, layers) -> None:
    """Two or three hidden layers with general polynomial activations (docs/identifiability.md, "Deep
    networks, general activations"): the scalings per layer, the full ranks, >= 3 entries per row of W_2
    (and W_3), m_1^(|V_j| - 2) != m_2 for three hidden layers, the orbit."""
    hidden = len(layers) - 1
    if hidden not in (2, 3):
        report.reasons.append("a general-activation jacobian-factors certificate covers two or three hidden layers")
        return
    if cert.get("bias") is not bias:
        report.reasons.append(f"certificate bias {_short(cert.get('bias'))} differs from the model's {bias}")
        return
    listed = cert.get("layers")
    if not isinstance(listed, list) or len(listed) != hidden:
        report.reasons.append(f"layers must describe the {hidden} hidden layers")
        return
    lams = []
    for i, (layer, entry) in enumerate(zip(layers, listed)):
        got = _deep_layer_scalings(layer.act, bias)
        if isinstance(got, str):
            report.reasons.append(f"hidden layer {i + 1}: {got}")
            return
        m, mu, g, lam = got
        entry = _dict(entry, f"layers[{i}]")
        ok = (_is_int(entry.get("degree")) and entry.get("degree") == m and _is_int(entry.get("g"))
              and entry.get("g") == g and isinstance(entry.get("centre"), str)
              and parse_number(entry.get("centre"), "centre") == mu)
        el = entry.get("lambdas")
        if lam == "all":
            ok = ok and el == "all"
        else:
            ok = ok and isinstance(el, list) and [parse_number(x, "lambda") for x in el] == lam
        if not ok:
            report.reasons.append(f"layers[{i}] {_short(entry)} differ from the recomputed degree {m}, centre {mu}, "
                                  f"g = {g}, lambdas {lam if lam == 'all' else [str(x) for x in lam]}")
            return
        lams.append(lam)
    report.checks.append("the scalings lambda that can occur (lambda^g = 1, offsets at the centres) are "
                         f"{[l if l == 'all' else [str(x) for x in l] for l in lams]}, each a symmetry of its "
                         "activation" + ("" if bias else " without offsets"))
    Ws = [[list(r) for r in l.weight] for l in layers]
    if not _deep_full_rank(report, cert, Ws, hidden, n):
        return
    report.checks.append(f"every weight matrix has rank {n} (nonzero {n} x {n} minors at the indices given)")
    supports = [sum(1 for x in r if x != 0) for r in Ws[1]]
    if cert.get("w2_row_supports") != supports or min(supports) < 3:
        report.reasons.append(f"w2_row_supports {_short(cert.get('w2_row_supports'))} (model: {supports}): every row "
                              "of W_2 needs >= 3 nonzero entries")
        return
    report.checks.append("every row of W_2 has >= 3 nonzero entries: the top form of each second pre-activation is "
                         "a smooth Fermat form, so it has no degree-1 factor")
    if hidden == 3:
        m1, m2 = len(layers[0].act) - 1, len(layers[1].act) - 1
        rows3 = _deep_w3_rows(report, cert, Ws)
        if rows3 is None:
            return
        sup3, spans = rows3
        bad = [j for j, (s, v) in enumerate(zip(sup3, spans)) if s < 3 or m1 ** (v - 2) == m2]
        if bad:
            report.reasons.append(f"rows {bad} of W_3: fewer than 3 nonzero entries, or m_1^(|V_j| - 2) = m_2")
            return
        report.checks.append("every row of W_3 has >= 3 nonzero entries and m_1^(|V_j| - 2) != m_2: the top form "
                             "of each third pre-activation has no linear factor")
    continuous = sum(1 for l in lams if l == "all")
    dim = n * continuous
    size = None
    if not continuous:
        fact = 1
        for k in range(2, n + 1):
            fact *= k
        size = 1
        for lam in lams:
            size *= fact * len(lam) ** n
    if cert.get("orbit_size") != (None if size is None else str(size)) or cert.get("orbit_dimension") != dim \
            or not _is_int(cert.get("orbit_dimension")):
        report.reasons.append(f"orbit: expected size {size} and dimension {dim}, got "
                              f"{_short(cert.get('orbit_size'))}/{_short(cert.get('orbit_dimension'))}")
        return
    report.checks.append("fibre = orbit (Jacobian-factor theorem, general activations): "
                         + (f"{size} points" if size is not None else f"dimension {dim}"))
