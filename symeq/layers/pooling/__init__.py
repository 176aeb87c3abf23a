"""Max pooling over pixels (``maxpool2d``) and escnn's group pooling over fields (``group_pool``).

Both are parameter-free layers ``y[j] = max_{i in window(j)} x[i]`` on channel-major images
(index ``(c*H + y)*W + x``, as :mod:`symeq.layers.conv`), one class per kind over a number backend:
exact over Q (a maximum of rationals) or float64 (``layer.on(FLOAT64)``; the float matching and the torch
modules, read and written, are in :mod:`symeq.layers.pooling.floating`):

``maxpool2d`` ``{"type": "maxpool2d", "kernel_size": k, "stride": s, "padding": p}``
    torch's ``MaxPool2d`` on ``(C, H, W)``: window ``(c, s*y + i - p, s*x + j - p)``, i, j < k,
    positions outside the image ignored (torch pads with -inf; ``p <= k // 2``, so no window is empty);
``group_pool`` ``{"type": "group_pool", "field_size": n}``
    escnn's ``GroupPooling`` over regular fields: C = F n channels, field f is channels
    ``f*n .. f*n + n - 1``, and the output's channel f is the maximum of its field at each pixel.

**Actions** (docs/conv.md, "Pooling").  A maximum commutes with permutations of its arguments and
with positive scalings of all of them, nothing else: ``max(a x_1, ..., a x_m) = a max(x)`` for a > 0
only.  So an action on the layer's input (a :class:`~symeq.layers.conv.ConvAction`, channel action
times pixel permutation) induces one on its output, the unique candidate of :meth:`match_action`,
exactly when

* maxpool2d: the channel factors are positive and the pixel permutation is a grid symmetry R that maps
  the pooling windows onto pooling windows (the rule of a convolution with the same kernel, stride and
  padding, :func:`symeq.layers.conv.output_pixels`); the output action is the channel action times
  R on the pooled grid;
* group_pool: the channel action permutes the fields as whole blocks with one positive factor per
  field; the output action is that permutation of the fields, with the same factors and pixels.

Anything else has no induced action and the matching says so by name (an inconclusive
:class:`~symeq.layers.base.NoPartner`: the verdict is then "undetermined", never a guess).

**The exact check** (:meth:`PoolLayer.check_action`) decides ``f(P x) = Q f(x)`` for monomial P and
Q combinatorially: with P's factors ``a_i`` and columns ``s_i``, it holds for all real x exactly when for
every output neuron j, every i in window(j) has ``a_i = Q``'s factor ``b_j``, and the set
``{s_i : i in window(j)}`` is window(Q's column of j) (a window of one pixel: a linear identity, any
sign).  Sufficient is clear; necessary: an indicator vector on a pixel in the symmetric difference, or
on one with ``a_i != b_j``, tells the two sides apart.  With a negative factor on a wider window, or
an offset, the check looks for an exact counterexample at fixed rational points and otherwise raises
:class:`~symeq.errors.Undetermined`.

The output's latent group is that of a maximum: permutations with positive factors (the group of
ReLU, ``activation`` below is ReLU's unit for that reason only: it names the group and its
admissible scalings; the layer computes a maximum, not a ReLU).
"""

from __future__ import annotations

import copy
from typing import ClassVar

import numpy as np
from flint import fmpq, fmpq_mat

from ...backends import EXACT, FLOAT64
from ...canonical import Form, plain_form
from ...errors import InputError, ShapeError, Undetermined
from ...numbers import as_fmpq, monomial_parts
from ..base import NoPartner
from ..conv import ConvAction, ConvShape, as_conv_action, grid_transform, output_pixels

__all__ = ["PoolGeometry", "PoolLayer", "MaxPool2dLayer", "GroupPoolLayer", "maxpool_windows",
           "group_pool_windows", "POOL_WINDOW_LIMIT"]

POOL_WINDOW_LIMIT = 50_000_000
"""At most this many window entries (output neurons x window size) in one pooling layer."""

_CAPS = frozenset({"image-output", "sparse-actions", "parameter-free"})



def _posint(v, name: str, kind: str, zero: bool = False) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < (0 if zero else 1):
        raise InputError(f"{kind}: {name} must be a {'non-negative' if zero else 'positive'} integer, got {v!r}")
    return v


def maxpool_windows(in_shape: tuple, k: int, s: int, p: int) -> list[tuple]:
    """The input indices of each output neuron's window, channel-major (torch's MaxPool2d, -inf padding)."""
    C, H, W = in_shape
    oh, ow = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    out = []
    for c in range(C):
        for y in range(oh):
            rows = [yy for yy in range(s * y - p, s * y - p + k) if 0 <= yy < H]
            for x in range(ow):
                cols = [xx for xx in range(s * x - p, s * x - p + k) if 0 <= xx < W]
                out.append(tuple((c * H + yy) * W + xx for yy in rows for xx in cols))
    return out


def group_pool_windows(in_shape: tuple, n: int) -> list[tuple]:
    """The input indices of each output neuron's field: channel f, pixel q reads (f n + i, q), i < n."""
    C, H, W = in_shape
    P = H * W
    return [tuple((f * n + i) * P + q for i in range(n)) for f in range(C // n) for q in range(P)]


class PoolGeometry:
    """What the exact layers and their float twins share: shapes, windows, names and the induced
    action (pure index work, the same for rationals and floats).  A subclass sets ``in_shape``,
    ``out_shape``, ``windows`` and :meth:`induced_action`."""

    in_shape: tuple
    out_shape: tuple
    windows: list

    @property
    def in_dim(self) -> int:
        C, H, W = self.in_shape
        return C * H * W

    @property
    def out_dim(self) -> int:
        C, H, W = self.out_shape
        return C * H * W

    n_params = 0
    has_bias = False
    #: no convolution of its own (certify's per-layer conv shapes: None; maxpool2d's window geometry is
    #: ``conv_shape``)
    shape = None

    @property
    def hidden_label(self) -> str:
        return "max"

    @property
    def latent_group_name(self) -> str:
        return self.activation.latent_group

    def _check_size(self) -> None:
        total = self.out_dim * max(1, len(self.windows[0]) if self.windows else 1)
        if total > POOL_WINDOW_LIMIT:
            from ...errors import LimitExceeded

            raise LimitExceeded(f"{self.kind}: {total} window entries exceed {POOL_WINDOW_LIMIT}")

    def in_conv_action(self, P_in, li: int = 0) -> ConvAction:
        """``P_in`` as a channel action times a pixel permutation with positive factors, or NoPartner
        (inconclusive) naming why a maximum does not commute with it."""
        P = as_conv_action(P_in, *self.in_shape)
        if P is None:
            raise NoPartner(f"{self.label} (hidden layer {li + 1}): the action on its input is not a channel action "
                            "times a pixel permutation", inconclusive=True)
        if any(not f > 0 for f in P.factor):
            raise NoPartner(f"{self.label} (hidden layer {li + 1}): the action on its input has a non-positive channel "
                            "factor; a maximum commutes only with permutations and positive scalings",
                            inconclusive=True)
        return P

    def match_reference(self, affine: bool = False):
        return None

    @classmethod
    def from_dense_layer(cls, layer, in_shape: tuple):
        """A dense layer after a pooling is the convolution with one whole-image kernel per neuron."""
        from ..conv import ConvLayer

        return ConvLayer.from_dense_layer(layer, in_shape)

    def picture_edges(self) -> list[tuple[int, int]]:
        """(input neuron, output neuron) for every window entry: the network picture's edges (display)."""
        return [(i, j) for j, win in enumerate(self.windows) for i in win]

    def sparse_action(self, M, side: str):
        return as_conv_action(M, *(self.in_shape if side == "in" else self.out_shape))

    def parameters_key(self) -> tuple:
        return (self.kind, self.in_shape, self.out_shape, tuple(self.windows[:1]))

    def window_index(self):
        """The windows as an out_dim x width integer array, each padded with its first entry (a maximum
        ignores repeats): the index of :class:`PoolProgram`."""
        index = getattr(self, "_window_index", None)
        if index is None:
            w = max(len(win) for win in self.windows)
            index = np.array([list(win) + [win[0]] * (w - len(win)) for win in self.windows], dtype=np.int64)
            self._window_index = index
        return index


class PoolProgram:
    """The pooling kinds' one forward pass over a number backend (:mod:`symeq.backends`): the maximum over
    each window of the columns H (in_dim x N), ``bk.window_max``; a layer runs it over its ``backend``.  No
    parameters and no Jacobian program (a maximum is not polynomial)."""

    n_params = 0

    def __init__(self, bk, index):
        self.bk, self.index = bk, index
        self.out_dim = len(index)

    def forward(self, H, pointwise=None):
        return self.bk.window_max(H, self.index), None


class PoolLayer(PoolGeometry):
    """The one class of both pooling kinds, over a number backend (``backend``: exact by default, float64
    for the float twin, :meth:`on`): the forward pass is :class:`PoolProgram` over the layer's backend (exact:
    one point per column of an ``fmpq_mat``; float64: one point per row of an array), the exact check, and
    the matching of actions (exact here; float in :mod:`symeq.layers.pooling.floating`, with its record)."""

    #: the kind's float side: its torch modules read and written, the float matching (symeq.numeric.models)
    float_module: ClassVar[str] = "symeq.layers.pooling.floating"
    #: where the layer's numbers live (symeq.backends): the batches it takes and gives, its zero bias
    backend = EXACT

    def on(self, backend):
        """This layer over ``backend`` (the same windows: a pooling layer has no parameters)."""
        if backend is self.backend:
            return self
        out = copy.copy(self)
        out.backend = backend
        return out

    @classmethod
    def float_twin(cls, layer, activation=None):
        """The float twin of a pooling layer: the same windows over float64 (``activation`` is ReLU's unit,
        which :attr:`activation` gives anyway)."""
        return layer.on(FLOAT64)

    def exact_layer(self):
        """This layer over the exact backend (certify keeps a pooling layer as it is in theta-bar)."""
        return self.on(EXACT)

    @property
    def activation(self):
        """ReLU's unit in the layer's backend, for the group only: a maximum commutes with positive monomial
        matrices."""
        from ...activations import relu

        if self.backend.exact:
            return relu()
        return self._float_unit().float_relu()

    @property
    def channel_bias(self):
        return self.backend.vector([0] * self.out_shape[0])

    @property
    def bias(self):
        return self.backend.vector([0] * self.out_dim)

    def forward(self, X):
        """The maximum over each window of a batch (exact: one point per column of an ``fmpq_mat``; float64:
        one per row of an array): the kind's program (:class:`PoolProgram`) over the layer's backend."""
        bk = self.backend
        H = bk.batch_in(X)
        if H.shape[0] != self.in_dim:
            raise ShapeError(f"{self.label}: inputs of size {H.shape[0]}, expected {self.in_dim}")
        return bk.batch_out(PoolProgram(bk, self.window_index()).forward(H)[0])

    def __call__(self, x) -> list:
        return self.forward(fmpq_mat(len(x), 1, [as_fmpq(v) for v in x])).entries()

    def copy(self):
        return self

    def match_action(self, P_in, c_in=None, *, reference=None, affine: bool = False, li: int = 0):
        """The one candidate (the induced action, no offset) on the output; NoPartner (inconclusive)
        when the input action induces none (module docstring).  A float layer's candidate comes with its
        record (:func:`symeq.layers.pooling.floating.match_float`)."""
        if not self.backend.exact:
            return self._float_unit().match_float(self, P_in, c_in, li=li)
        if c_in is not None and any(x != 0 for x in c_in):
            raise NoPartner(f"{self.label} (hidden layer {li + 1}): an affine action (offsets) on the input of a "
                            "pooling layer is not supported", inconclusive=True)
        Q = self.induced_action(self.in_conv_action(P_in, li), li)
        return False, iter([(Q, None)])

    def torch_modules(self, torch, dtype=None) -> list:
        """The torch modules computing this layer on flat inputs: Unflatten, the pooling, Flatten."""
        return self._float_unit().torch_modules(self, torch)

    @classmethod
    def from_torch(cls, mod, name: str, shape, label: str):
        """The float layer of a torch module of one of :attr:`torch_classes` on images of ``shape``;
        InputError naming the module for what symeq does not read."""
        return cls._float_unit().from_torch(cls, mod, name, shape, label)

    @classmethod
    def _float_unit(cls):
        """The kinds' float side (``float_module``), imported by its name when asked: it sits above the exact
        layers (symeq.layers.registry.float_unit)."""
        from ..registry import float_unit

        return float_unit(cls.kind)

    def check_action(self, P_in, Q_out, c_in=None, c_out=None) -> tuple[bool, str]:
        """Decide f(P_in x + c_in) = Q_out f(x) + c_out for all real x (module docstring)."""
        pp, qq = _monomial(P_in, self.in_dim), _monomial(Q_out, self.out_dim)
        if pp is None or qq is None:
            return self._witness_or_undetermined(P_in, Q_out, c_in, c_out, "an action that is not monomial")
        offsets = any(v is not None and any(x != 0 for x in v) for v in (c_in, c_out))
        (pc, pv), (qc, qv) = pp, qq
        inv = [0] * self.in_dim
        for i, c in enumerate(pc):
            inv[c] = i
        wins = self.windows
        for j, win in enumerate(wins):
            target = wins[qc[j]]
            wide = len(win) > 1 or len(target) > 1
            if wide and (offsets or not qv[j] > 0 or any(not pv[i] > 0 for i in win)):
                return self._witness_or_undetermined(P_in, Q_out, c_in, c_out,
                                                     "a negative factor or an offset on a window wider than one pixel")
            if sorted(pc[i] for i in win) != sorted(target):
                return False, (f"{self.label}: output neuron {j}: the input action maps its window onto "
                               f"{sorted(pc[i] for i in win)[:6]}..., not onto the window {list(target)[:6]}... of "
                               "neuron rho(j) (an indicator input tells the two sides apart)")
            bad = next((i for i in win if pv[i] != qv[j]), None)
            if bad is not None:
                return False, (f"{self.label}: output neuron {j}: factor {pv[bad]} on input {bad}, but the output "
                               f"factor is {qv[j]} (an indicator input tells the two sides apart)")
            if offsets:  # one-pixel windows: a linear identity
                ci = fmpq(0) if c_in is None else as_fmpq(c_in[win[0]])
                co = fmpq(0) if c_out is None else as_fmpq(c_out[j])
                if ci != co:
                    return False, f"{self.label}: output neuron {j}: the offsets differ ({ci} != {co})"
        return True, (f"max(P x over each window) = rho'(g) max(x over each window): {self.out_dim} windows map "
                      "onto windows with equal positive factors, exactly")

    def _witness_or_undetermined(self, P_in, Q_out, c_in, c_out, why: str) -> tuple[bool, str]:
        """An exact counterexample at fixed rational points, or Undetermined (never a guess)."""
        import random

        rng = random.Random(20261202)
        n, m = self.in_dim, self.out_dim
        P, Q = _applier(P_in, n), _applier(Q_out, m)
        if P is None or Q is None:
            raise Undetermined(f"{self.label}: the actions cannot be applied ({why})")
        ci = [fmpq(0)] * n if c_in is None else [as_fmpq(x) for x in c_in]
        co = [fmpq(0)] * m if c_out is None else [as_fmpq(x) for x in c_out]
        for trial in range(8):
            x = [fmpq(rng.randint(-9, 9), rng.randint(1, 4)) for _ in range(n)]
            px = [a + b for a, b in zip(P(x), ci)]
            lhs = self(px)
            rhs = [a + b for a, b in zip(Q(self(x)), co)]
            if lhs != rhs:
                return False, (f"{self.label}: f(P x + c) != Q f(x) + c' at an exact rational point "
                               f"(trial {trial}; {why})")
        raise Undetermined(f"{self.label}: {why}: the exact check of a maximum is not decided for such an action "
                           "(no counterexample at 8 rational points)")


def _applier(M, n: int):
    """x -> M x for a monomial action (sparse) or an n x n fmpq_mat, or None."""
    parts = _monomial(M, n)
    if parts is not None:
        cols, vals = parts
        return lambda x: [as_fmpq(v) * x[c] for c, v in zip(cols, vals)]
    if isinstance(M, fmpq_mat) and M.nrows() == n and M.ncols() == n:
        return lambda x: (M * fmpq_mat(n, 1, x)).entries()
    return None


def _monomial(M, n: int):
    if isinstance(M, ConvAction):
        return M.monomial() if M.nrows() == n else None
    if isinstance(M, fmpq_mat) and M.nrows() == n and M.ncols() == n:
        return monomial_parts(M)
    return None


# -- maxpool2d ------------------------------------------------------------------------------------

class MaxPool2dGeometry(PoolGeometry):
    """The shape and actions of torch's MaxPool2d (exact and float alike)."""

    kind: ClassVar[str] = "maxpool2d"
    capabilities: ClassVar[frozenset] = _CAPS
    schema: ClassVar[dict] = {"maxpool2d": (("type", "kernel_size", "stride", "padding", "input_shape"),
                                            ("type", "kernel_size"))}

    def __init__(self, in_shape: tuple, kernel_size: int, stride: int | None = None, padding: int = 0):
        k = _posint(kernel_size, "kernel_size", "maxpool2d")
        s = _posint(k if stride is None else stride, "stride", "maxpool2d")
        p = _posint(padding, "padding", "maxpool2d", zero=True)
        if p > k // 2:
            raise InputError(f"maxpool2d: padding {p} must be at most half the kernel size {k} (as torch requires)")
        C, H, W = in_shape
        self.in_shape, self.kernel_size, self.stride, self.padding = tuple(in_shape), k, s, p
        self.conv_shape = ConvShape(C, C, H, W, k, k, stride=s, padding=p)  # the window geometry
        self.out_shape = (C,) + self.conv_shape.out_hw
        self.windows = maxpool_windows(self.in_shape, k, s, p)
        self._check_size()

    @property
    def label(self) -> str:
        C, H, W = self.in_shape
        _, oh, ow = self.out_shape
        return (f"maxpool2d {self.in_dim}->{self.out_dim} ({C}x{H}x{W}->{C}x{oh}x{ow}, k{self.kernel_size} "
                f"s{self.stride} p{self.padding})")

    def induced_action(self, P: ConvAction, li: int = 0) -> ConvAction:
        """The channel action times R on the pooled grid, when R maps windows onto windows."""
        _, H, W = self.in_shape
        R = grid_transform(list(P.pixel), H, W)
        pix = None if R is None else output_pixels(self.conv_shape, R)
        if pix is None:
            raise NoPartner(f"{self.label} (hidden layer {li + 1}): the pixel action on its input does not map the "
                            "pooling windows onto pooling windows (not a grid symmetry, or N + 2p - k is not a "
                            "multiple of the stride)", inconclusive=True)
        return ConvAction(P.source, P.factor, tuple(pix), self.out_shape[1:])

    def to_json(self, declared_bias: bool = False) -> dict:
        return {"type": "maxpool2d", "input_shape": list(self.in_shape), "kernel_size": self.kernel_size,
                "stride": self.stride, "padding": self.padding}


class MaxPool2dLayer(MaxPool2dGeometry, PoolLayer):
    """torch's MaxPool2d on (C, H, W) images (kind ``"maxpool2d"``), exactly or over float64 (:meth:`on`).

    >>> layer = MaxPool2dLayer((1, 2, 2), 2)
    >>> layer([1, -3, "1/2", 2]), layer.out_dim
    ([2], 1)
    >>> a = ConvAction((0,), (fmpq(1),), tuple(ConvAction.rot90_pixels(2)), (2, 2))
    >>> layer.check_action(a, ConvAction((0,), (fmpq(1),), (0,), (1, 1)))[0]
    True
    >>> layer.on(FLOAT64).forward(np.array([[1.0, -3.0, 0.5, 2.0]])).tolist()
    [[2.0]]
    """

    #: the torch classes read as this kind (:meth:`from_torch`)
    torch_classes: ClassVar[tuple] = ("MaxPool2d",)

    @staticmethod
    def examples(seed: int) -> list:
        """Small model files with a layer of this kind, ``(variant, model file, index of the layer)``: the
        kind's instances for the generic tests (tests/kinds/kind_instances.py)."""
        return _maxpool_examples(seed)


# -- group_pool -------------------------------------------------------------------------------------

class GroupPoolGeometry(PoolGeometry):
    """The shape and actions of escnn's GroupPooling over regular fields of ``field_size`` channels."""

    kind: ClassVar[str] = "group_pool"
    capabilities: ClassVar[frozenset] = _CAPS
    schema: ClassVar[dict] = {"group_pool": (("type", "field_size", "input_shape"), ("type", "field_size"))}

    def __init__(self, in_shape: tuple, field_size: int):
        n = _posint(field_size, "field_size", "group_pool")
        C, H, W = in_shape
        if C % n:
            raise ShapeError(f"group_pool: {C} channels are not a whole number of fields of {n} channels")
        self.in_shape, self.field_size = tuple(in_shape), n
        self.out_shape = (C // n, H, W)
        self.windows = group_pool_windows(self.in_shape, n)
        self._check_size()

    @property
    def label(self) -> str:
        C, H, W = self.in_shape
        return f"group_pool {self.in_dim}->{self.out_dim} ({C}x{H}x{W}->{C // self.field_size}x{H}x{W}, fields of " \
               f"{self.field_size})"

    def induced_action(self, P: ConvAction, li: int = 0) -> ConvAction:
        """The permutation of the fields, when P moves fields as whole blocks with one factor each."""
        n = self.field_size
        src, fac = [], []
        for f in range(self.out_shape[0]):
            blocks = {P.source[f * n + i] // n for i in range(n)}
            factors = {P.factor[f * n + i] for i in range(n)}
            if len(blocks) != 1 or len(factors) != 1:
                raise NoPartner(f"{self.label} (hidden layer {li + 1}): the channel action on its input does not move "
                                f"field {f} as a whole block with one factor, so no action on the pooled fields "
                                "follows", inconclusive=True)
            src.append(blocks.pop())
            fac.append(factors.pop())
        return ConvAction(tuple(src), tuple(fac), P.pixel, P.hw)

    def to_json(self, declared_bias: bool = False) -> dict:
        return {"type": "group_pool", "input_shape": list(self.in_shape), "field_size": self.field_size}


class GroupPoolLayer(GroupPoolGeometry, PoolLayer):
    """escnn's GroupPooling (kind ``"group_pool"``): the maximum over each field's channels, exactly or over
    float64 (:meth:`on`).

    >>> layer = GroupPoolLayer((4, 1, 1), 2)
    >>> layer([1, 3, "-1/2", -2])
    [3, -1/2]
    """

    #: the torch classes read as this kind: a max over each field's channels (a module of one of these names
    #: with an integer ``field_size``, or escnn's exported ``MaxPoolChannels`` with its integer ``kernel_size``)
    torch_classes: ClassVar[tuple] = ("MaxPoolChannels", "GroupPooling", "GroupMaxPool")

    @staticmethod
    def examples(seed: int) -> list:
        """Small model files with a layer of this kind, ``(variant, model file, index of the layer)``: the
        kind's instances for the generic tests (tests/kinds/kind_instances.py)."""
        return _group_pool_examples(seed)


# -- the model file (symeq.layers.registry.read_layers) ----------------------------------------------

def _read_pool(spec: dict, ctx, at: str):
    from ...schema import check_keys
    from ..conv import _image_shape, read_image_layer

    kind = spec["type"]
    cls = MaxPool2dLayer if kind == "maxpool2d" else GroupPoolLayer
    check_keys(spec, at, *cls.schema[kind], error=InputError)
    if ctx.tokens is not None:
        raise InputError(f"{at}: a {kind} layer cannot follow an attention layer")
    if ctx.pool is not None:
        raise InputError(f"{at}: a {kind} layer cannot follow an average pooling (it folds into a conv2d or dense "
                         "layer only)")
    shape = _image_shape(spec, ctx.n, ctx.shape, at)
    try:
        if kind == "maxpool2d":
            layer = cls(shape, spec.get("kernel_size"), spec.get("stride"), spec.get("padding", 0))
        else:
            layer = cls(shape, spec.get("field_size"))
    except InputError as e:
        raise type(e)(f"{at}: {e}") from None
    ctx.shape = layer.out_shape
    ctx.n = layer.out_dim
    ctx.takes_over["dense"] = read_image_layer  # a dense layer after it: a whole-image kernel per neuron
    return layer


def _example_file(seed: int, pool: dict, channels: int, n: int, out_in: int, name: str) -> dict:
    """A small model file with the pooling layer ``pool`` at index 1: conv2d (relu, 3x3, padding 1) on
    1 x n x n, the pooling, flatten, an affine dense layer of 2 outputs."""
    rng = np.random.default_rng(seed)
    kernel = [[[[f"{int(v)}/4" for v in rng.integers(-4, 5, size=3)] for _ in range(3)]] for _ in range(channels)]
    return {"format": "symeq-model/1", "name": name, "input_dim": n * n,
            "layers": [{"type": "conv2d", "input_shape": [1, n, n], "kernel": kernel, "padding": 1,
                        "bias": [f"{int(v)}/4" for v in rng.integers(-2, 3, size=channels)],
                        "activation": {"type": "relu"}},
                       pool, {"type": "flatten"},
                       {"type": "dense", "weight": [[f"{int(v)}/4" for v in rng.integers(-4, 5, size=out_in)]
                                                    for _ in range(2)], "bias": ["1/2", "0"], "activation": None}]}


def _maxpool_examples(seed: int) -> list:
    """(variant, model file, index of the layer): 2x2 windows that tile, and 3x3 overlapping ones with padding."""
    tiles = {"type": "maxpool2d", "kernel_size": 2}
    padded = {"type": "maxpool2d", "kernel_size": 3, "stride": 2, "padding": 1}
    return [("tiles", _example_file(seed, tiles, 2, 4, 2 * 2 * 2, "maxpool tiles"), 1),
            ("padded", _example_file(seed + 1, padded, 2, 5, 2 * 3 * 3, "maxpool padded"), 1)]


def _group_pool_examples(seed: int) -> list:
    """(variant, model file, index of the layer): fields of 2 channels."""
    fields = {"type": "group_pool", "field_size": 2}
    return [("fields-of-2", _example_file(seed, fields, 4, 3, 2 * 3 * 3, "group pool"), 1)]


LAYER_KINDS = (MaxPool2dLayer, GroupPoolLayer)
JSON_READERS = {"maxpool2d": _read_pool, "group_pool": _read_pool}
JSON_ADVERTISED = ("maxpool2d", "group_pool")


# -- the digest form (docs/certificates.md "Digests"; symeq.digest asks the registry) ---------------------

def maxpool_digest_form(spec: dict, shape):
    """A max pooling layer (docs/conv.md): its input shape, kernel_size, stride (default: the kernel size)
    and padding (default 0) written; the shape after it."""
    layer, _ = plain_form(spec, shape)
    if spec.get("input_shape") is not None:
        shape = [int(v) for v in spec["input_shape"]]
    C, H, W = shape
    k = int(spec["kernel_size"])
    s = int(spec["stride"]) if spec.get("stride") is not None else k
    p = int(spec.get("padding", 0))
    layer.update(input_shape=[str(v) for v in shape], kernel_size=str(k), stride=str(s), padding=str(p))
    return layer, [C, (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1]


def group_pool_digest_form(spec: dict, shape):
    """A group pooling layer: its input shape and field_size written; the shape after it."""
    layer, _ = plain_form(spec, shape)
    if spec.get("input_shape") is not None:
        shape = [int(v) for v in spec["input_shape"]]
    C, H, W = shape
    n = int(spec["field_size"])
    layer.update(input_shape=[str(v) for v in shape], field_size=str(n))
    return layer, [C // n, H, W]


DIGEST_FORMS = {"maxpool2d": Form(maxpool_digest_form, image=True),
                "group_pool": Form(group_pool_digest_form, image=True)}
