"""ONNX graphs that are not chains: residual ``Add``, channel ``Concat`` and tensors read by two nodes.

:func:`read_onnx_graph` cuts an ONNX graph into the nodes of a graph model (docs/graphs.md):

* **cuts** are the data tensors where the graph branches or joins: the network's input, a tensor read
  by an ``Add``/``Sum`` of two or more activations or by a ``Concat``, a tensor read by two or more
  nodes (unless those nodes are one elementwise activation subgraph of it, such as SiLU's
  x * sigmoid(x)), and the graph output;
* a **segment** is what lies between a cut and the next: a chain of layers read by the chain reader of
  :mod:`symeq.numeric.onnx_io` (:class:`_SegmentReader`), with every fold it knows (BatchNorm into its
  convolution, pooling, Dropout/Identity) inside the branch; it may end with an activation or affine
  (a branch read by an addition);
* an **addition** is an ``Add`` (or ``Sum``) of two or more cut tensors of one shape, a
  **concatenation** a ``Concat`` on axis 1 (channels of images of one height and width, or features);
  the elementwise subgraph that alone reads its result is its activation.

Any other node that reads two activations (``Mul``, ``Sub``, ``Div``, ``MatMul`` of two activations,
...) is refused by name, with its node and the reason.  A chain (no cut but the input and the
output) gives None: the chain reader reads it as before, so chain files give what they always gave.
:func:`load_onnx_graph` builds the float :class:`symeq.graph.GraphModel` (float64; every fold
replayed in float64, as :func:`symeq.numeric.onnx_io.load_onnx` does for chains).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import InputError, ShapeError
from .onnx_io import ACTIVATION_OPS, REFUSED, _ChainReader, _attr, _constant, _group_from_metadata, _load_proto, \
    _realised_list, _recognise

__all__ = ["read_onnx_graph", "load_onnx_graph", "JOIN_OPS", "GraphRead"]

#: operators that join branches and are read (the others reading two activations are refused)
JOIN_OPS = ("Add", "Sum", "Concat")
#: why an operator reading two activations is refused
JOIN_REFUSED = {
    "Mul": "a product of two branches is not a layer of symeq's graph models (only Add and Concat join branches)",
    "Sub": "a difference of two branches is not read (only Add and Concat join branches; a skip with a sign is "
           "a 1x1 convolution)",
    "Div": "a quotient of two branches is not a layer of symeq's graph models",
    "MatMul": "a product of two activations (attention-like) is not read in graphs",
    "Max": "a max of two branches is not a layer of symeq's graph models",
    "Min": "a min of two branches is not a layer of symeq's graph models",
}
_ELEMENTWISE = set(ACTIVATION_OPS)


class _SegmentReader(_ChainReader):
    """The chain reader on one segment: its nodes only, from the tensor ``start`` to the tensor ``end``."""

    def __init__(self, base: _ChainReader, nodes: list, index: list, start: str, shape, width: int, end: str):
        self.__dict__.update(base.__dict__)
        self.consts = base.consts  # shared: a Constant read inside a region is a constant for everyone
        self.nodes, self.index, self.i = nodes, index, 0
        self.cur, self.shape, self.width, self.end = start, shape, width, end
        self.layers, self.pending, self.pre, self.fields, self.notes, self.output_op = [], None, [], None, [], None

    def where_of(self, i: int, node) -> str:
        return f"{self.p}: node {self.index[i] + 1} ({node.name or node.op_type})"

    def finish(self):
        if self.pre:  # a BatchNorm or pooling at the end of a branch: a layer of its own (affine, read by the join)
            self.keep_pre_as_layer(self.pre[-1][2])
        if self.pending is not None:
            self.layers.append(self.pending)
            self.pending = None
        if not self.layers:
            raise InputError(f"{self.where_of(0, self.nodes[0])}: a branch without a linear layer (Gemm, MatMul or "
                             "Conv); symeq reads a branch as a chain of layers")
        if self.cur != self.end:
            raise InputError(f"{self.where_of(len(self.nodes) - 1, self.nodes[-1])}: the branch ends at {self.cur!r}, "
                             f"not at {self.end!r}, where the graph joins or branches")
        return self


class GraphRead:
    """What :func:`read_onnx_graph` read: ``n`` (input size), ``input_shape`` ((C, H, W) or None), ``nodes``
    (dicts in topological order: ``{"name", "input", "layers": [_Linear], "where"}`` for a segment,
    ``{"name", "add" | "concat": [names], "activation": spec or None, "where"}`` otherwise), ``output``
    (a node's name), ``notes``, ``output_op``, ``group`` and ``weights_dtype``."""

    def __init__(self, base: _ChainReader, input_shape):
        self.n, self.input_shape = base.n, input_shape
        self.nodes, self.notes, self.output_op, self.output = [], [], None, None
        self.weights_dtype = base.weights_dtype
        self.group = None


class _Cutter:
    """The cut of one ONNX graph into segments and joins (see the module docstring)."""

    def __init__(self, proto, p: str):
        self.p = p
        self.base = _ChainReader(proto, p)
        self.input = self.base.cur
        self.out = self.base.g.output[0].name
        self.data = []  # (index, node) of the nodes that read an activation
        live = {self.input}
        for i, node in enumerate(self.base.nodes):
            where = f"{p}: node {i + 1} ({node.name or node.op_type})"
            if node.op_type == "Constant":
                self.base.consts[node.output[0]] = _constant(node, where)
            elif not any(x in live for x in node.input):
                if node.input and all(x in self.base.consts or not x for x in node.input):
                    self.base.constant_node(node, where)
                else:
                    raise InputError(f"{where}: operator {node.op_type} reads no activation and no constant only")
            else:
                self.data.append((i, node))
                live.update(o for o in node.output if o)
        self.producer = {o: k for k, (_, node) in enumerate(self.data) for o in node.output if o}
        self.readers = {}
        for k, (_, node) in enumerate(self.data):
            for x in dict.fromkeys(node.input):
                if x in live:
                    self.readers.setdefault(x, []).append(k)
        self.live = live
        self.internal = set()  # data nodes inside an activation subgraph of a tensor read several times
        for t, ks in self.readers.items():
            if len(ks) > 1:
                region = self.region(t)
                if region is not None:
                    self.internal.update(region[0])
        self.joins = {k for k, (_, node) in enumerate(self.data) if k not in self.internal and
                      len({x for x in node.input if x in live}) > 1}

    def where(self, k: int) -> str:
        i, node = self.data[k]
        return f"{self.p}: node {i + 1} ({node.name or node.op_type})"

    def region(self, t: str):
        """The elementwise subgraph that alone reads ``t`` (an activation of it), as (node ks, sink), or None
        (computed once per tensor: the scan is linear in the nodes after it)."""
        memo = self.__dict__.setdefault("_regions", {})
        if t not in memo:
            memo[t] = self._region(t)
        return memo[t]

    def _region(self, t: str):
        ks = self.readers.get(t, [])
        if not ks or any(self.data[k][1].op_type not in _ELEMENTWISE for k in ks):
            return None
        inside, made = [], {t}
        for k in range(min(ks), len(self.data)):
            node = self.data[k][1]
            ins = [x for x in node.input if x in self.live]
            if node.op_type in _ELEMENTWISE and ins and all(x in made for x in ins):
                inside.append(k)
                made.update(o for o in node.output if o)
        if not set(ks) <= set(inside):
            return None
        made.discard(t)
        sinks = [u for u in made if u == self.out or any(r not in inside for r in self.readers.get(u, []))]
        return (inside, sinks[0]) if len(sinks) == 1 else None

    def is_cut(self, t: str) -> bool:
        ks = self.readers.get(t, [])
        if t == self.input or t == self.out or any(k in self.joins for k in ks):
            return True
        return len(ks) > 1 and self.region(t) is None

    def segment(self, start: str, first: int):
        """The data nodes from the reader ``first`` of ``start`` up to the next cut, and that cut."""
        inside, todo, ends = [], [first], []
        seen = {first}
        while todo:
            k = todo.pop()
            inside.append(k)
            for u in (o for o in self.data[k][1].output if o):
                if self.is_cut(u):
                    ends.append(u)
                    continue
                for r in self.readers.get(u, []):
                    if r not in seen:
                        seen.add(r)
                        todo.append(r)
        inside.sort()
        for k in inside:  # every activation a node reads comes from the branch itself
            node = self.data[k][1]
            for x in node.input:
                if x in self.live and x != start and self.producer.get(x) not in seen:
                    raise InputError(f"{self.where(k)}: operator {node.op_type} reads {x!r} from another branch: "
                                     + JOIN_REFUSED.get(node.op_type, "only Add and Concat join branches"))
        if len(set(ends)) != 1:
            what = "its output is not used" if not ends else f"it branches into {sorted(set(ends))}"
            raise InputError(f"{self.where(inside[0])}: a branch from {start!r} that symeq cannot read as one chain "
                             f"({what})")
        return inside, ends[0]


def _name(raw: str, taken: set, stem: str) -> str:
    """A graph node name from an ONNX node name: [A-Za-z_][A-Za-z0-9_-]*, unique, never ``input``."""
    s = re.sub(r"[^A-Za-z0-9_-]+", "_", raw).strip("_-") or stem
    if not re.match(r"[A-Za-z_]", s):
        s = f"{stem}_{s}"
    name, k = s, 1
    while name in taken or name == "input":
        k += 1
        name = f"{s}_{k}"
    taken.add(name)
    return name


def read_onnx_graph(path, proto=None) -> GraphRead | None:
    """Cut an ONNX file's graph into segments, additions and concatenations, or None for a chain."""
    proto = _load_proto(path) if proto is None else proto
    c = _Cutter(proto, str(path))
    if not c.joins and not any(len(ks) > 1 and c.region(t) is None for t, ks in c.readers.items()):
        return None  # a chain: the chain reader's business
    g = GraphRead(c.base, c.base.shape)
    g.group = _group_from_metadata(proto, str(path))
    named = {c.input: ("input", c.base.shape, c.base.width)}
    taken, done, seeds = set(), set(), [(c.input, k) for k in c.readers.get(c.input, []) if k not in c.joins]
    keyed = []
    while True:
        while seeds:
            start, first = seeds.pop(0)
            ks, end = c.segment(start, first)
            name, shape, width = named[start]
            r = _SegmentReader(c.base, [c.data[k][1] for k in ks], [c.data[k][0] for k in ks], start, shape, width,
                               end).run()
            if r.output_op is not None and end != c.out:
                raise InputError(f"{r.output_op['node']}: a {r.output_op['op']} is read only at the network's output")
            g.output_op = r.output_op or g.output_op
            g.notes += r.notes
            seg = _name(c.data[ks[0]][1].name, taken, "segment")
            keyed.append((ks[-1], {"name": seg, "input": name, "layers": r.layers, "where": c.where(ks[0])}))
            seeds += _named(c, named, end, seg, r.shape, r.width)  # segment N's output is its last layer, N
        ready = [k for k in sorted(c.joins - done) if all(x in named for x in c.data[k][1].input if x in c.live)]
        if not ready:
            break
        k = ready[0]
        done.add(k)
        last, node, out, shape, width = _join(c, k, named, g)
        node["name"] = _name(c.data[k][1].name, taken, node["kind"])
        keyed.append((last, node))
        seeds += _named(c, named, out, node["name"], shape, width)
    if c.joins - done or c.out not in named:
        k = min(c.joins - done) if c.joins - done else len(c.data) - 1
        raise InputError(f"{c.where(k)}: the graph output {c.out!r} cannot be reached from the input through the "
                         "branches symeq reads")
    g.nodes = [node for _, node in sorted(keyed, key=lambda kn: kn[0])]
    g.output = named[c.out][0]
    return g


def _named(c: _Cutter, named: dict, t: str, name: str, shape, width) -> list:
    """Record the cut ``t`` as the graph node ``name``; the segments that start there."""
    named[t] = (name, shape, width)
    return [(t, k) for k in c.readers.get(t, []) if k not in c.joins]


def _join(c: _Cutter, k: int, named: dict, g: GraphRead):
    """The addition or concatenation of data node ``k`` and its activation: (last data node, node, output
    tensor, shape, width)."""
    _, node = c.data[k]
    where, op = c.where(k), node.op_type
    if op not in JOIN_OPS:
        raise InputError(f"{where}: operator {op} of two branches is not supported: "
                         + JOIN_REFUSED.get(op, REFUSED.get(op, "only Add and Concat join branches")))
    ins = [x for x in node.input if x]
    if any(x not in c.live for x in ins):
        raise InputError(f"{where}: {op} of an activation and a constant that is not a layer's bias (symeq reads the "
                         "constant of an Add only as the bias right after a linear layer)")
    shapes = [named[x][1] for x in ins]
    widths = [named[x][2] for x in ins]
    if op == "Concat":
        axis = int(_attr(node, "axis", 1))
        rank = 4 if shapes[0] is not None else 2
        if axis % rank != 1:
            raise InputError(f"{where}: Concat along axis {axis}; symeq reads a concatenation of channels (axis 1)")
        if any((s is None) != (shapes[0] is None) or s is not None and s[1:] != shapes[0][1:] for s in shapes):
            raise ShapeError(f"{where}: Concat of activations of shapes {[s or (w,) for s, w in zip(shapes, widths)]}; "
                             "images need one height and width")
        shape = None if shapes[0] is None else (sum(s[0] for s in shapes), *shapes[0][1:])
        width = sum(widths)
        kind = "concat"
    else:
        if len(set(widths)) != 1 or len({s for s in shapes}) != 1:
            raise ShapeError(f"{where}: {op} of activations of shapes {[s or (w,) for s, w in zip(shapes, widths)]} "
                             "(a skip that changes the shape needs a projection: a 1x1 convolution)")
        shape, width, kind = shapes[0], widths[0], "add"
    out, last, act = node.output[0], k, None
    region = c.region(out) if out != c.out else None
    if region is not None:
        ks, sink = region
        nodes = [c.data[j][1] for j in ks]
        act = _recognise(nodes, out, sink, c.base.consts, c.where(ks[0]))
        out, last = sink, max(ks)
    g.notes.append(f"{where}: {op} read as the {'addition' if kind == 'add' else 'concatenation'} of "
                   f"{', '.join(named[x][0] for x in ins)}" + ("" if act is None else f", then {act}"))
    return last, {"kind": kind, kind: [named[x][0] for x in ins], "activation": act, "where": where}, out, shape, width


def load_onnx_graph(path):
    """The float graph model (:class:`symeq.graph.GraphModel`) of an ONNX file with branches, or None for a
    chain (read it with :func:`symeq.numeric.onnx_io.load_onnx`)."""
    from ..layers.conv.floating import FloatFold
    from .onnx_io import float_layer

    g = read_onnx_graph(path)
    if g is None:
        return None
    return _build(g, path, lambda lin: float_layer(*_realised_list([lin], FloatFold)[0]))


def _build(g: GraphRead, path, layer_of):
    """The :class:`symeq.graph.GraphModel` of what was read, each segment as its layer nodes N.1, ..., N."""
    from ..graph import GraphModel, Node
    from .models import _as_group, numeric_activation

    nodes = []
    for spec in g.nodes:
        if "layers" in spec:
            seg, prev, k = spec["name"], spec["input"], len(spec["layers"])
            for j, lin in enumerate(spec["layers"], 1):
                layer = layer_of(lin)
                name = seg if j == k else f"{seg}.{j}"  # segment N: layer nodes N.1, ..., N (docs/graphs.md)
                nodes.append(Node(name, layer.kind, (prev,), layer=layer, segment=seg, index=j))
                prev = name
        else:
            act = spec["activation"]
            act = None if act is None else numeric_activation(act, spec["where"])
            nodes.append(Node(spec["name"], spec["kind"], tuple(spec[spec["kind"]]), activation=act))
    meta = {"reader_notes": list(g.notes)} if g.notes else {}
    if g.output_op is not None:
        meta["output_op"] = dict(g.output_op)
    if g.weights_dtype is not None:
        meta["weights_dtype"] = g.weights_dtype
    try:
        return GraphModel(g.n, nodes, output=g.output, group=_as_group(g.group), name=Path(str(path)).stem,
                          input_shape=g.input_shape, meta=meta)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
