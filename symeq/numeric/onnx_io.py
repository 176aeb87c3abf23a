"""ONNX in and out: feed-forward networks of Gemm / MatMul + Add / Conv layers and known activations.

ONNX is the exchange format that torch, TensorFlow and JAX export, and reading it executes no
code: a file is a protobuf of nodes and weight tensors (``onnx`` extra, ``pip install 'symeq[onnx]'``,
imported at run time).  :func:`load_onnx` walks the graph in order and reads a chain of

* linear layers: ``Gemm`` (``alpha``, ``beta``, ``transA = 0``, ``transB``), ``MatMul`` followed by an
  ``Add`` of a constant vector (the bias; a ``MatMul`` alone is bias-free), and ``Conv`` (2-d, one
  group, dilation 1, equal strides and symmetric equal paddings), read as the conv2d layer kind
  with its kernels (:class:`symeq.numeric.conv.NumericConvLayer`, exact
  :class:`symeq.layers.conv.ConvLayer`; channel-major pixel order, torch's ``Flatten``);
* shape nodes: ``Flatten``, ``Reshape`` (to 2-d: the identity on that pixel order; to 4-d: the
  ``(C, H, W)`` shape a following ``Conv`` needs), ``Identity``;
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

Weights come from initializers and ``Constant`` nodes.  They are read as float64 for the float
twin (:class:`~symeq.numeric.models.NumericModel`); :func:`load_onnx_exact` reads them as the exact
dyadic rationals they are (``Fraction(float)`` is exact) for ``--exact-floats``.  Anything else
(an unknown operator, a branch in the graph, a truncated or corrupted file) is an
:class:`~symeq.errors.InputError` (exit 2) that names the node or the file.

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

import math
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..errors import EngineMissing, InputError, ShapeError

__all__ = ["load_float_network", "load_onnx", "load_onnx_exact", "read_onnx_layers", "export_onnx", "ONNX_INSTALL"]

ONNX_INSTALL = "pip install 'symeq[onnx]'"

LINEAR_OPS = ("Gemm", "MatMul", "Conv")
SHAPE_OPS = ("Flatten", "Reshape", "Identity")
# elementwise operators an activation subgraph may use (evaluated in float64 by _ELEMENTWISE)
ACTIVATION_OPS = ("Tanh", "Sigmoid", "Relu", "LeakyRelu", "Elu", "Softplus", "Erf", "Gelu", "Exp", "Log", "Neg",
                  "Abs", "Sqrt", "Reciprocal", "Add", "Sub", "Mul", "Div", "Pow", "Identity")
SUPPORTED = ", ".join(LINEAR_OPS + ("Add (bias after MatMul)",) + SHAPE_OPS + ("Constant",) +
                      tuple(o for o in ACTIVATION_OPS if o not in ("Add", "Identity")))


def _onnx():
    try:
        import onnx
        from onnx import numpy_helper  # noqa: F401
    except ImportError:
        raise EngineMissing(f"reading and writing ONNX needs the onnx package: {ONNX_INSTALL}") from None
    return onnx


# -- activations: candidates and elementwise evaluation -----------------------------------------

def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sig(t):
    return 0.5 * (1.0 + np.tanh(0.5 * t))


# name -> float64 function; the names are those numeric_activation knows (or may learn)
CANDIDATES = {
    "tanh": np.tanh,
    "sigmoid": _sig,
    "relu": lambda t: np.maximum(t, 0.0),
    "gelu": lambda t: 0.5 * t * (1.0 + _erf(t / math.sqrt(2.0))),
    "silu": lambda t: t * _sig(t),
    "softplus": lambda t: np.logaddexp(0.0, t),
    "elu": lambda t: np.where(t > 0, t, np.expm1(np.minimum(t, 0.0))),
    "leaky_relu": lambda t: np.where(t > 0, t, 0.01 * t),
    "erf": _erf,
    "gelu_tanh": lambda t: 0.5 * t * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (t + 0.044715 * t ** 3))),
}
DIRECT = {"Tanh": "tanh", "Sigmoid": "sigmoid", "Relu": "relu", "Gelu": "gelu", "Erf": "erf", "Softplus": "softplus"}


def _attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            from onnx import helper

            return helper.get_attribute_value(a)
    return default


#: the one-input operators of an elementwise subgraph without attributes, as numpy functions
UNARY = {"Tanh": np.tanh, "Sigmoid": _sig, "Relu": CANDIDATES["relu"], "Softplus": CANDIDATES["softplus"],
         "Erf": _erf, "Exp": np.exp, "Log": np.log, "Neg": np.negative, "Abs": np.abs, "Sqrt": np.sqrt,
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
    if op == "Gelu":
        tanh_form = _attr(node, "approximate", b"none") not in (b"none", "none")
        return CANDIDATES["gelu_tanh" if tanh_form else "gelu"](t)
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
        if ops[0] == "Gelu" and _attr(node, "approximate", b"none") not in (b"none", "none"):
            return {"type": "gelu", "approximate": "tanh"}
        if ops[0] in DIRECT:
            return DIRECT[ops[0]]
        if ops[0] in ("LeakyRelu", "Elu"):  # float32 attributes: their shortest decimal, as the exporter meant it
            value = Fraction(str(np.float32(_attr(node, "alpha", 0.01 if ops[0] == "LeakyRelu" else 1.0))))
            key = "slope" if ops[0] == "LeakyRelu" else "alpha"
            return {"type": "leaky_relu" if ops[0] == "LeakyRelu" else "elu", key: f"{value.numerator}/{value.denominator}"}
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
    for name, f in CANDIDATES.items():
        ref = f(t)
        if np.all(np.isfinite(y)) and np.max(np.abs(y - ref)) <= 1e-6 * max(1.0, float(np.max(np.abs(ref)))):
            return {"type": "gelu", "approximate": "tanh"} if name == "gelu_tanh" else name
    raise InputError(f"{where}: the elementwise nodes {ops} compute no activation symeq knows "
                     f"(tried {', '.join(CANDIDATES)})")


# -- reading ----------------------------------------------------------------------------------

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
    try:
        onnx.checker.check_model(proto)
    except Exception as e:
        raise InputError(f"{p}: the ONNX model is malformed ({type(e).__name__}: {str(e).splitlines()[0][:160]})") from None
    return proto


def _tensor(t, where):
    from onnx import numpy_helper

    try:
        a = numpy_helper.to_array(t)
    except Exception as e:
        raise InputError(f"{where}: cannot read tensor {t.name!r} ({type(e).__name__})") from None
    if a.dtype.kind not in "fiu":
        raise InputError(f"{where}: tensor {t.name!r} has dtype {a.dtype}, expected numbers")
    return a


def _constant(node, where):
    v = _attr(node, "value")
    if v is not None:
        return _tensor(v, where)
    for name in ("value_float", "value_floats", "value_int", "value_ints"):
        v = _attr(node, name)
        if v is not None:
            return np.asarray(v)
    raise InputError(f"{where}: Constant node {node.name!r} has no numeric value")


def read_onnx_layers(path):
    """The chain of an ONNX file: ``(input_dim, layers, name, group)`` with layers ``(W, b, activation, where)``
    and the exact group of the file's ``"symeq.group"`` metadata (or None).

    ``W`` is the float64 weight (out x in) with ``b`` the bias or None, or for a convolution a dict
    ``{"shape": ConvShape, "kernel": array, "channel_bias": array or None}`` (the conv2d layer kind), the
    activation a name of :data:`CANDIDATES` or a spec with parameters (None for the last, affine layer).  The raw float
    values are kept: float32 weights become the float64 numbers they are, exactly.
    """
    from ..layers.conv import ConvShape

    proto = _load_proto(path)
    p = str(path)
    g = proto.graph
    consts = {t.name: _tensor(t, p) for t in g.initializer}
    inputs = [i for i in g.input if i.name not in consts]
    if len(inputs) != 1:
        raise InputError(f"{p}: expected one graph input (the network's input), found {[i.name for i in inputs]}")
    if len(g.output) != 1:
        raise InputError(f"{p}: expected one graph output, found {len(g.output)}")
    dims = [d.dim_value if d.HasField("dim_value") else None for d in inputs[0].type.tensor_type.shape.dim]
    shape = None  # (C, H, W) while the activations are images
    if len(dims) == 4 and all(d for d in dims[1:]):
        shape = tuple(dims[1:])
        n = int(np.prod(shape))
    elif len(dims) == 2 and dims[1]:
        n = dims[1]
    else:
        raise InputError(f"{p}: the input {inputs[0].name!r} has shape {dims}; expected (batch, features) or "
                         "(batch, channels, height, width) with known sizes")
    cur, width = inputs[0].name, n
    layers, pending = [], None  # pending: (W, b) of a linear layer waiting for its activation
    nodes = list(g.node)
    i = 0

    def uses_cur(node):
        return cur in node.input

    while i < len(nodes):
        node = nodes[i]
        where = f"{p}: node {i} ({node.name or node.op_type})"
        op = node.op_type
        if op == "Constant":
            consts[node.output[0]] = _constant(node, where)
            i += 1
            continue
        if not uses_cur(node):
            if op in ("Shape", "Gather", "Unsqueeze", "Concat", "Cast") and all(x in consts for x in node.input):
                raise InputError(f"{where}: shape arithmetic ({op}) is not supported; export with a fixed input shape")
            raise InputError(f"{where}: operator {op} does not read the current activations {cur!r} "
                             "(symeq reads chains of layers, not branching graphs)")
        if op in LINEAR_OPS:
            if pending is not None:  # two linear layers in a row: the first is affine (identity activation)
                raise InputError(f"{where}: two linear layers without an activation between them; symeq reads "
                                 "sigma(W x + b) layers (merge the affine maps before exporting)")
            if op == "Gemm":
                a, bname = node.input[0], node.input[1]
                if _attr(node, "transA", 0):
                    raise InputError(f"{where}: Gemm with transA=1 is not a layer applied to a batch of inputs")
                B = np.asarray(_need(consts, bname, where), dtype=np.float64)
                W = B if _attr(node, "transB", 0) else B.T
                W = float(_attr(node, "alpha", 1.0)) * W
                b = None
                if len(node.input) > 2 and node.input[2]:
                    b = float(_attr(node, "beta", 1.0)) * np.broadcast_to(
                        np.asarray(_need(consts, node.input[2], where), dtype=np.float64).reshape(-1), (W.shape[0],))
                out = node.output[0]
                shape = None
            elif op == "MatMul":
                other = node.input[1] if node.input[0] == cur else node.input[0]
                if node.input[0] != cur:
                    raise InputError(f"{where}: MatMul with the weight on the left; expected x @ W")
                B = np.asarray(_need(consts, other, where), dtype=np.float64)
                if B.ndim != 2:
                    raise InputError(f"{where}: MatMul weight {other!r} has shape {B.shape}, expected a matrix")
                W, b, out = B.T, None, node.output[0]
                if i + 1 < len(nodes) and nodes[i + 1].op_type == "Add" and out in nodes[i + 1].input:
                    add = nodes[i + 1]
                    cn = add.input[1] if add.input[0] == out else add.input[0]
                    if cn in consts:
                        b = np.broadcast_to(np.asarray(consts[cn], dtype=np.float64).reshape(-1), (W.shape[0],)).copy()
                        out = add.output[0]
                        i += 1
                shape = None
            else:  # Conv
                if shape is None:
                    raise InputError(f"{where}: Conv needs image-shaped input (batch, C, H, W); reshape before it")
                K = np.asarray(_need(consts, node.input[1], where), dtype=np.float64)
                if K.ndim != 4:
                    raise InputError(f"{where}: Conv kernel of shape {K.shape}; symeq reads 2-d convolutions")
                pads = list(_attr(node, "pads", [0, 0, 0, 0]))
                strides = list(_attr(node, "strides", [1, 1]))
                dil = list(_attr(node, "dilations", [1, 1]))
                auto = _attr(node, "auto_pad", b"NOTSET")
                if int(_attr(node, "group", 1)) != 1 or set(dil) != {1} or len(set(pads)) != 1 or \
                        len(set(strides)) != 1 or auto not in (b"NOTSET", "NOTSET"):
                    raise InputError(f"{where}: symeq reads Conv with group 1, dilation 1, equal strides and equal "
                                     f"paddings (got group {_attr(node, 'group', 1)}, dilations {dil}, strides "
                                     f"{strides}, pads {pads}, auto_pad {auto!r})")
                if K.shape[1] != shape[0]:
                    raise ShapeError(f"{where}: Conv kernel has {K.shape[1]} input channels, the input has {shape[0]}")
                conv = ConvShape(shape[0], K.shape[0], shape[1], shape[2], K.shape[2], K.shape[3],
                                 stride=int(strides[0]), padding=int(pads[0]))
                cb = None
                if len(node.input) > 2 and node.input[2]:
                    cb = np.asarray(_need(consts, node.input[2], where), dtype=np.float64).reshape(-1)
                    if cb.shape[0] != K.shape[0]:
                        raise ShapeError(f"{where}: Conv bias of length {cb.shape[0]}, expected {K.shape[0]}")
                W = {"shape": conv, "kernel": K, "channel_bias": cb}  # the conv2d layer kind, kernels kept
                b = None
                out = node.output[0]
                shape = (conv.out_channels, *conv.out_hw)
            n_in, n_out = (W["shape"].in_dim, W["shape"].out_dim) if isinstance(W, dict) else (W.shape[1], W.shape[0])
            if n_in != width:
                raise ShapeError(f"{where}: weight takes {n_in} inputs, the activations have {width}")
            pending, cur, width = (W, b), out, n_out
            i += 1
            continue
        if op in SHAPE_OPS:
            if op == "Reshape":
                target = [int(v) for v in np.asarray(_need(consts, node.input[1], where)).reshape(-1)]
                if len(target) == 4:
                    known = [v for v in target[1:] if v > 0]
                    if len(known) != 3 or int(np.prod(known)) != width:
                        raise ShapeError(f"{where}: Reshape to {target} does not fit {width} features")
                    shape = tuple(known)
                elif len(target) == 2:
                    shape = None
                else:
                    raise InputError(f"{where}: Reshape to {target}; symeq reads (batch, features) or "
                                     "(batch, C, H, W)")
            elif op == "Flatten":
                if int(_attr(node, "axis", 1)) != 1:
                    raise InputError(f"{where}: Flatten with axis {_attr(node, 'axis', 1)}; expected axis 1")
                shape = None
            cur = node.output[0]
            i += 1
            continue
        if op in ACTIVATION_OPS:
            if pending is None:
                raise InputError(f"{where}: an activation ({op}) without a linear layer before it")
            # the elementwise region: consecutive elementwise nodes reading z, the region or constants
            region, produced = [], {cur}
            j = i
            while j < len(nodes) and nodes[j].op_type in ACTIVATION_OPS + ("Constant",):
                nd = nodes[j]
                if nd.op_type == "Constant":
                    consts[nd.output[0]] = _constant(nd, f"{p}: node {j}")
                    j += 1
                    continue
                if not any(x in produced for x in nd.input):
                    break
                region.append(nd)
                produced.add(nd.output[0])
                j += 1
            y = region[-1].output[0]
            name = _recognise(region, cur, y, consts, where)
            layers.append((pending[0], pending[1], name, where))
            pending, cur = None, y
            i = j
            continue
        raise InputError(f"{where}: operator {op} is not supported; symeq reads {SUPPORTED}")
    if pending is None:
        raise InputError(f"{p}: the network must end with a linear layer (Gemm, MatMul or Conv): the last layer "
                         "of a symeq model is affine")
    if cur != g.output[0].name:
        raise InputError(f"{p}: the graph output {g.output[0].name!r} is not the last layer's output {cur!r}")
    layers.append((pending[0], pending[1], None, p))
    return n, layers, Path(p).stem, _group_from_metadata(proto, p)


def _need(consts, name, where):
    if name not in consts:
        raise InputError(f"{where}: {name!r} is not a constant (initializer or Constant node); weights must be fixed")
    return consts[name]


def load_float_network(path):
    """A float network from ``.onnx`` (:func:`load_onnx`), ``.json`` or ``.npz``
    (:func:`symeq.numeric.models.load_numeric_model`): the reader of ``numeric-check`` and ``certify``."""
    if str(path).lower().endswith(".onnx"):
        return load_onnx(path)
    from .models import load_numeric_model

    return load_numeric_model(path)


def load_onnx(path):
    """A :class:`~symeq.numeric.models.NumericModel` (float64) from an ONNX file, with the group its
    metadata holds (written by :func:`export_onnx`; files from elsewhere have none: pass one).

    Raises :class:`~symeq.errors.InputError` (exit 2) for an unsupported operator (named with its
    node) or an unreadable file.
    """
    from .models import NumericDenseLayer, NumericModel, numeric_activation

    from .conv import NumericConvLayer

    n, specs, name, group = read_onnx_layers(path)
    layers = []
    for W, b, act, where in specs:
        try:
            a = None if act is None else numeric_activation(act, where)
        except InputError as e:
            raise InputError(f"{where}: computes {act}, which symeq cannot use yet ({e})") from None
        if isinstance(W, dict):
            layers.append(NumericConvLayer(W["shape"], W["kernel"], W["channel_bias"], a))
        else:
            layers.append(NumericDenseLayer(W, b, a))
    try:
        return NumericModel(n, layers, group, name)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None


def _fmpq_of(x: float):
    from flint import fmpq

    f = Fraction(float(x))  # exact: every float is a dyadic rational
    return fmpq(f.numerator, f.denominator)


def load_onnx_exact(path):
    """An exact :class:`~symeq.models.Model`: every weight is read as the dyadic rational it is.

    The activations must be exact ones (:func:`symeq.activations.activation_from_spec`).
    """
    from ..activations import activation_from_spec
    from ..models import DenseLayer, Model
    from ..numbers import matrix
    from ..sizes import check_width

    from ..layers.conv import ConvLayer

    n, specs, name, group = read_onnx_layers(path)
    layers = []
    for W, b, act, where in specs:
        check_width(W["shape"].out_dim if isinstance(W, dict) else W.shape[0], f"{where}: layer width")
        try:
            a = None if act is None else activation_from_spec(act, where)
        except InputError as e:
            raise InputError(f"{where}: --exact-floats needs an exact activation ({e}); use `symeq certify` for "
                             "float networks") from None
        if isinstance(W, dict):
            K = [[[[_fmpq_of(x) for x in r] for r in kc] for kc in ko] for ko in W["kernel"]]
            cb = None if W["channel_bias"] is None else [_fmpq_of(x) for x in W["channel_bias"]]
            layers.append(ConvLayer(W["shape"], K, cb, a))
            continue
        Wq = matrix([[_fmpq_of(x) for x in row] for row in W])
        bq = None if b is None else [_fmpq_of(x) for x in b]
        layers.append(DenseLayer(Wq, bq, a))
    try:
        return Model(n, layers, group, name)
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
    if model.has_attention:
        raise InputError("ONNX export covers dense models only; this one starts with attention")
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

    for li, l in enumerate(model.layers):
        w = const(l.weight, f"layer{li}.weight")
        b = const(l.bias, f"layer{li}.bias")
        out = fresh(f"layer{li}.pre")
        nodes.append(helper.make_node("Gemm", [cur, w, b], [out], name=f"layer{li}.gemm", transB=1))
        cur = out
        act = l.activation
        if act is None:
            continue
        kind = act.name
        spec = act.spec
        single = {"tanh": "Tanh", "sigmoid": "Sigmoid", "relu": "Relu", "erf": "Erf", "softplus": "Softplus"}
        if kind in single:
            out = fresh(f"layer{li}.act")
            nodes.append(helper.make_node(single[kind], [cur], [out], name=f"layer{li}.{kind}"))
        elif kind in ("elu", "leaky_relu"):
            out = fresh(f"layer{li}.act")
            value = float(Fraction(str(spec.get("alpha" if kind == "elu" else "slope", "1" if kind == "elu" else "1/100"))))
            nodes.append(helper.make_node("Elu" if kind == "elu" else "LeakyRelu", [cur], [out], name=f"layer{li}.{kind}",
                                          alpha=value))
        elif kind == "silu":  # x * sigmoid(x), as torch exports it
            sg = fresh(f"layer{li}.sigmoid")
            out = fresh(f"layer{li}.act")
            nodes += [helper.make_node("Sigmoid", [cur], [sg]), helper.make_node("Mul", [cur, sg], [out])]
        elif kind == "gelu" and spec.get("approximate") == "tanh":  # x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            kc, c, one, half = (const(0.044715, f"layer{li}.k"), const(math.sqrt(2.0 / math.pi), f"layer{li}.c"),
                               const(1.0, f"layer{li}.one"), const(0.5, f"layer{li}.half"))
            x2, x3, kx3, u, v, t, a, m = (fresh(f"layer{li}.{n}") for n in ("x2", "x3", "kx3", "u", "v", "t", "a", "m"))
            out = fresh(f"layer{li}.act")
            nodes += [helper.make_node("Mul", [cur, cur], [x2]), helper.make_node("Mul", [x2, cur], [x3]),
                      helper.make_node("Mul", [x3, kc], [kx3]), helper.make_node("Add", [cur, kx3], [u]),
                      helper.make_node("Mul", [u, c], [v]), helper.make_node("Tanh", [v], [t]),
                      helper.make_node("Add", [t, one], [a]), helper.make_node("Mul", [cur, a], [m]),
                      helper.make_node("Mul", [m, half], [out])]
        elif kind == "gelu":  # x * 0.5 * (1 + erf(x / sqrt 2)), as torch exports it below opset 20
            s2, one, half = (const(math.sqrt(2.0), f"layer{li}.sqrt2"), const(1.0, f"layer{li}.one"),
                             const(0.5, f"layer{li}.half"))
            d, e, a, m = (fresh(f"layer{li}.{t}") for t in ("div", "erf", "add", "mul"))
            out = fresh(f"layer{li}.act")
            nodes += [helper.make_node("Div", [cur, s2], [d]), helper.make_node("Erf", [d], [e]),
                      helper.make_node("Add", [e, one], [a]), helper.make_node("Mul", [cur, a], [m]),
                      helper.make_node("Mul", [m, half], [out])]
        elif kind == "polynomial":
            coeffs = list(act.coeffs) or [0.0]
            acc = const(coeffs[-1], f"layer{li}.c{len(coeffs) - 1}")
            acc_is_const = True
            for ci in range(len(coeffs) - 2, -1, -1):
                mul = fresh(f"layer{li}.h")
                nodes.append(helper.make_node("Mul", [cur, acc] if not acc_is_const else [acc, cur], [mul]))
                add = fresh(f"layer{li}.h")
                nodes.append(helper.make_node("Add", [mul, const(coeffs[ci], f"layer{li}.c{ci}")], [add]))
                acc, acc_is_const = add, False
            if acc_is_const:
                raise InputError(f"layer {li}: a constant activation cannot be exported")
            out = acc
        else:
            raise InputError(f"layer {li}: no ONNX form for the activation {act.spec}")
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
