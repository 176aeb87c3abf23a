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

# eager: the Gröbner registry is light, and ``symeq.fibre.groebner`` must stay the function (a lazily
# imported subpackage would bind its own name on the package)
from .groebner import (GroebnerResult, available_engines, best_exact_engine, groebner, monomial_dimension,
                       standard_monomials)

#: the public names of the heavier submodules, imported on first use (``symeq fibre`` and ``symeq check``
#: need none of them to build their options, and the ideal pulls in sympy)
_LAZY = ("FibreIdeal", "GaugeFix", "fibre_ideal", "parameter_names", "parameter_values",
         "FibreComparison", "StructuralDecision", "compare_with_orbit", "gauge_completeness", "latent_orbit",
         "structural_decision", "FibrePoint", "line_in_fibre", "slice_points", "tangent_directions",
         "zero_dimensional_points", "TensorDecision", "tensor_identifiability")


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import ideal, orbit, tensor, witness

    for module in (ideal, orbit, tensor, witness):
        globals().update({n: getattr(module, n) for n in _LAZY if hasattr(module, n)})
    return globals()[name]


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


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
