"""The piecewise-linear activations: the exact ReLU (kind ``"relu"``) and leaky ReLU (kind
``"real"``, positively homogeneous: its identity family is ``"positive"``, alpha > 0, beta = 0,
q = alpha, c = 0).  Both are exact on rationals, so the linear-region machinery of
:mod:`symeq.relu` applies (``piecewise_linear``).

>>> relu().latent_group
'positive monomial matrices'
>>> from flint import fmpq
>>> relu()(fmpq(-3)), real("leaky_relu", slope="1/10")(fmpq(-3))
(0, -3/10)
"""

from __future__ import annotations

from flint import fmpq

from ..errors import InputError
from ..numbers import format_number, parse_number
from .base import Activation, ActivationUnit, fq, spec_number
from .real import piecewise_ball, rational_of_float, rational_of_float32, real, single_op_onnx, torch_nn
from .registry import register

__all__ = ["relu"]


def relu() -> Activation:
    """The exact ReLU max(0, t) (piecewise linear)."""
    return Activation("relu", (), {"type": "relu"})


def _np_relu(act):
    import numpy as np

    return (lambda t: np.maximum(t, 0.0)), (lambda t: (t > 0).astype(np.float64))


def _relu_ball(act, x):
    from flint import arb

    return piecewise_ball(x, lambda y: arb(0) * y)


register(ActivationUnit(
    name="relu", kind="relu", rank=4, make=lambda s: relu(), definition="max(0, t)", piecewise_linear=True,
    slopes=lambda act: (fmpq(0), fmpq(1)),
    exact=lambda act, t: t if t > 0 else fmpq(0), ball=_relu_ball, latex=lambda act, v: rf"\max(0, {v})",
    numpy=_np_relu, torch=lambda act: torch_nn("ReLU"), torch_classes=("ReLU",),
    onnx_ops=("Relu",), onnx_candidates=(("relu", {"type": "relu"}),), to_onnx=single_op_onnx("Relu")))


def _leaky_params(p):
    slope = parse_number(p.get("slope", "1/100"), "leaky_relu slope")
    if slope == 1:
        raise InputError("leaky_relu slope 1 is the identity: a linear layer (omit the activation)")
    if slope == -1:
        raise InputError("leaky_relu slope -1 is |t|, whose latent group (all nonzero scalings with q = |alpha|) "
                         "symeq does not model; use another slope")
    return {"slope": format_number(slope)}


def _np_leaky(act):
    import numpy as np

    sl = fq(spec_number(act.spec, "slope"))
    return (lambda t: np.where(t > 0, t, sl * t)), (lambda t: np.where(t > 0, 1.0, sl))


def _leaky_ball(act, x):
    from flint import arb

    slope = arb(fmpq(act.spec["slope"]))
    return piecewise_ball(x, lambda y: slope * y)


def _leaky_latex(act, v):
    s = act.spec["slope"]
    return rf"\max({v}, {s}\,{v})" if fmpq(s) < 1 else rf"\min({v}, {s}\,{v})"


def _leaky_to_onnx(act, g, cur, li):
    from fractions import Fraction

    out = g.fresh(f"layer{li}.act")
    g.node("LeakyRelu", [cur], [out], name=f"layer{li}.leaky_relu",
           alpha=float(Fraction(str(act.spec.get("slope", "1/100")))))
    return out


register(ActivationUnit(
    name="leaky_relu", kind="real", rank=11, keys=("slope",), params=_leaky_params, aliases=("leakyrelu", "leaky-relu"),
    make=lambda s: real("leaky_relu", **{k: v for k, v in s.items() if k != "type"}),
    shorthand=lambda arg, text: {"slope": arg.strip()}, symmetry="relu", piecewise_linear=True,
    slopes=lambda act: (fmpq(act.spec["slope"]), fmpq(1)),
    definition="t for t > 0, slope t for t <= 0 (\"slope\": a rational other than 1 and -1, default 1/100)",
    identities="positive",  # positively homogeneous
    exact=lambda act, t: t if t > 0 else fmpq(act.spec["slope"]) * t, ball=_leaky_ball, latex=_leaky_latex,
    numpy=_np_leaky, torch=lambda act: torch_nn("LeakyReLU", negative_slope=fq(spec_number(act.spec, "slope"))),
    torch_classes=("LeakyReLU",),
    from_torch=lambda mod, kind, where: {"type": "leaky_relu", "slope": rational_of_float(mod.negative_slope)},
    onnx_ops=("LeakyRelu",),
    from_onnx=lambda op, attr: {"type": "leaky_relu", "slope": rational_of_float32(attr("alpha", 0.01))},
    onnx_candidates=(("leaky_relu", {"type": "leaky_relu"}),), to_onnx=_leaky_to_onnx))
