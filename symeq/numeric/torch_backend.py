"""torch pieces of the numeric backend (torch extra): a polynomial activation module.

Importable without torch (so that ``pytest --doctest-modules`` collects it everywhere); using
:class:`Polynomial` without torch raises :class:`symeq.errors.EngineMissing`.  Tested against the
numpy evaluation in tests/test_numeric_torch.py.
"""

from __future__ import annotations

from ..errors import EngineMissing

__all__ = ["Polynomial"]

try:
    import torch
except ImportError:  # pragma: no cover - exercised only where torch is absent
    torch = None


if torch is not None:
    class Polynomial(torch.nn.Module):
        """sigma(t) = sum_k coeffs[k] t^k, evaluated by Horner's rule (coefficients from degree 0 up)."""

        def __init__(self, coeffs):
            super().__init__()
            self.coeffs = tuple(float(c) for c in coeffs)

        def forward(self, t):
            acc = torch.zeros_like(t) + self.coeffs[-1]
            for c in reversed(self.coeffs[:-1]):
                acc = acc * t + c
            return acc

        def extra_repr(self) -> str:
            return f"coeffs={list(self.coeffs)}"
else:
    class Polynomial:  # pragma: no cover
        def __init__(self, *args, **kwargs):
            raise EngineMissing("polynomial torch modules need torch: pip install 'symeq[numeric]'")
