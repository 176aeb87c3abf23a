"""Built-in examples: the model ``symeq verify`` runs when given no file.

The default is a 2-hidden-layer MLP with the tanh Taylor polynomial t - t^3/3 on 2 x 3 images,
equivariant under the horizontal mirror (an autoencoder-like map R^6 -> R^6), built layerwise
equivariant with latent actions that include sign flips (signed permutations: self-symmetric
neurons, mirrored pairs, negated neurons and negated pairs), then scrambled by a random
element of prod K_i so that the structure is hidden.

>>> m = builtin_example()
>>> m.widths
[6, 8, 6, 6]
"""

from __future__ import annotations

from .activations import tanh_series
from .groups import mirror
from .models import random_equivariant_model, scramble
from .numbers import block_diag, matrix

__all__ = ["builtin_example", "EXAMPLES"]

_SWAP = matrix([[0, 1], [1, 0]])
_NEG_SWAP = matrix([[0, -1], [-1, 0]])
_ONE = matrix([[1]])
_NEG = matrix([[-1]])


def builtin_example(seed: int = 2026, scrambled: bool = True):
    """The built-in tanh-series mirror example (scrambled unless ``scrambled=False``)."""
    G = mirror(2, 3)
    latent1 = [block_diag(_ONE, _NEG, _SWAP, _SWAP, _NEG_SWAP)]   # width 8
    latent2 = [block_diag(_ONE, _NEG, _SWAP, _NEG_SWAP)]          # width 6
    m = random_equivariant_model(G, [latent1, latent2], tanh_series(3), rng=seed,
                                 name="tanh-series MLP on mirrored 2x3 images")
    if scrambled:
        m, _ = scramble(m, rng=seed + 1)
        m.name = "tanh-series MLP on mirrored 2x3 images (scrambled)"
    return m


EXAMPLES = {"mirror-tanh": builtin_example}
