"""Fibres of parameters: the fibre ideal, Gröbner engines behind one interface, orbit comparison.

* :func:`fibre_ideal` -- the ideal of {theta' : f(.; theta') = f(.; theta)}, gauge-fixed;
* :func:`groebner` -- dimension and degree of an ideal (sympy, flint, Singular, giac, msolve; "auto");
* :mod:`.witness` -- fibre points and tangent directions: witnesses of non-identifiability;
* :func:`compare_with_orbit` -- the fibre against the orbit K . theta: identifiable or not
  (:func:`structural_decision` first: the equation count and inactive neurons, no Gröbner basis;
  :func:`gauge_completeness` after: no fibre point outside the gauge slice; docs/theory.md);
* :func:`tensor_identifiability` -- the same question for one hidden layer by Kruskal's theorem,
  with a ``symeq-identifiability/1`` certificate (docs/identifiability.md).
"""

from .ideal import FibreIdeal, GaugeFix, fibre_ideal, parameter_names, parameter_values
from .groebner import (GroebnerResult, available_engines, best_exact_engine, groebner, monomial_dimension,
                       standard_monomials)
from .orbit import (FibreComparison, StructuralDecision, compare_with_orbit, gauge_completeness, latent_orbit,
                    structural_decision)
from .witness import FibrePoint, line_in_fibre, slice_points, tangent_directions, zero_dimensional_points
from .tensor import TensorDecision, tensor_identifiability

__all__ = [
    "FibreIdeal",
    "GaugeFix",
    "fibre_ideal",
    "parameter_names",
    "parameter_values",
    "GroebnerResult",
    "available_engines",
    "groebner",
    "monomial_dimension",
    "standard_monomials",
    "FibreComparison",
    "compare_with_orbit",
    "latent_orbit",
    "StructuralDecision",
    "structural_decision",
    "gauge_completeness",
    "best_exact_engine",
    "FibrePoint",
    "zero_dimensional_points",
    "tangent_directions",
    "line_in_fibre",
    "slice_points",
    "TensorDecision",
    "tensor_identifiability",
]
