"""Specs of every activation, for the generic tests of tests/activations/.

The activations are discovered from symeq's registry of activation units
(:func:`registered_activations`); each needs an entry in :data:`SPECS` here, or the generic tests
fail for it by name (adding an activation puts it under test).  An entry lists a few specs of
the activation (its parameters at their defaults and at other values).
"""

from __future__ import annotations

from fractions import Fraction

from flint import fmpq


def registered_activations() -> tuple[str, ...]:
    """Every canonical activation ``"type"`` symeq registers."""
    try:
        from symeq.activations import registry
    except ImportError:  # before the registry of activation units (issue 26 item 3)
        from symeq.activations import ACTIVATION_NAMES

        return tuple(ACTIVATION_NAMES)
    return tuple(registry.names())


def unit(name: str):
    """The activation's unit (None where symeq has no registry of units)."""
    try:
        from symeq.activations import registry
    except ImportError:
        return None
    return registry.unit(name)


#: name -> specs to test it at.  A registered activation missing here fails the generic tests by name.
SPECS = {
    "polynomial": [{"type": "polynomial", "coeffs": ["0", "1", "1/2", "-1/3"]},   # generic
                   {"type": "polynomial", "coeffs": ["-3", "5", "-3", "1"]},      # odd about t = 1
                   {"type": "polynomial", "coeffs": ["0", "1", "1"]},             # monomial up to a constant
                   {"type": "polynomial", "coeffs": ["2", "-6", "7", "-4", "1"]}],  # even about t = 1
    "monomial": [{"type": "monomial", "degree": 2}, {"type": "monomial", "degree": 3}],
    "tanh_series": [{"type": "tanh_series", "order": 3}, {"type": "tanh_series", "order": 5}],
    "sigmoid_series": [{"type": "sigmoid_series", "order": 3}, {"type": "sigmoid_series", "order": 5}],
    "relu": [{"type": "relu"}],
    "tanh": [{"type": "tanh"}],
    "sigmoid": [{"type": "sigmoid"}],
    "gelu": [{"type": "gelu"}, {"type": "gelu", "approximate": "tanh"}],
    "silu": [{"type": "silu"}],
    "softplus": [{"type": "softplus"}],
    "elu": [{"type": "elu"}, {"type": "elu", "alpha": "3/2"}],
    "leaky_relu": [{"type": "leaky_relu"}, {"type": "leaky_relu", "slope": "1/5"}],
    "erf": [{"type": "erf"}],
}

#: rational points the identities and balls are evaluated at (both signs, 0, fractions, |t| up to 3)
POINTS = [fmpq(0), fmpq(1, 3), fmpq(-1, 2), fmpq(7, 5), fmpq(-2), fmpq(3), fmpq(-5, 7), fmpq(1, 10)]

#: (alpha, beta, q, c) rows tried against every real activation's table: a row the table does not
#: hold must be refuted by the balls at some point (so a wrong row in the table would be caught)
CANDIDATE_ROWS = [(1, 0, 1, 0), (-1, 0, -1, 0), (-1, 0, 1, 0), (-1, 0, -1, 1), (2, 0, 2, 0), (1, 1, 1, 0),
                  (-1, 0, 1, 1)]

#: scalings alpha tried against every polynomial and ReLU activation
ALPHAS = [fmpq(1), fmpq(-1), fmpq(2), fmpq(1, 3), fmpq(-3, 2)]


def as_float(t) -> float:
    return float(Fraction(int(t.p), int(t.q)))
