"""The float side of the pooling kinds ``maxpool2d`` and ``group_pool`` (:mod:`symeq.layers.pooling`):
their float twins, and their torch modules read and written.

The windows, shapes, names and the induced action are the exact layer's code
(:class:`symeq.layers.pooling.PoolGeometry`); here only the forward pass is in float64 (a maximum over
each window, one point per row) and the matching returns a float
:class:`~symeq.numeric.monomial.MonomialAction` with its record.  The pooling has no parameters: the
induced action is determined by the input action, so its residual is 0 and its margin infinite (a float
result reports its error; it never decides).

This module is the kind's float unit (``float_module`` of the exact classes): the float model asks it,
through :func:`symeq.numeric.models.float_class`, for the twin of an exact layer (``float_twin``), a
layer's torch modules (``torch_modules``) and the torch classes it reads (``torch_classes``,
``from_torch``); nothing outside names the pooling kinds for that.

>>> import numpy as np
>>> layer = NumericMaxPool2d((1, 2, 2), 2)   # (float_twin and from_torch also set its ReLU unit)
>>> layer.forward(np.array([[1.0, -3.0, 0.5, 2.0]])).tolist()
[[2.0]]
"""
from __future__ import annotations

from typing import Callable, ClassVar, NamedTuple

import numpy as np

from ...backends import Float64
from ...numeric.monomial import MonomialAction, as_action
from ..base import NoPartner
from ..conv import ConvAction
from . import GroupPoolGeometry, MaxPool2dGeometry, PoolProgram

__all__ = ["NumericMaxPool2d", "NumericGroupPool", "FLOAT_LAYERS", "FIELD_FACTOR_TOL"]

_FLOAT64 = Float64()

FIELD_FACTOR_TOL = 0.1
"""The float group pooling reads the channel factors of one field as one factor when they agree to this
relative spread (a float candidate only: the exact pipeline decides)."""


class _FloatPool:
    """The float part shared by both kinds: forward over numpy rows and the float matching."""

    #: ReLU's float unit, for the group only (a maximum commutes with positive monomial matrices); set by
    #: :meth:`float_twin` and :meth:`from_torch`
    activation = None

    @property
    def bias(self) -> np.ndarray:
        return np.zeros(self.out_dim)

    @property
    def channel_bias(self) -> np.ndarray:
        return np.zeros(self.out_shape[0])

    def forward(self, X) -> np.ndarray:
        """The kind's program (:class:`symeq.layers.pooling.PoolProgram`) over float64, on a batch (a row per
        point)."""
        X = np.asarray(X, dtype=np.float64)
        return PoolProgram(_FLOAT64, self.window_index()).forward(X.T)[0].T

    def copy(self):
        return self

    @classmethod
    def float_twin(cls, layer, activation):
        """The float twin of the exact pooling layer ``layer`` (``activation``: the float ReLU unit)."""
        return _with(cls(**layer.geometry_arguments()), activation)

    def torch_modules(self, torch, dtype=None) -> list:
        """The torch modules computing this layer on flat inputs: Unflatten, the pooling, Flatten."""
        return [torch.nn.Sequential(torch.nn.Unflatten(1, tuple(self.in_shape)), self._torch_pool(torch),
                                    torch.nn.Flatten())]

    def match_action(self, P_in, c_in=None, *, reference=None, affine: bool = False, li: int = 0):
        """``(False, [(rho, (0, 0, inf, how))])``: the action the input action induces (exact layer's rule)."""
        from ..conv.floating import _channel_cycles, channel_pixel_parts

        P = as_action(P_in)
        if not isinstance(P, MonomialAction):
            raise NoPartner(f"{self.label}: the action on its input is not monomial", inconclusive=True)
        if (c_in is not None and np.any(np.asarray(c_in) != 0)) or P.offset is not None:
            raise NoPartner(f"{self.label}: an affine action (offsets) on a pooling layer's input is not supported",
                            inconclusive=True)
        parts = channel_pixel_parts(P, *self.in_shape)
        if parts is None:
            raise NoPartner(f"{self.label}: the action on its input is not a channel action times a pixel "
                            "permutation", inconclusive=True)
        source, factor, pixel = parts
        if np.any(factor <= 0):
            raise NoPartner(f"{self.label}: a non-positive channel factor; a maximum commutes only with permutations "
                            "and positive scalings", inconclusive=True)
        factor, spread = self._snap_factors(np.asarray(factor, dtype=np.float64))
        cp = ConvAction(tuple(int(s) for s in source), tuple(float(f) for f in factor),
                        tuple(int(p) for p in pixel), self.in_shape[1:])
        Q = self.induced_action(cp, li)
        cols, vals = Q.monomial()
        rho = MonomialAction(np.array(cols), np.array(vals, dtype=np.float64))
        rho.channel_pixel = {"source": list(Q.source), "factor": [float(v) for v in Q.factor],
                             "pixels": list(Q.pixel), "height": Q.hw[0], "width": Q.hw[1],
                             "transform": Q.describe(), "cycles": _channel_cycles(Q.source, Q.factor)}
        how = "induced by the pooling windows (no parameters)" if not spread else \
            f"induced by the pooling windows (no parameters; the factors of a field agree to {spread:.3g})"
        return False, [(rho, (spread, spread, float("inf"), how))]

    def _snap_factors(self, factor: np.ndarray) -> tuple[np.ndarray, float]:
        """The input action's channel factors as the induced action reads them, and their residual (0 here)."""
        return factor, 0.0


class NumericMaxPool2d(_FloatPool, MaxPool2dGeometry):
    """torch's MaxPool2d in float64 (kind ``"maxpool2d"``)."""

    kind: ClassVar[str] = "maxpool2d"
    #: the torch classes read as this kind (:meth:`from_torch`)
    torch_classes: ClassVar[tuple] = ("MaxPool2d",)

    def _torch_pool(self, torch):
        return torch.nn.MaxPool2d(self.kernel_size, self.stride, self.padding)

    @classmethod
    def from_torch(cls, mod, name: str, shape, label: str):
        """The float layer of a torch ``MaxPool2d`` on images of ``shape``; InputError naming the module
        for what symeq does not read."""
        from ...errors import InputError
        from ...numeric.models import numeric_activation

        _image(shape, name, label)
        pair = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v)  # noqa: E731
        k, s, p, d = pair(mod.kernel_size), pair(mod.stride if mod.stride else mod.kernel_size), pair(mod.padding), \
            pair(mod.dilation)
        if len(set(k)) != 1 or len(set(s)) != 1 or len(set(p)) != 1 or d != (1, 1) or mod.ceil_mode \
                or mod.return_indices:
            raise InputError(f"module {label}: symeq reads MaxPool2d with square windows, equal strides and paddings, "
                             "dilation 1, ceil_mode=False and no indices")
        return _with(cls(shape, int(k[0]), int(s[0]), int(p[0])), numeric_activation("relu"))


class NumericGroupPool(_FloatPool, GroupPoolGeometry):
    """escnn's GroupPooling in float64 (kind ``"group_pool"``)."""

    kind: ClassVar[str] = "group_pool"
    #: the torch classes read as this kind: a max over each field's channels (a module of one of these names
    #: with an integer ``field_size``, or escnn's exported ``MaxPoolChannels`` with its integer ``kernel_size``)
    torch_classes: ClassVar[tuple] = ("MaxPoolChannels", "GroupPooling", "GroupMaxPool")

    def _torch_pool(self, torch):
        return _group_max_module(torch, self.field_size)

    @classmethod
    def from_torch(cls, mod, name: str, shape, label: str):
        """The float layer of a torch module computing a max over each field (:attr:`torch_classes`)."""
        from ...errors import InputError
        from ...numeric.models import numeric_activation

        _image(shape, name, label)
        n = getattr(mod, "field_size", None)
        if n is None and name == "MaxPoolChannels":  # escnn's and e2cnn's export: MaxPoolChannels(kernel_size)
            n = getattr(mod, "kernel_size", None)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise InputError(f"module {label}: a {name} is read as the max over each field's channels only with an "
                             "integer attribute field_size (the channels per regular field; escnn's MaxPoolChannels: "
                             "kernel_size)")
        return _with(cls(shape, n), numeric_activation("relu"))

    def _snap_factors(self, factor: np.ndarray) -> tuple[np.ndarray, float]:
        """Each field's factors replaced by their mean when they agree to :data:`FIELD_FACTOR_TOL` (fitted
        ReLU factors of a float network are 1 up to its noise; the exact rule wants one factor per field),
        with the largest relative spread as the residual; otherwise unchanged (the exact rule refuses)."""
        n = self.field_size
        blocks = factor.reshape(-1, n)
        mean = blocks.mean(axis=1, keepdims=True)
        spread = np.max(np.abs(blocks - mean) / np.maximum(np.abs(mean), 1e-300), axis=1)
        ok = spread <= FIELD_FACTOR_TOL
        out = np.where(ok[:, None], np.broadcast_to(mean, blocks.shape), blocks).reshape(-1)
        return out, float(np.max(spread[ok], initial=0.0))


def _image(shape, name: str, label: str) -> None:
    from ...errors import InputError

    if shape is None:
        raise InputError(f"module {label}: {name} needs image-shaped activations (pass input_shape)")


def _with(layer, activation):
    layer.activation = activation
    return layer


def _group_max_module(torch, n: int):
    class GroupMaxPool(torch.nn.Module):
        """The maximum over each field of ``field_size`` channels (escnn's GroupPooling on regular fields)."""

        def __init__(self, field_size: int):
            super().__init__()
            self.field_size = field_size

        def forward(self, x):
            b, c, h, w = x.shape
            return x.reshape(b, c // self.field_size, self.field_size, h, w).amax(dim=2)

    return GroupMaxPool(n)


FLOAT_LAYERS = (NumericMaxPool2d, NumericGroupPool)
"""The float twins of this module's kinds (the kind's ``float_module`` declares this module)."""


# -- ONNX in (symeq.numeric.onnx_io asks ONNX_OPERATORS and ONNX_FIELD_OPERATORS) ---------------------------

def _onnx_maxpool(node, shape, fields, where):
    """ONNX ``MaxPool`` 2-d (torch's MaxPool2d) on images of ``shape``: the exact maxpool2d layer."""
    from ...errors import InputError
    from . import MaxPool2dLayer

    ks = list(node.attr("kernel_shape", []))
    st = list(node.attr("strides", ks))
    pads = list(node.attr("pads", [0, 0, 0, 0]))
    auto = node.attr("auto_pad", b"NOTSET")
    if (len(ks) != 2 or len(set(ks)) != 1 or len(set(st)) != 1 or len(set(pads)) != 1
            or int(node.attr("ceil_mode", 0)) or auto not in (b"NOTSET", "NOTSET")
            or list(node.attr("dilations", [1, 1])) != [1, 1] or len(node.outputs) > 1 and node.outputs[1]):
        raise InputError(f"{where}: symeq reads MaxPool 2-d with square windows, equal strides and pads, ceil_mode "
                         f"0, dilation 1 and no indices (got kernel {ks}, strides {st}, pads {pads})")
    return MaxPool2dLayer(shape, int(ks[0]), int(st[0]), int(pads[0]))


def _onnx_group_max(node, shape, fields, where):
    """ONNX ``ReduceMax`` over axis 2 after a Reshape to (batch, F, G, H, W): escnn's GroupPooling, the exact
    group_pool layer with fields of G channels."""
    from ...errors import InputError
    from . import GroupPoolLayer

    axes = node.axes()
    if axes is None or [int(a) % 5 for a in axes] != [2] or int(node.attr("keepdims", 1)):
        raise InputError(f"{where}: operator ReduceMax is not supported: after a Reshape to 5-d symeq reads ReduceMax "
                         f"over axis 2 (a max over each field's channels, escnn's GroupPooling) with keepdims=0, got "
                         f"axes {axes}")
    return GroupPoolLayer(shape, fields[1])


class OnnxRule(NamedTuple):
    """How an ONNX operator is read as a layer of this kind: ``read(node, shape, fields, where)`` returns the
    exact layer (``node``: the reader's view of the node, with ``attr(name, default)``, ``axes()`` and
    ``outputs``; ``fields``: (F, G) after a 5-d Reshape, else None); ``text``: its line in the reader's
    list of what it reads."""

    read: Callable
    text: str


ONNX_OPERATORS = {"MaxPool": OnnxRule(_onnx_maxpool, "MaxPool (a maxpool2d layer)")}
"""ONNX operators read as a layer of these kinds, after an activation (a hidden space of its own)."""

ONNX_FIELD_OPERATORS = {"ReduceMax": OnnxRule(_onnx_group_max, "Reshape to 5-d + ReduceMax over each field "
                                                                "(a group_pool layer)")}
"""ONNX operators read as a layer of these kinds right after a Reshape to (batch, F, G, H, W)."""

