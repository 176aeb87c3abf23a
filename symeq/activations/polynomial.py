"""The polynomial activations: given by coefficients, a monomial, or the Taylor polynomial of tanh
or of the logistic sigmoid computed exactly.  Their symmetry classes are computed from the
coefficients (:attr:`~symeq.activations.base.Activation.symmetry`); here are their constructors and
their units: exact value and ball by Horner's rule, float and torch Horner, ONNX as a Horner chain
of Mul and Add, LaTeX through sympy.

>>> list(tanh_series(7).coeffs)
[0, 1, 0, -1/3, 0, 2/15, 0, -17/315]
>>> list(sigmoid_series(5).coeffs)
[1/2, 1/4, 0, -1/48, 0, 1/480]
>>> polynomial(["0", "1", "1/2"])(fmpq(2))
4
"""

from __future__ import annotations

from flint import fmpq

from ..errors import InputError
from ..numbers import format_number, parse_number
from ..sizes import check_degree
from .base import Activation, ActivationUnit, _trim, fq
from .registry import register

__all__ = ["polynomial", "monomial", "tanh_series", "sigmoid_series", "tanh_taylor", "torch_polynomial_class"]


def tanh_taylor(order: int) -> list[fmpq]:
    """Exact Taylor coefficients of tanh up to t^order, from tanh' = 1 - tanh^2.

    Comparing coefficients of t^k gives (k+1) a_{k+1} = [k = 0] - sum_{i+j=k} a_i a_j.
    """
    a = [fmpq(0)] * (order + 1)
    for k in range(order):
        s = fmpq(1 if k == 0 else 0) - sum((a[i] * a[k - i] for i in range(k + 1)), fmpq(0))
        a[k + 1] = s / (k + 1)
    return a


def polynomial(coeffs) -> Activation:
    """A polynomial activation with exact coefficients from degree 0 up.

    >>> polynomial(["0", "1", "1/2"])(fmpq(2))
    4
    """
    if isinstance(coeffs, (list, tuple)):
        check_degree(len(coeffs) - 1, "polynomial activation (number of coefficients - 1)")
    c = _trim([parse_number(x, f"activation coeffs[{i}]") for i, x in enumerate(coeffs)])
    if not c:
        raise InputError("a polynomial activation needs at least one coefficient")
    return Activation("polynomial", tuple(c), {"type": "polynomial", "coeffs": [format_number(x) for x in c]})


def monomial(degree: int) -> Activation:
    """sigma(t) = t^degree (latent group: monomial matrices, the scalings need gauge fixing)."""
    if not isinstance(degree, int) or isinstance(degree, bool) or degree < 1:
        raise InputError(f"monomial degree must be a positive integer, got {degree!r}")
    check_degree(degree, "monomial activation")
    c = [fmpq(0)] * degree + [fmpq(1)]
    return Activation("polynomial", tuple(c), {"type": "monomial", "degree": degree})


def tanh_series(order: int) -> Activation:
    """The Taylor polynomial of tanh up to t^order (odd order), coefficients computed exactly."""
    if not isinstance(order, int) or isinstance(order, bool) or order < 1 or order % 2 == 0:
        raise InputError(f"tanh_series order must be an odd positive integer, got {order!r}")
    check_degree(order, "tanh_series activation")
    return Activation("polynomial", tuple(_trim(tanh_taylor(order))), {"type": "tanh_series", "order": order})


def sigmoid_series(order: int) -> Activation:
    """The Taylor polynomial of the logistic sigmoid up to t^order: 1/2 + tanh(t/2)/2."""
    if not isinstance(order, int) or isinstance(order, bool) or order < 1:
        raise InputError(f"sigmoid_series order must be a positive integer, got {order!r}")
    check_degree(order, "sigmoid_series activation")
    th = tanh_taylor(order)
    c = [th[k] / 2 ** (k + 1) for k in range(order + 1)]
    c[0] += fmpq(1, 2)
    return Activation("polynomial", tuple(_trim(c)), {"type": "sigmoid_series", "order": order})


# -- what every polynomial unit shares ----------------------------------------------------------

def _ball(act, x):
    from flint import arb

    acc = arb(0)
    for c in reversed(act.coeffs):
        acc = acc * x + arb(c)
    return acc


def _latex(act, var):
    import sympy

    t = sympy.Symbol(var)
    expr = sum(sympy.Rational(int(c.p), int(c.q)) * t**k for k, c in enumerate(act.coeffs))
    return sympy.latex(expr)


def horner_numpy(coeffs):
    """(sigma, sigma') in numpy for float coefficients from degree 0 up, by Horner's rule."""
    import numpy as np

    c = tuple(float(x) for x in coeffs)
    dc = tuple(k * c[k] for k in range(1, len(c))) or (0.0,)

    def ev(cs):
        def f(t):
            acc = np.zeros_like(t) + cs[-1]
            for x in reversed(cs[:-1]):
                acc = acc * t + x
            return acc
        return f

    return ev(c), ev(dc)


def _numpy(act):
    return horner_numpy([fq(c) for c in act.coeffs])


_TORCH_CLASS = []


def torch_polynomial_class():
    """The ``torch.nn.Module`` evaluating a polynomial by Horner's rule (built once, torch imported
    here; :class:`symeq.numeric.torch_backend.Polynomial` is this class)."""
    if not _TORCH_CLASS:
        import torch

        class Polynomial(torch.nn.Module):
            """sigma(t) = sum_k coeffs[k] t^k, evaluated by Horner's rule (coefficients from degree 0 up)."""

            def __init__(self, coeffs):
                super().__init__()
                self.coeffs = tuple(float(c) for c in coeffs)

            def forward(self, t):
                c = self.coeffs
                if len(c) == 1:
                    return torch.zeros_like(t) + c[0]
                # the first Horner step written out (the same floats as (0 + c_d) t + c_{d-1}): a
                # zeros_like start exports to ONNX as a constant of the traced batch shape, which
                # symeq's ONNX reader refuses as non-scalar (tests/activations)
                acc = t * c[-1] + c[-2]
                for x in reversed(c[:-2]):
                    acc = acc * t + x
                return acc

            def extra_repr(self) -> str:
                return f"coeffs={list(self.coeffs)}"

        Polynomial.__module__ = "symeq.numeric.torch_backend"  # where users (and pickle) find it
        Polynomial.__qualname__ = "Polynomial"
        _TORCH_CLASS.append(Polynomial)
    return _TORCH_CLASS[0]


def _torch(act):
    return torch_polynomial_class()([fq(c) for c in act.coeffs])


def _from_torch(mod, kind, where):
    return {"type": "polynomial", "coeffs": [repr(float(c)) for c in mod.coeffs]}


def _to_onnx(act, g, cur, li):
    """sigma by Horner's rule: a chain of Mul and Add with scalar constants."""
    coeffs = [fq(c) for c in act.coeffs] or [0.0]
    acc = g.const(coeffs[-1], f"layer{li}.c{len(coeffs) - 1}")
    acc_is_const = True
    for ci in range(len(coeffs) - 2, -1, -1):
        mul = g.fresh(f"layer{li}.h")
        g.node("Mul", [cur, acc] if not acc_is_const else [acc, cur], [mul])
        add = g.fresh(f"layer{li}.h")
        g.node("Add", [mul, g.const(coeffs[ci], f"layer{li}.c{ci}")], [add])
        acc, acc_is_const = add, False
    if acc_is_const:
        raise InputError(f"layer {li}: a constant activation cannot be exported")
    return acc


def _integer_shorthand(key):
    def read(arg, text):
        try:
            return {key: int(arg)}
        except ValueError:
            raise InputError(f"expected an integer after ':' in {text!r}") from None
    return read


_COMMON = dict(kind="polynomial", ball=_ball, latex=_latex, numpy=_numpy, torch=_torch, to_onnx=_to_onnx)

register(ActivationUnit(
    name="polynomial", rank=0, keys=("coeffs",), required=("coeffs",), aliases=("poly",),
    make=lambda s: polynomial(s["coeffs"]), definition="sum_k coeffs[k] t^k (exact rationals)",
    shorthand=lambda arg, text: {"coeffs": [c.strip() for c in arg.split(",")]},  # "0, 1, 2" on a command line
    torch_classes=("Polynomial",), from_torch=_from_torch, **_COMMON))
register(ActivationUnit(
    name="monomial", rank=1, keys=("degree",), required=("degree",), make=lambda s: monomial(s["degree"]),
    definition="t^degree", shorthand=_integer_shorthand("degree"), **_COMMON))
register(ActivationUnit(
    name="tanh_series", rank=2, keys=("order",), required=("order",), aliases=("taylor_tanh",),
    make=lambda s: tanh_series(s["order"]), definition="the Taylor polynomial of tanh up to t^order",
    shorthand=_integer_shorthand("order"), **_COMMON))
register(ActivationUnit(
    name="sigmoid_series", rank=3, keys=("order",), required=("order",), make=lambda s: sigmoid_series(s["order"]),
    definition="the Taylor polynomial of the logistic sigmoid up to t^order",
    shorthand=_integer_shorthand("order"), **_COMMON))
