"""Float graph model files: the graph form of a model file (docs/graphs.md) with float numbers, as
``numeric-check`` and ``certify`` read chain files ("floats allowed", docs/certify.md "Graph networks").

The file is read by the exact graph reader (:func:`symeq.graph.io.graph_from_json`: the same strict keys,
names, shapes and refusals as ``symeq verify``), every JSON float handed over as its exact binary value
(nothing rounds), and every node then becomes its float twin (:func:`symeq.numeric.models.float_twin`;
a join keeps its op and gets the float activation).  The group, when the file has one, becomes a
:class:`symeq.numeric.models.NumericGroup`.

:func:`symeq.numeric.onnx_io.load_float_network` (the reader of ``numeric-check`` and ``certify``) hands a
``.json`` file with ``"graph"`` here.  ``.npz`` holds chains only (``weight_i``, ``bias_i``): it has no natural layout for a graph's nodes and
inputs, so a graph is written and read as its model file (:func:`symeq.io.model_to_json`).
"""

from __future__ import annotations

__all__ = ["graph_model_from_float_json", "float_graph"]


def float_graph(gm, name: str | None = None):
    """The float twin of an exact :class:`symeq.graph.GraphModel` (same nodes, names, segments, output,
    input shape; the group as a NumericGroup)."""
    from ..graph import GraphModel, Node
    from .models import _as_group, activation_from_exact, float_twin

    nodes = []
    for n in gm.nodes:
        if n.is_join:
            act = None if n.activation is None else activation_from_exact(n.activation)
            nodes.append(Node(n.name, n.op, n.inputs, activation=act, segment=n.segment, index=n.index))
        else:
            layer = float_twin(n.layer)
            nodes.append(Node(n.name, n.op, n.inputs, layer=layer, segment=n.segment, index=n.index))
    return GraphModel(gm.input_dim, nodes, gm.output, _as_group(gm.group), gm.name if name is None else name,
                      gm.input_shape)


def graph_model_from_float_json(data: dict, where: str = "model"):
    """A float :class:`symeq.graph.GraphModel` from the graph form of a ``symeq-model/1`` object; floats,
    integers and "p/q" strings allowed (read by the exact graph reader first, module docstring)."""
    from ..io import model_from_json as exact_model_from_json
    from .models import _floats_as_exact

    gm = exact_model_from_json(_floats_as_exact(data, where), where)
    return float_graph(gm)
