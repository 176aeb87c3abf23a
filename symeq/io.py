"""Model and certificate files: JSON with exact rationals written as "p/q" strings.

Numbers are parsed by :func:`symeq.numbers.parse_number` (a regular grammar); nothing from a
file is ever passed to ``eval`` or ``sympify``.  Errors name the file and the place in it.

Examples
--------
>>> from symeq.examples import builtin_example
>>> m = builtin_example()
>>> model_from_json(model_to_json(m)).parameters_equal(m)
True
"""

from __future__ import annotations

import json
from pathlib import Path

from .activations import activation_from_spec
from .schema import check_keys
from .errors import InputError, ShapeError
from .groups import FiniteGroup
from .layers.base import declared_biases
from .models import DenseLayer, Model
from .numbers import (fmpq, format_matrix, format_number, format_vector, mat_rows, matrix, parse_matrix, parse_number,
                      parse_vector)
from .sizes import check_total_degree, check_width

__all__ = ["MODEL_FORMAT", "CERTIFICATE_FORMAT", "read_json", "write_json", "model_from_json",
           "model_to_json", "layers_to_json", "load_model", "save_model", "MODEL_KEYS", "DENSE_KEYS",
           "ATTENTION_KEYS", "HEAD_KEYS"]

MODEL_FORMAT = "symeq-model/1"
CERTIFICATE_FORMAT = "symeq-certificate/2"  # sparse actions; symeq_check also reads /1 (dense)

# The schema of a model file (docs/model-files.md): the keys allowed in each object, and the
# required ones.  An unknown key is refused (exit 2) instead of ignored: a misspelt "biases" must
# not silently become a bias-free layer.  "bias" is required on dense and conv2d layers; null means
# no bias.
MODEL_KEYS = (("format", "name", "input_dim", "layers", "group"), ("format", "input_dim", "layers"))
DENSE_KEYS = (("type", "weight", "bias", "activation"), ("type", "weight", "bias"))
ATTENTION_KEYS = (("type", "tokens", "heads", "scoring", "scale", "bias"), ("type", "tokens", "heads"))
HEAD_KEYS = (("query", "key", "value", "out", "score_bias"), ("query", "key", "value", "out"))
FLATTEN_KEYS = (("type",), ("type",))


def read_json(path) -> dict:
    """Read a JSON file, turning every failure into a one-line :class:`InputError`."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise InputError(f"{p}: cannot read ({e.__class__.__name__})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{p}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:  # json's decoder recurses once per nesting level
        raise InputError(f"{p}: JSON nested too deeply (no symeq file nests more than a few levels)") from None


def write_json(data: dict, path) -> None:
    """Write JSON atomically (a temporary file renamed into place), so nothing is half-written."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(p)


def layers_from_json(layers, input_dim: int, where: str = "layers") -> list[DenseLayer]:
    if not isinstance(layers, list) or not layers:
        raise InputError(f"{where} must be a non-empty list of layers")
    out = []
    n = input_dim
    tokens = None  # after an attention layer, dense layers act token-wise with per-token weights
    shape = None   # (C, H, W) of the current activations after a conv2d layer
    pool = None    # a pending average pooling, folded into the next conv2d or dense layer
    for i, spec in enumerate(layers):
        at = f"{where}[{i}]"
        if not isinstance(spec, dict):
            raise InputError(f"{at} must be an object")
        if "type" not in spec:  # required, as the checker requires it: no layer kind is guessed
            raise InputError(f"{at}: missing key \"type\" (\"dense\", \"conv2d\", \"flatten\", \"attention\", ...)")
        kind = spec["type"]
        if kind == "flatten":
            check_keys(spec, at, *FLATTEN_KEYS, error=InputError)
        if kind == "attention":
            if i != 0:
                raise InputError(f"{at}: an attention layer must be the first layer")
            layer = _attention_from_json(spec, input_dim, at)
            tokens = layer.tokens
            out.append(layer)
            n = layer.d_out
            continue
        if kind == "flatten":  # (C, H, W) is stored flattened already (channel-major, row-major)
            continue
        if kind in IMAGE_KINDS or (kind == "dense" and shape is not None):
            if tokens is not None:
                raise InputError(f"{at}: a {kind} layer cannot follow an attention layer")
            layer, shape, pool = _conv2d_from_json(spec, n, shape, at, pool)
            if layer is not None:
                out.append(layer)
            n = shape[0] * shape[1] * shape[2]  # after a pooling: the pooled size
            continue
        shape = None
        if kind != "dense":
            raise InputError(f"{at}: unknown layer type {kind!r}; known: \"dense\", \"conv2d\", \"flatten\", \"attention\"")
        check_keys(spec, at, *DENSE_KEYS, error=InputError)
        if isinstance(spec["weight"], list):  # size first: rows are neurons
            check_width(len(spec["weight"]) * (tokens or 1), f"{at}.weight (neurons)")
        W = parse_matrix(spec["weight"], f"{at}.weight", shape=(None, n))
        bias = spec.get("bias")
        b = None if bias is None else parse_vector(bias, f"{at}.bias", length=W.nrows())
        act = activation_from_spec(spec.get("activation"), f"{at}.activation")
        if tokens is None:
            out.append(DenseLayer(W, b, act, has_bias=b is not None))  # a vector, zeros included: declared
        else:
            from .layers.attention import tokenwise

            out.append(DenseLayer(tokenwise(W, tokens), list(b if b is not None else [0] * W.nrows()) * tokens, act,
                                  tokens, b is not None))
        n = W.nrows()
    if pool is not None:
        raise InputError(f"{where}: a pooling layer must be followed by a conv2d or dense layer (it is folded into it)")
    return out


IMAGE_KINDS = ("conv2d", "avgpool2d", "global_avgpool", "maxpool2d", "group_maxpool")
CONV_KEYS = (("type", "kernel", "bias", "stride", "padding", "padding_mode", "input_shape", "activation",
              "dilation", "groups"), ("kernel", "bias"))
AVGPOOL_KEYS = (("type", "kernel_size", "stride", "input_shape"), ("type", "kernel_size"))
GLOBAL_POOL_KEYS = (("type", "input_shape"), ("type",))


def _image_shape(spec: dict, n: int, shape, at: str) -> tuple:
    given = spec.get("input_shape")
    if given is not None:
        if (not isinstance(given, list) or len(given) != 3
                or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in given)):
            raise InputError(f"{at}.input_shape must be [channels, height, width] (positive integers)")
        if shape is not None and tuple(given) != tuple(shape):
            raise ShapeError(f"{at}.input_shape {given} differs from the previous layer's output shape {list(shape)}")
        shape = tuple(given)
    if shape is None:
        raise InputError(f"{at}: a {spec.get('type')} layer needs \"input_shape\": [channels, height, width]")
    C, H, W = shape
    if C * H * W != n:
        raise ShapeError(f"{at}.input_shape {[C, H, W]} has {C * H * W} entries, but the layer's input has {n}")
    return shape


def _conv2d_from_json(spec: dict, n: int, shape, at: str, pool=None):
    """A layer on images (``conv2d``, pooling, or a dense layer after a convolution) as a native
    :class:`symeq.layers.conv.ConvLayer` (kernels kept, never expanded).

    Returns ``(layer or None, output shape, pending pooling)``: average pooling is folded exactly
    into the next layer (:func:`symeq.layers.conv.fold_average_pool`); a dense layer after a
    convolution (after a ``flatten``) is the convolution with a whole-image kernel
    (:meth:`ConvLayer.from_dense`); max pooling is refused.
    """
    from .layers.conv import ConvLayer, ConvShape, fold_average_pool

    kind = spec.get("type", "dense")
    if kind in ("maxpool2d", "group_maxpool"):
        raise InputError(f"{at}: {kind} is piecewise linear and not supported on the exact path (max pooling "
                         "and escnn's group pooling are refused; use average pooling, a global average pooling "
                         "or an invariant linear readout)")
    if pool is not None and pool[0] == "global" and kind != "dense":
        raise InputError(f"{at}: a global average pooling must be followed by a dense layer")
    if kind == "avgpool2d":
        check_keys(spec, at, *AVGPOOL_KEYS, error=InputError)
        shape = _image_shape(spec, n, shape, at)
        k, st = spec.get("kernel_size"), spec.get("stride", spec.get("kernel_size"))
        for name, v in (("kernel_size", k), ("stride", st)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InputError(f"{at}.{name} must be a positive integer, got {v!r}")
        if pool is not None:
            raise InputError(f"{at}: two pooling layers in a row are not supported")
        C, H, W = shape
        if k > min(H, W):
            raise ShapeError(f"{at}: a {k}x{k} pooling does not fit {H}x{W} images")
        return None, (C, (H - k) // st + 1, (W - k) // st + 1), ("avg", k, st, shape)
    if kind == "global_avgpool":
        check_keys(spec, at, *GLOBAL_POOL_KEYS, error=InputError)
        shape = _image_shape(spec, n, shape, at)
        if pool is not None:
            raise InputError(f"{at}: two pooling layers in a row are not supported")
        return None, (shape[0], 1, 1), ("global", shape)
    act = None
    if kind == "dense":  # after a convolution: a whole-image kernel per neuron
        check_keys(spec, at, *DENSE_KEYS, error=InputError)
        C, H, W = shape
        if isinstance(spec["weight"], list):
            check_width(len(spec["weight"]), f"{at}.weight (neurons)")
        Wm = parse_matrix(spec["weight"], f"{at}.weight", shape=(None, C * H * W))
        bias = spec.get("bias")
        b = None if bias is None else parse_vector(bias, f"{at}.bias", length=Wm.nrows())
        act = activation_from_spec(spec.get("activation"), f"{at}.activation")
        rows = mat_rows(Wm)
        if pool is not None and pool[0] == "global":  # mean over pixels, then W: W[o, c] / (H W) at every pixel
            C, H, W = pool[1]
            rows = [[x / (H * W) for x in r for _ in range(H * W)] for r in rows]
            shape, pool = pool[1], None
        layer = ConvLayer.from_dense(rows, b, act, shape)
        layer.has_bias = b is not None
    else:
        check_keys(spec, at, *CONV_KEYS, error=InputError)
        shape = _image_shape(spec, n, shape, at)
        for name in ("dilation", "groups"):
            v = spec.get(name, 1)
            if v not in (1, [1, 1]):
                raise InputError(f"{at}.{name} = {v!r}: only {name} 1 is supported for conv2d layers")
        C, H, W = shape
        kernel = spec.get("kernel")
        if (not isinstance(kernel, list) or not kernel or not isinstance(kernel[0], list) or not kernel[0]
                or not isinstance(kernel[0][0], list) or not kernel[0][0] or not isinstance(kernel[0][0][0], list)):
            raise InputError(f"{at}.kernel must be a nested list out_channels x in_channels x kh x kw")
        conv = ConvShape(C, len(kernel), H, W, len(kernel[0][0]), len(kernel[0][0][0]),
                         stride=spec.get("stride", 1), padding=spec.get("padding", 0),
                         padding_mode=spec.get("padding_mode", "zeros"))
        oh, ow = conv.out_hw
        check_width(conv.out_channels * oh * ow, f"{at}: conv2d output (channels x height x width)")
        parsed = []
        for o, ko in enumerate(kernel):
            if not isinstance(ko, list) or len(ko) != C:
                raise ShapeError(f"{at}.kernel[{o}] must have {C} input channels")
            parsed.append([mat_rows(parse_matrix(kc, f"{at}.kernel[{o}][{c}]", shape=(conv.kh, conv.kw)))
                           for c, kc in enumerate(ko)])
        bias = spec.get("bias")
        b = None if bias is None else parse_vector(bias, f"{at}.bias", length=conv.out_channels)
        act = activation_from_spec(spec.get("activation"), f"{at}.activation")
        layer = ConvLayer(conv, parsed, b, act, has_bias=b is not None)
    if pool is not None:  # ("avg", k, stride, shape before pooling)
        try:
            layer = fold_average_pool(pool[1], pool[2], pool[3], layer)
        except InputError as e:
            raise InputError(f"{at}: {e}") from None
    return layer, layer.out_shape, None


def _attention_from_json(spec: dict, input_dim: int, at: str):
    from .layers.attention import AttentionLayer, Head

    check_keys(spec, at, *ATTENTION_KEYS, error=InputError)
    T = spec.get("tokens")
    if not isinstance(T, int) or isinstance(T, bool) or T < 1:
        raise InputError(f"{at}: \"tokens\" must be a positive integer (the number of tokens T)")
    if input_dim % T:
        raise ShapeError(f"{at}: input_dim {input_dim} is not a multiple of {T} tokens (inputs are T x d, flattened by rows)")
    d = input_dim // T
    heads = spec.get("heads")
    if not isinstance(heads, list) or not heads:
        raise InputError(f"{at}: \"heads\" must be a non-empty list of {{query, key, value, out}}")
    parsed = []
    for h, hs in enumerate(heads):
        if not isinstance(hs, dict):
            raise InputError(f"{at}.heads[{h}] must be an object with \"query\", \"key\", \"value\" and \"out\" matrices")
        check_keys(hs, f"{at}.heads[{h}]", *HEAD_KEYS, error=InputError)
        q = parse_matrix(hs["query"], f"{at}.heads[{h}].query", shape=(d, None))
        k = parse_matrix(hs["key"], f"{at}.heads[{h}].key", shape=(d, q.ncols()))
        v = parse_matrix(hs["value"], f"{at}.heads[{h}].value", shape=(d, None))
        o = parse_matrix(hs["out"], f"{at}.heads[{h}].out", shape=(v.ncols(), None))
        sb = hs.get("score_bias")
        sb = None if sb is None else parse_vector(sb, f"{at}.heads[{h}].score_bias", d)
        parsed.append(Head(q, k, v, o, sb))
    scoring, scale = _attention_scoring(spec, at)
    bias = spec.get("bias")
    bias = None if bias is None else parse_vector(bias, f"{at}.bias", parsed[0].out.ncols())
    try:
        return AttentionLayer(T, parsed, None, scoring, scale, bias)
    except InputError as e:
        raise InputError(f"{at}: {e}") from None


def _attention_scoring(spec: dict, at: str):
    """``"scoring"`` ("lightning", the default, or "softmax") and the softmax ``"scale"`` (an exact
    rational; absent: torch's 1/sqrt(d_k), kept exact, docs/attention.md)."""
    scoring = spec.get("scoring", "lightning")
    if scoring not in ("lightning", "softmax"):
        raise InputError(f"{at}.scoring: must be \"lightning\" or \"softmax\", got {scoring!r}")
    if "scale" not in spec or spec["scale"] is None:
        return scoring, None
    if scoring != "softmax":
        raise InputError(f"{at}.scale: a scale belongs to softmax attention only (\"scoring\": \"softmax\")")
    v = spec["scale"]
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise InputError(f"{at}.scale: an exact rational (an integer or a string such as \"1/2\"), got {v!r}; "
                         "leave it out for 1/sqrt(d_k)")
    return scoring, parse_number(v, f"{at}.scale")


def model_header(data, where: str = "model") -> int:
    """Check a model file's object, format and ``input_dim`` (exact and numeric readers); return n."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a JSON object")
    check_keys(data, where, *MODEL_KEYS, error=InputError)
    fmt = data["format"]  # required (MODEL_KEYS), as the checker requires it
    if fmt != MODEL_FORMAT:
        raise InputError(f"{where}: unsupported format {fmt!r}; expected {MODEL_FORMAT!r}")
    n = data.get("input_dim")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(f"{where}: \"input_dim\" must be a positive integer, got {n!r}")
    check_width(n, f"{where}: input_dim")
    return n


def model_from_json(data, where: str = "model") -> Model:
    """Build a :class:`Model` from the ``symeq-model/1`` JSON structure."""
    n = model_header(data, where)
    layers = layers_from_json(data.get("layers"), n, f"{where}.layers")
    group = FiniteGroup.from_json(data["group"], f"{where}.group") if data.get("group") is not None else None
    try:
        model = Model(n, layers, group, str(data.get("name", "model")))
    except InputError as e:
        raise InputError(f"{where}: {e}") from None
    if model.is_polynomial:  # exact values grow with the degree of f: refuse an absurd one at once
        check_total_degree(model.degree(), f"{where}: the polynomial map f (product of the layers' degrees)")
    return model


def layers_to_json(model: Model) -> list[dict]:
    out = []
    flags = declared_biases(model)
    for l, declared in zip(model.layers, flags):
        if l.kind == "attention":
            out.append({"type": "attention", "tokens": l.tokens, "heads": [
                {"query": format_matrix(h.query), "key": format_matrix(h.key),
                 "value": format_matrix(h.value), "out": format_matrix(h.out)} for h in l.heads]})
            if l.scoring != "lightning":  # lightning files stay as they were (the digest too)
                out[-1]["scoring"] = l.scoring
                if l.scale is not None:
                    out[-1]["scale"] = format_number(l.scale)
                if l.bias is not None:
                    out[-1]["bias"] = format_vector(l.bias)
                for spec, h in zip(out[-1]["heads"], l.heads):
                    if h.score_bias is not None:
                        spec["score_bias"] = format_vector(h.score_bias)
            continue
        if l.kind == "conv2d":
            s = l.shape
            out.append({"type": "conv2d", "input_shape": list(l.in_shape),
                        "kernel": [[[format_vector(r) for r in kc] for kc in ko] for ko in l.kernel],
                        "bias": format_vector(l.channel_bias) if declared else None, "stride": s.stride, "padding": s.padding,
                        "padding_mode": s.padding_mode,
                        "activation": None if l.activation is None else l.activation.to_spec()})
            continue
        out.append({
            "type": "dense",
            "weight": format_matrix(l.token_weight),
            "bias": format_vector(l.token_bias) if declared else None,  # null: no bias parameters
            "activation": None if l.activation is None else l.activation.to_spec(),
        })
    return out


def model_to_json(model: Model, include_group: bool = True) -> dict:
    data = {"format": MODEL_FORMAT, "name": model.name, "input_dim": model.input_dim, "layers": layers_to_json(model)}
    if include_group and model.group is not None:
        data["group"] = model.group.to_json()
    return data


def load_model(path) -> Model:
    """Load a model file, with errors that name the file."""
    return model_from_json(read_json(path), where=str(path))


def save_model(model: Model, path) -> None:
    write_json(model_to_json(model), path)
