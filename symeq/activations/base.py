"""Activation functions and the latent symmetry group K each one implies.

An activation is an exact polynomial (given by coefficients, a monomial, or a Taylor
polynomial of tanh or the logistic sigmoid computed exactly), the exact ReLU, or one of the
real (transcendental or piecewise linear) activations of :data:`REAL_ACTIVATIONS`: ``tanh``,
``sigmoid``, ``gelu``, ``silu``, ``softplus``, ``elu``, ``leaky_relu`` and ``erf`` (kind
``"real"``).  A real activation is never evaluated in floats on the exact path: its layers are
proved by the identity table :data:`REAL_SYMMETRIES` (every (alpha, beta, q, c) with
sigma(alpha t + beta) = q sigma(t) + c, proved complete in docs/theory.md, "Real activations"),
and a refutation is a ball-arithmetic witness (:mod:`symeq.realfun`).  Its latent
group K acts on a layer's neurons: a permutation together with, for each neuron, an affine
change of the pre-activation ``z -> alpha z + beta`` that multiplies the post-activation by a
factor ``q``, i.e. ``sigma(alpha t + beta) = q sigma(t)`` for all t.  Which ``alpha`` are
admissible is decided from the coefficients (docs/theory.md, "Latent symmetries K_i"):

* generic polynomial: only ``alpha = 1``  -> K = permutations S_n;
* odd (after a shift of t), e.g. tanh series: ``alpha = +-1``, ``q = alpha`` -> signed permutations;
* even (after a shift): ``alpha = +-1``, ``q = 1`` -> permutations after the activation;
* monomial ``c (t - s)^d``: any ``alpha != 0``, ``q = alpha^d`` -> monomial matrices (gauge);
* ReLU: ``alpha > 0``, ``q = alpha`` -> positive monomial matrices;
* sigmoid series (and every cubic with a linear term after the shift): odd up to a shift and a constant,
  ``sigma(-t) = 1 - sigma(t)``: sign flips act *affinely* on the post-activation space,
  y -> 2 sigma(s) - y; K = signed permutations acting affinely (the derivation and the
  certificates carry the offsets);
* monomial up to a constant ``c (t - s)^d + e`` with ``e != 0``, e.g. ``t + t^2 = (t + 1/2)^2 - 1/4``:
  any ``alpha != 0``, ``q = alpha^d`` and offset ``o = e (1 - alpha^d)`` -> monomial matrices
  acting affinely (gauge, like monomials).

The absorbed-constant rule (one rule for every class, docs/theory.md): a latent action may add a
constant vector o to a hidden layer's output (``sigma(alpha t + beta) = q sigma(t) + o``) exactly
when the *next* layer has biases, which absorb it (b -> b - W o / q; for the last hidden layer the
output bias).  Without biases only the offset-free part counts: :meth:`Activation.admissible`
(linear actions) against :meth:`Activation.affine_admissible` (with offsets); which one applies is
chosen with ``bias`` in :meth:`Activation.finite_scalings`, :meth:`Activation.continuous`
and :meth:`Activation.group_name`.

Why the shift: writing ``sigma(t) = tau(t - s)`` with ``s = -c_{d-1} / (d c_d)`` removes the
degree d-1 term, and an affine self-map of a polynomial of degree d >= 2 must then fix ``s``
(compare the degree d-1 coefficients), so ``beta = s (1 - alpha)``.

Examples
--------
>>> list(tanh_series(7).coeffs)
[0, 1, 0, -1/3, 0, 2/15, 0, -17/315]
>>> tanh_series(5).symmetry, tanh_series(5).latent_group
('odd', 'signed permutations')
>>> polynomial([0, 1, 1, 0, 1]).symmetry     # t + t^2 + t^4
'generic'
>>> polynomial([0, 0, 1, 1]).symmetry        # t^3 + t^2: odd up to a shift and a constant
'odd-plus-constant'
>>> polynomial([0, 1, 1]).symmetry           # t + t^2 = (t + 1/2)^2 - 1/4
'monomial-plus-constant'
>>> polynomial([1, 0, 1, 0, 1]).symmetry     # 1 + t^2 + t^4: even, the constant needs no offset
'even'
>>> polynomial([1, 2, 1]).symmetry   # (t + 1)^2 is a shifted monomial
'monomial'
>>> list(sigmoid_series(5).coeffs)
[1/2, 1/4, 0, -1/48, 0, 1/480]
>>> relu().latent_group
'positive monomial matrices'
>>> real("tanh").symmetry, real("sigmoid").latent_group, real("gelu").latent_group
('odd', 'signed permutations acting affinely (sign flips y -> 2 sigma(s) - y)', 'permutations')
>>> activation_from_spec("tanh3").to_spec()      # an old spelling of the Taylor polynomial
{'type': 'tanh_series', 'order': 3}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from flint import fmpq, fmpq_poly

from ..errors import InputError, NotExactError
from ..numbers import format_number, parse_number
from ..schema import check_keys, close_names
from ..sizes import check_degree

__all__ = [
    "Activation",
    "polynomial",
    "monomial",
    "tanh_series",
    "sigmoid_series",
    "relu",
    "real",
    "activation_from_spec",
    "activation_from_text",
    "tanh_taylor",
    "REAL_ACTIVATIONS",
    "REAL_SYMMETRIES",
    "ACTIVATION_NAMES",
]

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


#: The real activations (kind ``"real"``): name -> (symmetry class, definition).  The symmetry
#: class is one of :attr:`Activation.symmetry`'s, so the derivation treats tanh like any odd
#: activation, the sigmoid like the sigmoid series (affine sign flips) and leaky ReLU like ReLU
#: (positive scalings).  The complete symmetry tables are :data:`REAL_SYMMETRIES`.
REAL_ACTIVATIONS = {
    "tanh": ("odd", "tanh(t)"),
    "sigmoid": ("odd-plus-constant", "1 / (1 + exp(-t)), the logistic sigmoid"),
    "gelu": ("generic", "t Phi(t) = t (1 + erf(t / sqrt 2)) / 2; with \"approximate\": \"tanh\": "
                        "t (1 + tanh(sqrt(2 / pi) (t + 0.044715 t^3))) / 2"),
    "silu": ("generic", "t sigmoid(t) (also called swish)"),
    "softplus": ("generic", "log(1 + exp(t))"),
    "elu": ("generic", "t for t > 0, alpha (exp(t) - 1) for t <= 0 (\"alpha\": a nonzero rational, default 1)"),
    "leaky_relu": ("relu", "t for t > 0, slope t for t <= 0 (\"slope\": a rational other than 1 and -1, "
                           "default 1/100)"),
    "erf": ("odd", "erf(t) = (2 / sqrt pi) int_0^t exp(-u^2) du"),
}

#: Every symmetry (alpha, beta, q, c) with sigma(alpha t + beta) = q sigma(t) + c for all real t,
#: of each real activation (the proofs that the tables are complete: docs/theory.md, "Real
#: activations"); ``"positive"`` is leaky ReLU's family alpha > 0, beta = 0, q = alpha, c = 0.
#: This is symeq's own copy, read-only; the certificate checker keeps its own
#: (``symeq_check.real.REAL_SYMMETRY_TABLE``, with a self-test that evaluates every row), and
#: tests/test_real_symmetry_tables.py holds the two equal and shows a wrong row in either is caught.
REAL_SYMMETRIES = MappingProxyType({
    "tanh": ((1, 0, 1, 0), (-1, 0, -1, 0)),      # odd
    "erf": ((1, 0, 1, 0), (-1, 0, -1, 0)),       # odd
    "sigmoid": ((1, 0, 1, 0), (-1, 0, -1, 1)),   # sigma(-t) = 1 - sigma(t)
    "gelu": ((1, 0, 1, 0),),                     # gelu(-t) = gelu(t) - t is not of this form
    "silu": ((1, 0, 1, 0),),
    "softplus": ((1, 0, 1, 0),),
    "elu": ((1, 0, 1, 0),),
    "leaky_relu": "positive",                    # positively homogeneous
})

#: Every activation name of model files (``"type"``), one spelling each.
ACTIVATION_NAMES = ("polynomial", "monomial", "tanh_series", "sigmoid_series", "relu") + tuple(REAL_ACTIVATIONS)


def tanh_taylor(order: int) -> list[fmpq]:
    """Exact Taylor coefficients of tanh up to t^order, from tanh' = 1 - tanh^2.

    Comparing coefficients of t^k gives (k+1) a_{k+1} = [k = 0] - sum_{i+j=k} a_i a_j.
    """
    a = [fmpq(0)] * (order + 1)
    for k in range(order):
        s = fmpq(1 if k == 0 else 0) - sum((a[i] * a[k - i] for i in range(k + 1)), fmpq(0))
        a[k + 1] = s / (k + 1)
    return a


def _trim(coeffs: list[fmpq]) -> list[fmpq]:
    c = list(coeffs)
    while len(c) > 1 and c[-1] == 0:
        c.pop()
    return c


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
        if self.kind == "relu":
            return t if t > 0 else fmpq(0)
        if self.kind == "real":
            return self._exact_value(fmpq(t))
        return self.compose(t, fmpq(0))

    def _exact_value(self, t: fmpq) -> fmpq:
        """sigma(t) for a real activation where it is rational (at 0; leaky ReLU everywhere;
        ELU for t >= 0); elsewhere the value is irrational and :class:`NotExactError` is raised
        (balls: :mod:`symeq.realfun`)."""
        name = self.name
        if name == "leaky_relu":
            return t if t > 0 else fmpq(self.spec["slope"]) * t
        if name == "elu" and t >= 0:
            return t
        if t == 0 and name != "softplus":
            return fmpq(1, 2) if name == "sigmoid" else fmpq(0)
        raise NotExactError(f"{name}({format_number(t)}) is irrational: the exact path proves {name} layers by "
                            "their symmetry identities and refutes with ball arithmetic, it never evaluates "
                            f"{name} in floats")

    @property
    def name(self) -> str:
        """The canonical name (the spec's ``"type"``)."""
        return self.spec.get("type", self.kind)

    @property
    def is_real(self) -> bool:
        """A real (non-polynomial) activation of :data:`REAL_ACTIVATIONS`."""
        return self.kind == "real"

    @property
    def piecewise_linear(self) -> bool:
        """ReLU and leaky ReLU: exact on rationals, the linear-region machinery applies."""
        return self.kind == "relu" or self.name == "leaky_relu"

    def ball(self, x):
        """sigma(x) for a ball ``x`` (``flint.arb``): a rigorous enclosure at the context's precision.

        Used only to *refute* (a witness counts when a ball of f(g x) - g f(x) excludes 0); the
        standalone checker recomputes every enclosure with its own stdlib interval arithmetic.

        >>> from flint import arb
        >>> real("tanh").ball(arb(0)).is_zero(), real("sigmoid").ball(arb(0)) == arb(1) / 2
        (True, True)
        >>> real("gelu").ball(arb(1)).overlaps(arb("0.8413447460685429"))
        True
        """
        from flint import arb

        if self.kind == "polynomial":
            acc = arb(0)
            for c in reversed(self.coeffs):
                acc = acc * x + arb(c)
            return acc
        name = self.name
        if name in ("relu", "leaky_relu", "elu"):
            slope = arb(fmpq(self.spec["slope"])) if name == "leaky_relu" else arb(0)

            def neg(y):
                return arb(fmpq(self.spec["alpha"])) * y.expm1() if name == "elu" else slope * y

            if x > 0:
                return x
            if x < 0:
                return neg(x)
            return x.union(neg(x))  # x contains 0: both branches (each enclosure contains its piece)
        if name == "tanh":
            return x.tanh()
        if name == "erf":
            return x.erf()
        if name == "sigmoid":
            return 1 / (1 + (-x).exp())
        if name == "silu":
            return x / (1 + (-x).exp())
        if name == "softplus":
            return x.exp().log1p()
        if name == "gelu":
            if self.spec.get("approximate") == "tanh":
                k = (arb(2) / arb.pi()).sqrt()
                return x / 2 * (1 + (k * (x + arb(fmpq(44715, 1000000)) * x * x * x)).tanh())
            return x / 2 * (1 + (x / arb(2).sqrt()).erf())
        raise AssertionError(name)

    def symmetry_holds(self, alpha, beta, q, c=0) -> bool:
        """Whether sigma(alpha t + beta) = q sigma(t) + c for every real t (real activations).

        Decided by the complete table :data:`REAL_SYMMETRIES` (docs/theory.md, "Real
        activations"), so the answer is exact for rational alpha, beta, q, c.

        >>> real("tanh").symmetry_holds(-1, 0, -1), real("sigmoid").symmetry_holds(-1, 0, -1, 1)
        (True, True)
        >>> real("gelu").symmetry_holds(-1, 0, 1), real("leaky_relu").symmetry_holds(3, 0, 3)
        (False, True)
        """
        if self.kind != "real":
            raise InputError("symmetry_holds is for real activations; polynomials compare coefficients")
        alpha, beta, q, c = fmpq(alpha), fmpq(beta), fmpq(q), fmpq(c)
        table = REAL_SYMMETRIES[self.name]
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
            return REAL_ACTIVATIONS[self.name][0]
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
        if self.kind == "relu":
            return rf"\max(0, {var})"
        if self.kind == "real":
            return _REAL_LATEX[self.name](var, self.spec)
        import sympy

        t = sympy.Symbol(var)
        expr = sum(sympy.Rational(int(c.p), int(c.q)) * t**k for k, c in enumerate(self.coeffs))
        return sympy.latex(expr)

    def _repr_latex_(self) -> str:
        return f"$\\sigma(t) = {self.latex()}$"


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


def relu() -> Activation:
    """The exact ReLU max(0, t) (piecewise linear)."""
    return Activation("relu", (), {"type": "relu"})


def real(name: str, **params) -> Activation:
    """A real activation of :data:`REAL_ACTIVATIONS` by its canonical name.

    ``gelu`` takes ``approximate="none"`` (default, the erf form) or ``"tanh"``; ``elu`` takes
    ``alpha`` (a nonzero rational, default 1); ``leaky_relu`` takes ``slope`` (a rational other
    than 1 and -1, default 1/100).

    >>> real("leaky_relu").to_spec()
    {'type': 'leaky_relu', 'slope': '1/100'}
    >>> real("leaky_relu", slope="1/5")(fmpq(-2))
    -2/5
    >>> real("gelu", approximate="tanh").to_spec()
    {'type': 'gelu', 'approximate': 'tanh'}
    """
    if name not in REAL_ACTIVATIONS:
        close = close_names(name, ACTIVATION_NAMES)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise InputError(f"unknown real activation {name!r}{hint}; real ones: {', '.join(REAL_ACTIVATIONS)}")
    spec = {"type": name}
    allowed = {"gelu": ("approximate",), "elu": ("alpha",), "leaky_relu": ("slope",)}.get(name, ())
    for key in params:
        if key not in allowed:
            raise InputError(f"{name} takes no parameter {key!r}" + (f"; it takes {', '.join(allowed)}" if allowed else ""))
    if name == "gelu":
        approx = params.get("approximate", "none")
        if approx not in ("none", "tanh"):
            raise InputError(f"gelu \"approximate\" is \"none\" (the erf form) or \"tanh\", got {approx!r}")
        if approx == "tanh":
            spec["approximate"] = "tanh"
    elif name == "elu":
        alpha = parse_number(params.get("alpha", "1"), "elu alpha")
        if alpha == 0:
            raise InputError("elu alpha must be nonzero (alpha = 0 is relu: use {\"type\": \"relu\"})")
        spec["alpha"] = format_number(alpha)
    elif name == "leaky_relu":
        slope = parse_number(params.get("slope", "1/100"), "leaky_relu slope")
        if slope == 1:
            raise InputError("leaky_relu slope 1 is the identity: a linear layer (omit the activation)")
        if slope == -1:
            raise InputError("leaky_relu slope -1 is |t|, whose latent group (all nonzero scalings with q = |alpha|) "
                             "symeq does not model; use another slope")
        spec["slope"] = format_number(slope)
    return Activation("real", (), spec)


def _latex_gelu(v, spec):
    if spec.get("approximate") == "tanh":
        return rf"\tfrac{{{v}}}{{2}}\bigl(1 + \tanh(\sqrt{{2/\pi}}\,({v} + 0.044715\,{v}^3))\bigr)"
    return rf"{v}\,\Phi({v})"


_REAL_LATEX = {
    "tanh": lambda v, s: rf"\tanh({v})",
    "sigmoid": lambda v, s: rf"\frac{{1}}{{1 + e^{{-{v}}}}}",
    "gelu": _latex_gelu,
    "silu": lambda v, s: rf"\frac{{{v}}}{{1 + e^{{-{v}}}}}",
    "softplus": lambda v, s: rf"\log(1 + e^{{{v}}})",
    "elu": lambda v, s: rf"\begin{{cases}} {v} & {v} > 0 \\ {s['alpha']}\,(e^{{{v}}} - 1) & {v} \le 0 \end{{cases}}",
    "leaky_relu": lambda v, s: rf"\max({v}, {s['slope']}\,{v})" if fmpq(s["slope"]) < 1 else
    rf"\min({v}, {s['slope']}\,{v})",
    "erf": lambda v, s: rf"\operatorname{{erf}}({v})",
}

# name -> (allowed keys besides "type", required ones, maker)
_MAKERS = {
    "polynomial": (("coeffs",), ("coeffs",), lambda s: polynomial(s["coeffs"])),
    "monomial": (("degree",), ("degree",), lambda s: monomial(s["degree"])),
    "tanh_series": (("order",), ("order",), lambda s: tanh_series(s["order"])),
    "sigmoid_series": (("order",), ("order",), lambda s: sigmoid_series(s["order"])),
    "relu": ((), (), lambda s: relu()),
    "gelu": (("approximate",), (), lambda s: real("gelu", **{k: v for k, v in s.items() if k != "type"})),
    "elu": (("alpha",), (), lambda s: real("elu", **{k: v for k, v in s.items() if k != "type"})),
    "leaky_relu": (("slope",), (), lambda s: real("leaky_relu", **{k: v for k, v in s.items() if k != "type"})),
}
for _name in REAL_ACTIVATIONS:
    _MAKERS.setdefault(_name, ((), (), lambda s, _n=_name: real(_n)))

#: Old and alternative spellings of a ``"type"``: accepted, and written back in the canonical one.
ALIASES = {"logistic": "sigmoid", "swish": "silu", "leakyrelu": "leaky_relu", "leaky-relu": "leaky_relu",
           "taylor_tanh": "tanh_series", "poly": "polynomial"}


def _alias_spec(name: str):
    """A spec for a shorthand name: ``tanh3`` -> tanh_series order 3, ``sigmoid5`` -> sigmoid_series
    order 5, ``tanh_series:3``, ``monomial:2``, ``polynomial:0,1,1``, or an alias; None if unknown."""
    base, sep, arg = name.partition(":")
    for series in ("tanh", "sigmoid"):
        if base.startswith(series) and base[len(series):].isdigit():
            return {"type": f"{series}_series", "order": int(base[len(series):])}
    if sep and base in ("tanh", "sigmoid"):  # the old shorthand tanh:3, sigmoid:5 (Taylor polynomials)
        base += "_series"
    base = ALIASES.get(base, base)
    if not sep:
        return {"type": base} if base in _MAKERS and not _MAKERS[base][1] else None
    if base in ("tanh_series", "sigmoid_series", "monomial"):
        key = "degree" if base == "monomial" else "order"
        try:
            return {"type": base, key: int(arg)}
        except ValueError:
            raise InputError(f"expected an integer after ':' in {name!r}") from None
    if base == "polynomial":
        return {"type": "polynomial", "coeffs": [c.strip() for c in arg.split(",")]}  # "0, 1, 2" on a command line
    if base in ("elu", "leaky_relu"):
        return {"type": base, "alpha" if base == "elu" else "slope": arg.strip()}
    if base == "gelu":
        return {"type": "gelu", "approximate": arg}
    return None


def activation_from_text(text: str, where: str = "--activation") -> Activation:
    """An activation from the command line: a name, a shorthand or a JSON object.

    ``tanh`` is the real tanh; its Taylor polynomials are ``tanh_series:3`` (old spellings
    ``tanh3`` and ``tanh:3``), likewise ``sigmoid`` and ``sigmoid_series:5`` (``sigmoid:5``); ``monomial:2``,
    ``polynomial:0,1,1``, ``leaky_relu:1/10``, ``elu:2``, ``gelu:tanh``.

    >>> activation_from_text("tanh").to_spec(), activation_from_text("tanh3").to_spec()
    ({'type': 'tanh'}, {'type': 'tanh_series', 'order': 3})
    >>> activation_from_text("leaky_relu:1/10").to_spec()
    {'type': 'leaky_relu', 'slope': '1/10'}
    """
    import json

    text = text.strip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{where}: malformed JSON ({e.msg})") from None
        return activation_from_spec(spec, where)
    spec = _alias_spec(text)
    if spec is None:
        close = close_names(text.partition(":")[0], list(_MAKERS) + list(ALIASES))
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise InputError(f"{where}: unknown activation {text!r}{hint}; names: {', '.join(ACTIVATION_NAMES)} "
                         "(tanh_series:3, monomial:2, polynomial:0,1,1, leaky_relu:1/10 take an argument), or JSON")
    return activation_from_spec(spec, where)


def activation_from_spec(spec, where: str = "activation") -> Activation | None:
    """Build an activation from its JSON description (None stays None: an affine layer).

    Read strictly: an unknown ``"type"`` is refused with the closest names, an unknown key with
    the keys allowed there (:func:`symeq.schema.check_keys`); a string is a name or a shorthand
    (``"tanh"``, ``"tanh3"``).

    >>> activation_from_spec({"type": "tanh", "order": 3})
    Traceback (most recent call last):
    ...
    symeq.errors.InputError: activation: unknown key "order"; allowed here: "type"
    >>> activation_from_spec({"type": "tahn"})
    Traceback (most recent call last):
    ...
    symeq.errors.InputError: unknown activation type 'tahn' at activation (did you mean tanh?); known: polynomial, monomial, tanh_series, sigmoid_series, relu, tanh, sigmoid, gelu, silu, softplus, elu, leaky_relu, erf
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        alias = _alias_spec(spec)
        spec = alias if alias is not None else {"type": spec}
    if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
        raise InputError(f"{where} must be an object with a \"type\" (a string), got {str(spec)[:200]}")
    name = spec["type"]
    if name not in _MAKERS and name in ALIASES:
        spec = dict(spec, type=ALIASES[name])
        name = spec["type"]
    entry = _MAKERS.get(name)
    if entry is None:
        close = close_names(name, list(_MAKERS) + list(ALIASES))
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise InputError(f"unknown activation type {name!r} at {where}{hint}; known: {', '.join(ACTIVATION_NAMES)}")
    allowed, required, maker = entry
    check_keys(spec, where, ("type",) + allowed, required, error=InputError)
    try:
        return maker(spec)
    except InputError as e:
        raise InputError(f"{e} (at {where})") from None
