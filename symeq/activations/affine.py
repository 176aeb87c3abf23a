"""The affine end of the activations: no activation at all (``None`` in a model file: the layer is
affine, its latent group is that of the next layer's input) and the polynomials of degree 0 and 1
(symmetry classes ``"constant"`` and ``"affine"``, :data:`~symeq.activations.base.LATENT_GROUPS`),
which the exact path takes as they are and the float path refuses (no monomial latent group to
match in floats).

>>> from symeq.activations import polynomial
>>> degenerate_reason(polynomial([1, 2]), "layer 1") is not None, degenerate_reason(polynomial([0, 0, 1]), "x")
(True, None)
"""

from __future__ import annotations

__all__ = ["DEGENERATE", "degenerate_reason"]

#: the symmetry classes of activations that are affine maps (degree <= 1)
DEGENERATE = ("affine", "constant")


def degenerate_reason(act, where: str) -> str | None:
    """Why the float path refuses ``act`` (an affine or constant polynomial), or None."""
    if act.kind == "polynomial" and act.symmetry in DEGENERATE:
        return (f"{where}: a {act.symmetry} activation has no monomial latent group; "
                "use a polynomial of degree >= 2, tanh, gelu, sigmoid or relu")
    return None
