"""Reading the attention subgraph that torch exports to ONNX (docs/attention.md).

``torch.onnx.export`` (the TorchScript exporter, ``dynamo=False``) writes ``nn.MultiheadAttention``
and the hand-written block (Linear q, k, v, scaled dot product, softmax, output projection) as a
subgraph of MatMul / Gemm (the projections), Add (their biases), Reshape / Transpose (the heads),
Mul / Div / Sqrt (the scale), Softmax and the shape arithmetic around them.  This reader
recognises it in three steps, and refuses anything else by name:

1. **operators**: every node's operator must be one of :data:`ATTENTION_OPS` (a node of another
   operator is refused with its name and operator), with exactly one Softmax over the last axis;
2. **roles**: the linear nodes (MatMul or Gemm with a weight from the file) are sorted by where
   they stand: upstream of the Softmax (the query and key projections, or one fused in-projection),
   upstream of the second operand of the MatMul after the Softmax (the value projection, or the fused
   one), and downstream of that MatMul (the output projection); each bias is the initializer added
   to a MatMul's output (or Gemm's C).  Other linear nodes (a residual, an MLP) are refused;
3. **the numbers**: the heads H (a divisor of the query width), the scale (1/sqrt(d_k) or 1) and
   which of the two score-side projections is the query are the candidates under which the layer
   read (:func:`symeq.layers.attention.torch_modules.attention_layer_from_weights`) agrees with
   onnxruntime's run of the file on seeded Gaussian inputs within :data:`ONNX_TOLERANCE` (the file
   computes in float32); none agreeing is a refusal with the smallest difference found.

The weights are the float32 values of the file, read as the float64 numbers they are.  ONNX 23's fused
``Attention`` operator, which torch's dynamo exporter writes at opset 23 (``torch.onnx.export(...,
dynamo=True, opset_version=23)``), takes the Softmax's place: the projections upstream of its first two
inputs are the query and key projections, upstream of its third the value projection, and its ``scale``
attribute (when given) the one scale tried; a mask, a cache, ``is_causal``, ``softcap`` or another
``qk_matmul_output_mode`` is refused by name, and so are the com.microsoft fused operators
(``Attention``, ``MultiHeadAttention``) and any other fused one.
"""

from __future__ import annotations

import numpy as np

from ...errors import EngineMissing, InputError

__all__ = ["ATTENTION_OPS", "ONNX_TOLERANCE", "has_attention_subgraph", "read_attention"]

ATTENTION_OPS = frozenset({"MatMul", "Gemm", "Add", "Mul", "Div", "Sqrt", "Transpose", "Reshape", "Shape", "Gather",
                           "Unsqueeze", "Squeeze", "Concat", "Constant", "Slice", "Cast", "Split", "Softmax", "Identity",
                           "Flatten", "ConstantOfShape", "Expand", "Mod", "Equal", "Where", "Range", "Sub", "Pow"})
"""The operators of torch's exported attention subgraph (with its shape arithmetic)."""

ONNX_TOLERANCE = 1e-4
"""Largest relative difference between onnxruntime's float32 run and the layer read."""

_FUSED = ("Attention", "MultiHeadAttention", "ScaledDotProductAttention")
_FUSED_READ = {"is_causal": 0, "softcap": 0.0, "qk_matmul_output_mode": 0}
"""The attributes of ONNX 23's ``Attention`` that symeq reads, at the values it reads (plain softmax attention);
``scale``, ``q_num_heads`` and ``kv_num_heads`` are read too (the heads are checked against onnxruntime)."""


def has_attention_subgraph(proto) -> bool:
    """Whether the ONNX graph has a Softmax whose output feeds a MatMul (attention, not an output softmax)."""
    nodes = list(proto.graph.node)
    if any(n.op_type in _FUSED for n in nodes):
        return True
    soft = {o for n in nodes if n.op_type == "Softmax" for o in n.output}
    return any(n.op_type == "MatMul" and any(i in soft for i in n.input) for n in nodes)


def _where(path, node) -> str:
    return f"{path}: node {node.name or '(unnamed)'} ({node.op_type})"


def read_attention(proto, path, samples: int = 32, seed: int = 0):
    """(layer, meta) of the one softmax attention layer of an ONNX graph written by torch (see the
    module docstring), or None when the graph has no attention subgraph;
    :func:`symeq.numeric.onnx_io.load_onnx` makes the model of it (with the file's group)."""
    if not has_attention_subgraph(proto):
        return None
    g = proto.graph
    nodes = list(g.node)
    S = _the_softmax(nodes, path)
    inits = _float_weights(g, nodes)
    graph_inputs = [i for i in g.input if i.name not in inits]
    if len(graph_inputs) != 1 or len(g.output) != 1:
        raise InputError(f"{path}: an attention file needs one input and one output, got {len(graph_inputs)} and "
                         f"{len(g.output)}")
    parts, vpart, (Wo, bo) = _projections(nodes, S, _linear_nodes(nodes, inits, path), path)
    scales = (None, 1.0)
    if S.op_type == "Attention":
        from onnx import helper

        given = {a.name: helper.get_attribute_value(a) for a in S.attribute}
        scales = (float(given["scale"]),) if "scale" in given else (None,)
    d = parts[0][0].shape[1]
    if any(p[0].shape[1] != d for p in parts) or vpart[0].shape[1] != d:
        raise InputError(f"{path}: the q, k, v projections read inputs of different widths")
    shape = [dim.dim_value for dim in graph_inputs[0].type.tensor_type.shape.dim]
    n_in = int(np.prod([s for s in shape[1:]])) if len(shape) > 1 and all(s > 0 for s in shape[1:]) else None
    if n_in is None or n_in % d:
        raise InputError(f"{path}: the input's shape {shape} is not (batch, T*d) or (batch, T, d) with d = {d}")
    T = n_in // d
    # 3. the numbers: onnxruntime's run of the file against the candidates
    X = np.random.default_rng(seed).standard_normal((samples, n_in))
    ref = _run(path, graph_inputs[0].name, X, shape)
    E = parts[0][0].shape[0]
    rel, layer, H, scale = _best_attention(path, X, ref, T, parts, vpart, Wo, bo, scales)
    fused = " (ONNX 23's fused Attention)" if S.op_type == "Attention" else ""
    note = (f"attention subgraph{fused} recognised: {T} tokens x {d}, {H} heads of d_k = {E // H}, scale "
            f"{'1/sqrt(d_k)' if scale is None else scale}; checked against onnxruntime on {samples} seeded inputs "
            f"(max relative difference {rel:.3g}, float32 file)")
    meta = {"reader_notes": [note], "reader_check": {"samples": samples, "seed": seed, "max_relative_difference": rel}}
    return layer, meta


def _fused_core(n, path) -> None:
    """Refuse an ONNX 23 ``Attention`` node that is not plain softmax attention of its three inputs."""
    from onnx import helper

    given = {a.name: helper.get_attribute_value(a) for a in n.attribute}
    for key, value in _FUSED_READ.items():
        if key in given and given[key] != value:
            raise InputError(f"{_where(path, n)}: Attention with {key} = {given[key]!r} is not read (symeq reads "
                             f"plain softmax attention: {key} = {value!r})")
    if len([i for i in n.input if i]) != 3 or len([o for o in n.output if o]) != 1:
        raise InputError(f"{_where(path, n)}: Attention with a mask, a key/value cache or several outputs is not "
                         "read (symeq reads softmax attention of Q, K and V alone)")


def _the_softmax(nodes: list, path):
    """The one Softmax node of an attention graph (over the last axis), or ONNX 23's fused ``Attention``
    node in its place, after checking every operator."""
    fused = [n for n in nodes if n.op_type == "Attention" and n.domain in ("", "ai.onnx")]
    for n in nodes:
        if n.op_type in _FUSED and n not in fused:
            raise InputError(f"{_where(path, n)}: the fused attention operator {n.op_type} of domain "
                             f"{n.domain or 'ai.onnx'!r} is not read; export with torch.onnx.export(..., dynamo=False), "
                             "which writes MatMul / Softmax / Reshape, or at opset 23 (ONNX's Attention)")
        if n.op_type not in ATTENTION_OPS and n not in fused:
            raise InputError(f"{_where(path, n)}: not an operator of the attention subgraph symeq reads "
                             f"({', '.join(sorted(ATTENTION_OPS))}); an attention model with other layers (a "
                             "residual, a norm, an MLP after it) is not read yet")
    soft = [n for n in nodes if n.op_type == "Softmax"]
    if fused:
        if len(fused) != 1 or soft:
            raise InputError(f"{path}: {len(fused)} Attention and {len(soft)} Softmax nodes; symeq reads one "
                             "attention layer")
        _fused_core(fused[0], path)
        return fused[0]
    if len(soft) != 1:
        raise InputError(f"{path}: {len(soft)} Softmax nodes; symeq reads one attention layer (one Softmax over the "
                         "heads' scores)")
    S = soft[0]
    axis = next((a.i for a in S.attribute if a.name == "axis"), -1)
    if axis not in (-1, 3):
        raise InputError(f"{_where(path, S)}: softmax over axis {axis}; attention normalises the scores over the "
                         "last axis (the keys)")
    return S


def _float_weights(g, nodes: list) -> dict:
    """The graph's initializers as float64 arrays, and Constant nodes holding float weights."""
    from onnx import numpy_helper

    inits = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in g.initializer}
    for n in nodes:  # Constant nodes holding 2-d float weights count as initializers
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    arr = numpy_helper.to_array(a.t)
                    if arr.dtype.kind == "f" and arr.ndim >= 1:
                        inits.setdefault(n.output[0], arr.astype(np.float64))
    return inits


def _linear_nodes(nodes: list, inits: dict, path) -> list:
    """The linear nodes ``(node, W, b)``: MatMul with a 2-d weight from the file (and the Add of its bias),
    Gemm with B from the file."""
    linear = []
    for n in nodes:
        if n.op_type == "MatMul" and len(n.input) == 2 and n.input[1] in inits and inits[n.input[1]].ndim == 2:
            W, b, out = inits[n.input[1]].T, None, n.output[0]
            users = [u for u in nodes if u.op_type == "Add" and out in u.input]
            if len(users) == 1:
                other = [i for i in users[0].input if i != out]
                if other and other[0] in inits and inits[other[0]].ndim == 1 and inits[other[0]].shape[0] == W.shape[0]:
                    b = inits[other[0]]
            linear.append((n, W, b))
        elif n.op_type == "Gemm" and len(n.input) >= 2 and n.input[1] in inits:
            at = {a.name: a for a in n.attribute}
            alpha = at["alpha"].f if "alpha" in at else 1.0
            beta = at["beta"].f if "beta" in at else 1.0
            if alpha != 1.0 or (len(n.input) > 2 and beta != 1.0) or ("transA" in at and at["transA"].i):
                raise InputError(f"{_where(path, n)}: Gemm with alpha, beta other than 1 or transA is not read")
            B = inits[n.input[1]]
            W = B if ("transB" in at and at["transB"].i) else B.T
            b = inits[n.input[2]] if len(n.input) > 2 and n.input[2] in inits else None
            linear.append((n, W, b))
        elif n.op_type in ("MatMul", "Gemm") and any(i in inits for i in n.input):
            raise InputError(f"{_where(path, n)}: a weight in an unexpected position (symeq reads x W and Gemm(x, W))")
    return linear


def _projections(nodes: list, S, linear: list, path):
    """``(parts, vpart, (Wo, bo))``: the two projections upstream of the scores (q and k, in either order),
    the value projection and the output projection, each ``(W, b)``, told apart by where they feed."""
    producer = {o: n for n in nodes for o in n.output}
    anc_cache: dict = {}

    def ancestors(name: str) -> frozenset:
        """Node ids upstream of a tensor (its producer included)."""
        if name in anc_cache:
            return anc_cache[name]
        n = producer.get(name)
        out = frozenset() if n is None else frozenset({id(n)}).union(*[ancestors(i) for i in n.input if i])
        anc_cache[name] = out
        return out

    if S.op_type == "Attention":  # the fused core: Q, K (the scores' side) and V are its inputs
        M2 = S
        score_side = ancestors(S.input[0]) | ancestors(S.input[1])
        value_side = ancestors(S.input[2])
    else:
        post = [n for n in nodes if n.op_type == "MatMul" and S.output[0] in n.input]
        if len(post) != 1 or post[0].input[0] != S.output[0]:
            raise InputError(f"{_where(path, S)}: the Softmax must feed one MatMul as its left operand (scores x "
                             "values)")
        M2 = post[0]
        score_side = ancestors(S.output[0])
        value_side = ancestors(M2.input[1])
    after = [(n, W, b) for n, W, b in linear if id(M2) in ancestors(n.output[0])]
    qk = [(n, W, b) for n, W, b in linear if id(n) in score_side]
    v = [(n, W, b) for n, W, b in linear if id(n) in value_side]
    used = {id(n) for n, _, _ in after + qk + v}
    extra = [n for n, _, _ in linear if id(n) not in used]
    if extra:
        raise InputError(f"{_where(path, extra[0])}: a linear node outside the attention's q, k, v and output "
                         "projections (symeq reads one attention layer)")
    if len(after) != 1:
        raise InputError(f"{path}: {len(after)} linear nodes after the attention (expected the one output projection)")
    _, Wo, bo = after[0]
    if len(qk) == 1 and len(v) == 1 and qk[0][0] is v[0][0]:  # one fused in-projection, in torch's order q, k, v
        _, W, b = qk[0]
        if W.shape[0] % 3:
            raise InputError(f"{_where(path, qk[0][0])}: a fused in-projection needs 3 x E outputs, got {W.shape[0]}")
        E = W.shape[0] // 3
        parts = [(W[:E], None if b is None else b[:E]), (W[E:2 * E], None if b is None else b[E:2 * E])]
        vpart = (W[2 * E:], None if b is None else b[2 * E:])
    elif len(qk) == 2 and len(v) == 1 and all(n is not v[0][0] for n, _, _ in qk):
        parts = [(W, b) for _, W, b in qk]
        vpart = (v[0][1], v[0][2])
    else:
        raise InputError(f"{path}: the projections upstream of the Softmax ({len(qk)}) and of the values ({len(v)}) "
                         "are not the q, k, v of one attention layer")
    return parts, vpart, (Wo, bo)


def _best_attention(path, X, ref, T: int, parts, vpart, Wo, bo, scales=(None, 1.0)):
    """``(relative difference, layer, heads, scale)`` of the attention layer of these weights closest to
    onnxruntime's outputs ``ref`` on ``X``, over the head counts, both scales and both q/k orders; an
    :class:`InputError` past :data:`ONNX_TOLERANCE`."""
    from .torch_modules import attention_layer_from_weights

    E = parts[0][0].shape[0]
    best, tried = None, []
    for H in [h for h in range(1, E + 1) if E % h == 0 and vpart[0].shape[0] % h == 0]:
        for scale in scales:
            for (Wq, bq), (Wk, bk) in ((parts[0], parts[1]), (parts[1], parts[0])):
                layer = attention_layer_from_weights(T, H, Wq, Wk, vpart[0], Wo, bq, bk, vpart[1], bo, scale)
                got = layer(X)
                if got.shape != ref.shape:
                    continue
                rel = float(np.max(np.linalg.norm(got - ref, axis=1) / np.maximum(np.linalg.norm(ref, axis=1), 1e-300)))
                tried.append(rel)
                if best is None or rel < best[0]:
                    best = (rel, layer, H, scale)
    if best is None or not best[0] <= ONNX_TOLERANCE:
        raise InputError(f"{path}: the subgraph around the Softmax does not compute softmax multi-head attention of "
                         f"its weights under any head count and scale tried (smallest relative difference "
                         f"{min(tried) if tried else float('nan'):.3g} > {ONNX_TOLERANCE:g} against onnxruntime)")
    return best


def _run(path, name, X, shape):
    try:
        import onnxruntime as ort
    except ImportError:
        raise EngineMissing("reading an attention ONNX file checks it with onnxruntime: pip install onnxruntime") \
            from None
    try:
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        batch = shape[0] if shape and shape[0] > 0 else X.shape[0]  # a file exported with a fixed batch size
        ys = []
        for i in range(0, X.shape[0], batch):
            chunk = X[i:i + batch]
            pad = np.zeros((batch - chunk.shape[0], X.shape[1])) if chunk.shape[0] < batch else chunk[:0]
            x = np.vstack([chunk, pad]).astype(np.float32).reshape([batch] + [s for s in shape[1:]])
            ys.append(np.asarray(sess.run(None, {name: x})[0], dtype=np.float64).reshape(batch, -1)[:chunk.shape[0]])
        y = np.vstack(ys)
    except Exception as e:
        raise InputError(f"{path}: onnxruntime could not run the file ({type(e).__name__}: {str(e)[:160]})") from None
    return np.asarray(y, dtype=np.float64).reshape(X.shape[0], -1)


def read_onnx_model(proto, path):
    """The kind's reader of a whole ONNX file (:func:`symeq.numeric.models.kind_model_readers`):
    :func:`read_attention`."""
    return read_attention(proto, path)
