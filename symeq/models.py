"""Exact models: chains of layers with rational parameters (dense x -> sigma(W x + b), conv2d, attention).

A :class:`Model` is a list of layers of the Layer protocol (dense, conv2d, attention as the first
layer; the last one affine) with an optional
:class:`~symeq.groups.FiniteGroup` acting on its input and output.  It evaluates exactly on
rational points (one point or a batch, the batch as an ``fmpq_mat`` with one column per point),
expands into polynomials in the input (``fmpq_mpoly``), and can be generated at random
*layerwise equivariant* for chosen latent representations, then hidden by :func:`scramble`.
:class:`DenseLayer` is defined in :mod:`symeq.layers.dense` (with the other kinds of the Layer
protocol, :mod:`symeq.layers.base`) and re-exported here.

Examples
--------
>>> from symeq.activations import tanh_series
>>> m = Model(2, [DenseLayer(matrix([[1, 2], [2, 1]]), [1, 1], tanh_series(3)),
...               DenseLayer(matrix([[3, 3]]), [0], None)])
>>> m.widths
[2, 2, 1]
>>> m([fmpq(0), fmpq(0)])
[4]
>>> m.polynomial_map()[0].total_degree()
3
"""

from __future__ import annotations

import contextlib
import contextvars
import random
from dataclasses import dataclass, field
from typing import Sequence

from flint import fmpq, fmpq_mat, fmpq_mpoly_ctx

from .activations import Activation
from .errors import InputError, ShapeError
from .groups import FiniteGroup
from .layers.base import polynomial_layer
from .layers.registry import any_supports, supports
from .layers.dense import DenseLayer
from .expand import expand_forward, theta_entries
from .numbers import (
    as_fmpq,
    identity,
    mat_rows,
    matrix,
    monomial_matrix,
    monomial_parts,
    nullspace,
)

__all__ = [
    "DenseLayer",
    "LayeredShape",
    "Model",
    "equivariant_basis",
    "reynolds",
    "random_equivariant_model",
    "scramble",
    "LatentElement",
]


class LayeredShape:
    """Shape bookkeeping shared by the exact :class:`Model` and the numeric twin
    (``input_dim`` and ``layers`` with ``in_dim``/``out_dim``)."""

    def check_layers(self) -> None:
        """The layer chain: at least one layer, sizes that match, only the last layer affine.

        A token-mixing layer (attention, heads: capability ``"token-mixing"`` of
        :mod:`symeq.layers.registry`) has no activation rules; it must be the first layer, and a kind
        without ``"last-layer"`` (heads) needs a layer after it.
        """
        if not self.layers:
            raise InputError("a model needs at least one layer")
        n = self.input_dim
        for i, layer in enumerate(self.layers, 1):
            if layer.in_dim != n:
                raise ShapeError(f"layer {i} expects inputs of size {layer.in_dim}, but the previous size is {n}")
            last = i == len(self.layers)
            n = layer.out_dim
            if supports(layer, "token-mixing"):
                if i != 1:
                    raise InputError(f"layer {i}: an attention layer must be the first layer")
                if last and not supports(layer, "last-layer"):
                    raise InputError(f"a {layer.kind} layer needs an output layer after it")
                continue
            if last and layer.activation is not None:
                raise InputError(f"layer {i} is the last layer and must be affine (activation null)")
            if not last and layer.activation is None:
                raise InputError(f"hidden layer {i} needs an activation (only the last layer is affine)")

    def check_group(self, group) -> None:
        if group.input_dim != self.input_dim:
            raise ShapeError(f"the group acts on inputs of size {group.input_dim}, the model takes {self.input_dim}")
        if group.output_dim != self.output_dim:
            raise ShapeError(f"the group acts on outputs of size {group.output_dim}, the model returns {self.output_dim}")

    @property
    def widths(self) -> list[int]:
        return [self.input_dim] + [l.out_dim for l in self.layers]

    @property
    def hidden_widths(self) -> list[int]:
        return self.widths[1:-1]

    @property
    def output_dim(self) -> int:
        return self.layers[-1].out_dim

    @property
    def depth(self) -> int:
        return len(self.layers)

    def chain(self):
        """The layers the theorem is about: an attention layer splits into its heads (value spaces, a
        latent space) and its output projection, which merges into the next token-wise layer (or is
        the last, affine layer): the kind's own split, over the model's numbers (exact or float).  A
        model without such a layer is its own chain."""
        first = self.layers[0]
        if not supports(first, "splits-in-chain"):
            return self
        layers = type(first).split_chain(first, self.layers[1:])
        return type(self)(self.input_dim, layers, self.group, self.name, dict(self.meta))


#: True while :func:`linear_hidden_allowed` is active: a hidden affine (degree-1) layer is then allowed
_LINEAR_HIDDEN = contextvars.ContextVar("symeq_linear_hidden", default=False)


@contextlib.contextmanager
def linear_hidden_allowed():
    """Allow hidden affine (degree-1) layers while models are built: only identifiability is decided for
    them (``symeq fibre``, :mod:`symeq.fibre.decide`); their latent group GL_n is not monomial, so every
    other command refuses them."""
    token = _LINEAR_HIDDEN.set(True)
    try:
        yield
    finally:
        _LINEAR_HIDDEN.reset(token)


@dataclass(eq=False)
class Model(LayeredShape):
    """A network f = f_L o ... o f_1 of dense layers with exact parameters.

    Parameters
    ----------
    input_dim : n_0
    layers : the dense layers; every layer but the last has an activation, the last none
    group : optional group acting on input and output (needed to verify equivariance)
    name : optional label shown in reports
    """

    input_dim: int
    layers: list[DenseLayer]
    group: FiniteGroup | None = None
    name: str = "model"
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.check_layers()
        self._dense_after_conv()
        for i, layer in enumerate(self.layers[:-1], 1):
            if not supports(layer, "token-mixing") and layer.activation.symmetry in ("affine", "constant") and not (
                    layer.activation.symmetry == "affine" and _LINEAR_HIDDEN.get()):
                raise InputError(
                    f"hidden layer {i} has a {layer.activation.symmetry} activation: its latent symmetry group "
                    "is not a group of monomial matrices; use a polynomial of degree >= 2 or relu"
                )
        if self.group is not None:
            self.check_group(self.group)

    @property
    def n_params(self) -> int:
        return sum(l.n_params if hasattr(l, "n_params") else l.in_dim * l.out_dim + l.out_dim for l in self.layers)

    @property
    def token_mixing(self) -> bool:
        """Whether the first layer mixes tokens (attention or heads; the only place such a layer may be)."""
        return supports(self.layers[0], "token-mixing")


    @property
    def tokens(self) -> int | None:
        return self.layers[0].tokens if self.token_mixing else None

    @property
    def is_polynomial(self) -> bool:
        return all(polynomial_layer(l) for l in self.layers)  # the kind says so (softmax attention: not)

    @property
    def has_relu(self) -> bool:
        return any(l.activation is not None and l.activation.kind == "relu" for l in self.layers)

    def degree(self) -> int:
        """A bound on the total degree of f as a polynomial in the input."""
        if not self.is_polynomial:
            raise InputError("only polynomial models have a degree")
        d = 1
        for l in self.layers:
            if supports(l, "token-mixing"):  # X A X^T X V: degree 3
                d *= 3
            elif l.activation is not None:
                d *= l.activation.degree
        return d

    # -- evaluation -------------------------------------------------------------------------
    def forward(self, X: fmpq_mat, upto: int | None = None) -> fmpq_mat:
        """Evaluate on a batch (one column per point); ``upto=i`` stops after layer i."""
        for l in self.layers[: upto if upto is not None else len(self.layers)]:
            X = l.forward(X)
        return X

    def __call__(self, x: Sequence) -> list:
        if len(x) != self.input_dim:
            raise ShapeError(f"the model takes inputs of size {self.input_dim}, got {len(x)}")
        X = fmpq_mat(len(x), 1, [as_fmpq(v) for v in x])
        return self.forward(X).entries()

    def polynomial_map(self, ctx=None, input_matrix: fmpq_mat | None = None) -> list:
        """f as a list of ``fmpq_mpoly`` in x0..x{n-1}; ``input_matrix`` A gives f(A x).

        Expands fully: use it for small models (see :mod:`symeq.equivariance` for the
        evaluation-based checks that avoid the expansion).
        """
        if not self.is_polynomial:
            raise InputError("only polynomial models expand into polynomials")
        if self.token_mixing:
            raise InputError("symbolic expansion of attention layers is not implemented; use the grid method")
        if ctx is None:
            ctx = fmpq_mpoly_ctx.get(("x", self.input_dim), "degrevlex")
        xs = list(ctx.gens())
        input_terms = 1
        if input_matrix is not None:
            arows = mat_rows(input_matrix)
            xs = [sum((c * v for c, v in zip(row, xs) if c != 0), ctx.from_dict({})) for row in arows]
            input_terms = max([sum(1 for c in row if c != 0) for row in arows] + [1])
        # the one forward expansion (symeq/expand.py), size-guarded before it starts
        weight, bias = theta_entries(self)
        return expand_forward(self, ctx.from_dict({}), xs, weight, bias,
                              what="expanding the model's polynomial map", input_terms=input_terms,
                              hint="--method grid or probabilistic evaluate instead of expanding")

    # -- copies and display -----------------------------------------------------------------
    def copy(self, group=...) -> "Model":
        return Model(self.input_dim, [l.copy() for l in self.layers], self.group if group is ... else group,
                     self.name, dict(self.meta))

    def with_group(self, group: FiniteGroup | None) -> "Model":
        return self.copy(group=group)

    def parameters_equal(self, other: "Model") -> bool:
        return self.widths == other.widths and all(
            a.parameters_key() == b.parameters_key() for a, b in zip(self.layers, other.layers)
        )

    def _dense_after_conv(self) -> None:
        """A dense layer after a convolution (a Flatten and a Linear, as every reader may give it) is the
        convolution with one whole-image kernel per neuron: the same function, and then every action
        after the first convolution is a channel action times a pixel permutation (docs/conv.md)."""
        layers = list(self.layers)
        for i in range(1, len(layers)):
            prev, layer = layers[i - 1], layers[i]
            if supports(prev, "image-output") and supports(layer, "plain-dense"):
                layers[i] = type(prev).from_dense_layer(layer, prev.out_shape)  # declared bias kept
        self.layers = layers

    @property
    def sparse_actions(self) -> bool:
        """Whether some layer's actions are :class:`symeq.layers.conv.ConvAction` (channel action (x)
        pixel permutation; capability ``"sparse-actions"``, a native convolution)."""
        return any_supports(self.layers, "sparse-actions")

    def __repr__(self) -> str:
        acts = ", ".join(l.activation.spec["type"] if l.activation is not None else l.kind for l in self.layers[:-1])
        return f"Model({self.name!r}, widths {self.widths}, activations [{acts}])"

    def _repr_latex_(self) -> str:
        import sympy

        parts = []
        for i, l in enumerate(self.layers, 1):
            W = sympy.Matrix([[sympy.Rational(int(x.p), int(x.q)) for x in r] for r in mat_rows(l.weight)])
            b = sympy.Matrix([sympy.Rational(int(x.p), int(x.q)) for x in l.bias])
            s = f"\\sigma_{i}" if l.activation is not None else ""
            parts.append(rf"f_{i}(x) = {s}\left({sympy.latex(W)} x + {sympy.latex(b)}\right)")
            if l.activation is not None:
                parts.append(rf"\sigma_{i}(t) = {l.activation.latex()}")
        return "$\\begin{aligned}" + r" \\ ".join(parts) + "\\end{aligned}$"


# -- equivariant linear maps --------------------------------------------------------------

def equivariant_basis(rho_in: Sequence[fmpq_mat], rho_out: Sequence[fmpq_mat]) -> list[fmpq_mat]:
    """A basis of {W : W rho_in(g) = rho_out(g) W for all generators g} (exact nullspace).

    This is EMLP's construction over Q: stack the constraints as a linear map on vec(W).

    >>> s = matrix([[0, 1], [1, 0]])
    >>> [mat_rows(B) for B in equivariant_basis([s], [s])]
    [[[0, 1], [1, 0]], [[1, 0], [0, 1]]]
    """
    n_out, n_in = rho_out[0].nrows(), rho_in[0].nrows()
    nv = n_out * n_in
    rows = []
    for A, B in zip(rho_in, rho_out):
        # (W A - B W)[i, j] = sum_k W[i,k] A[k,j] - sum_k B[i,k] W[k,j]
        for i in range(n_out):
            for j in range(n_in):
                r = [fmpq(0)] * nv
                for k in range(n_in):
                    if A[k, j] != 0:
                        r[i * n_in + k] += A[k, j]
                for k in range(n_out):
                    if B[i, k] != 0:
                        r[k * n_in + j] -= B[i, k]
                rows.append(r)
    M = fmpq_mat(len(rows), nv, [x for r in rows for x in r])
    return [fmpq_mat(n_out, n_in, v) for v in nullspace(M)]


def reynolds(W: fmpq_mat, group_in: Sequence[fmpq_mat], group_out: Sequence[fmpq_mat]) -> fmpq_mat:
    """Project W onto the equivariant maps: (1/|G|) sum_g rho_out(g)^-1 W rho_in(g).

    ``group_in``/``group_out`` list the matrices of *all* group elements (not generators).
    """
    acc = fmpq_mat(W.nrows(), W.ncols())
    for A, B in zip(group_in, group_out):
        acc += B.inv() * W * A
    return acc / len(group_in)


def _random_int_matrix(rng: random.Random, r: int, c: int, lo: int = -9, hi: int = 9) -> fmpq_mat:
    return fmpq_mat(r, c, [rng.randint(lo, hi) for _ in range(r * c)])


def _sign_twisted(rep: fmpq_mat, activation: Activation) -> fmpq_mat:
    """Pre-activation action for a post-activation latent action (signs stay for odd sigma)."""
    parts = monomial_parts(rep)
    if parts is None:
        raise InputError("latent representations must be monomial matrices")
    cols, vals = parts
    pre = []
    for v in vals:
        if v == 1:
            pre.append(fmpq(1))
        elif v == -1 and activation.symmetry == "odd":
            pre.append(fmpq(-1))
        else:
            raise InputError(
                f"the latent action entry {v} is not available for a {activation.symmetry} activation "
                f"(latent group: {activation.latent_group}); use permutation matrices"
                + (" or signed permutations" if activation.symmetry != "odd" else "")
            )
    return monomial_matrix(cols, pre)


def _latent_generators(group: FiniteGroup, spec, i: int) -> list[fmpq_mat]:
    """The generator matrices of hidden layer i's latent representation ``spec`` (see
    :func:`random_equivariant_model`): ``"regular"``, ``"input"``, ``"...*m"`` for m copies, or matrices."""
    ngen = len(group.generators)
    if isinstance(spec, str):
        base, _, mult = spec.partition("*")
        mult = int(mult or 1)
        if base == "regular":
            gens = group.regular_representation()
        elif base == "input":
            gens = [a for a, _ in group.generators]
        else:
            raise InputError(f"unknown latent representation {spec!r}; use 'regular', 'input' or matrices")
        from .numbers import block_diag

        gens = [block_diag(*([g] * mult)) for g in gens]
    else:
        gens = [m if isinstance(m, fmpq_mat) else matrix(m) for m in spec]
    if len(gens) != ngen:
        raise InputError(f"latent representation {i + 1} has {len(gens)} matrices for {ngen} generators")
    return gens


def random_equivariant_model(
    group: FiniteGroup,
    latent: Sequence,
    activations: Sequence[Activation] | Activation,
    rng: random.Random | int | None = None,
    *,
    bias: bool = True,
    weight_range: int = 9,
    name: str = "random layerwise-equivariant model",
) -> Model:
    """A random model whose every layer is equivariant for the given latent actions.

    Parameters
    ----------
    group : the group acting on input and output
    latent : for each hidden layer, either a list of generator matrices (monomial, inside the
        activation's K: permutations, or signed permutations for odd activations), or a
        string: ``"regular"`` (regular representation), ``"input"`` (the input action), or
        ``"regular*m"`` / ``"input*m"`` for m copies
    activations : one activation for all hidden layers, or one per hidden layer
    rng : random.Random or seed
    bias : draw biases (projected to the invariant ones) or use zero biases

    The weights are projections of random integer matrices by the Reynolds operator
    (exact; equal to a random element of :func:`equivariant_basis`'s span).

    Examples
    --------
    >>> from symeq.groups import mirror
    >>> from symeq.activations import tanh_series
    >>> m = random_equivariant_model(mirror(2, 3), ["regular*3", "input"], tanh_series(3), rng=1)
    >>> m.widths
    [6, 6, 6, 6]
    """
    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    if isinstance(activations, Activation):
        activations = [activations] * len(latent)
    if len(activations) != len(latent):
        raise InputError(f"{len(latent)} latent representations but {len(activations)} activations")
    elements = group.elements()

    def all_elements(gen_mats: list[fmpq_mat]) -> list[fmpq_mat]:
        # Extend generator matrices to all group elements along the Cayley-graph words.
        out = []
        for e in elements:
            m = identity(gen_mats[0].nrows())
            for gi in e.word:
                m = m * gen_mats[gi]
            out.append(m)
        return out

    reps_post: list[list[fmpq_mat]] = [_latent_generators(group, spec, i) for i, spec in enumerate(latent)]
    # validate that the latent representations are actions of the group
    from .groups import closure

    closure([tuple([a] + [r[gi] for r in reps_post]) for gi, (a, _) in enumerate(group.generators)],
            max_order=group.max_order, what=["input"] + [f"latent representation {i + 1}" for i in range(len(reps_post))])

    in_all = [e.mats[0] for e in elements]
    out_all = [e.mats[1] for e in elements]
    layers = []
    prev_post = in_all
    for i, (gens, act) in enumerate(zip(reps_post, activations)):
        pre_gens = [_sign_twisted(g, act) for g in gens]
        pre_all = all_elements(pre_gens)
        post_all = all_elements(gens)
        n = gens[0].nrows()
        W = reynolds(_random_int_matrix(rng, n, prev_post[0].nrows(), -weight_range, weight_range), prev_post, pre_all)
        if bias:
            # The admissible maps z -> alpha z + s (1 - alpha) fix z = s, so it is b - s that
            # must be invariant (s = 0 unless sigma is a shifted odd/even polynomial).
            s = act.shift
            b0 = _random_int_matrix(rng, n, 1, -weight_range, weight_range) - fmpq_mat(n, 1, [s] * n)
            b = [x + s for x in reynolds(b0, [identity(1)] * len(pre_all), pre_all).entries()]
        else:
            b = [fmpq(0)] * n
        layers.append(DenseLayer(W, b, act))
        prev_post = post_all
    n_out = group.output_dim
    W = reynolds(_random_int_matrix(rng, n_out, prev_post[0].nrows(), -weight_range, weight_range), prev_post, out_all)
    b = reynolds(_random_int_matrix(rng, n_out, 1, -weight_range, weight_range), [identity(1)] * len(out_all), out_all).entries() if bias else [fmpq(0)] * n_out
    layers.append(DenseLayer(W, b, None))
    model = Model(group.input_dim, layers, group, name)
    model.meta["latent_representations"] = reps_post
    return model


# -- latent symmetries --------------------------------------------------------------------

@dataclass
class LatentElement:
    """k in prod K_i: per hidden layer a permutation and admissible pre-activation scalings.

    Neuron j of layer i becomes neuron ``perms[i][j]`` with pre-activation
    ``alpha z + s (1 - alpha)``; its output is multiplied by ``q = sigma's factor``.
    """

    perms: list[list[int]]
    alphas: list[list]

    def post_matrices(self, model: Model) -> list[fmpq_mat]:
        """The post-activation action of k on each hidden layer (monomial matrices)."""
        out = []
        for layer, perm, alphas in zip(model.layers, self.perms, self.alphas):
            q = [layer.activation.admissible(a) for a in alphas]
            cols = [0] * len(perm)
            vals = [fmpq(0)] * len(perm)
            for j, pj in enumerate(perm):
                cols[pj] = j
                vals[pj] = q[j]
            out.append(monomial_matrix(cols, vals))
        return out


def latent_rows(model: Model, perms, scaling):
    """k . theta layer by layer, as ``[(rows, bias), ...]`` of exact lists (or None).

    ``perms[i]`` sends neuron j of hidden layer i to ``perms[i][j]``; ``scaling(i, j, row, b_j)``
    gives its scaling alpha from the (already column-permuted) incoming row and bias, or None to
    abandon (then the result is None).  Affine sign flips (sigma(-t) = c - sigma(t)) are carried
    by the offsets of :meth:`Activation.affine_admissible`: the next layer's bias absorbs them.
    Shared by :func:`apply_latent` and the orbit enumeration of :mod:`symeq.fibre.orbit`.
    """
    out = []
    prev_perm = prev_q = prev_o = None
    for i, layer in enumerate(model.layers):
        rows = [list(r) for r in mat_rows(layer.weight)]
        b = [fmpq(x) for x in layer.bias]
        if prev_perm is not None:
            # new neuron prev_perm[j] outputs q_j y_j + o_j (y_j: old neuron j), so
            # y_j = (new - o_j) / q_j: the column is divided by q_j and the bias absorbs -o_j / q_j
            new_rows = []
            for r, row in enumerate(rows):
                nr = [fmpq(0)] * len(row)
                for j, x in enumerate(row):
                    nr[prev_perm[j]] = x / prev_q[j]
                    if prev_o[j] != 0:
                        b[r] -= x * prev_o[j] / prev_q[j]
                new_rows.append(nr)
            rows = new_rows
        if i < len(model.layers) - 1:
            act, perm = layer.activation, perms[i]
            s = act.shift
            n = len(rows)
            rows2, b2, q, o = [None] * n, [None] * n, [], []
            for j in range(n):
                a = scaling(i, j, rows[j], b[j])
                if a is None:
                    return None
                a = fmpq(a)
                qo = act.affine_admissible(a)
                if qo is None:
                    raise InputError(f"scaling {a} is not admissible for the activation of layer {i + 1}")
                rows2[perm[j]] = [a * x for x in rows[j]]
                b2[perm[j]] = a * b[j] + s * (1 - a)
                q.append(qo[0])
                o.append(qo[1])
            rows, b = rows2, b2
            prev_perm, prev_q, prev_o = perm, q, o
        out.append((rows, b))
    return out


def apply_latent(model: Model, k: LatentElement) -> Model:
    """k . theta: a model with the same function and permuted, rescaled hidden neurons."""
    parts = latent_rows(model, k.perms, lambda i, j, row, b: k.alphas[i][j])
    layers = [DenseLayer(fmpq_mat(len(rows), len(rows[0]), [x for r in rows for x in r]), b, layer.activation,
                         has_bias=getattr(layer, "has_bias", None))
              for (rows, b), layer in zip(parts, model.layers)]
    return Model(model.input_dim, layers, model.group, model.name, dict(model.meta))


def scramble(model: Model, rng: random.Random | int | None = None) -> tuple[Model, LatentElement]:
    """Hide a model's structure by a random k in prod K_i; the function does not change.

    Returns the scrambled model and k.

    A bias-free model (every bias zero) stays bias-free.  Its K_i is the offset-free part
    (docs/theory.md, the absorbed-constant rule): a neuron's scaling alpha moves its pre-activation
    by s (1 - alpha), s the activation's centre, and an affine scaling adds an offset to the next
    layer's bias.  So each alpha is kept only when ``activation.admissible(alpha)`` exists (no
    offset) and s = 0 or alpha = 1; otherwise the neuron is only permuted (alpha = 1).  t + t^2
    (s = -1/2), (t + 1)^2 and the sigmoid series' sign flips therefore leave a bias-free model
    with permutations only.  Models with biases get every scaling :meth:`Activation.scale_choices`
    draws.

    >>> from symeq.groups import mirror
    >>> from symeq.activations import tanh_series, polynomial
    >>> m = random_equivariant_model(mirror(1, 2), ["regular*2"], tanh_series(3), rng=0)
    >>> s, k = scramble(m, rng=5)
    >>> x = [fmpq(1, 3), fmpq(-2)]
    >>> s(x) == m(x)
    True
    >>> m0 = Model(2, [DenseLayer([[1, 2], [3, -1]], [0, 0], polynomial([0, 1, 1])),
    ...                DenseLayer([[2, -1]], [0], None)])
    >>> s0, _ = scramble(m0, rng=1)
    >>> all(b == 0 for layer in s0.layers for b in layer.bias), s0(x) == m0(x)
    (True, True)
    """
    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    bias_free = all(b == 0 for layer in model.layers for b in (getattr(layer, "bias", None) or []))
    perms, alphas = [], []
    for layer in model.layers[:-1]:
        n = layer.out_dim
        p = list(range(n))
        rng.shuffle(p)
        perms.append(p)
        act = layer.activation
        scales = [act.scale_choices(rng) for _ in range(n)]
        if bias_free:
            # no bias to absorb s (1 - alpha) or an offset: keep the offset-free scalings only
            scales = [a if a == 1 or (act.shift == 0 and act.admissible(a) is not None) else fmpq(1)
                      for a in scales]
        alphas.append(scales)
    k = LatentElement(perms, alphas)
    return apply_latent(model, k), k
