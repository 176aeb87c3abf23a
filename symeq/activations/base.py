"""The exact activation (:class:`Activation`) and the declaration of an activation unit
(:class:`ActivationUnit`): what each activation says about itself, in one place.

An :class:`Activation` is a value: its kind (``"polynomial"``, ``"relu"`` or ``"real"``), its exact
coefficients (polynomials) and its spec.  Everything that depends on *which* activation it is (its
exact value where rational, its ball, its LaTeX, its float and torch functions, its ONNX patterns,
its symmetry class and identity rows) is read from its unit, one per ``"type"``, registered by the
family modules of this package (:mod:`symeq.activations.polynomial`, :mod:`~symeq.activations.relu`,
:mod:`~symeq.activations.real`) in :mod:`symeq.activations.registry`.  The polynomial symmetry
classes (odd, even, monomial, ... up to a shift and a constant) are computed from the coefficients
here, since they hold for every polynomial unit alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from flint import fmpq, fmpq_poly

from ..errors import InputError, NotExactError
from ..numbers import format_number
from .registry import UNITS

__all__ = ["Activation", "ActivationUnit", "LATENT_GROUPS"]

LATENT_GROUPS = {
    "generic": "permutations",
    "odd": "signed permutations",
    "even": "permutations",
    "monomial": "monomial matrices",
    "odd-plus-constant": "signed permutations acting affinely (sign flips y -> 2 sigma(s) - y)",
    "monomial-plus-constant": "monomial matrices acting affinely (y -> q y + e (1 - q), e = sigma(s))",
    "relu": "positive monomial matrices",
    "affine": "general linear (linear activation)",
    "constant": "none (constant activation)",
}


def fq(q) -> float:
    """A rational as the nearest float (``int(p) / int(q)``: correctly rounded)."""
    q = fmpq(q)
    return int(q.p) / int(q.q)


def spec_number(spec: dict, key: str) -> fmpq:
    """A rational parameter of a spec (written by :func:`symeq.numbers.format_number`)."""
    from ..numbers import parse_number

    return parse_number(spec[key], "activation parameter")


def _trim(coeffs: list[fmpq]) -> list[fmpq]:
    c = list(coeffs)
    while len(c) > 1 and c[-1] == 0:
        c.pop()
    return c


@dataclass(frozen=True, eq=False)
class ActivationUnit:
    """One activation, declared once (one per model-file ``"type"``).

    The exact path, the float and torch paths, the ONNX reader and writer, the LaTeX and the
    symmetry tables all read these fields; adding an activation is one declaration in a family
    module and its :func:`~symeq.activations.registry.register` call.

    Attributes
    ----------
    name : the canonical ``"type"``
    kind : the :attr:`Activation.kind` it builds ("polynomial", "relu" or "real")
    rank : its place in :data:`~symeq.activations.ACTIVATION_NAMES` (error messages, listings)
    make : spec (a dict, keys checked) -> :class:`Activation`
    keys, required : the spec's keys besides ``"type"``, and the required ones
    aliases : other spellings of ``"type"`` (read, written back canonically)
    shorthand : the command-line argument after ``name:`` -> spec (``leaky_relu:1/10``), or None
    params : (real activations) the parameters of :func:`~symeq.activations.real` -> spec entries
    symmetry : (real activations) the symmetry class of :attr:`Activation.symmetry`
    definition : the formula, in words
    identities : (real activations) every (alpha, beta, q, c) with sigma(alpha t + beta) = q sigma(t) + c,
        or ``"positive"`` (leaky ReLU's alpha > 0 family); read as ``REAL_SYMMETRIES``
    piecewise_linear : exact on rationals, the linear-region machinery applies (ReLU, leaky ReLU)
    slopes : (piecewise linear) act -> (slope for t < 0, slope for t > 0), read by :mod:`symeq.relu`
    exact : (act, t) -> sigma(t) as an fmpq, or :class:`NotExactError` where it is irrational
    ball : (act, x) -> a ``flint.arb`` enclosure of sigma(x)
    latex : (act, var) -> LaTeX
    numpy : act -> (sigma, sigma') as numpy functions
    torch : act -> a ``torch.nn`` module (torch imported inside); None: ``torch_refusal`` says why
    torch_classes : ``torch.nn`` class names read as this activation; ``from_torch(mod, kind, where)`` -> spec
    onnx_ops : single ONNX operators read as it; ``from_onnx(op, attr)`` -> a name or a spec
        (``attr(key, default)`` reads the node's attribute)
    onnx_candidates : (label, spec) tried against an elementwise ONNX subgraph in float64
    to_onnx : (act, graph, x, li) -> the output name, emitting nodes with ``graph.node``,
        ``graph.fresh`` and ``graph.const``; None: no ONNX form
    """

    name: str
    kind: str
    rank: int
    make: Callable
    keys: tuple = ()
    required: tuple = ()
    aliases: tuple = ()
    shorthand: Callable | None = None
    params: Callable | None = None
    symmetry: str | None = None
    definition: str = ""
    identities: object = None
    piecewise_linear: bool = False
    slopes: Callable | None = None
    exact: Callable | None = None
    ball: Callable | None = None
    latex: Callable | None = None
    numpy: Callable | None = None
    torch: Callable | None = None
    torch_refusal: str = ""
    torch_classes: tuple = ()
    from_torch: Callable | None = None
    onnx_ops: tuple = ()
    from_onnx: Callable | None = None
    onnx_candidates: tuple = ()
    to_onnx: Callable | None = None

    def __repr__(self) -> str:
        return f"ActivationUnit({self.name!r})"


def _not_exact(name: str, t) -> NotExactError:
    return NotExactError(f"{name}({format_number(t)}) is irrational: the exact path proves {name} layers by "
                         "their symmetry identities and refutes with ball arithmetic, it never evaluates "
                         f"{name} in floats")


@dataclass(frozen=True, eq=False)
class Activation:
    """An exact activation: a polynomial with rational coefficients, ReLU, or a real activation.

    Attributes
    ----------
    kind : "polynomial", "relu" or "real" (:data:`REAL_ACTIVATIONS`)
    coeffs : coefficients from degree 0 up (polynomials only)
    spec : the JSON description it was built from (kept for files and certificates)
    """

    kind: str
    coeffs: tuple = ()
    spec: dict = field(default_factory=dict)

    # -- evaluation -----------------------------------------------------------------------
    def __call__(self, t):
        if self.kind == "polynomial":
            return self.compose(t, fmpq(0))
        if self.kind == "relu":
            return t if t > 0 else fmpq(0)
        return self._exact_value(fmpq(t))

    def _exact_value(self, t: fmpq) -> fmpq:
        """sigma(t) for a real activation where it is rational (its unit's ``exact``: at 0; leaky
        ReLU everywhere; ELU for t >= 0); elsewhere the value is irrational and
        :class:`NotExactError` is raised (balls: :meth:`ball`)."""
        exact = self.unit.exact
        if exact is None:
            raise _not_exact(self.name, t)
        return exact(self, t)

    @property
    def unit(self) -> ActivationUnit:
        """The declaration of this activation (:mod:`symeq.activations.registry`)."""
        return UNITS[self.name]

    @property
    def name(self) -> str:
        """The canonical name (the spec's ``"type"``)."""
        return self.spec.get("type", self.kind)

    @property
    def label(self) -> str:
        """The short name in reports: ``tanh_series(3)``, ``relu``, ``leaky_relu(1/100)``.

        >>> from symeq.activations import monomial, real
        >>> monomial(2).label, real("tanh").label, real("gelu", approximate="tanh").label
        ('monomial(2)', 'tanh', 'gelu(tanh)')
        """
        spec = self.spec
        arg = spec.get("order", spec.get("degree", spec.get("slope", spec.get("alpha", spec.get("approximate")))))
        return spec["type"] + (f"({arg})" if arg is not None else "")

    @property
    def is_real(self) -> bool:
        """A real (non-polynomial) activation of :data:`REAL_ACTIVATIONS`."""
        return self.kind == "real"

    @property
    def piecewise_linear(self) -> bool:
        """ReLU and leaky ReLU: exact on rationals, the linear-region machinery applies."""
        return self.unit.piecewise_linear

    @property
    def pl_slopes(self):
        """(slope for t < 0, slope for t > 0) of a piecewise-linear activation, None otherwise
        (the exact ReLU tools, :func:`symeq.relu.fdim.activation_slope`, ask this).

        >>> from symeq.activations import real, relu
        >>> relu().pl_slopes, real("leaky_relu", slope="1/10").pl_slopes, real("tanh").pl_slopes
        ((0, 1), (1/10, 1), None)
        """
        slopes = self.unit.slopes
        return None if slopes is None else slopes(self)

    def ball(self, x):
        """sigma(x) for a ball ``x`` (``flint.arb``): a rigorous enclosure at the context's precision.

        Used only to *refute* (a witness counts when a ball of f(g x) - g f(x) excludes 0); the
        standalone checker recomputes every enclosure with its own stdlib interval arithmetic.

        >>> from symeq.activations import monomial, polynomial, real, relu, sigmoid_series, tanh_series
        >>> from flint import arb
        >>> real("tanh").ball(arb(0)).is_zero(), real("sigmoid").ball(arb(0)) == arb(1) / 2
        (True, True)
        >>> real("gelu").ball(arb(1)).overlaps(arb("0.8413447460685429"))
        True
        """
        return self.unit.ball(self, x)

    def symmetry_holds(self, alpha, beta, q, c=0) -> bool:
        """Whether sigma(alpha t + beta) = q sigma(t) + c for every real t (real activations).

        Decided by the complete table :data:`symeq.activations.REAL_SYMMETRIES` (docs/theory.md,
        "Real activations"; its rows are the units' ``identities``, and it is read from the package
        at each call), so the answer is exact for rational alpha, beta, q, c.

        >>> from symeq.activations import monomial, polynomial, real, relu, sigmoid_series, tanh_series
        >>> real("tanh").symmetry_holds(-1, 0, -1), real("sigmoid").symmetry_holds(-1, 0, -1, 1)
        (True, True)
        >>> real("gelu").symmetry_holds(-1, 0, 1), real("leaky_relu").symmetry_holds(3, 0, 3)
        (False, True)
        """
        if self.kind != "real":
            raise InputError("symmetry_holds is for real activations; polynomials compare coefficients")
        alpha, beta, q, c = fmpq(alpha), fmpq(beta), fmpq(q), fmpq(c)
        from .. import activations

        table = activations.REAL_SYMMETRIES[self.name]
        if table == "positive":
            return alpha > 0 and beta == 0 and q == alpha and c == 0
        return any((alpha, beta, q, c) == tuple(fmpq(x) for x in row) for row in table)

    def compose(self, z, zero, deadline=None):
        """sigma(z) by Horner's rule for z in any ring (numbers, fmpq_mpoly) whose zero is ``zero``.

        The caller bounds the size first (:mod:`symeq.sizes`); ``deadline`` (a
        :class:`~symeq.budget.Deadline`) is checked between the Horner steps.
        """
        if self.kind != "polynomial":
            raise InputError("only polynomial activations compose with polynomials")
        acc = zero
        for c in reversed(self.coeffs):
            if deadline is not None:
                deadline.check("expanding a polynomial activation")
            acc = acc * z + c
        return acc

    @property
    def degree(self) -> int | None:
        """Polynomial degree (None for ReLU and the real activations)."""
        return None if self.kind != "polynomial" else len(self.coeffs) - 1

    @property
    def is_polynomial(self) -> bool:
        return self.kind == "polynomial"

    # -- symmetry ---------------------------------------------------------------------------
    @property
    def shift(self) -> fmpq:
        """The point s with sigma(t) = tau(t - s) and tau free of its degree d-1 term (0 off polynomials)."""
        if self.kind != "polynomial":
            return fmpq(0)
        d = self.degree
        if d is None or d < 2:
            return fmpq(0)
        return -self.coeffs[d - 1] / (d * self.coeffs[d])

    def _reduced(self) -> list[fmpq]:
        """Coefficients of tau(u) = sigma(u + s)."""
        s, c = self.shift, self.coeffs
        if s == 0:
            return list(c)
        # a Taylor shift by FLINT's polynomial composition: the sum over binomials is O(d^2) Python
        # operations, seconds at degree 1000 (the --max-degree default)
        shifted = fmpq_poly(list(c))(fmpq_poly([s, 1]))
        out = [fmpq(shifted[j]) for j in range(len(c))]
        return out

    @property
    def symmetry(self) -> str:
        """'generic', 'odd', 'even', 'monomial', 'odd-plus-constant', 'monomial-plus-constant', 'relu',
        'affine' or 'constant'.

        A "-plus-constant" class needs the offsets of :meth:`affine_admissible` (absorbed by the next
        layer's bias) for its symmetries beyond :meth:`admissible`.
        """
        if self.kind == "relu":
            return "relu"
        if self.kind == "real":
            return self.unit.symmetry
        d = self.degree
        if d == 0:
            return "constant"
        if d == 1:
            return "affine"
        tau = self._reduced()
        support = [k for k in range(d + 1) if tau[k] != 0]
        if support == [d]:
            return "monomial"
        if support == [0, d]:
            # c (t - s)^d + e: scalings of t - s up to the constant e (1 - alpha^d).  For even d this
            # is also even (alpha = -1 needs no offset): the larger group wins where biases exist.
            return "monomial-plus-constant"
        if all((d - k) % 2 == 0 for k in support):
            return "odd" if d % 2 else "even"
        if d % 2 and all((d - k) % 2 == 0 for k in support if k != 0):
            return "odd-plus-constant"
        return "generic"

    @property
    def latent_group(self) -> str:
        """Name of the latent group K acting on a layer with this activation (next layer with biases)."""
        return LATENT_GROUPS[self.symmetry]

    def group_name(self, bias: bool = True) -> str:
        """The latent group's name; ``bias=False``: its offset-free part (no bias absorbs offsets).

        >>> from symeq.activations import monomial, polynomial, real, relu, sigmoid_series, tanh_series
        >>> polynomial([0, 1, 1]).group_name(True)
        'monomial matrices acting affinely (y -> q y + e (1 - q), e = sigma(s))'
        >>> polynomial([0, 1, 1]).group_name(False), sigmoid_series(3).group_name(False)
        ('permutations', 'permutations')
        """
        sym = self.symmetry
        if bias or sym not in ("odd-plus-constant", "monomial-plus-constant"):
            if not bias and sym in ("odd", "even", "monomial") and self.shift != 0:
                return "permutations"  # alpha != 1 moves the pre-activation by s (1 - alpha): a bias
            return LATENT_GROUPS[sym]
        return "permutations"

    def continuous(self, bias: bool = True) -> bool:
        """Whether every alpha != 0 is a latent scaling (a continuous K: the fibre needs a gauge).

        Monomials c (t - s)^d: with biases, or without when s = 0 (alpha must fix the bias
        s (1 - alpha) = 0); monomials up to a constant: only with biases (the offsets); ReLU: the
        positive scalings.

        >>> from symeq.activations import monomial, polynomial, real, relu, sigmoid_series, tanh_series
        >>> monomial(3).continuous(False), polynomial([0, 1, 1]).continuous(True), polynomial([0, 1, 1]).continuous(False)
        (True, True, False)
        """
        sym = self.symmetry
        if sym == "monomial":
            return bias or self.shift == 0
        return sym == "relu" or (sym == "monomial-plus-constant" and bias)

    def finite_scalings(self, bias: bool = True) -> list:
        """The finitely many latent scalings alpha of one neuron (not for :meth:`continuous` ones).

        ``bias`` says whether the model has biases: they absorb the offsets (the next layer's) and the
        pre-activation shift s (1 - alpha) (the neuron's own).

        >>> from symeq.activations import monomial, polynomial, real, relu, sigmoid_series, tanh_series
        >>> sigmoid_series(3).finite_scalings(True), sigmoid_series(3).finite_scalings(False)
        ([1, -1], [1])
        >>> polynomial([0, 1, 1]).finite_scalings(False)    # t + t^2: alpha = -1 needs a bias for s = -1/2
        [1]
        >>> polynomial([0, 0, 1]).finite_scalings(False)    # t^2 is continuous; its finite part is +-1
        [1, -1]
        """
        if self.symmetry == "relu":
            return [fmpq(1)]
        if not bias and self.shift != 0:
            return [fmpq(1)]
        minus = self.affine_admissible(-1) if bias else self.admissible(-1)
        return [fmpq(1), fmpq(-1)] if minus is not None else [fmpq(1)]

    def admissible(self, alpha) -> fmpq | None:
        """The factor q with sigma(alpha t + s(1 - alpha)) = q sigma(t), or None if none.

        >>> from symeq.activations import monomial, polynomial, real, relu, sigmoid_series, tanh_series
        >>> tanh_series(3).admissible(-1), monomial(2).admissible(fmpq(-3)), relu().admissible(-1)
        (-1, 9, None)
        """
        alpha = fmpq(alpha)
        sym = self.symmetry
        if alpha == 1:
            return fmpq(1)
        if sym == "relu":
            return alpha if alpha > 0 else None
        if sym == "monomial":
            return alpha ** self.degree if alpha != 0 else None
        if sym in ("odd", "even") and alpha == -1:
            return fmpq(-1) if sym == "odd" else fmpq(1)
        if sym == "monomial-plus-constant" and alpha == -1 and self.degree % 2 == 0:
            return fmpq(1)  # (-u)^d = u^d: no offset (alpha^d = 1 has no other rational root)
        return None

    def affine_admissible(self, alpha):
        """(q, o) with sigma(alpha t + s(1 - alpha)) = q sigma(t) + o for all t, or None.

        Beyond :meth:`admissible` this allows the affine sign flips of activations that are odd
        up to a constant (sigmoid series, cubics): sigma(-t + 2s) = 2 sigma(s) - sigma(t).

        >>> from symeq.activations import monomial, polynomial, real, relu, sigmoid_series, tanh_series
        >>> sigmoid_series(3).affine_admissible(-1)
        (-1, 1)
        >>> tanh_series(3).affine_admissible(-1)
        (-1, 0)
        >>> polynomial([0, 1, 1]).affine_admissible(3)     # (3u)^2 - 1/4 = 9 (u^2 - 1/4) + 2
        (9, 2)
        """
        alpha = fmpq(alpha)
        q = self.admissible(alpha)
        if q is not None:
            return q, fmpq(0)
        if self.symmetry == "odd-plus-constant" and alpha == -1:
            return fmpq(-1), 2 * self(self.shift)
        if self.symmetry == "monomial-plus-constant" and alpha != 0:
            q = alpha ** self.degree
            return q, self(self.shift) * (1 - q)
        return None

    def affine_canonical_scale(self, vec) -> fmpq:
        """Like :meth:`canonical_scale`, with the affine scalings of the "-plus-constant" classes."""
        first = next((x for x in vec if x != 0), None)
        if self.symmetry == "odd-plus-constant":
            return fmpq(1) if first is None or first > 0 else fmpq(-1)
        if self.symmetry == "monomial-plus-constant":
            return fmpq(1) if first is None else first
        return self.canonical_scale(vec)

    def canonical_scale(self, vec) -> fmpq:
        """The admissible alpha whose inverse brings an affine form to its canonical representative.

        ``vec`` is the shifted pre-activation row [w | b - s].  Dividing it by the returned
        scale gives the unique representative of its orbit under admissible scalings.
        """
        sym = self.symmetry
        first = next((x for x in vec if x != 0), None)
        if first is None or sym in ("generic", "odd-plus-constant", "affine", "constant"):
            return fmpq(1)
        if sym in ("odd", "even") or (sym == "monomial-plus-constant" and self.degree % 2 == 0):
            return fmpq(1) if first > 0 else fmpq(-1)
        if sym == "monomial-plus-constant":
            return fmpq(1)
        if sym == "monomial":
            return first
        if sym == "relu":
            return first if first > 0 else -first
        raise AssertionError(sym)

    def scale_choices(self, rng):
        """A random admissible alpha (used by :func:`symeq.models.scramble`)."""
        sym = self.symmetry
        if sym in ("odd", "even", "odd-plus-constant"):
            return fmpq(rng.choice([1, -1]))
        if sym == "monomial-plus-constant":  # the offset-free ones (scramble keeps bias-free models so)
            return fmpq(rng.choice([1, -1])) if self.degree % 2 == 0 else fmpq(1)
        if sym == "monomial":
            return fmpq(rng.choice([1, -1]) * rng.randint(1, 4), rng.randint(1, 3))
        if sym == "relu":
            return fmpq(rng.randint(1, 5), rng.randint(1, 3))
        return fmpq(1)

    # -- display ----------------------------------------------------------------------------
    def to_spec(self) -> dict:
        return dict(self.spec)

    def __repr__(self) -> str:
        return f"Activation({self.spec})"

    def latex(self, var: str = "t") -> str:
        return self.unit.latex(self, var)

    def _repr_latex_(self) -> str:
        return f"$\\sigma(t) = {self.latex()}$"
