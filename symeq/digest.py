"""The digests that bind a certificate to its model (``layers_sha256``), computed by the prover.

symeq's own implementation (level 0, standard library only): the certificate checker
(``symeq_check.digest``) implements the same canonical forms on its own, and a test holds the two equal
on every model (tests/checker/test_certificate_digest.py).  The forms are written down in docs/certificates.md:

* :func:`layers_digest` -- digest form 2 of the declared layers (the equivariance, Jacobian-rank and
  ReLU local-identifiability certificates): ``flatten`` layers left out; every number (a JSON integer or a
  numeric string) as its reduced fraction's string; a null or all-zero ``bias`` as null; polynomial
  activation families as ``{"type": "polynomial", "coeffs": [...]}`` without trailing zeros; ``gelu``,
  ``elu`` and ``leaky_relu`` with their defaults written; ``conv2d`` with ``input_shape``, ``stride``,
  ``padding`` and ``padding_mode`` written (``dilation``/``groups`` of 1 dropped); attention without
  ``"scoring": "lightning"``, and without softmax's null or zero ``bias``, ``scale``, heads' ``score_bias``.
  SHA-256 of the sorted, compact, ASCII JSON of ``{"digest_form": 2, "input_dim": n, "layers": [...]}``.
* :func:`classical_digest` -- the Sussmann/Fefferman certificates' digest of dense layers: SHA-256 of the
  ``repr`` of the tuple of ``(W rows, b, activation)`` with every number as its reduced fraction's string,
  a null bias as zeros, and the activation as ``"tanh"``/``"sigmoid"`` (else its spec's sorted JSON text).
"""
from __future__ import annotations

import hashlib
import json
import re
from fractions import Fraction
from functools import lru_cache

DIGEST_FORM = 2
_FRACTION = re.compile(r"([+-]?)(\d+)/(\d+)")
_DECIMAL = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")
_REAL_DEFAULTS = {"gelu": ("approximate", "none"), "elu": ("alpha", "1"), "leaky_relu": ("slope", "1/100")}
_POLYNOMIAL_FAMILIES = ("tanh_series", "sigmoid_series", "monomial", "polynomial")
_CLASSICAL = ("tanh", "sigmoid")


def _number(value) -> Fraction | None:
    """The exact number a JSON value writes (an integer, "p/q" or a decimal string), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if not isinstance(value, str):
        return None
    m = _FRACTION.fullmatch(value)
    if m:
        return Fraction(int(m[1] + m[2]), int(m[3])) if int(m[3]) else None
    m = _DECIMAL.fullmatch(value)
    if m and (m[2] or m[3]):
        exponent = int(m[4] or 0) - len(m[3] or "")
        return int(m[1] + (m[2] or "") + (m[3] or "")) * Fraction(10) ** exponent
    return None


def _text(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


@lru_cache(maxsize=1 << 16)
def _normal_text(value: str) -> str:
    x = _number(value)
    return value if x is None else _text(x)


def _normal(value):
    if isinstance(value, str):
        return _normal_text(value)  # cached: weight sharing repeats the same strings
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    x = _number(value)
    return value if x is None else _text(x)


def _tanh_coeffs(order: int) -> list[Fraction]:
    """Taylor coefficients of tanh up to t^order, from T' = 1 - T^2."""
    a = [Fraction(0)] * (order + 1)
    for k in range(order):
        a[k + 1] = ((1 if k == 0 else 0) - sum(a[i] * a[k - i] for i in range(k + 1))) / (k + 1)
    return a


def _activation(spec):
    if not isinstance(spec, dict):
        return _normal(spec)
    kind = spec.get("type")
    if kind in _POLYNOMIAL_FAMILIES:
        if kind == "tanh_series":
            coeffs = _tanh_coeffs(int(spec["order"]))
        elif kind == "sigmoid_series":  # 1/2 + tanh(t/2)/2
            coeffs = [a / 2 ** (k + 1) for k, a in enumerate(_tanh_coeffs(int(spec["order"])))]
            coeffs[0] += Fraction(1, 2)
        elif kind == "monomial":
            coeffs = [Fraction(0)] * int(spec["degree"]) + [Fraction(1)]
        else:
            coeffs = [_number(c) for c in spec["coeffs"]]
        while len(coeffs) > 1 and coeffs[-1] == 0:
            coeffs.pop()
        return {"type": "polynomial", "coeffs": [_text(c) for c in coeffs]}
    out = _normal(spec)
    if kind in _REAL_DEFAULTS:
        key, default = _REAL_DEFAULTS[kind]
        out.setdefault(key, default)
    return out


def _inherit_shape(layers_json, shape) -> list:
    """A graph segment's layers with the image shape of the node it reads written into its first layer (not
    a flatten) when that is a conv2d or a pooling layer leaving out ``input_shape`` (docs/graphs.md)."""
    first = next((l for l in layers_json if not (isinstance(l, dict) and _FORMS.get(l.get("type")) is _drop_form)),
                 None)
    if shape is None or not isinstance(first, dict) or first.get("type") not in _IMAGE_KINDS \
            or first.get("input_shape") is not None:
        return list(layers_json)
    return [dict(l, input_shape=list(shape)) if l is first else l for l in layers_json]


def _join_shape(key: str, shapes: list):
    """The image shape of an addition (its inputs') or a concatenation (channels summed), else None."""
    if not shapes or any(s is None for s in shapes):
        return None
    if key == "concat":
        return [sum(int(s[0]) for s in shapes)] + list(shapes[0][1:])
    return list(shapes[0])


def canonical_layers(layers_json) -> list:
    """Digest form 2 of a model file's ``layers`` (as symeq writes them, or any file symeq reads)."""
    return _canonical_with_shape(layers_json)[0]


def _canonical_with_shape(layers_json) -> tuple:
    """:func:`canonical_layers` and the image shape after the layers (None: no image met); each layer by the
    form of its ``"type"`` (:data:`_FORMS`; a type without one: its numbers and activation only)."""
    out, shape = [], None
    for spec in layers_json:
        layer, shape = _FORMS.get(spec.get("type"), _plain_form)(spec, shape)
        if layer is not None:
            out.append(layer)
    return out, shape


def _plain_form(spec: dict, shape):
    """Every number as its reduced fraction's string, the activation canonical, a null or zero bias null."""
    layer = {k: (_activation(v) if k == "activation" else _normal(v)) for k, v in spec.items()}
    if "bias" in layer and (layer["bias"] is None or all(b == "0" for b in layer["bias"])):
        layer["bias"] = None
    return layer, shape


def _drop_form(spec: dict, shape):
    """A flatten: left out (the shape carried on: a dense layer after it reads the image)."""
    return None, shape


def _dense_form(spec: dict, shape):
    """A dense layer; after an image, the convolution with a whole-image kernel."""
    if shape is None:
        return _plain_form(spec, shape)
    C, H, W = shape
    conv = {"type": "conv2d", "input_shape": shape, "bias": spec.get("bias"),
            "kernel": [[[row[(c * H + i) * W:(c * H + i + 1) * W] for i in range(H)] for c in range(C)]
                       for row in spec["weight"]],
            "stride": 1, "padding": 0, "padding_mode": "zeros", "activation": spec.get("activation")}
    return _conv_form(conv, shape)


def _conv_form(spec: dict, shape):
    """A conv2d: input_shape, stride, padding and padding_mode written, dilation/groups of 1 dropped."""
    layer, _ = _plain_form(spec, shape)
    if spec.get("input_shape") is not None:
        shape = [int(v) for v in spec["input_shape"]]
    stride, padding = int(spec.get("stride", 1)), int(spec.get("padding", 0))
    for key in ("dilation", "groups"):
        if layer.get(key) in ("1", ["1", "1"]):
            del layer[key]
    layer.update(input_shape=[str(v) for v in shape], stride=str(stride), padding=str(padding),
                 padding_mode=spec.get("padding_mode", "zeros"))
    kh, kw = len(spec["kernel"][0][0]), len(spec["kernel"][0][0][0])
    return layer, [len(spec["kernel"]), (shape[1] + 2 * padding - kh) // stride + 1,
                   (shape[2] + 2 * padding - kw) // stride + 1]


def _maxpool_form(spec: dict, shape):
    """A max pooling layer (docs/conv.md): its input shape, kernel_size, stride (default: the kernel size)
    and padding (default 0) written; the shape after it."""
    layer, _ = _plain_form(spec, shape)
    if spec.get("input_shape") is not None:
        shape = [int(v) for v in spec["input_shape"]]
    C, H, W = shape
    k = int(spec["kernel_size"])
    s = int(spec["stride"]) if spec.get("stride") is not None else k
    p = int(spec.get("padding", 0))
    layer.update(input_shape=[str(v) for v in shape], kernel_size=str(k), stride=str(s), padding=str(p))
    return layer, [C, (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1]


def _group_pool_form(spec: dict, shape):
    """A group pooling layer: its input shape and field_size written; the shape after it."""
    layer, _ = _plain_form(spec, shape)
    if spec.get("input_shape") is not None:
        shape = [int(v) for v in spec["input_shape"]]
    C, H, W = shape
    n = int(spec["field_size"])
    layer.update(input_shape=[str(v) for v in shape], field_size=str(n))
    return layer, [C // n, H, W]


def _attention_form(spec: dict, shape):
    """An attention layer without "scoring": "lightning", and without softmax's null output bias and scale
    or null or zero heads' score_bias."""
    layer, _ = _plain_form(spec, shape)
    if layer.get("scoring") == "lightning":
        del layer["scoring"]
    for key in ("bias", "scale"):  # softmax's output bias and scale: absent, null and zeros alike
        if key in layer and layer[key] is None:
            del layer[key]
    for head in layer.get("heads", []):
        if isinstance(head, dict) and "score_bias" in head and (
                head["score_bias"] is None or all(b == "0" for b in head["score_bias"])):
            del head["score_bias"]
    return layer, shape


#: the digest's canonical form of each model-file "type" (the format's rule, docs/certificates.md; the
#: checker's own in symeq_check/digest.py): the one place this module names the layer types
_FORMS = {"flatten": _drop_form, "dense": _dense_form, "conv2d": _conv_form, "maxpool2d": _maxpool_form,
          "group_pool": _group_pool_form, "attention": _attention_form}

_IMAGE_KINDS = ("conv2d", "maxpool2d", "group_pool")
"""The layer types whose output is an image in a model file, and which inherit an image node's shape in a
graph (docs/graphs.md); as symeq_check/graph.py reads them."""


def layers_digest(layers_json, input_dim: int) -> str:
    """SHA-256 (hex) of the declared layers in digest form 2 (docs/certificates.md).

    >>> a = layers_digest([{"type": "dense", "weight": [["1/2"]], "bias": None, "activation": None}], 1)
    >>> a == layers_digest([{"type": "dense", "weight": [["0.5"]], "bias": [0], "activation": None}], 1)
    True
    """
    text = json.dumps({"digest_form": DIGEST_FORM, "input_dim": int(input_dim), "layers": canonical_layers(layers_json)},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def classical_digest(layers_json, input_dim: int) -> str:
    """SHA-256 of a model's dense layers in the classical certificates' form (docs/certificates.md).

    >>> a = classical_digest([{"type": "dense", "weight": [["1/2"]], "bias": None, "activation": {"type": "tanh"}},
    ...                       {"type": "dense", "weight": [[1]], "bias": [0], "activation": None}], 1)
    >>> a == classical_digest([{"type": "dense", "weight": [["0.5"]], "bias": [0], "activation": {"type": "tanh"}},
    ...                        {"type": "dense", "weight": [[1]], "bias": None, "activation": None}], 1)
    True
    """
    canon = []
    for spec in layers_json:
        W = tuple(tuple(str(_number(x)) for x in row) for row in spec["weight"])
        b = spec.get("bias")
        b = ("0",) * len(W) if b is None else tuple(str(_number(x)) for x in b)
        act = spec.get("activation")
        if act is not None:
            act = act["type"] if act.get("type") in _CLASSICAL else json.dumps(act, sort_keys=True)
        canon.append((W, b, act))
    return hashlib.sha256(repr(tuple(canon)).encode()).hexdigest()


def graph_digest(graph_json, input_dim: int, output: str) -> str:
    """``graph_sha256`` (docs/graphs.md, docs/certificates.md): SHA-256 (hex) of a graph model file's
    ``"graph"`` in digest form 2: per node, a segment as ``{"name", "input", "layers"}`` (its layers
    canonical as in :func:`layers_digest`), a join as ``{"name", KEY: [...], "activation"}`` (the
    canonical activation, or null).

    >>> seg = lambda w: {"name": "a", "input": "input", "layers": [{"type": "dense", "weight": [[w]], "bias": None,
    ...                                                          "activation": None}]}
    >>> graph_digest([seg("0.5")], 1, "a") == graph_digest([seg("1/2")], 1, "a")
    True
    >>> graph_digest([seg("1/2")], 1, "a") == graph_digest([seg("1/3")], 1, "a")
    False
    """
    nodes, shapes = [], {"input": None}
    for spec in graph_json:
        if "layers" in spec:
            layers = _inherit_shape(spec["layers"], shapes.get(spec["input"]))
            canon, shape = _canonical_with_shape(layers)
            last = layers[-1] if layers else {}
            shapes[spec["name"]] = shape if isinstance(last, dict) and last.get("type") in _IMAGE_KINDS else None
            nodes.append({"name": spec["name"], "input": spec["input"], "layers": canon})
            continue
        key = next(k for k in spec if k not in ("name", "activation"))
        act = spec.get("activation")
        shapes[spec["name"]] = _join_shape(key, [shapes.get(i) for i in spec[key]])
        nodes.append({"name": spec["name"], key: list(spec[key]), "activation": None if act is None else _activation(act)})
    text = json.dumps({"digest_form": DIGEST_FORM, "input_dim": int(input_dim), "output": output, "graph": nodes},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
