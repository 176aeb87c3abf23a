"""The real activations (kind ``"real"``): tanh, the logistic sigmoid, GELU (erf and tanh forms),
SiLU, softplus, ELU and erf (leaky ReLU, also of kind ``"real"``, is declared with ReLU in
:mod:`symeq.activations.relu`), and :func:`real`, which builds any of them by name.

A real activation is never evaluated in floats on the exact path: its layers are proved by its
identity rows (``identities``, gathered as :data:`symeq.activations.REAL_SYMMETRIES`; every
(alpha, beta, q, c) with sigma(alpha t + beta) = q sigma(t) + c, proved complete in docs/theory.md,
"Real activations"), and a refutation is a ball-arithmetic witness (the layers' ``ball_forward``)
from the unit's ``ball``.  Each unit below also declares its float and torch functions, its ONNX operators
and patterns, and its LaTeX.

>>> real("leaky_relu").to_spec()
{'type': 'leaky_relu', 'slope': '1/100'}
>>> real("gelu", approximate="tanh").to_spec()
{'type': 'gelu', 'approximate': 'tanh'}
"""

from __future__ import annotations

import math
from fractions import Fraction

from flint import fmpq

from ..errors import InputError
from ..numbers import format_number, parse_number
from ..schema import close_names
from .base import Activation, ActivationUnit, _not_exact, fq, spec_number
from .registry import UNITS, names, register, units

__all__ = ["real"]


def real(name: str, **params) -> Activation:
    """A real activation by its canonical name (a unit of kind ``"real"``).

    ``gelu`` takes ``approximate="none"`` (default, the erf form) or ``"tanh"``; ``elu`` takes
    ``alpha`` (a nonzero rational, default 1); ``leaky_relu`` takes ``slope`` (a rational other
    than 1 and -1, default 1/100).

    >>> real("leaky_relu").to_spec()
    {'type': 'leaky_relu', 'slope': '1/100'}
    >>> from flint import fmpq
    >>> real("leaky_relu", slope="1/5")(fmpq(-2))
    -2/5
    >>> real("gelu", approximate="tanh").to_spec()
    {'type': 'gelu', 'approximate': 'tanh'}
    """
    u = UNITS.get(name)
    if u is None or u.kind != "real":
        close = close_names(name, names())
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        real_ones = ", ".join(v.name for v in units("real"))
        raise InputError(f"unknown real activation {name!r}{hint}; real ones: {real_ones}")
    spec = {"type": name}
    allowed = u.keys
    for key in params:
        if key not in allowed:
            raise InputError(f"{name} takes no parameter {key!r}" + (f"; it takes {', '.join(allowed)}" if allowed else ""))
    if u.params is not None:
        spec.update(u.params(params))
    return Activation("real", (), spec)


def _make(name):
    return lambda s: real(name, **{k: v for k, v in s.items() if k != "type"})


def _value_at_zero(value):
    def exact(act, t):
        if t == 0:
            return value
        raise _not_exact(act.name, t)
    return exact


def _never_rational(act, t):
    raise _not_exact(act.name, t)


# -- numpy pieces (imported when called) ------------------------------------------------------------

def np_erf(x):
    """erf elementwise: scipy's when installed, else math.erf (slow but exact enough)."""
    import numpy as np

    try:
        from scipy.special import erf
    except ImportError:  # plain numpy has no erf
        return np.vectorize(math.erf, otypes=[np.float64])(x)
    return erf(x)


def np_sigmoid(t):
    import numpy as np

    return 0.5 * (1.0 + np.tanh(0.5 * t))


def _np_tanh(act):
    import numpy as np

    return np.tanh, lambda t: 1.0 - np.tanh(t) ** 2


def _np_sigmoid(act):
    return np_sigmoid, lambda t: np_sigmoid(t) * (1.0 - np_sigmoid(t))


def _np_erf(act):
    import numpy as np

    return np_erf, lambda t: 2.0 / math.sqrt(math.pi) * np.exp(-t * t)


def _np_gelu(act):
    import numpy as np

    if act.spec.get("approximate") == "tanh":
        k, c = math.sqrt(2.0 / math.pi), 0.044715

        def f(t):
            return 0.5 * t * (1.0 + np.tanh(k * (t + c * t ** 3)))

        def fp(t):
            th = np.tanh(k * (t + c * t ** 3))
            return 0.5 * (1.0 + th) + 0.5 * t * (1.0 - th ** 2) * k * (1.0 + 3.0 * c * t * t)
        return f, fp

    def gelu(t):
        return 0.5 * t * (1.0 + np_erf(t / math.sqrt(2.0)))

    def gelu_prime(t):
        return 0.5 * (1.0 + np_erf(t / math.sqrt(2.0))) + t * np.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    return gelu, gelu_prime


def _np_silu(act):
    return (lambda t: t * np_sigmoid(t)), (lambda t: np_sigmoid(t) * (1.0 + t * (1.0 - np_sigmoid(t))))


def _np_softplus(act):
    import numpy as np

    return (lambda t: np.logaddexp(0.0, t)), np_sigmoid


def _np_elu(act):
    import numpy as np

    a = fq(spec_number(act.spec, "alpha"))
    return (lambda t: np.where(t > 0, t, a * np.expm1(np.minimum(t, 0.0)))), \
        (lambda t: np.where(t > 0, 1.0, a * np.exp(np.minimum(t, 0.0))))


# -- balls ---------------------------------------------------------------------------------------------

def piecewise_ball(x, neg):
    """sigma(x) for sigma(t) = t (t > 0), neg(t) (t <= 0) on a ball (both branches where x contains 0)."""
    if x > 0:
        return x
    if x < 0:
        return neg(x)
    return x.union(neg(x))  # x contains 0: both branches (each enclosure contains its piece)


def _ball_gelu(act, x):
    from flint import arb

    if act.spec.get("approximate") == "tanh":
        k = (arb(2) / arb.pi()).sqrt()
        return x / 2 * (1 + (k * (x + arb(fmpq(44715, 1000000)) * x * x * x)).tanh())
    return x / 2 * (1 + (x / arb(2).sqrt()).erf())


def _ball_elu(act, x):
    from flint import arb

    return piecewise_ball(x, lambda y: arb(fmpq(act.spec["alpha"])) * y.expm1())


# -- parameters, torch, ONNX ------------------------------------------------------------------------

def _gelu_params(p):
    approx = p.get("approximate", "none")
    if approx not in ("none", "tanh"):
        raise InputError(f"gelu \"approximate\" is \"none\" (the erf form) or \"tanh\", got {approx!r}")
    return {"approximate": "tanh"} if approx == "tanh" else {}


def _elu_params(p):
    alpha = parse_number(p.get("alpha", "1"), "elu alpha")
    if alpha == 0:
        raise InputError("elu alpha must be nonzero (alpha = 0 is relu: use {\"type\": \"relu\"})")
    return {"alpha": format_number(alpha)}


def rational_of_float(x) -> str:
    """A torch module's float parameter as the rational it was meant to be (denominator <= 10^6)."""
    return str(Fraction(float(x)).limit_denominator(10 ** 6))


def rational_of_float32(x) -> str:
    """An ONNX float32 attribute as its shortest decimal, the value the exporter meant, as "p/q"."""
    import numpy as np

    value = Fraction(str(np.float32(x)))
    return f"{value.numerator}/{value.denominator}"


def torch_nn(cls_name: str, **kw):
    """A ``torch.nn`` module by class name (torch imported here)."""
    import torch

    return getattr(torch.nn, cls_name)(**kw)


def _softplus_from_torch(mod, kind, where):
    if float(getattr(mod, "beta", 1.0)) != 1.0:
        raise InputError(f"module {where}: Softplus(beta={mod.beta}) is not supported; symeq reads beta = 1")
    return {"type": "softplus"}


def _gelu_from_onnx(op, attr):
    if attr("approximate", b"none") not in (b"none", "none"):
        return {"type": "gelu", "approximate": "tanh"}
    return "gelu"


def single_op_onnx(op):
    """The ONNX writer of an activation that is one operator without attributes."""
    def write(act, g, cur, li):
        out = g.fresh(f"layer{li}.act")
        g.node(op, [cur], [out], name=f"layer{li}.{act.name}")
        return out
    return write


def _elu_to_onnx(act, g, cur, li):
    out = g.fresh(f"layer{li}.act")
    g.node("Elu", [cur], [out], name=f"layer{li}.elu", alpha=float(Fraction(str(act.spec.get("alpha", "1")))))
    return out


def _silu_to_onnx(act, g, cur, li):  # x * sigmoid(x), as torch exports it
    sg = g.fresh(f"layer{li}.sigmoid")
    out = g.fresh(f"layer{li}.act")
    g.node("Sigmoid", [cur], [sg])
    g.node("Mul", [cur, sg], [out])
    return out


def _gelu_to_onnx(act, g, cur, li):
    if act.spec.get("approximate") == "tanh":  # x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        kc, c, one, half = (g.const(0.044715, f"layer{li}.k"), g.const(math.sqrt(2.0 / math.pi), f"layer{li}.c"),
                            g.const(1.0, f"layer{li}.one"), g.const(0.5, f"layer{li}.half"))
        x2, x3, kx3, u, v, t, a, m = (g.fresh(f"layer{li}.{n}") for n in ("x2", "x3", "kx3", "u", "v", "t", "a", "m"))
        out = g.fresh(f"layer{li}.act")
        for op, ins, outs in (("Mul", [cur, cur], [x2]), ("Mul", [x2, cur], [x3]), ("Mul", [x3, kc], [kx3]),
                              ("Add", [cur, kx3], [u]), ("Mul", [u, c], [v]), ("Tanh", [v], [t]),
                              ("Add", [t, one], [a]), ("Mul", [cur, a], [m]), ("Mul", [m, half], [out])):
            g.node(op, ins, outs)
        return out
    # x * 0.5 * (1 + erf(x / sqrt 2)), as torch exports it below opset 20
    s2, one, half = (g.const(math.sqrt(2.0), f"layer{li}.sqrt2"), g.const(1.0, f"layer{li}.one"),
                     g.const(0.5, f"layer{li}.half"))
    d, e, a, m = (g.fresh(f"layer{li}.{t}") for t in ("div", "erf", "add", "mul"))
    out = g.fresh(f"layer{li}.act")
    for op, ins, outs in (("Div", [cur, s2], [d]), ("Erf", [d], [e]), ("Add", [e, one], [a]),
                          ("Mul", [cur, a], [m]), ("Mul", [m, half], [out])):
        g.node(op, ins, outs)
    return out


def _latex_gelu(act, v):
    if act.spec.get("approximate") == "tanh":
        return rf"\tfrac{{{v}}}{{2}}\bigl(1 + \tanh(\sqrt{{2/\pi}}\,({v} + 0.044715\,{v}^3))\bigr)"
    return rf"{v}\,\Phi({v})"


_ODD = ((1, 0, 1, 0), (-1, 0, -1, 0))
_ONLY_IDENTITY = ((1, 0, 1, 0),)

register(ActivationUnit(
    name="tanh", kind="real", rank=5, make=_make("tanh"), symmetry="odd", definition="tanh(t)",
    identities=_ODD, exact=_value_at_zero(fmpq(0)),
    ball=lambda act, x: x.tanh(), latex=lambda act, v: rf"\tanh({v})", numpy=_np_tanh,
    torch=lambda act: torch_nn("Tanh"), torch_classes=("Tanh",),
    onnx_ops=("Tanh",), onnx_candidates=(("tanh", {"type": "tanh"}),), to_onnx=single_op_onnx("Tanh")))
register(ActivationUnit(
    name="sigmoid", kind="real", rank=6, make=_make("sigmoid"), aliases=("logistic",), symmetry="odd-plus-constant",
    definition="1 / (1 + exp(-t)), the logistic sigmoid",
    identities=((1, 0, 1, 0), (-1, 0, -1, 1)),  # sigma(-t) = 1 - sigma(t)
    exact=_value_at_zero(fmpq(1, 2)),
    ball=lambda act, x: 1 / (1 + (-x).exp()), latex=lambda act, v: rf"\frac{{1}}{{1 + e^{{-{v}}}}}",
    numpy=_np_sigmoid, torch=lambda act: torch_nn("Sigmoid"), torch_classes=("Sigmoid",),
    onnx_ops=("Sigmoid",), onnx_candidates=(("sigmoid", {"type": "sigmoid"}),), to_onnx=single_op_onnx("Sigmoid")))
register(ActivationUnit(
    name="gelu", kind="real", rank=7, make=_make("gelu"), keys=("approximate",), params=_gelu_params,
    shorthand=lambda arg, text: {"approximate": arg}, symmetry="generic",
    definition="t Phi(t) = t (1 + erf(t / sqrt 2)) / 2; with \"approximate\": \"tanh\": "
               "t (1 + tanh(sqrt(2 / pi) (t + 0.044715 t^3))) / 2",
    identities=_ONLY_IDENTITY,  # gelu(-t) = gelu(t) - t is not of this form
    exact=_value_at_zero(fmpq(0)), ball=_ball_gelu, latex=_latex_gelu, numpy=_np_gelu,
    torch=lambda act: torch_nn("GELU", approximate=act.spec.get("approximate", "none")), torch_classes=("GELU",),
    from_torch=lambda mod, kind, where: {"type": "gelu", "approximate": getattr(mod, "approximate", "none")},
    onnx_ops=("Gelu",), from_onnx=_gelu_from_onnx,
    onnx_candidates=(("gelu", {"type": "gelu"}), ("gelu_tanh", {"type": "gelu", "approximate": "tanh"})),
    to_onnx=_gelu_to_onnx))
register(ActivationUnit(
    name="silu", kind="real", rank=8, make=_make("silu"), aliases=("swish",), symmetry="generic",
    definition="t sigmoid(t) (also called swish)", identities=_ONLY_IDENTITY, exact=_value_at_zero(fmpq(0)),
    ball=lambda act, x: x / (1 + (-x).exp()), latex=lambda act, v: rf"\frac{{{v}}}{{1 + e^{{-{v}}}}}",
    numpy=_np_silu, torch=lambda act: torch_nn("SiLU"), torch_classes=("SiLU",),
    onnx_candidates=(("silu", {"type": "silu"}),), to_onnx=_silu_to_onnx))
register(ActivationUnit(
    name="softplus", kind="real", rank=9, make=_make("softplus"), symmetry="generic", definition="log(1 + exp(t))",
    identities=_ONLY_IDENTITY, exact=_never_rational,
    ball=lambda act, x: x.exp().log1p(), latex=lambda act, v: rf"\log(1 + e^{{{v}}})", numpy=_np_softplus,
    torch=lambda act: torch_nn("Softplus"), torch_classes=("Softplus",), from_torch=_softplus_from_torch,
    onnx_ops=("Softplus",), onnx_candidates=(("softplus", {"type": "softplus"}),),
    to_onnx=single_op_onnx("Softplus")))
register(ActivationUnit(
    name="elu", kind="real", rank=10, make=_make("elu"), keys=("alpha",), params=_elu_params,
    shorthand=lambda arg, text: {"alpha": arg.strip()}, symmetry="generic",
    definition="t for t > 0, alpha (exp(t) - 1) for t <= 0 (\"alpha\": a nonzero rational, default 1)",
    identities=_ONLY_IDENTITY,
    exact=lambda act, t: t if t >= 0 else _never_rational(act, t), ball=_ball_elu,
    latex=lambda act, v: rf"\begin{{cases}} {v} & {v} > 0 \\ {act.spec['alpha']}\,(e^{{{v}}} - 1) & {v} \le 0 \end{{cases}}",
    numpy=_np_elu, torch=lambda act: torch_nn("ELU", alpha=fq(spec_number(act.spec, "alpha"))), torch_classes=("ELU",),
    from_torch=lambda mod, kind, where: {"type": "elu", "alpha": rational_of_float(mod.alpha)},
    onnx_ops=("Elu",), from_onnx=lambda op, attr: {"type": "elu", "alpha": rational_of_float32(attr("alpha", 1.0))},
    onnx_candidates=(("elu", {"type": "elu"}),), to_onnx=_elu_to_onnx))
register(ActivationUnit(
    name="erf", kind="real", rank=12, make=_make("erf"), symmetry="odd",
    definition="erf(t) = (2 / sqrt pi) int_0^t exp(-u^2) du", identities=_ODD, exact=_value_at_zero(fmpq(0)),
    ball=lambda act, x: x.erf(), latex=lambda act, v: rf"\operatorname{{erf}}({v})", numpy=_np_erf,
    torch_refusal="torch.nn has no erf module; symeq cannot build a torch network with erf",
    onnx_ops=("Erf",), onnx_candidates=(("erf", {"type": "erf"}),), to_onnx=single_op_onnx("Erf")))
