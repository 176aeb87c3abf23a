"""The numeric twin of symeq: float models, layerwise analysis and functional dimension.

Same model interface as :mod:`symeq.models` over numpy float64 (torch optional), with a
tolerance where the exact path uses equality.  Nothing here says "verified": results are
residuals, margins and errors (the exact path is the source of truth; docs/architecture.md).

Modules: :mod:`~symeq.numeric.models` (layers, models, loading), :mod:`~symeq.numeric.generate`
(random layerwise-equivariant float models, scrambling), :mod:`~symeq.numeric.layerwise`
(derivation of the actions, the paper's metric, projection to K_i), :mod:`~symeq.numeric.fdim`
(functional dimension: dense SVD, or matrix-free up to 10^5+ parameters), :mod:`~symeq.numeric.train` and :mod:`~symeq.numeric.experiment`
(torch extra: training with a soft mirror-equivariance loss, the paper's experiment on digits).
"""

__all__ = [
    "NumericActivation", "NumericDenseLayer", "NumericGroup", "NumericModel", "MonomialAction",
    "from_exact", "from_torch", "load_numeric_model", "model_from_json", "numeric_activation",
    "random_equivariant_numeric", "scramble_numeric",
    "derive_latent_actions_numeric", "compare_with_exact", "paper_metric", "project_to_latent_group",
]


def __getattr__(name: str):
    """The public names (and the submodules ``generate``, ``layerwise``, ``models``, ``monomial``), imported
    on first use (PEP 562): a kind's float unit (``symeq/layers/<kind>/floating.py``) uses the low modules
    here (:mod:`~symeq.numeric.match`, :mod:`~symeq.numeric.monomial`, :mod:`~symeq.numeric.floats`), and
    importing them must not import the float model above the kinds."""
    if name not in __all__ and name not in ("generate", "layerwise", "models", "monomial"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .generate import random_equivariant_numeric, scramble_numeric
    from .layerwise import compare_with_exact, derive_latent_actions_numeric, paper_metric, project_to_latent_group
    from .models import (NumericActivation, NumericDenseLayer, NumericGroup, NumericModel, from_exact, from_torch,
                         load_numeric_model, model_from_json, numeric_activation)
    from .monomial import MonomialAction

    public = locals()
    globals().update({k: public[k] for k in __all__})
    return globals()[name]  # (the submodules: set by their import)


def __dir__():
    return sorted(set(globals()) | set(__all__))
