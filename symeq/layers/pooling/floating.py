"""The float side of the pooling kinds ``maxpool2d`` and ``group_pool`` (:mod:`symeq.layers.pooling`): the
float matching of actions, and their torch modules read and written.

A float pooling layer is the kind's one class over float64 (``layer.on(FLOAT64)``, the float twin): its
windows, shapes, names, forward pass (:class:`symeq.layers.pooling.PoolProgram`) and induced action are the
kind's.  Here only the matching returns a float :class:`~symeq.numeric.monomial.MonomialAction` with its
record.  The pooling has no parameters: the induced action is determined by the input action, so its
residual is 0 and its margin infinite (a float result reports its error; it never decides).

This module is the kinds' float unit (``float_module``): the float model asks it, through
:func:`symeq.numeric.models.float_class`, for the class of a float layer (``FLOAT_LAYERS``: the kinds' own
classes); nothing outside names the pooling kinds for that.

>>> import numpy as np
>>> from symeq.backends import FLOAT64
>>> from symeq.layers.pooling import MaxPool2dLayer
>>> layer = MaxPool2dLayer((1, 2, 2), 2).on(FLOAT64)
>>> layer.forward(np.array([[1.0, -3.0, 0.5, 2.0]])).tolist(), layer.activation.name
([[2.0]], 'relu')
"""
from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import numpy as np

from ...numeric.monomial import MonomialAction, as_action
from ..base import NoPartner
from ..conv import ConvAction
from . import GroupPoolLayer, MaxPool2dLayer

__all__ = ["FLOAT_LAYERS", "FIELD_FACTOR_TOL", "match_float", "float_relu", "from_torch", "torch_modules"]

FIELD_FACTOR_TOL = 0.1
"""The float group pooling reads the channel factors of one field as one factor when they agree to this
relative spread (a float candidate only: the exact pipeline decides)."""


@functools.lru_cache(maxsize=1)
def float_relu():
    """ReLU's float unit: the group of a float pooling layer (a maximum commutes with positive monomial
    matrices)."""
    from ...activations.floating import numeric_activation

    return numeric_activation("relu")


def match_float(layer, P_in, c_in=None, *, li: int = 0):
    """``(False, [(rho, (residual, residual, inf, how))])``: the action a float input action induces on a
    float pooling layer's output (the kind's rule, :meth:`induced_action`)."""
    from ..conv.floating import _channel_cycles, channel_pixel_parts

    P = as_action(P_in)
    if not isinstance(P, MonomialAction):
        raise NoPartner(f"{layer.label}: the action on its input is not monomial", inconclusive=True)
    if (c_in is not None and np.any(np.asarray(c_in) != 0)) or P.offset is not None:
        raise NoPartner(f"{layer.label}: an affine action (offsets) on a pooling layer's input is not supported",
                        inconclusive=True)
    parts = channel_pixel_parts(P, *layer.in_shape)
    if parts is None:
        raise NoPartner(f"{layer.label}: the action on its input is not a channel action times a pixel "
                        "permutation", inconclusive=True)
    source, factor, pixel = parts
    if np.any(factor <= 0):
        raise NoPartner(f"{layer.label}: a non-positive channel factor; a maximum commutes only with permutations "
                        "and positive scalings", inconclusive=True)
    factor, spread = _SNAP[layer.kind](layer, np.asarray(factor, dtype=np.float64))
    cp = ConvAction(tuple(int(s) for s in source), tuple(float(f) for f in factor),
                    tuple(int(p) for p in pixel), layer.in_shape[1:])
    Q = layer.induced_action(cp, li)
    cols, vals = Q.monomial()
    rho = MonomialAction(np.array(cols), np.array(vals, dtype=np.float64))
    rho.channel_pixel = {"source": list(Q.source), "factor": [float(v) for v in Q.factor],
                         "pixels": list(Q.pixel), "height": Q.hw[0], "width": Q.hw[1],
                         "transform": Q.describe(), "cycles": _channel_cycles(Q.source, Q.factor)}
    how = "induced by the pooling windows (no parameters)" if not spread else \
        f"induced by the pooling windows (no parameters; the factors of a field agree to {spread:.3g})"
    return False, [(rho, (spread, spread, float("inf"), how))]


def _factors_as_they_are(layer, factor: np.ndarray) -> tuple[np.ndarray, float]:
    """maxpool2d: the input action's channel factors as the induced action reads them, residual 0."""
    return factor, 0.0


def _field_factors(layer, factor: np.ndarray) -> tuple[np.ndarray, float]:
    """group_pool: each field's factors replaced by their mean when they agree to :data:`FIELD_FACTOR_TOL`
    (fitted ReLU factors of a float network are 1 up to its noise; the exact rule wants one factor per
    field), with the largest relative spread as the residual; otherwise unchanged (the exact rule refuses)."""
    n = layer.field_size
    blocks = factor.reshape(-1, n)
    mean = blocks.mean(axis=1, keepdims=True)
    spread = np.max(np.abs(blocks - mean) / np.maximum(np.abs(mean), 1e-300), axis=1)
    ok = spread <= FIELD_FACTOR_TOL
    out = np.where(ok[:, None], np.broadcast_to(mean, blocks.shape), blocks).reshape(-1)
    return out, float(np.max(spread[ok], initial=0.0))


_SNAP = {"maxpool2d": _factors_as_they_are, "group_pool": _field_factors}


# -- torch, written and read -------------------------------------------------------------------------

def torch_modules(layer, torch) -> list:
    """The torch modules computing a pooling layer on flat inputs: Unflatten, the pooling, Flatten."""
    pool = (torch.nn.MaxPool2d(layer.kernel_size, layer.stride, layer.padding) if layer.kind == "maxpool2d"
            else _group_max_module(torch, layer.field_size))
    return [torch.nn.Sequential(torch.nn.Unflatten(1, tuple(layer.in_shape)), pool, torch.nn.Flatten())]


def from_torch(cls, mod, name: str, shape, label: str):
    """The float layer of class ``cls`` read from a torch module of one of its ``torch_classes``."""
    from ...backends import FLOAT64

    return _TORCH_READERS[cls.kind](cls, mod, name, shape, label).on(FLOAT64)


def _maxpool_from_torch(cls, mod, name: str, shape, label: str):
    """A torch ``MaxPool2d`` on images of ``shape``; InputError naming the module for what symeq does not read."""
    from ...errors import InputError

    _image(shape, name, label)
    pair = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v)  # noqa: E731
    k, s, p, d = pair(mod.kernel_size), pair(mod.stride if mod.stride else mod.kernel_size), pair(mod.padding), \
        pair(mod.dilation)
    if len(set(k)) != 1 or len(set(s)) != 1 or len(set(p)) != 1 or d != (1, 1) or mod.ceil_mode \
            or mod.return_indices:
        raise InputError(f"module {label}: symeq reads MaxPool2d with square windows, equal strides and paddings, "
                         "dilation 1, ceil_mode=False and no indices")
    return cls(shape, int(k[0]), int(s[0]), int(p[0]))


def _group_pool_from_torch(cls, mod, name: str, shape, label: str):
    """A torch module computing a max over each field (``torch_classes`` of the group pooling)."""
    from ...errors import InputError

    _image(shape, name, label)
    n = getattr(mod, "field_size", None)
    if n is None and name == "MaxPoolChannels":  # escnn's and e2cnn's export: MaxPoolChannels(kernel_size)
        n = getattr(mod, "kernel_size", None)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(f"module {label}: a {name} is read as the max over each field's channels only with an "
                         "integer attribute field_size (the channels per regular field; escnn's MaxPoolChannels: "
                         "kernel_size)")
    return cls(shape, n)


_TORCH_READERS = {"maxpool2d": _maxpool_from_torch, "group_pool": _group_pool_from_torch}


def _image(shape, name: str, label: str) -> None:
    from ...errors import InputError

    if shape is None:
        raise InputError(f"module {label}: {name} needs image-shaped activations (pass input_shape)")


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


FLOAT_LAYERS = (MaxPool2dLayer, GroupPoolLayer)
"""The classes of this module's kinds' float layers: the kinds' own classes, over float64."""


# -- ONNX in (symeq.numeric.onnx_io asks ONNX_OPERATORS and ONNX_FIELD_OPERATORS) ---------------------------

def _onnx_maxpool(node, shape, fields, where):
    """ONNX ``MaxPool`` 2-d (torch's MaxPool2d) on images of ``shape``: the exact maxpool2d layer."""
    from ...errors import InputError


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

