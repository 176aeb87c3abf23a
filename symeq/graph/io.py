"""The graph form of a model file (docs/graphs.md): reading into :class:`GraphModel` and writing back.

``symeq.io.model_from_json`` hands a file with ``"graph"`` here; a chain file (``"layers"``) never comes
here and reads exactly as before.  Segments are read by the layer kinds' own readers
(:func:`symeq.layers.registry.read_layers`, with the image shape of the node they read); segment ``N``
of k layers becomes the layer nodes ``N.1`` ... ``N.(k-1)`` and ``N`` (its last layer), named as their spaces.
"""

from __future__ import annotations

from ..activations import activation_from_spec
from ..errors import InputError
from ..groups import FiniteGroup
from ..layers.base import declared_biases
from ..layers.registry import layer_to_json, read_layers, supports
from ..schema import check_keys
from .model import INPUT, NAME_PATTERN, GraphModel, Node
from .ops.registry import join_op, op_keys

__all__ = ["GRAPH_MODEL_KEYS", "SEGMENT_KEYS", "JOIN_KEYS", "graph_from_json", "graph_to_json", "graph_output_name",
           "graph_nodes_json"]

GRAPH_MODEL_KEYS = (("format", "name", "input_dim", "graph", "output", "group"), ("format", "input_dim", "graph"))
"""The keys of a graph model file (allowed, required)."""

SEGMENT_KEYS = (("name", "input", "layers"), ("name", "input", "layers"))
"""A segment node's keys (allowed, required)."""


def JOIN_KEYS(key: str) -> tuple:
    """A join node's keys (allowed, required): ``{"name", KEY: [...], "activation"}``."""
    return ("name", key, "activation"), ("name", key)


def _node_kind(spec: dict, at: str) -> str:
    kinds = [k for k in ("layers",) + op_keys() if k in spec]
    if len(kinds) != 1:
        listed = ", ".join(f'"{k}"' for k in ("layers",) + op_keys())
        got = f", got {', '.join(kinds)}" if kinds else ""
        raise InputError(f"{at}: a node has exactly one of {listed} (a segment, or a join){got}")
    return kinds[0]


def _name(value, at: str, seen: dict) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise InputError(f"{at}.name: a node name must match [A-Za-z_][A-Za-z0-9_-]*, got {value!r}")
    if value == INPUT:
        raise InputError(f'{at}.name: "input" is reserved (the model\'s input), not a node name')
    if value in seen:
        raise InputError(f"{at}.name: node name {value!r} is used twice")
    return value


def _ref(value, at: str, seen: dict) -> str:
    if not isinstance(value, str) or (value != INPUT and value not in seen):
        known = ", ".join([INPUT] + list(seen))
        raise InputError(f"{at}: {value!r} is not \"input\" or a node listed before this one (known: {known})")
    return INPUT if value == INPUT else seen[value][0]


def _segment(spec: dict, at: str, seen: dict, dims: dict, shapes: dict) -> list:
    name = spec["name"]
    src = _ref(spec.get("input"), f"{at}.input", seen)
    layers = read_layers(spec.get("layers"), dims[src], f"{at}.layers", shape=shapes.get(src))
    if not layers:
        raise InputError(f"{at}: a segment needs a layer (a flatten alone is none)")
    nodes, prev = [], src
    for j, layer in enumerate(layers, 1):
        label = name if j == len(layers) else f"{name}.{j}"  # the segment's output is named N
        nodes.append(Node(label, layer.kind, (prev,), layer=layer, segment=name, index=j))
        prev = nodes[-1].name
        dims[prev] = layer.out_dim
        shapes[prev] = tuple(layer.out_shape) if supports(layer, "image-output") else None
    return nodes


def _join(spec: dict, key: str, at: str, seen: dict, dims: dict, shapes: dict) -> Node:
    names = spec.get(key)
    op = join_op(key)
    if not isinstance(names, list) or len(names) < op.min_inputs:
        raise InputError(f"{at}.{key} must list at least {op.min_inputs} node names")
    inputs = tuple(_ref(v, f"{at}.{key}[{j}]", seen) for j, v in enumerate(names))
    act = activation_from_spec(spec.get("activation"), f"{at}.activation")
    dims[spec["name"]], shapes[spec["name"]] = op.out_shape([dims[i] for i in inputs], [shapes[i] for i in inputs], at)
    return Node(spec["name"], key, inputs, activation=act)


def graph_from_json(data: dict, n: int, where: str = "model") -> GraphModel:
    """A graph model from a model file's object (its header already checked by ``symeq.io``)."""
    check_keys(data, where, *GRAPH_MODEL_KEYS, error=InputError)
    graph = data.get("graph")
    if not isinstance(graph, list) or not graph:
        raise InputError(f"{where}.graph must be a non-empty list of nodes")
    seen: dict = {}  # file name -> (internal node name, position)
    dims, shapes = {INPUT: n}, {INPUT: None}
    nodes: list = []
    input_shape = None
    for i, spec in enumerate(graph):
        at = f"{where}.graph[{i}]"
        if not isinstance(spec, dict):
            raise InputError(f"{at} must be an object")
        kind = _node_kind(spec, at)
        check_keys(spec, at, *(SEGMENT_KEYS if kind == "layers" else JOIN_KEYS(kind)), error=InputError)
        name = _name(spec.get("name"), at, seen)
        if kind == "layers":
            new = _segment(spec, at, seen, dims, shapes)
            first = new[0]
            if first.inputs == (INPUT,) and supports(first.layer, "image-output") and input_shape is None:
                input_shape = tuple(first.layer.in_shape)
                shapes[INPUT] = input_shape
            nodes += new
        else:
            nodes.append(_join(spec, kind, at, seen, dims, shapes))
        seen[name] = (nodes[-1].name, i)
    output = data.get("output")
    if output is not None and (not isinstance(output, str) or output not in seen):
        raise InputError(f"{where}.output: {output!r} is not a node of the graph")
    group = FiniteGroup.from_json(data["group"], f"{where}.group") if data.get("group") is not None else None
    try:
        return GraphModel(n, nodes, seen[output][0] if output is not None else None, group,
                          str(data.get("name", "model")), input_shape)
    except InputError as e:
        raise InputError(f"{where}: {e}") from None


def _file_name(gm: GraphModel, name: str) -> str:
    """The model file's name of a node: a layer node's segment, a join's own name."""
    if name == INPUT:
        return INPUT
    node = gm.node(name)
    return name if node.is_join else (node.segment or name)


def graph_nodes_json(gm: GraphModel) -> list:
    """The model file's ``"graph"``: consecutive layer nodes of one segment written as that segment."""
    declared = dict(zip((n.name for n in gm.nodes if not n.is_join), declared_biases(gm)))
    out: list = []
    current, last = None, None  # the open segment and its last layer node
    for node in gm.nodes:
        if node.is_join:
            current = None
            act = node.activation
            out.append({"name": node.name, node.op: [_file_name(gm, i) for i in node.inputs],
                        "activation": None if act is None else act.to_spec()})
            continue
        seg = node.segment or node.name
        if not NAME_PATTERN.match(seg):
            raise InputError(f"node {node.name!r}: a model file names segments [A-Za-z_][A-Za-z0-9_-]*; give the "
                             "layer node a segment")
        if current is not None and current["name"] == seg and node.inputs[0] == last:
            current["layers"].append(layer_to_json(node.layer, declared[node.name]))
        else:
            current = {"name": seg, "input": _file_name(gm, node.inputs[0]),
                       "layers": [layer_to_json(node.layer, declared[node.name])]}
            out.append(current)
        last = node.name
    return out


def graph_output_name(gm: GraphModel) -> str:
    """The model file's name of the output node (a segment's, or a join's)."""
    node = gm.node(gm.output)
    return gm.output if node.is_join else (node.segment or gm.output)


def graph_to_json(gm: GraphModel, include_group: bool = True, format_name: str = "symeq-model/1") -> dict:
    """The graph model file of ``gm`` (docs/graphs.md); read back by :func:`graph_from_json`."""
    if not gm.exact:
        raise InputError("a graph model file holds exact rationals: this graph model has float layers")
    data = {"format": format_name, "name": gm.name, "input_dim": gm.input_dim, "graph": graph_nodes_json(gm),
            "output": _file_name(gm, gm.output)}
    if include_group and gm.group is not None:
        data["group"] = gm.group.to_json()
    return data
