"""A model file as the checker reads it (``symeq-model/1``): the layers, each read by its kind (the table
:data:`KINDS`; dense layers here) with its exact parameters, the group, and the theorem's chain of layers
(attention split into its heads and output projection).  :class:`Layers` keeps the JSON the layers were
read from, which the digest hashes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ._numbers import CheckError, Matrix, _count, _dict, _matrix, _short
from .activations import _apply, _bias_and_activation
from .algebra import _identity, _kron, _matmul, _matvec, _transpose
from .attention import ATTENTION, _Heads
from .avgpool import AVGPOOL2D, GLOBAL_AVGPOOL
from .conv import CONV2D, FLATTEN, _out_dim
from .layer import Kind, Layer, Reading
from .pooling import GROUP_POOL, MAXPOOL2D
from .schema import DENSE_KEYS, GENERATOR_KEYS, GROUP_KEYS, MODEL_FORMAT, MODEL_KEYS, _path, check_keys


@dataclass(frozen=True)
class _Layer(Layer):
    """x -> act(W x + b); token-wise after attention: W is I_T (x) W, the bias repeated per token."""

    weight: Matrix
    bias: tuple[Fraction, ...]
    act: object  # None (affine), "relu", a tuple of polynomial coefficients c_0 .. c_d, or a _Real
    label: str = field(compare=False)

    LEGACY_FIELDS = ("weight", "bias", "act")
    dense_matrix = True

    def forward(self, x) -> tuple:
        return tuple(_apply(self.act, y + b) for y, b in zip(_matvec(self.weight, x), self.bias))


class _DenseKind(Kind):
    """``"dense"``: a hidden layer needs an activation, the last is affine (but a graph segment's)."""

    folds_pool = True

    def read(self, spec: dict, r):
        if r.shape is not None:  # after a conv2d: the conv with a whole-image kernel
            return CONV2D.read(spec, r, dense=True)
        check_keys(spec, r.at, *DENSE_KEYS)
        weight = _matrix(spec.get("weight"), f"{r.name} weight", cols=r.width)
        r.width = len(weight)
        bias, act, label = _bias_and_activation(spec, r.width, r.name, r.last)
        if r.tokens is not None:  # token-wise after attention: I_T (x) W, bias repeated per token
            weight, bias, label = _kron(_identity(r.tokens), weight), bias * r.tokens, label + " (token-wise)"
        return _Layer(weight, bias, act, label)

    def canonical(self, spec: dict, shape, normal) -> tuple:
        if shape is None:
            return normal(spec), shape
        C, H, W = shape  # after a conv2d: the conv with a whole-image kernel
        spec = {"type": "conv2d", "input_shape": shape, "bias": spec.get("bias"),
                "kernel": [[[row[(c * H + i) * W:(c * H + i + 1) * W] for i in range(H)] for c in range(C)]
                           for row in spec["weight"]],
                "stride": 1, "padding": 0, "padding_mode": "zeros", "activation": spec.get("activation")}
        return CONV2D.canonical(spec, shape, normal)


DENSE = _DenseKind()

#: the checker's one table of layer kinds: a model file's "type" -> its kind (symeq_check.layer), each declared
#: in its subject module (dense above, attention, conv2d and flatten, maxpool2d and group_pool in theirs)
KINDS = {"dense": DENSE, "conv2d": CONV2D, "flatten": FLATTEN, "attention": ATTENTION, "maxpool2d": MAXPOOL2D,
         "group_pool": GROUP_POOL, "avgpool2d": AVGPOOL2D, "global_avgpool": GLOBAL_AVGPOOL}


def kind_of(spec: dict):
    """The kind of a layer object's ``"type"``, or None (a type this checker does not read)."""
    name = spec.get("type")
    return KINDS.get(name) if isinstance(name, str) else None


class Layers(list):
    """The layers of a model as this checker reads them, with the JSON they were read from
    (``declared``, ``input_dim``: what the digest hashes, :mod:`symeq_check.digest`)."""

    def __init__(self, layers, declared, input_dim: int):
        super().__init__(layers)
        self.declared, self.input_dim = declared, input_dim


def declared_biases(layers: Layers) -> tuple[bool, ...]:
    """Per layer (as :func:`_layers` reads them), whether it has bias parameters in the declared parameter
    space (issue 25): a bias vector in the file, zeros included, declares them, ``"bias": null`` none;
    attention layers have none.  As ``symeq.layers.base.declared_biases`` reads a model file.

    >>> L = _layers([{"type": "dense", "weight": [[1]], "bias": ["0"], "activation": {"type": "relu"}},
    ...              {"type": "dense", "weight": [[1]], "bias": None, "activation": None}], 1, "m")
    >>> declared_biases(L)
    (True, False)
    """
    specs = [s for s in layers.declared if isinstance(s, dict) and kind_of(s).makes_layer]
    if len(specs) != len(layers):  # pragma: no cover - one spec per layer read
        raise CheckError("model: the layers and their declarations differ in number")
    return tuple(not l.token_mixing and s.get("bias") is not None for s, l in zip(specs, layers))


def bias_field(layers, flags: tuple) -> bool | list:
    """The certificates' ``bias``: a bool when every layer but attention agrees (False when there are none),
    else one bool per layer (as ``symeq.fibre.jacobian.bias_field`` writes it)."""
    rest = {b for b, l in zip(flags, layers) if not l.token_mixing}
    return (rest.pop() if rest else False) if len(rest) <= 1 else list(flags)


def uniform_bias(layers: Layers) -> bool | None:
    """One bias declaration for every layer of ``layers`` (:func:`declared_biases`), or None when some layers
    declare biases and others do not (the certificates taking one flag do not cover that model)."""
    flags = set(declared_biases(layers))
    return flags.pop() if len(flags) == 1 else None


def _layers(value, input_dim: int, where: str, free_last: bool = False) -> Layers:
    """The layers of a chain (``free_last``: a graph segment's, whose last layer may have an activation)."""
    if not isinstance(value, list) or not value:
        raise CheckError(f"{where}: 'layers' must be a non-empty list")
    layers, declared, r = [], [], Reading(input_dim)
    makers = [i for i, s in enumerate(value, 1) if isinstance(s, dict) and getattr(kind_of(s), "makes_layer", 1)]
    end = makers[-1] if makers else len(value)  # the last layer: a trailing flatten is none
    for i, spec in enumerate(value, 1):
        name = f"{where} layer {i}"
        kind = kind_of(_dict(spec, name))
        if kind is None or (kind.first_only and i > 1):
            raise CheckError(f"{name}: unsupported layer type {_short(spec.get('type'))}")
        if r.pending is not None and kind.makes_layer and not kind.folds_pool:
            raise CheckError(f"{name}: a {spec.get('type')} layer cannot follow an average pooling (it folds into a "
                             "conv2d or dense layer only)")
        r.name, r.at, r.spec = name, f"{_path(where)}.layers[{i - 1}]", spec
        r.last = None if free_last and i == end else i == end
        layer = kind.read(spec, r)
        if layer is not None:
            layers.append(layer)
        if r.spec is not None:  # as read: the file's spec, an average pooling's next layer folded, or none
            declared.append(r.spec)
    if r.pending is not None:
        raise CheckError(f"{where}: a pooling layer must be followed by a conv2d or dense layer (it is folded into it)")
    return Layers(layers, declared, input_dim)


def _chain(layers: list) -> list:
    """The layers of the theorem: attention splits into its heads and its output projection,
    which merges into the next token-wise layer (or is the last, affine layer)."""
    first = layers[0]
    if not first.splits_in_chain:
        return layers
    T = first.tokens
    heads = _Heads(T, tuple(_matmul(q, _transpose(k)) for q, k, _, _ in first.heads),
                   tuple(v for _, _, v, _ in first.heads), scoring=first.scoring, score_biases=first.score_biases)
    o_t = _transpose(tuple(row for _, _, _, o in first.heads for row in o))  # d_out x H d_v
    proj = _kron(_identity(T), o_t)
    c = tuple(first.bias or (Fraction(0),) * first.d_out) * T  # softmax's output bias, on every token
    if len(layers) == 1:
        return [heads, _Layer(proj, c, None, "output projection")]
    nxt = layers[1]
    bias = tuple(b + sum(w * v for w, v in zip(row, c)) for row, b in zip(nxt.weight, nxt.bias))
    return [heads, _Layer(_matmul(nxt.weight, proj), bias, nxt.act, nxt.label + " with O merged")] + layers[2:]


def _group(value, n_in: int, n_out: int, where: str) -> list[tuple[Matrix, Matrix]]:
    check_keys(_dict(value, where), _path(where), *GROUP_KEYS)
    gens = value.get("generators")
    if not isinstance(gens, list) or not gens:  # as symeq reads it: a group has a generator
        raise CheckError(f"{where}: 'generators' must be a non-empty list")
    out = []
    for k, g in enumerate(gens):
        check_keys(_dict(g, f"{where} generator {k + 1}"), f"{_path(where)}.generators[{k}]", *GENERATOR_KEYS)
        out.append((_matrix(g.get("input"), f"{where} generator {k + 1} input", n_in, n_in),
                    _matrix(g.get("output"), f"{where} generator {k + 1} output", n_out, n_out)))
    return out


def _model_header(model) -> int:
    """The keys and format of a model file, chain or graph (docs/graphs.md: "layers" or "graph", never both)."""
    check_keys(_dict(model, "model"), "model", *MODEL_KEYS)
    if model.get("format") != MODEL_FORMAT:
        raise CheckError(f"model: format must be {MODEL_FORMAT!r}, got {_short(model.get('format'))}")
    if ("layers" in model) == ("graph" in model):
        raise CheckError('model: a model file has either "layers" (a chain) or "graph" (docs/graphs.md), '
                         + ("not both" if "layers" in model else "and has neither"))
    if "output" in model and "graph" not in model:
        raise CheckError('model: "output" names a node of a "graph"; a chain ("layers") has none')
    return _count(model.get("input_dim"), "model input_dim", 1)


def _model(model) -> tuple[int, list[_Layer], list | None]:
    n_in = _model_header(model)
    if "graph" in model:  # the graph checker reads it (symeq_check.graph, dispatched on the model)
        raise CheckError("model: a graph model (\"graph\") cannot be checked against a chain certificate")
    layers = _layers(model.get("layers"), n_in, "model")
    group = model.get("group")
    if group is not None:
        group = _group(group, n_in, _out_dim(layers[-1]), "model group")
    return n_in, layers, group
