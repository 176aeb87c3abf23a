"""The digest of theta (``layers_sha256``): SHA-256 of the declared layers in a canonical form.

A certificate of a large model carries this digest instead of a copy of theta; the checker recomputes it
from the model file it is given, so the certificate stays bound to exactly that theta.  The canonical form
(digest form 2) is defined on the model file's ``layers`` list, written down in docs/certificates.md, and
implemented twice, here and in the prover (``symeq/digest.py``), which must agree on every file:

* ``flatten`` layers are left out (they move no number);
* every number -- a JSON integer, or a string the exact number syntax reads (``"3"``, ``"-1/2"``,
  ``"0.25"``) -- becomes the string of its reduced fraction (``"3"``, ``"-1/2"``, ``"1/4"``);
* a ``bias`` that is null or all zeros becomes null;
* an activation: polynomial families (``tanh_series``, ``sigmoid_series``, ``monomial``, ``polynomial``)
  become ``{"type": "polynomial", "coeffs": [...]}`` with the trailing zero coefficients dropped;
  ``gelu``, ``elu`` and ``leaky_relu`` get their defaults written (``"approximate": "none"``,
  ``"alpha": "1"``, ``"slope": "1/100"``); any other keeps its keys;
* a ``conv2d`` layer gets ``input_shape`` (inherited from the layer before it when omitted), ``stride``
  (1), ``padding`` (0) and ``padding_mode`` ("zeros") written; ``dilation`` and ``groups`` of 1 are dropped;
* an attention layer's ``"scoring": "lightning"`` (the default) is dropped, and so are a softmax layer's
  ``"bias"`` and ``"scale"`` when null (or all zeros) and a head's ``"score_bias"`` when null or all zeros.

The digest is the SHA-256 (hex) of the UTF-8 JSON text of ``{"digest_form": 2, "input_dim": n, "layers":
[...]}`` with sorted keys, separators ``(",", ":")`` and ASCII escapes.  Certificates written before form 2
(by symeq up to 0.1.0, digest form 1: the repr of the checker's reading) are still accepted: form 1 is
written out below with its names fixed, so renaming anything in this package changes neither form.
"""
from __future__ import annotations

import hashlib
import json
from fractions import Fraction
from functools import lru_cache

from ._numbers import CheckError, parse_number
from .activations import sigmoid_series_coeffs, tanh_series_coeffs
from .attention import _Attention
from .conv import _Conv
from .model import _Layer, _layers
from .real import _Real
from .report import CheckReport
from .schema import PARAMS_DIFFER

DIGEST_FORM = 2
_REAL_DEFAULTS = {"gelu": ("approximate", "none"), "elu": ("alpha", "1"), "leaky_relu": ("slope", "1/100")}
_POLYNOMIAL_FAMILIES = ("tanh_series", "sigmoid_series", "monomial", "polynomial")


def _number_text(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _normal(value):
    """Every number of ``value`` as its reduced fraction's string (lists and objects recursively)."""
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _normal_text(value)
    return value


@lru_cache(maxsize=1 << 16)
def _normal_text(value: str) -> str:
    """A string: its reduced fraction if it is a number, else itself (cached: shared weights repeat)."""
    try:
        return _number_text(parse_number(value))
    except CheckError:  # a name ("zeros", "tanh"), not a number
        return value


def _canonical_activation(spec):
    if not isinstance(spec, dict):
        return _normal(spec)
    kind = spec.get("type")
    if kind in _POLYNOMIAL_FAMILIES:
        if kind == "tanh_series":
            coeffs = tanh_series_coeffs(int(spec["order"]))
        elif kind == "sigmoid_series":
            coeffs = sigmoid_series_coeffs(int(spec["order"]))
        elif kind == "monomial":
            coeffs = [Fraction(0)] * int(spec["degree"]) + [Fraction(1)]
        else:
            coeffs = [parse_number(c) for c in spec["coeffs"]]
        while len(coeffs) > 1 and coeffs[-1] == 0:
            coeffs.pop()
        return {"type": "polynomial", "coeffs": [_number_text(Fraction(c)) for c in coeffs]}
    out = _normal(spec)
    if kind in _REAL_DEFAULTS:
        key, default = _REAL_DEFAULTS[kind]
        out.setdefault(key, _normal(default))
    return out


def canonical_layers(layers_json) -> list:
    """The canonical form (digest form 2) of a model file's ``layers`` (already read and checked)."""
    out, shape = [], None
    for spec in layers_json:
        kind = spec.get("type")
        if kind == "flatten":
            continue
        if kind == "dense" and shape is not None:  # after a conv2d: the conv with a whole-image kernel
            C, H, W = shape
            spec = {"type": "conv2d", "input_shape": shape, "bias": spec.get("bias"),
                    "kernel": [[[row[(c * H + i) * W:(c * H + i + 1) * W] for i in range(H)] for c in range(C)]
                               for row in spec["weight"]],
                    "stride": 1, "padding": 0, "padding_mode": "zeros", "activation": spec.get("activation")}
            kind = "conv2d"
        layer = {k: (_canonical_activation(v) if k == "activation" else _normal(v)) for k, v in spec.items()}
        if "bias" in layer and (layer["bias"] is None or all(b == "0" for b in layer["bias"])):
            layer["bias"] = None
        if kind == "conv2d":
            given = spec.get("input_shape")
            shape = [int(v) for v in given] if given is not None else shape
            stride, padding = int(spec.get("stride", 1)), int(spec.get("padding", 0))
            for key in ("dilation", "groups"):
                if layer.get(key) in ("1", ["1", "1"]):
                    del layer[key]
            layer.update(input_shape=[str(v) for v in shape], stride=str(stride), padding=str(padding),
                         padding_mode=spec.get("padding_mode", "zeros"))
            kernel = spec["kernel"]
            kh, kw = len(kernel[0][0]), len(kernel[0][0][0])
            shape = [len(kernel), (shape[1] + 2 * padding - kh) // stride + 1, (shape[2] + 2 * padding - kw) // stride + 1]
        elif kind in ("maxpool2d", "group_pool"):  # pooling (docs/conv.md): defaults written, the shape carried
            layer, shape = _canonical_pool(kind, spec, layer, shape)
        elif kind == "attention":
            if layer.get("scoring") == "lightning":
                del layer["scoring"]
            for key in ("bias", "scale"):  # softmax's output bias and scale: absent, null and zeros alike
                if key in layer and layer[key] is None:
                    del layer[key]
            for head in layer.get("heads", []):
                if isinstance(head, dict) and "score_bias" in head and (
                        head["score_bias"] is None or all(b == "0" for b in head["score_bias"])):
                    del head["score_bias"]
        out.append(layer)
    return out


def _canonical_pool(kind: str, spec: dict, layer: dict, shape):
    """A pooling layer in digest form 2: its input shape, kernel_size, stride (default: the kernel size)
    and padding (default 0), or its field_size; and the shape after it."""
    if spec.get("input_shape") is not None:
        shape = [int(v) for v in spec["input_shape"]]
    C, H, W = shape
    if kind == "group_pool":
        n = int(spec["field_size"])
        layer.update(input_shape=[str(v) for v in shape], field_size=str(n))
        return layer, [C // n, H, W]
    k = int(spec["kernel_size"])
    s = int(spec["stride"]) if spec.get("stride") is not None else k
    p = int(spec.get("padding", 0))
    layer.update(input_shape=[str(v) for v in shape], kernel_size=str(k), stride=str(s), padding=str(p))
    return layer, [C, (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1]


def digest_of(layers_json, input_dim: int) -> str:
    """SHA-256 (hex) of the canonical form (digest form 2) of already-read layers."""
    text = json.dumps({"digest_form": DIGEST_FORM, "input_dim": int(input_dim), "layers": canonical_layers(layers_json)},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def graph_digest_of(nodes: list, input_dim: int, output: str) -> str:
    """``graph_sha256`` (docs/graphs.md): SHA-256 (hex) of ``{"digest_form": 2, "input_dim", "output", "graph"}``
    with the nodes already in their canonical form (a segment's ``"layers"`` by :func:`canonical_layers`, a
    join's ``"activation"`` by its canonical activation; :func:`graph_node_form`)."""
    text = json.dumps({"digest_form": DIGEST_FORM, "input_dim": int(input_dim), "output": output, "graph": list(nodes)},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def graph_node_form(spec: dict, kind: str, inputs) -> dict:
    """One node of a graph in digest form 2: a segment (its layers read, a first conv2d's inherited
    ``input_shape`` written) or a join with its canonical activation or null."""
    if kind == "layers":
        return {"name": spec["name"], "input": inputs[0], "layers": canonical_layers(spec["layers"])}
    return {"name": spec["name"], kind: list(inputs), "activation": _canonical_activation(spec.get("activation"))}


def layers_digest(layers_json, input_dim: int) -> str:
    """SHA-256 of a model's declared layers in their canonical form (digest form 2, docs/certificates.md).

    The layers are read (strictly) first, so only a model file this checker accepts has a digest.

    >>> a = layers_digest([{"type": "dense", "weight": [["1/2"]], "bias": None, "activation": None}], 1)
    >>> a == layers_digest([{"type": "dense", "weight": [["0.5"]], "bias": [0], "activation": None}], 1)
    True
    """
    return _layers_digest(_layers(layers_json, input_dim, "parameters"))


def _layers_digest(layers) -> str:
    """The digest (form 2) of layers read by :func:`symeq_check.model._layers` (which keeps their JSON)."""
    return digest_of(layers.declared, layers.input_dim)


def _legacy(x):
    """Digest form 1 (certificates of symeq up to 0.1.0): nested tuples of strings, field names fixed here."""
    if isinstance(x, _Layer):
        return (("weight", _legacy(x.weight)), ("bias", _legacy(x.bias)), ("act", _legacy(x.act)))
    if isinstance(x, _Attention):
        return (("tokens", _legacy(x.tokens)), ("heads", _legacy(x.heads)))
    if isinstance(x, _Conv):
        return tuple((name, _legacy(getattr(x, name))) for name in
                     ("in_shape", "kh", "kw", "stride", "padding", "mode", "rows", "bias", "act"))
    if isinstance(x, _Real):
        return (("name", _legacy(x.name)), ("param", _legacy(x.param)))
    if isinstance(x, (tuple, list)):
        return tuple(_legacy(v) for v in x)
    return None if x is None else str(x)


def legacy_digest(layers) -> str:
    """Digest form 1 of read layers: SHA-256 of the repr of :func:`_legacy` (still accepted, never written)."""
    return hashlib.sha256(repr(_legacy(list(layers))).encode()).hexdigest()


def _digest_differs(report: CheckReport, digest, layers) -> bool:
    """Record a certificate bound (by ``layers_sha256``) to another theta than the model file's: a
    mismatch (exit 2), not a rejection.  Returns whether it differs.  Form 2 is the digest symeq writes;
    a form-1 digest (an older certificate) is accepted too, and the report says so."""
    if digest == _layers_digest(layers):
        return False
    if isinstance(digest, str) and digest == legacy_digest(layers):
        report.checks.append("layers_sha256 is in digest form 1 (a certificate of an older symeq): accepted; "
                             "re-run symeq to write form 2")
        return False
    report.reasons.append(f"{PARAMS_DIFFER}: the certificate's digest of theta (layers_sha256) is not the "
                          "model's (a certificate of another model, or a changed model file)")
    report.mismatch = True
    return True
