"""The float side of the dense kind (:mod:`symeq.layers.dense`): the float twin of a dense layer, its
model-file reading with floats allowed, its torch modules, and the float matching of its actions (linear
assignment, with residuals and a margin: a float result reports its error; it never decides).

A float dense layer is the kind's one class, :class:`symeq.layers.dense.DenseLayer`, over the float64
backend: x -> sigma(W x + b) with float64 W and b, its forward pass the kind's one program
(:class:`symeq.layers.dense.DenseProgram`); the names and the model-file keys are the kind's.
:func:`NumericDenseLayer` builds one (:mod:`symeq.numeric.models` re-exports it).  This module is the
kind's float unit (``float_module`` of the class), asked through :func:`symeq.layers.registry.float_unit`.

>>> from symeq.activations.floating import numeric_activation
>>> layer = NumericDenseLayer(np.array([[1.0, -1.0]]), np.zeros(1), numeric_activation("relu"))
>>> layer.forward(np.array([[2.0, 0.5], [0.0, 1.0]])).tolist(), layer.backend.name
([[1.5], [0.0]], 'float64')
"""
from __future__ import annotations

import numpy as np

from ...activations.floating import _fq, activation_from_exact, numeric_activation
from ...backends import FLOAT64
from ...errors import InputError, ShapeError
from ...numeric.floats import float_matrix as _float_matrix
from ...numeric.match import _input_bias, _latent_action, _match_layer
from ...numeric.monomial import right_multiply, to_float_matrix
from ...schema import check_keys
from . import DenseLayer

__all__ = ["NumericDenseLayer", "FLOAT_LAYERS", "float_twin", "from_float_json", "match_action",
           "match_reference", "torch_modules"]


def NumericDenseLayer(weight, bias=None, activation=None, tokens: int | None = None) -> DenseLayer:  # noqa: N802
    """A dense layer x -> sigma(W x + b) over float64: the kind's one class with ``backend=FLOAT64`` (float W,
    out x in, and b; ``activation`` a float unit, None for affine; ``tokens`` for a token-wise layer after
    attention, whose weight is I_T (x) W).  The name is the float model's (symeq.numeric) constructor."""
    return DenseLayer(weight, bias, activation, tokens, backend=FLOAT64)


def float_activation(act):
    """The float unit of an exact activation (None stays None)."""
    return None if act is None else activation_from_exact(act)


def float_twin(layer, activation) -> DenseLayer:
    """The float twin of an exact dense layer (``activation``: its float unit; token-wise kept)."""
    return NumericDenseLayer(to_float_matrix(layer.weight), np.array([_fq(b) for b in layer.bias]), activation,
                             layer.tokens)


def from_float_json(spec: dict, ctx, at: str) -> DenseLayer:
    """A dense layer of a model file, floats allowed, on ``ctx.n`` inputs (per token after a token-mixing
    layer, ``ctx.tokens``); the keys are the kind's (one schema)."""
    check_keys(spec, at, *DenseLayer.schema[spec["type"]], error=InputError)
    W = _float_matrix(spec["weight"], f"{at}.weight", cols=ctx.n)
    b = None if spec.get("bias") is None else _float_matrix(spec["bias"], f"{at}.bias", vector=True)
    if b is not None and b.shape[0] != W.shape[0]:
        raise ShapeError(f"{at}.bias has length {b.shape[0]}, expected {W.shape[0]}")
    act = numeric_activation(spec.get("activation"), f"{at}.activation")
    ctx.n = W.shape[0]
    if ctx.tokens is None:
        return NumericDenseLayer(W, b, act)
    b = np.zeros(W.shape[0]) if b is None else b
    return NumericDenseLayer(np.kron(np.eye(ctx.tokens), W), np.tile(b, ctx.tokens), act, ctx.tokens)


def torch_modules(layer, torch, dtype) -> list:
    """torch modules computing a float dense layer (NumericModel.to_torch): a Linear, then the activation."""
    from ...numeric.torch_backend import linear_torch_modules

    return linear_torch_modules(layer, torch, dtype)


def match_reference(layer) -> np.ndarray | None:
    """theta's shifted rows [W | b - s] (None for an affine layer: nothing to match)."""
    if layer.activation is None:
        return None
    return np.hstack([layer.weight, (layer.bias - layer.activation.shift)[:, None]])


def match_action(layer, P_in, c_in=None, *, reference=None):
    """The action on a float layer's output given y -> P_in y + c_in on its input, with its record.

    Rows of [W P_in | b + W c_in - s] are matched to theta's [W | b - s] up to admissible scalings by linear
    assignment (:func:`symeq.numeric.match._match_layer`); rho has q(alpha_j) at (j, pi(j)) and the offsets
    of affine sign flips.  ``c_in`` defaults to the offset P_in carries (``MonomialAction.offset``);
    ``reference`` is :func:`match_reference`.  Affine sign flips are always read off the activation's
    scalings.

    Returns
    -------
    (False, [(rho, (max residual, median residual, margin, how))]) : one candidate; how far it is from
        exact is the record's business (a float match decides nothing).

    Examples
    --------
    >>> layer = NumericDenseLayer(np.array([[1.0, 2.0], [2.0, 1.0]]), np.ones(2), numeric_activation("tanh"))
    >>> _, [(rho, rec)] = layer.match_action(np.array([[0.0, 1.0], [1.0, 0.0]]))
    >>> rho.cols.tolist(), rec[0] < 1e-12
    ([1, 0], True)
    """
    act = layer.activation
    if act is None:
        raise InputError("an affine layer's output is acted on by the group itself: there is nothing to match")
    V = match_reference(layer) if reference is None else reference
    bias = _input_bias(layer, P_in) if c_in is None else layer.bias + layer.weight @ np.asarray(c_in, dtype=np.float64)
    U = np.hstack([right_multiply(layer.weight, P_in), (bias - act.shift)[:, None]])
    pi, alpha, rel, margin = _match_layer(U, V, act)
    rho = _latent_action(act, pi, alpha)
    return False, [(rho, (float(rel.max()), float(np.median(rel)), margin, f"{act.latent_group}, linear assignment"))]


FLOAT_LAYERS = (DenseLayer,)
"""The class of the dense kind's float layers: the kind's own, over float64."""
