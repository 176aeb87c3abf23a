"""Independent certificate checker: ``python -m symeq.check CERT MODEL``.

This module re-verifies a ``symeq-certificate/1`` against a ``symeq-model/1`` file and trusts
nothing but the Python standard library. Numbers are :class:`fractions.Fraction`, files are read
with :mod:`json`, and it imports no other symeq module, no flint, sympy or numpy, so that a bug in
the rest of the package (or in a Groebner engine) cannot make it accept a wrong certificate. It is
kept small on purpose, to be read and audited in one sitting.

What it re-verifies
-------------------
``layerwise-equivariant``
    The certificate's parameters are the model's; every latent action is a monomial matrix
    (positive for ReLU layers); every layer satisfies ``f_i(rho_{i-1}(g) x) = rho_i(g) f_i(x)``
    identically in ``x`` (one univariate polynomial identity per neuron); and the tuples
    ``(rho_in(g), rho_1(g), ..., rho_out(g))`` generate a finite group on which the projection to
    ``rho_in`` is injective, so that every ``rho_i`` is a homomorphism of the group.
``not-equivariant``
    The witness ``x`` satisfies ``f(P x) != Q f(x)``, with the model evaluated exactly.

The verdicts ``undetermined`` and ``no-layerwise-parameter`` claim nothing that can be re-verified
(exit code 3). Layers are numbered from 1 (``f_1 .. f_L``); generators, rows and neurons from 0, as
in the JSON arrays.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from math import comb

MODEL_FORMAT = "symeq-model/1"
CERT_FORMAT = "symeq-certificate/1"
VERIFIABLE = ("layerwise-equivariant", "not-equivariant")
UNVERIFIABLE = ("no-layerwise-parameter", "undetermined")
PARAMS_DIFFER = "parameters differ from the model"
MAX_LATTICE = 50000
_FRACTION = re.compile(r"([+-]?)(\d+)/(\d+)")
_DECIMAL = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")
_MAX_EXPONENT = 1000

Matrix = tuple[tuple[Fraction, ...], ...]


class CheckError(Exception):
    """Malformed input: unreadable file, bad number, wrong shape, unknown kind (exit code 2)."""


@dataclass
class CheckReport:
    """Outcome of checking one certificate against one model.

    Attributes
    ----------
    accepted : bool or None
        True if accepted, False if rejected, None if nothing could be verified.
    verdict : str
        The certificate's verdict.
    reasons : list of str
        Why the certificate was rejected (empty when accepted).
    checks : list of str
        Human-readable lines describing what was verified.
    """

    accepted: bool | None
    verdict: str
    reasons: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """Process exit code: 0 accepted, 1 rejected, 3 nothing verifiable."""
        return 3 if self.accepted is None else (0 if self.accepted else 1)

    def lines(self) -> list[str]:
        """Return the report as printable lines."""
        result = {True: "accepted", False: "rejected", None: "undetermined (nothing verified)"}
        return ([f"verdict: {self.verdict}"] + [f"checked: {c}" for c in self.checks]
                + [f"REJECTED: {r}" for r in self.reasons] + [f"result: {result[self.accepted]}"])


@dataclass(frozen=True)
class _Layer:
    weight: Matrix
    bias: tuple[Fraction, ...]
    act: object  # None (affine), "relu", or a tuple of polynomial coefficients c_0 .. c_d
    label: str = field(compare=False)


@dataclass(frozen=True)
class _Attention:
    """Lightning attention f(X) = sum_h (X Q_h K_h^T X^T) X V_h O_h on T tokens (flattened by rows)."""

    tokens: int
    heads: tuple  # of (Q, K, V, O) matrices
    label: str = field(compare=False, default="attention")
    act: object = field(compare=False, default="attention")

    @property
    def d(self) -> int:
        return len(self.heads[0][0])

    @property
    def d_out(self) -> int:
        return len(self.heads[0][3][0])

    @property
    def weight(self):  # only its number of rows (the flattened output size) is used generically
        return [None] * (self.tokens * self.d_out)


@dataclass(frozen=True)
class _Heads:
    """The chain's first layer: X -> [Y_1 ... Y_H], Y_h = (X A_h X^T) X V_h (flattened by rows)."""

    tokens: int
    scores: tuple
    values: tuple
    label: str = field(compare=False, default="attention heads")
    act: object = field(compare=False, default="heads")

    @property
    def dv(self) -> int:
        return len(self.values[0][0])

    @property
    def weight(self):
        return [None] * (self.tokens * len(self.scores) * self.dv)


# ----------------------------------------------------------------------------- parsing

def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_number(value, where: str = "number") -> Fraction:
    """Parse one exact number: a JSON integer, or a string ``"p/q"``, ``"-3"``, ``"-1.5e-3"``.

    Examples
    --------
    >>> parse_number("-1.5e-3"), parse_number("2/6"), parse_number(7)
    (Fraction(-3, 2000), Fraction(1, 3), Fraction(7, 1))
    """
    if isinstance(value, bool):
        raise CheckError(f"{where}: a boolean is not a number")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        raise CheckError(f'{where}: JSON float {_short(value)} is not exact; write it as a string '
                         f'like "1/3" or "0.25"')
    if isinstance(value, str):
        try:
            match = _FRACTION.fullmatch(value)
            if match:
                if int(match[3]) == 0:
                    raise CheckError(f"{where}: zero denominator in {_short(value)}")
                return Fraction(int(match[1] + match[2]), int(match[3]))
            match = _DECIMAL.fullmatch(value)
            if match and (match[2] or match[3]):
                digits = (match[2] or "") + (match[3] or "")
                exponent = int(match[4] or 0) - len(match[3] or "")
                if abs(exponent) > _MAX_EXPONENT:
                    raise CheckError(f"{where}: exponent too large in {_short(value)}")
                return int(match[1] + digits) * Fraction(10) ** exponent
        except ValueError:  # e.g. more digits than int() accepts
            raise CheckError(f"{where}: cannot read the number {_short(value)}") from None
    raise CheckError(f'{where}: {_short(value)} is not a number (an integer, "p/q" or a decimal '
                     'string)')


def _vector(value, where: str, length: int | None = None) -> tuple[Fraction, ...]:
    if not isinstance(value, list) or not value:
        raise CheckError(f"{where}: expected a non-empty list of numbers, got {_short(value)}")
    if length is not None and len(value) != length:
        raise CheckError(f"{where}: expected {length} entries, got {len(value)}")
    return tuple(parse_number(x, f"{where}[{k}]") for k, x in enumerate(value))


def _matrix(value, where: str, rows: int | None = None, cols: int | None = None) -> Matrix:
    if not isinstance(value, list) or not value:
        raise CheckError(f"{where}: expected a non-empty list of rows, got {_short(value)}")
    if rows is not None and len(value) != rows:
        raise CheckError(f"{where}: expected {rows} rows, got {len(value)}")
    cols = cols if cols is not None else (len(value[0]) if isinstance(value[0], list) else None)
    return tuple(_vector(row, f"{where} row {r}", cols) for r, row in enumerate(value))


def _dict(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise CheckError(f"{where}: expected a JSON object, got {_short(value)}")
    return value


def _count(value, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CheckError(f"{where}: expected an integer >= {minimum}, got {_short(value)}")
    return value


def tanh_series_coeffs(order: int) -> list[Fraction]:
    """Taylor coefficients a_0..a_order of tanh, from T' = 1 - T^2 (no typed-in constants).

    Examples
    --------
    >>> [str(a) for a in tanh_series_coeffs(5)]
    ['0', '1', '0', '-1/3', '0', '2/15']
    """
    a = [Fraction(0)] * (order + 1)
    for k in range(order):  # (k+1) a_{k+1} = [k == 0] - sum_{i+j=k} a_i a_j
        a[k + 1] = ((1 if k == 0 else 0) - sum(a[i] * a[k - i] for i in range(k + 1))) / (k + 1)
    return a


def sigmoid_series_coeffs(order: int) -> list[Fraction]:
    """Taylor coefficients of the logistic sigmoid up to t^order, as 1/2 + tanh(t/2)/2."""
    coeffs = [a / 2 ** (k + 1) for k, a in enumerate(tanh_series_coeffs(order))]
    coeffs[0] += Fraction(1, 2)
    return coeffs


def _activation(spec, where: str) -> tuple[object, str]:
    if spec is None:
        return None, "affine"
    kind = _dict(spec, f"{where} activation").get("type")
    if kind == "relu":
        return "relu", "relu"
    if kind == "tanh_series":
        order = _count(spec.get("order"), f"{where} activation order", 1)
        if order % 2 == 0:
            raise CheckError(f"{where}: tanh_series order must be odd, got {order}")
        coeffs, label = tanh_series_coeffs(order), f"tanh_series({order})"
    elif kind == "sigmoid_series":
        order = _count(spec.get("order"), f"{where} activation order", 1)
        coeffs, label = sigmoid_series_coeffs(order), f"sigmoid_series({order})"
    elif kind == "monomial":
        degree = _count(spec.get("degree"), f"{where} activation degree", 1)
        coeffs, label = [Fraction(0)] * degree + [Fraction(1)], f"t^{degree}"
    elif kind == "polynomial":
        coeffs, label = list(_vector(spec.get("coeffs"), f"{where} activation coeffs")), "polynomial"
    else:
        raise CheckError(f"{where}: unknown activation type {_short(kind)}")
    while len(coeffs) > 1 and coeffs[-1] == 0:
        coeffs.pop()
    return tuple(coeffs), label


def _layers(value, input_dim: int, where: str) -> list[_Layer]:
    if not isinstance(value, list) or not value:
        raise CheckError(f"{where}: 'layers' must be a non-empty list")
    layers, width, tokens = [], input_dim, None
    for i, spec in enumerate(value, 1):
        name = f"{where} layer {i}"
        kind = _dict(spec, name).get("type")
        if kind == "attention" and i == 1:
            att = _attention(spec, input_dim, name)
            layers.append(att)
            tokens, width = att.tokens, att.d_out
            continue
        if kind != "dense":
            raise CheckError(f"{name}: unsupported layer type {_short(spec.get('type'))}")
        weight = _matrix(spec.get("weight"), f"{name} weight", cols=width)
        width = len(weight)
        bias = spec.get("bias")
        bias = (Fraction(0),) * width if bias is None else _vector(bias, f"{name} bias", width)
        act, label = _activation(spec.get("activation"), name)
        if i == len(value) and act is not None:
            raise CheckError(f"{name}: the last layer must be affine (activation null)")
        if i < len(value) and act is None:
            raise CheckError(f"{name}: a hidden layer needs a non-null activation")
        if tokens is not None:  # token-wise after attention: I_T (x) W, bias repeated per token
            weight, bias, label = _kron(_identity(tokens), weight), bias * tokens, label + " (token-wise)"
        layers.append(_Layer(weight, bias, act, label))
    return layers


def _attention(spec: dict, input_dim: int, name: str) -> _Attention:
    tokens = _count(spec.get("tokens"), f"{name} tokens", 1)
    if input_dim % tokens:
        raise CheckError(f"{name}: input_dim {input_dim} is not a multiple of {tokens} tokens")
    d = input_dim // tokens
    heads = spec.get("heads")
    if not isinstance(heads, list) or not heads:
        raise CheckError(f"{name}: 'heads' must be a non-empty list")
    parsed = []
    for h, hs in enumerate(heads):
        hs = _dict(hs, f"{name} head {h}")
        q = _matrix(hs.get("query"), f"{name} head {h} query", rows=d)
        k = _matrix(hs.get("key"), f"{name} head {h} key", rows=d, cols=len(q[0]))
        v = _matrix(hs.get("value"), f"{name} head {h} value", rows=d)
        o = _matrix(hs.get("out"), f"{name} head {h} out", rows=len(v[0]))
        if parsed and (len(v[0]) != len(parsed[0][2][0]) or len(o[0]) != len(parsed[0][3][0])):
            raise CheckError(f"{name} head {h}: all heads need the same d_v and d_out")
        parsed.append((q, k, v, o))
    return _Attention(tokens, tuple(parsed))


def _kron(a: Matrix, b: Matrix) -> Matrix:
    return tuple(tuple(x * y for x in ra for y in rb) for ra in a for rb in b)


def _transpose(a: Matrix) -> Matrix:
    return tuple(zip(*a))


def _chain(layers: list) -> list:
    """The layers of the theorem: attention splits into its heads and its output projection,
    which merges into the next token-wise layer (or is the last, affine layer)."""
    first = layers[0]
    if not isinstance(first, _Attention):
        return layers
    T = first.tokens
    heads = _Heads(T, tuple(_matmul(q, _transpose(k)) for q, k, _, _ in first.heads),
                   tuple(v for _, _, v, _ in first.heads))
    o_t = _transpose(tuple(row for _, _, _, o in first.heads for row in o))  # d_out x H d_v
    proj = _kron(_identity(T), o_t)
    if len(layers) == 1:
        return [heads, _Layer(proj, (Fraction(0),) * len(proj), None, "output projection")]
    nxt = layers[1]
    return [heads, _Layer(_matmul(nxt.weight, proj), nxt.bias, nxt.act, nxt.label + " with O merged")] + layers[2:]


def _group(value, n_in: int, n_out: int, where: str) -> list[tuple[Matrix, Matrix]]:
    gens = _dict(value, where).get("generators")
    if not isinstance(gens, list):
        raise CheckError(f"{where}: 'generators' must be a list")
    return [(_matrix(_dict(g, f"{where} generator {k}").get("input"), f"{where} generator {k} input",
                     n_in, n_in),
             _matrix(g.get("output"), f"{where} generator {k} output", n_out, n_out))
            for k, g in enumerate(gens)]


def _model(model) -> tuple[int, list[_Layer], list | None]:
    if _dict(model, "model").get("format") != MODEL_FORMAT:
        raise CheckError(f"model: format must be {MODEL_FORMAT!r}, got {_short(model.get('format'))}")
    n_in = _count(model.get("input_dim"), "model input_dim", 1)
    layers = _layers(model.get("layers"), n_in, "model")
    group = model.get("group")
    if group is not None:
        group = _group(group, n_in, len(layers[-1].weight), "model group")
    return n_in, layers, group


# ----------------------------------------------------------------------------- exact algebra

def _matmul(a: Matrix, b: Matrix) -> Matrix:
    cols = tuple(zip(*b))
    return tuple(tuple(sum(x * y for x, y in zip(row, col)) for col in cols) for row in a)


def _matvec(a: Matrix, x) -> tuple[Fraction, ...]:
    return tuple(sum(w * v for w, v in zip(row, x)) for row in a)


def _identity(n: int) -> Matrix:
    return tuple(tuple(Fraction(int(i == j)) for j in range(n)) for i in range(n))


def _invertible(a: Matrix) -> bool:
    rows = [list(r) for r in a]
    for c in range(len(rows)):
        pivot = next((r for r in range(c, len(rows)) if rows[r][c]), None)
        if pivot is None:
            return False
        rows[c], rows[pivot] = rows[pivot], rows[c]
        for r in range(c + 1, len(rows)):
            f = rows[r][c] / rows[c][c]
            rows[r] = [x - f * y for x, y in zip(rows[r], rows[c])]
    return True


def _poly(c, t: Fraction) -> Fraction:
    value = Fraction(0)
    for coeff in reversed(c):
        value = value * t + coeff
    return value


def _apply(act, t: Fraction) -> Fraction:
    if act is None:
        return t
    return max(t, Fraction(0)) if act == "relu" else _poly(act, t)


def _head_outputs(layer, x):
    """Y_h = (X A_h X^T) X V_h for X = x reshaped to tokens x channels."""
    T = layer.tokens
    d = len(x) // T
    X = tuple(tuple(x[t * d:(t + 1) * d]) for t in range(T))
    Xt = _transpose(X)
    if isinstance(layer, _Attention):
        pairs = [(_matmul(q, _transpose(k)), v) for q, k, v, _ in layer.heads]
    else:
        pairs = list(zip(layer.scores, layer.values))
    return [_matmul(_matmul(_matmul(X, a), Xt), _matmul(X, v)) for a, v in pairs]


def _evaluate(layers: list, x) -> tuple[Fraction, ...]:
    for layer in layers:
        if isinstance(layer, _Attention):
            ys = _head_outputs(layer, x)
            z = [[Fraction(0)] * layer.d_out for _ in range(layer.tokens)]
            for y, (_, _, _, o) in zip(ys, layer.heads):
                yo = _matmul(y, o)
                z = [[a + b for a, b in zip(r1, r2)] for r1, r2 in zip(z, yo)]
            x = tuple(v for row in z for v in row)
        elif isinstance(layer, _Heads):
            ys = _head_outputs(layer, x)
            x = tuple(v for t in range(layer.tokens) for y in ys for v in y[t])
        else:
            x = tuple(_apply(layer.act, y + b) for y, b in zip(_matvec(layer.weight, x), layer.bias))
    return x


def _fmt(vec) -> str:
    return "[" + ", ".join(str(v) for v in vec) + "]"


def _ratio(u, v) -> Fraction | None:
    """The alpha with u == alpha * v (v nonzero), or None if u is not a multiple of v."""
    k = next(k for k, x in enumerate(v) if x)
    alpha = u[k] / v[k]
    return alpha if all(a == alpha * b for a, b in zip(u, v)) else None


# ----------------------------------------------------------------------------- verification

def _monomial_failure(m: Matrix, relu: bool) -> str | None:
    for r, row in enumerate(m):
        nonzero = [x for x in row if x]
        if len(nonzero) != 1:
            return f"row {r} has {len(nonzero)} nonzero entries (a monomial matrix needs exactly 1)"
        if relu and nonzero[0] < 0:
            return f"row {r} has a negative entry (a relu layer needs a positive monomial matrix)"
    for c, col in enumerate(zip(*m)):
        if sum(1 for x in col if x) != 1:
            return f"column {c} does not have exactly 1 nonzero entry (not a monomial matrix)"
    return None


def _neuron_failure(act, u, v, bj: Fraction, bk: Fraction, q: Fraction, o: Fraction = Fraction(0)) -> str | None:
    """Why sigma(u.x + bj) == q sigma(v.x + bk) + o fails for some real x, or None if it holds."""
    if act == "relu":
        if o:
            return "a relu layer admits no offset"
        if not any(v):
            ok = not any(u) and max(bj, Fraction(0)) == q * max(bk, Fraction(0))
            return None if ok else "constant target neuron not matched"
        alpha = _ratio(u, v)
        if alpha is None or alpha <= 0:
            return "incoming weights are not a positive multiple of the target neuron's"
        if bj != alpha * bk:
            return f"bias {bj} != {alpha} * {bk}"
        return None if q == alpha else f"factor {q} != weight ratio {alpha}"
    c, d = act, len(act) - 1
    if d == 0:
        return None if c[0] == q * c[0] + o else "constant activation not preserved"
    if not any(v):
        return None if not any(u) and _poly(c, bj) == q * _poly(c, bk) + o else \
            "constant target neuron not matched"
    alpha = _ratio(u, v)
    if alpha is None:
        return "incoming weights are not parallel to the target neuron's"
    beta = bj - alpha * bk
    composed = [sum(c[m] * comb(m, r) * alpha ** r * beta ** (m - r) for m in range(r, d + 1))
                for r in range(d + 1)]
    target = [q * x for x in c]
    target[0] += o
    if composed != target:
        return f"sigma({alpha} t + {beta}) != {q} sigma(t) + {o}"
    return None


def _layer_failure(layer: _Layer, p: Matrix, q: Matrix, last: bool, c_in=None, c_out=None) -> str | None:
    """Why f(P x + c_in) == Q f(x) + c_out fails (offsets: affine latent actions), or None."""
    wp = _matmul(layer.weight, p)
    bias = layer.bias if c_in is None else tuple(b + y for b, y in zip(layer.bias, _matvec(layer.weight, c_in)))
    if last:
        if wp != _matmul(q, layer.weight):
            return "W P != Q W"
        qb = _matvec(q, layer.bias)
        if c_out is not None:
            qb = tuple(x + y for x, y in zip(qb, c_out))
        return None if qb == bias else "b + W c != Q b" if c_in is not None else "b != Q b"
    for j, row in enumerate(q):
        k, factor = next((k, x) for k, x in enumerate(row) if x)
        o = c_out[j] if c_out is not None else Fraction(0)
        why = _neuron_failure(layer.act, wp[j], layer.weight[k], bias[j], layer.bias[k], factor, o)
        if why:
            return f"neuron {j} (sent to neuron {k} with factor {factor}): {why}"
    return None


def _homomorphism(report: CheckReport, tuples: list[tuple[Matrix, ...]], cap: int) -> None:
    if not tuples:
        report.checks.append("homomorphism: trivial group (no generators)")
        return
    n_layers = len(tuples[0]) - 1
    identity = tuple(_identity(len(m)) for m in tuples[0])
    seen, frontier = {identity: None}, [identity]
    while frontier:
        nxt = []
        for t in frontier:
            for g in tuples:
                prod = tuple(_matmul(a, b) for a, b in zip(t, g))
                if prod not in seen:
                    seen[prod] = None
                    if len(seen) > max(cap, 1):
                        report.reasons.append(f"homomorphism: the group generated by the actions has "
                                              f"more than max_group_size={cap} elements")
                        return
                    nxt.append(prod)
        frontier = nxt
    by_input: dict[Matrix, tuple] = {}
    for t in seen:
        other = by_input.setdefault(t[0], t)
        if other != t:
            i = next(i for i in range(1, n_layers + 1) if other[i] != t[i])
            where = "the output" if i == n_layers else f"hidden layer {i}"
            report.reasons.append(f"homomorphism: two group elements with the same input matrix act "
                                  f"differently on {where}; the actions do not respect a relation of "
                                  f"the group")
            return
    report.checks.append(f"homomorphism: group of order {len(seen)}, all {max(n_layers - 1, 0)} "
                         f"latent actions consistent")


def _check_layerwise(report: CheckReport, cert: dict, n_in: int, layers: list[_Layer],
                     group: list, cap: int) -> None:
    params = _dict(cert.get("parameters"), "certificate parameters")
    theta2 = _layers(params.get("layers"), n_in, "certificate parameters")
    if theta2 != layers and params.get("reparametrized") is not True:
        report.reasons.append(f"{PARAMS_DIFFER} (and the certificate does not declare a re-parametrization)")
        return
    if theta2 != layers:
        why = _same_function_failure(layers, theta2, n_in)
        if why and why.startswith("equality of ReLU"):
            report.checks.append(f"nothing this checker can re-verify: {why}")
            report.unverifiable = True
            return
        if why:
            report.reasons.append(f"{PARAMS_DIFFER}: {why}")
            return
        report.checks.append(f"parameters: re-parametrized theta' with the model's widths and activations; "
                             f"f(x; theta') = f(x; theta) on all {_lattice_size(layers, n_in)} points of the "
                             f"principal lattice of degree {_degree(layers)} (unisolvent): the same function")
        layers = theta2
    else:
        report.checks.append(f"parameters: equal to the model's ({len(layers)} layers)")
    layers = _chain(layers)
    actions = cert.get("latent_actions")
    if not isinstance(actions, list) or len(actions) != len(layers) - 1:
        report.reasons.append(f"latent_actions must list one entry per hidden layer "
                              f"({len(layers) - 1})")
        return
    rho = [[p for p, _ in group]]
    for i, (entry, layer) in enumerate(zip(actions, layers), 1):
        n = len(layer.weight)
        if not isinstance(entry, list) or len(entry) != len(group):
            report.reasons.append(f"layer {i}: latent_actions must give one matrix per generator "
                                  f"({len(group)})")
            return
        mats = [_matrix(m, f"latent_actions layer {i} generator {g}") for g, m in enumerate(entry)]
        for g, m in enumerate(mats):
            if len(m) != n or len(m[0]) != n:
                report.reasons.append(f"layer {i}, generator {g}: latent action must be {n} x {n}")
                return
            if isinstance(layer, _Heads):
                why = _block_monomial_failure(m, layer)
            else:
                why = _monomial_failure(m, layer.act == "relu")
            if why:
                report.reasons.append(f"layer {i}, generator {g}: latent action {why}")
        rho.append(mats)
    rho.append([q for _, q in group])
    if report.reasons:
        return
    offsets = cert.get("latent_offsets")
    offs = [[None] * len(group)]
    if offsets is not None:
        if not isinstance(offsets, list) or len(offsets) != len(layers) - 1:
            report.reasons.append(f"latent_offsets must list one entry per hidden layer ({len(layers) - 1})")
            return
        for i, (entry, layer) in enumerate(zip(offsets, layers), 1):
            if not isinstance(entry, list) or len(entry) != len(group):
                report.reasons.append(f"layer {i}: latent_offsets must give one vector per generator")
                return
            if isinstance(layer, _Heads) and any(any(_vector(c, "offset")) for c in entry):
                report.reasons.append(f"layer {i}: attention heads admit no offsets")
                return
            offs.append([_vector(c, f"latent_offsets layer {i} generator {g}", len(layer.weight))
                         for g, c in enumerate(entry)])
    else:
        offs += [[None] * len(group) for _ in range(len(layers) - 1)]
    offs.append([None] * len(group))
    for g in range(len(group)):
        for i, layer in enumerate(layers, 1):
            last = i == len(layers)
            if isinstance(layer, _Heads):
                why = _heads_failure(layer, rho[i - 1][g], rho[i][g])
                if why:
                    report.reasons.append(f"layer {i}, generator {g}: {why}")
                else:
                    report.checks.append(f"layer {i}, generator {g}: heads(P x) = Q heads(x) on all "
                                         f"{comb(len(rho[0][g]) + 3, 3)} points of the degree-3 principal "
                                         f"lattice (unisolvent): verified ({len(layer.scores)} heads)")
                continue
            why = _layer_failure(layer, rho[i - 1][g], rho[i][g], last, offs[i - 1][g], offs[i][g])
            if why:
                report.reasons.append(f"layer {i}, generator {g}: {why}")
            elif last:
                report.checks.append(f"layer {i}, generator {g}: W P = Q W and b = Q b verified "
                                     f"(affine output layer, {len(layer.weight)} outputs)")
            else:
                s = "relu" if layer.act == "relu" else "sigma"
                report.checks.append(f"layer {i}, generator {g}: {s}(W P x + b) = Q {s}(W x + b) "
                                     f"verified ({layer.label}, {len(layer.weight)} neurons)")
    for g, (p, _) in enumerate(group):
        if not _invertible(p):
            report.reasons.append(f"generator {g}: input matrix is singular (not a group element)")
    if not report.reasons:
        def action(i, g):  # affine y -> M y + c as the augmented matrix [[M, c], [0, 1]]
            m, c = rho[i][g], offs[i][g]
            if c is None:
                return m
            return tuple(tuple(row) + (c[r],) for r, row in enumerate(m)) + (tuple([Fraction(0)] * len(m)) + (Fraction(1),),)
        _homomorphism(report, [tuple(action(i, g) for i in range(len(rho))) for g in range(len(group))], cap)


def _block_monomial_failure(m: Matrix, layer: _Heads) -> str | None:
    """None if m = P (x) R with P a permutation of tokens and R block monomial: one invertible
    d_v x d_v block in each block row and block column (heads permuted, GL(d_v) inside)."""
    T, H, dv = layer.tokens, len(layer.scores), layer.dv
    w = H * dv
    blocks = {}
    for t in range(T):
        for s_ in range(T):
            b = tuple(tuple(m[t * w + a][s_ * w + c] for c in range(w)) for a in range(w))
            if any(any(r) for r in b):
                blocks[t, s_] = b
    if sorted(t for t, _ in blocks) != list(range(T)) or sorted(s_ for _, s_ in blocks) != list(range(T)):
        return "does not permute tokens (not P (x) R with P a permutation)"
    rs = set(blocks.values())
    if len(rs) != 1:
        return "acts differently on different tokens (not P (x) R)"
    (r,) = rs
    for h in range(H):
        cols = [k for k in range(H) if any(r[h * dv + a][k * dv + c] for a in range(dv) for c in range(dv))]
        if len(cols) != 1:
            return f"head {h}: {len(cols)} nonzero blocks in its block row (a block-monomial matrix needs exactly 1)"
        k = cols[0]
        b = tuple(tuple(r[h * dv + a][k * dv + c] for c in range(dv)) for a in range(dv))
        if not _invertible(b):
            return f"head {h}: its block is not invertible"
    for k in range(H):
        rows = [h for h in range(H) if any(r[h * dv + a][k * dv + c] for a in range(dv) for c in range(dv))]
        if len(rows) != 1:
            return f"block column {k} has {len(rows)} nonzero blocks (not block monomial)"
    return None


def _heads_failure(layer: _Heads, p: Matrix, q: Matrix) -> str | None:
    """heads(P x) = Q heads(x) for all x: both sides are polynomials of degree <= 3 in x, so
    agreement on the principal lattice of degree 3 (unisolvent) is a proof."""
    n = len(p)
    if comb(n + 3, 3) > MAX_LATTICE:
        return f"the degree-3 lattice in {n} variables is larger than this checker evaluates ({MAX_LATTICE})"
    for x in _lattice(n, 3):
        lhs = _evaluate([layer], _matvec(p, x))
        rhs = _matvec(q, _evaluate([layer], x))
        if lhs != rhs:
            return f"heads(P x) != Q heads(x) at x = {_fmt(x)}"
    return None


def _degree(layers) -> int:
    d = 1
    for layer in layers:
        if isinstance(layer, (_Attention, _Heads)):
            d *= 3
        elif layer.act is not None:
            d *= len(layer.act) - 1
    return d


def _lattice_size(layers, n_in: int) -> int:
    return comb(n_in + _degree(layers), n_in)


def _lattice(n: int, d: int):
    """Points a in N^n with a_1 + ... + a_n <= d (unisolvent for total degree <= d)."""
    if n == 0:
        yield ()
        return
    for a in range(d + 1):
        for rest in _lattice(n - 1, d - a):
            yield (Fraction(a),) + rest


def _same_function_failure(layers, theta2, n_in: int) -> str | None:
    """None if theta' has the model's shape and activations and the same function; else why not.

    Both functions are polynomials of total degree <= D, so agreement on the principal lattice
    of degree D is a proof of equality.
    """
    if [len(l.weight) for l in layers] != [len(l.weight) for l in theta2]:
        return "theta' has other widths"
    if [l.act for l in layers] != [l.act for l in theta2]:
        return "theta' has other activations"
    if any(l.act == "relu" for l in layers):
        return "equality of ReLU functions is not re-verified by this checker version"
    size = _lattice_size(layers, n_in)
    if size > MAX_LATTICE:
        return f"the unisolvent lattice has {size} points, more than this checker evaluates ({MAX_LATTICE})"
    for x in _lattice(n_in, _degree(layers)):
        if _evaluate(layers, x) != _evaluate(theta2, x):
            return f"f(x; theta') != f(x; theta) at x = {_fmt(x)}"
    return None


def _check_witness(report: CheckReport, eq: dict, n_in: int, layers: list[_Layer],
                   group: list) -> None:
    witness = eq.get("witness")
    if witness is None:
        report.reasons.append("a not-equivariant certificate needs a witness")
        return
    g = _dict(witness, "witness").get("generator")
    if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < len(group):
        raise CheckError(f"witness: generator must be an index below {len(group)}, got {_short(g)}")
    x = _vector(witness.get("x"), "witness x", n_in)
    p, q = group[g]
    lhs, rhs = _evaluate(layers, _matvec(p, x)), _matvec(q, _evaluate(layers, x))
    report.checks.append(f"witness, generator {g}, x = {_fmt(x)}: f(P x) = {_fmt(lhs)}")
    report.checks.append(f"witness, generator {g}, x = {_fmt(x)}: Q f(x) = {_fmt(rhs)}")
    if lhs == rhs:
        report.reasons.append("the witness does not break equivariance: f(P x) == Q f(x)")
    else:
        report.checks.append(f"f(P x) != Q f(x): the model is not equivariant under generator {g}")


def check_certificate(cert: dict, model: dict, *, max_group_size: int = 10000) -> CheckReport:
    """Re-verify a certificate against a model, exactly.

    Parameters
    ----------
    cert : dict
        A parsed ``symeq-certificate/1`` document.
    model : dict
        A parsed ``symeq-model/1`` document.
    max_group_size : int, optional
        Cap on the size of the group enumerated by the homomorphism check.

    Returns
    -------
    CheckReport
        ``accepted`` is True, False, or None when the verdict claims nothing verifiable.

    Raises
    ------
    CheckError
        If either document is malformed (bad number, wrong shape, unknown kind or verdict).
    """
    n_in, layers, model_group = _model(model)
    if _dict(cert, "certificate").get("format") != CERT_FORMAT:
        raise CheckError(f"certificate: format must be {CERT_FORMAT!r}, "
                         f"got {_short(cert.get('format'))}")
    verdict = cert.get("verdict")
    if verdict not in VERIFIABLE + UNVERIFIABLE:
        raise CheckError(f"certificate: unknown verdict {_short(verdict)}")
    report = CheckReport(None, verdict)
    cert_dim = _count(cert.get("input_dim"), "certificate input_dim", 1)
    if cert_dim != n_in:
        report.reasons.append(f"certificate input_dim {cert_dim} differs from the model's {n_in}")
        report.accepted = False
        return report
    group = _group(cert.get("group"), n_in, len(layers[-1].weight), "certificate group")
    if model_group is not None and model_group != group:
        report.reasons.append("the model's group differs from the certificate's")
    elif model_group is not None:
        report.checks.append(f"group: the model's group equals the certificate's "
                             f"({len(group)} generators)")
    eq = cert.get("equivariance")
    eq = {} if eq is None else _dict(eq, "certificate equivariance")
    if verdict in UNVERIFIABLE:
        report.checks.append(f"nothing this checker can re-verify: {verdict}")
        report.accepted = False if report.reasons else None
        return report
    expected = verdict == "layerwise-equivariant"
    if eq.get("holds") is not None and eq.get("holds") is not expected:
        report.reasons.append(f"equivariance.holds = {eq.get('holds')} contradicts the verdict")
    if expected:
        _check_layerwise(report, cert, n_in, layers, group, max_group_size)
    else:
        _check_witness(report, eq, n_in, layers, group)
    report.accepted = None if (getattr(report, "unverifiable", False) and not report.reasons) else not report.reasons
    return report


def _load(path: str, what: str):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise CheckError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise CheckError(f"{what} file {path} is not valid JSON: {exc}") from None


def check_files(cert_path: str, model_path: str) -> CheckReport:
    """Read a certificate and a model from JSON files and check them (see `check_certificate`)."""
    return check_certificate(_load(cert_path, "certificate"), _load(model_path, "model"))


def main(argv=None) -> int:
    """Command line entry point: ``python -m symeq.check CERT MODEL``; returns the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    usage = "usage: python -m symeq.check CERT MODEL"
    if args in (["-h"], ["--help"]):
        print(usage + "\nexit codes: 0 accepted, 1 rejected, 2 malformed input, 3 nothing verifiable")
        return 0
    if len(args) != 2:
        print(f"{usage}\nerror: expected a certificate file and a model file", file=sys.stderr)
        return 2
    try:
        report = check_files(*args)
    except CheckError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # never a traceback; a checker bug must not look like acceptance
        print(f"error: internal checker failure: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
