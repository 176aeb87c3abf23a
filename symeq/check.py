"""Independent certificate checker: ``python -m symeq.check CERT MODEL``.

This module re-verifies a ``symeq-certificate/2`` (or the older ``symeq-certificate/1``) against
a ``symeq-model/1`` file and trusts nothing but the Python standard library. Numbers are
:class:`fractions.Fraction`, files are read with :mod:`json`, and it imports no other symeq
module, no flint, sympy or numpy, so that a bug in the rest of the package (or in a Groebner
engine) cannot make it accept a wrong certificate. It is kept small on purpose, to be read and
audited in one sitting.

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

Real activations (tanh, sigmoid, gelu, silu, softplus, elu, leaky_relu, erf) are never evaluated
exactly: a layer is proved by the identity table ``REAL_SYMMETRY_TABLE`` (every (alpha, beta, q, c)
with sigma(alpha t + beta) = q sigma(t) + c; docs/theory.md, "Real activations"), and a refutation
is a ball witness (``"kind": "arb"``: x, a precision and symeq's enclosures of f(P x) - Q f(x)),
which this checker re-proves with its own interval arithmetic on Fractions (series with explicit
remainder bounds, outward rounding): some output's enclosure must exclude 0, and every enclosure of
the certificate must meet the checker's own.

The verdicts ``undetermined`` and ``no-layerwise-parameter`` claim nothing that can be re-verified
(exit code 3). A certificate checked against another model (its input size, group, theta or
theta's digest differ from the model file's) is bad input, exit code 2, as are swapped arguments
(a model given first); a certificate whose claims fail for its own model is rejected, exit code 1.
Text output numbers from 1: layers (``f_1 .. f_L``), generators, rows, neurons, heads and
outputs; JSON paths in messages (``generators[0]``) keep the arrays' 0-based indices.

Sparse actions
--------------
Every action is held as sparse rows (the nonzero ``(column, value)`` pairs of each row), whatever
its JSON form: a dense matrix (format 1), or in format 2 a monomial ``{"kind": "monomial",
"source": [...], "factor": [...]}`` (row j has ``factor[j]`` in column ``source[j]``) or a
block-monomial ``P (x) R`` for attention heads. Applying a monomial action to a weight matrix is
then a permutation and scaling of its columns, never a dense product, and the homomorphism check
composes sparse matrices: the whole check takes time about linear in the number of parameters
(see docs/certificates.md). Every number is still an exact Fraction.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field, fields, is_dataclass
from fractions import Fraction
from functools import lru_cache
from math import comb

MODEL_FORMAT = "symeq-model/1"
CERT_FORMAT = "symeq-certificate/2"       # sparse actions (written by symeq >= this version)
CERT_FORMAT_DENSE = "symeq-certificate/1"  # dense action matrices (still read)
VERIFIABLE = ("layerwise-equivariant", "not-equivariant")
UNVERIFIABLE = ("no-layerwise-parameter", "undetermined")
PARAMS_DIFFER = "parameters differ from the model"
MAX_LATTICE = 50000
MAX_DEGREE = 1000  # largest activation degree / Taylor order read (symeq's --max-degree default)
_FRACTION = re.compile(r"([+-]?)(\d+)/(\d+)")
_DECIMAL = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")
_MAX_EXPONENT = 1000

Matrix = tuple[tuple[Fraction, ...], ...]
Sparse = tuple[tuple[tuple[int, Fraction], ...], ...]  # rows of (column, nonzero value), by column


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
    mismatch : bool
        True when the certificate is about another model (its input dimension, group, theta or
        theta's digest differ from the model file's): bad input, exit code 2, not a rejection of
        the certificate's claims.
    """

    accepted: bool | None
    verdict: str
    reasons: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    mismatch: bool = False

    @property
    def exit_code(self) -> int:
        """Process exit code: 0 accepted, 1 rejected, 2 a certificate of another model, 3 nothing verifiable."""
        if self.mismatch:
            return 2
        return 3 if self.accepted is None else (0 if self.accepted else 1)

    def lines(self) -> list[str]:
        """Return the report as printable lines."""
        result = {True: "accepted", False: "rejected", None: "undetermined (nothing verified)"}[self.accepted]
        if self.mismatch:
            result = "not checked: the certificate is not about this model (exit 2; give the model it was written for)"
        return ([f"verdict: {self.verdict}"] + [f"checked: {c}" for c in self.checks]
                + [f"REJECTED: {r}" for r in self.reasons] + [f"result: {result}"])


@dataclass(frozen=True)
class _Layer:
    weight: Matrix
    bias: tuple[Fraction, ...]
    act: object  # None (affine), "relu", a tuple of polynomial coefficients c_0 .. c_d, or a _Real
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


class _BadNumber(Exception):
    pass


@lru_cache(maxsize=1 << 16)
def _parse_text(value: str) -> Fraction:
    """A number written as a string; cached because weight sharing repeats the same strings
    (a Fraction is immutable, so sharing one object is safe)."""
    try:
        match = _FRACTION.fullmatch(value)
        if match:
            if int(match[3]) == 0:
                raise _BadNumber(f"zero denominator in {_short(value)}")
            return Fraction(int(match[1] + match[2]), int(match[3]))
        match = _DECIMAL.fullmatch(value)
        if match and (match[2] or match[3]):
            digits = (match[2] or "") + (match[3] or "")
            exponent = int(match[4] or 0) - len(match[3] or "")
            if abs(exponent) > _MAX_EXPONENT:
                raise _BadNumber(f"exponent too large in {_short(value)}")
            if exponent == 0:
                return Fraction(int(match[1] + digits))
            return int(match[1] + digits) * Fraction(10) ** exponent
    except ValueError:  # e.g. more digits than int() accepts
        raise _BadNumber(f"cannot read the number {_short(value)}") from None
    raise _BadNumber(f'{_short(value)} is not a number (an integer, "p/q" or a decimal string)')


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
            return _parse_text(value)
        except _BadNumber as exc:
            raise CheckError(f"{where}: {exc}") from None
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
    return tuple(_vector(row, f"{where} row {r + 1}", cols) for r, row in enumerate(value))


def close_names(name, known, n: int = 3) -> list[str]:
    """The names in ``known`` closest to ``name`` (difflib), for "did you mean" hints.

    >>> close_names("biases", ["weight", "bias", "activation"])
    ['bias']
    """
    import difflib

    return difflib.get_close_matches(str(name), [str(k) for k in known], n=n, cutoff=0.6)


def check_keys(obj: dict, where: str, allowed, required=(), error=None) -> None:
    """Refuse an object with an unknown or a missing key (the one schema check of every file).

    ``allowed`` lists every key that may appear (``required`` ones included); ``where`` is the
    object's JSON path (``model.layers[0]``).  The error names the key, the path, the keys allowed
    there and, when one is close, says "did you mean".  ``error`` is the exception class raised
    (:class:`CheckError` by default; symeq's readers pass their ``InputError``, exit 2).

    >>> check_keys({"weight": [[1]], "biases": [0]}, "layers[0]", ["type", "weight", "bias"], ["weight", "bias"])
    Traceback (most recent call last):
    ...
    symeq.check.CheckError: layers[0]: unknown key "biases" (did you mean "bias"?); allowed here: "type", "weight", "bias"
    """
    error = CheckError if error is None else error
    allowed = list(allowed)
    listed = ", ".join(f'"{k}"' for k in allowed)
    for key in obj:
        if key not in allowed:
            close = close_names(key, allowed, 1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            raise error(f'{where}: unknown key "{key}"{hint}; allowed here: {listed}')
    for key in required:
        if key not in obj:
            raise error(f'{where}: missing key "{key}"; required here: '
                        + ", ".join(f'"{k}"' for k in required))


def _dict(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise CheckError(f"{where}: expected a JSON object, got {_short(value)}")
    return value


def _count(value, where: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CheckError(f"{where}: expected an integer >= {minimum}, got {_short(value)}")
    if maximum is not None and value > maximum:
        raise CheckError(f"{where}: {value} exceeds the checker's limit {maximum}")
    return value


# ----------------------------------------------------------------------------- schemas
# The keys allowed in each object of the files read here, and the required ones (``check_keys``).
# A model file as symeq.io reads it (conv2d layers: the conv section at the end); "bias" is required
# on dense layers (null: no bias), so that a misspelt key cannot turn into a zero bias.
MODEL_KEYS = (("format", "name", "input_dim", "layers", "group"), ("format", "input_dim", "layers"))
DENSE_KEYS = (("type", "weight", "bias", "activation"), ("type", "weight", "bias"))
ATTENTION_KEYS = (("type", "tokens", "heads"), ("type", "tokens", "heads"))
HEAD_KEYS = (("query", "key", "value", "out"), ("query", "key", "value", "out"))
GROUP_KEYS = (("label", "generators"), ("generators",))
GENERATOR_KEYS = (("name", "input", "output"), ("input", "output"))


# A symeq-certificate/1 or /2 (symeq.theorem.Verification.certificate).  Every key the checker reads
# for the certificate's verdict is required (a deleted key is refused, never read as absent: a missing
# "latent_offsets" must not read as "no offsets"); "identifiability", "checks", "notes" and "versions"
# are reports for people, not read here, and "seconds"/"exit_code" are what ``symeq verify --json`` adds.
CERT_KEYS = ("format", "verdict", "theorem", "model_name", "equivariance", "identifiability", "input_dim",
             "group", "parameters", "latent_groups", "latent_actions", "latent_offsets", "checks", "notes",
             "versions", "seconds", "exit_code")
CERT_REQUIRED = {"layerwise-equivariant": ("format", "verdict", "input_dim", "group", "parameters",
                                           "latent_actions", "latent_offsets"),
                 "not-equivariant": ("format", "verdict", "input_dim", "group", "equivariance")}
EQUIVARIANCE_KEYS = ("holds", "method", "probabilistic", "error_bound", "points", "detail", "witness")
EQ_WITNESS_KEYS = (("generator", "generator_name", "x", "f_of_gx", "g_of_fx"), ("generator", "x"))
PARAMETER_KEYS = (("layers", "layers_sha256", "reparametrized"), ("reparametrized",))
ACTION_KEYS = {"monomial": ("kind", "source", "factor"), "block-monomial": ("kind", "tokens", "heads", "blocks"),
               "dense": ("kind", "matrix")}
CHECKS_KEYS = (("layers", "homomorphism", "group_order", "candidates_per_generator", "derivation_method",
                "failure"), ())


def _path(where: str) -> str:
    """The JSON path of a reader's place name: "certificate parameters" -> "certificate.parameters"."""
    return where.replace(" ", ".")


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


POLYNOMIAL_ACTIVATION_KEYS = {"relu": ("type",), "tanh_series": ("type", "order"), "sigmoid_series": ("type", "order"),
                              "monomial": ("type", "degree"), "polynomial": ("type", "coeffs")}


def _activation(spec, where: str) -> tuple[object, str]:
    if spec is None:
        return None, "affine"
    kind = _dict(spec, f"{where} activation").get("type")
    if isinstance(kind, str) and kind in REAL_SYMMETRY_TABLE:  # real activations: their own section below
        return _real_activation(spec, where)
    if isinstance(kind, str) and kind in POLYNOMIAL_ACTIVATION_KEYS:  # strict keys, as symeq.activations reads them
        check_keys(spec, f"{where} activation", POLYNOMIAL_ACTIVATION_KEYS[kind], POLYNOMIAL_ACTIVATION_KEYS[kind])
    if kind == "relu":
        return "relu", "relu"
    if kind == "tanh_series":
        order = _count(spec.get("order"), f"{where} activation order", 1, MAX_DEGREE)
        if order % 2 == 0:
            raise CheckError(f"{where}: tanh_series order must be odd, got {order}")
        coeffs, label = tanh_series_coeffs(order), f"tanh_series({order})"
    elif kind == "sigmoid_series":
        order = _count(spec.get("order"), f"{where} activation order", 1, MAX_DEGREE)
        coeffs, label = sigmoid_series_coeffs(order), f"sigmoid_series({order})"
    elif kind == "monomial":
        degree = _count(spec.get("degree"), f"{where} activation degree", 1, MAX_DEGREE)
        coeffs, label = [Fraction(0)] * degree + [Fraction(1)], f"t^{degree}"
    elif kind == "polynomial":
        if isinstance(spec.get("coeffs"), list) and len(spec["coeffs"]) > MAX_DEGREE + 1:
            raise CheckError(f"{where}: polynomial activation of degree {len(spec['coeffs']) - 1} exceeds the "
                             f"checker's limit {MAX_DEGREE}")
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
    shape = None  # (C, H, W) after a conv2d layer (conv section below)
    for i, spec in enumerate(value, 1):
        name = f"{where} layer {i}"
        kind = _dict(spec, name).get("type")
        at = f"{_path(where)}.layers[{i - 1}]"
        if kind == "attention" and i == 1:
            check_keys(spec, at, *ATTENTION_KEYS)
            att = _attention(spec, input_dim, name, at)
            layers.append(att)
            tokens, width = att.tokens, att.d_out
            continue
        if kind == "flatten":  # (C, H, W) is stored flattened already
            check_keys(spec, at, ("type",), ("type",))
            continue
        if kind == "conv2d" or (kind == "dense" and shape is not None):
            last = i == len(value)
            conv = (_conv_layer(spec, shape, width, name, at, last) if kind == "conv2d"
                    else _dense_after_conv(spec, shape, name, at, last))
            layers.append(conv)
            shape, width = conv.out_shape, conv.out_dim
            continue
        if kind != "dense":
            raise CheckError(f"{name}: unsupported layer type {_short(spec.get('type'))}")
        check_keys(spec, at, *DENSE_KEYS)
        weight = _matrix(spec.get("weight"), f"{name} weight", cols=width)
        width = len(weight)
        bias = spec.get("bias")
        bias = (Fraction(0),) * width if bias is None else _vector(bias, f"{name} bias", width)  # null: no bias
        act, label = _activation(spec.get("activation"), name)
        if i == len(value) and act is not None:
            raise CheckError(f"{name}: the last layer must be affine (activation null)")
        if i < len(value) and act is None:
            raise CheckError(f"{name}: a hidden layer needs a non-null activation")
        if tokens is not None:  # token-wise after attention: I_T (x) W, bias repeated per token
            weight, bias, label = _kron(_identity(tokens), weight), bias * tokens, label + " (token-wise)"
        layers.append(_Layer(weight, bias, act, label))
    return layers


def _attention(spec: dict, input_dim: int, name: str, at: str = "layers[0]") -> _Attention:
    tokens = _count(spec.get("tokens"), f"{name} tokens", 1)
    if input_dim % tokens:
        raise CheckError(f"{name}: input_dim {input_dim} is not a multiple of {tokens} tokens")
    d = input_dim // tokens
    heads = spec.get("heads")
    if not isinstance(heads, list) or not heads:
        raise CheckError(f"{name}: 'heads' must be a non-empty list")
    parsed = []
    for h, hs in enumerate(heads):
        hs = _dict(hs, f"{name} head {h + 1}")
        check_keys(hs, f"{at}.heads[{h}]", *HEAD_KEYS)
        q = _matrix(hs.get("query"), f"{name} head {h + 1} query", rows=d)
        k = _matrix(hs.get("key"), f"{name} head {h + 1} key", rows=d, cols=len(q[0]))
        v = _matrix(hs.get("value"), f"{name} head {h + 1} value", rows=d)
        o = _matrix(hs.get("out"), f"{name} head {h + 1} out", rows=len(v[0]))
        if parsed and (len(v[0]) != len(parsed[0][2][0]) or len(o[0]) != len(parsed[0][3][0])):
            raise CheckError(f"{name} head {h + 1}: all heads need the same d_v and d_out")
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
    check_keys(_dict(value, where), _path(where), *GROUP_KEYS)
    gens = value.get("generators")
    if not isinstance(gens, list):
        raise CheckError(f"{where}: 'generators' must be a list")
    out = []
    for k, g in enumerate(gens):
        check_keys(_dict(g, f"{where} generator {k + 1}"), f"{_path(where)}.generators[{k}]", *GENERATOR_KEYS)
        out.append((_matrix(g.get("input"), f"{where} generator {k + 1} input", n_in, n_in),
                    _matrix(g.get("output"), f"{where} generator {k + 1} output", n_out, n_out)))
    return out


def _model(model) -> tuple[int, list[_Layer], list | None]:
    check_keys(_dict(model, "model"), "model", *MODEL_KEYS)
    if model.get("format") != MODEL_FORMAT:
        raise CheckError(f"model: format must be {MODEL_FORMAT!r}, got {_short(model.get('format'))}")
    n_in = _count(model.get("input_dim"), "model input_dim", 1)
    layers = _layers(model.get("layers"), n_in, "model")
    group = model.get("group")
    if group is not None:
        group = _group(group, n_in, _out_dim(layers[-1]), "model group")
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
    nonzero = [[c for c, x in enumerate(r) if x] for r in a]
    if all(len(c) == 1 for c in nonzero) and len({c[0] for c in nonzero}) == len(a):
        return True  # monomial (e.g. a permutation of pixels): no elimination needed
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


# ----------------------------------------------------------------------------- sparse algebra
# A sparse matrix is a tuple of rows, each a tuple of (column, nonzero value) sorted by column: a
# canonical form, so that == and hashing compare matrices. A monomial matrix has one pair per row.

def _sparse(a: Matrix) -> Sparse:
    """The sparse rows of a dense matrix.

    Examples
    --------
    >>> _sparse(((Fraction(0), Fraction(2)), (Fraction(-1), Fraction(0))))
    (((1, Fraction(2, 1)),), ((0, Fraction(-1, 1)),))
    """
    return tuple(tuple((c, x) for c, x in enumerate(row) if x) for row in a)


def _sparse_identity(n: int) -> Sparse:
    one = Fraction(1)
    return tuple(((j, one),) for j in range(n))


def _smul(a: Sparse, b: Sparse) -> Sparse:
    """The product a b; a row of a with a single entry (monomial) costs one scaled row of b."""
    out = []
    for row in a:
        if len(row) == 1:
            k, x = row[0]
            out.append(b[k] if x == 1 else tuple((c, x * y) for c, y in b[k]))
            continue
        acc: dict = {}
        for k, x in row:
            for c, y in b[k]:
                acc[c] = acc.get(c, 0) + x * y
        out.append(tuple((c, v) for c, v in sorted(acc.items()) if v))
    return tuple(out)


def _smatvec(a: Sparse, x) -> tuple[Fraction, ...]:
    zero = Fraction(0)
    return tuple(sum((v * x[c] for c, v in row), zero) for row in a)


def _times_sparse(w: Matrix, p: Sparse) -> Matrix:
    """W P for dense W and sparse P; for a monomial P a permutation and scaling of W's columns."""
    cols: list = [[] for _ in range(len(p))]  # column c of P as (row, value) pairs
    for k, row in enumerate(p):
        for c, x in row:
            cols[c].append((k, x))
    if all(len(col) == 1 for col in cols):
        src = [col[0][0] for col in cols]
        fac = [col[0][1] for col in cols]
        if all(f == 1 for f in fac):
            return tuple(tuple(r[k] for k in src) for r in w)
        return tuple(tuple(r[k] if f == 1 else r[k] * f for k, f in zip(src, fac)) for r in w)
    zero = Fraction(0)
    return tuple(tuple(sum((r[k] * x for k, x in col), zero) for col in cols) for r in w)


def _sparse_times(q: Sparse, w: Matrix) -> Matrix:
    """Q W for sparse Q and dense W; for a monomial Q a permutation and scaling of W's rows."""
    out, zero, width = [], Fraction(0), len(w[0])
    for row in q:
        if len(row) == 1:
            k, x = row[0]
            out.append(w[k] if x == 1 else tuple(x * y for y in w[k]))
        else:
            out.append(tuple(sum((x * w[k][c] for k, x in row), zero) for c in range(width)))
    return tuple(out)


def _poly(c, t: Fraction) -> Fraction:
    value = Fraction(0)
    for coeff in reversed(c):
        value = value * t + coeff
    return value


def _apply(act, t: Fraction) -> Fraction:
    if act is None:
        return t
    if isinstance(act, _Real):
        return _real_exact(act, t)
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
        elif isinstance(layer, _Conv):
            x = _conv_forward(layer, x)
        else:
            x = tuple(_apply(layer.act, y + b) for y, b in zip(_matvec(layer.weight, x), layer.bias))
    return x


def _fmt(vec) -> str:
    return "[" + ", ".join(str(v) for v in vec) + "]"


def _ratio(u, v) -> Fraction | None:
    """The alpha with u == alpha * v (v nonzero), or None if u is not a multiple of v."""
    k = next(k for k, x in enumerate(v) if x)
    alpha = u[k] / v[k]
    if alpha == 1:  # the common case (permutations): compare without multiplying
        return alpha if tuple(u) == tuple(v) else None
    if alpha == -1:
        return alpha if all(a == -b for a, b in zip(u, v)) else None
    return alpha if all(a == alpha * b for a, b in zip(u, v)) else None


# ----------------------------------------------------------------------------- verification

def _monomial_failure(m: Sparse, relu: bool) -> str | None:
    """Why the square sparse matrix m is not monomial (positive for relu), or None."""
    seen = set()
    for r, row in enumerate(m):
        if len(row) != 1:
            return f"row {r + 1} has {len(row)} nonzero entries (a monomial matrix needs exactly 1)"
        c, x = row[0]
        if relu and x < 0:
            return f"row {r + 1} has a negative entry (a relu layer needs a positive monomial matrix)"
        if c in seen:
            return f"column {c + 1} does not have exactly 1 nonzero entry (not a monomial matrix)"
        seen.add(c)
    return None


def _neuron_failure(act, u, v, bj: Fraction, bk: Fraction, q: Fraction, o: Fraction = Fraction(0)) -> str | None:
    """Why sigma(u.x + bj) == q sigma(v.x + bk) + o fails for some real x, or None if it holds."""
    if isinstance(act, _Real):
        return _real_neuron_failure(act, u, v, bj, bk, q, o)
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


def _layer_failure(layer: _Layer, p: Sparse, q: Sparse, last: bool, c_in=None, c_out=None) -> str | None:
    """Why f(P x + c_in) == Q f(x) + c_out fails (offsets: affine latent actions), or None.

    P and Q are sparse; q is monomial for a hidden layer (checked before), so that row j of the
    identity reads sigma((W P)_j x + b_j) = q_j sigma(W_k x + b_k) for the one k with Q_jk = q_j.
    """
    wp = _times_sparse(layer.weight, p)
    bias = layer.bias if c_in is None else tuple(b + y for b, y in zip(layer.bias, _matvec(layer.weight, c_in)))
    if last:
        if wp != _sparse_times(q, layer.weight):
            return "W P != Q W"
        qb = _smatvec(q, layer.bias)
        if c_out is not None:
            qb = tuple(x + y for x, y in zip(qb, c_out))
        return None if qb == bias else "b + W c != Q b" if c_in is not None else "b != Q b"
    for j, row in enumerate(q):
        k, factor = row[0]
        o = c_out[j] if c_out is not None else Fraction(0)
        why = _neuron_failure(layer.act, wp[j], layer.weight[k], bias[j], layer.bias[k], factor, o)
        if why:
            return f"neuron {j + 1} (sent to neuron {k + 1} with factor {factor}): {why}"
    return None


def _close_tuples(report: CheckReport, tuples: list[tuple], identity: tuple, mul, cap: int) -> dict | None:
    """The tuples the generators ``tuples`` generate under the factor-wise product ``mul`` (breadth first).

    Returns the elements as dict keys, or None after appending a reason when there are more than ``cap``.
    Shared by the dense/sparse and the channel-pixel homomorphism checks.
    """
    seen, frontier = {identity: None}, [identity]
    while frontier:
        nxt = []
        for t in frontier:
            for g in tuples:
                prod = tuple(mul(a, b) for a, b in zip(t, g))
                if prod not in seen:
                    seen[prod] = None
                    if len(seen) > max(cap, 1):
                        report.reasons.append(f"homomorphism: the group generated by the actions has "
                                              f"more than max_group_size={cap} elements")
                        return None
                    nxt.append(prod)
        frontier = nxt
    return seen


def _homomorphism(report: CheckReport, tuples: list[tuple[Sparse, ...]], cap: int) -> None:
    """Enumerate the group the tuples generate (sparse products) and check that rho_in is injective."""
    if not tuples:
        report.checks.append("homomorphism: trivial group (no generators)")
        return
    n_layers = len(tuples[0]) - 1
    seen = _close_tuples(report, tuples, tuple(_sparse_identity(len(m)) for m in tuples[0]), _smul, cap)
    if seen is None:
        return
    by_input: dict[Sparse, tuple] = {}
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


def _indices(value, n: int, where: str) -> list[int]:
    if not isinstance(value, list) or len(value) != n:
        raise CheckError(f"{where}: expected a list of {n} indices, got {_short(value)}")
    if any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < n for c in value):
        raise CheckError(f"{where}: every entry must be an integer index in 0..{n - 1}")
    return value


def _action(value, n: int, where: str, layer, sparse_format: bool):
    """One latent action as sparse rows, or a string saying why it cannot be one (a rejection).

    Format 1 gives a dense n x n matrix. Format 2 gives an object: ``{"kind": "monomial",
    "source": [s_0 ..], "factor": [c_0 ..]}`` (row j holds c_j in column s_j), ``{"kind":
    "block-monomial", "tokens": [..], "heads": [..], "blocks": [B_0 ..]}`` (attention heads:
    P (x) R with P[t][tokens[t]] = 1 and block row h of R holding B_h in block column heads[h]),
    or ``{"kind": "dense", "matrix": [[..]]}``. Whether the result really is monomial (or block
    monomial) is checked afterwards, on the sparse rows, for every form alike.
    """
    if not sparse_format:
        m = _matrix(value, where)
        if len(m) != n or len(m[0]) != n:
            return f"latent action must be {n} x {n}"
        return _sparse(m)
    kind = _dict(value, where).get("kind")
    if isinstance(kind, str) and kind in ACTION_KEYS:
        check_keys(value, where, ACTION_KEYS[kind], ACTION_KEYS[kind])
    if kind == "dense":
        m = _matrix(value.get("matrix"), f"{where} matrix")
        if len(m) != n or len(m[0]) != n:
            return f"latent action must be {n} x {n}"
        return _sparse(m)
    if kind == "monomial":
        source = value.get("source")
        if not isinstance(source, list) or len(source) != n:
            return f"latent action must be {n} x {n} ('source' needs {n} entries)"
        source = _indices(source, n, f"{where} source")
        factor = _vector(value.get("factor"), f"{where} factor", n)
        return tuple(((c, x),) if x else () for c, x in zip(source, factor))
    if kind == "block-monomial":
        if not isinstance(layer, _Heads):
            return "a block-monomial action belongs to attention heads only"
        T, H, dv = layer.tokens, len(layer.scores), layer.dv
        w = H * dv
        tokens = _indices(value.get("tokens"), T, f"{where} tokens")
        heads = _indices(value.get("heads"), H, f"{where} heads")
        blocks = value.get("blocks")
        if not isinstance(blocks, list) or len(blocks) != H:
            raise CheckError(f"{where}: 'blocks' must list one {dv} x {dv} block per head ({H})")
        blocks = [_matrix(b, f"{where} block {h}", dv, dv) for h, b in enumerate(blocks)]
        return tuple(tuple((tokens[t] * w + heads[h] * dv + c, blocks[h][a][c]) for c in range(dv)
                           if blocks[h][a][c])
                     for t in range(T) for h in range(H) for a in range(dv))
    raise CheckError(f"{where}: unknown action kind {_short(kind)} (monomial, block-monomial or dense)")


def _canonical(x):
    """theta as this checker reads it, as nested tuples of strings (labels left out): what the digest hashes."""
    if is_dataclass(x):
        return tuple((f.name, _canonical(getattr(x, f.name))) for f in fields(x) if f.compare)
    if isinstance(x, (tuple, list)):
        return tuple(_canonical(v) for v in x)
    return None if x is None else str(x)


def layers_digest(layers_json, input_dim: int) -> str:
    """SHA-256 of a model's parameters as this checker reads them (exact entries and activations).

    A certificate of a large model carries this digest instead of a copy of theta
    (``parameters.layers_sha256``); the checker recomputes it from the model file it is given, so
    the certificate stays bound to exactly that theta (docs/certificates.md).

    >>> a = layers_digest([{"type": "dense", "weight": [["1/2"]], "bias": None, "activation": None}], 1)
    >>> a == layers_digest([{"type": "dense", "weight": [["0.5"]], "bias": [0], "activation": None}], 1)
    True
    """
    return _layers_digest(_layers(layers_json, input_dim, "parameters"))


def _layers_digest(layers) -> str:
    return hashlib.sha256(repr(_canonical(list(layers))).encode()).hexdigest()


def _digest_differs(report: CheckReport, digest, layers) -> bool:
    """Record a certificate bound (by ``layers_sha256``) to another theta than the model file's: a
    mismatch (exit 2), not a rejection.  Returns whether it differs."""
    if digest == _layers_digest(layers):
        return False
    report.reasons.append(f"{PARAMS_DIFFER}: the certificate's digest of theta (layers_sha256) is not the "
                          "model's (a certificate of another model, or a changed model file)")
    report.mismatch = True
    return True


def _check_layerwise(report: CheckReport, cert: dict, n_in: int, layers: list[_Layer],
                     group: list, cap: int, sparse_format: bool = True) -> None:
    params = _dict(cert.get("parameters"), "certificate parameters")
    check_keys(params, "certificate.parameters", *PARAMETER_KEYS)
    digest = params.get("layers_sha256")
    if digest is not None and _digest_differs(report, digest, layers):
        return
    if params.get("layers") is None and digest is not None and params.get("reparametrized") is not True:
        theta2 = layers  # theta itself, bound to the model by the digest just checked
    else:
        theta2 = _layers(params.get("layers"), n_in, "certificate parameters")
    if theta2 != layers and params.get("reparametrized") is not True:
        report.reasons.append(f"{PARAMS_DIFFER} (and the certificate does not declare a re-parametrization)")
        # without a digest the copy of theta is what names the model; with a matching digest the
        # copy contradicts the certificate's own digest: a tampered certificate (exit 1)
        report.mismatch = digest is None
        return
    if theta2 != layers:
        why = _same_function_failure(layers, theta2, n_in)
        if why and why.startswith(("equality of ReLU", "equality of conv")):
            report.checks.append(f"nothing this checker can re-verify: {why}")
            report.unverifiable = True
            return
        if why:
            report.reasons.append(f"{PARAMS_DIFFER}: {why}")
            return
        if all(isinstance(l, _Conv) for l in layers) and _conv_canonical_form(layers) == _conv_canonical_form(theta2):
            report.checks.append("parameters: re-parametrized theta' with the model's widths and activations; theta "
                                 "and theta' have the same canonical form (dead channels dropped, equal channels "
                                 "merged): the same function")
        elif any(isinstance(l.act, _Real) for l in layers):
            report.checks.append("parameters: re-parametrized theta' with the model's widths and activations; theta "
                                 "and theta' have the same canonical form (dead neurons dropped, clones merged by the "
                                 "identity table): the same function")
        else:
            report.checks.append(f"parameters: re-parametrized theta' with the model's widths and activations; "
                                 f"f(x; theta') = f(x; theta) on all {_lattice_size(layers, n_in)} points of the "
                                 f"principal lattice of degree {_degree(layers)} (unisolvent): the same function")
        layers = theta2
    else:
        report.checks.append(f"parameters: equal to the model's ({len(layers)} layers)")
    layers = _chain(layers)
    if any(isinstance(layer, _Conv) for layer in layers):  # kernels, sparse channel-pixel actions
        _check_conv_layerwise(report, cert, layers, group, cap)
        return
    actions = cert.get("latent_actions")
    if not isinstance(actions, list) or len(actions) != len(layers) - 1:
        report.reasons.append(f"latent_actions must list one entry per hidden layer "
                              f"({len(layers) - 1})")
        return
    rho = [[_sparse(p) for p, _ in group]]
    for i, (entry, layer) in enumerate(zip(actions, layers), 1):
        n = len(layer.weight)
        if not isinstance(entry, list) or len(entry) != len(group):
            report.reasons.append(f"layer {i}: latent_actions must give one matrix per generator "
                                  f"({len(group)})")
            return
        mats = [_action(m, n, f"certificate.latent_actions[{i - 1}][{g}]", layer, sparse_format)
                for g, m in enumerate(entry)]
        for g, m in enumerate(mats):
            if isinstance(m, str):
                report.reasons.append(f"layer {i}, generator {g + 1}: {m}")
                return
            if isinstance(layer, _Heads):
                why = _block_monomial_failure(m, layer)
            else:
                why = _monomial_failure(m, layer.act == "relu" or _positive_only(layer.act))
            if why:
                report.reasons.append(f"layer {i}, generator {g + 1}: latent action {why}")
        rho.append(mats)
    rho.append([_sparse(q) for _, q in group])
    if report.reasons:
        return
    offsets = cert.get("latent_offsets")
    offs = [[None] * len(group)]
    if offsets is not None:
        if not isinstance(offsets, list) or len(offsets) != len(layers) - 1:
            report.reasons.append(f"latent_offsets must list one entry per hidden layer ({len(layers) - 1})")
            return
        # a bias-free model's latent groups have no offsets (docs/theory.md): no next bias absorbs them
        bias_free = all(not any(getattr(layer, "bias", ())) for layer in layers)
        if bias_free and any(any(_vector(c, "offset")) for entry in offsets if isinstance(entry, list)
                             for c in entry):
            report.reasons.append("latent_offsets are nonzero but the model is bias-free: its latent groups "
                                  "have no affine part")
            return
        for i, (entry, layer) in enumerate(zip(offsets, layers), 1):
            if not isinstance(entry, list) or len(entry) != len(group):
                report.reasons.append(f"layer {i}: latent_offsets must give one vector per generator")
                return
            if isinstance(layer, _Heads) and any(any(_vector(c, "offset")) for c in entry):
                report.reasons.append(f"layer {i}: attention heads admit no offsets")
                return
            offs.append([_vector(c, f"latent_offsets layer {i} generator {g + 1}", len(layer.weight))
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
                    report.reasons.append(f"layer {i}, generator {g + 1}: {why}")
                else:
                    report.checks.append(f"layer {i}, generator {g + 1}: heads(P x) = Q heads(x) on all "
                                         f"{comb(len(rho[0][g]) + 3, 3)} points of the degree-3 principal "
                                         f"lattice (unisolvent): verified ({len(layer.scores)} heads)")
                continue
            why = _layer_failure(layer, rho[i - 1][g], rho[i][g], last, offs[i - 1][g], offs[i][g])
            if why:
                report.reasons.append(f"layer {i}, generator {g + 1}: {why}")
            elif last:
                report.checks.append(f"layer {i}, generator {g + 1}: W P = Q W and b = Q b verified "
                                     f"(affine output layer, {len(layer.weight)} outputs)")
            else:
                s = "relu" if layer.act == "relu" else "sigma"
                report.checks.append(f"layer {i}, generator {g + 1}: {s}(W P x + b) = Q {s}(W x + b) "
                                     f"verified ({layer.label}, {len(layer.weight)} neurons)")
    for g, (p, _) in enumerate(group):
        if not _invertible(p):
            report.reasons.append(f"generator {g + 1}: input matrix is singular (not a group element)")
    if not report.reasons:
        def action(i, g):  # affine y -> M y + c as the augmented matrix [[M, c], [0, 1]]
            m, c = rho[i][g], offs[i][g]
            if c is None:
                return m
            n = len(m)
            return tuple(row + (((n, c[r]),) if c[r] else ()) for r, row in enumerate(m)) + (((n, Fraction(1)),),)
        _homomorphism(report, [tuple(action(i, g) for i in range(len(rho))) for g in range(len(group))], cap)


def _block_monomial_failure(m: Sparse, layer: _Heads) -> str | None:
    """None if m = P (x) R with P a permutation of tokens and R block monomial: one invertible
    d_v x d_v block in each block row and block column (heads permuted, GL(d_v) inside)."""
    T, H, dv = layer.tokens, len(layer.scores), layer.dv
    w = H * dv
    blocks: dict = {}  # (token row, token column) -> {(row, column) inside the w x w block: value}
    for row_index, row in enumerate(m):
        t, a = divmod(row_index, w)
        for c, x in row:
            s_, cc = divmod(c, w)
            blocks.setdefault((t, s_), {})[a, cc] = x
    if sorted(t for t, _ in blocks) != list(range(T)) or sorted(s_ for _, s_ in blocks) != list(range(T)):
        return "does not permute tokens (not P (x) R with P a permutation)"
    rs = {frozenset(b.items()) for b in blocks.values()}
    if len(rs) != 1:
        return "acts differently on different tokens (not P (x) R)"
    r = dict(next(iter(rs)))
    for h in range(H):
        cols = sorted({cc // dv for a, cc in r if a // dv == h})
        if len(cols) != 1:
            return f"head {h + 1}: {len(cols)} nonzero blocks in its block row (a block-monomial matrix needs exactly 1)"
        k = cols[0]
        b = tuple(tuple(r.get((h * dv + a, k * dv + c), Fraction(0)) for c in range(dv)) for a in range(dv))
        if not _invertible(b):
            return f"head {h + 1}: its block is not invertible"
    for k in range(H):
        rows = {a // dv for a, cc in r if cc // dv == k}
        if len(rows) != 1:
            return f"block column {k + 1} has {len(rows)} nonzero blocks (not block monomial)"
    return None


def _heads_failure(layer: _Heads, p: Sparse, q: Sparse) -> str | None:
    """heads(P x) = Q heads(x) for all x: both sides are polynomials of degree <= 3 in x, so
    agreement on the principal lattice of degree 3 (unisolvent) is a proof."""
    n = len(p)
    if comb(n + 3, 3) > MAX_LATTICE:
        return f"the degree-3 lattice in {n} variables is larger than this checker evaluates ({MAX_LATTICE})"
    for x in _lattice(n, 3):
        lhs = _evaluate([layer], _smatvec(p, x))
        rhs = _smatvec(q, _evaluate([layer], x))
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
    if [_out_dim(l) for l in layers] != [_out_dim(l) for l in theta2]:
        return "theta' has other widths"
    if [l.act for l in layers] != [l.act for l in theta2]:
        return "theta' has other activations"
    if all(isinstance(l, _Conv) for l in list(layers) + list(theta2)):
        if _conv_canonical_form(layers) == _conv_canonical_form(theta2):
            return None
        size = _lattice_size(layers, n_in)
        if size > MAX_LATTICE or any(isinstance(l.act, _Real) or l.act == "relu" for l in layers):
            return ("equality of conv functions beyond dead and cloned channels is not re-verified by this checker "
                    "version (the canonical forms of theta and theta' differ)")
    if any(isinstance(l.act, _Real) for l in layers):
        why = _real_same_function_failure(layers, theta2)
        if why and any(isinstance(l.act, _Real) and l.act.name == "leaky_relu" for l in layers):
            # symeq's leaky theta' comes from the piecewise-linear fibre decision, which may move
            # kinks' weights between neurons; beyond dead neurons and clones that is not re-proved here
            return (f"equality of ReLU-type (leaky ReLU) functions beyond the canonical form of dead neurons and "
                    f"clones is not re-verified by this checker version ({why})")
        return why
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
    if isinstance(witness, dict) and witness.get("kind") == "arb":  # real activations: a ball witness
        _check_ball_witness(report, witness, n_in, layers, group)
        return
    check_keys(_dict(witness, "witness"), "certificate.equivariance.witness", *EQ_WITNESS_KEYS)
    g = witness.get("generator")
    if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < len(group):
        raise CheckError(f"witness: generator must be an index below {len(group)}, got {_short(g)}")
    x = _vector(witness.get("x"), "witness x", n_in)
    p, q = group[g]
    lhs, rhs = _evaluate(layers, _matvec(p, x)), _matvec(q, _evaluate(layers, x))
    report.checks.append(f"witness, generator {g + 1}, x = {_fmt(x)}: f(P x) = {_fmt(lhs)}")
    report.checks.append(f"witness, generator {g + 1}, x = {_fmt(x)}: Q f(x) = {_fmt(rhs)}")
    if lhs == rhs:
        report.reasons.append("the witness does not break equivariance: f(P x) == Q f(x)")
    else:
        report.checks.append(f"f(P x) != Q f(x): the model is not equivariant under generator {g + 1}")


def check_certificate(cert: dict, model: dict, *, max_group_size: int = 10000) -> CheckReport:
    """Re-verify a certificate against a model, exactly.

    The certificate's ``format`` chooses the checker (see ``CERTIFICATE_CHECKERS``).

    Parameters
    ----------
    cert : dict
        A parsed certificate: ``symeq-certificate/2`` (sparse actions) or ``symeq-certificate/1``
        (dense actions).
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
    fmt = _dict(cert, "certificate").get("format")
    checker = CERTIFICATE_CHECKERS.get(fmt) if isinstance(fmt, str) else None
    if checker is None:
        raise CheckError(f"certificate: format must be one of {', '.join(map(repr, CERTIFICATE_CHECKERS))}, "
                         f"got {_short(fmt)}")
    return checker(cert, model, max_group_size=max_group_size)


def _check_theorem_certificate(cert: dict, model: dict, *, max_group_size: int = 10000) -> CheckReport:
    """The checker of ``symeq-certificate/1`` and ``/2`` (Theorem 4.1 at theta)."""
    n_in, layers, model_group = _model(model)
    check_keys(cert, "certificate", CERT_KEYS, CERT_REQUIRED.get(cert.get("verdict"), ("format", "verdict"))
               if isinstance(cert.get("verdict"), str) else ("format", "verdict"))
    if cert.get("checks") is not None:
        check_keys(_dict(cert["checks"], "certificate checks"), "certificate.checks", *CHECKS_KEYS)
    params = cert.get("parameters")
    if params is not None:  # used for layerwise-equivariant only, read strictly for every verdict
        check_keys(_dict(params, "certificate parameters"), "certificate.parameters", *PARAMETER_KEYS)
        if cert.get("verdict") != "layerwise-equivariant" and params.get("layers") is not None:
            _layers(params["layers"], n_in, "certificate parameters")
    sparse_format = cert.get("format") == CERT_FORMAT
    verdict = cert.get("verdict")
    if verdict not in VERIFIABLE + UNVERIFIABLE:
        raise CheckError(f"certificate: unknown verdict {_short(verdict)}")
    report = CheckReport(None, verdict)
    cert_dim = _count(cert.get("input_dim"), "certificate input_dim", 1)
    if cert_dim != n_in:
        report.reasons.append(f"certificate input_dim {cert_dim} differs from the model's {n_in}")
        report.accepted = False
        report.mismatch = True
        return report
    group = _group(cert.get("group"), n_in, _out_dim(layers[-1]), "certificate group")
    if model_group is not None and model_group != group:
        report.reasons.append("the model's group differs from the certificate's")
        report.mismatch = True
    elif model_group is not None:
        report.checks.append(f"group: the model's group equals the certificate's "
                             f"({len(group)} generators)")
    eq = cert.get("equivariance")
    eq = {} if eq is None else _dict(eq, "certificate equivariance")
    check_keys(eq, "certificate.equivariance", EQUIVARIANCE_KEYS,
               ("witness",) if verdict == "not-equivariant" else ())
    if verdict in UNVERIFIABLE:
        report.checks.append(f"nothing this checker can re-verify: {verdict}")
        report.accepted = False if report.reasons else None
        return report
    expected = verdict == "layerwise-equivariant"
    if eq.get("holds") is not None and eq.get("holds") is not expected:
        report.reasons.append(f"equivariance.holds = {eq.get('holds')} contradicts the verdict")
    if expected:
        _check_layerwise(report, cert, n_in, layers, group, max_group_size, sparse_format)
    else:
        params = cert.get("parameters")
        digest = params.get("layers_sha256") if isinstance(params, dict) else None
        if digest is not None and _digest_differs(report, digest, layers):  # a witness for another model
            pass
        elif (isinstance(params, dict) and params.get("layers") is not None
              and _layers(params.get("layers"), n_in, "certificate parameters") != layers):
            # the witness is re-proved on the model file; a copy of theta that differs from it is
            # another model's certificate (no digest) or contradicts its own digest (tampered)
            report.reasons.append(f"{PARAMS_DIFFER}: the certificate's copy of theta is not the model's")
            report.mismatch = digest is None
        else:
            _check_witness(report, eq, n_in, layers, group)
    report.accepted = None if (getattr(report, "unverifiable", False) and not report.reasons) else not report.reasons
    return report


# The dispatch point: one checker per certificate format. A new certificate kind adds its
# checker (a function (cert, model, *, max_group_size) -> CheckReport) to this table.
CERTIFICATE_CHECKERS = {
    CERT_FORMAT: _check_theorem_certificate,
    CERT_FORMAT_DENSE: _check_theorem_certificate,
}


def _load(path: str, what: str):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise CheckError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise CheckError(f"{what} file {path} is not valid JSON: {exc}") from None


def _argument_order(cert, model, cert_path: str, model_path: str, usage: str) -> None:
    """Refuse a model given as CERT or a certificate given as MODEL, naming the mistake (exit 2)."""
    def fmt(doc):
        return doc.get("format") if isinstance(doc, dict) else None

    # every symeq document but a model is taken for a certificate here (new kinds included)
    is_cert = isinstance(fmt(model), str) and fmt(model).startswith("symeq-") and fmt(model) != MODEL_FORMAT
    if fmt(cert) == MODEL_FORMAT and is_cert:
        raise CheckError(f"{cert_path} is a model ({MODEL_FORMAT}) and {model_path} a certificate "
                         f"({fmt(model)}): did you swap the arguments? {usage}")
    if fmt(cert) == MODEL_FORMAT:
        raise CheckError(f"{cert_path} is a model ({MODEL_FORMAT}), not a certificate: the certificate comes "
                         f"first. {usage}")
    if is_cert:
        raise CheckError(f"{model_path} is a certificate ({fmt(model)}), not a model: the model comes second. "
                         f"{usage}")


def check_files(cert_path: str, model_path: str, usage: str = "usage: symeq check CERT MODEL",
                before_check=None) -> CheckReport:
    """Read a certificate and a model from JSON files and check them (see `check_certificate`).

    Swapped arguments (a model as ``cert_path``, a certificate as ``model_path``) are a
    :class:`CheckError` that says so and ends with ``usage``.  ``before_check`` (no arguments) is
    called once both files are read and in order, before the check itself (symeq prints its
    budget line there).
    """
    cert, model = _load(cert_path, "certificate"), _load(model_path, "model")
    _argument_order(cert, model, cert_path, model_path, usage)
    if before_check is not None:
        before_check()
    return check_certificate(cert, model)


def main(argv=None) -> int:
    """Command line entry point: ``python -m symeq.check CERT MODEL``; returns the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    usage = "usage: python -m symeq.check CERT MODEL"
    if args in (["-h"], ["--help"]):
        print(usage + "\nexit codes: 0 accepted, 1 rejected, 2 malformed input or a certificate of another model "
              "(input size, group or theta differ), 3 nothing verifiable")
        return 0
    if len(args) != 2:
        print(f"{usage}\nerror: expected a certificate file and a model file", file=sys.stderr)
        return 2
    try:
        report = check_files(*args, usage=usage)
    except CheckError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # never a traceback; a checker bug must not look like acceptance
        print(f"error: internal checker failure: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    return report.exit_code


# ============================================================================= identifiability
# ``symeq-identifiability/1``: identifiability of a one-hidden-layer polynomial model at theta by
# Kruskal's theorem (docs/identifiability.md).  Everything below re-derives the certificate's
# claims from the model with Fractions and integers; it imports nothing beyond the standard library.

from itertools import combinations  # noqa: E402 - kept with this section (standard library)
from math import gcd  # noqa: E402

IDENTIFIABILITY_FORMAT = "symeq-identifiability/1"

# The schemas of symeq-identifiability/1 (written by symeq.fibre.tensor and symeq.fibre.deep): every key
# is required (each one is read), so a renamed or deleted key is refused rather than read as absent.
_IDENT_HEADER = ("format", "widths", "degree", "bias", "rank_one_terms", "verdict")
IDENT_KEYS = {"identifiable": _IDENT_HEADER + ("kruskal", "independence", "neurons", "orbit_size",
                                               "orbit_dimension"),
              "not-identifiable": _IDENT_HEADER + ("witness",)}
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
RANK_ONE_TERM_KEYS = ("neuron", "v", "w")
KRUSKAL_KEYS = ("R", "reshaping", "k_lower", "modes")
INDEPENDENCE_KEYS = ("degree", "proof")
NEURON_KEYS = ("neuron", "b", "degrees", "polynomials", "gcd", "solutions", "latent")
IDENT_WITNESS_KEYS = {"lambda": ("kind", "neuron", "degree", "polynomials", "text", "lambda", "bias"),
                      "minimal_polynomial": ("kind", "neuron", "degree", "polynomials", "text",
                                             "minimal_polynomial")}
PROOF_KEYS = {"none": (), "full-column-rank": ("rows",), "khatri-rao": ("left", "right"), "all-minors": (),
              "no-proportional-columns": ("pairs",), "nonzero-columns": ("rows",)}


def _strict(obj, where: str, keys, optional=()) -> dict:
    """check_keys with every key of ``keys`` required (``optional`` ones allowed besides)."""
    check_keys(_dict(obj, where), where, tuple(keys) + tuple(optional), keys)
    return obj


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _ipoly_trim(p):
    p = list(p)
    while p and p[-1] == 0:
        p.pop()
    return p


def _ipoly_divmod(a, b):
    a, b = _ipoly_trim(a), _ipoly_trim(b)
    q = [Fraction(0)] * max(len(a) - len(b) + 1, 0)
    while len(a) >= len(b) and a:
        f = a[-1] / b[-1]
        s = len(a) - len(b)
        q[s] = f
        for i, c in enumerate(b):
            a[s + i] -= f * c
        a = _ipoly_trim(a)
    return q, a


def _ipoly_gcd(a, b):
    a, b = _ipoly_trim(a), _ipoly_trim(b)
    while b:
        a, b = b, _ipoly_divmod(a, b)[1]
    return [c / a[-1] for c in a] if a else a


def _ipoly_strip_x(p):
    p = _ipoly_trim(p)
    while p and p[0] == 0:
        p = p[1:]
    return p


def _ipoly_roots_count(p) -> int:
    """Distinct complex roots of p != 0: deg p - deg gcd(p, p')."""
    p = _ipoly_trim(p)
    if len(p) <= 1:
        return 0
    dp = [k * c for k, c in enumerate(p)][1:]
    return (len(p) - 1) - (len(_ipoly_gcd(p, dp)) - 1)


def _neuron_equations(coeffs, b: Fraction, bias: bool, d: int, degrees) -> dict:
    """The per-neuron polynomials in lambda (lowest degree first) for the given degrees k.

    With biases: degree d-1 forces b' = s + lambda (b - s); then for k < d-1
    P_k = sum_m tau_m C(m, k) u^(m-k) (lambda^(m-k) - lambda^(d-k)), tau(t) = sigma(t + s),
    u = b - s.  Without biases: a_k (1 - lambda^(d-k)).
    """
    out = {}
    s = -coeffs[d - 1] / (d * coeffs[d])
    tau = [sum((coeffs[m] * comb(m, j) * s ** (m - j) for m in range(j, d + 1)), Fraction(0)) for j in range(d + 1)]
    for k in degrees:
        c = [Fraction(0)] * (d - k + 1)
        if bias:
            u = b - s
            for m in range(k, d + 1):
                t = tau[m] * comb(m, k) * u ** (m - k)
                c[m - k] += t
                c[d - k] -= t
        else:
            c[0] += coeffs[k]
            c[d - k] -= coeffs[k]
        out[k] = _ipoly_trim(c)
    return out


def _latent_scalings(coeffs, bias: bool, d: int):
    """K's scalings of a neuron, derived here: "all" (c (t - s)^d with a usable shift) or [1] / [1, -1]."""
    s = -coeffs[d - 1] / (d * coeffs[d])
    tau = [sum((coeffs[m] * comb(m, j) * s ** (m - j) for m in range(j, d + 1)), Fraction(0)) for j in range(d + 1)]
    usable = bias or s == 0  # a scaling moves the pre-activation's constant unless s = 0 or biases exist
    # c (t - s)^d + e: every alpha != 0, when biases absorb s (1 - alpha) and e (1 - alpha^d), or
    # without biases when s = e = 0 (docs/theory.md, the absorbed-constant rule)
    if all(t == 0 for t in tau[1:d]) and (bias or (s == 0 and tau[0] == 0)):
        return "all"
    out = [Fraction(1)]
    # alpha = -1: sigma(-(t - s) + s) = q sigma(t) + o, i.e. tau(-u) = q tau(u) + o; an offset o needs
    # the next layer's bias (sigmoid-like sign flips)
    for q in (1, -1):
        if usable and all(tau[m] * (-1) ** m == q * tau[m] for m in range(1, d + 1)):
            if tau[0] * (1 - q) == 0 or bias:
                out.append(Fraction(-1))
            break
    return out


def _int_columns(cols):
    """Columns of Fractions scaled to integers (a nonzero column scaling keeps every minor's zeroness)."""
    out = []
    for col in cols:
        den = 1
        for x in col:
            den = den * x.denominator // gcd(den, x.denominator)
        out.append([int(x * den) for x in col])
    return out


def _bareiss_nonzero(m) -> bool:
    """det(m) != 0 for a square integer matrix (fraction-free elimination, exact)."""
    a = [list(r) for r in m]
    n, prev = len(a), 1
    for k in range(n):
        piv = next((r for r in range(k, n) if a[r][k] != 0), None)
        if piv is None:
            return False
        a[k], a[piv] = a[piv], a[k]
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                a[i][j] = (a[i][j] * a[k][k] - a[i][k] * a[k][j]) // prev
        prev = a[k][k]
    return True


def _minor_nonzero(m) -> bool:
    """det(m) != 0 for a square integer matrix: first modulo the prime 2^61 - 1 (a nonzero residue
    proves a nonzero determinant, and is fast), else exactly by Bareiss elimination."""
    p = 2305843009213693951
    a = [[x % p for x in r] for r in m]
    n = len(a)
    for k in range(n):
        piv = next((r for r in range(k, n) if a[r][k]), None)
        if piv is None:
            return _bareiss_nonzero(m)
        a[k], a[piv] = a[piv], a[k]
        inv = pow(a[k][k], -1, p)
        for i in range(k + 1, n):
            f = a[i][k] * inv % p
            if f:
                rk, ri = a[k], a[i]
                a[i] = [(ri[j] - f * rk[j]) % p for j in range(n)]
    return True


class _KProof:
    """Recomputes lower bounds on Kruskal ranks of Khatri-Rao products of V and W from proofs."""

    def __init__(self, V, W, R: int):
        self.V, self.W, self.R = _int_columns(V), _int_columns(W), R
        self.dims = {"V": len(V[0]), "W": len(W[0])}
        self.seen: dict = {}

    def entry(self, factors: str, row, j: int) -> int:
        e = 1
        for f, i in zip(factors, row):
            e *= (self.V if f == "V" else self.W)[j][i]
        return e

    def _row(self, factors: str, row, where: str):
        if not isinstance(row, list) or len(row) != len(factors) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.dims[f] for f, i in zip(factors, row)):
            raise CheckError(f"{where}: bad row index {_short(row)} for factors {factors}")
        return tuple(row)

    def bound(self, proof, factors: str, where: str) -> int:
        """The recomputed bound, or -1 when the proof fails or its claimed ``k`` differs."""
        b = self._bound(proof, factors, where)
        k = proof.get("k")
        if not _is_int(k) or k != b:
            return -1
        return b

    def _bound(self, proof, factors: str, where: str) -> int:
        proof = _dict(proof, where)
        if isinstance(proof.get("kind"), str) and proof["kind"] in PROOF_KEYS:
            _strict(proof, where, ("factors", "kind", "k") + PROOF_KEYS[proof["kind"]])
        if proof.get("factors") != factors:
            raise CheckError(f"{where}: proof for {_short(proof.get('factors'))}, expected {factors}")
        kind, R = proof.get("kind"), self.R
        if kind == "none":
            return 0
        if kind == "full-column-rank":
            rows = proof.get("rows")
            if not isinstance(rows, list) or len(rows) != R:
                raise CheckError(f"{where}: full-column-rank needs {R} rows")
            rows = tuple(self._row(factors, r, where) for r in rows)
            key = (factors, rows)  # the same minor recurs in several modes and degrees: check it once
            if key not in self.seen:
                self.seen[key] = _minor_nonzero([[self.entry(factors, r, j) for j in range(R)] for r in rows])
            return R if self.seen[key] else -1
        if kind == "khatri-rao":
            left, right = _dict(proof.get("left"), where), _dict(proof.get("right"), where)
            lf, rf = left.get("factors"), right.get("factors")
            if not (isinstance(lf, str) and isinstance(rf, str) and lf and rf and lf + rf == factors):
                raise CheckError(f"{where}: khatri-rao split {_short(lf)} + {_short(rf)} is not {factors}")
            kl, kr = self.bound(left, lf, where + ".left"), self.bound(right, rf, where + ".right")
            if kl < 0 or kr < 0:
                return -1
            return min(kl + kr - 1, R) if kl >= 1 and kr >= 1 else 0
        if kind == "no-proportional-columns":
            pairs = proof.get("pairs")
            if not isinstance(pairs, list):
                raise CheckError(f"{where}: 'pairs' must be a list")
            seen = set()
            for p in pairs:
                if not isinstance(p, list) or len(p) != 4:
                    raise CheckError(f"{where}: a pair is [j, k, row1, row2]")
                j, k = p[0], p[1]
                if not (isinstance(j, int) and isinstance(k, int) and 0 <= j < k < R):
                    raise CheckError(f"{where}: bad column pair {_short(p[:2])}")
                r1, r2 = self._row(factors, p[2], where), self._row(factors, p[3], where)
                if self.entry(factors, r1, j) * self.entry(factors, r2, k) == \
                        self.entry(factors, r2, j) * self.entry(factors, r1, k):
                    return -1
                seen.add((j, k))
            return min(2, R) if len(seen) == R * (R - 1) // 2 else -1
        if kind == "all-minors":
            # k-rank m of an m-row matrix V or W: every m columns have a nonzero m x m determinant
            if factors not in ("V", "W") or not 2 <= self.dims[factors] < R:
                raise CheckError(f"{where}: all-minors needs V or W with fewer rows than columns")
            m, cols = self.dims[factors], (self.V if factors == "V" else self.W)
            if comb(R, m) > 100000:
                raise CheckError(f"{where}: too many minors ({comb(R, m)}) to check")
            for sub in combinations(range(R), m):
                key = (factors, sub)
                if key not in self.seen:
                    self.seen[key] = _minor_nonzero([[cols[j][i] for j in sub] for i in range(m)])
                if not self.seen[key]:
                    return -1
            return m
        if kind == "nonzero-columns":
            rows = proof.get("rows")
            if not isinstance(rows, list) or len(rows) != R:
                raise CheckError(f"{where}: nonzero-columns needs one row per column")
            ok = all(self.entry(factors, self._row(factors, r, where), j) != 0 for j, r in enumerate(rows))
            return 1 if ok else -1
        raise CheckError(f"{where}: unknown k-rank proof kind {_short(kind)}")


def check_identifiability(cert: dict, model: dict) -> CheckReport:
    """Re-verify a ``symeq-identifiability/1`` certificate against a model, exactly.

    ``identifiable``: the rank-one terms are the model's; each mode's k-rank bound is recomputed
    (nonzero maximal minors -- modulo 2^61 - 1, else by fraction-free elimination --, every maximal
    minor of a matrix with fewer rows than columns, the Khatri-Rao lemma
    k(A (.) B) >= min(k_A + k_B - 1, R), no two proportional columns, nonzero columns) and their sum
    is at least 2R + 2 (Kruskal); the lower-degree terms used are independent (a k-rank of R); every
    neuron's equations are recomputed from the activation and its bias, their gcd has exactly the
    latent scalings as distinct nonzero roots (derived here from the activation); the orbit size is
    R! times the product.  ``not-identifiable``: the witness solves every per-neuron equation, is
    not a latent scaling, and its neuron has no clone and is not dead.
    """
    if isinstance(cert, dict) and cert.get("method") in CLASSICAL_METHODS:  # real tanh/sigmoid nets (below)
        return check_classical(cert, model)
    if isinstance(cert, dict) and cert.get("method") == JACOBIAN_METHOD:  # local identifiability (below)
        return check_jacobian_rank(cert, model)
    n_in, layers, _ = _model(model)
    verdict = _dict(cert, "certificate").get("verdict")
    report = CheckReport(None, str(verdict))
    if verdict not in ("identifiable", "not-identifiable"):
        raise CheckError(f"certificate: unknown identifiability verdict {_short(verdict)}")
    if cert.get("method") == DEEP_METHOD:  # two hidden layers: the Jacobian-factor theorem (below)
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
    _strict(cert, "certificate", IDENT_KEYS[verdict])
    if len(layers) != 2 or not isinstance(layers[0], _Layer) or not isinstance(layers[0].act, tuple):
        report.reasons.append("the certificate covers one hidden dense layer with a polynomial activation")
        report.accepted = False
        return report
    first, last = layers
    coeffs, d = list(first.act), len(first.act) - 1
    W = [list(r) for r in first.weight]
    R = len(W)
    V = [[last.weight[i][j] for i in range(len(last.weight))] for j in range(R)]
    bias = any(x != 0 for l in layers for x in l.bias)
    if d < 2:
        report.reasons.append(f"activation degree {d} < 2")
    widths = [n_in] + [len(l.weight) for l in layers]
    if cert.get("widths") != widths:
        report.reasons.append(f"certificate widths {_short(cert.get('widths'))} differ from the model's {widths}")
    if not _is_int(cert.get("degree")) or cert.get("degree") != d or cert.get("bias") is not bias:
        report.reasons.append(f"certificate degree/bias {_short(cert.get('degree'))}/{_short(cert.get('bias'))} differ "
                              f"from the model's {d}/{bias}")
    terms = cert.get("rank_one_terms")
    if not isinstance(terms, list) or len(terms) != R:
        report.reasons.append(f"rank_one_terms must list the model's {R} neurons")
    else:
        for j, t in enumerate(terms):
            t = _strict(t, f"certificate.rank_one_terms[{j}]", RANK_ONE_TERM_KEYS)
            if not _is_int(t.get("neuron")) or t.get("neuron") != j or _vector(t.get("v"), f"term {j + 1} v") != tuple(V[j]) \
                    or _vector(t.get("w"), f"term {j + 1} w") != tuple(W[j]):
                report.reasons.append(f"rank-one term {j + 1} is not (column {j + 1} of W_2, row {j + 1} of W_1)")
        if not report.reasons:
            report.checks.append(f"{R} rank-one terms v_j (x) w_j^{d} are the model's")
    if report.reasons:  # widths, degree or theta's terms are not the model's: a certificate of another model
        report.accepted = False
        report.mismatch = True
        return report
    latent = _latent_scalings(coeffs, bias, d)
    K = _KProof(V, W, R)
    if verdict == "not-identifiable":
        _check_ident_witness(report, cert, K, coeffs, d, bias, latent, [l for l in first.bias])
    else:
        _check_ident_positive(report, cert, K, coeffs, d, bias, latent, list(first.bias))
    report.accepted = not report.reasons
    return report


def _check_ident_positive(report, cert, K: _KProof, coeffs, d, bias, latent, b1) -> None:
    R = K.R
    kr = _strict(cert.get("kruskal"), "certificate.kruskal", KRUSKAL_KEYS)
    modes, proofs, claimed = kr.get("reshaping"), kr.get("modes"), kr.get("k_lower")
    if not (isinstance(modes, list) and len(modes) == 3 and all(isinstance(m, str) and m for m in modes)
            and isinstance(proofs, list) and len(proofs) == 3):
        raise CheckError("kruskal: 'reshaping' and 'modes' must list three modes")
    if not _is_int(kr.get("R")) or kr.get("R") != R:
        report.reasons.append(f"kruskal R {_short(kr.get('R'))} is not the model's {R} neurons")
        return
    joined = "".join(modes)
    if joined.count("V") != 1 or not modes[0].startswith("V") or set(joined) != {"V", "W"} or \
            joined.count("W") != d or "V" in "".join(modes[1:]):
        report.reasons.append(f"reshaping {modes} is not V W^a | W^b | W^c with a + b + c = {d}")
        return
    ks = [K.bound(p, m, f"certificate.kruskal.modes[{i}]") for i, (p, m) in enumerate(zip(proofs, modes))]
    if any(k < 0 for k in ks):
        report.reasons.append(f"a k-rank proof fails (a minor or entry claimed nonzero is zero): bounds {ks}")
        return
    if claimed != ks:
        report.reasons.append(f"claimed k-rank bounds {_short(claimed)} differ from the recomputed {ks}")
        return
    if not (sum(ks) >= 2 * R + 2 or (R == 1 and min(ks) >= 1)):
        report.reasons.append(f"Kruskal's condition fails: {' + '.join(map(str, ks))} < 2R+2 = {2 * R + 2}")
        return
    report.checks.append(f"Kruskal: k-ranks >= {ks} on {' (x) '.join(modes)}, sum {sum(ks)} >= 2R+2 = {2 * R + 2}: "
                         "the rank-one terms are unique up to permutation and scaling")
    avail = set()
    indep = cert.get("independence")
    if not isinstance(indep, list):
        raise CheckError("independence must be a list")
    for idx, e in enumerate(indep):
        e = _strict(e, f"certificate.independence[{idx}]", INDEPENDENCE_KEYS)
        k = e.get("degree")
        if not (isinstance(k, int) and not isinstance(k, bool) and 0 <= k < d):
            raise CheckError(f"independence: bad degree {_short(k)}")
        if K.bound(e.get("proof"), "V" + "W" * k, f"certificate.independence[{idx}].proof") != R:
            report.reasons.append(f"degree {k}: the terms v_j (x) w_j^{k} are not proved independent")
            return
        avail.add(k)
    report.checks.append(f"lower-degree terms proved linearly independent for degrees {sorted(avail)}")
    if bias and d - 1 not in avail:
        report.reasons.append(f"with biases the degree-{d - 1} terms must be independent (they fix b')")
        return
    neurons = cert.get("neurons")
    if not isinstance(neurons, list) or len(neurons) != R:
        raise CheckError(f"neurons must list {R} entries")
    allowed = set(range(1, d - 1)) if bias else set(range(d))
    sizes = []
    for j, nd in enumerate(neurons):
        nd = _strict(nd, f"certificate.neurons[{j}]", NEURON_KEYS)
        degs = nd.get("degrees")
        if not _is_int(nd.get("neuron")) or nd.get("neuron") != j or \
                parse_number(nd.get("b"), f"neuron {j + 1} b") != b1[j]:
            report.reasons.append(f"neuron {j + 1}: index or bias differs from the model")
            return
        if not isinstance(degs, list) or not all(_is_int(k) for k in degs) or \
                not set(degs) <= (avail & allowed) or len(set(degs)) != len(degs):
            report.reasons.append(f"neuron {j + 1}: degrees {_short(degs)} are not among the independent ones")
            return
        eqs = _neuron_equations(coeffs, b1[j], bias, d, degs)
        listed = nd.get("polynomials")
        if not isinstance(listed, list) or not all(
                isinstance(p, list) and len(p) == 2 and _is_int(p[0]) and isinstance(p[1], list) for p in listed) \
                or sorted((p[0], _ipoly_trim(_vector(p[1], f"neuron {j + 1} polynomial") if p[1] else []))
                          for p in listed) != sorted(eqs.items()):
            report.reasons.append(f"neuron {j + 1}: the listed per-neuron polynomials are not the model's")
            return
        g = []
        for p in eqs.values():
            g = _ipoly_gcd(g, p) if g else _ipoly_gcd(p, p)
        g = _ipoly_strip_x(g)
        sols = "all" if not any(eqs.values()) else _ipoly_roots_count(g)
        cg = nd.get("gcd")
        if (sols == "all" and cg is not None) or (sols != "all" and (
                not isinstance(cg, list) or not cg or _ipoly_trim(_vector(cg, f"neuron {j + 1} gcd")) != g)):
            report.reasons.append(f"neuron {j + 1}: the listed gcd is not the gcd of the equations")
            return
        if nd.get("solutions") != sols:
            report.reasons.append(f"neuron {j + 1}: {sols} solutions, the certificate says {_short(nd.get('solutions'))}")
            return
        cl = nd.get("latent")
        if cl != "all" and not (isinstance(cl, list) and cl):
            raise CheckError(f"neuron {j + 1}: latent must be \"all\" or a non-empty list")
        if latent == "all":
            if sols != "all" or cl != "all":
                report.reasons.append(f"neuron {j + 1}: solutions {sols} are not the monomial scalings")
                return
            continue
        if cl == "all" or [parse_number(a, "latent") for a in (cl or [])] != latent:
            report.reasons.append(f"neuron {j + 1}: latent scalings {_short(cl)} are not the activation's {latent}")
            return
        if sols == "all" or sols != len(latent) or any(_poly(g, a) != 0 for a in latent):
            report.reasons.append(f"neuron {j + 1}: {sols} solutions but {len(latent)} latent scalings")
            return
        sizes.append(len(latent))
    report.checks.append(f"every neuron's system has exactly the latent scalings "
                         f"({'every alpha != 0' if latent == 'all' else [str(a) for a in latent]}) as solutions")
    if latent == "all":
        if cert.get("orbit_size") is not None or cert.get("orbit_dimension") != R:
            report.reasons.append("orbit: a torus of dimension R (monomial scalings) expected")
            return
        report.checks.append(f"fibre = orbit: S_{R} x a torus of dimension {R}")
        return
    if not _is_int(cert.get("orbit_dimension")) or cert.get("orbit_dimension") != 0:
        report.reasons.append("orbit: a finite orbit has orbit_dimension 0")
        return
    orbit = 1
    for k in range(2, R + 1):
        orbit *= k
    for s_ in sizes:
        orbit *= s_
    if cert.get("orbit_size") != str(orbit):
        report.reasons.append(f"orbit size {_short(cert.get('orbit_size'))} differs from R! x prod = {orbit}")
        return
    report.checks.append(f"fibre = orbit over C: {orbit} points, each from a unique latent element")


def _check_ident_witness(report, cert, K: _KProof, coeffs, d, bias, latent, b1) -> None:
    w = _dict(cert.get("witness"), "witness")
    _strict(w, "certificate.witness", IDENT_WITNESS_KEYS["lambda" if "lambda" in w else "minimal_polynomial"])
    j = w.get("neuron")
    if not (isinstance(j, int) and not isinstance(j, bool) and 0 <= j < K.R):
        raise CheckError(f"witness: bad neuron {_short(j)}")
    if latent == "all":
        report.reasons.append("the activation's scalings are all of C*: no scaling lies outside K")
        return
    if not any(K.W[j]) or not any(K.V[j]) or any(
            all(K.W[j][a] * K.W[k][c] == K.W[k][a] * K.W[j][c] for a in range(len(K.W[j])) for c in range(a))
            for k in range(K.R) if k != j):
        report.reasons.append(f"neuron {j + 1} is dead or has a proportional twin: the point may lie in the orbit")
        return
    eqs = _neuron_equations(coeffs, b1[j], bias, d, range(1, d - 1) if bias else range(d))
    listed = w.get("polynomials")
    if w.get("kind") != "per-neuron" or not _is_int(w.get("degree")) or w.get("degree") != d or \
            not isinstance(listed, list) or not all(isinstance(p, list) and len(p) == 2 and _is_int(p[0])
                                                    and isinstance(p[1], list) for p in listed) or \
            sorted((p[0], _ipoly_trim(_vector(p[1], "witness polynomial") if p[1] else [])) for p in listed) != \
            sorted(eqs.items()):
        report.reasons.append(f"the witness's kind, degree or per-neuron polynomials are not neuron {j + 1}'s")
        return
    if "lambda" in w:
        lam = parse_number(w.get("lambda"), "witness lambda")
        if lam == 0 or lam in latent or any(_poly(p, lam) != 0 for p in eqs.values()):
            report.reasons.append(f"lambda = {lam} is zero, a latent scaling, or misses a per-neuron equation")
            return
        if bias:
            s = -coeffs[d - 1] / (d * coeffs[d])
            if parse_number(w.get("bias"), "witness bias") != s + lam * (b1[j] - s):
                report.reasons.append("the witness bias is not s + lambda (b - s)")
                return
        report.checks.append(f"neuron {j + 1}: lambda = {lam} solves every equation (degrees {sorted(eqs)}) and is not a "
                             "latent scaling: a fibre point outside the orbit")
        return
    q = _ipoly_trim(_vector(w.get("minimal_polynomial"), "witness minimal_polynomial"))
    if len(q) < 2 or q[0] == 0 or any(_poly(q, a) == 0 for a in latent) or \
            any(_ipoly_divmod(p, q)[1] for p in eqs.values()):
        report.reasons.append("the witness polynomial has a latent or zero root, or does not divide every equation")
        return
    report.checks.append(f"neuron {j + 1}: every root of the witness polynomial solves every equation and none is a latent "
                         "scaling: fibre points outside the orbit")


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
    bias = any(x != 0 for l in layers for x in l.bias)
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
    bias = any(x != 0 for l in layers for x in l.bias)
    general = cert.get("activations") == "general"
    if cert.get("bias") is not bias:
        report.reasons.append(f"certificate bias {_short(cert.get('bias'))} differs from the model's {bias}")
        return
    lam1 = None
    if general:  # any polynomial activations: the first layer's scalings, recomputed
        if not all(isinstance(l.act, tuple) and len(l.act) >= 3 and l.act[-1] != 0 for l in layers[:-1]):
            report.reasons.append("a hidden activation is not a polynomial of degree >= 2")
            return
        got = _deep_layer_scalings(layers[0].act, bias)
        listed = cert.get("layers")
        if isinstance(got, str):
            report.reasons.append(f"hidden layer 1: {got}")
            return
        m1, mu1, g1, lam1 = got
        entry = listed[0] if isinstance(listed, list) and len(listed) == 1 and isinstance(listed[0], dict) else {}
        el = entry.get("lambdas")
        ok = (_is_int(entry.get("degree")) and entry.get("degree") == m1 and _is_int(entry.get("g"))
              and entry.get("g") == g1 and isinstance(entry.get("centre"), str)
              and parse_number(entry.get("centre"), "centre") == mu1
              and (el == "all" if lam1 == "all" else isinstance(el, list)
                   and [parse_number(x, "lambda") for x in el] == lam1))
        if not ok:
            report.reasons.append(f"layers must list the first hidden layer's recomputed degree {m1}, centre {mu1}, "
                                  f"g = {g1} and scalings {lam1 if lam1 == 'all' else [str(x) for x in lam1]}")
            return
        report.checks.append("the first layer's scalings that can occur are "
                             f"{lam1 if lam1 == 'all' else [str(x) for x in lam1]}, each a symmetry of its activation")
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

    def vec(v):
        return [str(x) for x in v]

    top_model = {"format": MODEL_FORMAT, "input_dim": n, "layers": [
        {"type": "dense", "weight": [vec(r) for r in Ws[1]], "bias": vec(b2),
         "activation": {"type": "polynomial", "coeffs": vec(layers[1].act)}},
        {"type": "dense", "weight": [vec(r) for r in Ws[2]], "bias": vec(layers[2].bias)}]}
    top = _dict(cert.get("top"), "certificate.top")
    if top.get("method") is not None or top.get("verdict") != "identifiable":
        report.reasons.append("certificate.top must be a one-hidden-layer (Kruskal) certificate of 'identifiable'")
        return
    sub = check_identifiability(top, top_model)
    if not sub.accepted:
        report.reasons.append("the top block's certificate fails: " + "; ".join(sub.reasons))
        return
    report.checks.append("the top block u -> W_3 s_2(W_2 u + b_2 + kappa_1 W_2 1) + b_3 (built here from the model) "
                         "is identifiable: " + "; ".join(sub.checks))
    first_continuous = lam1 is None or lam1 == "all"
    dim = (n if first_continuous else 0) + top.get("orbit_dimension") if _is_int(top.get("orbit_dimension")) else None
    size = None
    if not first_continuous and isinstance(top.get("orbit_size"), str):
        size = str(factorial(n) * len(lam1) ** n * int(top["orbit_size"]))
    if dim is None or cert.get("orbit_size") != size or cert.get("orbit_dimension") != dim:
        report.reasons.append(f"orbit: expected size {size} and dimension {dim} (the first layer's and the top "
                              "block's)")
        return
    report.checks.append(f"fibre = orbit: dimension {dim} (first layer pinned by the Jacobian's degree-1 factors, "
                         "then the top block's identifiability)")


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
    n, n3 = widths[1], widths[3]
    bias = any(x != 0 for l in layers for x in l.bias)
    general = cert.get("activations") == "general"
    if cert.get("bias") is not bias:
        report.reasons.append(f"certificate bias {_short(cert.get('bias'))} differs from the model's {bias}")
        return
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

    def vec(v):
        return [str(x) for x in v]

    tail_model = {"format": MODEL_FORMAT, "input_dim": n, "layers": [
        {"type": "dense", "weight": [vec(r) for r in Ws[k]], "bias": vec(layers[k].bias),
         "activation": {"type": "polynomial", "coeffs": vec(layers[k].act)}} for k in (1, 2)] + [
        {"type": "dense", "weight": [vec(r) for r in Ws[3]], "bias": vec(layers[3].bias)}]}
    if bias and not any(x != 0 for l in layers[1:] for x in l.bias):
        report.reasons.append("the tail has no nonzero bias, so its certificate covers bias-free parameters only")
        return
    tail = _dict(cert.get("tail"), "certificate.tail")
    if tail.get("method") != DEEP_METHOD or "top" not in tail:
        report.reasons.append("certificate.tail must be a widening jacobian-factors certificate")
        return
    sub = check_identifiability(tail, tail_model)
    if not sub.accepted:
        report.reasons.append("the tail's certificate fails: " + "; ".join(sub.reasons))
        return
    report.checks.append("the tail (two hidden layers on C^n, built here from the model) is identifiable: "
                         + "; ".join(sub.checks))
    cont = lam1 is None or lam1 == "all"
    dim = (n if cont else 0) + tail.get("orbit_dimension") if _is_int(tail.get("orbit_dimension")) else None
    size = None
    if not cont and isinstance(tail.get("orbit_size"), str):
        size = str(factorial(n) * len(lam1) ** n * int(tail["orbit_size"]))
    if dim is None or cert.get("orbit_size") != size or cert.get("orbit_dimension") != dim:
        report.reasons.append(f"orbit: expected size {size} and dimension {dim} (the first layer's and the tail's)")
        return
    report.checks.append(f"fibre = orbit: " + (f"{size} points" if size else f"dimension {dim}"))


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


# ----------------------------------------------------------------------------- real activations
#
# The identity table of the real activations (docs/theory.md, "Real activations", proves each row
# list complete): every (alpha, beta, q, c) with sigma(alpha t + beta) = q sigma(t) + c for all real
# t.  "positive" is leaky ReLU's family alpha > 0, beta = 0, q = alpha, c = 0.  symeq reads the same
# table (symeq.activations.REAL_SYMMETRIES), so the derivation and this checker cannot disagree
# about which identities exist; a row of the table is an identity of sigma, never a float check.
REAL_SYMMETRY_TABLE = {
    "tanh": ((1, 0, 1, 0), (-1, 0, -1, 0)),      # odd
    "erf": ((1, 0, 1, 0), (-1, 0, -1, 0)),       # odd
    "sigmoid": ((1, 0, 1, 0), (-1, 0, -1, 1)),   # sigma(-t) = 1 - sigma(t)
    "gelu": ((1, 0, 1, 0),),                     # gelu(-t) = gelu(t) - t is not of this form
    "silu": ((1, 0, 1, 0),),
    "softplus": ((1, 0, 1, 0),),
    "elu": ((1, 0, 1, 0),),
    "leaky_relu": "positive",                    # positively homogeneous
}


# ----------------------------------------------------------------------------- classical theorems: Sussmann, Fefferman
# Real tanh and logistic-sigmoid networks (docs/identifiability.md, "Real activations: Sussmann and
# Fefferman").  The theorems (Sussmann 1992, Fefferman 1994) are the trusted part.  The checker
# re-reads the model on its own (dense layers and activation names only), recomputes every condition
# with Fractions, and checks a witness theta' (a reducible hidden layer l) by exact identities: the
# formal sums b_{l+1} + sum_j v_j sigma(w_j h + b_j) of theta and theta' (w_j rows of W_l, v_j columns
# of W_{l+1}) are equal after tanh(-t) = -tanh(t) or s(-t) = 1 - s(t), tanh(0) = 0 and s(0) = 1/2,
# so f_theta' = f_theta; and theta' is outside the orbit because a multiset that every element of K
# keeps differs (|weights| per layer; |biases| per layer for tanh; with one hidden layer the units'
# (w, b, v) up to sign).

from math import factorial  # noqa: E402 - kept with this section (standard library)

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


def _check_orbit(report: CheckReport, cert: dict, hidden: list) -> None:
    size = 1
    for w in hidden:
        size *= 2 ** w * factorial(w)
    formula = " * ".join(f"2^{w} {w}!" for w in hidden)
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


def _check_reducibility_witness(report: CheckReport, wit, layers: list, act: str) -> None:
    """A witness theta' at hidden layer l: the named condition fails there, theta' differs from theta
    only in layers l and l + 1, the pre-activations of layer l + 1 are equal formal sums, and a
    K-invariant multiset differs."""
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


def check_classical(cert: dict, model: dict) -> CheckReport:
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
            _check_orbit(report, cert, widths[1:-1])
    elif irreducible:
        report.reasons.append(f"verdict not-identifiable, but {', '.join(CLASSICAL_CONDITIONS[method])} hold "
                              "(the theorem says identifiable)")
    elif "orbit_size" in cert or "orbit_formula" in cert:
        report.reasons.append("a not-identifiable certificate states no orbit size")
    elif method == "fefferman" and act != "tanh":
        report.reasons.append("a deep reducibility witness is read for tanh networks only")
    else:
        _check_reducibility_witness(report, cert.get("witness"), [(W, b) for W, b, _ in layers], act)
    report.accepted = not report.reasons
    return report


@dataclass(frozen=True)
class _Real:
    """A real activation as the checker reads it: its name and its one parameter (or None)."""

    name: str
    param: object = None  # gelu: "tanh" or None; elu: alpha; leaky_relu: slope


REAL_ACTIVATION_KEYS = {"gelu": ("type", "approximate"), "elu": ("type", "alpha"), "leaky_relu": ("type", "slope")}
BALL_WITNESS_KEYS = (("kind", "generator", "generator_name", "x", "precision", "output", "enclosures"),
                     ("kind", "generator", "x", "precision", "output", "enclosures"))
MAX_BALL_PRECISION = 4096


def _real_activation(spec: dict, where: str):
    name = spec["type"]
    check_keys(spec, f"{where} activation", REAL_ACTIVATION_KEYS.get(name, ("type",)), ("type",))
    param = None
    if name == "gelu":
        param = spec.get("approximate", "none")
        if param not in ("none", "tanh"):
            raise CheckError(f"{where}: gelu approximate must be \"none\" or \"tanh\", got {_short(param)}")
        param = None if param == "none" else "tanh"
    elif name == "elu":
        param = parse_number(spec.get("alpha", "1"), f"{where} elu alpha")
        if param == 0:
            raise CheckError(f"{where}: elu alpha must be nonzero")
    elif name == "leaky_relu":
        param = parse_number(spec.get("slope", "1/100"), f"{where} leaky_relu slope")
        if param in (1, -1):
            raise CheckError(f"{where}: leaky_relu slope must not be 1 or -1")
    label = name + ("" if param is None else f"({param})")
    return _Real(name, param), label


def _positive_only(act) -> bool:
    """Layers whose latent actions must be positive monomial matrices (leaky ReLU, like ReLU)."""
    return isinstance(act, _Real) and REAL_SYMMETRY_TABLE[act.name] == "positive"


def _real_exact(act: _Real, t: Fraction) -> Fraction:
    """sigma(t) exactly where it is rational; refused elsewhere (balls: :func:`_real_interval`)."""
    if act.name == "leaky_relu":
        return t if t > 0 else act.param * t
    if act.name == "elu" and t >= 0:
        return t
    if t == 0 and act.name != "softplus":
        return Fraction(1, 2) if act.name == "sigmoid" else Fraction(0)
    raise CheckError(f"{act.name}({t}) is irrational: an exact witness cannot be evaluated (a real-activation "
                     "model is refuted by a ball witness, \"kind\": \"arb\")")


def _real_holds(act: _Real, alpha, beta, q, c) -> bool:
    """Whether (alpha, beta, q, c) is in the identity table of act (REAL_SYMMETRY_TABLE)."""
    table = REAL_SYMMETRY_TABLE[act.name]
    if table == "positive":
        return alpha > 0 and beta == 0 and q == alpha and c == 0
    return (alpha, beta, q, c) in {tuple(Fraction(x) for x in row) for row in table}


def _real_neuron_failure(act: _Real, u, v, bj, bk, q, o) -> str | None:
    """Why sigma(u.x + bj) == q sigma(v.x + bk) + o is not proved by the identity table, or None."""
    if not any(v):
        if any(u):
            return "constant target neuron not matched"
        # constants: a table identity with alpha bk + beta = bj proves it (alpha = +-1 covers the rows)
        if any(_real_holds(act, a, bj - a * bk, q, o) for a in (Fraction(1), Fraction(-1))):
            return None
        return "constant target neuron: equality of the two constants is not proved by the identity table"
    alpha = _ratio(u, v)
    if alpha is None:
        return "incoming weights are not parallel to the target neuron's"
    beta = bj - alpha * bk
    if _real_holds(act, alpha, beta, q, o):
        return None
    return f"{act.name}({alpha} t + {beta}) = {q} {act.name}(t) + {o} is not in its identity table"


# -- rigorous interval evaluation (Fractions, outward rounding) --------------------------------
#
# An interval is a pair (lo, hi) of Fractions with lo <= value <= hi.  Every function below
# returns bounds that are proved: Taylor series with an explicit remainder bound, alternating series
# bounded by their first omitted term, and outward rounding to dyadic numbers of `bits` significant
# bits (to keep the Fractions small).  Nothing is a float.

def _round_down(x: Fraction, bits: int) -> Fraction:
    """The largest number m 2^e <= x with m of about `bits` bits (x itself when 0)."""
    if x == 0:
        return x
    n, d = x.numerator, x.denominator
    e = n.bit_length() - d.bit_length() - bits if n > 0 else (-n).bit_length() - d.bit_length() - bits
    if e >= 0:
        return Fraction(n // (d << e) << e)
    return Fraction((n << -e) // d, 1 << -e)


def _round_up(x: Fraction, bits: int) -> Fraction:
    return -_round_down(-x, bits)


def _iv_round(a, bits):
    return _round_down(a[0], bits), _round_up(a[1], bits)


def _iv_mul(a, b):
    ps = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(ps), max(ps)


def _iv_scale(c: Fraction, a):
    return (c * a[0], c * a[1]) if c >= 0 else (c * a[1], c * a[0])


def _exp_bounds(r: Fraction, bits: int):
    """lo <= exp(r) <= hi: r / 2^s in [-1/2, 1/2], Taylor series with its tail bound, then s squarings.

    Callers pass r <= 0 or small r (the activations below are written with exp of non-positive
    arguments); for r <= -(bits + 64), 0 < exp(r) <= 2^r <= 2^-(bits + 64) is returned at once, so no
    huge number is ever formed.
    """
    cut = bits + 64
    if r <= -cut:
        return Fraction(0), Fraction(1, 1 << cut)
    if r > 4 * cut:
        raise CheckError(f"exp({_round_down(r, 20)}): argument beyond the checker's range")
    s = 0
    while abs(r) > Fraction(1, 2) * 2 ** s:
        s += 1
    x = r / 2 ** s
    wp = bits + s + 20
    eps = Fraction(1, 1 << wp)
    total, term, k = Fraction(1), Fraction(1), 0
    while True:
        k += 1
        term = term * x / k
        total += term
        if abs(term) <= eps:
            break
    # tail: sum_{j > k} |x|^j / j! <= |term| sum_{i >= 1} (|x| / (k + 1))^i <= |term| (|x| <= 1/2)
    lo, hi = _round_down(total - abs(term), wp), _round_up(total + abs(term), wp)
    for _ in range(s):
        lo, hi = _round_down(lo * lo, wp), _round_up(hi * hi, wp)
    return lo, hi


def _sqrt_bounds(q: Fraction, bits: int):
    """lo <= sqrt(q) <= hi for q >= 0 (integer square roots of q 4^k)."""
    from math import isqrt

    k = bits + 8
    n = q.numerator * 4 ** k
    lo = isqrt(n // q.denominator)
    return Fraction(lo, 2 ** k), Fraction(lo + 1, 2 ** k)


def _atan_inv_bounds(m: int, bits: int):
    """atan(1/m) for an integer m >= 2: an alternating series, between consecutive partial sums."""
    eps = Fraction(1, 1 << (bits + 8))
    total, k = Fraction(0), 0
    while True:
        term = Fraction(1, (2 * k + 1) * m ** (2 * k + 1))
        if term < eps:
            return (total - term, total) if k % 2 else (total, total + term)
        total += term if k % 2 == 0 else -term
        k += 1


@lru_cache(maxsize=16)
def _pi_bounds(bits: int):
    """pi = 16 atan(1/5) - 4 atan(1/239) (Machin), with bounds."""
    a, b = _atan_inv_bounds(5, bits + 8), _atan_inv_bounds(239, bits + 8)
    return 16 * a[0] - 4 * b[1], 16 * a[1] - 4 * b[0]


def _atanh_bounds(z: Fraction, bits: int):
    """atanh(z) for 0 <= z <= 1/3: positive terms z^(2n+1)/(2n+1), tail <= next term / (1 - z^2)."""
    eps = Fraction(1, 1 << (bits + 8))
    total, n, p = Fraction(0), 0, z
    while True:
        term = p / (2 * n + 1)
        if term < eps:
            return total, total + term / (1 - z * z)
        total += term
        n += 1
        p *= z * z


@lru_cache(maxsize=16)
def _log2_bounds(bits: int):
    lo, hi = _atanh_bounds(Fraction(1, 3), bits + 8)  # log 2 = 2 atanh(1/3)
    return 2 * lo, 2 * hi


def _log_bounds(y: Fraction, bits: int):
    """lo <= log(y) <= hi for y > 0: y = 2^k m with 1 <= m < 2, log m = 2 atanh((m - 1) / (m + 1))."""
    k = y.numerator.bit_length() - y.denominator.bit_length()
    m = y / Fraction(2) ** k
    while m >= 2:
        m, k = m / 2, k + 1
    while m < 1:
        m, k = m * 2, k - 1
    wp = bits + abs(k).bit_length() + 8
    z = _atanh_bounds((m - 1) / (m + 1), wp)
    l2 = _iv_scale(Fraction(k), _log2_bounds(wp))
    return 2 * z[0] + l2[0], 2 * z[1] + l2[1]


def _erf_bounds(u: Fraction, bits: int):
    """lo <= erf(u) <= hi: the alternating Maclaurin series (2/sqrt pi) sum (-1)^n u^(2n+1) / (n! (2n+1)),
    past its largest term bounded by the first omitted one; for u >= 6, 1 - exp(-u^2) <= erf(u) <= 1."""
    if u < 0:
        lo, hi = _erf_bounds(-u, bits)
        return -hi, -lo
    if u == 0:
        return Fraction(0), Fraction(0)
    if u >= 6:  # erfc(u) <= exp(-u^2) / (u sqrt(pi)) <= exp(-u^2)
        return 1 - _exp_bounds(-u * u, bits)[1], Fraction(1)
    wp = bits + 16
    eps = Fraction(1, 1 << wp)
    total, n, p, fact = Fraction(0), 0, u, 1
    u2 = u * u
    while True:
        term = p / (fact * (2 * n + 1))
        if n > u2 + 1 and term < eps:
            break  # from n > u^2 on the terms decrease: the tail is within one term
        total += term if n % 2 == 0 else -term
        n += 1
        p *= u2
        fact *= n
    s = (total - term, total + term)
    pi = _pi_bounds(wp)
    root = (_sqrt_bounds(pi[0], wp)[0], _sqrt_bounds(pi[1], wp)[1])
    c = (Fraction(2) / root[1], Fraction(2) / root[0])
    lo, hi = _iv_mul(s, c)
    return max(lo, Fraction(-1)), min(hi, Fraction(1))


def _tanh_bounds(t: Fraction, bits: int):
    """tanh(t) = 1 - 2 E / (1 + E) with E = exp(-2t) for t >= 0 (decreasing in E); odd."""
    if t < 0:
        lo, hi = _tanh_bounds(-t, bits)
        return -hi, -lo
    lo, hi = _exp_bounds(-2 * t, bits + 4)
    return 1 - 2 * hi / (1 + hi), 1 - 2 * lo / (1 + lo)


def _sigmoid_bounds(t: Fraction, bits: int):
    """1 / (1 + exp(-t)) for t >= 0, exp(t) / (1 + exp(t)) for t < 0 (both monotone in the exp)."""
    if t >= 0:
        lo, hi = _exp_bounds(-t, bits + 4)
        return 1 / (1 + hi), 1 / (1 + lo)
    lo, hi = _exp_bounds(t, bits + 4)
    return lo / (1 + lo), hi / (1 + hi)


def _softplus_bounds(t: Fraction, bits: int):
    """log(1 + exp(t)) = max(t, 0) + log(1 + y), y = exp(-|t|) in (0, 1]; y / (1 + y) <= log(1 + y) <= y
    when y is below 2^-bits, else the atanh series of log."""
    lo, hi = _exp_bounds(-abs(t), bits + 4)
    base = max(t, Fraction(0))
    if hi < Fraction(1, 1 << bits):
        return base + lo / (1 + lo), base + hi
    return base + _log_bounds(1 + lo, bits)[0], base + _log_bounds(1 + hi, bits)[1]


def _monotone(f, a, bits):
    """f([lo, hi]) for an increasing f given by its bounds at a point."""
    return f(a[0], bits)[0], f(a[1], bits)[1]


def _hull_pieces(point, a):
    """Enclosure of a function monotone on t <= 0 and on t >= 0: the hull at the ends (and 0)."""
    pts = [point(a[0]), point(a[1])] + ([point(Fraction(0))] if a[0] < 0 < a[1] else [])
    return min(p[0] for p in pts), max(p[1] for p in pts)


def _real_interval(act: _Real, a, bits: int):
    """An enclosure of act([a_lo, a_hi])."""
    name = act.name
    if name == "tanh":
        return _monotone(_tanh_bounds, a, bits)
    if name == "erf":
        return _monotone(_erf_bounds, a, bits)
    if name == "sigmoid":
        return _monotone(_sigmoid_bounds, a, bits)
    if name == "silu":
        return _iv_mul(a, _monotone(_sigmoid_bounds, a, bits))
    if name == "softplus":
        return _monotone(_softplus_bounds, a, bits)
    if name == "gelu":
        if act.param == "tanh":  # t (1 + tanh(sqrt(2 / pi) (t + c t^3))) / 2, with t + c t^3 increasing
            c = Fraction(44715, 1000000)
            p = (a[0] + c * a[0] ** 3, a[1] + c * a[1] ** 3)
            pi = _pi_bounds(bits + 8)
            k = (_sqrt_bounds(2 / pi[1], bits + 8)[0], _sqrt_bounds(2 / pi[0], bits + 8)[1])
            v = _iv_round(_iv_mul(p, k), bits + 8)
            th = _monotone(_tanh_bounds, v, bits)
        else:  # t Phi(t), Phi(t) = (1 + erf(t / sqrt 2)) / 2 increasing
            r = _sqrt_bounds(Fraction(1, 2), bits + 8)
            v = _iv_round(_iv_mul(a, r), bits + 8)
            th = _monotone(_erf_bounds, v, bits)
        return _iv_mul(a, ((1 + th[0]) / 2, (1 + th[1]) / 2))
    if name == "elu":
        def point(t):
            if t >= 0:
                return t, t
            e = _exp_bounds(t, bits + 4)
            return _iv_scale(act.param, (e[0] - 1, e[1] - 1))
        return _hull_pieces(point, a)
    if name == "leaky_relu":
        return _hull_pieces(lambda t: (_real_exact(act, t),) * 2, a)
    raise CheckError(f"no interval evaluation for {name}")


def _interval_apply(act, a, bits: int):
    if act is None:
        return a
    if isinstance(act, _Real):
        return _iv_round(_real_interval(act, a, bits), bits)
    if act == "relu":
        return max(a[0], Fraction(0)), max(a[1], Fraction(0))
    if isinstance(act, tuple):  # a polynomial: interval Horner (a valid, if loose, enclosure)
        acc = (act[-1], act[-1])
        for c in reversed(act[:-1]):
            acc = _iv_round(_iv_mul(acc, a), bits)
            acc = (acc[0] + c, acc[1] + c)
        return acc
    raise CheckError(f"no interval evaluation for the layer activation {_short(act)}")


def _interval_evaluate(layers: list, x, bits: int):
    """An enclosure of f(x) for exact x: interval affine maps and activations, rounded outward."""
    ys = [(v, v) for v in x]
    for layer in layers:
        if not isinstance(layer, _Layer):
            raise CheckError("ball witnesses cover dense layers only")
        out = []
        for row, b in zip(layer.weight, layer.bias):
            lo = hi = b
            for w, (yl, yh) in zip(row, ys):
                if w > 0:
                    lo, hi = lo + w * yl, hi + w * yh
                elif w < 0:
                    lo, hi = lo + w * yh, hi + w * yl
            out.append(_interval_apply(layer.act, _iv_round((lo, hi), bits), bits))
        ys = out
    return ys


# -- the same function, structurally (real activations) ---------------------------------------
#
# A network with real activations is not compared by evaluation (f is transcendental) but by a
# canonical form: in every hidden layer, neurons whose outgoing weights are all zero are dropped;
# a neuron with a zero incoming row and a rational sigma(b) is folded into the next bias; each
# neuron's [w | b] is brought to its canonical representative key = [w | b] / alpha with
# (alpha, 0, q, c) in the identity table (its output becomes q y + c: the next layer's column
# is multiplied by q and c times it is added to the next bias); neurons with equal keys (clones)
# are merged by adding their outgoing columns; the neurons are sorted by key.  Every step keeps
# the function exactly, so equal canonical forms prove equal functions (the converse is not
# claimed: different forms are reported as "not shown equal").

def _real_key(act: _Real, vec):
    """(key, alpha) with vec = alpha * key and (alpha, 0, q, c) in act's table."""
    first = next((x for x in vec if x), None)
    table = REAL_SYMMETRY_TABLE[act.name]
    if first is None:
        alpha = Fraction(1)
    elif table == "positive":
        alpha = abs(first)
    elif any(row[0] == -1 and row[1] == 0 for row in table):
        alpha = Fraction(1) if first > 0 else Fraction(-1)
    else:
        alpha = Fraction(1)
    return [x / alpha for x in vec], alpha


def _real_qc(act: _Real, alpha: Fraction):
    table = REAL_SYMMETRY_TABLE[act.name]
    if table == "positive":
        return alpha, Fraction(0)
    row = next(r for r in table if Fraction(r[0]) == alpha and r[1] == 0)
    return Fraction(row[2]), Fraction(row[3])


def _real_canonical_pass(net) -> bool:
    """One pass of the reductions over every hidden layer of net = [[W, b, act], ...] (lists, in
    place); True if anything but the normalisation changed."""
    changed = False
    for i in range(len(net) - 1):
        W, b, act = net[i]
        V, c, _ = net[i + 1]
        if not isinstance(act, _Real):
            raise CheckError("the canonical form covers hidden layers with real activations only")
        j = 0
        while j < len(W):
            drop = len(W) > 1 and all(row[j] == 0 for row in V)
            if len(W) > 1 and not drop and not any(W[j]):
                try:
                    val = _real_exact(act, b[j])
                except CheckError:
                    val = None
                if val is not None:
                    for r, row in enumerate(V):
                        c[r] += row[j] * val
                    drop = True
            if drop:
                del W[j], b[j]
                for row in V:
                    del row[j]
                changed = True
                continue
            key, alpha = _real_key(act, list(W[j]) + [b[j]])
            if alpha != 1:
                q, cc = _real_qc(act, alpha)
                W[j], b[j] = key[:-1], key[-1]
                for r, row in enumerate(V):
                    c[r] += row[j] * cc
                    row[j] *= q
            j += 1
        seen: dict = {}
        j = 0
        while j < len(W):
            k = tuple(W[j]) + (b[j],)
            if k in seen and len(W) > 1:
                j0 = seen[k]
                for row in V:
                    row[j0] += row[j]
                del W[j], b[j]
                for row in V:
                    del row[j]
                changed = True
                continue
            seen[k] = j
            j += 1
        order = sorted(range(len(W)), key=lambda t: tuple(W[t]) + (b[t],))
        net[i][0] = [W[t] for t in order]
        net[i][1] = [b[t] for t in order]
        net[i + 1][0] = [[row[t] for t in order] for row in V]
    return changed


def _real_canonical_form(layers):
    net = [[[list(r) for r in l.weight], list(l.bias), l.act] for l in layers]
    for _ in range(sum(len(l.weight) for l in layers) + 1):  # each change removes a neuron
        if not _real_canonical_pass(net):
            break
    return [([tuple(r) for r in W], tuple(b), a) for W, b, a in net]


def _real_same_function_failure(layers, theta2) -> str | None:
    """None when theta' and theta have the same canonical form (hence the same function)."""
    if any(not isinstance(l, _Layer) for l in layers + list(theta2)):
        return "the canonical form covers dense layers only"
    if any(not isinstance(l.act, _Real) for l in list(layers[:-1]) + list(theta2[:-1])):
        return "equality of functions mixing real and other activations is not re-verified by this checker version"
    if _real_canonical_form(layers) != _real_canonical_form(theta2):
        return ("f(x; theta') is not shown equal to f(x; theta): their canonical forms (dead neurons dropped, "
                "clones merged by the identity table) differ")
    return None


def _check_ball_witness(report: CheckReport, witness: dict, n_in: int, layers: list, group: list) -> None:
    """A ball witness: the checker's own enclosure of some output of f(P x) - Q f(x) excludes 0.

    The enclosures in the certificate are symeq's (arb); each must meet the checker's own (both
    contain the true value), and the claimed output's must exclude 0, as must the checker's.
    """
    check_keys(witness, "certificate.equivariance.witness", *BALL_WITNESS_KEYS)
    g = witness.get("generator")
    if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < len(group):
        raise CheckError(f"witness: generator must be an index below {len(group)}, got {_short(g)}")
    x = _vector(witness.get("x"), "witness x", n_in)
    prec = _count(witness.get("precision"), "witness precision", 2, MAX_BALL_PRECISION)
    n_out = len(group[g][1])
    j = _count(witness.get("output"), "witness output", 0, n_out - 1)
    encl = witness.get("enclosures")
    if not isinstance(encl, list) or len(encl) != n_out:
        raise CheckError(f"witness: enclosures must list {n_out} intervals [lo, hi]")
    claimed = [_vector(e, f"witness enclosures[{i}]", 2) for i, e in enumerate(encl)]
    if any(lo > hi for lo, hi in claimed):
        report.reasons.append("witness: an enclosure has lo > hi")
        return
    if claimed[j][0] <= 0 <= claimed[j][1]:
        report.reasons.append(f"witness: the certificate's enclosure of output {j + 1} contains 0: it proves nothing")
        return
    bits = prec + 32
    p, q = group[g]
    lhs = _interval_evaluate(layers, _matvec(p, x), bits)
    fx = _interval_evaluate(layers, x, bits)
    own = []
    for i, row in enumerate(q):
        lo, hi = lhs[i]
        for c, (yl, yh) in zip(row, fx):
            if c > 0:
                lo, hi = lo - c * yh, hi - c * yl
            elif c < 0:
                lo, hi = lo - c * yl, hi - c * yh
        own.append((lo, hi))
    for i, ((lo, hi), (cl, ch)) in enumerate(zip(own, claimed)):
        if hi < cl or ch < lo:
            report.reasons.append(f"witness: the certificate's enclosure of output {i + 1} [{cl}, {ch}] is disjoint from "
                                  f"the checker's own [{_round_down(lo, 30)}, {_round_up(hi, 30)}]")
            return
    lo, hi = own[j]
    report.checks.append(f"ball witness, generator {g + 1}, x = {_fmt(x)}: output {j + 1} of f(P x) - Q f(x) lies in "
                         f"[{_round_down(lo, 30)}, {_round_up(hi, 30)}] (stdlib intervals at {bits} bits)")
    if lo <= 0 <= hi:
        report.reasons.append(f"witness: the checker's own enclosure of output {j + 1} contains 0 at {bits} bits: the "
                              "witness is not confirmed")
    else:
        report.checks.append(f"0 is outside it: the model is not equivariant under generator {g + 1}")


_check_action_certificate = check_certificate


def check_certificate(cert: dict, model: dict, **kwargs) -> CheckReport:  # noqa: F811 - dispatch by format
    """Dispatch on the certificate's ``format``: identifiability certificates here, the rest as above."""
    if isinstance(cert, dict) and cert.get("format") == IDENTIFIABILITY_FORMAT:
        return check_identifiability(cert, model)
    return _check_action_certificate(cert, model, **kwargs)


# ----------------------------------------------------------------------------- conv2d layers (issue 19)
# A conv2d layer is read and checked on its kernels, in time linear in taps x output pixels x
# channels (never the (C H W)^2 dense matrix).  Its latent actions are "channel-pixel" actions
# (M y)[c, p] = factor[c] y[source[c], pixels[p]] (docs/conv.md, docs/certificates.md).  The
# geometry is re-derived here from the definitions, independently of symeq.layers.conv.

CONV_KEYS = (("type", "kernel", "bias", "stride", "padding", "padding_mode", "input_shape", "activation",
              "dilation", "groups"), ("type", "kernel", "bias"))
CHANNEL_PIXEL_KEYS = (("kind", "height", "width", "channels", "pixels"), ("kind", "height", "width", "channels",
                                                                           "pixels"))
CHANNELS_KEYS = (("source", "factor"), ("source", "factor"))


@dataclass(frozen=True)
class _Conv:
    """x -> act(conv_K(x) + b): kernel rows per output channel (taps in (c, i, j) order), per-channel bias."""

    in_shape: tuple
    kh: int
    kw: int
    stride: int
    padding: int
    mode: str
    rows: tuple
    bias: tuple
    act: object
    label: str = field(compare=False, default="conv2d")

    @property
    def out_hw(self) -> tuple:
        _, h, w = self.in_shape
        return ((h + 2 * self.padding - self.kh) // self.stride + 1, (w + 2 * self.padding - self.kw) // self.stride + 1)

    @property
    def out_shape(self) -> tuple:
        return (len(self.rows),) + self.out_hw

    @property
    def out_dim(self) -> int:
        c, h, w = self.out_shape
        return c * h * w

    def sources(self) -> list:
        """src[t][q]: the input index tap t reads at output pixel q, or -1 (zero padding)."""
        C, H, W = self.in_shape
        oh, ow = self.out_hw
        p, s = self.padding, self.stride
        out = []
        for c in range(C):
            for i in range(self.kh):
                for j in range(self.kw):
                    row = []
                    for y in range(oh):
                        for x in range(ow):
                            yy, xx = s * y + i - p, s * x + j - p
                            if self.mode == "circular":
                                yy, xx = yy % H, xx % W
                            row.append((c * H + yy) * W + xx if 0 <= yy < H and 0 <= xx < W else -1)
                    out.append(row)
        return out


def _out_dim(layer) -> int:
    return layer.out_dim if isinstance(layer, _Conv) else len(layer.weight)


def _conv_canonical_form(layers) -> tuple:
    """A chain of conv2d layers with dead channels dropped and equal channels merged (the same function).

    Per hidden layer, until nothing changes: a channel whose next-layer kernels are all zero is
    dropped; a channel with a zero kernel is the constant act(b): dropped when act(b) = 0, or when
    every output pixel of the next layer reads the whole kernel (padding 0 or circular; the
    constant then goes into the next bias); a channel with the kernel row and bias of an earlier
    one (or their negatives, for an odd polynomial activation; or a positive multiple, for ReLU) is
    merged into it (its next-layer kernels added, times the factor).  Equal forms prove equal functions; different forms prove nothing.
    """
    from dataclasses import replace

    layers = list(layers)
    changed = True
    while changed:
        changed = False
        for i in range(len(layers) - 1):
            a, b = layers[i], layers[i + 1]
            n, t = len(a.rows), b.kh * b.kw
            whole = b.padding == 0 or b.mode == "circular"
            odd = isinstance(a.act, tuple) and all(c == 0 for c in a.act[0::2])

            def without(j, nbias=None, nrows=None):
                rows = nrows if nrows is not None else b.rows
                return (replace(a, rows=a.rows[:j] + a.rows[j + 1:], bias=a.bias[:j] + a.bias[j + 1:]),
                        replace(b, in_shape=(n - 1,) + tuple(b.in_shape[1:]),
                                rows=tuple(r[:j * t] + r[(j + 1) * t:] for r in rows),
                                bias=tuple(nbias if nbias is not None else b.bias)))

            for j in range(n if n > 1 else 0):
                out = [r[j * t:(j + 1) * t] for r in b.rows]
                if not any(x for r in out for x in r):
                    layers[i], layers[i + 1] = without(j)
                    changed = True
                    break
                if not any(a.rows[j]):
                    c = _apply(a.act, a.bias[j])
                    if c == 0 or whole:
                        layers[i], layers[i + 1] = without(j, [bb + c * sum(r) for bb, r in zip(b.bias, out)])
                        changed = True
                        break
                    continue
                for k in range(j):
                    qs = [1, -1] if odd else [1]
                    if a.act == "relu":  # relu(q z) = q relu(z) for q > 0: a positively scaled clone
                        r = _ratio(list(a.rows[j]) + [a.bias[j]], list(a.rows[k]) + [a.bias[k]]) if any(a.rows[k]) else None
                        qs = [r] if r is not None and r > 0 else []
                    for q in qs:
                        if a.bias[j] == q * a.bias[k] and all(x == q * y for x, y in zip(a.rows[j], a.rows[k])):
                            rows = [list(r) for r in b.rows]
                            for r in rows:
                                for u in range(t):
                                    r[k * t + u] += q * r[j * t + u]
                            layers[i], layers[i + 1] = without(j, nrows=tuple(tuple(r) for r in rows))
                            changed = True
                            break
                    if changed:
                        break
                if changed:
                    break
            if changed:
                break
    return tuple(layers)


def _conv_layer(spec: dict, shape, width: int, name: str, at: str, last: bool):
    """A conv2d layer of a model file (shape: the (C, H, W) before it, or None)."""
    check_keys(spec, at, *CONV_KEYS)
    given = spec.get("input_shape")
    if given is not None:
        if not isinstance(given, list) or len(given) != 3:
            raise CheckError(f"{name}: input_shape must be [channels, height, width]")
        given = tuple(_count(v, f"{name} input_shape", 1) for v in given)
        if shape is not None and given != shape:
            raise CheckError(f"{name}: input_shape {list(given)} differs from the previous layer's {list(shape)}")
        shape = given
    if shape is None:
        raise CheckError(f"{name}: a conv2d layer needs input_shape")
    C, H, W = shape
    if C * H * W != width:
        raise CheckError(f"{name}: input_shape {list(shape)} has {C * H * W} entries, the input has {width}")
    for key in ("dilation", "groups"):
        if spec.get(key, 1) not in (1, [1, 1]):
            raise CheckError(f"{name}: only {key} 1 is supported")
    kernel = spec.get("kernel")
    if not isinstance(kernel, list) or not kernel:
        raise CheckError(f"{name}: kernel must be a nested list out_channels x in_channels x kh x kw")
    mats = []
    for o, ko in enumerate(kernel):
        if not isinstance(ko, list) or len(ko) != C:
            raise CheckError(f"{name}: kernel[{o}] must have {C} input channels")
        mats.append([_matrix(kc, f"{name} kernel[{o}][{c}]") for c, kc in enumerate(ko)])
    kh, kw = len(mats[0][0]), len(mats[0][0][0])
    if any(len(m) != kh or any(len(r) != kw for r in m) for ko in mats for m in ko):
        raise CheckError(f"{name}: every kernel must be {kh}x{kw}")
    stride = _count(spec.get("stride", 1), f"{name} stride", 1)
    padding = _count(spec.get("padding", 0), f"{name} padding", 0)
    mode = spec.get("padding_mode", "zeros")
    if mode not in ("zeros", "circular"):
        raise CheckError(f"{name}: padding_mode must be 'zeros' or 'circular', got {_short(mode)}")
    rows = tuple(tuple(m[i][j] for m in ko for i in range(kh) for j in range(kw)) for ko in mats)
    bias = spec.get("bias")
    bias = (Fraction(0),) * len(rows) if bias is None else _vector(bias, f"{name} bias", len(rows))
    act, label = _activation(spec.get("activation"), name)
    _check_hidden(act, last, name)
    layer = _Conv(shape, kh, kw, stride, padding, mode, rows, bias, act, f"conv2d {label}")
    if min(layer.out_hw) < 1:
        raise CheckError(f"{name}: the kernel does not fit the padded image")
    return layer


def _check_hidden(act, last: bool, name: str) -> None:
    if last and act is not None:
        raise CheckError(f"{name}: the last layer must be affine (activation null)")
    if not last and act is None:
        raise CheckError(f"{name}: a hidden layer needs a non-null activation")


def _dense_after_conv(spec: dict, shape, name: str, at: str, last: bool) -> _Conv:
    """A dense layer after a convolution (and a flatten): the conv with a whole-image kernel."""
    check_keys(spec, at, *DENSE_KEYS)
    C, H, W = shape
    weight = _matrix(spec.get("weight"), f"{name} weight", cols=C * H * W)
    bias = spec.get("bias")
    bias = (Fraction(0),) * len(weight) if bias is None else _vector(bias, f"{name} bias", len(weight))
    act, label = _activation(spec.get("activation"), name)
    _check_hidden(act, last, name)
    return _Conv(shape, H, W, 1, 0, "zeros", weight, bias, act, f"conv2d (dense) {label}")


def _conv_forward(layer: _Conv, x) -> tuple:
    src = layer.sources()
    npix = len(src[0])
    out = []
    for o, r in enumerate(layer.rows):
        for q in range(npix):
            z = layer.bias[o]
            for t, w in enumerate(r):
                s = src[t][q]
                if w and s >= 0:
                    z += w * x[s]
            out.append(_apply(layer.act, z))
    return tuple(out)


def _as_channel_pixel(m: Matrix, shape) -> tuple | None:
    """A dense group matrix as (source, factor, pixels) on (C, H, W), or None if it is not of that form."""
    C, H, W = shape
    P = H * W
    cols, vals = [], []
    for row in m:
        nz = [(c, x) for c, x in enumerate(row) if x]
        if len(nz) != 1:
            return None
        cols.append(nz[0][0])
        vals.append(nz[0][1])
    pix = tuple(c % P for c in cols[:P])
    src, fac = [], []
    for c in range(C):
        sc, fc = cols[c * P] // P, vals[c * P]
        if any(cols[c * P + p] != sc * P + pix[p] or vals[c * P + p] != fc for p in range(P)):
            return None
        src.append(sc)
        fac.append(fc)
    return tuple(src), tuple(fac), pix


def _channel_pixel(value, shape, where: str) -> tuple:
    check_keys(_dict(value, where), where, *CHANNEL_PIXEL_KEYS)
    C, H, W = shape
    if value.get("kind") != "channel-pixel":
        raise CheckError(f"{where}: a conv2d layer's action must be of kind 'channel-pixel'")
    if value.get("height") != H or value.get("width") != W:
        raise CheckError(f"{where}: height and width must be {H} and {W}")
    ch = value.get("channels")
    check_keys(_dict(ch, f"{where}.channels"), f"{where}.channels", *CHANNELS_KEYS)
    src = tuple(_indices(ch.get("source"), C, f"{where}.channels.source"))
    fac = _vector(ch.get("factor"), f"{where}.channels.factor", C)
    pix = tuple(_indices(value.get("pixels"), H * W, f"{where}.pixels"))
    if len(set(src)) != C or len(set(pix)) != H * W:
        raise CheckError(f"{where}: source and pixels must be permutations")
    if any(f == 0 for f in fac):
        raise CheckError(f"{where}: a factor is 0 (not invertible)")
    return src, fac, pix


_PLANE_MAPS = ((1, 0, 0, 1), (0, -1, 1, 0), (-1, 0, 0, -1), (0, 1, -1, 0),
               (-1, 0, 0, 1), (1, 0, 0, -1), (0, 1, 1, 0), (0, -1, -1, 0))


def _grid_pixels(R, h: int, w: int):
    a, b, c, d = R
    if b and h != w:
        return None
    d0 = h - 1 if (a < 0 or b < 0) else 0
    d1 = w - 1 if (c < 0 or d < 0) else 0
    return tuple((a * y + b * x + d0) * w + (c * y + d * x + d1) for y in range(h) for x in range(w))


def _conv_failure(layer: _Conv, p: tuple, q: tuple) -> str | None:
    """Why act(conv(P x)) == Q act(conv(x)) fails, or None: the kernel identities when P's pixels are a
    grid symmetry R that the conv's geometry carries to Q's pixels; otherwise neuron by neuron."""
    C, H, W = layer.in_shape
    (ps, pf, pp), (qs, qf, qp) = p, q
    oh, ow = layer.out_hw
    for R in _PLANE_MAPS:
        if _grid_pixels(R, H, W) != pp:
            continue
        a, b, c, d = R
        fits = not b or (layer.kh == layer.kw)
        for row in ((a, b), (c, d)):
            src = 0 if row[0] else 1
            n, k = ((H, layer.kh), (W, layer.kw))[src]
            if row[src] < 0 and (n + 2 * layer.padding - k) % layer.stride:
                fits = False
        if not fits or _grid_pixels(R, oh, ow) != qp:
            break
        kh, kw = layer.kh, layer.kw
        e0 = kh - 1 if (a < 0 or b < 0) else 0
        e1 = kw - 1 if (c < 0 or d < 0) else 0
        for o, r in enumerate(layer.rows):  # K'[o, source[c], R t] = factor[c] K[o, c, t]
            u = [Fraction(0)] * len(r)
            for t, x in enumerate(r):
                ci, ij = divmod(t, kh * kw)
                i, j = divmod(ij, kw)
                u[(ps[ci] * kh + a * i + b * j + e0) * kw + c * i + d * j + e1] = x * pf[ci]
            k, f = qs[o], qf[o]
            if layer.act is None:
                if any(x != f * y for x, y in zip(u, layer.rows[k])) or layer.bias[o] != f * layer.bias[k]:
                    break
            elif _neuron_failure(layer.act, u, layer.rows[k], layer.bias[o], layer.bias[k], f):
                break
        else:
            return None
        break
    # the general decision on sparse rows (necessary and sufficient, linear in taps x neurons)
    src = layer.sources()
    npix = oh * ow
    P = H * W
    pcol = lambda s: ps[s // P] * P + pp[s % P]  # noqa: E731 - row s of P has factor pf[s // P] there
    for j in range(layer.out_dim):
        o, qq = divmod(j, npix)
        k = qs[o] * npix + qp[qq]
        rows = []
        for n_, (oo, px) in ((j, (o, qq)), (k, divmod(k, npix))):
            acc: dict = {}
            for t, x in enumerate(layer.rows[oo]):
                s = src[t][px]
                if x and s >= 0:
                    acc[s] = acc.get(s, 0) + x
            rows.append(acc)
        u = {pcol(s): x * pf[s // P] for s, x in rows[0].items()}
        v = rows[1]
        keys = sorted(set(u) | set(v)) or [0]
        uu = [u.get(x, Fraction(0)) for x in keys]
        vv = [v.get(x, Fraction(0)) for x in keys]
        f = qf[o]
        bj, bk = layer.bias[o], layer.bias[k // npix]
        if layer.act is None:
            if any(x != f * y for x, y in zip(uu, vv)) or bj != f * bk:
                return f"neuron {j + 1}: W P != Q W or b != Q b"
            continue
        why = _neuron_failure(layer.act, uu, vv, bj, bk, f)
        if why:
            return f"neuron {j + 1} (channel {o + 1}, pixel {qq}): {why}"
    return None


def _cp_mul(x: tuple, y: tuple) -> tuple:
    (s1, f1, p1), (s2, f2, p2) = x, y
    return (tuple(s2[s] for s in s1), tuple(a * f2[s] for a, s in zip(f1, s1)), tuple(p2[p] for p in p1))


def _check_conv_layerwise(report: CheckReport, cert: dict, layers: list, group: list, cap: int) -> None:
    """The layer checks and the homomorphism for a chain of conv2d layers (sparse channel-pixel actions)."""
    if not all(isinstance(layer, _Conv) for layer in layers):  # not a rejection: nothing is claimed false
        report.checks.append("nothing this checker can re-verify: a chain mixing dense and conv2d layers "
                             "(dense layers before the first convolution) is not checked by this checker")
        report.unverifiable = True
        return
    actions = cert.get("latent_actions")
    if not isinstance(actions, list) or len(actions) != len(layers) - 1:
        report.reasons.append(f"latent_actions must list one entry per hidden layer ({len(layers) - 1})")
        return
    offsets = cert.get("latent_offsets")
    if offsets is not None and any(any(_vector(c, "offset")) for e in offsets if isinstance(e, list) for c in e):
        report.reasons.append("latent_offsets on conv2d layers are not supported by this checker")
        return
    rho = []
    first = []
    for g, (a, _) in enumerate(group):
        cp = _as_channel_pixel(a, layers[0].in_shape)
        if cp is None:
            report.reasons.append(f"generator {g + 1}: the input matrix is not a channel action times a pixel permutation")
            return
        first.append(cp)
    rho.append(first)
    for i, (entry, layer) in enumerate(zip(actions, layers), 1):
        if not isinstance(entry, list) or len(entry) != len(group):
            report.reasons.append(f"layer {i}: latent_actions must give one action per generator ({len(group)})")
            return
        mats = [_channel_pixel(m, layer.out_shape, f"certificate.latent_actions[{i - 1}][{g}]")
                for g, m in enumerate(entry)]
        if layer.act == "relu" and any(f <= 0 for m in mats for f in m[1]):
            report.reasons.append(f"layer {i}: a relu layer needs positive factors")
            return
        rho.append(mats)
    last = []
    for g, (_, b) in enumerate(group):
        cp = _as_channel_pixel(b, layers[-1].out_shape)
        if cp is None:
            report.reasons.append(f"generator {g + 1}: the output matrix is not monomial on the output channels")
            return
        last.append(cp)
    rho.append(last)
    for g in range(len(group)):
        for i, layer in enumerate(layers, 1):
            why = _conv_failure(layer, rho[i - 1][g], rho[i][g])
            if why:
                report.reasons.append(f"layer {i}, generator {g + 1}: {why}")
            else:
                report.checks.append(f"layer {i}, generator {g + 1}: act(conv(P x)) = Q act(conv(x)) verified on the "
                                     f"kernels ({layer.label}, {layer.out_dim} neurons)")
    if report.reasons:
        return
    tuples = [tuple(rho[i][g] for i in range(len(rho))) for g in range(len(group))]
    if not tuples:
        report.checks.append("homomorphism: trivial group (no generators)")
        return
    ident = tuple((tuple(range(len(m[0]))), tuple(Fraction(1) for _ in m[1]), tuple(range(len(m[2]))))
                  for m in tuples[0])
    seen = _close_tuples(report, tuples, ident, _cp_mul, cap)
    if seen is None:
        return
    by_input: dict = {}
    for t in seen:
        if by_input.setdefault(t[0], t) != t:
            report.reasons.append("homomorphism: two group elements with the same input action act differently on "
                                  "a latent space; the actions do not respect a relation of the group")
            return
    report.checks.append(f"homomorphism: group of order {len(seen)}, all {len(layers) - 1} latent actions consistent "
                         "(channel-pixel actions composed on their factors)")


# ----------------------------------------------------------------------------- local: Jacobian rank mod p
#
# ``"method": "jacobian-rank"`` (written by symeq/fibre/jacobian.py, docs/identifiability.md, "Local
# identifiability"): the certificate names rational points x_1..x_N and r rows (point, output) of the
# Jacobian J of theta -> (f_theta(x_1), ..., f_theta(x_N)).  The checker recomputes those rows modulo
# p = 2^61 - 1 by reverse mode (its own reading of the model and of the parameter order: per layer W
# row-major, then b when the model has a nonzero bias), eliminates them (rank r mod p: a nonzero r x r
# minor, so rank over Q >= r), recomputes the orbit tangent of K's continuous part from the activations
# (c (t - s)^d + e scalings), checks that it lies in the kernel of those rows and that r = P - its rank:
# the two bounds rank_Q J <= P - dim K.theta meet, and theta is locally identifiable.  A conv2d layer (and a
# dense layer after it, read as a whole-image kernel) is re-read by this checker's own conv reader
# (_conv_layer, _Conv.sources): its parameters are the kernel rows (taps in (c, i, j) order), then the
# channel biases; its rows cost taps x output pixels x channels each (MAX_JACOBIAN_ROW_WORK).

JACOBIAN_METHOD = "jacobian-rank"
JACOBIAN_PRIME = (1 << 61) - 1
#: the checker's size limit: rows x r x P (the elimination's slot operations; 4.2e9 took 15 s, 2.5e11 (6 288
#: parameters) about a quarter of an hour on a loaded 2-core machine), above it nothing is checked (exit 3)
MAX_JACOBIAN_WORK = 3 * 10 ** 11
#: ... and the recomputation of the certified rows: rows x (sum over layers of weights, a conv2d layer's kernel
#: taps times its output pixels), the multiplications of one reverse-mode row (pure Python: ~10^7 a second)
MAX_JACOBIAN_ROW_WORK = 2 * 10 ** 9
JACOBIAN_KEYS = ("format", "method", "verdict", "widths", "bias", "layers_sha256", "prime", "seed", "parameters",
                 "parameter_order", "points", "rows", "rank", "orbit_dimension", "orbit_generators")
_SLOT = 128


def _jac_mod(x: Fraction, p: int = JACOBIAN_PRIME) -> int:
    if x.denominator % p == 0:
        raise CheckError(f"the prime divides the denominator of {x}")
    return x.numerator % p * pow(x.denominator, -1, p) % p


def _jac_poly(coeffs, z: int, p: int = JACOBIAN_PRIME) -> int:
    acc = 0
    for c in reversed(coeffs):
        acc = (acc * z + c) % p
    return acc


def _jac_mm(A, B, p: int):
    """A B mod p (lists of lists)."""
    from operator import mul

    cols = list(zip(*B))
    return [[sum(map(mul, row, col)) % p for col in cols] for row in A]


def _jac_tr(A):
    return [list(r) for r in zip(*A)]


def _jac_tokens(layers) -> int | None:
    """T when the chain starts with attention (its token-wise layers are I_T (x) W), else None."""
    return layers[0].tokens if isinstance(layers[0], _Attention) else None


def _jac_token_block(layer, T: int):
    """(W, b) of a token-wise layer, read off its I_T (x) W expansion (the diagonal block) and bias repeats."""
    n, d = len(layer.weight) // T, len(layer.weight[0]) // T
    return tuple(tuple(r[:d]) for r in layer.weight[:n]), tuple(layer.bias[:n])


def _jac_attention_forward(layer, h, p: int):
    """f(X) = sum_h (X Q K^T X^T) X V O mod p on the flattened X (T x d, by rows), and the cache."""
    T, d = layer.tokens, layer.d
    X = [h[t * d:(t + 1) * d] for t in range(T)]
    Y = [[0] * layer.d_out for _ in range(T)]
    cache = []
    for Q, Kk, V, O in layer.heads:
        Q, Kk, V, O = ([[_jac_mod(x, p) for x in r] for r in M] for M in (Q, Kk, V, O))
        XQ, XK, U = _jac_mm(X, Q, p), _jac_mm(X, Kk, p), _jac_mm(X, V, p)
        S = _jac_mm(XQ, _jac_tr(XK), p)
        Wh = _jac_mm(U, O, p)
        SW = _jac_mm(S, Wh, p)
        Y = [[(a + b) % p for a, b in zip(r1, r2)] for r1, r2 in zip(Y, SW)]
        cache.append((O, XQ, XK, U, S, Wh))
    return [x for r in Y for x in r], (X, cache)


def _jac_attention_backward(layer, cache, delta, p: int) -> list[int]:
    """d/d(Q_h, K_h, V_h, O_h) (each row-major, head by head) of <delta, f(X)>."""
    X, heads = cache
    T, do = layer.tokens, layer.d_out
    G = [delta[t * do:(t + 1) * do] for t in range(T)]
    XT = _jac_tr(X)
    out = []
    for O, XQ, XK, U, S, Wh in heads:
        dS = _jac_mm(G, _jac_tr(Wh), p)
        dQ = _jac_mm(XT, _jac_mm(dS, XK, p), p)
        dK = _jac_mm(XT, _jac_mm(_jac_tr(dS), XQ, p), p)
        dU = _jac_mm(_jac_mm(_jac_tr(S), G, p), _jac_tr(O), p)
        dV = _jac_mm(XT, dU, p)
        dO = _jac_mm(_jac_tr(_jac_mm(S, U, p)), G, p)
        out += [x for M in (dQ, dK, dV, dO) for r in M for x in r]
    return out


def _jac_attention_tangents(layers, offs) -> list[dict]:
    """The reparametrisations that keep an attention chain's function (as symeq.fibre.jacobian computes them):
    GL(d_v) per head on (V_h, O_h): V E, -E O; GL(d_k) per head on (Q_h, K_h): Q E, -K E^T; the scalar
    between scores and values: Q, -V; and GL(d_out) between every O_h and the next token-wise W: O E, -W E^T."""
    att = layers[0]
    gens, c, outs = [], offs[0], []
    for Q, Kk, V, O in att.heads:
        d, dk, dv, do = len(Q), len(Q[0]), len(V[0]), len(O[0])
        oq, ok = c, c + d * dk
        ov, oo = ok + d * dk, ok + d * dk + d * dv
        for a in range(dv):
            for b in range(dv):
                v = {}
                for i in range(d):
                    if V[i][a]:
                        v[ov + i * dv + b] = V[i][a]
                for j in range(do):
                    if O[b][j]:
                        v[oo + a * do + j] = v.get(oo + a * do + j, 0) - O[b][j]
                gens.append({k: x for k, x in v.items() if x})
        for a in range(dk):
            for b in range(dk):
                v = {}
                for i in range(d):
                    if Q[i][a]:
                        v[oq + i * dk + b] = Q[i][a]
                    if Kk[i][b]:
                        v[ok + i * dk + a] = v.get(ok + i * dk + a, 0) - Kk[i][b]
                gens.append({k: x for k, x in v.items() if x})
        v = {}
        for i in range(d):
            for j in range(dk):
                if Q[i][j]:
                    v[oq + i * dk + j] = Q[i][j]
            for j in range(dv):
                if V[i][j]:
                    v[ov + i * dv + j] = -V[i][j]
        gens.append(v)
        outs.append((oo, O))
        c = oo + dv * do
    if len(layers) > 1:
        W, _ = _jac_token_block(layers[1], att.tokens)
        do = att.d_out
        for a in range(do):
            for b in range(do):
                v = {}
                for oo, O in outs:
                    for i, row in enumerate(O):
                        if row[a]:
                            v[oo + i * do + b] = row[a]
                for r, row in enumerate(W):
                    if row[b]:
                        v[offs[2] + r * do + a] = v.get(offs[2] + r * do + a, 0) - row[b]
                gens.append({k: x for k, x in v.items() if x})
    return gens


class _JacKink(Exception):
    """A certified point where a ReLU pre-activation is 0 (no Jacobian there)."""


def _jac_pl(act):
    """The slope on the negative side of a ReLU (0) or leaky ReLU (its slope) activation, else None."""
    if act == "relu":
        return Fraction(0)
    if isinstance(act, _Real) and act.name == "leaky_relu":
        return act.param
    return None


def _jac_weight(layer, tokens: int | None = None):
    """The parameters' weight rows of a layer: a dense layer's W, a conv2d layer's kernel rows (taps in
    (c, i, j) order), a token-wise layer's one W (``tokens``: T after attention)."""
    if isinstance(layer, _Conv):
        return layer.rows
    if tokens is not None:
        return _jac_token_block(layer, tokens)[0]
    return layer.weight


def _jac_bias(layer, tokens: int | None = None):
    return _jac_token_block(layer, tokens)[1] if tokens is not None else layer.bias


def _jac_count(layer, bias: bool, tokens: int | None = None) -> int:
    """The layer's number of parameters in the certificate's order."""
    if isinstance(layer, _Attention):
        return sum(len(M) * len(M[0]) for hd in layer.heads for M in hd)
    W = _jac_weight(layer, tokens)
    return len(W) * len(W[0]) + (len(W) if bias else 0)


def _jac_rows(layers, bias: bool, point, outputs, p: int = JACOBIAN_PRIME, geometry=None) -> list[list[int]]:
    """The rows d f_k(x) / d theta mod p for the outputs k, by reverse mode (one forward pass).

    A conv2d layer (:class:`_Conv`) is read on its kernels: ``geometry[i]`` is its ``sources()`` map
    (src[t][q]: the input index tap t reads at output pixel q, -1 for zero padding); its parameters are
    the kernel rows, then the channel biases (as ``symeq.fibre.jacobian._ConvMod`` orders them).  After
    a first attention layer (parameters Q_h, K_h, V_h, O_h, head by head) every layer is token-wise: one
    W and b for the T tokens."""
    from operator import mul

    T = _jac_tokens(layers)
    h = [_jac_mod(x, p) for x in point]
    # with ReLU the slopes need the exact signs of the pre-activations: an exact forward pass alongside
    hx = list(point) if any(_jac_pl(l.act) is not None for l in layers) else None
    hs, ss, Ws = [], [], []
    for li, layer in enumerate(layers):
        if hx is not None:
            zx = [sum(w * v for w, v in zip(row, hx)) + bj for row, bj in zip(layer.weight, layer.bias)]
            slope = _jac_pl(layer.act)
            if slope is not None and any(z == 0 for z in zx):
                raise _JacKink(f"hidden pre-activation {zx.index(0) + 1} of layer {li + 1} is 0 at the point "
                               "(theta -> f_theta(x) is not differentiable there)")
            hs.append((h, "dense", None))
            Ws.append([[_jac_mod(x, p) for x in row] for row in layer.weight])
            hx = [_apply(layer.act, z) for z in zx]
            h = [_jac_mod(x, p) for x in hx]
            if layer.act is None:
                ss.append(None)
            elif slope is not None:
                ss.append([1 if z > 0 else _jac_mod(slope, p) for z in zx])
            else:
                dc = [_jac_mod(k * x, p) for k, x in enumerate(layer.act)][1:] or [0]
                ss.append([_jac_poly(dc, _jac_mod(z, p), p) for z in zx])
            continue
        if isinstance(layer, _Attention):
            if li:
                raise CheckError("attention must be the model's first layer")
            h, cache = _jac_attention_forward(layer, h, p)
            hs.append((None, "attention", cache))
            Ws.append(None)
            ss.append(None)
            continue
        W = [[_jac_mod(x, p) for x in row] for row in _jac_weight(layer, T)]
        b = [_jac_mod(x, p) for x in _jac_bias(layer, T)]
        if isinstance(layer, _Conv):
            src = geometry[li]
            cols = [[h[s] if s >= 0 else 0 for s in srow] for srow in src]  # taps x npix
            patches = list(zip(*cols))                                        # npix x taps
            z = [(sum(map(mul, row, patch)) + bo) % p for row, bo in zip(W, b) for patch in patches]
            hs.append((h, "conv", cols))
        elif T is not None:
            d = len(W[0])
            z = [(sum(map(mul, row, h[t * d:(t + 1) * d])) + bo) % p for t in range(T) for row, bo in zip(W, b)]
            hs.append((h, "tokens", None))
        else:
            z = [(sum(map(mul, row, h)) + bj) % p for row, bj in zip(W, b)]
            hs.append((h, "dense", None))
        Ws.append(W)
        if layer.act is None:
            ss.append(None)
            h = z
        else:
            c = [_jac_mod(x, p) for x in layer.act]
            dc = [k * x % p for k, x in enumerate(c)][1:] or [0]
            ss.append([_jac_poly(dc, zj, p) for zj in z])
            h = [_jac_poly(c, zj, p) for zj in z]
    out = []
    for k in outputs:
        delta = [int(i == k) for i in range(len(h))]
        blocks = []
        for i in range(len(layers) - 1, -1, -1):
            if ss[i] is not None:
                delta = [d * s % p for d, s in zip(delta, ss[i])]
            hin, kind, extra = hs[i]
            W = Ws[i]
            if kind == "attention":
                blocks.append(_jac_attention_backward(layers[i], extra, delta, p))
                continue
            if kind == "dense":
                blk = [d * v % p for d in delta for v in hin]
                if bias:
                    blk += delta
            elif kind == "tokens":
                n, d = len(W), len(W[0])
                Dt = [delta[t * n:(t + 1) * n] for t in range(T)]
                Ht = [hin[t * d:(t + 1) * d] for t in range(T)]
                blk = [sum(Dt[t][r] * Ht[t][c] for t in range(T)) % p for r in range(n) for c in range(d)]
                if bias:
                    blk += [sum(Dt[t][r] for t in range(T)) % p for r in range(n)]
            else:
                cols = extra
                npix = len(cols[0]) if cols else 0
                D = [delta[o * npix:(o + 1) * npix] for o in range(len(W))]
                blk = [sum(map(mul, d, col)) % p for d in D for col in cols]
                if bias:
                    blk += [sum(d) % p for d in D]
            blocks.append(blk)
            if not i:
                continue
            if kind == "dense":
                delta = [sum(delta[a] * W[a][j] for a in range(len(W))) % p for j in range(len(hin))]
            elif kind == "tokens":
                delta = [sum(Dt[t][r] * W[r][c] for r in range(n)) % p for t in range(T) for c in range(d)]
            else:
                din = [0] * len(hin)
                for t, srow in enumerate(geometry[i]):
                    acc = [0] * npix
                    for o, d in enumerate(D):
                        w = W[o][t]
                        if w:
                            acc = [a + w * x for a, x in zip(acc, d)]
                    for q, s in enumerate(srow):
                        if s >= 0:
                            din[s] += acc[q]
                delta = [x % p for x in din]
        out.append([x for blk in reversed(blocks) for x in blk])
    return out


def _jac_pack(row) -> int:
    x = 0
    for v in reversed(row):
        x = (x << _SLOT) | v
    return x


def _jac_rank(rows: list[list[int]], ncols: int) -> int:
    """Rank modulo 2^61 - 1 of the rows by elimination on packed integers.

    Each row is one Python integer with 128-bit slots (column j in slot j).  The columns are
    eliminated from the highest down, so a row operation row + (p - f) pivot is one multiplication
    and one addition: the eliminated slots above the current column hold garbage, into which the
    carries of the live slots below can only flow upward, and which is cut off every 16 columns.
    Every 30 operations each slot is folded back below 2^62 (2^61 = 1 mod p), so no live slot
    overflows into the next.
    """
    p = JACOBIAN_PRIME
    lo61 = sum(((1 << 61) - 1) << (_SLOT * i) for i in range(ncols))
    lo67 = sum(((1 << 67) - 1) << (_SLOT * i) for i in range(ncols))
    slot = (1 << _SLOT) - 1

    def fold(x):
        x = (x & lo61) + ((x >> 61) & lo67)
        return (x & lo61) + ((x >> 61) & lo67)

    live = [[_jac_pack(r), 0] for r in rows]
    rank = 0
    for c in range(ncols - 1, -1, -1):
        if not live:
            break
        sh = _SLOT * c
        piv = None
        for idx, item in enumerate(live):
            if ((item[0] >> sh) & slot) % p:
                piv = idx
                break
        if piv is not None:
            pv = fold(live.pop(piv)[0]) & ((1 << (sh + _SLOT)) - 1)
            inv = pow(((pv >> sh) & slot) % p, -1, p)
            rank += 1
            for item in live:
                x = item[0]
                f = ((x >> sh) & slot) % p
                if f:
                    x += (p - f * inv % p) * pv
                    item[1] += 1
                    if item[1] >= 30:
                        x, item[1] = fold(x), 0
                    item[0] = x
        if c % 16 == 0:
            cut = (1 << sh) - 1
            for item in live:
                item[0] &= cut
    return rank


#: the checker's own primes: below 2^30, so that a row operation multiplies by one CPython digit; a rank
#: r modulo any prime proves rank >= r over Q, and 2^61 - 1 (the certificate's) is the last resort
_CHECK_PRIMES = (1073741789, 1073741783)
_SMALL_SLOT = 96


def _jac_rank_small(rows: list[list[int]], ncols: int, q: int) -> int:
    """Rank modulo a prime q < 2^30 of rows with entries in [0, q), on packed integers (96-bit slots).

    As :func:`_jac_rank`, columns from the highest down; a row receives at most one update per
    pivot, each below 2^60, so no slot of a row ever overflows (fewer than 2^35 pivots) and only a
    pivot is reduced (unpacked, reduced modulo q, repacked) before it is used.
    """
    nb = _SMALL_SLOT // 8
    mask = (1 << _SMALL_SLOT) - 1

    def pack(vals):
        return int.from_bytes(b"".join(v.to_bytes(nb, "little") for v in vals), "little")

    def reduce(x, n):
        raw = x.to_bytes(n * nb + 16, "little")
        return pack([int.from_bytes(raw[i * nb:(i + 1) * nb], "little") % q for i in range(n)])

    live = [pack(r) for r in rows]  # rows: any iterable (packed one by one)
    rank = 0
    for c in range(ncols - 1, -1, -1):
        if not live:
            break
        sh = _SMALL_SLOT * c
        piv = None
        for idx, x in enumerate(live):
            if ((x >> sh) & mask) % q:
                piv = idx
                break
        if piv is not None:
            pv = reduce(live.pop(piv) & ((1 << (sh + _SMALL_SLOT)) - 1), c + 1)
            inv = pow(((pv >> sh) & mask) % q, -1, q)
            rank += 1
            for idx, x in enumerate(live):
                f = ((x >> sh) & mask) % q
                if f:
                    live[idx] = x + (q - f * inv % q) * pv
        if c % 16 == 0:
            cut = (1 << sh) - 1
            live = [x & cut for x in live]
    return rank


def _jac_is_prime(n: int) -> bool:
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
    for q in small:
        if n % q == 0:
            return n == q
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in small:  # deterministic below 3.3e24
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _jac_continuous(coeffs, bias: bool):
    """(s, d, e) when sigma = c (t - s)^d + e has every alpha != 0 as a latent scaling, else None."""
    if not isinstance(coeffs, tuple) or len(coeffs) < 3:
        return None
    d = len(coeffs) - 1
    s = -coeffs[d - 1] / (d * coeffs[d])
    # the coefficients of sigma(u + s): binomial expansion
    shifted = [sum(coeffs[j] * comb(j, k) * s ** (j - k) for j in range(k, d + 1)) for k in range(d + 1)]
    if any(shifted[k] != 0 for k in range(1, d)):
        return None
    e = shifted[0]
    if e != 0 and not bias:
        return None
    if not bias and s != 0:
        return None
    return s, d, e


def _jac_dense_like(layer) -> bool:
    """A dense layer that is not token-wise (symeq.models reads a dense layer after a convolution as a conv2d
    layer with a whole-image kernel: it is not one of these)."""
    return isinstance(layer, _Layer) and "token-wise" not in layer.label


def _jac_tangents(layers, bias: bool, offs) -> list[dict]:
    """The scalings' generators at theta; a CheckError names a continuous scaling next to a convolution
    (symeq.fibre.jacobian writes no certificate there: the tangent is computed between dense layers only)."""
    gens = []
    for i, layer in enumerate(layers[:-1]):
        # ReLU: the positive rescalings relu(alpha z) = alpha relu(z), i.e. (s, d, e) = (0, 1, 0)
        cont = (Fraction(0), 1, Fraction(0)) if _jac_pl(layer.act) is not None else _jac_continuous(layer.act, bias)
        if cont is None:
            continue
        if not (_jac_dense_like(layer) and _jac_dense_like(layers[i + 1])):
            raise CheckError(f"layer {i + 1} ({layer.label}): jacobian-rank certificates recompute the orbit tangent "
                             "of continuous scalings between dense layers only, not next to a convolution or a "
                             "token-wise layer")
        s, d, e = cont
        nxt = layers[i + 1]
        weight, nweight = _jac_weight(layer), _jac_weight(nxt)
        nin = len(weight[0])
        for j, row in enumerate(weight):
            v = {}
            for k, x in enumerate(row):
                if x:
                    v[offs[2 * i] + j * nin + k] = x
            if bias and layer.bias[j] - s:
                v[offs[2 * i + 1] + j] = layer.bias[j] - s
            for k, nrow in enumerate(nweight):
                if nrow[j]:
                    v[offs[2 * i + 2] + k * len(nrow) + j] = -d * nrow[j]
                    if bias and e:
                        v[offs[2 * i + 3] + k] = d * e * nrow[j]
            gens.append(v)
    return gens


def check_jacobian_rank(cert: dict, model: dict) -> CheckReport:
    """Re-verify a ``jacobian-rank`` certificate (local identifiability), standard library only.

    Exit codes through the report: accepted 0, rejected 1, beyond the size limit
    (:data:`MAX_JACOBIAN_WORK` slot operations rows x r x P) 3 with nothing verified.
    """
    n_in, layers, _ = _model(model)
    if _dict(cert, "certificate").get("verdict") == "not-identifiable":
        return _check_jacobian_family(cert, n_in, layers)
    check_keys(_dict(cert, "certificate"), "certificate", JACOBIAN_KEYS, JACOBIAN_KEYS[:14], error=CheckError)
    report = CheckReport(None, str(cert.get("verdict")))
    if cert.get("verdict") != "locally-identifiable":
        raise CheckError(f"certificate: a jacobian-rank certificate says \"locally-identifiable\", got "
                         f"{_short(cert.get('verdict'))}")
    T = _jac_tokens(layers)
    if not all(isinstance(l, (_Layer, _Conv)) and (l.act is None or isinstance(l.act, tuple)
                                                   or _jac_pl(l.act) is not None)
               or (isinstance(l, _Attention) and i == 0) for i, l in enumerate(layers)) \
            or (T is None and any("token-wise" in l.label for l in layers)) \
            or (any(_jac_pl(l.act) is not None for l in layers) and not all(_jac_dense_like(l) for l in layers)):
        report.reasons.append("jacobian-rank certificates cover dense, conv2d, attention and token-wise layers with "
                              "polynomial activations, and dense ReLU / leaky ReLU networks")
        report.accepted = False
        return report
    if _digest_differs(report, cert.get("layers_sha256"), layers):
        report.accepted = False
        return report
    bias = any(x != 0 for l in layers if not isinstance(l, _Attention) for x in l.bias)
    widths = [n_in] + [_out_dim(l) for l in layers]
    P = sum(_jac_count(l, bias, T) for l in layers)
    for key, want in (("widths", widths), ("bias", bias), ("parameters", P)):
        if cert.get(key) != want or isinstance(cert.get(key), bool) != isinstance(want, bool):
            report.reasons.append(f"certificate {key} {_short(cert.get(key))} differs from the model's {want}")
    prime = cert.get("prime")
    if prime != str(JACOBIAN_PRIME):
        report.reasons.append(f"certificate prime {_short(prime)}: this format uses 2^61 - 1 = {JACOBIAN_PRIME}")
    elif not _jac_is_prime(JACOBIAN_PRIME):  # pragma: no cover - a Mersenne prime
        report.reasons.append("2^61 - 1 is not prime")
    r = cert.get("rank")
    if not _is_int(r) or isinstance(r, bool) or not 0 <= r <= P:
        report.reasons.append(f"certificate rank {_short(r)} is not an integer in [0, {P}]")
    if report.reasons:
        report.accepted = False
        return report
    pts = cert.get("points")
    if not isinstance(pts, list) or not pts:
        raise CheckError("certificate points: expected a non-empty list of points")
    K = widths[-1]
    if len(pts) * n_in > 10 ** 7:
        raise CheckError(f"certificate points: {len(pts)} points exceed the checker's limit")
    points = [_vector(pt, f"certificate points[{i}]", n_in) for i, pt in enumerate(pts)]
    rows = cert.get("rows")
    if not isinstance(rows, list) or len(rows) < r or any(not _is_int(x) or isinstance(x, bool) for x in rows) \
            or len(set(rows)) != len(rows) or any(not 0 <= x < len(points) * K for x in rows):
        report.reasons.append(f"certificate rows must list at least {r} distinct rows (point * {K} + output) of "
                              f"the {len(points) * K} rows of the Jacobian")
        report.accepted = False
        return report
    work = len(rows) * r * P
    # the rows themselves: a conv2d layer costs taps x output pixels x channels per row (twice: forward, backward)
    row_work = len(rows) * sum(len(l.rows) * len(l.rows[0]) * len(l.sources()[0]) if isinstance(l, _Conv)
                               else 4 * l.tokens * (l.tokens + l.d) * _jac_count(l, False) if isinstance(l, _Attention)
                               else len(l.weight) * len(l.weight[0]) for l in layers)
    if row_work > MAX_JACOBIAN_ROW_WORK:
        report.reasons.append(f"beyond the checker's size limit: {len(rows)} Jacobian rows of this model need "
                              f"{row_work:.3g} multiplications > {MAX_JACOBIAN_ROW_WORK:.3g} "
                              "(symeq.check.MAX_JACOBIAN_ROW_WORK); nothing was verified")
        report.accepted = None
        return report
    if work > MAX_JACOBIAN_WORK:
        report.reasons.append(f"beyond the checker's size limit: {len(rows)} rows, rank {r} and {P} parameters need "
                              f"rows r P = {work:.3g} "
                              f"slot operations > {MAX_JACOBIAN_WORK:.3g} (symeq.check.MAX_JACOBIAN_WORK); nothing "
                              "was verified")
        report.accepted = None
        return report
    offs, c = [], 0
    for l in layers:  # per layer: where its weights start, where its biases start
        offs += [c, c + _jac_count(l, False, T)]
        c += _jac_count(l, bias, T)
    try:
        gens = (_jac_attention_tangents(layers, offs) if T is not None else []) + _jac_tangents(layers, bias, offs)
    except CheckError as e:
        report.reasons.append(str(e))
        report.accepted = False
        return report
    geometry = [l.sources() if isinstance(l, _Conv) else None for l in layers]
    tangent = [[0] * P for _ in gens]
    for t, v in zip(tangent, gens):
        for k, x in v.items():
            t[k] = _jac_mod(x)
    by_point: dict = {}
    for x in rows:
        by_point.setdefault(x // K, []).append(x % K)

    def jacobian_rows(prime):  # one point at a time: the rows are packed as they come
        for n in sorted(by_point):
            yield from _jac_rows(layers, bias, points[n], sorted(by_point[n]), prime, geometry)

    p = JACOBIAN_PRIME
    if any(_jac_pl(l.act) is not None for l in layers):  # every certified point off every bent hyperplane
        for n in sorted(by_point):
            try:
                _jac_rows(layers, bias, points[n], [], p, geometry)
            except _JacKink as e:
                report.reasons.append(f"certificate points[{n}]: {e}")
                report.accepted = False
                return report
    if tangent:
        sparse = [{k: _jac_mod(x) for k, x in v.items()} for v in gens]
        for row in jacobian_rows(p):
            for g, t in enumerate(sparse):
                if sum(row[k] * x for k, x in t.items()) % p:
                    report.reasons.append(f"orbit generator {g + 1} is not in the kernel of the Jacobian rows")
                    report.accepted = False
                    return report
    dim = _jac_rank(tangent, P) if tangent else 0
    if cert.get("orbit_dimension") != dim:
        report.reasons.append(f"certificate orbit_dimension {_short(cert.get('orbit_dimension'))} differs from "
                              f"the recomputed {dim}")
    rank, modulus = None, JACOBIAN_PRIME
    for q in _CHECK_PRIMES:  # fast: one-digit multipliers; the certificate's prime if both fall short
        try:
            rq = _jac_rank_small(jacobian_rows(q), P, q)
        except CheckError:  # q divides a denominator
            continue
        if rq == r:
            rank, modulus = rq, q
            break
    if rank is None:
        rank = _jac_rank(list(jacobian_rows(p)), P)
    if rank != r:
        report.reasons.append(f"the {len(rows)} certified rows of the Jacobian have rank {rank} modulo 2^61 - 1, not {r}")
    elif r != P - dim:
        report.reasons.append(f"rank {r} != #params {P} - dim K.theta {dim}: not locally identifiable")
    if not report.reasons:
        report.checks.append(f"{len(rows)} rows of the Jacobian at {len(points)} rational points recomputed mod "
                             f"{modulus}: rank {r} (a nonzero {r} x {r} minor modulo a prime: rank over Q >= {r})")
        report.checks.append(f"orbit tangent of K's continuous part: {len(gens)} generator(s) in the kernel, "
                             f"dimension {dim}; rank = #params {P} - {dim}: locally identifiable (constant-rank "
                             "theorem; the fibre far from theta is not examined)")
    report.accepted = not report.reasons
    return report



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


def _jac_family_tangents(layers, bias: bool, offs, fam) -> tuple[list[dict] | None, str]:
    """The tangents of the named family, re-derived from the model, or (None, why the condition fails)."""
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
        if not bias and c:
            return None, f"neuron {j + 1} of hidden layer {li} outputs {c} and the model has no bias to take it"
        vecs = []
        for k in range(m):
            v = {wn + k * n + j: Fraction(1)}
            if bias and c:
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
    bias = any(x != 0 for l in layers for x in l.bias)
    widths = [n_in] + [len(l.weight) for l in layers]
    P = sum(len(l.weight) * len(l.weight[0]) + (len(l.weight) if bias else 0) for l in layers)
    for key, want in (("widths", widths), ("bias", bias), ("parameters", P), ("prime", str(JACOBIAN_PRIME))):
        if cert.get(key) != want or isinstance(cert.get(key), bool) != isinstance(want, bool):
            report.reasons.append(f"certificate {key} {_short(cert.get(key))} differs from the model's {want}")
    claim = cert.get("dimension_lower_bound")
    if not _is_int(claim) or isinstance(claim, bool) or claim < 1:
        report.reasons.append(f"dimension_lower_bound {_short(claim)} is not a positive integer")
    if report.reasons:
        report.accepted = False
        return report
    offs, c = [], 0
    for l in layers:
        offs.append(c)
        c += len(l.weight) * len(l.weight[0])
        offs.append(c)
        c += len(l.weight) if bias else 0
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
                              f"> {MAX_FAMILY_ENTRIES:.3g} (symeq.check.MAX_FAMILY_ENTRIES); nothing was verified")
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

if __name__ == "__main__":
    sys.exit(main())
