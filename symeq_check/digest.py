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
from .model import _layers, kind_of
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
    """The canonical form (digest form 2) of a model file's ``layers`` (already read and checked): each in its
    kind's form (:data:`symeq_check.model.KINDS`), the (C, H, W) carried from layer to layer."""
    out, shape = [], None
    for spec in layers_json:
        layer, shape = kind_of(spec).canonical(spec, shape, _normal_layer)
        if layer is not None:
            out.append(layer)
    return out


def _normal_layer(spec: dict) -> dict:
    """Every layer's form before its kind's: numbers reduced, the activation canonical, a zero bias null."""
    layer = {k: (_canonical_activation(v) if k == "activation" else _normal(v)) for k, v in spec.items()}
    if "bias" in layer and (layer["bias"] is None or all(b == "0" for b in layer["bias"])):
        layer["bias"] = None
    return layer


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
    """Digest form 1 (certificates of symeq up to 0.1.0): nested tuples of strings, the field names fixed where
    each class declares them (``LEGACY_FIELDS``: dense, attention, conv2d, a real activation)."""
    names = getattr(x, "LEGACY_FIELDS", None)
    if names is not None:
        return tuple((name, _legacy(getattr(x, name))) for name in names)
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
