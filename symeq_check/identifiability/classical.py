"""``symeq-identifiability/1`` of method ``sussmann`` or ``fefferman``: real tanh and logistic-sigmoid
networks (docs/identifiability.md, "Real activations: Sussmann and Fefferman").  The conditions are
recomputed from the model with Fractions and a witness theta' is checked by exact identities; the theorems
are the trusted part.
"""
from __future__ import annotations

import hashlib
import json
from fractions import Fraction
from math import factorial

from .._numbers import CheckError, _count, _dict, _is_int, _matrix, _short, _vector, parse_number
from ..report import CheckReport
from ..schema import DENSE_KEYS, MODEL_FORMAT, MODEL_KEYS, PARAMS_DIFFER, check_keys


CLASSICAL_METHODS = ("sussmann", "fefferman")
#: the activations with a theorem, and the group of theta's orbit
CLASSICAL_GROUPS = {"tanh": "signed permutations", "sigmoid": "affine flips"}
#: the conditions, in certificate order (symeq.fibre.classical writes these statements)
CLASSICAL_STATEMENTS = {
    "R1": "no hidden unit has all its outgoing weights zero",
    "R2": "no hidden unit has all its incoming weights zero",
    "R3": "no two hidden units have (w, b) = +-(w', b')",
    "F1": "every bias is nonzero",
    "F2": "the biases of a layer have pairwise distinct absolute values",
    "F3": "every weight is nonzero",
    "F4": "two weights leaving the same node: reduced ratio P/Q with Q > 100 D and |P| > 100 D, "
          "D = max(D_{l-1}, D_l)",
}
CLASSICAL_CONDITIONS = {"sussmann": ("R1", "R2", "R3"), "fefferman": ("F1", "F2", "F3", "F4")}
_CLASSICAL_COMMON = ("format", "method", "verdict", "activation", "widths", "layers_sha256", "conditions", "group")
CLASSICAL_CERT_KEYS = {
    "sussmann": (_CLASSICAL_COMMON + ("orbit_size", "orbit_formula", "witness"), _CLASSICAL_COMMON),
    "fefferman": (_CLASSICAL_COMMON + ("orbit_size", "orbit_formula", "witness"), _CLASSICAL_COMMON),
}
CONDITION_KEYS = (("name", "statement", "holds", "count", "failing"), ("name", "statement", "holds", "count", "failing"))
WITNESS_KEYS = (("condition", "layer", "units", "sign", "changes", "bias_terms"),
                ("condition", "layer", "units", "sign", "changes", "bias_terms"))
CHANGE_KEYS = (("layer", "param", "index", "value"), ("layer", "param", "index", "value"))
TERM_KEYS = (("layer", "coefficient", "at"), ("layer", "coefficient", "at"))
#: failing entries a certificate lists per condition (the count is complete)
CLASSICAL_LISTED = 20
#: pairs of weights the checker examines for F4, and orbit sizes written out (bits)
MAX_CLASSICAL_PAIRS = 5_000_000
CLASSICAL_ORBIT_BITS = 3300


class _FirstFew:
    """A failing list kept as its count and its first ``CLASSICAL_LISTED`` entries (bounded memory)."""

    def __init__(self, items=()):
        self.count, self.first = 0, []
        self += items

    def append(self, x) -> None:
        self.count += 1
        if len(self.first) < CLASSICAL_LISTED:
            self.first.append(x)

    def __iadd__(self, items):
        for x in items:
            self.append(x)
        return self

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index):
        return self.first[index]


def _classical_layers(model) -> tuple[int, list]:
    """(n_in, [(W, b, activation name or None)]) of a model file's dense layers, read here."""
    check_keys(_dict(model, "model"), "model", *MODEL_KEYS)
    if model.get("format") != MODEL_FORMAT:
        raise CheckError(f"model: format must be {MODEL_FORMAT!r}, got {_short(model.get('format'))}")
    n_in = _count(model.get("input_dim"), "model input_dim", 1)
    specs = model.get("layers")
    if not isinstance(specs, list) or not specs:
        raise CheckError("model: 'layers' must be a non-empty list")
    out, width = [], n_in
    for i, spec in enumerate(specs):
        at = f"model.layers[{i}]"
        if _dict(spec, at).get("type") != "dense":
            raise CheckError(f"{at}: the classical theorems read dense layers only, got {_short(spec.get('type'))}")
        check_keys(spec, at, *DENSE_KEYS)
        W = _matrix(spec.get("weight"), f"{at} weight", cols=width)
        width = len(W)
        b = spec.get("bias")
        b = (Fraction(0),) * width if b is None else _vector(b, f"{at} bias", width)
        act = spec.get("activation")
        if act is not None:
            name = _dict(act, f"{at}.activation").get("type")
            if name in CLASSICAL_GROUPS:
                check_keys(act, f"{at}.activation", ("type",), ("type",))
            else:  # kept by its full description: the certificate is then refused, not misread
                name = json.dumps(act, sort_keys=True)
            act = name
        out.append((W, b, act))
    return n_in, out


def classical_digest(layers_json, input_dim: int) -> str:
    """SHA-256 of a model's dense layers as the classical checker reads them (``layers_sha256``).

    >>> a = classical_digest([{"type": "dense", "weight": [["1/2"]], "bias": None, "activation": {"type": "tanh"}},
    ...                       {"type": "dense", "weight": [[1]], "bias": [0], "activation": None}], 1)
    >>> a == classical_digest([{"type": "dense", "weight": [["0.5"]], "bias": [0], "activation": {"type": "tanh"}},
    ...                        {"type": "dense", "weight": [[1]], "bias": None, "activation": None}], 1)
    True
    """
    _, layers = _classical_layers({"format": MODEL_FORMAT, "input_dim": input_dim, "layers": layers_json})
    canon = tuple((tuple(tuple(str(x) for x in r) for r in W), tuple(str(x) for x in b), a) for W, b, a in layers)
    return hashlib.sha256(repr(canon).encode()).hexdigest()


def _sign_class(vec) -> tuple[tuple, int]:
    """(vec with its first nonzero entry made positive, the sign used)."""
    for x in vec:
        if x != 0:
            return (tuple(vec), 1) if x > 0 else (tuple(-y for y in vec), -1)
    return tuple(vec), 1


def _sussmann_failures(W1, b1, W2) -> dict:
    n, m = len(W1), len(W2)
    first, r3 = {}, []
    for j in range(n):
        key, s = _sign_class(tuple(W1[j]) + (b1[j],))
        if key in first:
            r3.append([first[key][0], j, s * first[key][1]])
        else:
            first[key] = (j, s)
    return {"R1": _FirstFew(j for j in range(n) if all(W2[i][j] == 0 for i in range(m))),
            "R2": _FirstFew(j for j in range(n) if all(x == 0 for x in W1[j])), "R3": _FirstFew(r3)}


def _sigmoid_as_tanh(layers) -> list:
    """The tanh form of a logistic-sigmoid net (s(t) = (1 + tanh(t/2))/2, y_l = z_l / 2)."""
    L, out = len(layers), []
    for l, (W, b) in enumerate(layers, 1):
        h = [sum(row, Fraction(0)) / 2 for row in W]
        if l == 1:
            out.append(([[x / 2 for x in r] for r in W], [x / 2 for x in b]))
        elif l < L:
            out.append(([[x / 4 for x in r] for r in W], [(x + y) / 2 for x, y in zip(b, h)]))
        else:
            out.append(([[x / 2 for x in r] for r in W], [x + y for x, y in zip(b, h)]))
    return out


def _fefferman_failures(layers, n_in: int) -> dict:
    widths = [n_in] + [len(W) for W, _ in layers]
    f = {"F1": _FirstFew(), "F2": _FirstFew(), "F3": _FirstFew(), "F4": _FirstFew()}
    for l, (W, b) in enumerate(layers, 1):
        bound = 100 * max(widths[l - 1], widths[l])
        f["F1"] += ([l, j] for j, x in enumerate(b) if x == 0)
        seen = {}
        for j, x in enumerate(b):
            if abs(x) in seen:
                f["F2"].append([l, seen[abs(x)], j])
            else:
                seen[abs(x)] = j
        f["F3"] += ([l, j, k] for j, row in enumerate(W) for k, x in enumerate(row) if x == 0)
        for k in range(widths[l - 1]):
            col = [row[k] for row in W]
            for j in range(len(col)):
                for j2 in range(j + 1, len(col)):
                    if col[j] != 0 and col[j2] != 0:
                        r = col[j] / col[j2]
                        if r.denominator <= bound or abs(r.numerator) <= bound:
                            f["F4"].append([l, k, j, j2, r.numerator, r.denominator])
    return f


def _check_conditions(report: CheckReport, cert: dict, method: str, failures: dict) -> None:
    conds = cert.get("conditions")
    names = CLASSICAL_CONDITIONS[method]
    if not isinstance(conds, list) or len(conds) != len(names):
        report.reasons.append(f"conditions must list {', '.join(names)}")
        return
    for i, (c, name) in enumerate(zip(conds, names)):
        check_keys(_dict(c, f"conditions[{i}]"), f"certificate.conditions[{i}]", *CONDITION_KEYS)
        fails = failures[name]
        if c.get("name") != name or c.get("statement") != CLASSICAL_STATEMENTS[name]:
            report.reasons.append(f"conditions[{i}] must be {name}: {CLASSICAL_STATEMENTS[name]}")
        elif c.get("holds") is not (not fails) or c.get("count") != len(fails) or isinstance(c.get("count"), bool):
            report.reasons.append(f"{name}: the model has {len(fails)} failing entr{'y' if len(fails) == 1 else 'ies'} "
                                  f"(holds: {not fails}), the certificate says {_short(c.get('count'))} "
                                  f"(holds: {_short(c.get('holds'))})")
        elif c.get("failing") != list(fails[:CLASSICAL_LISTED]):
            report.reasons.append(f"{name}: the failing entries listed are not the model's first "
                                  f"{min(len(fails), CLASSICAL_LISTED)}")
        else:
            report.checks.append(f"{name} ({CLASSICAL_STATEMENTS[name]}): "
                                 + ("holds" if not fails else f"fails ({len(fails)})"))


#: the sets of units whose outgoing columns sum to zero are counted up to this many distinct partial sums
MAX_FLIP_SUMS = 1 << 20


def _zero_sum_sets(columns) -> int | None:
    """The sets of units (the empty one included) whose outgoing columns sum to 0, or None past
    :data:`MAX_FLIP_SUMS` distinct partial sums (the checker's own count, as symeq.fibre.classical's)."""
    zero = tuple(Fraction(0) for _ in (columns[0] if columns else ()))
    sums = {zero: 1}
    for col in columns:
        nxt = dict(sums)
        for key, count in sums.items():
            k2 = tuple(a + b for a, b in zip(key, col))
            nxt[k2] = nxt.get(k2, 0) + count
        sums = nxt
        if len(sums) > MAX_FLIP_SUMS:
            return None
    return sums.get(zero, 0)


def _check_orbit(report: CheckReport, cert: dict, hidden: list, layers=None, act: str = "tanh", flags=None) -> None:
    """The orbit in the declared parameter space (issue 25): 2^n n! per hidden layer, except a sigmoid layer
    whose next layer has no bias ("bias": null): an affine flip adds the unit's outgoing column to that bias,
    so only the sets of flips whose columns sum to zero stay (Z n!, n! when Z = 1)."""
    size, parts = 1, []
    for l, w in enumerate(hidden, 1):
        if act == "tanh" or flags is None or flags[l]:
            size *= 2 ** w * factorial(w)
            parts.append(f"2^{w} {w}!")
            continue
        V = layers[l][0]
        z = _zero_sum_sets([[row[j] for row in V] for j in range(w)])
        if z is None:
            report.reasons.append(f"beyond the checker's size limit: the affine flips of hidden layer {l} that keep "
                                  f"the missing bias of layer {l + 1} at 0 exceed {MAX_FLIP_SUMS} partial sums")
            return
        size *= z * factorial(w)
        parts.append(f"{w}!" if z == 1 else f"{z} {w}!")
    formula = " * ".join(parts)
    written = str(size) if size.bit_length() < CLASSICAL_ORBIT_BITS else None
    if cert.get("orbit_formula") != formula or cert.get("orbit_size") != written:
        report.reasons.append(f"orbit size must be {formula}" + (f" = {written}" if written else ""))
    else:
        report.checks.append(f"orbit: {formula} points" + (f" = {written}" if written else ""))


def _formal_sum(W1, b1, W2, b2, act: str, terms=()) -> dict:
    """b_2 + sum_j v_j act(w_j x + b_j) + sum c act(a) as a formal sum (see the section comment)."""
    m = len(b2)
    out = {}

    def add(key, vec, scale=1):
        acc = out.setdefault(key, [Fraction(0)] * m)
        for i in range(m):
            acc[i] += scale * vec[i]

    add((), b2)
    units = [(tuple(W1[j]), b1[j], [W2[i][j] for i in range(m)]) for j in range(len(W1))]
    for w, b, v in units + [(None, a, c) for c, a in terms]:
        if w is None or not any(w):
            if b == 0:
                if act == "sigmoid":
                    add((), v, Fraction(1, 2))
                continue
            key, s = ("c", abs(b)), (1 if b > 0 else -1)
        else:
            canon, s = _sign_class(w + (b,))
            key = ("u", canon)
        add(key, v, s if act == "tanh" else (1 if s == 1 else -1))
        if act == "sigmoid" and s == -1:
            add((), v)
    return {k: tuple(c) for k, c in out.items() if k == () or any(c)}


def _unit_multiset(W1, b1, W2) -> dict:
    out = {}
    for j in range(len(W1)):
        key = _sign_class(tuple(W1[j]) + (b1[j],) + tuple(row[j] for row in W2))[0]
        out[key] = out.get(key, 0) + 1
    return out


def _abs_counts(values) -> dict:
    out = {}
    for x in values:
        out[abs(x)] = out.get(abs(x), 0) + 1
    return out


def _orbit_invariants(layers, act: str, skip_bias=()) -> list:
    """Multisets every element of K keeps: |weights| per layer; for tanh |biases| per layer (not
    those of ``skip_bias``, where theta' has an irrational bias); with one hidden layer the units'
    (w, b, v) up to the sign of the triple.  (Affine flips shift the next bias, so not for sigmoid.)"""
    out = []
    for i, (W, b) in enumerate(layers, 1):
        out.append(_abs_counts(x for row in W for x in row))
        out.append(_abs_counts(b) if act == "tanh" and i not in skip_bias else None)
    if len(layers) == 2:
        out.append(_unit_multiset(layers[0][0], layers[0][1], layers[1][0]))
    return out


def _check_reducibility_witness(report: CheckReport, wit, layers: list, act: str, flags=None) -> None:
    """A witness theta' at hidden layer l: the named condition fails there, theta' differs from theta
    only in layers l and l + 1, the pre-activations of layer l + 1 are equal formal sums, and a
    K-invariant multiset differs.  ``flags`` (per layer: a bias vector in the file) is the declared
    parameter space: theta' changes no bias of a layer with ``"bias": null``, and no constant moves there."""
    flags = (True,) * len(layers) if flags is None else flags
    check_keys(_dict(wit, "witness"), "certificate.witness", *WITNESS_KEYS)
    cond, l, units, sign = wit.get("condition"), wit.get("layer"), wit.get("units"), wit.get("sign")
    if not _is_int(l) or not 1 <= l < len(layers):
        report.reasons.append(f"witness layer {_short(l)} is not a hidden layer 1..{len(layers) - 1}")
        return
    (W, b), (V, c) = layers[l - 1], layers[l]
    n, m = len(W), len(V)
    if not isinstance(units, list) or not all(_is_int(u) and 0 <= u < n for u in units):
        report.reasons.append(f"witness units {_short(units)} are not units 0..{n - 1} of hidden layer {l}")
        return
    if cond in ("R1", "R2"):
        ok = len(units) == 1 and sign is None
        if ok and cond == "R1":
            ok = all(row[units[0]] == 0 for row in V)
        elif ok:  # R2; a constant unit without output weight is dead: the R1 witness applies
            ok = not any(W[units[0]]) and any(row[units[0]] for row in V)
    elif cond == "R3":
        ok = (len(units) == 2 and units[0] != units[1] and sign in (1, -1) and not isinstance(sign, bool)
              and all(sign * x == y for x, y in zip(tuple(W[units[0]]) + (b[units[0]],),
                                                     tuple(W[units[1]]) + (b[units[1]],))))
    else:
        ok = False
    if not ok:
        report.reasons.append(f"witness: {_short(cond)} does not fail at units {_short(units)} of hidden layer {l} "
                              f"(sign {_short(sign)})")
        return
    new = [([list(r) for r in Wi], [list(bi)]) for Wi, bi in layers]
    changes = wit.get("changes")
    if not isinstance(changes, list):
        raise CheckError("certificate.witness.changes: expected a list")
    done = set()
    for k, ch in enumerate(changes):
        at = f"certificate.witness.changes[{k}]"
        check_keys(_dict(ch, at), at, *CHANGE_KEYS)
        layer, param, idx = ch.get("layer"), ch.get("param"), ch.get("index")
        if layer not in (l, l + 1) or isinstance(layer, bool) or param not in ("weight", "bias"):
            raise CheckError(f"{at}: layer must be {l} or {l + 1} (the witness's layer and the next) and param "
                             "'weight' or 'bias'")
        if param == "bias" and not flags[layer - 1]:
            report.reasons.append(f"witness: {at} changes a bias of layer {layer}, which has none (\"bias\": null)")
            return
        target = new[layer - 1][0] if param == "weight" else new[layer - 1][1]
        want = 1 if param == "bias" else 2
        if not isinstance(idx, list) or len(idx) != want or not all(_is_int(i) for i in idx):
            raise CheckError(f"{at}: index must be a list of {want} integer(s)")
        r, col = (0, idx[0]) if want == 1 else (idx[0], idx[1])
        if not (0 <= r < len(target) and 0 <= col < len(target[r])):
            raise CheckError(f"{at}: index {idx} is outside the parameter")
        value = parse_number(ch.get("value"), f"{at}.value")
        where = (layer, param, r, col)
        if where in done or value == target[r][col]:
            report.reasons.append(f"witness: {at} changes nothing new (each entry of theta is changed at most once)")
            return
        done.add(where)
        target[r][col] = value
    terms = wit.get("bias_terms")
    if not isinstance(terms, list):
        raise CheckError("certificate.witness.bias_terms: expected a list")
    parsed = []
    for t, term in enumerate(terms):
        at = f"certificate.witness.bias_terms[{t}]"
        check_keys(_dict(term, at), at, *TERM_KEYS)
        if term.get("layer") != l + 1 or isinstance(term.get("layer"), bool):
            raise CheckError(f"{at}: a constant moves into the next layer's bias, layer {l + 1}")
        if not flags[l]:
            report.reasons.append(f"witness: {at} moves a constant into the bias of layer {l + 1}, which has none "
                                  "(\"bias\": null)")
            return
        parsed.append((_vector(term.get("coefficient"), f"{at}.coefficient", m), parse_number(term.get("at"), f"{at}.at")))
    new = [(Wi, bi[0]) for Wi, bi in new]
    (W2, b2), (V2, c2) = new[l - 1], new[l]
    if _formal_sum(W, b, V, c, act) != _formal_sum(W2, b2, V2, c2, act, parsed):
        report.reasons.append(f"witness: theta' does not have theta's function by the identities of {act}")
        return
    report.checks.append(f"witness: f_theta' = f_theta identically (the pre-activations of layer {l + 1} are equal "
                         f"formal sums by the {act} identities; {len(changes)} change(s), {len(parsed)} constant(s) "
                         f"moved into the bias of layer {l + 1})")
    skip = (l + 1,) if parsed else ()
    if _orbit_invariants(layers, act, skip) == _orbit_invariants(new, act, skip):
        report.reasons.append("witness: theta' is not shown outside the orbit (every K-invariant multiset checked "
                              "equals theta's)")
        return
    report.checks.append(f"witness: theta' is outside the orbit (a multiset that every one of the "
                         f"{CLASSICAL_GROUPS[act]} keeps differs)")


def check_classical(cert: dict, model: dict, *, max_group_size: int = 10000) -> CheckReport:
    """Re-verify a ``symeq-identifiability/1`` certificate of method "sussmann" or "fefferman".

    Sussmann (one hidden layer): R1-R3 recomputed; "identifiable" needs all three and the orbit
    2^n n!; "not-identifiable" needs a failed condition and its witness theta', checked exactly
    (same function by the activation's identities, outside the orbit).  Fefferman: F1-F4
    recomputed on every layer (on the tanh form for the sigmoid); "identifiable" needs all four,
    "not-identifiable" (tanh) a witness at a reducible hidden layer, checked like Sussmann's.
    """
    method = _dict(cert, "certificate").get("method")
    if method not in CLASSICAL_METHODS:
        raise CheckError(f"certificate: method must be one of {CLASSICAL_METHODS}, got {_short(method)}")
    check_keys(cert, "certificate", *CLASSICAL_CERT_KEYS[method])
    verdict = cert.get("verdict")
    report = CheckReport(None, str(verdict))
    if verdict not in ("identifiable", "not-identifiable"):
        raise CheckError(f"certificate: verdict must be identifiable or not-identifiable, got {_short(verdict)}")
    n_in, layers = _classical_layers(model)
    flags = tuple(spec.get("bias") is not None for spec in model["layers"])  # the declared parameter space
    widths = [n_in] + [len(W) for W, _, _ in layers]
    acts = {a for _, _, a in layers[:-1]}
    act = next(iter(acts)) if len(acts) == 1 else None
    if layers[-1][2] is not None or len(layers) < 2 or act not in CLASSICAL_GROUPS:
        report.reasons.append("the classical theorems need hidden layers with one activation, tanh or sigmoid, "
                              "and an affine output layer")
    elif method == "sussmann" and len(layers) != 2:
        report.reasons.append(f"Sussmann's theorem is about one hidden layer; the model has {len(layers) - 1}")
    elif cert.get("activation") != act or cert.get("group") != CLASSICAL_GROUPS[act]:
        report.reasons.append(f"activation/group {_short(cert.get('activation'))}/{_short(cert.get('group'))} differ "
                              f"from the model's {act}/{CLASSICAL_GROUPS[act]}")
    elif cert.get("widths") != widths:
        report.reasons.append(f"certificate widths {_short(cert.get('widths'))} differ from the model's {widths}")
    elif cert.get("layers_sha256") != classical_digest(model["layers"], n_in):
        report.reasons.append(f"{PARAMS_DIFFER}: layers_sha256 is not the digest of the model's layers")
    if report.reasons:
        report.accepted = False
        return report
    report.checks.append(f"the model's layers: widths {widths}, {act} hidden layers (layers_sha256 matches)")
    if method == "sussmann":
        (W1, b1, _), (W2, b2, _) = layers
        failures = _sussmann_failures(W1, b1, W2)
    else:
        pairs = sum(widths[l - 1] * widths[l] * (widths[l] - 1) // 2 for l in range(1, len(widths)))
        if pairs > MAX_CLASSICAL_PAIRS:
            raise CheckError(f"Fefferman's ratio condition: {pairs} pairs of weights exceed the checker's limit "
                             f"{MAX_CLASSICAL_PAIRS}")
        plain = [(W, b) for W, b, _ in layers]
        failures = _fefferman_failures(_sigmoid_as_tanh(plain) if act == "sigmoid" else plain, n_in)
        if act == "sigmoid":
            report.checks.append("the conditions are read on the tanh form of the sigmoid net")
    _check_conditions(report, cert, method, failures)
    if report.reasons:
        report.accepted = False
        return report
    irreducible = not any(failures.values())
    if verdict == "identifiable":
        if not irreducible:
            report.reasons.append("verdict identifiable, but a condition fails")
        elif cert.get("witness") is not None:
            report.reasons.append("an identifiable certificate carries no witness")
        else:
            _check_orbit(report, cert, widths[1:-1], [(W, b) for W, b, _ in layers], act, flags)
    elif irreducible:
        report.reasons.append(f"verdict not-identifiable, but {', '.join(CLASSICAL_CONDITIONS[method])} hold "
                              "(the theorem says identifiable)")
    elif "orbit_size" in cert or "orbit_formula" in cert:
        report.reasons.append("a not-identifiable certificate states no orbit size")
    elif method == "fefferman" and act != "tanh":
        report.reasons.append("a deep reducibility witness is read for tanh networks only")
    else:
        _check_reducibility_witness(report, cert.get("witness"), [(W, b) for W, b, _ in layers], act, flags)
    report.accepted = not report.reasons
    return report
