"""The float side of the dense kind (:mod:`symeq.layers.dense`): :class:`NumericDenseLayer`, x -> sigma(W x + b)
with float64 W and b, its float twin of an exact layer, its model-file reading with floats allowed, its torch
modules, and the float matching of its actions (linear assignment, with residuals and a margin: a float
result reports its error; it never decides).

The forward pass is the kind's one program (:class:`symeq.layers.dense.DenseProgram`) over the float64
backend; the names and the model-file keys are the exact kind's.  This module is the kind's float unit
(``float_module`` of :class:`symeq.layers.dense.DenseLayer`); :mod:`symeq.numeric.models` re-exports the class.

>>> from symeq.activations.floating import numeric_activation
>>> layer = NumericDenseLayer(np.array([[1.0, -1.0]]), np.zeros(1), numeric_activation("relu"))
>>> layer.forward(np.array([[2.0, 0.5], [0.0, 1.0]])).tolist()
[[1.5], [0.0]]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...activations.floating import NumericActivation, _fq, numeric_activation
from ...backends import FLOAT64
from ...errors import InputError, ShapeError
from ...numeric.floats import float_matrix as _float_matrix
from ...numeric.match import _input_bias, _latent_action, _match_layer
from ...numeric.monomial import right_multiply, to_float_matrix
from ...schema import check_keys
from ..base import DenseNames
from ..registry import kind_class
from . import DenseProgram

__all__ = ["NumericDenseLayer", "FLOAT_LAYERS"]

_FLOAT64 = FLOAT64


@dataclass(eq=False)
class NumericDenseLayer(DenseNames):
    """x -> sigma(W x + b) with float W (out x in) and b; sigma None means affine.

    A float layer of kind ``"dense"`` (:class:`symeq.layers.base.LayerBase`).
    """

    kind: ClassVar[str] = "dense"
    #: where the layer's numbers live (symeq.backends; LayerBase)
    backend = FLOAT64

    weight: np.ndarray
    bias: np.ndarray | None = None
    activation: NumericActivation | None = None
    tokens: int | None = None  # set for token-wise layers after attention: weight = I_T (x) W

    def __post_init__(self):
        self.weight = np.asarray(self.weight, dtype=np.float64)
        if self.weight.ndim != 2 or 0 in self.weight.shape:
            raise ShapeError(f"a weight must be a non-empty matrix, got shape {self.weight.shape}")
        self.bias = np.zeros(self.weight.shape[0]) if self.bias is None else np.asarray(self.bias, dtype=np.float64).reshape(-1)
        if self.bias.shape[0] != self.weight.shape[0]:
            raise ShapeError(f"bias has length {self.bias.shape[0]}, weight has {self.weight.shape[0]} rows")
        if not (np.all(np.isfinite(self.weight)) and np.all(np.isfinite(self.bias))):
            raise InputError("a layer has NaN or infinite weights; numeric models need finite parameters")

    @property
    def in_dim(self) -> int:
        return self.weight.shape[1]

    @property
    def out_dim(self) -> int:
        return self.weight.shape[0]

    @property
    def hidden_label(self) -> str:
        if self.activation is None:
            return "affine"
        spec = self.activation.spec
        arg = spec.get("order", spec.get("degree"))
        return spec.get("type", self.activation.name) + (f"({arg})" if arg is not None else "")

    def program(self) -> DenseProgram:
        """The dense kind's one forward pass (:mod:`symeq.layers.dense`) over the float64 backend, on this
        layer's float W (the whole I_T (x) W of a token-wise layer) and b."""
        cached = getattr(self, "_program", None)  # W and b are the program's own arrays (views, no copies)
        if cached is None or cached[0] is not self.weight or cached[1] is not self.bias:
            cached = (self.weight, self.bias, DenseProgram(_FLOAT64, self.weight, self.bias, True))
            if self.weight.dtype == np.float64 and self.bias.dtype == np.float64:  # else copies: not kept
                self._program = cached
        return cached[2]

    def pre_activation(self, X: np.ndarray) -> np.ndarray:
        """W x + b on a batch (one row per point): the kind's program on the columns X^T."""
        return self.program().pre_activation(np.asarray(X).T).T

    def forward(self, X: np.ndarray) -> np.ndarray:
        """Apply the layer to a batch (one row per point): the kind's forward with the float activation."""
        act = self.activation
        out, _ = self.program().forward(np.asarray(X).T, None if act is None else lambda Z: (act(Z), None))
        return out.T

    def copy(self) -> "NumericDenseLayer":
        return NumericDenseLayer(self.weight.copy(), self.bias.copy(), self.activation, self.tokens)

    @classmethod
    def float_twin(cls, layer, activation) -> "NumericDenseLayer":
        """The float twin of an exact dense layer (``activation``: its float unit; token-wise kept)."""
        return cls(to_float_matrix(layer.weight), np.array([_fq(b) for b in layer.bias]), activation, layer.tokens)

    #: the model-file types this float class reads with floats allowed (:func:`model_from_json`)
    json_types: ClassVar[tuple] = ("dense",)

    @classmethod
    def from_float_json(cls, spec: dict, ctx, at: str) -> "NumericDenseLayer":
        """A dense layer of a model file, floats allowed, on ``ctx.n`` inputs (per token after a
        token-mixing layer, ``ctx.tokens``); the keys are the exact kind's (one schema)."""
        check_keys(spec, at, *kind_class(cls.kind).schema[spec["type"]], error=InputError)
        W = _float_matrix(spec["weight"], f"{at}.weight", cols=ctx.n)
        b = None if spec.get("bias") is None else _float_matrix(spec["bias"], f"{at}.bias", vector=True)
        if b is not None and b.shape[0] != W.shape[0]:
            raise ShapeError(f"{at}.bias has length {b.shape[0]}, expected {W.shape[0]}")
        act = numeric_activation(spec.get("activation"), f"{at}.activation")
        ctx.n = W.shape[0]
        if ctx.tokens is None:
            return cls(W, b, act)
        b = np.zeros(W.shape[0]) if b is None else b
        return cls(np.kron(np.eye(ctx.tokens), W), np.tile(b, ctx.tokens), act, ctx.tokens)

    def torch_modules(self, torch, dtype) -> list:
        """torch modules computing this layer (NumericModel.to_torch): a Linear, then the activation."""
        from ...numeric.torch_backend import linear_torch_modules

        return linear_torch_modules(self, torch, dtype)

    def match_reference(self, affine: bool = False) -> np.ndarray | None:
        """theta's shifted rows [W | b - s] (None for an affine layer: nothing to match)."""
        if self.activation is None:
            return None
        return np.hstack([self.weight, (self.bias - self.activation.shift)[:, None]])

    def match_action(self, P_in, c_in=None, *, reference=None, affine: bool = False, li: int = 0):
        """The action on the layer's output given y -> P_in y + c_in on its input, with its record.

        Rows of [W P_in | b + W c_in - s] are matched to theta's [W | b - s] up to admissible
        scalings by linear assignment (:func:`symeq.numeric.match._match_layer`); rho has
        q(alpha_j) at (j, pi(j)) and the offsets of affine sign flips.  ``c_in`` defaults to the
        offset P_in carries (``MonomialAction.offset``); ``reference`` is :meth:`match_reference`.
        Affine sign flips are always read off the activation's scalings, so ``affine`` is unused.

        Returns
        -------
        (False, [(rho, (max residual, median residual, margin, how))]) : one candidate; how far it
            is from exact is the record's business (a float match decides nothing).

        Examples
        --------
        >>> layer = NumericDenseLayer(np.array([[1.0, 2.0], [2.0, 1.0]]), np.ones(2), numeric_activation("tanh"))
        >>> _, [(rho, rec)] = layer.match_action(np.array([[0.0, 1.0], [1.0, 0.0]]))
        >>> rho.cols.tolist(), rec[0] < 1e-12
        ([1, 0], True)
        """
        act = self.activation
        if act is None:
            raise InputError("an affine layer's output is acted on by the group itself: there is nothing to match")
        V = self.match_reference() if reference is None else reference
        bias = _input_bias(self, P_in) if c_in is None else self.bias + self.weight @ np.asarray(c_in, dtype=np.float64)
        U = np.hstack([right_multiply(self.weight, P_in), (bias - act.shift)[:, None]])
        pi, alpha, rel, margin = _match_layer(U, V, act)
        rho = _latent_action(act, pi, alpha)
        return False, [(rho, (float(rel.max()), float(np.median(rel)), margin, f"{act.latent_group}, linear assignment"))]

    @property
    def token_weight(self) -> np.ndarray:
        """The per-token weight W of a token-wise layer (its first diagonal block)."""
        if self.tokens is None:
            return self.weight
        return self.weight[: self.out_dim // self.tokens, : self.in_dim // self.tokens]


FLOAT_LAYERS = (NumericDenseLayer,)
"""The float twin of the dense kind (its ``float_module`` declares this module)."""
