"""Identifiability of real tanh and logistic-sigmoid networks by the classical theorems.

Two theorems decide identifiability at rational parameters theta without any polynomial
algebra (docs/identifiability.md, "Real activations: Sussmann and Fefferman"):

* **Sussmann 1992** (H. J. Sussmann, *Uniqueness of the weights for minimal feedforward nets with
  a given input-output map*, Neural Networks 5 (1992) 589-593), one hidden layer of tanh units,
  f(x) = W_2 tanh(W_1 x + b_1) + b_2.  theta is *irreducible* when

  - (R1) no hidden unit has all its outgoing weights zero (column j of W_2 is nonzero);
  - (R2) no hidden unit has all its incoming weights zero (row j of W_1 is nonzero);
  - (R3) no two hidden units have (w_j, b_j) = +-(w_k, b_k).

  An irreducible theta is identifiable: every theta' of the same widths with the same function is
  a signed permutation of its hidden units, and these 2^n n! signed permutations give 2^n n!
  distinct points (a trivial stabiliser, by R1-R3).  A reducible theta is *not* identifiable, and
  symeq builds an exact witness: a second parameter theta' with the same function that is not in
  the orbit, proved by the identities of the activation (tanh(-t) = -tanh(t)), never by floats.
  The logistic sigmoid s(t) = (1 + tanh(t/2))/2 is conjugate to tanh by the affine bijection
  (W_1, b_1, W_2, b_2) -> (W_1/2, b_1/2, W_2/2, b_2 + W_2 1/2) of parameters, which keeps R1-R3;
  its orbit is the group of *affine flips* (w_j, b_j, v_j, b_2) -> (-w_j, -b_j, -v_j, b_2 + v_j)
  with permutations, again 2^n n! points.
* **Fefferman 1994** (C. Fefferman, *Reconstructing a neural net from its output*, Rev. Mat.
  Iberoam. 10 (1994) 507-555), tanh at every layer, any depth.  Sufficient conditions, on every
  layer l (widths D_0, ..., D_L):

  - (F1) every bias is nonzero;
  - (F2) the biases of a layer have pairwise distinct absolute values;
  - (F3) every weight is nonzero;
  - (F4) for two weights w_jk, w_j'k leaving the same node k (a column of W_l), the reduced ratio
    P/Q = w_jk / w_j'k has Q > 100 D and |P| > 100 D, D = max(D_{l-1}, D_l).

  symeq's last layer is affine; tanh is injective, so f_theta = f_theta' iff tanh o f_theta =
  tanh o f_theta', and tanh o f is a Fefferman net whose last layer is (W_L, b_L): the conditions
  are checked on *every* layer, the output layer included.  Fefferman's theorem compares two nets
  that both satisfy the conditions; "identifiable" therefore means: every theta' satisfying
  (F1)-(F4) with the same function is a signed permutation of the hidden nodes of theta (orbit
  prod_l 2^{D_l} D_l! over the hidden layers).  A sigmoid net is mapped to its tanh form first
  (the parameter bijection written out in :func:`sigmoid_to_tanh`).  When a condition fails, a
  *reducible* hidden layer of a tanh net (R1-R3 on its rows, biases and the next layer's columns)
  still gives an exact witness, as for Sussmann: "not-identifiable".  Otherwise a failed condition
  decides nothing: the status is "undetermined", naming it.

Every other activation (GELU, SiLU, softplus, ELU, erf, leaky ReLU, ReLU, polynomials) is "not
applicable": no theorem of this module covers it.

Examples
--------
>>> from flint import fmpq
>>> W1 = [[fmpq(1), fmpq(2)], [fmpq(-1), fmpq(3)]]
>>> c = sussmann_conditions(W1, [fmpq(1), fmpq(0)], [[fmpq(1), fmpq(2)]])
>>> [(x["name"], x["holds"]) for x in c]
[('R1', True), ('R2', True), ('R3', True)]
>>> c = sussmann_conditions(W1 + [[fmpq(-1), fmpq(-2)]], [fmpq(1), fmpq(0), fmpq(-1)],
...                         [[fmpq(1), fmpq(2), fmpq(1)]])
>>> c[2]["holds"], c[2]["failing"]
(False, [[0, 2, -1]])
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from flint import fmpq

from ..budget import Deadline
from ..digest import classical_digest
from ..errors import BudgetExceeded
from ..layers.base import declared_biases
from ..layers.registry import all_support
from ..numbers import mat_rows

#: symeq's own copy of the classical tables (the checker, symeq_check.identifiability.classical, keeps its
#: own; tests/checker/test_checker_package.py holds them equal): the activations with a theorem and the group of theta's
#: orbit; the conditions' statements, in certificate order; failing entries listed per condition
GROUPS = {"tanh": "signed permutations", "sigmoid": "affine flips"}
STATEMENTS = {
    "R1": "no hidden unit has all its outgoing weights zero",
    "R2": "no hidden unit has all its incoming weights zero",
    "R3": "no two hidden units have (w, b) = +-(w', b')",
    "F1": "every bias is nonzero",
    "F2": "the biases of a layer have pairwise distinct absolute values",
    "F3": "every weight is nonzero",
    "F4": "two weights leaving the same node: reduced ratio P/Q with Q > 100 D and |P| > 100 D, "
          "D = max(D_{l-1}, D_l)",
}
MAX_LISTED = 20

__all__ = ["FORMAT", "ClassicalDecision", "classical_identifiability", "sussmann_conditions",
           "reducibility_witness", "fefferman_conditions", "sigmoid_to_tanh", "same_function",
           "in_orbit", "apply_changes", "THEOREM_ACTIVATIONS", "MAX_PARAMETERS", "MAX_RATIO_PAIRS"]

#: certificate format (shared with the tensor method), checked by :mod:`symeq_check`
FORMAT = "symeq-identifiability/1"
#: activations covered by a theorem here (``Activation.to_spec()["type"]``)
THEOREM_ACTIVATIONS = ("tanh", "sigmoid")
#: size guards, checked before any work starts
MAX_PARAMETERS = 20_000_000
#: pairs of weights in a column examined by Fefferman's ratio condition (F4)
MAX_RATIO_PAIRS = 5_000_000
#: an orbit size is written out in full up to this many decimal digits
MAX_ORBIT_DIGITS = 1000


@dataclass
class ClassicalDecision:
    """The verdict of Sussmann's or Fefferman's theorem at theta.

    Same interface as :class:`symeq.fibre.tensor.TensorDecision`.

    Attributes
    ----------
    status : "identifiable", "not-identifiable", "undetermined" or "not-applicable"
    reason : one sentence
    condition : which condition decided
    method : "sussmann", "fefferman" or "classical" (not applicable before a theorem was chosen)
    orbit_size : points of the orbit K . theta (identifiable), else None
    conditions : each checked condition: name, statement, holds, failing entries (a list)
    witness : the failed condition and theta' (not-identifiable)
    certificate : a ``symeq-identifiability/1`` dict (identifiable / not-identifiable), else None
    scope : the parameters the verdict is about
    """

    status: str
    reason: str
    condition: str
    method: str = "classical"
    orbit_size: int | None = None
    orbit_dimension: int = 0
    fibre_points: int | None = None
    fibre_dimension: int | None = None
    seconds: float = 0.0
    certificate: dict | None = field(default=None, repr=False)
    witness: dict | None = None
    conditions: list = field(default_factory=list)
    scope: str = ""

    def to_json(self) -> dict:
        """A JSON-ready dict (an orbit size of more than 1000 digits as its formula)."""
        return {"method": self.method, "theorem": self.method, "engine": self.method, "field": "R", "exact": True,
                "status": self.status, "reason": self.reason, "condition": self.condition,
                "orbit_size": _orbit_json(self.orbit_size), "orbit_dimension": self.orbit_dimension,
                "fibre_points": _orbit_json(self.fibre_points), "dimension": self.fibre_dimension,
                "over": "R", "scope": self.scope, "seconds": round(self.seconds, 4),
                "conditions": self.conditions, "witness": self.witness}


def _orbit_json(n):
    if n is None or n.bit_length() < 3.3 * MAX_ORBIT_DIGITS:
        return n
    return f"about 2^{n.bit_length() - 1}"


def _q(x) -> str:
    return str(fmpq(x))


# ----------------------------------------------------------------------------- sign classes

def _canon(vec: tuple) -> tuple[tuple, int]:
    """(the sign-normalised vector, the sign s with vec = s * normalised): first nonzero entry > 0."""
    for x in vec:
        if x != 0:
            return (vec, 1) if x > 0 else (tuple(-y for y in vec), -1)
    return vec, 1


def sussmann_conditions(W1, b1, W2, deadline: Deadline | None = None) -> list[dict]:
    """Sussmann's irreducibility conditions R1-R3 on exact rows ``W1`` (n x n0), ``b1``, ``W2`` (m x n).

    Each condition is ``{"name", "statement", "holds", "failing", "count"}``: R1 and R2 list the
    failing units j (at most ``MAX_LISTED``), R3 the pairs ``[j, k, s]`` with
    (w_k, b_k) = s (w_j, b_j), j the first unit of its class.
    """
    n = len(W1)
    r1 = [j for j in range(n) if all(W2[i][j] == 0 for i in range(len(W2)))]
    r2 = [j for j in range(n) if all(x == 0 for x in W1[j])]
    first: dict = {}
    r3 = []
    for j in range(n):
        if deadline is not None and j % 1024 == 0:
            deadline.check("checking Sussmann's condition R3")
        key, s = _canon(tuple(W1[j]) + (b1[j],))
        if key in first:
            j0, s0 = first[key]
            r3.append([j0, j, s * s0])
        else:
            first[key] = (j, s)
    return [_cond("R1", r1),
            _cond("R2", r2),
            _cond("R3", r3)]


class _FirstFew:
    """A failing list kept as its count and its first ``MAX_LISTED`` entries (bounded memory)."""

    def __init__(self):
        self.count, self.first = 0, []

    def append(self, x) -> None:
        self.count += 1
        if len(self.first) < MAX_LISTED:
            self.first.append(x)

    def __iadd__(self, items):
        for x in items:
            self.append(x)
        return self


def _cond(name, failing) -> dict:
    if isinstance(failing, list):
        failing, items = _FirstFew(), failing
        failing += items
    return {"name": name, "statement": STATEMENTS[name], "holds": failing.count == 0, "count": failing.count,
            "failing": failing.first}


# ----------------------------------------------------------------------------- same function, orbit

def _formal(W1, b1, W2, b2, act: str, terms=()) -> dict:
    """f = b2 + sum_j v_j act(w_j x + b_j) (+ sum of ``terms`` c act(a)) as a formal sum.

    Returns {key: coefficient vector} with key () for the rational part, ("u", canonical (w, b))
    for a nonconstant unit and ("c", a) for a constant act(a), a > 0; uses act(-t) = -act(t)
    (tanh) or act(-t) = 1 - act(t) (sigmoid), tanh(0) = 0 and sigmoid(0) = 1/2.  Two parameters
    with equal formal sums have equal functions.
    """
    m = len(b2)
    out: dict = {}

    def add(key, vec, scale=1):
        acc = out.setdefault(key, [fmpq(0)] * m)
        for i in range(m):
            acc[i] += scale * vec[i]

    add((), b2)
    units = [(tuple(W1[j]), b1[j], [W2[i][j] for i in range(m)]) for j in range(len(W1))]
    units += [(None, a, c) for c, a in terms]
    for w, b, v in units:
        if w is None or all(x == 0 for x in w):  # a constant act(b)
            if b == 0:
                if act == "sigmoid":
                    add((), v, fmpq(1, 2))
                continue
            key, s = ("c", b if b > 0 else -b), (1 if b > 0 else -1)
        else:
            canon, s = _canon(w + (b,))
            key = ("u", canon)
        if s == 1:
            add(key, v)
        elif act == "tanh":
            add(key, v, -1)
        else:  # sigmoid(-t) = 1 - sigmoid(t)
            add(key, v, -1)
            add((), v)
    return {k: tuple(c) for k, c in out.items() if k == () or any(x != 0 for x in c)}


def same_function(theta, theta2, act: str, layer: int = 1, terms=()) -> bool:
    """True when ``theta2`` has theta's function by the identities of ``act``.

    ``theta`` and ``theta2`` are lists of layers ``(W rows, b)``; they may differ only in layers
    ``layer`` (hidden) and ``layer + 1``, and ``terms`` are extra constants c * act(a) added to the
    bias of layer ``layer + 1`` in theta2 (pairs (c, a)).  Then the pre-activations of layer
    ``layer + 1`` are equal formal sums of act of layer ``layer``'s pre-activations, so everything
    after them, f included, is equal.
    """
    for i, (a, b) in enumerate(zip(theta, theta2), 1):
        if i not in (layer, layer + 1) and (a[0] != b[0] or a[1] != b[1]):
            return False
    (W, b), (V, c) = theta[layer - 1], theta[layer]
    (W2, b2), (V2, c2) = theta2[layer - 1], theta2[layer]
    return _formal(W, b, V, c, act) == _formal(W2, b2, V2, c2, act, terms)


def _unit_classes(W1, b1, W2) -> dict:
    """The multiset of the units' (w, b, v) up to a sign of the whole triple (kept by K's flips)."""
    m = len(W2)
    out: dict = {}
    for j in range(len(W1)):
        key = _canon(tuple(W1[j]) + (b1[j],) + tuple(W2[i][j] for i in range(m)))[0]
        out[key] = out.get(key, 0) + 1
    return out


def _abs_multiset(values) -> dict:
    out: dict = {}
    for x in values:
        a = x if x >= 0 else -x
        out[a] = out.get(a, 0) + 1
    return out


def _invariants(theta, act: str, skip_bias=()) -> list:
    """Multisets that every element of K keeps: per layer the absolute values of the weights, for
    tanh also of the biases (layers in ``skip_bias`` left out), and with one hidden layer the
    units' (w, b, v) up to sign."""
    out = []
    for i, (W, b) in enumerate(theta, 1):
        out.append(_abs_multiset(x for row in W for x in row))
        out.append(_abs_multiset(b) if act == "tanh" and i not in skip_bias else None)
    if len(theta) == 2:
        out.append(_unit_classes(theta[0][0], theta[0][1], theta[1][0]))
    return out


def in_orbit(theta, theta2, act: str = "tanh", skip_bias=()) -> bool:
    """False when ``theta2`` is certainly outside theta's orbit: one of the K-invariant multisets of
    :func:`_invariants` differs.  True means only "not excluded by this test"."""
    return _invariants(theta, act, skip_bias) == _invariants(theta2, act, skip_bias)


# ----------------------------------------------------------------------------- witnesses

def reducibility_witness(theta, act: str, layer: int, conditions: list[dict], biases=None) -> dict | None:
    """theta' with theta's function outside its orbit, from the first failed condition R1-R3 of the
    hidden layer ``layer`` (w_j the rows of W_layer, v_j the columns of W_{layer+1}), or None.

    ``biases`` (one bool per layer, default: every layer has biases) is the declared parameter space:
    theta' changes no bias of a layer without biases.  Then R1 changes an incoming weight instead of
    the bias, R2 needs the next layer's biases (or a constant act(b_j) = 0: tanh at b_j = 0, whose
    outgoing weights are free), and the sigmoid's +-clones of R3 need them too; else None.

    * R1 (v_j = 0): b'_j = b_j + 1 (+ 2 when b_j = -1/2): unit j contributes 0 anyway.
    * R2 (w_j = 0, v_j != 0): v'_j = 0 and b'_{layer+1} = b_{layer+1} + v_j act(b_j), the constant
      moved into the next bias (a real number, written as a term c act(a)).
    * R3 ((w_k, b_k) = s (w_j, b_j), R1 and R2 holding): output weight t moved from k to j:
      v'_j = v_j + s t, v'_k = v_k - t (and b'_{layer+1} = b_{layer+1} + t for the sigmoid when
      s = -1); t = v_k (all of it) unless the orbit test needs another t.

    Returns ``{"condition", "layer", "units", "sign", "changes", "bias_terms", "text"}``;
    ``changes`` lists ``{"layer", "param", "index", "value"}`` (layers numbered from 1).
    """
    failed = {c["name"]: c for c in conditions if not c["holds"]}
    (W, b), (V, c) = theta[layer - 1], theta[layer]
    m, nxt = len(V), layer + 1
    own, next_bias = (True, True) if biases is None else (biases[layer - 1], biases[layer])
    changes, terms, sign = [], [], None
    if "R1" in failed and own:
        j = failed["R1"]["failing"][0]
        t = fmpq(2) if b[j] == fmpq(-1, 2) else fmpq(1)
        changes.append({"layer": layer, "param": "bias", "index": [j], "value": _q(b[j] + t)})
        cond, units = "R1", [j]
        text = (f"unit {j + 1} of hidden layer {layer} has no outgoing weight: changing its bias to {b[j] + t} "
                "changes nothing in f")
    elif "R1" in failed:  # no bias in this layer: an incoming weight moves instead
        j = failed["R1"]["failing"][0]
        for t in (fmpq(1), fmpq(2), fmpq(3)):
            w = W[j][0] + t
            changes = [{"layer": layer, "param": "weight", "index": [j, 0], "value": _q(w)}]
            wit = {"condition": "R1", "layer": layer, "units": [j], "sign": None, "changes": changes,
                   "bias_terms": []}
            if not in_orbit(theta, apply_changes(theta, wit)[0], act):
                break
        else:
            return None
        cond, units = "R1", [j]
        text = (f"unit {j + 1} of hidden layer {layer} has no outgoing weight: changing its incoming weight from "
                f"input {1} to {w} changes nothing in f (the layer has no biases)")
    elif "R2" in failed:
        j = failed["R2"]["failing"][0]
        v = [V[i][j] for i in range(m)]
        if not next_bias and not (act == "tanh" and b[j] == 0):
            return None  # the constant v_j act(b_j) has no bias to move into in the declared space
        if next_bias:
            changes += [{"layer": nxt, "param": "weight", "index": [i, j], "value": "0"}
                        for i in range(m) if v[i] != 0]
            terms.append({"layer": nxt, "coefficient": [_q(x) for x in v], "at": _q(b[j])})
            text = (f"unit {j + 1} of hidden layer {layer} has no incoming weight: it adds the constant "
                    f"v_{j + 1} {act}({b[j]}); moving it into the bias of layer {nxt} and setting v_{j + 1}' = 0 "
                    "keeps f")
        else:  # tanh(0) = 0: the unit adds nothing, its outgoing weights are free
            i = next(i for i in range(m) if v[i] != 0)
            changes.append({"layer": nxt, "param": "weight", "index": [i, j], "value": _q(2 * v[i])})
            text = (f"unit {j + 1} of hidden layer {layer} has no incoming weight and bias 0: tanh(0) = 0, so "
                    f"doubling its outgoing weight to output {i + 1} keeps f")
        cond, units = "R2", [j]
    elif "R3" in failed:
        j, k, sign = failed["R3"]["failing"][0]
        if act == "sigmoid" and sign == -1 and not next_bias:
            return None  # sigmoid(-t) = 1 - sigmoid(t): the move shifts the next bias, which is not declared
        vk = [V[i][k] for i in range(m)]
        e0 = [fmpq(1)] + [fmpq(0)] * (m - 1)
        for t in (vk, [2 * x for x in vk], [x / 2 for x in vk], [x + y for x, y in zip(vk, e0)],
                  [x - y for x, y in zip(vk, e0)]):
            changes = []
            for i in range(m):
                if t[i] != 0:
                    changes.append({"layer": nxt, "param": "weight", "index": [i, j], "value": _q(V[i][j] + sign * t[i])})
                    changes.append({"layer": nxt, "param": "weight", "index": [i, k], "value": _q(V[i][k] - t[i])})
                    if act == "sigmoid" and sign == -1:
                        changes.append({"layer": nxt, "param": "bias", "index": [i], "value": _q(c[i] + t[i])})
            wit = {"condition": "R3", "layer": layer, "units": [j, k], "sign": sign, "changes": changes,
                   "bias_terms": []}
            if not in_orbit(theta, apply_changes(theta, wit)[0], act):
                break
        else:
            return None
        cond, units = "R3", [j, k]
        text = (f"units {j + 1} and {k + 1} of hidden layer {layer} are {'clones' if sign == 1 else '+-clones'} "
                f"((w_{k + 1}, b_{k + 1}) = {'' if sign == 1 else '-'}(w_{j + 1}, b_{j + 1})): moving output weight "
                f"of {k + 1} to {j + 1} keeps f")
    else:
        return None
    return {"condition": cond, "layer": layer, "units": units, "sign": sign, "changes": changes,
            "bias_terms": terms, "text": text}


def apply_changes(theta, witness: dict):
    """(theta', terms) from theta (a list of layers (W rows, b)) and a witness of
    :func:`reducibility_witness`; ``terms`` are the pairs (c, a) added to the next layer's bias."""
    layers = [([list(r) for r in W], list(b)) for W, b in theta]
    for ch in witness["changes"]:
        W, b = layers[ch["layer"] - 1]
        idx = ch["index"]
        if ch["param"] == "bias":
            b[idx[0]] = fmpq(ch["value"])
        else:
            W[idx[0]][idx[1]] = fmpq(ch["value"])
    terms = [([fmpq(x) for x in t["coefficient"]], fmpq(t["at"])) for t in witness["bias_terms"]]
    return layers, terms


def _proven_witness(theta, act: str, layer: int, wit: dict) -> bool:
    theta2, terms = apply_changes(theta, wit)
    skip = (layer + 1,) if terms else ()
    return same_function(theta, theta2, act, layer, terms) and not in_orbit(theta, theta2, act, skip)


# ----------------------------------------------------------------------------- Fefferman

def sigmoid_to_tanh(layers):
    """The tanh form of a logistic-sigmoid net: [(W, b)] -> [(W~, b~)] with the same function.

    With s(t) = (1 + tanh(t/2))/2 and y_l = z_l / 2 for the hidden pre-activations z_l:
    W~_1 = W_1/2, b~_1 = b_1/2; W~_l = W_l/4, b~_l = (b_l + W_l 1/2)/2 for 1 < l < L;
    W~_L = W_L/2, b~_L = b_L + W_L 1/2.  An affine bijection of the parameters (its inverse is read
    off), so theta is identifiable iff its tanh form is.

    >>> from flint import fmpq
    >>> sigmoid_to_tanh([([[fmpq(2)]], [fmpq(4)]), ([[fmpq(6)]], [fmpq(0)])])
    [([[1]], [2]), ([[3]], [3])]
    """
    L = len(layers)
    out = []
    for l, (W, b) in enumerate(layers, 1):
        half_sums = [sum(row, fmpq(0)) / 2 for row in W]
        if l == 1:
            out.append(([[x / 2 for x in row] for row in W], [x / 2 for x in b]))
        elif l < L:
            out.append(([[x / 4 for x in row] for row in W], [(x + h) / 2 for x, h in zip(b, half_sums)]))
        else:
            out.append(([[x / 2 for x in row] for row in W], [x + h for x, h in zip(b, half_sums)]))
    if L == 1:
        raise ValueError("a network with a hidden layer is needed")
    return out


def fefferman_conditions(layers, input_dim: int, deadline: Deadline | None = None) -> list[dict]:
    """Fefferman's conditions F1-F4 on the tanh layers [(W_l rows, b_l)], l = 1 .. L.

    Failing entries: F1 ``[l, j]``, F2 ``[l, j, j']`` (|b_j| = |b_j'|), F3 ``[l, j, k]``, F4
    ``[l, k, j, j', P, Q]`` (w_jk / w_j'k = P/Q reduced, Q <= 100 D or |P| <= 100 D); layers
    numbered from 1.
    """
    widths = [input_dim] + [len(W) for W, _ in layers]
    f1, f2, f3, f4 = _FirstFew(), _FirstFew(), _FirstFew(), _FirstFew()
    for l, (W, b) in enumerate(layers, 1):
        D = max(widths[l - 1], widths[l])
        f1 += ([l, j] for j, x in enumerate(b) if x == 0)
        seen: dict = {}
        for j, x in enumerate(b):
            a = x if x >= 0 else -x
            if a in seen:
                f2.append([l, seen[a], j])
            else:
                seen[a] = j
        f3 += ([l, j, k] for j, row in enumerate(W) for k, x in enumerate(row) if x == 0)
        bound = 100 * D
        for k in range(widths[l - 1]):
            if deadline is not None:
                deadline.check("checking Fefferman's ratio condition")
            col = [W[j][k] for j in range(len(W))]
            for j in range(len(col)):
                if col[j] == 0:
                    continue
                for j2 in range(j + 1, len(col)):
                    if col[j2] == 0:
                        continue
                    r = col[j] / col[j2]
                    P, Q = int(r.p), int(r.q)
                    if Q <= bound or abs(P) <= bound:
                        f4.append([l, k, j, j2, P, Q])
    return [_cond("F1", f1),
            _cond("F2", f2),
            _cond("F3", f3),
            _cond("F4", f4)]


# ----------------------------------------------------------------------------- the decision

def _activation_name(layer) -> str | None:
    act = layer.activation
    if act is None:
        return None
    spec = act.to_spec()
    return spec.get("type") if isinstance(spec, dict) else None


def _orbit_text(n: int | None, widths, flips=None) -> str:
    """``2^n n!`` per hidden layer; where ``flips`` gives a count (a sigmoid layer whose next layer has no
    biases: the affine flips that keep the next bias 0), ``Z n!`` (``n!`` when Z = 1)."""
    flips = flips or [None] * len(widths)
    text = " * ".join(f"2^{w} {w}!" if z is None else f"{w}!" if z == 1 else f"{z} {w}!"
                      for w, z in zip(widths, flips))
    return text + (f" = {n}" if n is not None and n.bit_length() < 100 else "")


#: the sets of units whose outgoing columns sum to zero are counted up to this many distinct partial sums
MAX_FLIP_SUMS = 1 << 20


def zero_sum_flips(columns) -> int | None:
    """The number of sets S of units (the empty one included) whose outgoing columns sum to zero: the
    affine flips of a sigmoid layer that keep a next bias which the model does not have at 0 (the flip
    of unit j adds v_j to it).  None past :data:`MAX_FLIP_SUMS` distinct partial sums.

    >>> from flint import fmpq
    >>> zero_sum_flips([[fmpq(1)], [fmpq(2)], [fmpq(3)]]), zero_sum_flips([[fmpq(1)], [fmpq(-1)], [fmpq(2)]])
    (1, 2)
    >>> zero_sum_flips([[fmpq(1), fmpq(0)], [fmpq(0), fmpq(1)]])
    1
    """
    sums = {tuple(fmpq(0) for _ in (columns[0] if columns else ())): 1}
    for col in columns:
        nxt = dict(sums)
        for key, count in sums.items():
            k2 = tuple(a + b for a, b in zip(key, col))
            nxt[k2] = nxt.get(k2, 0) + count
        sums = nxt
        if len(sums) > MAX_FLIP_SUMS:
            return None
    return sums.get(tuple(fmpq(0) for _ in (columns[0] if columns else ())), 0)


def declared_orbit(rows, act: str, biases) -> tuple[int | None, list]:
    """(size, per-layer flip counts) of theta's orbit in the declared parameter space: every permutation,
    and the sign flips of tanh units (2^n) or the affine flips of sigmoid units -- these add the unit's
    outgoing column to the next bias, so without next biases only the sets of units whose columns sum to
    zero (:func:`zero_sum_flips`).  The stabiliser is trivial under R1-R3 / F1-F4, so the points are
    distinct.  Size None when a count is beyond :data:`MAX_FLIP_SUMS`."""
    size, flips = 1, []
    for l in range(1, len(rows)):
        n = len(rows[l - 1][0])
        if act == "tanh" or biases[l]:
            flips.append(None)
            size *= 2 ** n * math.factorial(n)
            continue
        V = rows[l][0]
        z = zero_sum_flips([[V[i][j] for i in range(len(V))] for j in range(n)])
        flips.append(z)
        size = None if z is None or size is None else size * z * math.factorial(n)
    return size, flips


def classical_identifiability(model, *, timeout: float | None = None, certificate: bool = True) -> ClassicalDecision:
    """Decide identifiability of ``model``'s theta by Sussmann 1992 (one hidden layer) or
    Fefferman 1994 (deeper), for tanh and logistic-sigmoid networks.

    Parameters
    ----------
    model : :class:`~symeq.models.Model` of dense layers, every hidden layer with the same
        activation ("tanh" or "sigmoid"; anything else is "not-applicable")
    timeout : seconds; past it the status is "undetermined"
    certificate : build the ``symeq-identifiability/1`` certificate

    Returns
    -------
    ClassicalDecision
        Sussmann: "identifiable" (orbit 2^n n!) or "not-identifiable" (an exact witness).
        Fefferman: "identifiable" (within the nets satisfying its conditions), "not-identifiable"
        (tanh, a reducible hidden layer: an exact witness) or "undetermined" (a sufficient
        condition fails and no witness is known: nothing is decided).

    Examples
    --------
    >>> from symeq.activations import real
    >>> from symeq.models import Model, DenseLayer
    >>> m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], real("tanh")),
    ...               DenseLayer([[2, -1]], [1], None)])
    >>> d = classical_identifiability(m)
    >>> d.status, d.method, d.orbit_size
    ('identifiable', 'sussmann', 8)
    >>> m = Model(2, [DenseLayer([[1, 2], [-1, -2]], [1, -1], real("tanh")),   # a +-clone pair
    ...               DenseLayer([[2, -1]], [1], None)])
    >>> d = classical_identifiability(m)
    >>> d.status, d.witness["condition"], d.witness["changes"]
    ('not-identifiable', 'R3', [{'layer': 2, 'param': 'weight', 'index': [0, 0], 'value': '3'}, {'layer': 2, 'param': 'weight', 'index': [0, 1], 'value': '0'}])
    """
    t0 = time.perf_counter()
    deadline = Deadline(timeout)

    def done(status, reason, cond, method="classical", **kw):
        return ClassicalDecision(status, reason, cond, method=method, seconds=time.perf_counter() - t0, **kw)

    layers = list(model.layers)
    if not all_support(layers, "fibre-ideal"):  # plain dense layers (not token-wise, not conv)
        return done("not-applicable", "Sussmann's and Fefferman's theorems are about dense layers",
                    "dense layers")
    if len(layers) < 2:
        return done("not-applicable", "no hidden layer", "a hidden layer")
    names = [_activation_name(l) for l in layers[:-1]]
    if layers[-1].activation is not None:
        return done("not-applicable", "the last layer must be affine", "affine output")
    if len(set(names)) != 1:
        return done("not-applicable", f"hidden activations {names} differ: the theorems need one activation "
                    "(tanh, or the logistic sigmoid) at every hidden layer", "one activation")
    act = names[0]
    if act not in THEOREM_ACTIVATIONS:
        return done("not-applicable", f"no identifiability theorem for the activation {act!r} is implemented "
                    "(Sussmann 1992 and Fefferman 1994 are about tanh, and the logistic sigmoid follows from "
                    "s(t) = (1 + tanh(t/2))/2; GELU, SiLU, softplus, ELU, erf, leaky ReLU and polynomials are not "
                    "covered here)", "activation with a theorem")
    n_params = sum(l.in_dim * l.out_dim + l.out_dim for l in layers)
    if n_params > MAX_PARAMETERS:
        return done("undetermined", f"{n_params} parameters: beyond the size guard ({MAX_PARAMETERS})", "size guard")
    widths = [model.input_dim] + [l.out_dim for l in layers]
    if len(layers) > 2:
        pairs = sum(widths[l - 1] * widths[l] * (widths[l] - 1) // 2 for l in range(1, len(widths)))
        if pairs > MAX_RATIO_PAIRS:
            return done("undetermined", f"Fefferman's ratio condition needs {pairs} pairs of weights: beyond the "
                        f"size guard ({MAX_RATIO_PAIRS})", "size guard", method="fefferman")
    rows = [(mat_rows(l.weight), [fmpq(x) for x in l.bias]) for l in layers]
    biases = declared_biases(model)  # a layer with "bias": null has no bias parameters
    try:
        if len(layers) == 2:
            return _sussmann(model, rows, act, widths, deadline, done, certificate, biases)
        return _fefferman(model, rows, act, widths, deadline, done, certificate, biases)
    except BudgetExceeded as e:
        return done("undetermined", f"budget exceeded: {e}", "budget",
                    method="sussmann" if len(layers) == 2 else "fefferman")


def _header(model, method, act, widths, verdict) -> dict:
    from ..io import layers_to_json

    return {"format": FORMAT, "method": method, "verdict": verdict, "activation": act, "widths": widths,
            "layers_sha256": classical_digest(layers_to_json(model), model.input_dim)}


def _orbit_fields(size: int, hidden, flips=None) -> dict:
    return {"orbit_size": str(size) if size.bit_length() < 3.3 * MAX_ORBIT_DIGITS else None,
            "orbit_formula": _orbit_text(None, hidden, flips)}


def _scope(widths, biases) -> str:
    if all(biases):
        return f"every real parameter of widths {widths}, biases included (also where theta's biases are zero)"
    if not any(biases):
        return f"every real parameter of widths {widths} without biases (the declared parameter space)"
    return (f"every real parameter of widths {widths} in the declared parameter space: biases in layer"
            f"{'s' if sum(biases) > 1 else ''} {', '.join(str(l) for l, b in enumerate(biases, 1) if b)} only")


def _sussmann(model, rows, act, widths, deadline, done, want_cert, biases=None) -> ClassicalDecision:
    (W1, b1), (W2, b2) = rows
    n = len(W1)
    biases = (True,) * len(rows) if biases is None else tuple(biases)
    conds = sussmann_conditions(W1, b1, W2, deadline)
    scope = _scope(widths, biases)
    if all(c["holds"] for c in conds):
        # the fibre among all parameters is the orbit (Sussmann); in the declared space it is the orbit's
        # points there: a sigmoid flip moves the output bias, so without one only zero-sum sets of flips
        orbit, flips = declared_orbit(rows, act, biases)
        restricted = flips != [None]
        group = GROUPS[act] if not restricted else "permutations and the affine flips that keep the output bias 0"
        if orbit is None:
            return done("undetermined", f"irreducible (R1-R3 hold), so by Sussmann 1992 the fibre is the orbit, but "
                        f"counting the affine flips that keep the missing output bias at 0 exceeds {MAX_FLIP_SUMS} "
                        "partial sums", "size guard", method="sussmann", conditions=conds, scope=scope)
        cert = None
        if want_cert:
            cert = dict(_header(model, "sussmann", act, widths, "identifiable"), conditions=conds,
                        group=GROUPS[act], **_orbit_fields(orbit, [n], flips))
        return done("identifiable", f"irreducible (R1-R3 hold): by Sussmann 1992 every parameter with the same "
                    f"function is one of the {group} of theta's {n} hidden units; orbit of "
                    f"{_orbit_text(orbit, [n], flips)} points"
                    + (" (the output layer has no bias: an affine flip would move it)" if restricted else ""),
                    "Sussmann: irreducible", method="sussmann", orbit_size=orbit, fibre_points=orbit,
                    fibre_dimension=0, conditions=conds, certificate=cert, scope=scope)
    wit = reducibility_witness(rows, act, 1, conds, biases)
    failed = [c["name"] for c in conds if not c["holds"]]
    if wit is None and not all(biases):
        # Sussmann's reducibility moves a constant or a sigmoid flip into a bias the model does not have
        return done("undetermined", f"reducible ({', '.join(failed)} fail{'s' if len(failed) == 1 else ''}), but "
                    "the witness would change a bias the model does not have (\"bias\": null): in the declared "
                    "parameter space Sussmann's theorem decides nothing here", f"Sussmann: {failed[0]} fails",
                    method="sussmann", conditions=conds, scope=scope)
    # the witness is proved by the identities of the activation; a failure here is a bug in symeq
    if wit is None or not _proven_witness(rows, act, 1, wit):
        raise AssertionError(f"no proven Sussmann witness for {failed}")
    cert = None
    if want_cert:
        cert = dict(_header(model, "sussmann", act, widths, "not-identifiable"), conditions=conds,
                    group=GROUPS[act], witness={k: v for k, v in wit.items() if k != "text"})
    return done("not-identifiable", f"reducible ({', '.join(failed)} fail{'s' if len(failed) == 1 else ''}): "
                + wit["text"] + "; theta' is outside the orbit (a multiset that every element of K keeps differs)",
                f"Sussmann: {wit['condition']} fails", method="sussmann", conditions=conds, witness=wit,
                certificate=cert, scope=scope)


def _fefferman(model, rows, act, widths, deadline, done, want_cert, biases=None) -> ClassicalDecision:
    tanh_rows = sigmoid_to_tanh(rows) if act == "sigmoid" else rows
    conds = fefferman_conditions(tanh_rows, widths[0], deadline)
    form = "" if act == "tanh" else " (on the tanh form of the sigmoid net)"
    scope = (f"the parameters of any widths satisfying Fefferman's conditions F1-F4{form}, every layer (the "
             "output layer as tanh of it)")
    failed = [c["name"] for c in conds if not c["holds"]]
    biases = (True,) * len(rows) if biases is None else tuple(biases)
    if failed and act == "tanh":  # a reducible hidden layer gives an exact witness, as for Sussmann
        for layer in range(1, len(rows)):
            deadline.check("looking for a reducible hidden layer")
            red = sussmann_conditions(rows[layer - 1][0], rows[layer - 1][1], rows[layer][0], deadline)
            wit = reducibility_witness(rows, act, layer, red, biases) if not all(c["holds"] for c in red) else None
            if wit is None:
                continue
            if not _proven_witness(rows, act, layer, wit):  # pragma: no cover - a bug in symeq
                raise AssertionError(f"reducibility witness at hidden layer {layer} is not proven")
            cert = None
            if want_cert:
                cert = dict(_header(model, "fefferman", act, widths, "not-identifiable"), conditions=conds,
                            group=GROUPS[act], witness={k: v for k, v in wit.items() if k != "text"})
            return done("not-identifiable", f"hidden layer {layer} is reducible ({wit['condition']} fails there; "
                        f"Fefferman's {', '.join(failed)} fail too): " + wit["text"] + "; theta' is outside the orbit "
                        "(a multiset that every element of K keeps differs)",
                        f"reducible hidden layer {layer}: {wit['condition']} fails", method="fefferman",
                        conditions=conds + [dict(c, name=f"{c['name']}@{layer}") for c in red], witness=wit,
                        certificate=cert, scope=_scope(widths, biases))
    if failed:
        first = next(c for c in conds if not c["holds"])
        return done("undetermined", f"Fefferman's sufficient condition{'s' if len(failed) > 1 else ''} "
                    f"{', '.join(failed)} fail{'' if len(failed) > 1 else 's'}{form} ({first['count']} failing "
                    f"entr{'y' if first['count'] == 1 else 'ies'} of {first['name']}, first {first['failing'][0]}): "
                    "this decides nothing", f"Fefferman: {', '.join(failed)} fail", method="fefferman",
                    conditions=conds, scope=scope)
    hidden = widths[1:-1]
    orbit, flips = declared_orbit(rows, act, biases)
    restricted = any(z is not None for z in flips)
    if orbit is None:
        return done("undetermined", f"F1-F4 hold on every layer{form}, but counting the affine flips that keep the "
                    f"missing biases at 0 exceeds {MAX_FLIP_SUMS} partial sums", "size guard", method="fefferman",
                    conditions=conds, scope=scope)
    cert = None
    if want_cert:
        cert = dict(_header(model, "fefferman", act, widths, "identifiable"), conditions=conds,
                    group=GROUPS[act], **_orbit_fields(orbit, hidden, flips))
    return done("identifiable", f"F1-F4 hold on every layer{form}: by Fefferman 1994 every net satisfying them "
                f"with the same function has widths {widths} and is one of the {GROUPS[act]} of theta's hidden "
                f"nodes; orbit of {_orbit_text(orbit, hidden, flips)} points"
                + (" in the declared parameter space (an affine flip moves the next layer's bias, and some layers "
                   "have none)" if restricted else ""), "Fefferman: F1-F4 hold", method="fefferman",
                orbit_size=orbit, fibre_points=None, conditions=conds, certificate=cert, scope=scope)
