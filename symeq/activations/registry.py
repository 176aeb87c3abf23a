"""The registry of activation units: ``"type"`` -> :class:`~symeq.activations.base.ActivationUnit`,
and the queries the rest of symeq asks instead of keeping its own maps (the float functions, the
torch modules read and built, the ONNX operators read and written, the names and aliases).

Each family module registers its units once at import (:mod:`symeq.activations.polynomial`,
:mod:`~symeq.activations.relu`, :mod:`~symeq.activations.real`); ``import symeq.activations``
imports them all.  torch, numpy and onnx are never imported here: the units' callables import
what they need when called (the package stays at level 2, docs/architecture.md).

>>> from symeq.activations import real
>>> unit("gelu").symmetry, unit("gelu").onnx_ops, unit("leaky_relu").torch_classes
('generic', ('Gelu',), ('LeakyReLU',))
>>> torch_activation_classes()["SiLU"]
'silu'
>>> [label for label, _ in onnx_candidates()][:4]
['relu', 'tanh', 'sigmoid', 'gelu']
"""

from __future__ import annotations

from ..errors import InputError

__all__ = ["UNITS", "register", "unit", "units", "names", "aliases", "float_functions", "torch_module",
           "torch_activation_classes", "spec_from_torch", "activation_from_onnx", "onnx_ops", "onnx_candidates",
           "to_onnx"]

#: ``"type"`` -> unit, in registration order (:func:`units` sorts by rank)
UNITS: dict = {}


def register(u):
    """Add a unit (once per name; a second unit of the same name or alias is a programming error)."""
    taken = set(UNITS) | {a for v in UNITS.values() for a in v.aliases}
    clash = ({u.name} | set(u.aliases)) & taken
    if clash:
        raise AssertionError(f"activation {u.name!r}: {sorted(clash)} already registered")
    UNITS[u.name] = u
    return u


def units(kind: str | None = None) -> list:
    """The units by rank (of one :attr:`~symeq.activations.base.Activation.kind` when given)."""
    return sorted((u for u in UNITS.values() if kind is None or u.kind == kind), key=lambda u: u.rank)


def names() -> tuple:
    """Every canonical ``"type"``, by rank."""
    return tuple(u.name for u in units())


def aliases() -> dict:
    """Alternative spelling -> canonical ``"type"``."""
    return {a: u.name for u in units() for a in u.aliases}


def unit(name: str):
    """The unit of a canonical ``"type"`` (:class:`InputError` for an unknown one)."""
    try:
        return UNITS[name]
    except KeyError:
        raise InputError(f"unknown activation type {name!r}; known: {', '.join(names())}") from None


def _exact(act):
    """An activation, or its canonical spec (a float twin's ``spec``) built by its unit."""
    if hasattr(act, "unit"):
        return act
    if isinstance(act, str):
        act = {"type": act}
    return unit(act["type"]).make(act)


def float_functions(act):
    """(sigma, sigma') in numpy for an activation or its spec."""
    act = _exact(act)
    return act.unit.numpy(act)


def torch_module(act):
    """The ``torch.nn`` module of an activation or its spec (polynomials: a Horner module)."""
    act = _exact(act)
    u = act.unit
    if u.torch is None:
        raise InputError(u.torch_refusal or f"symeq has no torch module for the activation {act.spec}")
    return u.torch(act)


def torch_activation_classes() -> dict:
    """``torch.nn`` class name -> the ``"type"`` it is read as."""
    return {c: u.name for u in units() for c in u.torch_classes}


def spec_from_torch(mod, kind: str, where) -> dict:
    """The activation spec of a torch activation module of class ``kind`` (its parameters as rationals)."""
    u = UNITS[torch_activation_classes()[kind]]
    return u.from_torch(mod, kind, where) if u.from_torch is not None else {"type": u.name}


def onnx_ops() -> dict:
    """Single ONNX operator -> the ``"type"`` it is read as."""
    return {op: u.name for u in units() for op in u.onnx_ops}


def activation_from_onnx(op: str, attr):
    """The activation one ONNX node computes (a name or a spec), or None when ``op`` is not an
    activation's operator; ``attr(key, default)`` reads the node's attributes."""
    name = onnx_ops().get(op)
    if name is None:
        return None
    u = UNITS[name]
    return u.from_onnx(op, attr) if u.from_onnx is not None else name


def onnx_candidates() -> list:
    """(label, spec) of every activation tried against an elementwise ONNX subgraph, by rank."""
    return [c for u in units() for c in u.onnx_candidates]


def to_onnx(act, graph, cur: str, li: int) -> str:
    """Emit an activation's ONNX nodes after the tensor ``cur`` (``graph``: ``node``, ``fresh``,
    ``const``); the output's name.  :class:`InputError` when it has no ONNX form."""
    act = _exact(act)
    u = act.unit
    if u.to_onnx is None:
        raise InputError(f"layer {li}: no ONNX form for the activation {act.spec}")
    return u.to_onnx(act, graph, cur, li)
