"""The canonical form of model-file numbers, activations and layers, for the certificate digests
(:mod:`symeq.digest`, docs/certificates.md "Digests").

Level 0, standard library only: the pieces every layer kind's own digest form is written with.  A kind
declares, in its module, ``DIGEST_FORMS`` (model-file ``"type"`` -> :class:`Form`) and, for the types it
reads after an image, ``DIGEST_AFTER_IMAGE`` (as conv2d reads a dense layer after a convolution); the
registry (:func:`symeq.layers.registry.digest_form`) hands them to the digest.  A type no kind declares
takes :func:`plain_form`.  symeq's own implementation: the checker has its own (``symeq_check.digest``),
and tests/checker/test_certificate_digest.py holds the two equal.

>>> plain_form({"type": "dense", "weight": [["0.5", 2]], "bias": [0], "activation": None}, None)[0]
{'type': 'dense', 'weight': [['1/2', '2']], 'bias': None, 'activation': None}
"""
from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Callable, NamedTuple

__all__ = ["DIGEST_FORM", "Form", "plain_form", "drop_form", "canonical_activation", "normal", "number", "text"]

DIGEST_FORM = 2
_FRACTION = re.compile(r"([+-]?)(\d+)/(\d+)")
_DECIMAL = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")
_REAL_DEFAULTS = {"gelu": ("approximate", "none"), "elu": ("alpha", "1"), "leaky_relu": ("slope", "1/100")}
_POLYNOMIAL_FAMILIES = ("tanh_series", "sigmoid_series", "monomial", "polynomial")


class Form(NamedTuple):
    """A layer type's digest form: ``fn(spec, shape) -> (canonical layer or None, shape after it)``;
    ``image``: its output is an image, and as a graph segment's first layer it inherits the image shape of
    the node it reads (docs/graphs.md)."""

    fn: Callable
    image: bool = False


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


def canonical_activation(spec):
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


def plain_form(spec: dict, shape):
    """Every number as its reduced fraction's string, the activation canonical, a null or zero bias null."""
    layer = {k: (canonical_activation(v) if k == "activation" else _normal(v)) for k, v in spec.items()}
    if "bias" in layer and (layer["bias"] is None or all(b == "0" for b in layer["bias"])):
        layer["bias"] = None
    return layer, shape


def drop_form(spec: dict, shape):
    """A flatten: left out (the shape carried on: a dense layer after it reads the image)."""
    return None, shape


#: the public names of the number helpers (the kinds' forms use them)
number, text, normal = _number, _text, _normal
