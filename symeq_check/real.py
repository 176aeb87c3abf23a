"""Real activations (tanh, sigmoid, gelu, silu, softplus, elu, leaky_relu, erf): the checker's axioms, the
identity table :data:`REAL_SYMMETRY_TABLE` (every (alpha, beta, q, c) with sigma(alpha t + beta) = q sigma(t) + c),
their reading from a model file, their exact values where rational, and the neuron identity they decide.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from ._numbers import CheckError, _ratio, _short, parse_number
from .schema import check_keys


# ----------------------------------------------------------------------------- real activations
#
# The identity table of the real activations (docs/theory.md, "Real activations", proves each row
# list complete): every (alpha, beta, q, c) with sigma(alpha t + beta) = q sigma(t) + c for all real
# t.  "positive" is leaky ReLU's family alpha > 0, beta = 0, q = alpha, c = 0.  These rows are the
# checker's axioms: its own read-only copy (symeq keeps another, symeq.activations.REAL_SYMMETRIES;
# a test holds them equal), re-proved at rational points by the self-test (symeq_check.selftest,
# ``python -m symeq_check --self-test``); a row is an identity of sigma, never a float check.
REAL_SYMMETRY_TABLE = MappingProxyType({
    "tanh": ((1, 0, 1, 0), (-1, 0, -1, 0)),      # odd
    "erf": ((1, 0, 1, 0), (-1, 0, -1, 0)),       # odd
    "sigmoid": ((1, 0, 1, 0), (-1, 0, -1, 1)),   # sigma(-t) = 1 - sigma(t)
    "gelu": ((1, 0, 1, 0),),                     # gelu(-t) = gelu(t) - t is not of this form
    "silu": ((1, 0, 1, 0),),
    "softplus": ((1, 0, 1, 0),),
    "elu": ((1, 0, 1, 0),),
    "leaky_relu": "positive",                    # positively homogeneous
})


@dataclass(frozen=True)
class _Real:
    """A real activation as the checker reads it: its name and its one parameter (or None)."""

    name: str
    param: object = None  # gelu: "tanh" or None; elu: alpha; leaky_relu: slope

    LEGACY_FIELDS = ("name", "param")  # digest form 1 (symeq_check.digest._legacy)


REAL_ACTIVATION_KEYS = {"gelu": ("type", "approximate"), "elu": ("type", "alpha"), "leaky_relu": ("type", "slope")}


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
