"""Numeric models: the float twin of :mod:`symeq.models` (numpy float64 by default).

A :class:`NumericModel` is a list of float layers, :func:`NumericDenseLayer` ``x -> sigma(W x + b)``,
:func:`~symeq.layers.conv.floating.NumericConvLayer` and attention as the first layer (the last one affine),
with an optional :class:`NumericGroup` acting on input and output, exactly as an exact
:class:`~symeq.models.Model`, but with ``numpy`` arrays.  Batches are arrays with *one row per
point* (shape ``(N, n_in)``, the numpy/torch habit), where the exact side uses one column per point.

Every activation carries the latent group K it implies (docs/theory.md, "Latent symmetries
K_i", and :mod:`symeq.activations`), so the numeric layerwise analysis searches the same K_i as
the exact one:

=================  =============  ==========================================================
activation         symmetry       K on a hidden layer
=================  =============  ==========================================================
polynomial (exact) from the exact ``Activation`` (generic / odd / even / monomial / ...)
``tanh``           odd            signed permutations
``gelu``           generic        permutations (gelu(-t) = gelu(t) - t is not q gelu(t) + o)
``sigmoid``        odd+constant   signed permutations acting affinely (sigmoid(-t) = 1 - sigmoid(t))
``relu``           relu           positive monomial matrices
=================  =============  ==========================================================

The admissible scalings themselves (which alpha, and the factor q and offset o with
sigma(alpha t + s(1 - alpha)) = q sigma(t) + o) are a :class:`Scalings` object.  For an exact
activation it is *read off the exact definition* (:meth:`Scalings.of_exact` asks
:meth:`symeq.activations.Activation.affine_admissible`), so the two paths cannot disagree.

Models come from an exact model (:func:`from_exact`; lightning attention becomes
:func:`~symeq.layers.attention.floating.NumericAttention`), the model file format with floats allowed
(:func:`model_from_json`: dense, conv2d and attention layers), an ``.npz`` archive (:func:`load_npz`,
layout in its docstring) or a torch ``nn.Sequential`` (:func:`from_torch`).  The numeric side
never claims "verified": results are residuals compared with a tolerance.

Examples
--------
>>> from symeq.examples import builtin_example
>>> m = from_exact(builtin_example())
>>> m.widths == builtin_example().widths
True
>>> import numpy as np
>>> x = np.array([[0.5, -1.0, 0.25, 2.0, 0.0, 1.0]])[:, :m.input_dim]
>>> m(x).shape == (1, m.output_dim)
True
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..activations.floating import NumericActivation, Scalings, activation_from_exact, numeric_activation
from ..activations.registry import torch_activation_classes
from ..schema import check_keys
from ..errors import EngineMissing, InputError, ShapeError
from ..layers.dense.floating import NumericDenseLayer
from ..layers.registry import ReadContext, first_unsupported, float_unit, kind_class, kind_names, reader_units, supports
from ..models import LayeredShape
from ..layers.conv.floating import NumericConvLayer
from .floats import float_matrix as _float_matrix
from .monomial import to_float_matrix  # re-exported (it lives below models)

__all__ = [
    "Scalings",
    "NumericActivation",
    "NumericDenseLayer",
    "NumericModel",
    "NumericGroup",
    "numeric_activation",
    "from_exact",
    "group_from_exact",
    "model_from_json",
    "load_numeric_model",
    "load_npz",
    "save_npz",
    "from_torch",
    "to_float_matrix",
]



# -- groups --------------------------------------------------------------------------------

@dataclass
class NumericGroup:
    """A finite group given by float generator pairs (rho_in(g), rho_out(g))."""

    generators: list
    names: list = field(default_factory=list)
    label: str = "group"
    max_order: int = 10000

    def __post_init__(self):
        if not self.generators:
            raise InputError("a group needs at least one generator")
        self.generators = [(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)) for a, b in self.generators]
        if not self.names:
            self.names = [f"g{i}" for i in range(len(self.generators))]
        din, dout = self.generators[0][0].shape[0], self.generators[0][1].shape[0]
        for name, (a, b) in zip(self.names, self.generators):
            if a.shape != (din, din) or b.shape != (dout, dout):
                raise ShapeError(f"generator {name}: matrices of shape {a.shape} and {b.shape}, "
                                 f"expected {din}x{din} and {dout}x{dout}")
            if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
                raise InputError(f"generator {name} has NaN or infinite entries")

    @property
    def input_dim(self) -> int:
        return self.generators[0][0].shape[0]

    @property
    def output_dim(self) -> int:
        return self.generators[0][1].shape[0]

    def words(self, tol: float = 1e-9) -> list[tuple[int, ...]]:
        """Words in the generators reaching every element once (BFS on the input matrices)."""
        n = self.input_dim
        seen = {self._key(np.eye(n), tol): ()}
        frontier = [((), np.eye(n))]
        while frontier:
            nxt = []
            for w, m in frontier:
                for gi, (a, _) in enumerate(self.generators):
                    m2 = m @ a
                    k = self._key(m2, tol)
                    if k not in seen:
                        seen[k] = w + (gi,)
                        nxt.append((w + (gi,), m2))
                        if len(seen) > self.max_order:
                            raise InputError(f"the group has more than {self.max_order} elements")
            frontier = nxt
        return list(seen.values())

    @staticmethod
    def _key(m: np.ndarray, tol: float) -> bytes:
        return np.round(m / max(tol, 1e-12) * 1e-3).astype(np.int64).tobytes()

    def __repr__(self) -> str:
        return f"NumericGroup({self.label!r}, {len(self.generators)} generators, input {self.input_dim})"


def group_from_exact(group) -> NumericGroup:
    """The float twin of an exact :class:`~symeq.groups.FiniteGroup`."""
    return NumericGroup([(to_float_matrix(a), to_float_matrix(b)) for a, b in group.generators],
                        list(group.names), group.label)


def _as_group(group) -> NumericGroup | None:
    if group is None or isinstance(group, NumericGroup):
        return group
    if hasattr(group, "generators") and hasattr(group, "elements"):
        return group_from_exact(group)
    raise InputError(f"expected a group, got {type(group).__name__}")


# -- layers and models ---------------------------------------------------------------------

@dataclass(eq=False)
class NumericModel(LayeredShape):
    """A network f = f_L o ... o f_1 of float dense layers (same rules as the exact Model)."""

    input_dim: int
    layers: list
    group: NumericGroup | None = None
    name: str = "model"
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.check_layers()
        self.group = _as_group(self.group)
        if self.group is not None:
            self.check_group(self.group)

    @property
    def token_mixing(self) -> bool:
        """Whether the first layer mixes tokens (the registry's capability "token-mixing")."""
        return supports(self.layers[0], "token-mixing")


    @property
    def n_params(self) -> int:
        return sum(l.n_params if hasattr(l, "n_params") else l.in_dim * l.out_dim + l.out_dim for l in self.layers)

    def forward(self, X: np.ndarray, upto: int | None = None) -> np.ndarray:
        """Evaluate on a batch (rows); ``upto=i`` returns the features after layer i."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.input_dim:
            raise ShapeError(f"the model takes batches of shape (N, {self.input_dim}), got {X.shape}")
        for l in self.layers[: upto if upto is not None else len(self.layers)]:
            X = l.forward(X)
        return X

    def __call__(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        return self.forward(X[None, :])[0] if X.ndim == 1 else self.forward(X)

    # -- parameters as one vector (W_1, b_1, W_2, b_2, ... row-major) ----------------------
    def parameters(self) -> np.ndarray:
        if self.token_mixing:
            raise InputError("parameter vectors are implemented for dense models only")
        return np.concatenate([np.concatenate([l.weight.ravel(), l.bias]) for l in self.layers])

    def with_parameters(self, theta: np.ndarray) -> "NumericModel":
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (self.n_params,):
            raise ShapeError(f"expected {self.n_params} parameters, got shape {theta.shape}")
        layers, k = [], 0
        for l in self.layers:
            nw = l.in_dim * l.out_dim
            W = theta[k:k + nw].reshape(l.out_dim, l.in_dim)
            b = theta[k + nw:k + nw + l.out_dim]
            k += nw + l.out_dim
            layers.append(NumericDenseLayer(W.copy(), b.copy(), l.activation))
        return NumericModel(self.input_dim, layers, self.group, self.name, dict(self.meta))

    def copy(self, group=...) -> "NumericModel":
        if self.token_mixing:
            return NumericModel(self.input_dim, [l.copy() if hasattr(l, "copy") else l for l in self.layers],
                                self.group if group is ... else group, self.name, dict(self.meta))
        return NumericModel(self.input_dim, [l.copy() for l in self.layers], self.group if group is ... else group,
                            self.name, dict(self.meta))

    def with_group(self, group) -> "NumericModel":
        return self.copy(group=_as_group(group))

    def perturbed(self, eps: float, rng=None) -> "NumericModel":
        """A copy with i.i.d. N(0, eps^2) noise added to every weight and bias."""
        rng = np.random.default_rng(rng)
        return self.with_parameters(self.parameters() + eps * rng.standard_normal(self.n_params))

    def equivariance_error(self, g: int = 0, n_points: int = 256, rng=None) -> float:
        """Median of |f(A x) - B f(x)| / |f(x)| on Gaussian inputs (end-to-end, generator g)."""
        if self.group is None:
            raise InputError("the model has no group")
        rng = np.random.default_rng(rng)
        A, B = self.group.generators[g]
        X = rng.standard_normal((n_points, self.input_dim))
        F = self.forward(X)
        num = np.linalg.norm(self.forward(X @ A.T) - F @ B.T, axis=1)
        return float(np.median(num / np.maximum(np.linalg.norm(F, axis=1), 1e-300)))

    def to_torch(self, dtype=None, device=None):
        """An ``nn.Sequential`` with the same function (torch extra)."""
        torch = _torch()
        if self.token_mixing:
            raise InputError("to_torch converts dense models only; this one starts with attention")
        dtype = dtype or torch.float64
        mods = [m for l in self.layers for m in l.torch_modules(torch, dtype)]  # each kind's own modules
        seq = torch.nn.Sequential(*mods).to(dtype=dtype)
        return seq.to(device) if device is not None else seq

    def __repr__(self) -> str:
        acts = ", ".join(f"{l.scoring} attention" if supports(l, "splits-in-chain") else
                         l.kind if supports(l, "head-blocks") else l.activation.spec.get("type", l.activation.name)
                         for l in self.layers[:-1])
        return f"NumericModel({self.name!r}, widths {self.widths}, activations [{acts}])"


# -- conversion and loading ----------------------------------------------------------------

def _act(l):
    return None if l.activation is None else activation_from_exact(l.activation)


@functools.lru_cache(maxsize=None)
def float_class(kind: str) -> type:
    """The float twin class of a layer kind: the class of the kind's float unit (the exact class's
    ``float_module``, which lists its float classes in ``FLOAT_LAYERS``) that declares the same ``kind``."""
    module = float_unit(kind)
    found = [c for c in module.FLOAT_LAYERS if c.kind == kind]
    if len(found) != 1:
        raise RuntimeError(f"internal error: {module.__name__} declares {len(found)} float classes of kind {kind!r}")
    return found[0]


def float_twin(layer):
    """The float twin of one exact layer, built by its kind's float class (``float_twin``)."""
    return float_class(layer.kind).float_twin(layer, _act(layer))


def _float_classes_by(attr: str) -> dict:
    """name -> the float class that declares it in ``attr`` (a tuple of names), over every kind."""
    out = {}
    for kind in kind_names():
        cls = float_class(kind)
        for name in getattr(cls, attr, ()):
            out[name] = cls
    return out


@functools.lru_cache(maxsize=1)
def torch_layer_classes() -> dict:
    """torch class name -> the float class that reads it (``torch_classes`` and ``from_torch`` of the
    kinds' float classes: the pooling kinds' MaxPool2d and group poolings)."""
    return _float_classes_by("torch_classes")


def from_exact(model, group=...) -> NumericModel:
    """The float twin of an exact :class:`~symeq.models.Model` (same widths, same group).

    Lightning attention layers become :func:`~symeq.layers.attention.floating.NumericAttention` (and the
    heads layer of a chain :func:`~symeq.layers.attention.floating.NumericHeads`); token-wise dense layers
    keep their token count.

    >>> from symeq.attention import random_equivariant_attention
    >>> from_exact(random_equivariant_attention(rng=0)).widths
    [8, 8]
    """
    layers = [float_twin(l) for l in model.layers]
    g = model.group if group is ... else group
    return NumericModel(model.input_dim, layers, None if g is None else _as_group(g), model.name, {})


def _floats_as_exact(value, where: str):
    """``value`` with every JSON float replaced by the string of its exact binary value ("p/q"), for the
    exact reader; a NaN or an infinity is refused (exit 2)."""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"{where}: {value!r} is not a finite number")
        q = Fraction(value)
        return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"
    if isinstance(value, dict):
        return {k: _floats_as_exact(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_floats_as_exact(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def kind_model_readers(name: str) -> tuple:
    """The kinds' readers of a whole model (``name``: ``"read_onnx_model"``, ``"read_torch_model"``), each
    ``(source, ...) -> (layer, meta)`` or None when the source is not that kind's; declared by a kind's float
    unit or reader modules (:func:`symeq.layers.registry.reader_units`; today attention's), in registry order."""
    readers = []
    for kind in kind_names():
        for unit in reader_units(kind):
            read = getattr(unit, name, None)
            if read is not None and read not in readers:
                readers.append(read)
    return tuple(readers)


@functools.lru_cache(maxsize=1)
def float_json_readers() -> dict:
    """model-file ``"type"`` -> the float class that reads it with floats allowed (``json_types`` and
    ``from_float_json`` of the kinds' float classes); a type without one is read by the exact reader."""
    return _float_classes_by("json_types")


def model_from_json(data, where: str = "model") -> NumericModel:
    """A numeric model from the ``symeq-model/1`` structure; floats and "p/q" strings allowed.

    Each layer is read by its kind's float class (:func:`float_json_readers`); a file with a layer type
    no float class reads (a convolution, a pooling, a flatten) is read by the exact reader (kernels,
    pooling folded, the same strict keys), every float in it handed over as its exact binary value, so
    nothing rounds, and then made float."""
    from ..groups.core import GENERATOR_KEYS, GROUP_KEYS
    from ..io import model_header

    n = model_header(data, where)
    specs = data.get("layers")
    if not isinstance(specs, list) or not specs:
        raise InputError(f"{where}.layers must be a non-empty list of layers")
    readers = float_json_readers()
    if any(isinstance(sp, dict) and "type" in sp and (not isinstance(sp["type"], str) or sp["type"] not in readers)
           for sp in specs):
        from ..io import model_from_json as exact_model_from_json

        return from_exact(exact_model_from_json(_floats_as_exact(data, where), where))
    layers, ctx = [], ReadContext(n, n)
    for i, spec in enumerate(specs):
        at = f"{where}.layers[{i}]"
        if not isinstance(spec, dict):
            raise InputError(f"{at} must be an object with a \"type\"")
        if "type" not in spec:  # required, as the exact reader and the checker require it (one schema)
            raise InputError(f"{at}: missing key \"type\" (\"dense\", \"conv2d\", \"flatten\", \"attention\", ...)")
        ctx.index, cls = i, readers[spec["type"]]
        if i and "token-mixing" in kind_class(cls.kind).capabilities:
            raise InputError(f"{at}: an {spec['type']} layer must be the first layer")
        layers.append(cls.from_float_json(spec, ctx, at))
    group = None
    if data.get("group") is not None:
        g = data["group"]
        if isinstance(g, dict):
            check_keys(g, f"{where}.group", *GROUP_KEYS, error=InputError)
        if not isinstance(g, dict) or not isinstance(g.get("generators"), list) or not g["generators"]:
            raise InputError(f"{where}.group must be an object with a non-empty list \"generators\"")
        gens, names = [], []
        for i, gen in enumerate(g["generators"]):
            if not isinstance(gen, dict):
                raise InputError(f"{where}.group.generators[{i}] must have \"input\" and \"output\" matrices")
            check_keys(gen, f"{where}.group.generators[{i}]", *GENERATOR_KEYS, error=InputError)
            gens.append((_float_matrix(gen["input"], f"{where}.group.generators[{i}].input"),
                         _float_matrix(gen["output"], f"{where}.group.generators[{i}].output")))
            names.append(str(gen.get("name", f"g{i}")))
        group = NumericGroup(gens, names, str(g.get("label", "group")))
    try:
        return NumericModel(n, layers, group, str(data.get("name", "model")))
    except InputError as e:
        raise InputError(f"{where}: {e}") from None


def open_npz(p: Path, what: str):
    """``np.load`` of an ``.npz`` archive (no pickles), with an InputError for every way it fails."""
    import zipfile

    try:
        z = np.load(p, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise InputError(f"{p}: not a readable .npz archive ({e.__class__.__name__})") from None
    if not hasattr(z, "files"):
        raise InputError(f"{p}: a single array, not {what}")
    return z


def load_npz(path) -> NumericModel:
    """Load a model from an ``.npz`` archive.

    Layout: ``weight_0, bias_0, weight_1, ...`` (float arrays, layer i's weight of shape
    out x in; every ``bias_i`` is required, zeros for a layer without bias), ``activations`` (string array, one per layer, "none" for the last, e.g.
    ``["tanh", "gelu", "none"]`` or JSON specs such as ``'{"type": "tanh_series", "order": 3}'``),
    and optionally ``group_input_k, group_output_k`` for the generators, with ``group_label`` (a
    string) and ``group_names`` (one string per generator) naming them.
    """
    import json

    p = Path(path)
    z = open_npz(p, "an .npz archive of weight_i / bias_i / activations")
    with z:
        files = set(z.files)
        if ("weight_0" not in files and "conv_0" not in files) or "activations" not in files:
            raise InputError(f"{p}: an .npz model needs weight_0, bias_0, ... and activations; found {sorted(files)}")
        acts = [str(a) for a in z["activations"].reshape(-1)]
        _check_npz_names(p, files, len(acts))
        layers = []
        for i, a in enumerate(acts):
            if f"conv_{i}" in files:  # a conv2d layer: its kernel, per-channel bias and geometry
                spec = None if a.lower() in ("none", "null", "") else (json.loads(a) if a.lstrip().startswith("{") else a)
                try:
                    layers.append(_npz_conv(z, i, numeric_activation(spec, f"{p}: activations[{i}]"), files))
                except InputError as e:
                    raise InputError(f"{p}: layer {i}: {e}") from None
                continue
            if f"weight_{i}" not in files or f"bias_{i}" not in files:
                missing = f"weight_{i}" if f"weight_{i}" not in files else f"bias_{i}"
                raise InputError(f"{p}: activations lists {len(acts)} layers but {missing} is missing"
                                 + (" (bias_i is required; zeros for a layer without bias)" if "bias" in missing else ""))
            spec = None if a.lower() in ("none", "null", "") else (json.loads(a) if a.lstrip().startswith("{") else a)
            try:
                layers.append(NumericDenseLayer(z[f"weight_{i}"], z[f"bias_{i}"],
                                                numeric_activation(spec, f"{p}: activations[{i}]")))
            except InputError as e:
                raise InputError(f"{p}: layer {i}: {e}") from None
        gens = []
        k = 0
        while f"group_input_{k}" in files:
            if f"group_output_{k}" not in files:
                raise InputError(f"{p}: group_input_{k} has no group_output_{k}")
            gens.append((z[f"group_input_{k}"], z[f"group_output_{k}"]))
            k += 1
        group = None
        if gens:  # the label and generator names are optional (older files: "<file> group", g0, g1, ...)
            label = str(z["group_label"].reshape(-1)[0]) if "group_label" in files else f"{p.stem} group"
            names = [str(n) for n in z["group_names"].reshape(-1)] if "group_names" in files else []
            if names and len(names) != len(gens):
                raise InputError(f"{p}: group_names has {len(names)} names for {len(gens)} generators")
            group = NumericGroup(gens, names, label)
        elif "group_label" in files or "group_names" in files:
            raise InputError(f"{p}: group_label/group_names without group_input_0 and group_output_0")
        try:
            floats = [z[f].dtype for f in files if f.split("_")[0] in ("weight", "bias", "conv") and z[f].dtype.kind == "f"]
            meta = {"weights_dtype": str(max(floats, key=lambda d: np.finfo(d).eps))} if floats else {}
            return NumericModel(layers[0].in_dim, layers, group, p.stem, meta)  # the dtype: numeric-check's tolerance
        except InputError as e:
            raise InputError(f"{p}: {e}") from None


def _npz_conv(z, i: int, act, files) -> NumericConvLayer:
    """Layer i of an .npz archive stored as a convolution: ``conv_i`` (C_out x C_in x kh x kw), ``bias_i``
    (per channel) and ``conv_meta_i`` = [C_in, H, W, stride, padding, circular (0/1)]."""
    from ..layers.conv import ConvShape

    if f"conv_meta_{i}" not in files or f"bias_{i}" not in files:
        raise InputError(f"conv_{i} needs conv_meta_{i} ([C_in, H, W, stride, padding, circular]) and bias_{i}")
    k = np.asarray(z[f"conv_{i}"], dtype=np.float64)
    meta = [int(v) for v in np.asarray(z[f"conv_meta_{i}"]).reshape(-1)]
    if k.ndim != 4 or len(meta) != 6:
        raise InputError(f"conv_{i} must be C_out x C_in x kh x kw and conv_meta_{i} hold 6 integers")
    C, H, W, stride, pad, circ = meta
    shape = ConvShape(C, k.shape[0], H, W, k.shape[2], k.shape[3], stride, pad, "circular" if circ else "zeros")
    return NumericConvLayer(shape, k, z[f"bias_{i}"], act)


def _check_npz_names(p: Path, files, n_layers: int) -> None:
    """Refuse an array name the .npz model layout does not have (a misspelt "biases_0" must not
    become a zero bias), naming it with the closest allowed name."""
    from ..schema import close_names

    n_gens = sum(1 for f in files if f.startswith("group_input_"))
    allowed = (["activations"] + [f"{w}_{i}" for i in range(n_layers) for w in ("weight", "bias", "conv", "conv_meta")]
               + [f"group_{s}_{k}" for k in range(n_gens) for s in ("input", "output")] + ["group_label", "group_names"])
    for name in sorted(files):
        if name not in allowed:
            close = close_names(name, allowed + [f"group_{s}_{n_gens}" for s in ("input", "output")], 1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            raise InputError(f'{p}: unknown array "{name}"{hint}; an .npz model holds "activations", '
                             f'weight_i and bias_i for i < {n_layers} (one per entry of activations), and '
                             'group_input_k with group_output_k for k = 0, 1, ...')


def save_npz(model: NumericModel, path) -> None:
    """Write a model in the layout read by :func:`load_npz`."""
    import json

    if callable(getattr(model, "hidden_spaces", None)):  # a graph model: the layout has no nodes or inputs
        raise InputError("the .npz layout holds chains of layers (weight_i, bias_i); a graph model has no .npz "
                         "layout: write it as ONNX (symeq.numeric.onnx_write_graph.export_graph_onnx); "
                         "numeric-check and certify read it so, or as a graph model file (docs/graphs.md)")
    bad = first_unsupported(model.layers, "npz-layout")
    if bad is not None:
        raise InputError(f"the .npz layout holds dense models only; {bad.kind} layers do not support it: "
                         "save the model as .json")
    arrays = {}
    for i, l in enumerate(model.layers):
        if supports(l, "image-output"):  # kernels, not the expanded matrix
            s = l.shape
            arrays[f"conv_{i}"] = l.kernel
            arrays[f"bias_{i}"] = l.channel_bias
            arrays[f"conv_meta_{i}"] = np.array([s.in_channels, s.height, s.width, s.stride, s.padding,
                                                 int(s.padding_mode == "circular")], dtype=np.int64)
            continue
        arrays[f"weight_{i}"] = l.weight
        arrays[f"bias_{i}"] = l.bias
    arrays["activations"] = np.array(["none" if l.activation is None else json.dumps(l.activation.spec)
                                      for l in model.layers])
    if model.group is not None:
        for k, (a, b) in enumerate(model.group.generators):
            arrays[f"group_input_{k}"] = a
            arrays[f"group_output_{k}"] = b
        arrays["group_label"] = np.array(str(model.group.label))
        if model.group.names:
            arrays["group_names"] = np.array([str(n) for n in model.group.names])
    np.savez(path, **arrays)


def load_numeric_model(path) -> NumericModel:
    """Load ``.json`` (model format, floats allowed) or ``.npz``; anything else is refused."""
    from ..io import read_json

    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".npz":
        return load_npz(p)
    if suffix == ".json":
        return model_from_json(read_json(p), where=str(p))
    raise InputError(f"{p}: unknown model file kind {suffix or '(no suffix)'!r}; numeric models are .json "
                     "(symeq-model/1, floats allowed) or .npz (weight_i, bias_i, activations)")


def _torch():
    try:
        import torch
    except ImportError:
        raise EngineMissing("this needs torch: pip install 'symeq[numeric]' (or pip install torch)") from None
    return torch


def _torch_activation_spec(mod, kind: str, idx) -> dict:
    """The activation spec of a torch activation module (its unit reads its parameters as rationals)."""
    from ..activations.registry import spec_from_torch

    return spec_from_torch(mod, kind, idx)


def _torch_modules(seq, torch, prefix=""):
    """The leaf modules of a (nested) ``nn.Sequential`` in order, with their dotted index ("2.1")."""
    for idx, mod in enumerate(seq):
        label = f"{prefix}{idx}"
        if isinstance(mod, torch.nn.Sequential):
            yield from _torch_modules(mod, torch, label + ".")
        else:
            yield label, mod


_TORCH_REFUSED = {
    "AdaptiveMaxPool2d": "adaptive max pooling is not read (MaxPool2d is: a maxpool2d layer)",
    "LayerNorm": "layer norm divides by a data-dependent norm, which breaks the monomial latent groups in general; "
                 "it is not supported",
    "GroupNorm": "group norm divides by a data-dependent norm; it is not supported",
    "InstanceNorm2d": "instance norm divides by a data-dependent norm; it is not supported",
}
_TORCH_DROPOUTS = ("Dropout", "Dropout1d", "Dropout2d", "AlphaDropout", "FeatureAlphaDropout")


def from_torch(seq, group=None, name: str = "torch model", input_shape=None) -> NumericModel:
    """A numeric model from a (nested) ``nn.Sequential`` of ``Conv2d``, ``Linear``, activations and the
    modules that fold into them.

    Known activations: Tanh, GELU (erf or tanh form), Sigmoid, ReLU, SiLU, Softplus (beta 1), ELU,
    LeakyReLU (parameters read as rationals) and symeq's Polynomial.  ``Conv2d`` (zero or circular
    padding, any stride, no dilation; ``groups > 1`` read as its block-diagonal kernel) becomes a
    :func:`symeq.layers.conv.floating.NumericConvLayer` (kernels kept); it needs ``input_shape = (C, H, W)``
    of the network's input (later layers follow the shapes).  ``Flatten`` is the identity on symeq's
    channel-major pixel order; a ``Linear`` after a convolution is the convolution with a
    whole-image kernel.  Folded exactly (in float64) into the neighbouring linear layer, and listed
    in ``model.meta["reader_notes"]``: ``BatchNorm1d``/``BatchNorm2d`` in eval mode (into the layer
    before it when no activation lies between, else into the next one), ``AvgPool2d`` (no padding
    of its own; before a padded convolution when its windows tile the image, see
    :func:`symeq.layers.conv.floating.pool_before_conv`) and ``AdaptiveAvgPool2d(1)``.  ``Dropout`` in
    eval mode and ``Identity`` are dropped; ``Softmax``/``LogSoftmax`` as the last module is the
    output operation (``model.meta["output_op"]``; the model is the logits).  Training-mode
    BatchNorm or Dropout, adaptive max pooling and norms are refused by name.  ``MaxPool2d`` and a max over each
    field's channels (a ``MaxPoolChannels``, ``GroupPooling`` or ``GroupMaxPool`` module with ``field_size``)
    after an activation are pooling layers of their own (:mod:`symeq.layers.pooling.floating`).

    A module that is not a ``Sequential`` is traced by torch.fx
    (:func:`symeq.numeric.torch_graph.from_torch_traced`): residual additions ``x + f(x)`` and
    ``torch.cat(..., dim=1)`` give a float :class:`symeq.graph.GraphModel` (docs/graphs.md), a traced
    chain the NumericModel of its modules; ``input_shape`` is then (C, H, W) or (n,).
    """
    torch = _torch()
    for read in kind_model_readers("read_torch_model"):  # a kind that reads a whole module (attention's)
        got = read(seq, input_shape)
        if got is not None:
            return NumericModel(got[0].in_dim, [got[0]], group, name, got[1])
    if not isinstance(seq, torch.nn.Sequential):  # a module of its own: traced by torch.fx (docs/graphs.md)
        from types import SimpleNamespace

        from .torch_graph import from_torch_traced  # it reads each branch with this function (no import back)

        reader = SimpleNamespace(torch=torch, chain=from_torch, activation=numeric_activation)
        return from_torch_traced(seq, reader, _as_group(group), name, input_shape)
    return _TorchChain(torch, input_shape).run(seq, group, name)


class _TorchChain:
    """:func:`from_torch`'s chain reader: one method per kind of module, the state of the chain as read.

    ``pending`` is ``[kind, K or W, b, ConvShape or None, label]``, a linear layer waiting for its
    activation; ``pre`` the ``("pool", pool, label)`` / ``("bn", (s, t), label)`` ops waiting for the next
    linear layer's inputs; ``image`` whether a convolution came before (a later Linear is then the
    whole-image kernel)."""

    def __init__(self, torch, input_shape):
        self.torch = torch
        self.layers, self.notes, self.pre = [], [], []
        self.pending, self.output_op, self.image = None, None, False
        self.shape = None if input_shape is None else tuple(int(v) for v in input_shape)
        if self.shape is not None and len(self.shape) != 3:
            raise InputError(f"input_shape must be (channels, height, width), got {input_shape!r}")

    @staticmethod
    def array(t):
        return t.detach().cpu().double().numpy()

    def run(self, seq, group, name) -> NumericModel:
        torch = self.torch
        for label, mod in _torch_modules(seq, torch):
            kind = type(mod).__name__
            if self.output_op is not None:
                raise InputError(f"module {label} ({kind}) after the {self.output_op['type']} of module "
                                 f"{self.output_op['module']}: symeq reads a softmax or log-softmax only as the last "
                                 "module")
            self.read(label, mod, kind)
        if self.pre:  # after the last activation: a layer of its own, the affine last layer
            self.keep_pre_as_layer()
        if self.pending is None:
            raise InputError("the Sequential must end with a Linear or Conv2d layer (the last layer is affine)")
        self.layers.append(self.finish(self.pending, None))
        meta = {}
        params = [t for t in seq.parameters() if t.is_floating_point()]
        if params:  # the least precise float type of the weights: numeric-check's default tolerance follows it
            meta["weights_dtype"] = str(max((t.dtype for t in params), key=lambda d: torch.finfo(d).eps)).replace(
                "torch.", "")
        if self.notes:
            meta["reader_notes"] = self.notes
        if self.output_op is not None:
            meta["output_op"] = self.output_op
        return NumericModel(self.layers[0].in_dim, self.layers, _as_group(group), name, meta)

    def read(self, label, mod, kind) -> None:
        """One module of the Sequential."""
        nn = self.torch.nn
        if isinstance(mod, nn.Linear):
            self.linear(label, mod)
        elif isinstance(mod, nn.Conv2d):
            self.conv2d(label, mod)
        elif isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
            self.batchnorm(label, mod, kind)
        elif kind in _TORCH_DROPOUTS:
            if mod.training and float(mod.p) > 0:
                raise InputError(f"module {label}: {kind} in training mode (a random mask); call model.eval() "
                                 "before reading it, where dropout is the identity")
            self.notes.append(f"module {label}: {kind} (eval mode: the identity) dropped")
        elif isinstance(mod, (nn.Identity, nn.Flatten)):
            return
        elif isinstance(mod, (nn.AvgPool2d, nn.AdaptiveAvgPool2d)):
            self.average_pool(label, mod, kind)
        elif isinstance(mod, nn.Unflatten):  # symeq's own export puts it before a pooling module
            self.unflatten(label, mod)
        elif kind in torch_layer_classes():  # a kind's own torch modules (the pooling kinds')
            self.kind_layer(label, mod, kind)
        elif kind in _TORCH_REFUSED:
            raise InputError(f"module {label} is a {kind}: {_TORCH_REFUSED[kind]}")
        elif isinstance(mod, (nn.Softmax, nn.LogSoftmax)):
            self.softmax(label, mod, kind)
        elif kind in torch_activation_classes():
            if self.pending is None and self.pre and self.pre[-1][0] == "bn":  # BatchNorm -> activation
                self.keep_pre_as_layer()
            if self.pending is None:
                raise InputError(f"module {label} ({kind}) is an activation without a Linear or Conv2d before it")
            act = numeric_activation(_torch_activation_spec(mod, kind, label))
            self.layers.append(self.finish(self.pending, act))
            self.pending = None
        else:
            raise InputError(f"module {label} is a {kind}; symeq reads (nested) Sequentials of Conv2d, Linear, "
                             "BatchNorm1d/2d (eval), AvgPool2d, AdaptiveAvgPool2d(1), Flatten, Dropout (eval), "
                             "Identity, Tanh, GELU, Sigmoid, ReLU, SiLU, Softplus, ELU, LeakyReLU, and Softmax or "
                             "LogSoftmax as the last module")

    def start(self, p, label) -> None:
        """A new linear layer ``p``: the one pending is finished affine, the ops waiting fold into ``p``."""
        from ..layers.conv.floating import FloatFold, fold_pool_into_dense, fold_pool_into_kernel, pool_before_conv

        if self.pending is not None:
            self.layers.append(self.finish(self.pending, None))
        for kind, data, plabel in reversed(self.pre):  # x -> op_1 -> ... -> op_k -> layer: fold op_k first
            if kind == "pool":
                if p[0] == "conv":
                    try:
                        p[3] = pool_before_conv(data, p[3])
                    except InputError as e:
                        raise InputError(f"module {plabel}: {e}") from None
                    p[1] = fold_pool_into_kernel(p[1], FloatFold, data)
                else:
                    p[1] = fold_pool_into_dense(p[1], FloatFold, data)
                self.notes.append(f"module {plabel}: average pooling folded exactly into module {label}")
            else:
                self.fold_bn_in(p, data, label, plabel)
        self.pre.clear()
        self.pending = p

    def fold_bn_in(self, p, data, label, plabel) -> None:
        s, t = data
        if p[0] == "conv":
            if p[3].padding and p[3].padding_mode == "zeros" and np.any(t != 0):
                raise InputError(f"module {plabel}: a BatchNorm after the activation, before the zero-padded "
                                 f"module {label}: its shift does not fold exactly (the padding stays 0); "
                                 "put the BatchNorm before the activation, or use padding 0")
            b0 = p[2] if p[2] is not None else np.zeros(p[1].shape[0])
            p[2] = b0 + p[1].sum(axis=(2, 3)) @ t
            p[1] = p[1] * s[None, :, None, None]
        else:
            rep = p[1].shape[1] // len(s)
            b0 = p[2] if p[2] is not None else np.zeros(p[1].shape[0])
            p[2] = b0 + p[1] @ np.repeat(t, rep)
            p[1] = p[1] * np.repeat(s, rep)[None, :]
        self.notes.append(f"module {plabel}: BatchNorm (eval) folded exactly into the inputs of module {label} "
                          "(scale gamma/sqrt(var + eps) in float64)")

    def keep_pre_as_layer(self) -> None:
        """The ops waiting in :attr:`pre` (a BatchNorm after an addition or at a branch's end, with no linear
        layer to fold into) kept as a layer of their own: the identity (a 1x1 convolution on images, the
        identity matrix on vectors) with them folded exactly into its inputs."""
        from ..layers.conv import ConvShape

        plabel, before = self.pre[-1][2], len(self.notes)
        if self.shape is not None:
            C, H, W = self.shape
            self.start(["conv", np.eye(C).reshape(C, C, 1, 1), None, ConvShape(C, C, H, W, 1, 1), plabel], plabel)
            self.image = True
        else:
            n = len(self.pre[-1][1][0])
            self.start(["dense", np.eye(n), None, None, plabel], plabel)
        del self.notes[before:]  # the folds into the identity are this layer, said once
        self.notes.append(f"module {plabel}: BatchNorm or average pooling kept as a layer of its own (no linear "
                          "layer to fold into): " + ("a per-channel 1x1 convolution" if self.shape is not None
                                                     else "a diagonal dense layer") + ", exactly")

    @staticmethod
    def finish(p, act):
        kind, K, b, conv, _ = p
        if kind == "conv":
            return NumericConvLayer(conv, K, b if b is not None else np.zeros(conv.out_channels), act)
        return NumericDenseLayer(K, b if b is not None else np.zeros(K.shape[0]), act)

    def linear(self, label, mod) -> None:
        from ..layers.conv import ConvShape

        W = self.array(mod.weight)
        b = None if mod.bias is None else self.array(mod.bias)
        shape = self.shape
        if self.image:  # after a convolution (and a Flatten): the conv with a whole-image kernel
            if W.shape[1] != shape[0] * shape[1] * shape[2]:
                raise InputError(f"module {label}: Linear with {W.shape[1]} inputs after a {shape} image")
            C, H, Wd = shape
            self.start(["conv", W.reshape(W.shape[0], C, H, Wd), b, ConvShape(C, W.shape[0], H, Wd, H, Wd), label],
                       label)
            self.shape = (W.shape[0], 1, 1)
        else:
            self.start(["dense", W, b, None, label], label)
            self.shape = None

    def conv2d(self, label, mod) -> None:
        from ..layers.conv import ConvShape

        shape = self.shape
        if shape is None:
            raise InputError(f"module {label} is a Conv2d: pass input_shape=(C, H, W) of the network's input")
        if tuple(mod.dilation) != (1, 1) or mod.padding_mode not in ("zeros", "circular") \
                or isinstance(mod.padding, str) or len(set(mod.stride)) != 1 or len(set(mod.padding)) != 1:
            raise InputError(f"module {label}: symeq reads Conv2d with dilation 1, zero or circular padding given "
                             "as a number, and equal strides and paddings in both directions")
        kh, kw = mod.kernel_size
        conv = ConvShape(shape[0], mod.out_channels, shape[1], shape[2], kh, kw,
                         stride=mod.stride[0], padding=mod.padding[0], padding_mode=mod.padding_mode)
        K = self.array(mod.weight)
        if mod.groups != 1:  # grouped / depthwise: the block-diagonal kernel (exact zeros between groups)
            full = np.zeros((K.shape[0], shape[0], kh, kw))
            per_out, per_in = K.shape[0] // mod.groups, shape[0] // mod.groups
            for o in range(K.shape[0]):
                full[o, (o // per_out) * per_in:(o // per_out + 1) * per_in] = K[o]
            K = full
            self.notes.append(f"module {label}: Conv2d with groups={mod.groups} read as its block-diagonal kernel")
        self.start(["conv", K, None if mod.bias is None else self.array(mod.bias), conv, label], label)
        self.image = True
        self.shape = (conv.out_channels, *conv.out_hw)

    def batchnorm(self, label, mod, kind) -> None:
        if mod.training or mod.running_mean is None:
            raise InputError(f"module {label}: {kind} in training mode (batch statistics); call model.eval() "
                             "before reading it")
        C, shape, pending = mod.num_features, self.shape, self.pending
        if (shape is not None and self.image and shape[0] != C) or (shape is None and pending is not None
                                                                    and pending[1].shape[0] != C):
            raise InputError(f"module {label}: {kind} over {C} channels does not fit the activations")
        gamma = self.array(mod.weight) if mod.affine else np.ones(C)
        beta = self.array(mod.bias) if mod.affine else np.zeros(C)
        s = gamma / np.sqrt(self.array(mod.running_var) + float(mod.eps))
        t = beta - s * self.array(mod.running_mean)
        if pending is None:
            self.pre.append(("bn", (s, t), label))
            return
        if pending[1].shape[0] != C:  # before the activation: scale the layer's outputs
            raise InputError(f"module {label}: {kind} over {C} channels after a layer of {pending[1].shape[0]} outputs")
        b0 = pending[2] if pending[2] is not None else np.zeros(C)
        pending[2] = s * b0 + t
        pending[1] = pending[1] * s.reshape((-1,) + (1,) * (pending[1].ndim - 1))
        self.notes.append(f"module {label}: {kind} (eval) folded exactly into the outputs of module {pending[4]} "
                          "(scale gamma/sqrt(var + eps) in float64)")

    def average_pool(self, label, mod, kind) -> None:
        from ..layers.conv.floating import FloatFold, fold_pool_after_kernel, pool_after_conv

        shape = self.shape
        if shape is None:
            raise InputError(f"module {label}: {kind} needs image-shaped activations (pass input_shape)")
        C, H, W = shape
        if isinstance(mod, self.torch.nn.AdaptiveAvgPool2d):
            out = mod.output_size if isinstance(mod.output_size, tuple) else (mod.output_size, mod.output_size)
            if tuple(out) != (1, 1):
                raise InputError(f"module {label}: AdaptiveAvgPool2d is read as a global average pooling (output 1)")
            pool = (H, W, H, W, shape)
        else:
            k = mod.kernel_size if isinstance(mod.kernel_size, tuple) else (mod.kernel_size, mod.kernel_size)
            st = mod.stride if isinstance(mod.stride, tuple) else ((mod.stride, mod.stride) if mod.stride else k)
            if mod.padding not in (0, (0, 0)) or mod.ceil_mode:
                raise InputError(f"module {label}: AvgPool2d is read without padding of its own and ceil_mode=False")
            pool = (int(k[0]), int(k[1]), int(st[0]), int(st[1]), shape)
        pending = self.pending
        if pending is not None:  # after a convolution, before its activation: fold into it
            if pending[0] != "conv":
                raise InputError(f"module {label}: average pooling after a dense layer")
            old = pending[3]
            try:
                pending[3] = pool_after_conv(old, pool)
            except InputError as e:
                raise InputError(f"module {label}: {e}") from None
            pending[1] = fold_pool_after_kernel(pending[1], FloatFold, old, pool)
            self.notes.append(f"module {label}: average pooling folded exactly into the outputs of module {pending[4]}")
        else:
            self.pre.append(("pool", pool, label))
        self.shape = (C, (H - pool[0]) // pool[2] + 1, (W - pool[1]) // pool[3] + 1)

    def kind_layer(self, label, mod, kind) -> None:
        """A torch module a kind's float class reads itself (``torch_classes``, ``from_torch``), after an
        activation: a parameter-free layer of the chain of its own."""
        if self.pending is not None or self.pre:
            raise InputError(f"module {label}: a {kind} is read after an activation only (a hidden space of "
                             "its own); put it after the ReLU")
        layer = torch_layer_classes()[kind].from_torch(mod, kind, self.shape, label)
        self.layers.append(layer)
        self.shape = getattr(layer, "out_shape", None)  # an image kind's output shape (the pooling kinds')
        self.image = self.image or self.shape is not None

    def unflatten(self, label, mod) -> None:
        """``Unflatten`` of the features to (C, H, W): the identity on the channel-major order (symeq's
        own export writes one before each pooling module)."""
        if self.pending is not None or self.pre:
            raise InputError(f"module {label}: an Unflatten is read after an activation only (before a pooling "
                             "module, as symeq's own export writes it)")
        size = tuple(int(v) for v in mod.unflattened_size)
        if mod.dim not in (1, -1) or len(size) != 3 or (self.shape is not None and size != tuple(self.shape)):
            raise InputError(f"module {label}: Unflatten is read only as (C, H, W) of the features (dim 1), the "
                             f"current image shape {self.shape}")
        self.shape = size

    def softmax(self, label, mod, kind) -> None:
        if self.pending is None or mod.dim not in (1, -1, None):
            raise InputError(f"module {label}: {kind} is read only as the last module, over the features "
                             "(dim=1) of the last linear layer")
        self.output_op = {"type": "softmax" if kind == "Softmax" else "log_softmax", "module": label,
                          "node": f"module {label}"}
        self.notes.append(f"module {label}: {kind} at the output recorded as the output operation; the logits are "
                          "what is checked and certified (it commutes with permutations: the output action must be one)")

