"""The registry of layer kinds: one entry per kind, and the capability queries the rest of symeq asks.

Code outside ``symeq/layers/`` does not switch on a layer's ``kind``: it asks the kind.  Each kind
module (``dense``, ``conv``, ``attention``) declares, on its layer classes,

``kind``
    the name (``"dense"``, ``"conv2d"``, ``"attention"``, ``"heads"``), shared by the exact class and its
    float twin in ``symeq.numeric`` (both are answered by the exact class's declaration);
``capabilities``
    a frozenset of names from :data:`CAPABILITIES` (a classmethod ``layer_capabilities(layer)`` may
    narrow them per layer: a token-wise dense layer is not a plain dense layer);
``schema``
    the model-file ``"type"`` of each object it reads, with its allowed and required keys;
``float_module``
    the module of its float side (:func:`float_unit`): the float twin classes (``FLOAT_LAYERS``, each
    with ``float_twin(layer, activation)`` and ``torch_modules(torch, dtype)``, and ``torch_classes`` /
    ``from_torch`` for the torch modules it reads);

and, at module level, ``LAYER_KINDS`` (its classes), ``JSON_READERS`` (model-file ``"type"`` ->
reader ``reader(spec, ctx, at)``; :func:`read_layers` runs them over one :class:`ReadContext`) and
``DIGEST_FORMS`` (model-file ``"type"`` -> its canonical form in the certificate digests,
:class:`symeq.canonical.Form`; :func:`digest_form`).  The
writer is the layer's own ``to_json(declared_bias)``.  Adding a kind is its module plus one line in
:data:`KIND_MODULES`.

Queries
-------
:func:`supports` (one layer), :func:`all_support` / :func:`any_supports` (a chain of layers),
:func:`first_unsupported` and :func:`require` (refuse by name: ``"conv2d layers do not support X"``,
:class:`KindUnsupported`, exit 2).  ``Model.token_mixing`` is ``any_supports(layers, "token-mixing")``.

How the older switches map to queries (the pipeline modules ``theorem``, ``certification``,
``fibre/search``, ``fibre/decide`` and ``relu/hunt`` use these; new code should too):

* ``model.has_conv``            -> ``model.sparse_actions`` (``any_supports(layers, "sparse-actions")``:
  actions are :class:`symeq.layers.conv.ConvAction`, channel action times pixel permutation);
* ``model.has_attention``       -> ``model.token_mixing`` (``supports(layers[0], "token-mixing")``);
* ``l.kind == "dense"`` gates   -> ``all_support(layers, "tie-walk")`` (the tie walk, dense rows),
  ``"plain-dense"`` (not token-wise), ``"neuron-reduction"``, ``"fibre-ideal"``, ``"tensor-decision"``,
  ``"reynolds"``, ``"onnx-export"``, ``"npz-layout"``, ``"dense-expansion"``;
* ``l.kind == "heads"``         -> ``supports(l, "head-blocks")`` (actions in d_v x d_v blocks per
  token and head);
* ``l.kind == "attention"``     -> ``supports(l, "splits-in-chain")`` or ``"token-mixing"``;
* ``isinstance(l, ConvLayer)`` -> ``supports(l, "channel-reduction")``, ``"sparse-actions"`` or
  ``"image-output"``;
* a kind's own text for an action -> :func:`describe_action` (``describe_output_action`` on the class).

>>> from symeq.models import DenseLayer
>>> from symeq.activations import tanh_series
>>> layer = DenseLayer([[1, 2], [3, 4]], [0, 1], tanh_series(3))
>>> supports(layer, "tie-walk"), supports(layer, "token-mixing")
(True, False)
>>> sorted(kind_names())
['attention', 'conv2d', 'dense', 'group_pool', 'heads', 'maxpool2d']
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..errors import InputError

__all__ = ["CAPABILITIES", "KIND_MODULES", "KindUnsupported", "ReadContext", "kind_class", "kind_names",
           "float_unit", "supports", "all_support", "any_supports", "first_unsupported", "require", "json_reader",
           "read_layers", "layer_to_json", "digest_form", "describe_action"]

KIND_MODULES = (
    "symeq.layers.dense",
    "symeq.layers.conv",
    "symeq.layers.attention",
    "symeq.layers.pooling",
)
"""The modules that declare layer kinds (``LAYER_KINDS``, ``JSON_READERS``): one line per kind module."""

CAPABILITIES = {
    "token-mixing": "mixes tokens (attention, heads): only a model's first layer, no activation rules",
    "last-layer": "may be a model's last layer (a heads layer needs an output layer after it)",
    "splits-in-chain": "splits into several layers of the chain the theorem is about (Model.chain)",
    "plain-dense": "a dense layer x -> sigma(W x + b) on one vector (not token-wise)",
    "dense-rows": "has dense `weight` and `bias` the reports and pictures may print row by row",
    "head-blocks": "its output is (token, head) value spaces; actions are d_v x d_v blocks",
    "image-output": "outputs an image (C, H, W): a dense layer after it is a whole-image convolution",
    "sparse-actions": "its actions are channel action x pixel permutation (ConvAction), composed sparsely",
    "tie-walk": "the tie walk over dense rows (layerwise, numeric.layerwise)",
    "neuron-reduction": "inactive and cloned neurons (and head clones) by submodels' neuron path",
    "channel-reduction": "inactive and cloned channels by submodels' channel path",
    "dense-expansion": "expands through dense `weight`/`bias` over a polynomial ring (symeq.expand)",
    "ball-evaluation": "an arb-ball forward pass (ball_forward) for refutation witnesses",
    "tensor-decision": "the tensor decision of one hidden dense layer (fibre.tensor, fibre.decide)",
    "fibre-ideal": "the fibre ideal and the classical tables over dense layers (fibre.classical, decide)",
    "jacobian-rank": "Jacobian rows for the rank method (fibre.jacobian)",
    "rank-certificate": "the checker re-reads it in a jacobian-rank certificate (symeq_check)",
    "onnx-export": "written to ONNX as Gemm nodes over its dense rows (numeric.onnx_io.write_onnx)",
    "npz-layout": "held by the .npz layout (weight_i/bias_i, conv_i with conv_meta_i; numeric.models.save_npz)",
    "reynolds": "the Reynolds projection and nearest-homomorphism search over dense rows (numeric.project)",
    "parameter-free": "has no parameters (pooling): its output action follows from its input's; certify keeps "
                      "such a layer as it is and averages the layers around it on their own parameters "
                      "(docs/certify.md, 'Pooling'); the dense matching search refuses it by name",
}
"""Every capability a kind may declare, with what it means."""


class KindUnsupported(InputError):
    """A layer kind does not have a capability the work needs (exit 2); the message names both."""

    def __init__(self, kind: str, capability: str, what: str | None = None):
        self.kind, self.capability = kind, capability
        super().__init__(f"{kind} layers do not support {what or capability}")


_KINDS: dict[str, type] = {}
_READERS: dict[str, Callable] = {}
_ADVERTISED: list[str] = []
_FORMS: dict[str, Any] = {}
_FORMS_AFTER_IMAGE: dict[str, Any] = {}


def _load() -> None:
    if _KINDS:
        return
    kinds, readers, advertised = {}, {}, []
    for name in KIND_MODULES:
        mod = importlib.import_module(name)
        for cls in mod.LAYER_KINDS:
            unknown = set(cls.capabilities) - set(CAPABILITIES)
            if unknown:
                raise RuntimeError(f"internal error: {cls.__name__} declares unknown capabilities {sorted(unknown)}")
            kinds[cls.kind] = cls
        for t, reader in mod.JSON_READERS.items():
            readers[t] = reader
        advertised += list(getattr(mod, "JSON_ADVERTISED", ()))
        _FORMS.update(getattr(mod, "DIGEST_FORMS", {}))
        _FORMS_AFTER_IMAGE.update(getattr(mod, "DIGEST_AFTER_IMAGE", {}))
    _READERS.update(readers)
    _ADVERTISED[:] = advertised
    _KINDS.update(kinds)


def kind_names() -> tuple[str, ...]:
    """The registered kinds, as ``layer.kind`` spells them."""
    _load()
    return tuple(_KINDS)


def kind_class(kind: str) -> type:
    """The exact class that declares ``kind``."""
    _load()
    try:
        return _KINDS[kind]
    except KeyError:
        raise InputError(f"unknown layer kind {kind!r}; known: {', '.join(_KINDS)}") from None


def float_unit(kind: str):
    """The module of a kind's float side, named by its exact class's ``float_module`` (its float twin
    classes in ``FLOAT_LAYERS``, their torch modules; :func:`symeq.numeric.models.float_class` asks it).
    Imported here, by the name the kind declares, and only when asked: the float side sits above the
    exact layers (docs/architecture.md)."""
    return importlib.import_module(kind_class(kind).float_module)


def reader_units(kind: str) -> tuple:
    """The modules that read whole files or modules as this kind: its float unit (:func:`float_unit`) and
    the modules its exact class names in ``reader_modules`` (attention's ONNX subgraph and torch modules),
    imported by the names the kind declares, when asked."""
    cls = kind_class(kind)
    return (float_unit(kind),) + tuple(importlib.import_module(m) for m in getattr(cls, "reader_modules", ()))


def capabilities(layer) -> frozenset:
    """The capabilities of one layer (exact or float: answered by its kind's declaration)."""
    cls = kind_class(layer.kind)
    narrow = getattr(cls, "layer_capabilities", None)
    return frozenset(narrow(layer)) if narrow is not None else cls.capabilities


def supports(layer, capability: str) -> bool:
    """Whether ``layer``'s kind has ``capability`` (one of :data:`CAPABILITIES`)."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}")
    return capability in capabilities(layer)


def all_support(layers: Iterable, capability: str) -> bool:
    return all(supports(l, capability) for l in layers)


def any_supports(layers: Iterable, capability: str) -> bool:
    return any(supports(l, capability) for l in layers)


def first_unsupported(layers: Iterable, capability: str):
    """The first layer without ``capability`` (None: all have it)."""
    return next((l for l in layers if not supports(l, capability)), None)


def require(layers: Iterable, capability: str, what: str | None = None) -> None:
    """Refuse by name: raise :class:`KindUnsupported` for the first layer without ``capability``."""
    bad = first_unsupported(layers, capability)
    if bad is not None:
        raise KindUnsupported(bad.kind, capability, what)


# -- the model file --------------------------------------------------------------------------------

@dataclass
class ReadContext:
    """The state of a model file's reader between layers: the current size ``n``, the token count
    after an attention layer, the (C, H, W) shape after a convolution and a pending pooling."""

    input_dim: int
    n: int
    index: int = 0
    tokens: int | None = None
    shape: tuple | None = None
    pool: Any = None
    #: readers that replace the registry's for the layers after this one (a dense layer after a
    #: convolution is read by the conv kind, as a whole-image convolution)
    takes_over: dict = field(default_factory=dict)


def json_reader(type_name: str):
    """The reader of one model-file ``"type"`` (None: unknown)."""
    _load()
    return _READERS.get(type_name)


def read_layers(layers, input_dim: int, where: str = "layers", shape: tuple | None = None) -> list:
    """The layers of a model file's ``"layers"`` list, each read by its kind's reader; ``shape`` is the
    (C, H, W) of an image input (a graph segment reading an image node, docs/graphs.md)."""
    if not isinstance(layers, list) or not layers:
        raise InputError(f"{where} must be a non-empty list of layers")
    _load()
    out = []
    ctx = ReadContext(input_dim, input_dim, shape=tuple(shape) if shape is not None else None)
    for i, spec in enumerate(layers):
        at = f"{where}[{i}]"
        if not isinstance(spec, dict):
            raise InputError(f"{at} must be an object")
        if "type" not in spec:  # required, as the checker requires it: no layer kind is guessed
            raise InputError(f"{at}: missing key \"type\" (\"dense\", \"conv2d\", \"flatten\", \"attention\", ...)")
        kind = spec["type"]
        reader = (ctx.takes_over.get(kind) or _READERS.get(kind)) if isinstance(kind, str) else None
        if reader is None:
            known = ", ".join(f'"{t}"' for t in _ADVERTISED)
            raise InputError(f"{at}: unknown layer type {kind!r}; known: {known}")
        ctx.index = i
        layer = reader(spec, ctx, at)
        if layer is not None:
            out.append(layer)
    if ctx.pool is not None:
        raise InputError(f"{where}: a pooling layer must be followed by a conv2d or dense layer (it is folded into it)")
    return out


def digest_form(type_name, after_image: bool = False):
    """The digest form (:class:`symeq.canonical.Form`) of one model-file ``"type"``, as its kind declares it
    (``DIGEST_FORMS``; ``DIGEST_AFTER_IMAGE`` when an image comes before it); a type no kind declares, or
    not a string: the plain form (its numbers and activation only)."""
    from ..canonical import Form, plain_form

    _load()
    if not isinstance(type_name, str):
        return Form(plain_form)
    return (after_image and _FORMS_AFTER_IMAGE.get(type_name)) or _FORMS.get(type_name) or Form(plain_form)


def layer_to_json(layer, declared_bias: bool) -> dict:
    """One layer's model-file object, written by its kind."""
    return layer.to_json(declared_bias)


# -- reports ---------------------------------------------------------------------------------------

def describe_action(layer, M) -> str | None:
    """A kind's own text for an action M on ``layer``'s output (None: the generic cycle notation)."""
    describe = getattr(kind_class(layer.kind), "describe_output_action", None)
    return None if describe is None else describe(layer, M)
