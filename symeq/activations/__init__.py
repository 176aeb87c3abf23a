"""Activation functions and the latent symmetry group K each one implies: one unit per activation.

Each activation is declared once, as an :class:`~symeq.activations.base.ActivationUnit` in the
module of its family, and registered (:mod:`symeq.activations.registry`): its spec keys and
aliases, its exact value where it has one and its arb ball, its float (numpy) and torch functions,
the ONNX operators and patterns that produce it, its LaTeX, its symmetry class and identity rows.
The exact path, the float path (:mod:`symeq.numeric`), the ONNX reader and writer and the torch
reader all ask the unit.  The families:

* :mod:`symeq.activations.polynomial`: polynomials, monomials and the exact Taylor polynomials of
  tanh and the sigmoid;
* :mod:`symeq.activations.relu`: ReLU and leaky ReLU (piecewise linear);
* :mod:`symeq.activations.real`: tanh, sigmoid, GELU, SiLU, softplus, ELU, erf;
* :mod:`symeq.activations.affine`: no activation, and the polynomials of degree <= 1;

with :mod:`symeq.activations.base` (the :class:`Activation` value and the polynomial symmetry
classes) and :mod:`symeq.activations.spec` (reading specs and command-line names).


An activation is an exact polynomial (given by coefficients, a monomial, or a Taylor
polynomial of tanh or the logistic sigmoid computed exactly), the exact ReLU, or one of the
real (transcendental or piecewise linear) activations of :data:`REAL_ACTIVATIONS`: ``tanh``,
``sigmoid``, ``gelu``, ``silu``, ``softplus``, ``elu``, ``leaky_relu`` and ``erf`` (kind
``"real"``).  A real activation is never evaluated in floats on the exact path: its layers are
proved by the identity table :data:`REAL_SYMMETRIES` (every (alpha, beta, q, c) with
sigma(alpha t + beta) = q sigma(t) + c, proved complete in docs/theory.md, "Real activations"),
and a refutation is a ball-arithmetic witness (the layers' ``ball_forward``, from each unit's
``ball``).  Its latent group K acts on a layer's neurons: a permutation together with, for each neuron, an affine
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

from types import MappingProxyType

from . import polynomial as _polynomial_family  # noqa: F401  (each family registers its units)
from . import relu as _relu_family  # noqa: F401
from . import real as _real_family  # noqa: F401
from .affine import degenerate_reason
from .base import LATENT_GROUPS, Activation, ActivationUnit
from .polynomial import monomial, polynomial, sigmoid_series, tanh_series, tanh_taylor
from .real import real
from .registry import aliases as _aliases
from .registry import names as _names
from .registry import units as _units
from .relu import relu
from .spec import _alias_spec, activation_from_spec, activation_from_text  # noqa: F401

__all__ = [
    "Activation",
    "ActivationUnit",
    "polynomial",
    "monomial",
    "tanh_series",
    "sigmoid_series",
    "relu",
    "real",
    "activation_from_spec",
    "activation_from_text",
    "tanh_taylor",
    "degenerate_reason",
    "REAL_ACTIVATIONS",
    "REAL_SYMMETRIES",
    "ACTIVATION_NAMES",
    "ALIASES",
    "LATENT_GROUPS",
]

#: The real activations (kind ``"real"``): name -> (symmetry class, definition), from their units.
#: The symmetry class is one of :attr:`Activation.symmetry`'s, so the derivation treats tanh like any
#: odd activation, the sigmoid like the sigmoid series (affine sign flips) and leaky ReLU like ReLU
#: (positive scalings).  The complete symmetry tables are :data:`REAL_SYMMETRIES`.
REAL_ACTIVATIONS = {u.name: (u.symmetry, u.definition) for u in _units("real")}

#: Every symmetry (alpha, beta, q, c) with sigma(alpha t + beta) = q sigma(t) + c for all real t,
#: of each real activation (the units' ``identities``; the proofs that the tables are complete:
#: docs/theory.md, "Real activations"); ``"positive"`` is leaky ReLU's family alpha > 0, beta = 0,
#: q = alpha, c = 0.  This is symeq's own copy, read-only, and :meth:`Activation.symmetry_holds`
#: reads it here at each call; the certificate checker keeps its own
#: (``symeq_check.real.REAL_SYMMETRY_TABLE``, with a self-test that evaluates every row), and
#: tests/checker/test_real_symmetry_tables.py holds the two equal and shows a wrong row in either is caught.
REAL_SYMMETRIES = MappingProxyType({u.name: u.identities for u in _units("real")})

#: Every activation name of model files (``"type"``), one spelling each.
ACTIVATION_NAMES = _names()

#: Old and alternative spellings of a ``"type"``: accepted, and written back in the canonical one.
ALIASES = _aliases()
