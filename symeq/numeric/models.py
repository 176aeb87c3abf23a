"""Numeric models: the float twin of :mod:`symeq.models` (numpy float64 by default).

A :class:`NumericModel` is a list of :class:`NumericDenseLayer` ``x -> sigma(W x + b)`` (the last
one affine) with an optional :class:`NumericGroup` acting on input and output, exactly as an exact
:class:`~symeq.models.Model`, but with ``numpy`` arrays.  Batches are arrays with *one row per
point* (shape ``(N, n_in)``, the numpy/torch habit), where the exact side uses one column per point.

Every activation carries the latent group K it implies (the table of DESIGN.md), so the numeric
layerwise analysis searches the same K_i as the exact one:

=================  =============  ==========================================================
activation         symmetry       K on a hidden layer
=================  =============  ==========================================================
polynomial (exact) from the exact ``Activation`` (generic / odd / even / monomial / ...)
``tanh``           odd            signed permutations
``gelu``           generic        permutations (gelu(-t) = gelu(t) - t acts affinely, not in K)
``sigmoid``        odd+constant   permutations (sigmoid(-t) = 1 - sigmoid(t), affine)
``relu``           relu           positive monomial matrices
=================  =============  ==========================================================

Models come from an exact model (:func:`from_exact`), the model file format with floats allowed
(:func:`model_from_json`), an ``.npz`` archive (:func:`load_npz`, layout in its docstring) or a
torch ``nn.Sequential`` (:func:`from_torch`).  The numeric side never claims "verified": results
are residuals compared with a tolerance.

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

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import EngineMissing, InputError, ShapeError
from ..models import LayeredShape

__all__ = [
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

LATENT_GROUPS = {
    "generic": "permutations",
    "odd": "signed permutations",
    "even": "permutations",
    "monomial": "monomial matrices",
    "odd-plus-constant": "permutations",
    "relu": "positive monomial matrices",
}


def to_float_matrix(m) -> np.ndarray:
    """An ``fmpq_mat`` (or nested list / array) as a float64 array."""
    if hasattr(m, "nrows") and hasattr(m, "entries"):
        vals = [int(q.p) / int(q.q) for q in m.entries()]
        return np.array(vals, dtype=np.float64).reshape(m.nrows(), m.ncols())
    return np.asarray(m, dtype=np.float64)


def _fq(q) -> float:
    return int(q.p) / int(q.q)


# -- activations ---------------------------------------------------------------------------

def _erf(x: np.ndarray) -> np.ndarray:
    try:
        from scipy.special import erf
    except ImportError:  # plain numpy has no erf; math.erf elementwise is slow but exact enough
        return np.vectorize(math.erf, otypes=[np.float64])(x)
    return erf(x)


def _gelu(t):
    return 0.5 * t * (1.0 + _erf(t / math.sqrt(2.0)))


def _gelu_prime(t):
    return 0.5 * (1.0 + _erf(t / math.sqrt(2.0))) + t * np.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)


def _sigmoid(t):
    return 0.5 * (1.0 + np.tanh(0.5 * t))


@dataclass(frozen=True, eq=False)
class NumericActivation:
    """A float activation with its derivative and the latent symmetry it implies.

    Attributes
    ----------
    name : "polynomial", "relu", "tanh", "gelu" or "sigmoid" (exact kinds keep their spec)
    fn, prime : numpy functions sigma and sigma'
    symmetry : as :attr:`symeq.activations.Activation.symmetry`
    shift : s with sigma(t) = tau(t - s) (polynomials; 0 otherwise)
    degree : polynomial degree (None otherwise)
    coeffs : float coefficients from degree 0 up (polynomials)
    spec : the JSON description
    """

    name: str
    fn: Callable
    prime: Callable
    symmetry: str
    shift: float = 0.0
    degree: int | None = None
    coeffs: tuple = ()
    spec: dict = field(default_factory=dict)

    def __call__(self, t):
        return self.fn(t)

    @property
    def latent_group(self) -> str:
        return LATENT_GROUPS[self.symmetry]

    def admissible(self, alpha: float) -> float | None:
        """q with sigma(alpha t + s(1 - alpha)) = q sigma(t), for an alpha already snapped to K.

        >>> numeric_activation("tanh").admissible(-1.0), numeric_activation("relu").admissible(2.0)
        (-1.0, 2.0)
        """
        sym = self.symmetry
        if sym == "relu":
            return float(alpha) if alpha > 0 else None
        if sym == "monomial":
            return float(alpha) ** self.degree if alpha != 0 else None
        if sym == "odd":
            return float(alpha) if alpha in (1.0, -1.0) else None
        if sym == "even":
            return 1.0 if alpha in (1.0, -1.0) else None
        return 1.0 if alpha == 1.0 else None

    def torch_module(self):
        """The matching ``torch.nn`` module (polynomials: a small module evaluating by Horner)."""
        import torch

        if self.name == "tanh":
            return torch.nn.Tanh()
        if self.name == "gelu":
            return torch.nn.GELU()
        if self.name == "sigmoid":
            return torch.nn.Sigmoid()
        if self.name == "relu":
            return torch.nn.ReLU()
        from .torch_backend import Polynomial

        return Polynomial(self.coeffs)

    def __repr__(self) -> str:
        return f"NumericActivation({self.spec})"


def _horner(coeffs):
    c = tuple(float(x) for x in coeffs)
    dc = tuple(k * c[k] for k in range(1, len(c))) or (0.0,)

    def ev(cs):
        def f(t):
            acc = np.zeros_like(t) + cs[-1]
            for x in reversed(cs[:-1]):
                acc = acc * t + x
            return acc
        return f

    return ev(c), ev(dc)


def activation_from_exact(act) -> NumericActivation:
    """The float twin of an exact :class:`~symeq.activations.Activation`."""
    if act.kind == "relu":
        return numeric_activation("relu")
    f, fp = _horner([_fq(c) for c in act.coeffs])
    return NumericActivation("polynomial", f, fp, act.symmetry, _fq(act.shift), act.degree,
                             tuple(_fq(c) for c in act.coeffs), dict(act.spec))


_NUMERIC_ONLY = {
    "tanh": lambda: NumericActivation("tanh", np.tanh, lambda t: 1.0 - np.tanh(t) ** 2, "odd", spec={"type": "tanh"}),
    "gelu": lambda: NumericActivation("gelu", _gelu, _gelu_prime, "generic", spec={"type": "gelu"}),
    "sigmoid": lambda: NumericActivation("sigmoid", _sigmoid, lambda t: _sigmoid(t) * (1.0 - _sigmoid(t)),
                                         "odd-plus-constant", spec={"type": "sigmoid"}),
    "relu": lambda: NumericActivation("relu", lambda t: np.maximum(t, 0.0), lambda t: (t > 0).astype(np.float64),
                                      "relu", spec={"type": "relu"}),
}


def numeric_activation(spec, where: str = "activation") -> NumericActivation | None:
    """An activation from its JSON spec: the exact kinds, plus "tanh", "gelu" and "sigmoid".

    >>> numeric_activation({"type": "tanh_series", "order": 3}).symmetry
    'odd'
    >>> numeric_activation("gelu").latent_group
    'permutations'
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        spec = {"type": spec}
    if isinstance(spec, dict) and spec.get("type") in _NUMERIC_ONLY:
        return _NUMERIC_ONLY[spec["type"]]()
    from ..activations import activation_from_spec

    try:
        act = activation_from_spec(spec, where)
    except InputError as e:
        raise InputError(f"{e}; numeric models also know tanh, gelu and sigmoid") from None
    if act.kind != "relu" and act.symmetry in ("affine", "constant"):
        raise InputError(f"{where}: a {act.symmetry} activation has no monomial latent group; "
                         "use a polynomial of degree >= 2, tanh, gelu, sigmoid or relu")
    return activation_from_exact(act)


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
class NumericDenseLayer:
    """x -> sigma(W x + b) with float W (out x in) and b; sigma None means affine."""

    weight: np.ndarray
    bias: np.ndarray | None = None
    activation: NumericActivation | None = None

    def __post_init__(self):
        self.weight = np.asarray(self.weight, dtype=np.float64)
        if self.weight.ndim != 2 or 0 in self.weight.shape:
            raise ShapeError(f"a weight must be a non-empty matrix, got shape {self.weight.shape}")
        self.bias = np.zeros(self.weight.shape[0]) if self.bias is None else np.asarray(self.bias, dtype=np.float64).reshape(-1)
        if self.bias.shape[0] != self.weight.shape[0]:
            raise ShapeError(f"bias has length {self.bias.shape[0]}, weight has {self.weight.shape[0]} rows")
        if not (np.all(np.isfinite(self.weight)) and np.all(np.isfinite(self.bias))):
            raise InputError("a layer has NaN or infinite weights; numeric models need finite parameters")

    @property
    def in_dim(self) -> int:
        return self.weight.shape[1]

    @property
    def out_dim(self) -> int:
        return self.weight.shape[0]

    def pre_activation(self, X: np.ndarray) -> np.ndarray:
        return X @ self.weight.T + self.bias

    def forward(self, X: np.ndarray) -> np.ndarray:
        """Apply the layer to a batch (one row per point)."""
        Z = self.pre_activation(X)
        return Z if self.activation is None else self.activation(Z)

    def copy(self) -> "NumericDenseLayer":
        return NumericDenseLayer(self.weight.copy(), self.bias.copy(), self.activation)


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
    def n_params(self) -> int:
        return sum(l.in_dim * l.out_dim + l.out_dim for l in self.layers)

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
        dtype = dtype or torch.float64
        mods = []
        for l in self.layers:
            # made in the target dtype: a float32 layer would round the weights on copy_
            lin = torch.nn.Linear(l.in_dim, l.out_dim, dtype=dtype)
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(l.weight))
                lin.bias.copy_(torch.from_numpy(l.bias))
            mods.append(lin)
            if l.activation is not None:
                mods.append(l.activation.torch_module())
        seq = torch.nn.Sequential(*mods).to(dtype=dtype)
        return seq.to(device) if device is not None else seq

    def __repr__(self) -> str:
        acts = ", ".join(l.activation.spec.get("type", l.activation.name) for l in self.layers[:-1])
        return f"NumericModel({self.name!r}, widths {self.widths}, activations [{acts}])"


# -- conversion and loading ----------------------------------------------------------------

def from_exact(model, group=...) -> NumericModel:
    """The float twin of an exact :class:`~symeq.models.Model` (same widths, same group)."""
    layers = [NumericDenseLayer(to_float_matrix(l.weight), np.array([_fq(b) for b in l.bias]),
                                None if l.activation is None else activation_from_exact(l.activation))
              for l in model.layers]
    g = model.group if group is ... else group
    return NumericModel(model.input_dim, layers, None if g is None else _as_group(g), model.name, {})


def _float_value(v, where: str) -> float:
    if isinstance(v, bool):
        raise InputError(f"{v!r} is a boolean, not a number (at {where})")
    if isinstance(v, (int, float)):
        x = float(v)
    elif isinstance(v, str):
        from ..numbers import parse_number

        try:
            x = float(v)
        except ValueError:
            q = parse_number(v, where)  # "p/q" strings
            x = _fq(q)
    else:
        raise InputError(f"expected a number, got {type(v).__name__} {v!r} (at {where})")
    if not math.isfinite(x):
        raise InputError(f"{v!r} is not a finite number (at {where})")
    return x


def _float_matrix(rows, where: str, cols: int | None = None, vector: bool = False) -> np.ndarray:
    if vector:
        if not isinstance(rows, list):
            raise InputError(f"expected a list of numbers at {where}")
        return np.array([_float_value(v, f"{where}[{i}]") for i, v in enumerate(rows)])
    if not isinstance(rows, list) or not rows or not all(isinstance(r, list) for r in rows):
        raise InputError(f"expected a non-empty list of rows at {where}")
    width = len(rows[0])
    out = []
    for i, r in enumerate(rows):
        if len(r) != width:
            raise ShapeError(f"{where} is not rectangular: row {i} has {len(r)} entries, row 0 has {width}")
        out.append([_float_value(v, f"{where}[{i}][{j}]") for j, v in enumerate(r)])
    if width == 0:
        raise ShapeError(f"{where} has empty rows")
    if cols is not None and width != cols:
        raise ShapeError(f"{where} has shape {len(rows)}x{width}, expected ?x{cols}")
    return np.array(out)


def model_from_json(data, where: str = "model") -> NumericModel:
    """A numeric model from the ``symeq-model/1`` structure; floats and "p/q" strings allowed."""
    from ..io import model_header

    n = model_header(data, where)
    specs = data.get("layers")
    if not isinstance(specs, list) or not specs:
        raise InputError(f"{where}.layers must be a non-empty list of layers")
    layers, width = [], n
    for i, spec in enumerate(specs):
        at = f"{where}.layers[{i}]"
        if not isinstance(spec, dict) or "weight" not in spec:
            raise InputError(f"{at} must be an object with a \"weight\"")
        if spec.get("type", "dense") != "dense":
            raise InputError(f"{at}: unknown layer type {spec.get('type')!r}; this version knows \"dense\"")
        W = _float_matrix(spec["weight"], f"{at}.weight", cols=width)
        b = None if spec.get("bias") is None else _float_matrix(spec["bias"], f"{at}.bias", vector=True)
        if b is not None and b.shape[0] != W.shape[0]:
            raise ShapeError(f"{at}.bias has length {b.shape[0]}, expected {W.shape[0]}")
        layers.append(NumericDenseLayer(W, b, numeric_activation(spec.get("activation"), f"{at}.activation")))
        width = W.shape[0]
    group = None
    if data.get("group") is not None:
        g = data["group"]
        if not isinstance(g, dict) or not isinstance(g.get("generators"), list) or not g["generators"]:
            raise InputError(f"{where}.group must be an object with a non-empty list \"generators\"")
        gens, names = [], []
        for i, gen in enumerate(g["generators"]):
            if not isinstance(gen, dict) or "input" not in gen or "output" not in gen:
                raise InputError(f"{where}.group.generators[{i}] must have \"input\" and \"output\" matrices")
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
    out x in), ``activations`` (string array, one per layer, "none" for the last, e.g.
    ``["tanh", "gelu", "none"]`` or JSON specs such as ``'{"type": "tanh_series", "order": 3}'``),
    and optionally ``group_input_k, group_output_k`` for the generators.
    """
    import json

    p = Path(path)
    z = open_npz(p, "an .npz archive of weight_i / bias_i / activations")
    with z:
        files = set(z.files)
        if "weight_0" not in files or "activations" not in files:
            raise InputError(f"{p}: an .npz model needs weight_0, bias_0, ... and activations; found {sorted(files)}")
        acts = [str(a) for a in z["activations"].reshape(-1)]
        layers = []
        for i, a in enumerate(acts):
            if f"weight_{i}" not in files:
                raise InputError(f"{p}: activations lists {len(acts)} layers but weight_{i} is missing")
            spec = None if a.lower() in ("none", "null", "") else (json.loads(a) if a.lstrip().startswith("{") else a)
            try:
                layers.append(NumericDenseLayer(z[f"weight_{i}"], z[f"bias_{i}"] if f"bias_{i}" in files else None,
                                                numeric_activation(spec, f"{p}: activations[{i}]")))
            except InputError as e:
                raise InputError(f"{p}: layer {i}: {e}") from None
        gens = []
        k = 0
        while f"group_input_{k}" in files:
            gens.append((z[f"group_input_{k}"], z[f"group_output_{k}"]))
            k += 1
        try:
            return NumericModel(layers[0].in_dim, layers, NumericGroup(gens) if gens else None, p.stem)
        except InputError as e:
            raise InputError(f"{p}: {e}") from None


def save_npz(model: NumericModel, path) -> None:
    """Write a model in the layout read by :func:`load_npz`."""
    import json

    arrays = {}
    for i, l in enumerate(model.layers):
        arrays[f"weight_{i}"] = l.weight
        arrays[f"bias_{i}"] = l.bias
    arrays["activations"] = np.array(["none" if l.activation is None else json.dumps(l.activation.spec)
                                      for l in model.layers])
    if model.group is not None:
        for k, (a, b) in enumerate(model.group.generators):
            arrays[f"group_input_{k}"] = a
            arrays[f"group_output_{k}"] = b
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


_TORCH_ACTS = {"Tanh": "tanh", "GELU": "gelu", "Sigmoid": "sigmoid", "ReLU": "relu"}


def from_torch(seq, group=None, name: str = "torch model") -> NumericModel:
    """A numeric model from an ``nn.Sequential`` of ``Linear`` layers and activations.

    Known activations: Tanh, GELU (exact erf form), Sigmoid, ReLU, and symeq's Polynomial.
    """
    torch = _torch()
    if not isinstance(seq, torch.nn.Sequential):
        raise InputError(f"expected a torch.nn.Sequential, got {type(seq).__name__}")
    layers, pending = [], None
    for idx, mod in enumerate(seq):
        kind = type(mod).__name__
        if isinstance(mod, torch.nn.Linear):
            if pending is not None:
                layers.append(NumericDenseLayer(*pending, None))
            W = mod.weight.detach().cpu().double().numpy()
            b = None if mod.bias is None else mod.bias.detach().cpu().double().numpy()
            pending = (W, b)
        elif kind in _TORCH_ACTS or kind == "Polynomial":
            if pending is None:
                raise InputError(f"module {idx} ({kind}) is an activation without a Linear before it")
            if kind == "GELU" and getattr(mod, "approximate", "none") != "none":
                raise InputError(f"module {idx}: GELU(approximate={mod.approximate!r}) is not supported; use the erf form")
            act = numeric_activation(_TORCH_ACTS[kind]) if kind != "Polynomial" else \
                numeric_activation({"type": "polynomial", "coeffs": [repr(float(c)) for c in mod.coeffs]})
            layers.append(NumericDenseLayer(*pending, act))
            pending = None
        else:
            raise InputError(f"module {idx} is a {kind}; symeq reads Sequentials of Linear, Tanh, GELU, Sigmoid, ReLU")
    if pending is None:
        raise InputError("the Sequential must end with a Linear layer (the last layer is affine)")
    layers.append(NumericDenseLayer(*pending, None))
    return NumericModel(layers[0].in_dim, layers, _as_group(group), name)
