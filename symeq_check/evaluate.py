"""Exact evaluation of a model and "the same function": f(x) at rational points; two parameter vectors
compared on a lattice of points beyond the degree (polynomial and ReLU networks) or by canonical forms
(real activations, convolutions), which prove equal functions (the converse is not claimed).
"""
from __future__ import annotations

from fractions import Fraction
from math import comb

from ._numbers import CheckError, _fmt
from .algebra import _matmul
from .attention import _Attention
from .conv import _conv_canonical_form, _out_dim
from .real import REAL_SYMMETRY_TABLE, _Real, _real_exact

MAX_LATTICE = 50000


def _evaluate(layers: list, x) -> tuple[Fraction, ...]:
    """f(x) exactly, layer by layer (each layer's ``forward``)."""
    for layer in layers:
        x = layer.forward(x)
    return x


def _degree(layers) -> int:
    """The total degree the lattice must exceed: the product of the layers' factors (``degree``)."""
    d = 1
    for layer in layers:
        d *= layer.degree()
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
    of degree D is a proof of equality.  A maximum is not (max(x^3, -x^3) = |x|^3 = x^3 on the lattice): with
    pooling, "not re-verified"; attention's scoring must agree (tests/checker/test_same_function_soundness.py).
    """
    if [_out_dim(l) for l in layers] != [_out_dim(l) for l in theta2]:
        return "theta' has other widths"
    if [l.act for l in layers] != [l.act for l in theta2]:
        return "theta' has other activations"
    if [getattr(l, "scoring", None) for l in layers] != [getattr(l, "scoring", None) for l in theta2]:
        return "theta' has another attention scoring (softmax against lightning)"
    if layers[0].token_mixing and layers[0].scoring == "softmax":
        return _softmax_same_function_failure(layers, theta2)
    if any(l.pools for l in list(layers) + list(theta2)):  # a maximum is no polynomial: no lattice proves it
        return "equality of functions with max pooling is not re-verified by this checker version (no lattice proves it)"
    if all(l.kernels for l in list(layers) + list(theta2)):
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


def _softmax_canonical(layer: _Attention):
    """Softmax attention up to what keeps its function: heads grouped by (A_h, b_h), each group's
    sum of V_h O_h (groups summing to 0 dropped), with the tokens, scale and output bias."""
    groups: dict = {}
    for h, (q, k, v, o) in enumerate(layer.heads):
        b = layer.score_biases[h] if layer.score_biases and layer.score_biases[h] else (Fraction(0),) * layer.d
        key = (_matmul(q, tuple(zip(*k))), tuple(b), len(q[0]) if layer.scale is None else None)
        vo = _matmul(v, o)
        old = groups.get(key)
        groups[key] = vo if old is None else tuple(tuple(x + y for x, y in zip(r, s)) for r, s in zip(old, vo))
    kept = sorted((k, vo) for k, vo in groups.items() if any(any(r) for r in vo))
    return layer.tokens, layer.scale, layer.bias, kept


def _softmax_same_function_failure(layers, theta2) -> str | None:
    """Softmax attention: equal canonical forms (:func:`_softmax_canonical`) and equal later layers prove
    equal functions (the converse is not claimed)."""
    if not theta2[0].token_mixing or _softmax_canonical(layers[0]) != _softmax_canonical(theta2[0]):
        return "theta' and theta are not shown to be the same function (their softmax heads' canonical forms differ)"
    if list(layers[1:]) != list(theta2[1:]):
        return "theta' and theta differ after the attention layer"
    return None


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
    if any(not l.dense_matrix for l in layers + list(theta2)):
        return "the canonical form covers dense layers only"
    if any(not isinstance(l.act, _Real) for l in list(layers[:-1]) + list(theta2[:-1])):
        return "equality of functions mixing real and other activations is not re-verified by this checker version"
    if _real_canonical_form(layers) != _real_canonical_form(theta2):
        return ("f(x; theta') is not shown equal to f(x; theta): their canonical forms (dead neurons dropped, "
                "clones merged by the identity table) differ")
    return None
