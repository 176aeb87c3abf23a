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

from .generate import random_equivariant_numeric, scramble_numeric
from .layerwise import compare_with_exact, derive_latent_actions_numeric, paper_metric, project_to_latent_group
from .models import (NumericActivation, NumericDenseLayer, NumericGroup, NumericModel, from_exact, from_torch,
                     load_numeric_model, model_from_json, numeric_activation)
from .monomial import MonomialAction

__all__ = [
    "NumericActivation", "NumericDenseLayer", "NumericGroup", "NumericModel", "MonomialAction",
    "from_exact", "from_torch", "load_numeric_model", "model_from_json", "numeric_activation",
    "random_equivariant_numeric", "scramble_numeric",
    "derive_latent_actions_numeric", "compare_with_exact", "paper_metric", "project_to_latent_group",
]
