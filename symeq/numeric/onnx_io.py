"""ONNX in and out: chains of Gemm / MatMul + Add / Conv layers and known activations, and what folds into them.

ONNX is the exchange format that torch, TensorFlow and JAX export, and reading it executes no
code: a file is a protobuf of nodes and weight tensors (``onnx`` extra, ``pip install 'symeq[onnx]'``,
imported at run time).  :func:`load_onnx` walks the graph in order and reads a chain of

* linear layers: ``Gemm`` (``alpha``, ``beta``, ``transA = 0``, ``transB``), ``MatMul`` followed by an
  ``Add`` of a constant (the bias), and ``Conv`` (2-d, dilation 1, equal strides and symmetric equal
  paddings; ``group > 1``, depthwise included, as its block-diagonal kernel), read as the conv2d
  layer kind with its kernels (:func:`symeq.layers.conv.floating.NumericConvLayer`, exact
  :class:`symeq.layers.conv.ConvLayer`; channel-major pixel order, torch's ``Flatten``);
* what folds into them exactly, each fold listed in ``model.meta["reader_notes"]``:
  ``BatchNormalization`` (eval) into the layer before it (its outputs) or after it (its inputs);
  ``AveragePool``, ``GlobalAveragePool`` and ``ReduceMean`` over H, W into the next layer (before a
  padded convolution only when the windows tile the image: :func:`symeq.layers.conv.floating.pool_before_conv`)
  or into the convolution before it; a mean over each field (``Reshape`` to 5-d + ``ReduceMean``
  over axis 2); two linear layers in a row where their composition is one layer; the folds are
  replayed in float64 for the float twin and in exact rationals for :func:`load_onnx_exact`
  (a BatchNorm's scale gamma/sqrt(var + eps) as its float64 value, read exactly);
* shape nodes: ``Flatten``, ``Reshape`` (to 2-d: the identity on that pixel order; to 4-d: the
  ``(C, H, W)`` shape a following ``Conv`` needs), ``Squeeze`` of 1 x 1 pixels, ``Identity`` and
  ``Dropout`` in eval mode (dropped and listed);
* pooling layers of their own after an activation (:mod:`symeq.layers.pooling`): ``MaxPool`` (2-d, square
  windows, ceil_mode 0) as ``maxpool2d``, and a ``Reshape`` to (batch, F, G, H, W) then ``ReduceMax`` over
  axis 2 (escnn's GroupPooling) as ``group_pool`` with fields of G channels;
* ``Softmax``/``LogSoftmax`` at the output: ``model.meta["output_op"]``; the model is the logits,
  and :func:`check_output_op` requires the output action to be a permutation;
* activations: the elementwise nodes between two linear layers.  One node ``Tanh``, ``Sigmoid``,
  ``Relu``, ``Gelu`` (either form), ``Erf``, ``Softplus``, ``LeakyRelu`` or ``Elu`` (with its
  ``alpha``) is read directly.  A subgraph of ``Add``/``Sub``/``Mul``/``Div``/``Pow`` is a
  polynomial, its coefficients computed exactly from the float constants.  Any other small
  elementwise subgraph (the erf pattern torch emits for GELU, x * 0.5 * (1 + erf(x / sqrt 2)),
  Mul-by-Sigmoid for SiLU, the tanh form of GELU) is recognised by evaluating it at 64 points in
  float64 and comparing with each candidate of :data:`CANDIDATES` (agreement to 1e-6, enough for
  float32 constants such as 1.4142135, far below the distance between candidates).  The result
  is given to :func:`symeq.numeric.models.numeric_activation`, which refuses, naming the node,
  an activation symeq does not know.

The reader is one table from operator to handler (:data:`HANDLERS`) and one of refusals with their
reasons (:data:`REFUSED`: a residual ``Add``, ``ReduceMax`` over other axes, global max pooling, the norms,
training-mode BatchNorm and Dropout, ...); every refusal names the operator, the node (numbered from
1, with its name) and the reason (docs/onnx.md has both tables).  Weights come from initializers
and ``Constant`` nodes, and external data files are read from beside the ``.onnx`` file only, never
the current directory.  They are read as float64 for the float twin
(:class:`~symeq.numeric.models.NumericModel`); :func:`load_onnx_exact` reads them as the exact
dyadic rationals they are (``Fraction(float)`` is exact) for ``--exact-floats``.
:func:`symeq.numeric.onnx_graph.read_onnx_graph` reads graphs that branch (residual ``Add``, ``Concat``) with
this chain reader on each branch (docs/graphs.md).
unknown operator, a truncated or corrupted file) is an :class:`~symeq.errors.InputError` (exit 2)
that names the node or the file.

:func:`export_onnx` writes a model (exact or float; convolutions as their dense matrices) as
ONNX: ``Gemm`` layers (float64 by default, float32 on request), the activations as ONNX
operators (``Tanh``, ``Sigmoid``, ``Relu``, ``Erf``, ``Softplus``, ``Elu``, ``LeakyRelu``; SiLU as
x * sigmoid(x), GELU as the erf pattern or its tanh form, opset 17), polynomials by Horner's
rule in ``Mul``/``Add`` nodes, and the group in the metadata (``"symeq.group"``).

Examples
--------
>>> import tempfile, os, numpy as np
>>> from symeq.numeric.models import NumericModel, NumericDenseLayer, numeric_activation
>>> m = NumericModel(2, [NumericDenseLayer(np.eye(2), np.ones(2), numeric_activation("tanh")),
...                      NumericDenseLayer(np.ones((1, 2)), None, None)])
>>> path = os.path.join(tempfile.mkdtemp(), "m.onnx")
>>> export_onnx(m, path)                                  # doctest: +SKIP
>>> load_onnx(path).widths                                # doctest: +SKIP
[2, 2, 1]
"""

from __future__ import annotations

import functools
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..activations.registry import activation_from_onnx, float_functions, onnx_candidates, onnx_ops
from ..activations.registry import to_onnx as activation_to_onnx
from ..errors import EngineMissing, InputError, ShapeError

__all__ = ["load_float_network", "load_onnx", "load_onnx_exact", "read_onnx_chain",
           "read_onnx_layers", "check_output_op", "export_onnx", "ONNX_INSTALL", "HANDLERS", "REFUSED"]

ONNX_INSTALL = "pip install 'symeq[onnx]'"

LINEAR_OPS = ("Gemm", "MatMul", "Conv")
SHAPE_OPS = ("Flatten", "Reshape", "Identity", "Squeeze (of 1 x 1 pixels)")
# elementwise operators an activation subgraph may use (evaluated in float64 by _ELEMENTWISE), with every
# single operator an activation unit reads (symeq.activations)
ACTIVATION_OPS = tuple(dict.fromkeys(("Tanh", "Sigmoid", "Relu", "LeakyRelu", "Elu", "Softplus", "Erf", "Gelu", "Exp",
                                      "Log", "Neg", "Abs", "Sqrt", "Reciprocal", "Add", "Sub", "Mul", "Div", "Pow",
                                      "Identity") + tuple(onnx_ops())))
FOLDED_OPS = ("BatchNormalization (eval)", "AveragePool", "GlobalAveragePool", "ReduceMean over H, W",
              "Reshape to 5-d + ReduceMean over each field",
              "Dropout (eval)", "Softmax / LogSoftmax at the output")


def supported() -> str:
    """The operators the chain reader reads, for its messages (the kinds' own rules included)."""
    kinds = tuple(r.text for table in kind_onnx_rules() for r in table.values())
    activations = tuple(o for o in ACTIVATION_OPS if o not in ("Add", "Identity"))
    return ", ".join(LINEAR_OPS[:2] + ("Conv (any group: block-diagonal kernels)", "Add (a bias)") + SHAPE_OPS +
                     ("Constant",) + FOLDED_OPS + kinds + activations)


def _onnx():
    try:
        import onnx
        from onnx import numpy_helper  # noqa: F401
    except ImportError:
        raise EngineMissing(f"reading and writing ONNX needs the onnx package: {ONNX_INSTALL}") from None
    return onnx


# -- activations: candidates and elementwise evaluation -----------------------------------------

def _sigma(spec):
    return float_functions(spec)[0]


# label -> (spec, float64 function): every activation unit's ONNX candidates (symeq.activations), tried
# against an elementwise subgraph; DIRECT: the single operators the units read
CANDIDATES = {label: (spec, _sigma(spec)) for label, spec in onnx_candidates()}
DIRECT = onnx_ops()


def _attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            from onnx import helper

            return helper.get_attribute_value(a)
    return default


#: the one-input operators of an elementwise subgraph without attributes, as numpy functions
UNARY = {"Tanh": _sigma("tanh"), "Sigmoid": _sigma("sigmoid"), "Relu": _sigma("relu"), "Softplus": _sigma("softplus"),
         "Erf": _sigma("erf"), "Exp": np.exp, "Log": np.log, "Neg": np.negative, "Abs": np.abs, "Sqrt": np.sqrt,
         "Reciprocal": lambda t: 1.0 / t, "Identity": lambda t: t}
#: the two-input operators
BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Pow": np.power}


def _elementwise(node, args):
    """The value of one elementwise node at the float arrays ``args`` (its inputs)."""
    op = node.op_type
    if op in UNARY:
        return UNARY[op](args[0])
    t = args[0]
    if op == "LeakyRelu":
        return np.where(t > 0, t, _attr(node, "alpha", 0.01) * t)
    if op == "Elu":
        return np.where(t > 0, t, _attr(node, "alpha", 1.0) * np.expm1(np.minimum(t, 0.0)))
    if op in DIRECT:  # Gelu (either form), and any other single operator an activation unit reads
        return _sigma(activation_from_onnx(op, lambda key, default: _attr(node, key, default)))(t)
    a, b = args
    return BINARY[op](a, b)


POLY_OPS = ("Add", "Sub", "Mul", "Neg", "Identity", "Pow", "Div")


def _polynomial(nodes, z_name, y_name, consts, max_degree: int = 64):
    """The polynomial spec an Add/Sub/Mul/Pow subgraph computes, with exact coefficients (each float
    constant read as the dyadic rational it is), or None when the subgraph is not polynomial."""
    if any(n.op_type not in POLY_OPS for n in nodes):
        return None

    def padd(a, b, sign=1):
        out = [Fraction(0)] * max(len(a), len(b))
        for i, v in enumerate(a):
            out[i] += v
        for i, v in enumerate(b):
            out[i] += sign * v
        return out

    def pmul(a, b):
        out = [Fraction(0)] * (len(a) + len(b) - 1)
        for i, u in enumerate(a):
            if u:
                for j, v in enumerate(b):
                    out[i + j] += u * v
        return out

    env = {z_name: [Fraction(0), Fraction(1)]}
    for n in nodes:
        args = []
        for name in n.input:
            if name in env:
                args.append(env[name])
            elif name in consts and np.asarray(consts[name]).size == 1:
                args.append([Fraction(float(np.asarray(consts[name], dtype=np.float64).reshape(-1)[0]))])
            else:
                return None
        op = n.op_type
        if op == "Identity":
            r = args[0]
        elif op == "Neg":
            r = [-v for v in args[0]]
        elif op in ("Add", "Sub"):
            r = padd(args[0], args[1], 1 if op == "Add" else -1)
        elif op == "Mul":
            r = pmul(args[0], args[1])
        elif op == "Div":
            if len(args[1]) != 1 or args[1][0] == 0:
                return None
            r = [v / args[1][0] for v in args[0]]
        else:  # Pow by a constant non-negative integer
            if len(args[1]) != 1 or args[1][0].denominator != 1 or not 0 <= args[1][0] <= max_degree:
                return None
            r = [Fraction(1)]
            for _ in range(int(args[1][0])):
                r = pmul(r, args[0])
        while len(r) > 1 and r[-1] == 0:
            r = r[:-1]
        if len(r) - 1 > max_degree:
            return None
        env[n.output[0]] = r
    coeffs = env[y_name]
    return {"type": "polynomial", "coeffs": [f"{c.numerator}/{c.denominator}" if c.denominator != 1 else str(c.numerator)
                                             for c in coeffs]}


def _recognise(nodes, z_name, y_name, consts, where):
    """The activation an elementwise subgraph from z to y computes: a name of :data:`CANDIDATES` or a spec."""
    ops = [n.op_type for n in nodes]
    if len(nodes) == 1 and list(nodes[0].input) == [z_name]:
        node = nodes[0]
        # the unit of the operator reads it (LeakyRelu's, Elu's float32 alpha: its shortest decimal)
        read = activation_from_onnx(ops[0], lambda key, default: _attr(node, key, default))
        if read is not None:
            return read
    poly = _polynomial(nodes, z_name, y_name, consts)
    if poly is not None:
        return poly
    t = np.concatenate([np.linspace(-6.0, 6.0, 61), [-0.3, 0.2, 0.7]])
    env = {z_name: t}
    with np.errstate(all="ignore"):
        for n in nodes:
            args = []
            for name in n.input:
                if name in env:
                    args.append(env[name])
                elif name in consts:
                    c = np.asarray(consts[name], dtype=np.float64)
                    if c.size != 1:
                        raise InputError(f"{where}: node {n.name!r} ({n.op_type}) has a non-scalar constant "
                                         f"{name!r} of shape {c.shape}; an activation acts elementwise")
                    args.append(float(c.reshape(-1)[0]))
                else:
                    raise InputError(f"{where}: node {n.name!r} ({n.op_type}) reads {name!r}, which is neither "
                                     "the layer's pre-activation nor a constant (the graph branches)")
            env[n.output[0]] = np.broadcast_to(_elementwise(n, args), t.shape).astype(np.float64)
    y = env[y_name]
    for name, (spec, f) in CANDIDATES.items():
        ref = f(t)
        if np.all(np.isfinite(y)) and np.max(np.abs(y - ref)) <= 1e-6 * max(1.0, float(np.max(np.abs(ref)))):
            return spec if len(spec) > 1 else spec["type"]
    raise InputError(f"{where}: the elementwise nodes {ops} compute no activation symeq knows "
                     f"(tried {', '.join(CANDIDATES)})")


# -- reading ----------------------------------------------------------------------------------

def _external_locations(proto, p: Path) -> list:
    """The external data files the tensors of ``proto`` name, resolved next to the ``.onnx`` file
    (never the current directory), each refused unless it is a relative path inside that directory."""
    from onnx import external_data_helper

    base = p.resolve().parent
    files = {}
    for t in external_data_helper._get_all_tensors(proto):
        if not external_data_helper.uses_external_data(t):
            continue
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        rel = Path(loc)
        if not loc or rel.is_absolute() or ".." in rel.parts:
            raise InputError(f"{p}: tensor {t.name!r} names the external data file {loc!r}; symeq reads external data "
                             "only from a relative path beside the .onnx file")
        f = (base / rel)
        if not f.is_file():
            raise InputError(f"{p}: tensor {t.name!r} has its data in {loc!r}, which is not beside the .onnx file "
                             f"(looked for {f}); copy the data file with the model")
        files[f] = f.stat().st_size
    return sorted(files.items())


def _load_proto(path):
    onnx = _onnx()
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: a directory, not an ONNX file")
    from ..sizes import check_memory

    # protobuf parse plus float64 copies of the weights: a few times the file (guarded before reading)
    check_memory(4 * p.stat().st_size, f"{p}: reading an ONNX file of {p.stat().st_size} bytes")
    try:
        proto = onnx.load(str(p), load_external_data=False)
    except Exception as e:  # protobuf DecodeError, truncated message, ...: never a traceback
        raise InputError(f"{p}: not a readable ONNX file ({type(e).__name__}: {str(e)[:120]})") from None
    if not proto.graph.node:
        raise InputError(f"{p}: the ONNX file has no graph nodes (truncated, corrupted, or not ONNX)")
    external = _external_locations(proto, p)
    if external:  # torch >= 2.9's exporter writes NAME.onnx.data: read it from beside the file, guarded
        from onnx import external_data_helper

        size = sum(s for _, s in external)
        check_memory(4 * size, f"{p}: reading {size} bytes of external data ({', '.join(f.name for f, _ in external)})")
        try:
            external_data_helper.load_external_data_for_model(proto, str(p.resolve().parent))
        except Exception as e:
            raise InputError(f"{p}: cannot read its external data ({type(e).__name__}: {str(e)[:160]})") from None
    try:
        onnx.checker.check_model(proto)
    except Exception as e:
        raise InputError(f"{p}: the ONNX model is malformed ({type(e).__name__}: {str(e).splitlines()[0][:160]})") from None
    return proto


def _tensor(t, where, booleans: bool = False):
    from onnx import numpy_helper

    try:
        a = numpy_helper.to_array(t)
    except Exception as e:
        raise InputError(f"{where}: cannot read tensor {t.name!r} ({type(e).__name__})") from None
    if a.dtype.kind not in ("fiub" if booleans else "fiu"):
        raise InputError(f"{where}: tensor {t.name!r} has dtype {a.dtype}, expected numbers")
    return a


def _constant(node, where):
    v = _attr(node, "value")
    if v is not None:
        return _tensor(v, where, booleans=True)  # a flag (Dropout's training_mode) is read, then judged by its user
    for name in ("value_float", "value_floats", "value_int", "value_ints"):
        v = _attr(node, name)
        if v is not None:
            return np.asarray(v)
    raise InputError(f"{where}: Constant node {node.name!r} has no numeric value")


class _Linear:
    """A linear layer as read: its raw float arrays and the exact folds to apply to them, in order.

    ``ops`` are ``(kind, data)`` pairs replayed by :func:`_replay` over a number kind
    (:class:`symeq.layers.conv.floating.FloatFold` for the float twin, :class:`~symeq.layers.conv.floating.ExactFold`
    for the exact path), so both paths apply the same folds; ``shape`` is the final geometry (a
    :class:`~symeq.layers.conv.ConvShape`, or None for a dense layer), ``in_dim`` its input size."""

    def __init__(self, K, b, shape, where):
        self.raw_K, self.raw_b, self.shape, self.where = K, b, shape, where
        self.in_dim = shape.in_dim if shape is not None else K.shape[1]
        self.ops = []
        self.activation = None

    @property
    def out_channels(self) -> int:
        return self.shape.out_channels if self.shape is not None else self.raw_K.shape[0]


class _KindItem:
    """A layer a kind's ONNX rule read (:func:`kind_onnx_rules`; the pooling kinds'), in the reader's list
    of layers: the exact layer, made float by its kind's float twin when the float model is built."""

    def __init__(self, layer, where):
        self.layer, self.where = layer, where
        self.activation = None


def _kind_layer(item: _KindItem, exact: bool):
    """The exact layer of ``item`` or its float twin (:func:`symeq.numeric.models.float_twin`)."""
    if exact:
        return item.layer
    from .models import float_twin

    return float_twin(item.layer)


class _NodeView:
    """What a kind's ONNX rule sees of a node: ``attr(name, default)``, ``axes()`` (the attribute, or the
    constant second input of opset 18) and ``outputs``."""

    def __init__(self, reader, node, where):
        self._reader, self._node, self._where = reader, node, where
        self.outputs = list(node.output)

    def attr(self, name, default=None):
        return _attr(self._node, name, default)

    def axes(self):
        axes = _attr(self._node, "axes")
        if axes is None and len(self._node.input) > 1 and self._node.input[1]:
            axes = [int(v) for v in np.asarray(self._reader.need(self._node.input[1], self._where)).reshape(-1)]
        return axes


@functools.lru_cache(maxsize=1)
def kind_onnx_rules() -> tuple:
    """(operator -> rule, operator after a 5-d Reshape -> rule): the ONNX operators the layer kinds read
    themselves (``ONNX_OPERATORS`` and ``ONNX_FIELD_OPERATORS`` of each kind's float unit)."""
    from ..layers.registry import float_unit, kind_names

    plain, fields = {}, {}
    for kind in kind_names():
        unit = float_unit(kind)
        plain.update(getattr(unit, "ONNX_OPERATORS", {}))
        fields.update(getattr(unit, "ONNX_FIELD_OPERATORS", {}))
    return plain, fields


def _bn_scale(gamma, var, eps):
    """gamma / sqrt(var + eps) in float64: the scale the exact path reads as the rational it is."""
    return np.asarray(gamma, np.float64) / np.sqrt(np.asarray(var, np.float64) + float(eps))


#: operators refused by name, with the reason (the reader's table of what it cannot read)
REFUSED = {
    "GlobalMaxPool": "global max pooling is not read (MaxPool is: a maxpool2d layer; average pooling is folded)",
    "ReduceMax": "a max over these axes is not read (a max over each field's channels after a 5-d Reshape, escnn's "
                 "GroupPooling, is: a group_pool layer)",
    "LayerNormalization": "layer norm divides by a data-dependent norm, which breaks the monomial latent groups in "
                          "general; it is not supported",
    "InstanceNormalization": "instance norm divides by a data-dependent norm; it is not supported",
    "GroupNormalization": "group norm divides by a data-dependent norm; it is not supported",
    "Concat": "concatenation joins branches: the chain reader reads chains (the graph reader reads it: docs/graphs.md)",
    "Split": "a split makes branches: graph networks are not supported yet",
    "ConvTranspose": "transposed convolutions are not supported",
    "Transpose": "a transpose of the activations reorders them in a way symeq's layers do not record",
    "MaxUnpool": "unpooling is not supported",
    "Resize": "resizing (upsampling) is not supported", "Upsample": "resizing (upsampling) is not supported",
    "Pad": "explicit padding nodes are not supported (use the convolution's own padding)",
    "LSTM": "recurrent layers are not supported", "GRU": "recurrent layers are not supported",
    "RNN": "recurrent layers are not supported",
    "Attention": "attention is read from symeq's model files, not from ONNX",
    "MultiHeadAttention": "attention is read from symeq's model files, not from ONNX",
    "Softmax": "softmax is read only at the output (after the last linear layer)",
    "LogSoftmax": "log-softmax is read only at the output (after the last linear layer)",
}


class _ChainReader:
    """The ONNX chain reader: one handler per operator (:data:`HANDLERS`), refusals in :data:`REFUSED`."""

    def __init__(self, proto, p: str):
        self.p = p
        g = proto.graph
        self.g = g
        self.consts = {t.name: _tensor(t, p, booleans=True) for t in g.initializer}
        inputs = [i for i in g.input if i.name not in self.consts]
        if len(inputs) != 1:
            raise InputError(f"{p}: expected one graph input (the network's input), found {[i.name for i in inputs]}")
        if len(g.output) != 1:
            raise InputError(f"{p}: expected one graph output, found {len(g.output)}")
        dims = [d.dim_value if d.HasField("dim_value") else None for d in inputs[0].type.tensor_type.shape.dim]
        self.shape = None  # (C, H, W) while the activations are images
        if len(dims) == 4 and all(d for d in dims[1:]):
            self.shape = tuple(dims[1:])
            n = int(np.prod(self.shape))
        elif len(dims) == 2 and dims[1]:
            n = dims[1]
        else:
            raise InputError(f"{p}: the input {inputs[0].name!r} has shape {dims}; expected (batch, features) or "
                             "(batch, channels, height, width) with known sizes")
        self.n = n
        floats = [a.dtype for a in self.consts.values() if a.dtype.kind == "f" and a.size > 1]
        # the least precise float type of the weights: numeric-check's default tolerance follows it
        self.weights_dtype = str(max(floats, key=lambda d: np.finfo(d).eps)) if floats else None
        self.cur, self.width = inputs[0].name, n
        self.layers = []      # finished _Linear layers (with their activation)
        self.pending = None   # a _Linear waiting for its activation
        self.pre = []         # input-side ops (BatchNorm after an activation, average pooling) for the next linear op
        self.fields = None    # a 5-d Reshape (batch, fields, |G|, H, W) waiting for its reduction
        self.notes = []       # what was folded or dropped, for the reports
        self.output_op = None
        self.nodes = list(g.node)
        self.i = 0

    # -- helpers
    def need(self, name, where):
        if name not in self.consts:
            raise InputError(f"{where}: {name!r} is not a constant (initializer or Constant node); weights must be fixed")
        a = self.consts[name]
        if a.dtype.kind == "b":
            raise InputError(f"{where}: {name!r} is a boolean tensor where a number was expected")
        return a

    def note(self, text):
        self.notes.append(text)

    def refuse(self, where, op, reason):
        raise InputError(f"{where}: operator {op} is not supported: {reason}")

    def where_of(self, i: int, node) -> str:
        """How node ``i`` of :attr:`nodes` is named in messages (a graph's segment numbers it in the whole graph)."""
        return f"{self.p}: node {i + 1} ({node.name or node.op_type})"

    def run(self):
        while self.i < len(self.nodes):
            node = self.nodes[self.i]
            where = self.where_of(self.i, node)
            op = node.op_type
            if op == "Constant":
                self.consts[node.output[0]] = _constant(node, where)
                self.i += 1
                continue
            if node.input and all(x in self.consts or not x for x in node.input):
                self.constant_node(node, where)
                self.i += 1
                continue
            if self.output_op is not None and op != "Identity":
                raise InputError(f"{where}: operator {op} after the {self.output_op['op']} of {self.output_op['node']}: "
                                 f"{REFUSED[self.output_op['op']]}")
            if self.cur not in node.input:
                if op == "Add" and all(x not in self.consts for x in node.input):
                    self.refuse(where, op, "residual addition: the chain reader reads chains (the graph reader reads it: docs/graphs.md)")
                raise InputError(f"{where}: operator {op} does not read the current activations {self.cur!r} "
                                 "(symeq reads chains of layers, not branching graphs)")
            if self.fields is not None and op != "ReduceMean" and op not in kind_onnx_rules()[1]:
                self.refuse(where, op, "after a Reshape to 5-d (batch, fields, group, H, W) symeq reads only a "
                            "reduction over the fields' channels")
            handler = HANDLERS.get(op)
            if handler is None and op in kind_onnx_rules()[0]:  # an operator a layer kind reads itself
                self.kind_layer(kind_onnx_rules()[0][op], node, where)
                continue
            if handler is None:
                if op in REFUSED:
                    self.refuse(where, op, REFUSED[op])
                self.refuse(where, op, f"symeq has no reader rule for it; it reads {supported()}")
            handler(self, node, where)
        return self.finish()

    def constant_node(self, node, where):
        """A node of constants only: Identity passes a constant on (torch's exporter shares equal
        initializers that way); shape arithmetic is refused."""
        if node.op_type == "Identity":
            self.consts[node.output[0]] = self.consts[node.input[0]]
            return
        if node.op_type in ("Shape", "Gather", "Unsqueeze", "Concat", "Cast", "Squeeze", "Slice"):
            raise InputError(f"{where}: shape arithmetic ({node.op_type}) is not supported; export with a fixed "
                             "input shape")
        raise InputError(f"{where}: operator {node.op_type} on constants is not supported (fold constants when "
                         "exporting: do_constant_folding=True)")

    def advance(self, out):
        self.cur = out
        self.i += 1

    # -- linear layers
    def start_linear(self, lin, where):
        if self.pending is not None:  # two linear layers in a row: one layer where that is exact
            lin = self.compose(self.pending, lin, where)
        for kind, data, owhere in reversed(self.pre):  # x -> op_1 -> ... -> op_k -> lin: fold op_k first
            if kind == "pool":
                self.fold_pool_in(lin, data, where, owhere)
            elif kind == "fieldmean":
                self.fold_field_mean_in(lin, data, where, owhere)
            else:
                self.fold_bn_in(lin, data, where, owhere)
        self.pre = []
        self.pending = lin

    def keep_pre_as_layer(self, where):
        """The input-side ops waiting in :attr:`pre` (a BatchNorm after an addition or at a branch's end, an
        average pooling with nothing to fold into) kept as a layer of their own: the identity (a 1x1
        convolution on images, the identity matrix on vectors) with them folded exactly into its inputs -- a
        per-channel affine 1x1 convolution for a BatchNorm, a strided per-channel kernel for a pooling."""
        from ..layers.conv import ConvShape

        owhere = self.pre[-1][2]
        if self.shape is None:
            lin = _Linear(np.eye(self.width), None, None, owhere)
        else:
            C, H, W = self.shape
            lin = _Linear(np.eye(C).reshape(C, C, 1, 1), None, ConvShape(C, C, H, W, 1, 1), owhere)
        what = ", ".join({"pool": "average pooling", "fieldmean": "a mean over fields"}.get(k, "BatchNormalization")
                         for k, _, _ in self.pre)
        before = len(self.notes)
        self.start_linear(lin, where)
        del self.notes[before:]  # the folds into the identity are this layer, said once
        self.note(f"{owhere}: {what} kept as a layer of its own (no linear layer to fold into): "
                  + ("a per-channel 1x1 convolution" if lin.shape is not None else "a diagonal dense layer")
                  + ", exactly" + (_BN_READ if "BatchNorm" in what else ""))

    def compose(self, first, second, where):
        """second o first as one linear layer, exactly: dense after dense (W2 W1, W2 b1 + b2), a convolution
        after a convolution when the second has padding 0 (it then reads only real outputs of the first),
        and a dense layer after a convolution (the whole-image convolution, padding 0)."""
        from ..layers.conv import ConvShape

        fw, sw = first.where.split(": ", 1)[1], where.split(": ", 1)[1]
        if first.shape is None and second.shape is None:
            second.ops.insert(0, ("compose-dense", first))
            second.in_dim = first.in_dim
        elif first.shape is not None:
            c1 = first.shape
            if second.shape is None:  # the whole-image convolution on the first's output
                C, oh, ow = c1.out_channels, *c1.out_hw
                second.raw_K = second.raw_K.reshape(second.raw_K.shape[0], C, oh, ow)
                second.shape = ConvShape(C, second.raw_K.shape[0], oh, ow, oh, ow)
            c2 = second.shape
            if c2.padding:
                raise InputError(f"{where}: two linear layers without an activation between them (the convolutions "
                                 f"of {fw} and {sw}); they are one convolution only when the second has padding 0 "
                                 "(its zero padding would pad the first one's outputs, which are not 0 at the border)")
            shape = ConvShape(c1.in_channels, c2.out_channels, c1.height, c1.width, c1.kh + c1.stride * (c2.kh - 1),
                              c1.kw + c1.stride * (c2.kw - 1), stride=c1.stride * c2.stride, padding=c1.padding,
                              padding_mode=c1.padding_mode)
            if shape.out_hw != c2.out_hw:
                raise ShapeError(f"{where}: composing the convolutions of {fw} and {sw} changes the output size")
            second.ops.insert(0, ("compose-conv", (first, c1.stride)))
            second.shape, second.in_dim = shape, shape.in_dim
        else:
            raise InputError(f"{where}: two linear layers without an activation between them (a convolution after a "
                             "dense layer); symeq reads sigma(W x + b) layers (merge the affine maps before exporting)")
        self.note(f"{where}: two linear layers without an activation between them ({fw} and {sw}) composed exactly "
                  "into one")
        second.where = first.where
        return second

    def gemm(self, node, where):
        if _attr(node, "transA", 0):
            raise InputError(f"{where}: Gemm with transA=1 is not a layer applied to a batch of inputs")
        B = np.asarray(self.need(node.input[1], where), dtype=np.float64)
        if B.ndim != 2:
            raise InputError(f"{where}: Gemm weight {node.input[1]!r} has shape {B.shape}, expected a matrix")
        W = B if _attr(node, "transB", 0) else B.T
        W = float(_attr(node, "alpha", 1.0)) * W
        b = None
        if len(node.input) > 2 and node.input[2]:
            c = np.asarray(self.need(node.input[2], where), dtype=np.float64).reshape(-1)
            if c.size not in (1, W.shape[0]):
                raise ShapeError(f"{where}: Gemm bias of {c.size} entries for {W.shape[0]} outputs")
            b = float(_attr(node, "beta", 1.0)) * np.broadcast_to(c, (W.shape[0],))
        self.dense(W, b, where)
        self.advance(node.output[0])

    def matmul(self, node, where):
        if node.input[0] != self.cur:
            raise InputError(f"{where}: MatMul with the weight on the left; expected x @ W")
        B = np.asarray(self.need(node.input[1], where), dtype=np.float64)
        if B.ndim != 2:
            raise InputError(f"{where}: MatMul weight {node.input[1]!r} has shape {B.shape}, expected a matrix")
        self.dense(B.T, None, where)
        self.advance(node.output[0])

    def dense(self, W, b, where):
        width = self.width
        if W.shape[1] != width:
            raise ShapeError(f"{where}: weight takes {W.shape[1]} inputs, the activations have {width}")
        self.start_linear(_Linear(W.copy(), None if b is None else b.copy(), None, where), where)
        self.shape, self.width = None, W.shape[0]

    def conv(self, node, where):
        from ..layers.conv import ConvShape

        if self.shape is None:
            raise InputError(f"{where}: Conv needs image-shaped input (batch, C, H, W); reshape before it")
        K = np.asarray(self.need(node.input[1], where), dtype=np.float64)
        if K.ndim != 4:
            raise InputError(f"{where}: Conv kernel of shape {K.shape}; symeq reads 2-d convolutions")
        pads = list(_attr(node, "pads", [0, 0, 0, 0]))
        strides = list(_attr(node, "strides", [1, 1]))
        dil = list(_attr(node, "dilations", [1, 1]))
        auto = _attr(node, "auto_pad", b"NOTSET")
        groups = int(_attr(node, "group", 1))
        if set(dil) != {1} or len(set(pads)) != 1 or len(set(strides)) != 1 or auto not in (b"NOTSET", "NOTSET"):
            raise InputError(f"{where}: symeq reads Conv with dilation 1, equal strides and equal paddings (got "
                             f"dilations {dil}, strides {strides}, pads {pads}, auto_pad {auto!r})")
        C = self.shape[0]
        if groups < 1 or C % groups or K.shape[0] % groups or K.shape[1] * groups != C:
            raise ShapeError(f"{where}: Conv with group {groups} and a kernel of {K.shape[1]} input channels does not "
                             f"fit {C} input channels")
        if groups > 1:  # grouped / depthwise: the block-diagonal kernel, exact zeros off the blocks
            full = np.zeros((K.shape[0], C, K.shape[2], K.shape[3]))
            per_out, per_in = K.shape[0] // groups, C // groups
            for o in range(K.shape[0]):
                gi = o // per_out
                full[o, gi * per_in:(gi + 1) * per_in] = K[o]
            self.note(f"{where}: a grouped convolution (group {groups}"
                      f"{', depthwise' if groups == C else ''}) read as its block-diagonal kernel (exact zeros "
                      "between the groups)")
            K = full
        conv = ConvShape(C, K.shape[0], self.shape[1], self.shape[2], K.shape[2], K.shape[3],
                         stride=int(strides[0]), padding=int(pads[0]))
        cb = None
        if len(node.input) > 2 and node.input[2]:
            cb = np.asarray(self.need(node.input[2], where), dtype=np.float64).reshape(-1)
            if cb.shape[0] != K.shape[0]:
                raise ShapeError(f"{where}: Conv bias of length {cb.shape[0]}, expected {K.shape[0]}")
        self.start_linear(_Linear(K, cb, conv, where), where)
        self.shape = (conv.out_channels, *conv.out_hw)
        self.width = conv.out_dim
        self.advance(node.output[0])

    # -- folds
    def fold_pool_in(self, lin, pool, where, pwhere):
        """Average pooling before the linear layer ``lin``, folded into it exactly."""
        from ..layers.conv.floating import pool_before_conv

        kh, kw, sh, sw, in_shape = pool
        C, H, W = in_shape
        if lin.shape is None:
            ph, pw = (H - kh) // sh + 1, (W - kw) // sw + 1
            if lin.in_dim != C * ph * pw:
                raise ShapeError(f"{where}: a layer of {lin.in_dim} inputs after an average pooling to {C}x{ph}x{pw}")
            lin.ops.append(("dense-pool", pool))
            lin.in_dim = C * H * W
        else:
            try:
                lin.shape = pool_before_conv(pool, lin.shape)
            except InputError as e:
                raise InputError(f"{pwhere}: {e}") from None
            lin.ops.append(("conv-pool", pool))
            lin.in_dim = lin.shape.in_dim
        self.note(f"{pwhere}: average pooling {kh}x{kw}, stride {sh}x{sw}, folded exactly into the linear layer of "
                  f"{where.split(': ', 1)[1]}")

    def fold_field_mean_in(self, lin, data, where, fwhere):
        """A mean over each field's G channels before the linear layer ``lin``: its inputs repeated over the
        G channels of each field, divided by G (exact)."""
        from ..layers.conv import ConvShape

        F, G, (H, W) = data
        if lin.shape is None:
            if lin.in_dim != F * H * W:
                raise ShapeError(f"{where}: a layer of {lin.in_dim} inputs after a mean over fields to {F}x{H}x{W}")

            def op(K, b, N, F=F, G=G, H=H, W=W):
                K4 = K.reshape(K.shape[0], F, 1, H * W)
                return np.repeat(K4, G, axis=2).reshape(K.shape[0], F * G * H * W) * N.ratio(1, G), b
            lin.in_dim = F * G * H * W
        else:
            c = lin.shape

            def op(K, b, N, G=G):
                return np.repeat(K, G, axis=1) * N.ratio(1, G), b
            lin.shape = ConvShape(c.in_channels * G, c.out_channels, c.height, c.width, c.kh, c.kw, stride=c.stride,
                                  padding=c.padding, padding_mode=c.padding_mode)
            lin.in_dim = lin.shape.in_dim
        lin.ops.append(("fn", op))
        self.note(f"{fwhere}: a mean over each field's {G} channels folded exactly into the inputs of the linear layer "
                  f"of {where.split(': ', 1)[1]}")

    def fold_bn_in(self, lin, bn, where, bwhere):
        """A per-channel affine map x -> s x + t (BatchNorm after an activation) folded into the next linear layer."""
        s, beta, mean = bn
        C = len(s)
        if lin.shape is None:
            if lin.in_dim % C:
                raise ShapeError(f"{bwhere}: BatchNormalization over {C} channels before a layer with "
                                 f"{lin.in_dim} inputs")
            rep = lin.in_dim // C

            def op(K, b, N, s=s, beta=beta, mean=mean, rep=rep):
                sq, bq, mq = N.arr(s), N.arr(beta), N.arr(mean)
                t = bq - sq * mq
                sv, tv = np.repeat(sq, rep), np.repeat(t, rep)
                b0 = b if b is not None else N.zeros(K.shape[0])
                return K * sv[None, :], b0 + K.dot(tv)
        else:
            sh = lin.shape
            if sh.in_channels != C:
                raise ShapeError(f"{bwhere}: BatchNormalization over {C} channels before a convolution of "
                                 f"{sh.in_channels} input channels")
            from fractions import Fraction

            t_exact = [Fraction(float(b_)) - Fraction(float(s_)) * Fraction(float(m_)) for s_, b_, m_ in zip(s, beta, mean)]
            if sh.padding and sh.padding_mode == "zeros" and any(t_exact):
                raise InputError(f"{bwhere}: a BatchNormalization after the activation, before the zero-padded "
                                 f"convolution of {where.split(': ', 1)[1]}: its shift beta - gamma mean / sqrt(var + "
                                 "eps) does not fold exactly (the padding stays 0, not the shift); put the "
                                 "BatchNorm before the activation, or use padding 0")

            def op(K, b, N, s=s, beta=beta, mean=mean):
                sq, bq, mq = N.arr(s), N.arr(beta), N.arr(mean)
                t = bq - sq * mq
                b0 = b if b is not None else N.zeros(K.shape[0])
                return K * sq[None, :, None, None], b0 + K.sum(axis=(2, 3)).dot(t)
        lin.ops.append(("fn", op))
        self.note(f"{bwhere}: BatchNormalization (eval) folded exactly into the inputs of the linear layer of "
                  f"{where.split(': ', 1)[1]}" + _BN_READ)

    def batchnorm(self, node, where):
        if int(_attr(node, "training_mode", 0)) or len([o for o in node.output if o]) > 1:
            raise InputError(f"{where}: BatchNormalization in training mode (batch statistics); export the "
                             "network in eval mode (model.eval())")
        gamma, beta, mean, var = (np.asarray(self.need(x, where), dtype=np.float64).reshape(-1) for x in node.input[1:5])
        if not len(gamma) == len(beta) == len(mean) == len(var):
            raise ShapeError(f"{where}: BatchNormalization with scale, bias, mean and variance of lengths "
                             f"{len(gamma)}, {len(beta)}, {len(mean)}, {len(var)}")
        if np.any(var < 0) or not np.all(np.isfinite(np.concatenate([gamma, beta, mean, var]))):
            raise InputError(f"{where}: BatchNormalization with a negative or non-finite variance or parameter")
        eps = float(_attr(node, "epsilon", 1e-5))
        if not eps > 0 and np.any(var + eps <= 0):
            raise InputError(f"{where}: BatchNormalization with var + epsilon <= 0")
        s = _bn_scale(gamma, var, eps)
        C = len(s)
        if self.shape is not None and self.shape[0] != C or self.shape is None and self.width != C:
            raise ShapeError(f"{where}: BatchNormalization over {C} channels on activations of shape "
                             f"{self.shape or (self.width,)}")
        if self.pending is not None:  # before the activation: scale the layer's outputs
            lin = self.pending

            def op(K, b, N, s=s, beta=beta, mean=mean):
                sq, bq, mq = N.arr(s), N.arr(beta), N.arr(mean)
                b0 = b if b is not None else N.zeros(sq.shape[0])
                bn = sq * (b0 - mq) + bq
                return K * sq.reshape((-1,) + (1,) * (K.ndim - 1)), bn
            lin.ops.append(("fn", op))
            self.note(f"{where}: BatchNormalization (eval) folded exactly into the outputs of the linear layer of "
                      f"{lin.where.split(': ', 1)[1]}" + _BN_READ)
        else:
            self.pre.append(("bn", (s, beta, mean), where))
        self.advance(node.output[0])

    def average_pool(self, node, where):
        if self.shape is None:
            raise InputError(f"{where}: {node.op_type} needs image-shaped activations (batch, C, H, W)")
        C, H, W = self.shape
        if node.op_type == "GlobalAveragePool":
            kh, kw, sh, sw = H, W, H, W
        else:
            ks = list(_attr(node, "kernel_shape"))
            st = list(_attr(node, "strides", [1, 1]))
            pads = list(_attr(node, "pads", [0, 0, 0, 0]))
            auto = _attr(node, "auto_pad", b"NOTSET")
            if len(ks) != 2 or any(pads) or int(_attr(node, "ceil_mode", 0)) or auto not in (b"NOTSET", "NOTSET") \
                    or list(_attr(node, "dilations", [1, 1])) != [1, 1]:
                raise InputError(f"{where}: symeq reads AveragePool 2-d without padding, ceil_mode 0, dilation 1 (got "
                                 f"kernel {ks}, pads {pads}, ceil_mode {_attr(node, 'ceil_mode', 0)}, auto_pad {auto!r})")
            kh, kw = ks
            sh, sw = st
        self.pool((int(kh), int(kw), int(sh), int(sw), self.shape), where)
        self.advance(node.output[0])

    def pool(self, pool, where):
        from ..layers.conv.floating import pool_after_conv

        kh, kw, sh, sw, (C, H, W) = pool
        if self.pending is not None:  # after a linear layer, before its activation: fold into it
            lin = self.pending
            if lin.shape is None:
                raise InputError(f"{where}: average pooling after a dense layer")
            conv = lin.shape
            try:
                lin.shape = pool_after_conv(conv, pool)
            except InputError as e:
                raise InputError(f"{where}: {e}") from None
            lin.ops.append(("after-pool", (conv, pool)))
            self.note(f"{where}: average pooling {kh}x{kw}, stride {sh}x{sw}, folded exactly into the outputs of the "
                      f"convolution of {lin.where.split(': ', 1)[1]}")
        else:
            self.pre.append(("pool", pool, where))
        ph, pw = (H - kh) // sh + 1, (W - kw) // sw + 1
        self.shape = (C, ph, pw)
        self.width = C * ph * pw

    def reduce(self, node, where):
        op = node.op_type
        axes = _attr(node, "axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = [int(v) for v in np.asarray(self.need(node.input[1], where)).reshape(-1)]
        if self.fields is not None:
            rule = kind_onnx_rules()[1].get(op)
            if rule is not None:
                F, G = self.fields
                self.fields = None
                return self.kind_layer(rule, node, where, (F, G))
            if axes is None or [int(a) % 5 for a in axes] != [2] or int(_attr(node, "keepdims", 1)):
                self.refuse(where, op, f"after a Reshape to 5-d symeq reads ReduceMean over axis 2 (a mean over each "
                            f"field's channels) with keepdims=0, got axes {axes}")
            return self.field_mean(where, node)
        if op == "ReduceMax":
            self.refuse(where, op, "a max over " + ("the pixels (global max pooling)" if axes is not None and
                                                     sorted(a % 4 for a in axes) == [2, 3] else f"axes {axes}")
                        + " is not a layer of symeq's chain model")
        if self.shape is None or axes is None or sorted(int(a) % 4 for a in axes) != [2, 3]:
            self.refuse(where, op, f"symeq reads ReduceMean over the pixels (axes 2, 3) of an image, got axes {axes}")
        C, H, W = self.shape
        self.pool((H, W, H, W, self.shape), where)
        if not int(_attr(node, "keepdims", 1)):
            self.shape = None
        self.advance(node.output[0])

    def field_mean(self, where, node):
        """The mean over each field's G channels (a Reshape to (batch, F, G, H, W), then ReduceMean over
        axis 2): linear, folded exactly into the linear layer before it (no activation between: its F x G
        output channels averaged per field) or after it (its inputs repeated over each field's channels)."""
        F, G = self.fields
        C, H, W = self.shape
        self.fields = None
        if self.pending is not None:
            lin = self.pending
            if lin.shape is None:
                raise InputError(f"{where}: a mean over fields after a dense layer")

            def op(K, b, N, F=F, G=G):
                Km = K.reshape((F, G) + K.shape[1:]).sum(axis=1) * N.ratio(1, G)
                bm = None if b is None else b.reshape(F, G).sum(axis=1) * N.ratio(1, G)
                return Km, bm
            lin.ops.append(("fn", op))
            from ..layers.conv import ConvShape

            c = lin.shape
            lin.shape = ConvShape(c.in_channels, F, c.height, c.width, c.kh, c.kw, stride=c.stride, padding=c.padding,
                                  padding_mode=c.padding_mode)
            self.note(f"{where}: a mean over each field's {G} channels folded exactly into the outputs of the "
                      f"convolution of {lin.where.split(': ', 1)[1]}")
        else:
            self.pre.append(("fieldmean", (F, G, (H, W)), where))
        self.shape = (F, H, W)
        self.width = F * H * W
        self.advance(node.output[0])

    def kind_layer(self, rule, node, where, fields=None):
        """An operator a layer kind reads (its ``ONNX_OPERATORS``, :func:`kind_onnx_rules`), after an
        activation: the kind's rule builds the exact layer (its shape and refusals now, before the rest is
        read); a parameter-free layer of the chain of its own."""
        if self.shape is None:
            raise InputError(f"{where}: {node.op_type} needs image-shaped activations (batch, C, H, W)")
        if self.pending is not None or self.pre:
            raise InputError(f"{where}: a {node.op_type} is read after an activation only (a hidden space of its own; "
                             "it is not a layer of symeq's chain before the activation)")
        layer = rule.read(_NodeView(self, node, where), self.shape, fields, where)
        self.layers.append(_KindItem(layer, where))
        self.shape, self.width = layer.out_shape, layer.out_dim
        self.note(f"{where}: read as a {layer.kind} layer ({layer.label})")
        self.advance(self.nodes[self.i].output[0])

    def bias_add(self, node, where):
        """Add of a constant after a linear layer (its bias), or an activation's elementwise Add."""
        other = node.input[1] if node.input[0] == self.cur else node.input[0]
        if other not in self.consts:
            self.refuse(where, "Add", "residual addition: the chain reader reads chains (the graph reader reads it: docs/graphs.md)")
        if self.pending is None:
            return self.activation(node, where)
        lin = self.pending
        c = np.asarray(self.need(other, where), dtype=np.float64)
        n = lin.out_channels
        if c.size == 1:
            c = np.full(n, float(c.reshape(-1)[0]))
        elif c.size == n and (lin.shape is None or c.ndim <= 1 or c.shape[-2:] == (1, 1)):
            c = c.reshape(-1)
        else:
            raise InputError(f"{where}: Add of a constant of shape {c.shape} after a linear layer with {n} output "
                             "channels: symeq reads a bias per output channel")

        def op(K, b, N, c=c):
            cq = N.arr(c)
            return K, (cq if b is None else b + cq)
        lin.ops.append(("fn", op))
        self.advance(node.output[0])

    # -- shapes, identities
    def reshape(self, node, where):
        target = [int(v) for v in np.asarray(self.need(node.input[1], where)).reshape(-1)]
        if len(target) == 4:
            known = [v for v in target[1:] if v > 0]
            if len(known) != 3 or int(np.prod(known)) != self.width:
                raise ShapeError(f"{where}: Reshape to {target} does not fit {self.width} features")
            self.shape = tuple(known)
        elif len(target) == 2:
            self.shape = None
        elif len(target) == 5 and self.shape is not None:
            C, H, W = self.shape
            F, G = target[1], target[2]
            if F == -1 and G > 0 and C % G == 0:  # inferred: the batch is target[0]
                F = C // G
            elif G == -1 and F > 0 and C % F == 0:
                G = C // F
            if F < 1 or G < 1 or F * G != C or tuple(target[3:]) != (H, W):
                raise InputError(f"{where}: Reshape to {target} of activations of shape {self.shape}; symeq reads a "
                                 "5-d Reshape (batch, fields, group, H, W) that splits the channels into fields")
            self.fields = (F, G)
        else:
            raise InputError(f"{where}: Reshape to {target}; symeq reads (batch, features) or (batch, C, H, W)")
        self.advance(node.output[0])

    def flatten(self, node, where):
        if int(_attr(node, "axis", 1)) != 1:
            raise InputError(f"{where}: Flatten with axis {_attr(node, 'axis', 1)}; expected axis 1")
        self.shape = None
        self.advance(node.output[0])

    def identity(self, node, where):
        self.advance(node.output[0])

    def squeeze(self, node, where):
        """Squeeze of the 1 x 1 pixels after a global pooling: (batch, C, 1, 1) -> (batch, C)."""
        axes = _attr(node, "axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = [int(v) for v in np.asarray(self.need(node.input[1], where)).reshape(-1)]
        if self.shape is None or self.shape[1:] != (1, 1) or (axes is not None and sorted(int(a) % 4 for a in axes) != [2, 3]):
            self.refuse(where, "Squeeze", f"symeq reads Squeeze only of the 1 x 1 pixels of (batch, C, 1, 1), got "
                        f"axes {axes} on {self.shape or (self.width,)}")
        self.shape = None
        self.advance(node.output[0])

    def dropout(self, node, where):
        training = node.input[2] if len(node.input) > 2 and node.input[2] else None
        if training is not None:
            flag = self.consts.get(training)
            if flag is None:
                raise InputError(f"{where}: Dropout whose training_mode is not a constant; export in eval mode")
            if bool(np.asarray(flag).reshape(-1)[0]):
                raise InputError(f"{where}: Dropout in training mode (a random mask); export the network in eval "
                                 "mode (model.eval()), where dropout is the identity")
        if len(node.output) > 1 and node.output[1] and any(node.output[1] in n.input for n in self.nodes):
            raise InputError(f"{where}: Dropout's mask is used; symeq reads eval-mode Dropout (the identity)")
        self.note(f"{where}: Dropout (eval mode: the identity) dropped")
        self.advance(node.output[0])

    def softmax(self, node, where):
        op = node.op_type
        if self.pending is None or self.shape is not None or int(_attr(node, "axis", -1)) not in (1, -1):
            self.refuse(where, op, REFUSED[op] + ", over the features (axis 1 of (batch, features))")
        kind = "softmax" if op == "Softmax" else "log_softmax"
        self.output_op = {"type": kind, "op": op, "node": where.split(": ", 1)[1]}
        self.note(f"{where}: {op} at the output recorded as the output operation; the logits (the last linear "
                  f"layer's outputs) are what is checked and certified, which carries to the {kind} outputs because "
                  "it commutes with permutations (the output action must be a permutation)")
        self.advance(node.output[0])

    # -- activations
    def activation(self, node, where):
        if self.pending is None and self.pre and self.pre[-1][0] == "bn":  # BatchNorm -> activation (pre-activation)
            self.keep_pre_as_layer(where)
        if self.pending is None:
            raise InputError(f"{where}: an activation ({node.op_type}) without a linear layer before it")
        region, j = self.region()
        y = region[-1].output[0]
        self.pending.activation = _recognise(region, self.cur, y, self.consts, where)
        self.layers.append(self.pending)
        self.pending = None
        self.cur = y
        self.i = j

    def region(self):
        """The elementwise region starting at the current node (an activation's nodes), and its end."""
        nodes, consts = self.nodes, self.consts
        region, produced = [], {self.cur}
        j = self.i
        while j < len(nodes) and nodes[j].op_type in ACTIVATION_OPS + ("Constant",):
            nd = nodes[j]
            if nd.op_type == "Constant":
                consts[nd.output[0]] = _constant(nd, f"{self.p}: node {j + 1}")
                j += 1
                continue
            if not any(x in produced for x in nd.input):
                break
            region.append(nd)
            produced.add(nd.output[0])
            j += 1
        return region, j

    def finish(self):
        p = self.p
        if self.pre:
            kind, _, owhere = self.pre[-1]
            what = {"pool": "average pooling", "fieldmean": "a mean over fields"}.get(kind, "BatchNormalization")
            raise InputError(f"{owhere}: {what} after the last activation, with no linear layer after it to fold into")
        if self.pending is None:
            raise InputError(f"{p}: the network must end with a linear layer (Gemm, MatMul or Conv): the last layer "
                             "of a symeq model is affine")
        if self.cur != self.g.output[0].name:
            raise InputError(f"{p}: the graph output {self.g.output[0].name!r} is not the last layer's output "
                             f"{self.cur!r}")
        self.layers.append(self.pending)
        self.pending = None
        return self


_BN_READ = ("; its scale gamma/sqrt(var + eps) was computed in float64 and is read, on the exact path, as that "
            "float64 value converted exactly to a rational (beta, the mean and the weights as the dyadic "
            "rationals they are)")


def _replay(lin: _Linear, N):
    """The layer's (kernel or weight, bias) in the numbers ``N``: raw arrays, then every fold in order."""
    from ..layers.conv.floating import fold_pool_after_kernel, fold_pool_into_dense, fold_pool_into_kernel

    K = N.arr(lin.raw_K)
    b = N.arr(lin.raw_b) if lin.raw_b is not None else None
    for kind, data in lin.ops:
        if kind == "compose-dense":  # this layer after ``data``: W2 W1, W2 b1 + b2
            K1, b1 = _replay(data, N)
            b = (b if b is not None else N.zeros(K.shape[0])) + (K.dot(b1) if b1 is not None else N.zeros(K.shape[0]))
            K = K.dot(K1)
        elif kind == "compose-conv":  # this convolution (padding 0) after the convolution ``data[0]``
            K1, b1 = _replay(data[0], N)
            K, b = _compose_kernels(K1, b1, K, b, data[1], N)
        elif kind == "dense-pool":
            K = fold_pool_into_dense(K, N, data)
        elif kind == "conv-pool":
            K = fold_pool_into_kernel(K, N, data)
        elif kind == "after-pool":
            K = fold_pool_after_kernel(K, N, *data)
        else:
            K, b = data(K, b, N)
    return K, b


def _compose_kernels(K1, b1, K2, b2, s1: int, N):
    """The kernel and bias of conv_2 o conv_1 (conv_2 with padding 0): K'[o, c, s1 t2 + t1] =
    sum_m K2[o, m, t2] K1[m, c, t1], b' = b2 + sum_{m, t2} K2[o, m, t2] b1[m]."""
    O, M, k2h, k2w = K2.shape
    _, C, k1h, k1w = K1.shape
    R = N.zeros((O, C, k1h + s1 * (k2h - 1), k1w + s1 * (k2w - 1)))
    for i in range(k2h):
        for j in range(k2w):
            # sum over m of K2[o, m, i, j] K1[m, c, :, :], placed at offset (s1 i, s1 j)
            R[:, :, s1 * i:s1 * i + k1h, s1 * j:s1 * j + k1w] = R[:, :, s1 * i:s1 * i + k1h, s1 * j:s1 * j + k1w] + \
                np.tensordot(K2[:, :, i, j], K1, axes=([1], [0]))
    b = b2 if b2 is not None else N.zeros(O)
    if b1 is not None:
        b = b + K2.sum(axis=(2, 3)).dot(b1)
    return R, b


HANDLERS = {
    "Gemm": _ChainReader.gemm, "MatMul": _ChainReader.matmul, "Conv": _ChainReader.conv,
    "BatchNormalization": _ChainReader.batchnorm, "AveragePool": _ChainReader.average_pool,
    "GlobalAveragePool": _ChainReader.average_pool, "ReduceMean": _ChainReader.reduce,
    "ReduceMax": _ChainReader.reduce, "Flatten": _ChainReader.flatten, "Reshape": _ChainReader.reshape,
    "Identity": _ChainReader.identity, "Squeeze": _ChainReader.squeeze, "Dropout": _ChainReader.dropout, "Softmax": _ChainReader.softmax,
    "LogSoftmax": _ChainReader.softmax, "Add": _ChainReader.bias_add,
    **{op: _ChainReader.activation for op in ACTIVATION_OPS if op not in ("Add", "Identity")},
}


def read_onnx_chain(path) -> _ChainReader:
    """Read an ONNX file's chain: the reader after its run, with ``n`` (input size), ``layers``
    (:class:`_Linear`, each with its activation, the last without), ``notes`` (every fold and drop,
    one line each) and ``output_op`` (a softmax or log-softmax at the output, or None)."""
    proto = _load_proto(path)
    r = _ChainReader(proto, str(path))
    r.run()
    r.group = _group_from_metadata(proto, str(path))
    return r


def read_onnx_layers(path):
    """The chain of an ONNX file: ``(input_dim, layers, name, group)`` with layers ``(W, b, activation, where)``
    and the exact group of the file's ``"symeq.group"`` metadata (or None).

    ``W`` is the float64 weight (out x in) with ``b`` the bias or None, or for a convolution a dict
    ``{"shape": ConvShape, "kernel": array, "channel_bias": array or None}`` (the conv2d layer kind), the
    activation a name of :data:`CANDIDATES` or a spec with parameters (None for the last, affine layer).  The raw float
    values are kept: float32 weights become the float64 numbers they are, exactly; folded BatchNorm and
    pooling are applied in float64 (:func:`load_onnx_exact` applies them exactly).
    """
    from ..layers.conv.floating import FloatFold

    r = read_onnx_chain(path)
    return r.n, _realised(r, FloatFold), Path(str(path)).stem, r.group


def _realised(r: _ChainReader, N) -> list:
    return _realised_list(r.layers, N)


def _realised_list(layers, N) -> list:
    out = []
    for lin in layers:
        if isinstance(lin, _KindItem):  # a kind's own layer (parameter-free): built by _kind_layer
            out.append((lin, None, None, lin.where))
            continue
        K, b = _replay(lin, N)
        if lin.shape is not None:
            out.append(({"shape": lin.shape, "kernel": K, "channel_bias": b}, None, lin.activation, lin.where))
        else:
            out.append((K, b, lin.activation, lin.where))
    return out


def load_float_network(path):
    """A float network from ``.onnx`` (:func:`load_onnx`), ``.json`` or ``.npz``
    (:func:`symeq.numeric.models.load_numeric_model`; a ``.json`` graph model file, floats allowed, as a float
    graph model: :mod:`symeq.numeric.graph_file`): the reader of ``numeric-check`` and ``certify``."""
    if str(path).lower().endswith(".onnx"):
        return load_onnx(path)
    from .models import load_numeric_model

    if str(path).lower().endswith(".json"):  # the graph form (docs/graphs.md) with floats: a float graph model
        from ..io import read_json
        from .graph_file import graph_model_from_float_json
        from .models import model_from_json

        data = read_json(path)
        if isinstance(data, dict) and "graph" in data and "layers" not in data:
            return graph_model_from_float_json(data, str(path))
        return model_from_json(data, where=str(path))
    return load_numeric_model(path)


def _meta(r: _ChainReader) -> dict:
    meta = {}
    if r.notes:
        meta["reader_notes"] = list(r.notes)
    if r.output_op is not None:
        meta["output_op"] = dict(r.output_op)
    if r.weights_dtype is not None:
        meta["weights_dtype"] = r.weights_dtype
    return meta


def load_onnx(path):
    """A :class:`~symeq.numeric.models.NumericModel` (float64) from an ONNX file, with the group its
    metadata holds (written by :func:`export_onnx`; files from elsewhere have none: pass one).

    What the reader folded or dropped is in ``model.meta["reader_notes"]``; a softmax or
    log-softmax at the output in ``model.meta["output_op"]`` (the model is the logits:
    :func:`check_output_op`).  Raises :class:`~symeq.errors.InputError` (exit 2) for an unsupported
    operator (named with its node and the reason) or an unreadable file.
    """
    from ..layers.conv.floating import FloatFold
    from .models import NumericModel, kind_model_readers

    proto = _load_proto(path)
    for read in kind_model_readers("read_onnx_model"):  # a kind that reads a whole file (attention's subgraph)
        got = read(proto, path)
        if got is not None:
            return NumericModel(got[0].in_dim, [got[0]], _group_from_metadata(proto, str(path)), Path(str(path)).stem,
                                got[1])
    r = read_onnx_chain(path)
    layers = [float_layer(*realised) for realised in _realised(r, FloatFold)]
    try:
        return NumericModel(r.n, layers, r.group, Path(str(path)).stem, _meta(r))
    except InputError as e:
        raise InputError(f"{path}: {e}") from None


def float_layer(W, b, act, where):
    """One realised layer (:func:`_realised_list`'s entry) as a float layer: a
    :func:`~symeq.layers.conv.floating.NumericConvLayer` or :func:`~symeq.layers.dense.floating.NumericDenseLayer`."""
    from ..layers.conv.floating import NumericConvLayer
    from .models import NumericDenseLayer, numeric_activation

    if isinstance(W, _KindItem):
        return _kind_layer(W, exact=False)
    try:
        a = None if act is None else numeric_activation(act, where)
    except InputError as e:
        raise InputError(f"{where}: computes {act}, which symeq cannot use yet ({e})") from None
    if isinstance(W, dict):
        cb = W["channel_bias"] if W["channel_bias"] is not None else np.zeros(W["shape"].out_channels)
        return NumericConvLayer(W["shape"], W["kernel"], cb, a)
    return NumericDenseLayer(W, b, a)


def check_output_op(model, group=None) -> str | None:
    """The note for a model read with a softmax or log-softmax at the output, or None without one.

    Softmax (and log-softmax) commute with permutations of their inputs and with nothing else among
    the monomial maps (a sign flip or a scaling changes softmax), so the logits' certificate carries
    to the probabilities exactly when the group's output action is a permutation of the outputs:
    otherwise :class:`~symeq.errors.InputError` saying so."""
    op = (getattr(model, "meta", None) or {}).get("output_op")
    if op is None:
        return None
    group = group if group is not None else model.group
    if group is not None:
        for name, (_, B) in zip(group.names, group.generators):
            Bm = _as_dense(B)
            if not (np.all((Bm == 0) | (Bm == 1)) and np.all(Bm.sum(axis=0) == 1) and np.all(Bm.sum(axis=1) == 1)):
                raise InputError(f"the network ends with a {op['type']} ({op['node']}), which commutes with "
                                 f"permutations of its inputs only; the output action of {name} is not a permutation, "
                                 "so equivariance of the logits would not carry to the outputs")
    return (f"the network ends with a {op['type']} ({op['node']}): the logits (the last linear layer) are "
            f"checked; the {op['type']} commutes with the output permutations, so the result carries to its outputs")


def _as_dense(B) -> np.ndarray:
    if hasattr(B, "to_dense"):
        return np.asarray(B.to_dense(), dtype=np.float64)
    if hasattr(B, "nrows"):  # an exact matrix (python-flint's fmpq_mat)
        from .monomial import to_float_matrix

        return to_float_matrix(B)
    try:
        return np.asarray(B, dtype=np.float64)
    except TypeError:  # an exact matrix (python-flint)
        return np.array([[float(int(x.p)) / float(int(x.q)) for x in row] for row in B.tolist()])


def _fmpq_of(x: float):
    from flint import fmpq

    f = Fraction(float(x))  # exact: every float is a dyadic rational
    return fmpq(f.numerator, f.denominator)


def load_onnx_exact(path):
    """An exact :class:`~symeq.models.Model`: every weight is read as the dyadic rational it is, and the
    folds (BatchNorm, pooling) are applied in exact rational arithmetic (a BatchNorm's scale
    gamma/sqrt(var + eps), irrational in general, is its float64 value read as that rational).

    The activations must be exact ones (:func:`symeq.activations.activation_from_spec`).
    """
    from ..activations import activation_from_spec
    from ..layers.conv import ConvLayer
    from ..models import DenseLayer, Model
    from ..numbers import matrix
    from ..sizes import check_width
    from ..layers.conv.floating import ExactFold

    r = read_onnx_chain(path)
    for lin in r.layers:  # size guards before the exact work
        if not isinstance(lin, _KindItem):
            check_width(lin.shape.out_dim if lin.shape is not None else lin.raw_K.shape[0], f"{lin.where}: layer width")
    layers = []
    for W, b, act, where in _realised(r, ExactFold):
        if isinstance(W, _KindItem):
            layers.append(_kind_layer(W, exact=True))
            continue
        try:
            a = None if act is None else activation_from_spec(act, where)
        except InputError as e:
            raise InputError(f"{where}: --exact-floats needs an exact activation ({e}); use `symeq certify` for "
                             "float networks") from None
        if isinstance(W, dict):
            cb = W["channel_bias"]
            cb = [_fmpq_of(0)] * W["shape"].out_channels if cb is None else list(cb)
            layers.append(ConvLayer(W["shape"], W["kernel"].tolist(), cb, a))
            continue
        Wq = matrix(W.tolist())
        bq = None if b is None else list(b)
        layers.append(DenseLayer(Wq, bq, a))
    try:
        return Model(r.n, layers, r.group, Path(str(path)).stem, _meta(r))
    except InputError as e:
        raise InputError(f"{path}: {e}") from None


# -- writing ----------------------------------------------------------------------------------

GROUP_KEY = "symeq.group"  # metadata_props key of the group (a model file's "group" object, as JSON)


def _numeric_group_json(group) -> dict | None:
    """A float group as a model file's "group" object, when its matrices are integral (exact then)."""
    gens = []
    for name, (a, b) in zip(group.names, group.generators):
        if not (np.all(a == np.rint(a)) and np.all(b == np.rint(b))):
            return None
        gens.append({"name": name, "input": np.rint(a).astype(int).tolist(), "output": np.rint(b).astype(int).tolist()})
    return {"label": group.label, "generators": gens}


def _group_from_metadata(proto, where):
    """The group stored by :func:`export_onnx` (parsed with strict keys, exact numbers), or None."""
    import json

    from ..groups import FiniteGroup

    for entry in proto.metadata_props:
        if entry.key == GROUP_KEY:
            try:
                data = json.loads(entry.value)
            except (json.JSONDecodeError, RecursionError):
                raise InputError(f"{where}: the metadata {GROUP_KEY!r} is not JSON") from None
            return FiniteGroup.from_json(data, f"{where}: metadata {GROUP_KEY}")
    return None


def export_onnx(model, path, *, float32: bool = False, opset: int = 17) -> None:
    """Write a dense model (exact :class:`~symeq.models.Model` or float twin) as an ONNX file.

    Layers become ``Gemm`` nodes (weights float64, or float32 with ``float32=True``), activations
    ``Tanh``/``Sigmoid``/``Relu``, GELU the erf pattern, polynomials Horner's rule.  The graph
    input ``x`` has shape (batch, input_dim).  The model's group, when it has one (with integral
    matrices), goes into the file's metadata under ``"symeq.group"`` as a model file's ``"group"``
    object, and :func:`load_onnx` reads it back.
    """
    onnx = _onnx()
    from onnx import TensorProto, helper, numpy_helper

    from .models import NumericModel, from_exact

    group_json = None
    if not isinstance(model, NumericModel):
        group_json = None if model.group is None else model.group.to_json()
        model = from_exact(model)
    elif model.group is not None:
        group_json = _numeric_group_json(model.group)
    from ..layers.registry import first_unsupported

    bad = first_unsupported(model.layers, "onnx-export")  # dense rows (a convolution as its dense expansion)
    if bad is not None:
        raise InputError(f"ONNX export covers dense models only; {bad.kind} layers do not support it")
    dt = np.float32 if float32 else np.float64
    et = TensorProto.FLOAT if float32 else TensorProto.DOUBLE
    inits, nodes = [], []
    cur = "x"
    k = [0]

    def const(value, name):
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=dt), name))
        return name

    def fresh(stem):
        k[0] += 1
        return f"{stem}_{k[0]}"

    def node(op, inputs, outputs, **attrs):
        nodes.append(helper.make_node(op, inputs, outputs, **attrs))

    # what an activation unit writes its nodes with (symeq.activations: to_onnx)
    writer = SimpleNamespace(const=const, fresh=fresh, node=node)

    for li, l in enumerate(model.layers):
        w = const(l.weight, f"layer{li}.weight")
        b = const(l.bias, f"layer{li}.bias")
        out = fresh(f"layer{li}.pre")
        nodes.append(helper.make_node("Gemm", [cur, w, b], [out], name=f"layer{li}.gemm", transB=1))
        cur = out
        act = l.activation
        if act is None:
            continue
        out = activation_to_onnx(act.spec if act.name != "polynomial" else
                                 {"type": "polynomial", "coeffs": [repr(float(c)) for c in act.coeffs]}, writer, cur, li)
        cur = out
    nodes.append(helper.make_node("Identity", [cur], ["y"], name="output"))
    graph = helper.make_graph(nodes, model.name or "symeq", [helper.make_tensor_value_info("x", et, [None, model.input_dim])],
                              [helper.make_tensor_value_info("y", et, [None, model.output_dim])], inits)
    proto = helper.make_model(graph, producer_name="symeq", opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = min(proto.ir_version, 9)
    if group_json is not None:  # the group as a model file's "group" object: certify needs no --group then
        import json

        entry = proto.metadata_props.add()
        entry.key, entry.value = GROUP_KEY, json.dumps(group_json)
    onnx.checker.check_model(proto)
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_bytes(proto.SerializeToString())
    tmp.replace(p)
