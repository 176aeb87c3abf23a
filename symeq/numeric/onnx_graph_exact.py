"""ONNX readers that take a chain or a graph: ``--exact-floats`` (every weight the dyadic rational it is) and
certify's float reader (docs/graphs.md).

:func:`load_onnx_exact_network` is the exact reader of ``symeq verify --exact-floats NET.onnx`` and of
``symeq check CERT NET.onnx``: a chain as :func:`symeq.numeric.onnx_io.load_onnx_exact` reads it, and an
ONNX file with additions, concatenations or a tensor read twice (what that reader refuses) as an exact
:class:`symeq.graph.GraphModel`: the graph cut by :func:`symeq.numeric.onnx_graph.read_onnx_graph`, each
segment's layers realised with the exact folds (BatchNorm, pooling; :class:`symeq.layers.conv.floating.ExactFold`,
as the chain's exact reader), the joins' activations and the group exact.  The exact path then verifies
it as any graph model (``symeq.graph.verify``: the actions along the graph, else an exact or arb-ball
witness of f(g x) != g f(x) through the graph's ``ball_forward``).
"""

from __future__ import annotations

from ..errors import InputError

__all__ = ["load_onnx_exact_network", "load_onnx_graph_exact", "load_float_network_or_graph", "file_names"]


def file_names(nodes, output):
    """``(nodes, output)`` with every layer node named as a model file names it (docs/graphs.md, "Spaces"):
    layer j of segment N is ``N.j``, its last layer ``N``, so that the certificate's spaces are the ones
    the model file written from it (and the checker) name.  Joins keep their names."""
    from ..graph import Node

    last = {}
    for n in nodes:
        if not n.is_join and n.segment:
            last[n.segment] = n.name
    rename = {n.name: (n.segment if last[n.segment] == n.name else f"{n.segment}.{n.index}")
              for n in nodes if not n.is_join and n.segment}
    out = [Node(rename.get(n.name, n.name), n.op, tuple(rename.get(i, i) for i in n.inputs), layer=n.layer,
                activation=n.activation, segment=n.segment, index=n.index) for n in nodes]
    return out, rename.get(output, output)


def _exact_layer(lin):
    """One segment layer of the graph reader, realised with the exact folds, as an exact layer."""
    from ..activations import activation_from_spec
    from ..layers.conv import ConvLayer
    from ..models import DenseLayer
    from ..numbers import matrix
    from ..sizes import check_width
    from ..layers.conv.floating import ExactFold
    from .onnx_io import _fmpq_of, _realised_list

    check_width(lin.shape.out_dim if lin.shape is not None else lin.raw_K.shape[0], f"{lin.where}: layer width")
    (W, b, act, where), = _realised_list([lin], ExactFold)
    try:
        a = None if act is None else activation_from_spec(act, where)
    except InputError as e:
        raise InputError(f"{where}: --exact-floats needs an exact activation ({e}); use `symeq certify` for "
                         "float networks") from None
    if isinstance(W, dict):
        cb = W["channel_bias"]
        cb = [_fmpq_of(0)] * W["shape"].out_channels if cb is None else list(cb)
        return ConvLayer(W["shape"], W["kernel"].tolist(), cb, a)
    return DenseLayer(matrix(W.tolist()), None if b is None else list(b), a)


def load_onnx_graph_exact(path):
    """The exact graph model of an ONNX file with branches, or None for a chain (module docstring)."""
    from ..activations import activation_from_spec
    from ..graph import GraphModel, Node
    from .onnx_graph import _build, read_onnx_graph

    g = read_onnx_graph(path)
    if g is None:
        return None
    group, g.group = g.group, None  # the metadata's exact group, kept exact (the float builder would convert it)
    built = _build(g, path, _exact_layer)
    nodes = []
    for n in built.nodes:
        if n.is_join and n.activation is not None:
            try:
                act = activation_from_spec(n.activation.spec, f"node {n.name}")
            except InputError as e:
                raise InputError(f"{path}: node {n.name}: --exact-floats needs an exact activation ({e})") from None
            n = Node(n.name, n.op, n.inputs, activation=act, segment=n.segment, index=n.index)
        nodes.append(n)
    nodes, output = file_names(nodes, built.output)
    try:
        return GraphModel(built.input_dim, nodes, output, group, built.name, built.input_shape, built.meta)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None


def load_onnx_exact_network(path):
    """An exact chain (:func:`symeq.numeric.onnx_io.load_onnx_exact`) or, where the chain reader refuses a
    join, the exact graph model (:func:`load_onnx_graph_exact`)."""
    from .onnx_io import load_onnx_exact

    try:
        return load_onnx_exact(path)
    except InputError:
        graph = load_onnx_graph_exact(path)  # None: a chain, and the chain reader's refusal stands
        if graph is None:
            raise
        return graph


def load_float_network_or_graph(path):
    """certify's reader: a float chain (:func:`symeq.numeric.onnx_io.load_float_network`) or, for an ONNX file
    the chain reader refuses for a join, the float graph model (:func:`symeq.numeric.onnx_graph.load_onnx_graph`)."""
    from .onnx_io import load_float_network

    try:
        return load_float_network(path)
    except InputError:
        if not str(path).lower().endswith(".onnx"):
            raise
        from .onnx_graph import load_onnx_graph

        graph = load_onnx_graph(path)  # None: a chain, and the chain reader's refusal stands
        if graph is None:
            raise
        return graph
