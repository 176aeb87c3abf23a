"""The digests that bind a certificate to its model (``layers_sha256``), computed by the prover.

symeq's own implementation: the certificate checker (``symeq_check.digest``) implements the same
canonical forms on its own, and a test holds the two equal on every model
(tests/checker/test_certificate_digest.py).  Each layer type's canonical form is declared by its kind,
in its own module (``DIGEST_FORMS``, asked through :func:`symeq.layers.registry.digest_form`), written with
the number and activation rules of :mod:`symeq.canonical`.  The forms are written down in
docs/certificates.md:

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

from .canonical import DIGEST_FORM, canonical_activation as _activation, drop_form, number as _number
from .layers.registry import digest_form

__all__ = ["DIGEST_FORM", "canonical_layers", "layers_digest", "classical_digest", "graph_digest"]

_CLASSICAL = ("tanh", "sigmoid")


def _form(spec, shape):
    return digest_form(spec.get("type"), after_image=shape is not None)


def _inherit_shape(layers_json, shape) -> list:
    """A graph segment's layers with the image shape of the node it reads written into its first layer (not
    a flatten) when that is a conv2d or a pooling layer leaving out ``input_shape`` (docs/graphs.md)."""
    first = next((l for l in layers_json if not (isinstance(l, dict) and digest_form(l.get("type")).fn is drop_form)),
                 None)
    if shape is None or not isinstance(first, dict) or not digest_form(first.get("type")).image \
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
    form its kind declares for its ``"type"`` (a type without one: its numbers and activation only)."""
    out, shape = [], None
    for spec in layers_json:
        layer, shape = _form(spec, shape).fn(spec, shape)
        if layer is not None:
            out.append(layer)
    return out, shape


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
            shapes[spec["name"]] = shape if isinstance(last, dict) and digest_form(last.get("type")).image else None
            nodes.append({"name": spec["name"], "input": spec["input"], "layers": canon})
            continue
        key = next(k for k in spec if k not in ("name", "activation"))
        act = spec.get("activation")
        shapes[spec["name"]] = _join_shape(key, [shapes.get(i) for i in spec[key]])
        nodes.append({"name": spec["name"], key: list(spec[key]), "activation": None if act is None else _activation(act)})
    text = json.dumps({"digest_form": DIGEST_FORM, "input_dim": int(input_dim), "output": output, "graph": nodes},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
