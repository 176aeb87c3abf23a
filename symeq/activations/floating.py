"""The float side of the activation units: an activation as numpy functions with the latent symmetry it
implies (:class:`NumericActivation`) and its admissible scalings as floats (:class:`Scalings`).

Every float activation is the twin of an exact one (:mod:`symeq.activations`): sigma and sigma' are its
unit's numpy functions (``float_functions`` of :mod:`symeq.activations.registry`), and the scalings are
*read off the exact definition* (:meth:`Scalings.of_exact` asks
:meth:`symeq.activations.Activation.affine_admissible`), so the float path and the exact one share one
table of symmetries.  The layer kinds' float classes (``symeq/layers/<kind>/floating.py``) and the float
model (:mod:`symeq.numeric.models`, which re-exports these names) hold such activations.

>>> numeric_activation("tanh").latent_group
'signed permutations'
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import InputError
from .base import LATENT_GROUPS

__all__ = ["Scalings", "NumericActivation", "activation_from_exact", "numeric_activation"]


def _fq(q) -> float:
    return int(q.p) / int(q.q)


@dataclass(frozen=True)
class Scalings:
    """The admissible pre-activation scalings of an activation, as floats (the float view of K).

    A neuron's pre-activation may change by z -> alpha z + s(1 - alpha) when
    sigma(alpha t + s(1 - alpha)) = q sigma(t) + o for all t; its output then changes by
    y -> q y + o (the next layer's bias absorbs o).  The admissible alpha form one of four groups:

    * ``"one"``: alpha = 1 (generic sigma);
    * ``"sign"``: alpha = +-1, with ``flip`` = (q, o) for alpha = -1 (odd: (-1, 0); even: (1, 0);
      odd up to a constant, e.g. sigmoid: (-1, 2 sigma(s)));
    * ``"positive"``: alpha > 0 (ReLU), q = alpha^power;
    * ``"nonzero"``: alpha != 0 (monomials c (t - s)^d, and c (t - s)^d + e),
      q = sign(alpha)^sign_power |alpha|^power.

    In every class o(alpha) = constant * (1 - q(alpha)), with ``constant`` = sigma(s) for the
    activations that are odd or monomial only up to a constant, and 0 otherwise.

    Examples
    --------
    >>> from symeq.activations import sigmoid_series, monomial
    >>> Scalings.of_exact(sigmoid_series(3))
    Scalings(alphas='sign', flip=(-1.0, 1.0), power=0, sign_power=0, constant=0.5)
    >>> Scalings.of_exact(monomial(3)).q(np.array([-2.0, 0.5])).tolist()
    [-8.0, 0.125]
    """

    alphas: str
    flip: tuple | None = None
    power: int = 0
    sign_power: int = 0
    constant: float = 0.0

    @classmethod
    def of_exact(cls, act) -> "Scalings":
        """Read the scalings off an exact :class:`~symeq.activations.Activation`.

        Only its :meth:`~symeq.activations.Activation.affine_admissible` is asked, at alpha = 2
        (a continuous family?), -1 (signs?) and 1/3 (a consistency probe): the exact definition
        is the single source of truth.
        """
        from flint import fmpq

        two, neg = act.affine_admissible(2), act.affine_admissible(-1)
        if two is not None:
            q2, o2 = two
            power = int(q2.p).bit_length() - 1
            if q2.q != 1 or q2 != 2 ** power or power < 1:
                raise AssertionError(f"unexpected scaling factor q(2) = {q2} for {act!r}")
            e = o2 / (1 - q2)
            if neg is None:
                sign_power = None
            elif neg[0] in (1, -1) and neg[1] == e * (1 - neg[0]):
                sign_power = 0 if neg[0] == 1 else 1
            else:
                raise AssertionError(f"unexpected (q, o)(-1) = {neg} for {act!r}")
            third = act.affine_admissible(fmpq(1, 3))
            if third is None or third != (fmpq(1, 3 ** power), e * (1 - fmpq(1, 3 ** power))):
                raise AssertionError(f"the scalings of {act!r} are not a power law")
            return cls("positive" if sign_power is None else "nonzero", None, power, sign_power or 0, _fq(e))
        if neg is None:
            return cls("one")
        q, o = neg
        if q == 1 and o != 0:
            raise AssertionError(f"unexpected (q, o)(-1) = {neg} for {act!r}")
        return cls("sign", (_fq(q), _fq(o)), constant=0.0 if q == 1 else _fq(o / (1 - q)))

    @property
    def affine(self) -> bool:
        """Whether some admissible scaling shifts the output (o != 0): actions are affine."""
        return self.constant != 0.0

    def snap(self, alpha: np.ndarray) -> np.ndarray:
        """The admissible alpha nearest to fitted ones (signs; continuous families unchanged)."""
        alpha = np.asarray(alpha, dtype=np.float64)
        if self.alphas == "one":
            return np.ones_like(alpha)
        if self.alphas == "sign":
            return np.where(alpha >= 0, 1.0, -1.0)
        return alpha

    def admissible_mask(self, alpha: np.ndarray) -> np.ndarray:
        alpha = np.asarray(alpha, dtype=np.float64)
        if self.alphas == "one":
            return alpha == 1.0
        if self.alphas == "sign":
            return np.abs(alpha) == 1.0
        if self.alphas == "positive":
            return alpha > 0
        return alpha != 0

    def q(self, alpha: np.ndarray) -> np.ndarray:
        """The output factors q(alpha); NaN where alpha is not admissible."""
        alpha = np.asarray(alpha, dtype=np.float64)
        if self.alphas in ("one", "sign"):
            flip_q = self.flip[0] if self.flip is not None else np.nan
            out = np.where(alpha == 1.0, 1.0, np.where(alpha == -1.0, flip_q, np.nan))
        else:
            out = np.abs(alpha) ** self.power * np.where(alpha < 0, (-1.0) ** self.sign_power, 1.0)
        return np.where(self.admissible_mask(alpha), out, np.nan)

    def offset(self, alpha: np.ndarray) -> np.ndarray:
        """The output offsets o(alpha) = constant * (1 - q(alpha)) (zero for linear actions)."""
        return self.constant * (1.0 - self.q(alpha)) + 0.0  # + 0.0: no -0.0 in reports

    @property
    def projection_kind(self) -> str:
        """Which monomial group the post-activation actions lie in (linear part)."""
        if self.alphas == "sign":
            return "signed permutation" if self.flip[0] == -1.0 else "permutation"
        if self.alphas == "positive":
            return "positive monomial"
        if self.alphas == "nonzero":
            return "monomial"
        return "permutation"


@dataclass(frozen=True, eq=False)
class NumericActivation:
    """A float activation with its derivative and the latent symmetry it implies.

    Attributes
    ----------
    name : "polynomial", "relu" or a real activation's name ("tanh", "gelu", ...; its spec is kept)
    fn, prime : numpy functions sigma and sigma'
    symmetry : as :attr:`symeq.activations.Activation.symmetry`
    shift : s with sigma(t) = tau(t - s) (polynomials; 0 otherwise)
    degree : polynomial degree (None otherwise)
    coeffs : float coefficients from degree 0 up (polynomials)
    spec : the JSON description
    scalings : the admissible scalings (:class:`Scalings`; read off the exact activation when
        there is one)
    """

    name: str
    fn: Callable
    prime: Callable
    symmetry: str
    shift: float = 0.0
    degree: int | None = None
    coeffs: tuple = ()
    spec: dict = field(default_factory=dict)
    scalings: Scalings = field(default_factory=lambda: Scalings("one"))

    def __call__(self, t):
        return self.fn(t)

    @property
    def latent_group(self) -> str:
        return LATENT_GROUPS[self.symmetry]

    def admissible(self, alpha: float) -> float | None:
        """q with sigma(alpha t + s(1 - alpha)) = q sigma(t) + o, for an alpha already snapped to K.

        >>> numeric_activation("tanh").admissible(-1.0), numeric_activation("relu").admissible(2.0)
        (-1.0, 2.0)
        >>> numeric_activation("sigmoid").affine_admissible(-1.0)
        (-1.0, 1.0)
        """
        q = float(self.scalings.q(alpha))
        return None if np.isnan(q) else q

    def affine_admissible(self, alpha: float) -> tuple[float, float] | None:
        """(q, o) with sigma(alpha t + s(1 - alpha)) = q sigma(t) + o, or None."""
        q = self.admissible(alpha)
        return None if q is None else (q, float(self.scalings.offset(alpha)))

    def torch_module(self):
        """The matching ``torch.nn`` module (polynomials: a small module evaluating by Horner)."""
        from .polynomial import torch_polynomial_class
        from .registry import torch_module

        if self.name == "polynomial":  # its float coefficients, as the float twin holds them
            return torch_polynomial_class()(self.coeffs)
        return torch_module(dict(self.spec, type=self.name))

    def __repr__(self) -> str:
        return f"NumericActivation({self.spec})"


def activation_from_exact(act) -> NumericActivation:
    """The float twin of an exact :class:`~symeq.activations.Activation`: sigma and sigma' are its
    unit's numpy functions (:mod:`symeq.activations`, one declaration per activation), the scalings
    are read off the exact definition (:meth:`Scalings.of_exact`), so the float path and the exact
    one share one table of symmetries.  tests/numeric/test_parity.py checks each identity on sample points."""
    from .registry import float_functions

    f, fp = float_functions(act)
    if act.kind == "relu":
        return NumericActivation("relu", f, fp, "relu", spec={"type": "relu"}, scalings=Scalings.of_exact(act))
    if act.kind == "real":
        return NumericActivation(act.name, f, fp, act.symmetry, spec=act.to_spec(), scalings=Scalings.of_exact(act))
    return NumericActivation("polynomial", f, fp, act.symmetry, _fq(act.shift), act.degree,
                             tuple(_fq(c) for c in act.coeffs), dict(act.spec), Scalings.of_exact(act))


def numeric_activation(spec, where: str = "activation") -> NumericActivation | None:
    """The float twin of an activation from its JSON spec: every activation unit of
    :mod:`symeq.activations` (its numpy functions); affine and constant polynomials are refused.

    >>> numeric_activation({"type": "tanh_series", "order": 3}).symmetry
    'odd'
    >>> numeric_activation("gelu").latent_group
    'permutations'
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        spec = {"type": spec}
    from . import activation_from_spec, degenerate_reason

    try:
        act = activation_from_spec(spec, where)
    except InputError as e:
        raise InputError(str(e)) from None
    reason = degenerate_reason(act, where)
    if reason is not None:
        raise InputError(reason)
    return activation_from_exact(act)
