"""torch pieces of the numeric backend (torch extra): a polynomial activation module.

The module class is declared with the polynomial activations (:func:`symeq.activations.polynomial.
torch_polynomial_class`, built when torch is first asked for); :class:`Polynomial` here is that
class.  Importable without torch (so that ``pytest --doctest-modules`` collects it everywhere);
using :class:`Polynomial` without torch raises :class:`symeq.errors.EngineMissing`.  Tested against
the numpy evaluation in tests/numeric/test_numeric_torch.py.
"""

from __future__ import annotations

from ..errors import EngineMissing

__all__ = ["Polynomial"]

try:
    import torch
except ImportError:  # pragma: no cover - exercised only where torch is absent
    torch = None


if torch is not None:
    from ..activations.polynomial import torch_polynomial_class

    Polynomial = torch_polynomial_class()
else:
    class Polynomial:  # pragma: no cover
        def __init__(self, *args, **kwargs):
            raise EngineMissing("polynomial torch modules need torch: pip install 'symeq[numeric]'")
