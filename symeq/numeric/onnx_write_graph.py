"""``symeq export --onnx`` of a graph model (docs/graphs.md): layer nodes, additions and concatenations.

:func:`export_graph_onnx` writes an exact or float :class:`symeq.graph.GraphModel` as one ONNX graph
on rows ``x`` of shape (batch, input_dim), as :func:`symeq.numeric.onnx_io.export_onnx` writes a chain:

* a dense layer node is a ``Gemm`` (weights float64, or float32 with ``float32=True``; exact weights
  rounded to the nearest float);
* a convolution with zero padding is ``Reshape`` to (batch, C, H, W), ``Conv`` (its kernel, channel
  bias, stride and padding) and ``Flatten`` back to rows, symeq's channel-major pixel order being
  torch's and ONNX's; a convolution with circular padding is written by its dense rows (``Gemm``);
* a join node is the operator its op unit names (``JoinOp.onnx``: ``Add`` for an addition, ``Concat``
  on axis 1 for a concatenation, which on channel-major rows is the concatenation along channels);
* every activation is written by its activation unit (``symeq.activations``: ``to_onnx``).

The group, when integral, goes into the metadata under ``"symeq.group"`` as for chains.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..errors import InputError
from ..layers.registry import supports

__all__ = ["export_graph_onnx"]


def _floats(layer):
    """A float twin of an exact layer (:func:`symeq.numeric.models.float_twin`; the model's own float layers
    pass through)."""
    if not layer.backend.exact:
        return layer
    from .models import float_twin

    return float_twin(layer)


def _act_spec(act):
    if act is None:
        return None
    if getattr(act, "name", None) == "polynomial":
        return {"type": "polynomial", "coeffs": [repr(float(c)) for c in act.coeffs]}
    return act.spec


class _Writer:
    """The nodes and initialisers of one ONNX graph (``const``, ``fresh``, ``node``: what an activation unit's
    ``to_onnx`` writes with)."""

    def __init__(self, dt):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper, self.dt = helper, numpy_helper, dt
        self.inits, self.nodes, self.k = [], [], 0

    def const(self, value, name, dtype=None):
        self.inits.append(self.numpy_helper.from_array(np.asarray(value, dtype=dtype or self.dt), name))
        return name

    def fresh(self, stem):
        self.k += 1
        return f"{stem}_{self.k}"

    def node(self, op, inputs, outputs, **attrs):
        self.nodes.append(self.helper.make_node(op, inputs, outputs, **attrs))

    def activation(self, act, cur: str, li: int) -> str:
        from ..activations.registry import to_onnx

        spec = _act_spec(act)
        return cur if spec is None else to_onnx(spec, SimpleNamespace(const=self.const, fresh=self.fresh,
                                                                      node=self.node), cur, li)

    def layer(self, layer, cur: str, li: int, tag: str) -> str:
        S = getattr(layer, "shape", None) if supports(layer, "sparse-actions") else None
        out = self.fresh(f"{tag}.pre")
        if S is not None and S.padding_mode == "zeros":
            img = self.fresh(f"{tag}.image")
            shape = self.const([-1, S.in_channels, S.height, S.width], f"{tag}.shape", np.int64)
            self.node("Reshape", [cur, shape], [img])
            conv = self.fresh(f"{tag}.conv")
            self.node("Conv", [img, self.const(layer.kernel, f"{tag}.kernel"),
                               self.const(layer.channel_bias, f"{tag}.bias")], [conv],
                      kernel_shape=[S.kh, S.kw], strides=[S.stride, S.stride], pads=[S.padding] * 4)
            self.node("Flatten", [conv], [out], axis=1)
        else:
            self.node("Gemm", [cur, self.const(layer.weight, f"{tag}.weight"), self.const(layer.bias, f"{tag}.bias")],
                      [out], transB=1)
        return self.activation(layer.activation, out, li)


def export_graph_onnx(model, path, *, float32: bool = False, opset: int = 17) -> None:
    """Write a graph model as ONNX (module docstring); refuses, before writing, what it cannot write."""
    from ..graph.ops.registry import join_op
    from .models import NumericActivation, activation_from_exact
    from .onnx_io import GROUP_KEY, _numeric_group_json, _onnx

    onnx = _onnx()
    from onnx import TensorProto, helper

    bad = [n for n in model.nodes if not n.is_join and not supports(n.layer, "onnx-export")]
    if bad:
        raise InputError(f"node {bad[0].name}: {bad[0].layer.kind} layers are not written to ONNX")
    unwritten = [n for n in model.nodes if n.is_join and getattr(join_op(n.op), "onnx", None) is None]
    if unwritten:
        raise InputError(f"node {unwritten[0].name}: {unwritten[0].op!r} nodes are not written to ONNX")
    group_json = None
    if model.group is not None:
        group_json = model.group.to_json() if hasattr(model.group, "to_json") else _numeric_group_json(model.group)
    w = _Writer(np.float32 if float32 else np.float64)
    value = {"input": "x"}
    for li, n in enumerate(model.nodes):
        tag = f"node{li}"
        if n.is_join:
            op, attrs = join_op(n.op).onnx
            out = w.fresh(f"{tag}.{n.op}")
            w.node(op, [value[i] for i in n.inputs], [out], **attrs)
            act = n.activation
            if act is not None and not isinstance(act, NumericActivation):  # an exact activation: its float twin
                act = activation_from_exact(act)
            value[n.name] = w.activation(act, out, li)
        else:
            value[n.name] = w.layer(_floats(n.layer), value[n.inputs[0]], li, tag)
    w.node("Identity", [value[model.output]], ["y"], name="output")
    et = TensorProto.FLOAT if float32 else TensorProto.DOUBLE
    graph = helper.make_graph(w.nodes, model.name or "symeq", [helper.make_tensor_value_info("x", et, [None, model.input_dim])],
                              [helper.make_tensor_value_info("y", et, [None, model.output_dim])], w.inits)
    proto = helper.make_model(graph, producer_name="symeq", opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = min(proto.ir_version, 9)
    if group_json is not None:
        import json

        entry = proto.metadata_props.add()
        entry.key, entry.value = GROUP_KEY, json.dumps(group_json)
    onnx.checker.check_model(proto)
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_bytes(proto.SerializeToString())
    tmp.replace(p)
