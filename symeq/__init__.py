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

import sys

from .version import __version__

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
    "matrix": "numbers", "fmpq": "numbers",
    "builtin_example": "examples",
    "from_torch": "numeric.models", "certify": "certification", "Certification": "certification",
    "load_onnx": "numeric.onnx_io", "export_onnx": "numeric.onnx_io",
}

__all__ = sorted(_EXPORTS) + ["__version__", "register_notebook_pictures"]


def __getattr__(name):
    # Lazy imports keep `import symeq` light.  (The certificate checker is the separate package symeq_check.)
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'symeq' has no attribute {name!r}")


def __dir__():
    return __all__


def _png(module: str, function: str):
    def render(obj):
        import importlib

        from .errors import EngineMissing

        try:
            return getattr(importlib.import_module(f".{module}", __name__), function)(obj)
        except EngineMissing:   # no matplotlib: Jupyter falls back to the LaTeX view
            return None

    render.__name__ = f"{function}_for_jupyter"
    return render


def register_notebook_pictures(formatter=None) -> bool:
    """Show models and verifications as pictures (PNG) in Jupyter.

    Pictures are the report level's business (``symeq.display``), so models and verifications do
    not draw themselves; instead the package registers PNG renderers *by type name* with
    IPython's PNG formatter, without importing either class.  It runs on ``import symeq`` inside
    IPython; call it with a formatter (anything with ``for_type_by_name``) to register there.
    Returns whether a formatter was found.
    """
    if formatter is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
        if shell is None or not hasattr(shell, "display_formatter"):
            return False
        formatter = shell.display_formatter.formatters["image/png"]
    formatter.for_type_by_name("symeq.models", "Model", _png("display", "model_png"))
    formatter.for_type_by_name("symeq.theorem", "Verification", _png("display", "verification_png"))
    return True


register_notebook_pictures()
