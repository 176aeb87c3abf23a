"""torch pieces of the numeric backend (torch extra): a polynomial activation module, and the torch
modules of a float layer with dense rows (:func:`linear_torch_modules`).

The module class is declared with the polynomial activations (:func:`symeq.activations.polynomial.
torch_polynomial_class`, built when torch is first asked for); :class:`Polynomial` here is that
class.  Importable without torch (so that ``pytest --doctest-modules`` collects it everywhere);
using :class:`Polynomial` without torch raises :class:`symeq.errors.EngineMissing`.  Tested against
the numpy evaluation in tests/numeric/test_numeric_torch.py.
"""

from __future__ import annotations

from ..errors import EngineMissing

__all__ = ["Polynomial", "linear_torch_modules"]

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


def linear_torch_modules(layer, torch, dtype) -> list:
    """A float layer with dense rows as torch modules: ``Linear`` (made in the target dtype: a float32
    layer would round the weights on copy_), then its activation's module."""
    lin = torch.nn.Linear(layer.in_dim, layer.out_dim, dtype=dtype)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(layer.weight))
        lin.bias.copy_(torch.from_numpy(layer.bias))
    return [lin] + ([] if layer.activation is None else [layer.activation.torch_module()])
