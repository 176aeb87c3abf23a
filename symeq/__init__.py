"""symeq: exact verification that identifiable equivariant networks are layerwise equivariant.

The main entry points, importable from the package itself:

>>> import symeq
>>> G = symeq.mirror(1, 2)
>>> m = symeq.random_equivariant_model(G, ["regular*2"], symeq.tanh_series(3), rng=0)
>>> symeq.verify(m).verdict
'layerwise-equivariant'

References: Shahverdi, Marchetti, Bokman, Kohn, *Identifiable Equivariant Networks are
Layerwise Equivariant*, arXiv 2601.21645 (2026), Theorem 4.1.
"""

__version__ = "0.1.0"

_EXPORTS = {
    "verify": "theorem", "Verification": "theorem",
    "Model": "models", "DenseLayer": "models", "random_equivariant_model": "models", "scramble": "models",
    "equivariant_basis": "models",
    "FiniteGroup": "groups", "mirror": "groups", "vertical_mirror": "groups", "cyclic_shift": "groups",
    "symmetric_group": "groups", "global_sign": "groups", "dihedral": "groups", "direct_product": "groups",
    "builtin_group": "groups",
    "polynomial": "activations", "monomial": "activations", "tanh_series": "activations",
    "sigmoid_series": "activations", "relu": "activations",
    "decide_equivariance": "equivariance", "derive_latent_actions": "layerwise",
    "load_model": "io", "save_model": "io", "model_from_json": "io", "model_to_json": "io",
    "check_certificate": "check", "matrix": "numbers", "fmpq": "numbers",
    "builtin_example": "examples",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name):
    # Lazy imports keep `import symeq` (and the standalone checker) light.
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'symeq' has no attribute {name!r}")


def __dir__():
    return __all__
