"""Activations as the checker reads them: ReLU, the polynomial families (tanh and sigmoid Taylor series,
monomials, polynomials, as coefficient tuples) and the real ones (:mod:`symeq_check.real`), with a layer's bias;
their exact evaluation; and the one-neuron identity sigma(u t + b_j) = q sigma(v t + b_k) + o of a layer check.
"""
from __future__ import annotations

from fractions import Fraction
from math import comb

from ._numbers import CheckError, _count, _dict, _poly, _ratio, _short, _vector
from .real import REAL_SYMMETRY_TABLE, _Real, _real_activation, _real_exact, _real_neuron_failure
from .schema import MAX_DEGREE, check_keys


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


def _bias_and_activation(spec: dict, n: int, name: str, last) -> tuple:
    """A layer's n biases (null: none, zeros), its activation and label: the last layer affine, a hidden one not
    (``last`` None: a graph segment's last layer, with or without an activation)."""
    bias = spec.get("bias")
    bias = (Fraction(0),) * n if bias is None else _vector(bias, f"{name} bias", n)
    act, label = _activation(spec.get("activation"), name)
    if last and act is not None:
        raise CheckError(f"{name}: the last layer must be affine (activation null)")
    if last is False and act is None:
        raise CheckError(f"{name}: a hidden layer needs a non-null activation")
    return bias, act, label


def _apply(act, t: Fraction) -> Fraction:
    if act is None:
        return t
    if isinstance(act, _Real):
        return _real_exact(act, t)
    return max(t, Fraction(0)) if act == "relu" else _poly(act, t)


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
