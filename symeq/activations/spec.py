"""Reading an activation: from its JSON spec (model files, certificates) and from the command line.
The names, keys, aliases and shorthands are the units' own (:mod:`symeq.activations.registry`);
the series spellings ``tanh3``/``sigmoid5`` and ``tanh:3``/``sigmoid:5`` are the old shorthands of
``tanh_series``/``sigmoid_series``.

>>> activation_from_spec("tanh3").to_spec()      # an old spelling of the Taylor polynomial
{'type': 'tanh_series', 'order': 3}
"""

from __future__ import annotations

from ..errors import InputError
from ..schema import check_keys, close_names
from .base import Activation
from .registry import UNITS, aliases, names

__all__ = ["activation_from_spec", "activation_from_text"]

_SERIES = ("tanh", "sigmoid")


def _alias_spec(name: str):
    """A spec for a shorthand name: ``tanh3`` -> tanh_series order 3, ``sigmoid5`` -> sigmoid_series
    order 5, ``tanh_series:3``, ``monomial:2``, ``polynomial:0,1,1``, or an alias; None if unknown."""
    base, sep, arg = name.partition(":")
    for series in _SERIES:
        if base.startswith(series) and base[len(series):].isdigit():
            return {"type": f"{series}_series", "order": int(base[len(series):])}
    if sep and base in _SERIES:  # the old shorthand tanh:3, sigmoid:5 (Taylor polynomials)
        base += "_series"
    base = aliases().get(base, base)
    u = UNITS.get(base)
    if u is None:
        return None
    if not sep:
        return {"type": base} if not u.required else None
    if u.shorthand is None:
        return None
    return {"type": base, **u.shorthand(arg, name)}


def activation_from_text(text: str, where: str = "--activation") -> Activation:
    """An activation from the command line: a name, a shorthand or a JSON object.

    ``tanh`` is the real tanh; its Taylor polynomials are ``tanh_series:3`` (old spellings
    ``tanh3`` and ``tanh:3``), likewise ``sigmoid`` and ``sigmoid_series:5`` (``sigmoid:5``); ``monomial:2``,
    ``polynomial:0,1,1``, ``leaky_relu:1/10``, ``elu:2``, ``gelu:tanh``.

    >>> activation_from_text("tanh").to_spec(), activation_from_text("tanh3").to_spec()
    ({'type': 'tanh'}, {'type': 'tanh_series', 'order': 3})
    >>> activation_from_text("leaky_relu:1/10").to_spec()
    {'type': 'leaky_relu', 'slope': '1/10'}
    """
    import json

    text = text.strip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{where}: malformed JSON ({e.msg})") from None
        return activation_from_spec(spec, where)
    spec = _alias_spec(text)
    if spec is None:
        close = close_names(text.partition(":")[0], list(UNITS) + list(aliases()))
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise InputError(f"{where}: unknown activation {text!r}{hint}; names: {', '.join(names())} "
                         "(tanh_series:3, monomial:2, polynomial:0,1,1, leaky_relu:1/10 take an argument), or JSON")
    return activation_from_spec(spec, where)


def activation_from_spec(spec, where: str = "activation") -> Activation | None:
    """Build an activation from its JSON description (None stays None: an affine layer).

    Read strictly: an unknown ``"type"`` is refused with the closest names, an unknown key with
    the keys allowed there (:func:`symeq.schema.check_keys`); a string is a name or a shorthand
    (``"tanh"``, ``"tanh3"``).

    >>> activation_from_spec({"type": "tanh", "order": 3})
    Traceback (most recent call last):
    ...
    symeq.errors.InputError: activation: unknown key "order"; allowed here: "type"
    >>> activation_from_spec({"type": "tahn"})
    Traceback (most recent call last):
    ...
    symeq.errors.InputError: unknown activation type 'tahn' at activation (did you mean tanh?); known: polynomial, monomial, tanh_series, sigmoid_series, relu, tanh, sigmoid, gelu, silu, softplus, elu, leaky_relu, erf
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        alias = _alias_spec(spec)
        spec = alias if alias is not None else {"type": spec}
    if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
        raise InputError(f"{where} must be an object with a \"type\" (a string), got {str(spec)[:200]}")
    name = spec["type"]
    table = aliases()
    if name not in UNITS and name in table:
        spec = dict(spec, type=table[name])
        name = spec["type"]
    u = UNITS.get(name)
    if u is None:
        close = close_names(name, list(UNITS) + list(table))
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise InputError(f"unknown activation type {name!r} at {where}{hint}; known: {', '.join(names())}")
    check_keys(spec, where, ("type",) + u.keys, u.required, error=InputError)
    try:
        return u.make(spec)
    except InputError as e:
        raise InputError(f"{e} (at {where})") from None
