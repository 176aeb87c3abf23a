"""The functional dimension of a ReLU (or leaky ReLU) network at theta, computed exactly.

A piecewise-linear network is affine in ``x`` on each open linear region, and on a region with a
fixed activation pattern the map ``theta -> f_theta(x)`` is a polynomial in theta.  So at a rational
theta and a rational input ``x`` where *no hidden pre-activation is 0* (checked exactly), the
Jacobian ``J(x) = d f_theta(x) / d theta`` exists and is a rational matrix: written with the
output sensitivities ``G_l = d f / d z_l`` (``G_L = D_L``, ``G_l = G_{l+1} W_{l+1} D_l``, ``D_l``
the diagonal of activation slopes at ``x``: 1 on the active side, 0 for ReLU or the slope ``a``
of a leaky ReLU on the other), ``d f / d W_l[i, j] = G_l[:, i] h_{l-1}[j]`` and
``d f / d b_l[i] = G_l[:, i]``.

The rank of ``J`` stacked over a finite sample ``X`` is computed here *modulo a prime* ``p``
(``nmod_mat``): a nonzero minor mod p is a nonzero minor over Q, so the rank mod p is a **proven
lower bound** of the rank over Q, hence of the functional dimension (Grigsby, Lindsey and Rolnick
2023: the supremum of that rank over finite samples).

The upper bound is ``#params - dim T``, with ``T`` the tangent space at theta of the orbit of the
positive rescalings (``sigma(alpha t) = alpha sigma(t)`` for ``alpha > 0``, ReLU and leaky ReLU
alike): for hidden neuron ``(l, i)`` the direction multiplies row ``i`` of ``W_l`` and ``b_l[i]``
by ``1 + t`` and column ``i`` of ``W_{l+1}`` by ``1 / (1 + t)``.  ``f_theta(x)`` is constant along
these curves, so ``J T = 0`` at every ``x``.  ``dim T`` is *computed* (the rank of these
directions), not assumed: a neuron with zero incoming weights, bias and outgoing weights gives
the zero direction.

**Local identifiability.**  When the rank on the sample reaches ``#params - dim T``, theta is
locally identifiable up to positive rescaling: near theta every ``theta'`` with
``f_theta'(X) = f_theta(X)`` (a fortiori with ``f_theta' = f_theta``) lies on the orbit of theta.
Proof: no pre-activation at the points of ``X`` is 0, so the activation patterns at ``X`` stay
fixed on a neighbourhood ``U`` of theta, and ``F: theta' -> f_theta'(X)`` is polynomial on ``U``.
The rank of ``F`` is lower semicontinuous, and so is ``dim T(theta')``; with
``rank F(theta') <= #params - dim T(theta')`` the rank is constant ``= #params - dim T(theta)`` on
a smaller neighbourhood.  By the constant-rank theorem the fibre of ``F`` through theta is near
theta a submanifold of dimension ``dim T(theta)``; it contains the orbit, an immersed submanifold
of the same dimension, which is therefore open in it.  This is the condition of Bona-Pellissier,
Bachoc and Malgouyres (NeurIPS 2022): fix one nonzero outgoing weight of every hidden neuron
(this removes the scalings) and ask that the *reduced* Jacobian on ``X`` have full column rank
``#params - #hidden``.  The two conditions are equivalent when ``dim T = #hidden`` (a kernel
vector of the reduced Jacobian would be a combination of scaling directions vanishing on every
fixed weight, and these force all coefficients to 0 from the last hidden layer back); both are
computed and reported (:attr:`ReluFunctionalDimension.reduced`).

**The samples.**  ``sample="regions"`` enumerates every open linear region
(:func:`symeq.relu.regions.linear_regions`) and takes ``n + 1`` affinely independent rational
points in each: ``J(x)`` is affine in ``x`` on a region, so these points span every row ``J``
can have there, and the rank is then the functional dimension itself (``exact``: the supremum
over the inputs where ``theta -> f_theta(x)`` is differentiable; a region on which some
pre-activation is constant 0 has no such input and is skipped), unless it is only a lower bound
mod p below the bound (then the rank over Q is computed when the matrix is small, or the
explained kernel closes the gap).  ``sample="random"`` takes random rational points (each checked off every bent
hyperplane) and gives a lower bound; ``"auto"`` starts random and enumerates regions when the
bound is missed and the input dimension is small.

**When the bound is missed**, the shortfall is explained where a reason is proven, each with
explicit kernel directions ``E`` of ``J`` on the sample (checked: ``J E = 0``):

* *inactive* neurons: a ReLU neuron on its zero side at every sample point (its incoming weights,
  bias and outgoing weights have zero Jacobian columns); with ``sample="regions"`` it is dead on
  all of ``R^n``;
* *linear* groups: neurons of one layer on a fixed side at every sample point act linearly there,
  and ``GL`` of the group acts on them (``|S|^2 - |S|`` directions beyond the scalings);
* *clones*: neurons of one layer with ``(w_j, b_j) = c (w_i, b_i)``, ``c > 0``: their outgoing
  columns trade, ``n_{l+1}`` directions per extra clone (and their incoming rows, when the outgoing
  columns are parallel);
* *cancelled pairs*: ``(w_j, b_j) = -c (w_i, b_i)``, ``c > 0``, with ``col_i + c col_j = 0``: since
  ``sigma(z) - sigma(-z) = (1 + a) z`` the pair is an affine map of the layer below (the hidden
  symmetries of Bokman and Kahl's width-4 identity): its shift is absorbed by the next bias, and
  GL of the pairs mixes them (``|Pi| + |Pi|^2 - |Pi|`` directions for ``|Pi|`` pairs).

``rank(T + E)`` bounds the rank on the sample from above: when ``rank J = #params - rank(T + E)``
the shortfall is fully explained (and the rank on the sample exact); otherwise the rest is
reported as unexplained (hidden symmetries, or a sample too small).

Examples
--------
>>> net = [([[1, 2], [3, -1], [-2, 1]], [1, -1, 2], True), ([[1, -1, 2]], [0], False)]
>>> r = relu_functional_dimension(net, sample="regions")
>>> r.params, r.orbit_dim, r.bound, r.rank, r.exact, r.locally_identifiable
(13, 3, 10, 10, True, True)
>>> r.reduced["holds"]
True
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from flint import fmpq, fmpq_mat, nmod_mat

from ..backends import Exact, Modular, reverse_jacobian
from ..errors import InputError, LimitExceeded
from ..layers.dense import DenseProgram
from ..layers.registry import supports
from .lp import as_fmpq

__all__ = ["ReluFunctionalDimension", "relu_functional_dimension", "exact_functional_dimension", "network_slopes",
           "activation_slope", "PRIMES", "MAX_PARAMS", "MAX_ENTRIES"]

#: primes for the ranks (below 2^31, so that numpy int64 products of two residues cannot overflow)
PRIMES = (2147483647, 2147483629, 2147483587)
#: the size guard: parameters, and entries of one Jacobian block (raise with the keyword arguments)
MAX_PARAMS = 6000
MAX_ENTRIES = 8_000_000
#: the rank over Q (fmpq_mat) is tried only below this many entries
EXACT_Q_ENTRIES = 40_000
_ZERO = fmpq(0)


@dataclass
class ReluFunctionalDimension:
    """The exact functional-dimension result of :func:`relu_functional_dimension`.

    Attributes
    ----------
    rank : int
        A proven lower bound of the functional dimension: the rank of the Jacobian on the sample.
    exact : bool
        Whether ``rank`` is the functional dimension itself (it meets the upper bound, or every
        linear region was sampled and the rank was computed over Q).
    params, orbit_dim, bound : int
        ``#params``, ``dim T`` (the positive-scaling orbit's tangent dimension, computed) and the
        upper bound ``params - orbit_dim``.
    hidden : int
        Number of hidden (activated) neurons.
    locally_identifiable : bool
        ``rank == bound``: proven locally identifiable up to positive rescaling (module docstring).
    reduced : dict
        The Bona-Pellissier-Bachoc-Malgouyres condition: the fixed weights, the reduced rank and
        whether it has full column rank.
    shortfall : dict
        ``bound - rank`` and its explanation (``causes``, ``explained``, ``unexplained``).
    points, sample, regions, prime, method : as computed.
    """

    rank: int
    exact: bool
    params: int
    orbit_dim: int
    bound: int
    hidden: int
    points: int
    sample: str
    prime: int
    regions: int | None = None
    reduced: dict = field(default_factory=dict)
    shortfall: dict = field(default_factory=dict)
    skipped: int = 0
    zero_neurons: list = field(default_factory=list)
    #: the rational sample points the rank was taken at (for the jacobian-rank certificate, symeq.fibre.decide)
    sample_points: list = field(default_factory=list, repr=False)
    method: str = ("exact Jacobian rank modulo a prime at rational points off every bent hyperplane "
                   "(a proven lower bound of the functional dimension)")

    @property
    def locally_identifiable(self) -> bool:
        """Proven locally identifiable (False: not proven).  With :attr:`zero_neurons` the rank is
        that of theta without them, and theta itself is not a point where the map is smooth: no
        local claim is made."""
        return self.rank == self.bound and not self.zero_neurons

    def summary(self) -> str:
        """One line: the rank, what it proves, and the shortfall's explanation."""
        what = "the functional dimension" if self.exact else "a proven lower bound of the functional dimension"
        s = (f"exact Jacobian rank {self.rank} ({what}) against #params - dim T = {self.params} - "
             f"{self.orbit_dim} = {self.bound}")
        if self.zero_neurons:
            s = (f"after removing {len(self.zero_neurons)} neuron(s) with zero incoming weights and bias (they "
                 f"compute 0; theta -> f_theta is not differentiable at theta itself): " + s)
            if self.rank == self.bound:
                return s + " (no local claim at theta)"
        if self.locally_identifiable:
            return s + ": locally identifiable (up to positive rescaling)"
        sf = self.shortfall
        s += f": short by {self.bound - self.rank}"
        if sf.get("causes"):
            s += "; " + "; ".join(c["text"] for c in sf["causes"])
        if sf.get("unexplained"):
            why = ("hidden symmetries: kernel directions beyond the rescalings, inactive neurons, linear groups, "
                   "clones and cancelled pairs" if self.exact else "hidden symmetries, or a sample too small")
            s += f"; {sf['unexplained']} direction(s) unexplained ({why})"
        return s

    def to_json(self) -> dict:
        return {"rank": self.rank, "exact": self.exact, "params": self.params, "dim_T": self.orbit_dim,
                "bound": self.bound, "hidden": self.hidden, "locally_identifiable": self.locally_identifiable,
                "points": self.points, "sample": self.sample, "regions": self.regions, "prime": self.prime,
                "skipped_points": self.skipped, "zero_neurons": [list(z) for z in self.zero_neurons],
                "reduced": self.reduced, "shortfall": self.shortfall,
                "method": self.method, "label": "exact lower bound (rank mod p), a proof",
                "summary": self.summary()}


# ----------------------------------------------------------------------------------------------
# the network: plain layers with activation slopes
# ----------------------------------------------------------------------------------------------


def _slope_of(act, where: str):
    """None for an affine layer, else the slope on the negative side (0 for ReLU)."""
    if act is None or act is False:
        return None
    if act is True:
        return _ZERO
    if isinstance(act, dict):  # {"slope": ...}
        act = act.get("slope")
    a = as_fmpq(act)
    if a == 1 or a == -1:
        raise InputError(f"{where}: a leaky ReLU slope must be a rational other than 1 (linear) and -1 (|t|, "
                         f"whose latent group is larger), got {a}")
    return a


def network_slopes(model) -> list:
    """``[(W rows, b, slope or None), ...]`` with fmpq entries from a Model or plain layers.

    The third entry of a plain layer is ``False`` (affine), ``True`` (ReLU, slope 0) or a
    rational slope (leaky ReLU ``t -> t`` for ``t > 0``, ``a t`` for ``t < 0``).  A model's
    activations are asked for their slopes (:func:`activation_slope`), not their names.
    """
    if hasattr(model, "layers") and hasattr(model, "input_dim"):
        from ..numbers import mat_rows

        out = []
        for i, l in enumerate(model.layers):
            if not supports(l, "dense-rows"):  # the registry's query: dense W rows and b
                raise InputError(f"layer {i + 1} is {l.kind}: the exact piecewise-linear tools take dense layers")
            out.append((mat_rows(l.weight), [as_fmpq(v) for v in l.bias],
                        None if l.activation is None else activation_slope(l.activation, f"layer {i + 1}")))
        return out
    out = []
    for i, layer in enumerate(model):
        try:
            W, b, act = layer
        except (TypeError, ValueError):
            raise InputError(f"layer {i + 1} must be a triple (W, b, relu or slope)") from None
        out.append(([[as_fmpq(v) for v in r] for r in W], [as_fmpq(v) for v in b], _slope_of(act, f"layer {i + 1}")))
    return out


def activation_slope(act, where: str = "activation"):
    """The negative-side slope of a positively homogeneous piecewise-linear activation
    (``sigma(t) = t`` for ``t > 0``, ``a t`` for ``t < 0``), asked from the activation itself:
    ReLU gives 0, a leaky ReLU its ``slope``; anything else is refused (:class:`InputError`)."""
    slopes = getattr(act, "pl_slopes", None)
    if callable(slopes):
        slopes = slopes()
    if slopes is not None:
        neg, pos = slopes
        if as_fmpq(pos) != 1:
            raise InputError(f"{where}: the piecewise-linear tools take activations with slope 1 for t > 0")
        return _slope_of(neg, where)
    if act.kind == "relu":
        return _ZERO
    spec = act.to_spec() if hasattr(act, "to_spec") else {}
    if spec.get("type") == "leaky_relu" and "slope" in spec:
        return _slope_of(spec["slope"], where)
    raise InputError(f"{where}: {spec.get('type', act)!r} is not piecewise linear; the exact ReLU tools take "
                     "relu and leaky_relu")


def _check_shapes(layers) -> tuple[int, int]:
    if not layers:
        raise InputError("a network needs at least one layer")
    n = len(layers[0][0][0]) if layers[0][0] else 0
    prev = n
    for i, (W, b, _) in enumerate(layers):
        if not W or len(W) != len(b) or any(len(r) != prev for r in W):
            raise InputError(f"layer {i}: W must be {len(b)} x {prev} with {len(b)} biases")
        prev = len(W)
    if n == 0:
        raise InputError("the network has input dimension 0")
    return n, prev


# ----------------------------------------------------------------------------------------------
# modular arithmetic in numpy (residues < 2^31, products < 2^62)
# ----------------------------------------------------------------------------------------------


_BACKENDS: dict = {}


def _mod(v: fmpq, p: int) -> int:
    """v mod p; a Denominator (ZeroDivisionError) when p divides v's denominator."""
    bk = _BACKENDS.get(p)
    if bk is None:
        bk = _BACKENDS[p] = Modular(p)
    return bk.scalar(v)


def _programs(layers, bk) -> list:
    """The dense kind's program (symeq/layers/dense/__init__.py) of each plain layer over the backend ``bk``: every
    layer with biases (the declared space is restricted afterwards); the activation is supplied pointwise
    from the exact signs (:func:`_slopes`)."""
    return [DenseProgram(bk, W, b, True, None) for W, b, _ in layers]


def _slopes(bk, layers, signs) -> list:
    """Per layer ``pointwise(Z) -> (sigma(Z), sigma'(Z))`` from the exact signs at the points: the slope is
    1 on the positive side and the layer's ``a`` on the other (None: an affine layer)."""
    import numpy as np

    out = []
    for (_, _, a), S in zip(layers, signs):
        if a is None:
            out.append(None)
            continue
        D = bk.where(np.asarray(S, dtype=np.int64).reshape(len(S), -1) > 0, bk.scalar(1), bk.scalar(a))
        out.append(lambda Z, D=D: (bk.mul(Z, D), D))
    return out


def _columns(bk, X):
    """The points (lists of rationals) as the columns of a backend array (n x N)."""
    return bk.permute(bk.asarray(X, (len(X), len(X[0]))), (1, 0))


# ----------------------------------------------------------------------------------------------
# sample points
# ----------------------------------------------------------------------------------------------


def _exact_forward(layers, X):
    """Exact pre-activations at the points ``X`` (the dense kind's forward over the exact backend): per
    activated layer the sign matrix (+1 / -1, 0 where the pre-activation is 0), or None for an affine
    layer; returns ``(signs per layer, bad point set)`` (the points with some zero pre-activation)."""
    import numpy as np

    bk = Exact()
    H = _columns(bk, X)
    signs, bad = [], set()
    for prog, (_, _, a) in zip(_programs(layers, bk), layers):
        Z = prog.pre_activation(H)
        if a is None:
            signs.append(None)
            H = Z
            continue
        pos, neg = Z > 0, Z < 0
        bad.update(int(j) for j in np.nonzero(~(pos | neg))[1])
        signs.append(np.where(pos, 1, np.where(neg, -1, 0)).tolist())
        H = Z.copy()  # a zero pre-activation stays 0: sigma(0) = 0
        H[neg] = H[neg] * a if a != 0 else _ZERO
    return signs, bad


def _random_points(n: int, N: int, rng: random.Random, scale: int = 3) -> list:
    out = []
    for _ in range(N):
        d = rng.randint(1, 9)
        out.append([fmpq(rng.randint(-scale * 9 * d, scale * 9 * d), 9 * d) for _ in range(n)])
    return out


def _region_points(layers01, limit: int, deadline=None):
    """``n + 1`` affinely independent rational points in every open linear region (their
    pattern is the region's: each step keeps every region inequality strict)."""
    from .regions import linear_regions

    pts = []
    count = 0
    for region in linear_regions(layers01, limit=limit):
        count += 1
        if deadline is not None and count % 64 == 0:
            deadline.check(f"sampling linear regions ({count} so far)")
        x0 = list(region.point)
        n = len(x0)
        pts.append(x0)
        slack = [(sum((a * x for a, x in zip(aa, x0)), _ZERO) + c, aa) for aa, c in region.inequalities]
        for k in range(n):
            eps = fmpq(1)
            for s, aa in slack:
                if aa[k] != 0:
                    e = s / (2 * abs(aa[k]))
                    if e < eps:
                        eps = e
            x = list(x0)
            x[k] = x[k] + eps
            pts.append(x)
    return pts, count


# ----------------------------------------------------------------------------------------------
# the Jacobian mod p
# ----------------------------------------------------------------------------------------------


def _param_offsets(layers) -> list:
    offs, k = [], 0
    for W, b, _ in layers:
        offs.append(k)
        k += len(W) * len(W[0]) + len(b)
    return offs + [k]


def _jacobian_mod(layers, X, signs, p: int):
    """The stacked Jacobian ``(N m) x P`` mod p (numpy int64) at the points ``X``: the dense kind's reverse
    mode over ``Modular(p)``, the slopes taken from the exact signs."""
    bk = Modular(p)
    return reverse_jacobian(_programs(layers, bk), _columns(bk, X), bk, pointwise=_slopes(bk, layers, signs))


def _nmod(rows, ncols: int, p: int):
    import numpy as np

    rows = np.asarray(rows, dtype=np.int64).reshape(-1, ncols)
    return nmod_mat(rows.shape[0], ncols, [int(v) for v in rows.ravel()], p)


def _rank_rows(rows, ncols: int, p: int) -> int:
    if len(rows) == 0:
        return 0
    return _nmod(rows, ncols, p).rank()


# ----------------------------------------------------------------------------------------------
# symmetry directions and the explanation of a shortfall
# ----------------------------------------------------------------------------------------------


def _hidden(layers) -> list:
    """The hidden neurons: those of activated layers before the last (an activated output layer
    has no rescaling symmetry: its outputs are observed)."""
    return [(li, i) for li, (W, _, a) in enumerate(layers[:-1]) if a is not None for i in range(len(W))]


def _scaling_direction(layers, offs, li, i, P):
    """The tangent of the positive rescaling of neuron (li, i): + its incoming row and bias, - its
    outgoing column (none for an activated output layer)."""
    v = [_ZERO] * P
    W, b, _ = layers[li]
    nprev = len(W[0])
    o = offs[li]
    for j in range(nprev):
        v[o + i * nprev + j] = W[i][j]
    v[o + len(W) * nprev + i] = b[i]
    if li + 1 < len(layers):
        W2 = layers[li + 1][0]
        o2 = offs[li + 1]
        for k in range(len(W2)):
            v[o2 + k * len(W) + i] -= W2[k][i]
    return v


def _explain(layers, offs, signs, P, regions_sampled: bool) -> tuple[list, list]:
    """Kernel directions of J on the sample with a proven reason: ``(causes, vectors)``."""
    causes, vecs = [], []
    L = len(layers)
    where = "on all of R^n (every linear region sampled)" if regions_sampled else "at every sample point"
    for li, (W, b, a) in enumerate(layers):
        if a is None:
            continue
        nxt = layers[li + 1][0] if li + 1 < L else None
        dead, side = [], {}
        for i, row in enumerate(signs[li]):
            s = set(row)
            if len(s) == 1:
                side[i] = s.pop()
                if side[i] < 0 and a == 0:
                    dead.append(i)
        ctx = (layers, offs, li, P, where, causes, vecs)
        _explain_inactive(ctx, dead, nxt)
        _explain_linear(ctx, side, nxt)
        if nxt is not None:
            _explain_pairs(ctx, dead, nxt)
            _explain_clones(ctx, dead, nxt)
    return causes, vecs


def _unpack(ctx):
    layers, offs, li, P, where, causes, vecs = ctx
    W, b, a = layers[li]
    return layers, offs, li, P, where, causes, vecs, W, b, a, len(W[0]), offs[li]


def _explain_inactive(ctx, dead, nxt) -> None:
    """A ReLU neuron on its zero side at every sample point: its incoming weights, bias and outgoing weights."""
    layers, offs, li, P, where, causes, vecs, W, b, a, nprev, o = _unpack(ctx)
    for i in dead:
        d = []
        for j in range(nprev):
            d.append(o + i * nprev + j)
        d.append(o + len(W) * nprev + i)
        if nxt is not None:
            d += [offs[li + 1] + k * len(W) + i for k in range(len(nxt))]
        for c in d:
            v = [_ZERO] * P
            v[c] = fmpq(1)
            vecs.append(v)
        causes.append({"cause": "inactive", "layer": li + 1, "neuron": i + 1,
                       "text": f"neuron {i + 1} of hidden layer {li + 1} is inactive {where}"})


def _explain_linear(ctx, side, nxt) -> None:
    """Neurons of one layer on a fixed (non-zero-slope) side: linear on the sample, GL of the group acts."""
    layers, offs, li, P, where, causes, vecs, W, b, a, nprev, o = _unpack(ctx)
    # groups of neurons on one fixed (non-zero-slope) side: linear on the sample, GL acts
    lin = [i for i, s in side.items() if not (s < 0 and a == 0)]
    if len(lin) >= 2 and nxt is not None:
        for r in lin:
            for c in lin:
                if r == c:
                    continue
                # A = E_rc: delta W_l[r,:] = W_l[c,:], delta b_r = b_c,
                # delta W_{l+1}[:, S] = -W_{l+1}[:, S] D A D^-1: column c gets -W_{l+1}[:, r] d_r / d_c
                v = [_ZERO] * P
                for j in range(nprev):
                    v[o + r * nprev + j] = W[c][j]
                v[o + len(W) * nprev + r] = b[c]
                dr = fmpq(1) if side[r] > 0 else a
                dc = fmpq(1) if side[c] > 0 else a
                for k in range(len(nxt)):
                    v[offs[li + 1] + k * len(W) + c] -= nxt[k][r] * dr / dc
                vecs.append(v)
        causes.append({"cause": "linear", "layer": li + 1, "neurons": [i + 1 for i in lin],
                       "text": f"neurons {[i + 1 for i in lin]} of hidden layer {li + 1} stay on one side "
                               f"{where}: they act linearly and GL({len(lin)}) mixes them"})


def _explain_pairs(ctx, dead, nxt) -> None:
    """Cancelled opposite pairs: an affine map of the layer below (the next bias absorbs the shift)."""
    layers, offs, li, P, where, causes, vecs, W, b, a, nprev, o = _unpack(ctx)
    # cancelled opposite pairs: (w_j, b_j) = -c (w_i, b_i), c > 0, and col_i + c col_j = 0, so that
    # col_i sigma(z) + col_j sigma(-c z) = (1 + a) col_i z: the pair is an affine map of the layer below
    pairs = _cancelled_pairs(W, b, nxt, dead)
    if pairs:
        onep = fmpq(1) + a
        ob = offs[li + 1] + len(nxt) * len(W)  # the next layer's biases
        width = len(W)

        def put_row(v, i, row, bias, scale):
            for t in range(nprev):
                v[o + i * nprev + t] += scale * row[t]
            v[o + width * nprev + i] += scale * bias

        for i, j, c in pairs:  # the pair's shift z -> z + t, absorbed by the next bias
            v = [_ZERO] * P
            v[o + width * nprev + i] = fmpq(1)
            v[o + width * nprev + j] = -c
            for k in range(len(nxt)):
                v[ob + k] = -onep * nxt[k][i]
            vecs.append(v)
        for ip, jp, cp in pairs:  # GL of the pairs: z_p -> z_p + t z_q, the outgoing columns of q absorb it
            for iq, jq, cq in pairs:
                if ip == iq:
                    continue
                v = [_ZERO] * P
                put_row(v, ip, W[iq], b[iq], fmpq(1))
                put_row(v, jp, W[iq], b[iq], -cp)
                for k in range(len(nxt)):
                    v[offs[li + 1] + k * width + iq] -= nxt[k][ip]
                    v[offs[li + 1] + k * width + jq] += nxt[k][ip] / cq
                vecs.append(v)
        causes.append({"cause": "pairs", "layer": li + 1, "pairs": [[i + 1, j + 1] for i, j, _ in pairs],
                       "text": f"{len(pairs)} cancelled pair(s) of opposite neurons in hidden layer {li + 1} "
                               f"({', '.join(f'{i + 1}/{j + 1}' for i, j, _ in pairs)}): sigma(z) - "
                               "sigma(-z) is linear, so each pair is an affine map whose bias the next layer "
                               f"absorbs and GL({len(pairs)}) mixes them"})


def _explain_clones(ctx, dead, nxt) -> None:
    """Clones (w_j, b_j) = c (w_i, b_i), c > 0: their outgoing columns trade (and incoming rows when parallel)."""
    layers, offs, li, P, where, causes, vecs, W, b, a, nprev, o = _unpack(ctx)
    # clones: (w_j, b_j) = c (w_i, b_i) with c > 0
    seen = {}
    for i, row in enumerate(W):
        vec = list(row) + [b[i]]
        first = next((x for x in vec if x != 0), None)
        if first is None:
            continue
        key = tuple(x / abs(first) for x in vec)
        if key in seen:
            i0 = seen[key]
            c = abs(first) / abs(next(x for x in list(W[i0]) + [b[i0]] if x != 0))
            if i0 in dead or i in dead:
                continue
            for k in range(len(nxt)):
                v = [_ZERO] * P
                v[offs[li + 1] + k * len(W) + i0] = c
                v[offs[li + 1] + k * len(W) + i] = fmpq(-1)
                vecs.append(v)
            # the outgoing columns parallel (col_i = lam col_i0): the incoming rows trade too,
            # since G_l[:, i] = lam G_l[:, i0] at every point (same side: c > 0)
            col0 = [nxt[k][i0] for k in range(len(nxt))]
            col1 = [nxt[k][i] for k in range(len(nxt))]
            k0 = next((k for k, x in enumerate(col0) if x != 0), None)
            if k0 is not None and all(col1[k] * col0[k0] == col0[k] * col1[k0] for k in range(len(nxt))):
                lam = col1[k0] / col0[k0]
                for j in range(nprev + 1):
                    v = [_ZERO] * P
                    c0 = o + i0 * nprev + j if j < nprev else o + len(W) * nprev + i0
                    c1 = o + i * nprev + j if j < nprev else o + len(W) * nprev + i
                    v[c0] = lam
                    v[c1] = fmpq(-1)
                    vecs.append(v)
            causes.append({"cause": "clone", "layer": li + 1, "neurons": [i0 + 1, i + 1],
                           "text": f"neurons {i0 + 1} and {i + 1} of hidden layer {li + 1} are clones "
                                   f"((w, b) proportional with factor {c} > 0)"})
        else:
            seen[key] = i

def _cancelled_pairs(W, b, nxt, dead) -> list:
    """Pairs (i, j, c) of neurons with (w_j, b_j) = -c (w_i, b_i), c > 0, whose outgoing columns cancel
    (col_i + c col_j = 0); each neuron in at most one pair."""
    out, used = [], set(dead)
    rows = [list(r) + [bi] for r, bi in zip(W, b)]
    for i in range(len(W)):
        if i in used or not any(rows[i]):
            continue
        piv = next(t for t, x in enumerate(rows[i]) if x != 0)
        for j in range(i + 1, len(W)):
            if j in used or rows[j][piv] == 0:
                continue
            c = -rows[j][piv] / rows[i][piv]
            if c <= 0 or any(rows[j][t] != -c * rows[i][t] for t in range(len(rows[i]))):
                continue
            if all(nxt[k][i] + c * nxt[k][j] == 0 for k in range(len(nxt))):
                out.append((i, j, c))
                used.update((i, j))
                break
    return out


# ----------------------------------------------------------------------------------------------
# the public function
# ----------------------------------------------------------------------------------------------


def _layers01(layers):
    """The layers for the region enumeration: bool for ReLU, the slope for a leaky ReLU."""
    return [(W, b, False if a is None else (True if a == 0 else a)) for W, b, a in layers]


def relu_functional_dimension(model, *, sample: str = "auto", points: int | None = None, seed: int = 0,
                              region_limit: int = 2000, max_params: int = MAX_PARAMS,
                              max_entries: int = MAX_ENTRIES, deadline=None) -> ReluFunctionalDimension:
    """The functional dimension of a ReLU / leaky ReLU network at theta, exactly (module docstring).

    Parameters
    ----------
    model : Model or list of (W, b, relu or slope)
        The network at a rational theta.
    sample : {"auto", "random", "regions"}
        Where the Jacobian is taken (module docstring): ``"auto"`` takes random points, then (when
        the bound is missed and the input dimension is at most 4) every linear region.
    points : int, optional
        Number of random points per batch (default: enough rows for ``#params`` plus a margin).
    seed : int
        Seed of the random points.
    region_limit : int
        At most this many linear regions are enumerated (past it ``"auto"`` keeps the random
        sample; ``"regions"`` raises :class:`~symeq.relu.regions.RegionLimitExceeded`).
    max_params, max_entries : int
        The size guard, checked before any work: parameters, and entries of the Jacobian.
    deadline : :class:`~symeq.budget.Deadline`, optional
        Checked between the steps.

    Returns
    -------
    ReluFunctionalDimension

    Raises
    ------
    LimitExceeded
        Past the size guard (before any work).
    InputError
        A layer that is not dense with a positively homogeneous piecewise-linear activation, or
        a theta at which every sampled point has a zero hidden pre-activation (then theta ->
        f_theta(x) is not differentiable and the functional dimension is not defined).
    """
    if sample not in ("auto", "random", "regions"):
        raise InputError(f"sample must be auto, random or regions, got {sample!r}")
    net = _Net(model, max_params, max_entries, points)
    check = deadline.check if deadline is not None else (lambda what: None)
    T = net.restrict([_scaling_direction(net.layers, net.offs, li, i, net.P) for li, i in net.hidden])
    p = _choose_prime(net.layers, T)
    Tm = _rows_mod(T, p, net.Pd)
    dimT = dimT_p = _rank_rows(Tm, net.Pd, p) if T else 0
    if T and dimT < len(T) and len(T) * net.Pd <= EXACT_Q_ENTRIES * 5:
        # the rank mod p is only a lower bound of dim T (so P - dimT an upper bound of the bound):
        # exactly over Q when it is small
        dimT = fmpq_mat(len(T), net.Pd, [x for v in T for x in v]).rank()
    bound = net.Pd - dimT
    best, mode, nregions = _sample(net, sample, seed, region_limit, bound, p, check, deadline)
    X, signs, J, rank, skipped = best
    # points dropped in a region enumeration lie in regions where some pre-activation is
    # constant 0: theta -> f_theta(x) is differentiable at no point of them, so they add nothing
    regions_sampled = mode == "regions"
    exact = rank == bound
    if not exact and J.shape[0] * net.P <= EXACT_Q_ENTRIES:
        check("rank of the Jacobian over Q")
        rank = max(rank, _rank_over_q(net.layers, X, signs, net.cols))
        exact = rank == bound or regions_sampled
    reduced = _reduced(net.layers, net.offs, net.hidden, J, net.P, p, net.cols)
    shortfall = {"size": bound - rank}
    if rank < bound:
        full = _shortfall(net, signs, J, p, T, Tm, dimT_p, rank, bound, regions_sampled and skipped == 0, shortfall)
        if full and regions_sampled:
            exact = True  # rank_p <= rank_Q <= P - dim(T + E) <= P - rank_p(T + E) = rank_p
    return ReluFunctionalDimension(rank=rank, exact=bool(exact), params=net.Pd, orbit_dim=dimT, bound=bound,
                                   hidden=len(net.hidden), points=len(X), sample=mode, prime=p, regions=nregions,
                                   reduced=reduced, shortfall=shortfall, skipped=skipped, zero_neurons=net.zero,
                                   sample_points=X)


class _Net:
    """The plain layers (zero neurons pruned) with their parameter layout, the declared columns and the
    size guard, checked here before any work."""

    def __init__(self, model, max_params: int, max_entries: int, points):
        from ..sizes import check_memory

        layers = network_slopes(model)
        self.n, self.m = _check_shapes(layers)
        # the declared parameter space: a layer given no bias ("bias": null) has no bias parameters
        flags = tuple(getattr(l, "has_bias", True) is not False for l in model.layers) if hasattr(model, "layers") \
            else (True,) * len(layers)
        self.layers, self.zero = _prune_zero_neurons(layers)
        self.offs = _param_offsets(self.layers)
        self.P = P = self.offs[-1]
        # the columns of the declared parameters (all of them when every layer has biases); the Jacobian and
        # the symmetry directions are computed in the full space, then restricted: a direction that moves a
        # bias the model does not have is not one of its symmetries
        self.cols = [c for li, (W, _, _) in enumerate(self.layers) for c in range(self.offs[li], self.offs[li + 1])
                     if flags[li] or c < self.offs[li] + len(W) * len(W[0])]
        self.Pd = len(self.cols)
        self.undeclared = sorted(set(range(P)) - set(self.cols))
        if P > max_params:
            raise LimitExceeded(limit="parameters", value=P, maximum=max_params, option="max_params",
                                what="exact ReLU functional dimension")
        self.hidden = _hidden(self.layers)
        m = self.m
        self.N = N = points if points is not None else -(-P // m) + 4
        if N < 1:
            raise InputError("points must be at least 1")
        self.max_entries = max_entries
        if 2 * N * m * P > max_entries:
            raise LimitExceeded(limit="Jacobian entries", value=2 * N * m * P, maximum=max_entries,
                                option="max_entries", what="exact ReLU functional dimension")
        check_memory(2 * N * m * P * 120, "exact ReLU functional dimension (the Jacobian mod p)")

    def restrict(self, vecs):
        """The directions that move declared parameters only, on the declared columns."""
        if not self.undeclared:
            return vecs
        return [[v[c] for c in self.cols] for v in vecs if not any(v[c] != 0 for c in self.undeclared)]

    def RJ(self, J):
        return J if self.Pd == self.P else J[:, self.cols]

    def jac(self, X, p: int):
        """(kept points, their signs, J mod p, number of points dropped)."""
        import numpy as np

        signs, bad = _exact_forward(self.layers, X)
        keep = [j for j in range(len(X)) if j not in bad]
        X = [X[j] for j in keep]
        signs = [None if S is None else [[row[j] for j in keep] for row in S] for S in signs]
        if not X:
            return X, signs, np.zeros((0, self.P), dtype=np.int64), len(bad)
        try:
            return X, signs, _jacobian_mod(self.layers, X, signs, p), len(bad)
        except ZeroDivisionError:  # pragma: no cover - points have denominators 9 d, d <= 9
            raise InputError(f"a sample point's denominator is divisible by {p}") from None


def _choose_prime(layers, T) -> int:
    for p in PRIMES:
        try:
            _mod_all(layers, T, p)
        except ZeroDivisionError:
            continue
        return p
    raise InputError(f"every prime of {PRIMES} divides a denominator of theta")


def _sample(net, sample, seed, region_limit, bound, p, check, deadline):
    """The sample (random points: one batch, and a second, wider one when the first misses the bound;
    then, for ``regions`` or when ``auto`` still misses it, every linear region): ``(best, mode, regions)``
    with ``best = (points, signs, J, rank, skipped)``."""
    import numpy as np

    from ..errors import RegionLimit

    rng = random.Random(f"symeq-relu-fdim:{seed}")
    best, mode, nregions = None, "random", None
    if sample in ("auto", "random"):
        check("exact forward pass at the random sample points")
        X, signs, J, skipped = net.jac(_random_points(net.n, net.N, rng), p)
        rank = _rank_rows(net.RJ(J), net.Pd, p)
        if rank < bound:
            check("a second batch of random points")
            X2, signs2, J2, sk2 = net.jac(_random_points(net.n, net.N, rng, scale=12), p)
            X = X + X2
            signs = [None if a is None else [r1 + r2 for r1, r2 in zip(a, b)] for a, b in zip(signs, signs2)]
            J = np.vstack([J, J2])
            skipped += sk2
            rank = _rank_rows(net.RJ(J), net.Pd, p)
        if X:
            best = (X, signs, J, rank, skipped)
    if sample == "regions" or (sample == "auto" and (best is None or best[3] < bound) and net.n <= 4):
        check("enumerating the linear regions")
        try:
            Xr, nreg = _region_points(_layers01(net.layers), region_limit, deadline)
        except RegionLimit:
            if sample == "regions" or best is None:
                raise
            Xr = None
        if Xr is not None and len(Xr) * net.m * net.P > net.max_entries:
            if sample == "regions" or best is None:
                raise LimitExceeded(limit="Jacobian entries", value=len(Xr) * net.m * net.P, maximum=net.max_entries,
                                    option="max_entries", what="exact ReLU functional dimension (every region)")
            Xr = None
        if Xr is not None:
            X, signs, J, skipped = net.jac(Xr, p)
            check("rank of the Jacobian mod p on every region")
            rank = _rank_rows(net.RJ(J), net.Pd, p)
            if X and (best is None or rank >= best[3]):
                best = (X, signs, J, rank, skipped)
                mode, nregions = "regions", nreg
    if best is None:
        raise InputError("every sampled point has a hidden pre-activation equal to 0 (e.g. a neuron with zero "
                         "incoming weights and bias): theta -> f_theta(x) is not differentiable there, so the "
                         "functional dimension is not defined at this theta")
    return best, mode, nregions


def _shortfall(net, signs, J, p, T, Tm, dimT_p, rank, bound, everywhere: bool, shortfall: dict) -> bool:
    """Explain a rank below the bound (fills ``shortfall``); whether it is fully explained."""
    import numpy as np

    causes, E = _explain(net.layers, net.offs, signs, net.P, everywhere)
    E = net.restrict(E)
    dimTE = dimT_p
    if E:
        Em = _rows_mod(E, p, net.Pd)
        # every explaining direction is in the kernel on the sample: checked, not assumed
        if np.any(Modular(p).matmul(net.RJ(J), Em.T.copy())):  # pragma: no cover - an internal error, never hidden
            raise RuntimeError("internal error: an explaining direction is not in the Jacobian's kernel")
        dimTE = _rank_rows(np.vstack([Tm, Em]) if T else Em, net.Pd, p)
    explained = dimTE - dimT_p  # both ranks mod p: dim(T + E) - dim T >= explained
    full = rank == net.Pd - dimTE
    shortfall.update(causes=causes, explained=explained, unexplained=bound - rank - explained, fully_explained=full)
    return full


def _prune_zero_neurons(layers):
    """Remove hidden neurons with zero incoming weights and zero bias (repeatedly).

    Their pre-activation is 0 at every input, where theta -> f_theta(x) is not differentiable, and
    their output sigma(0) = 0 never reaches the next layer: removing them keeps the function.
    Returns ``(layers, removed)`` with ``removed`` a list of ``(hidden layer, neuron)`` (1-based,
    original numbering)."""
    layers = [([list(r) for r in W], list(b), a) for W, b, a in layers]
    names = [list(range(1, len(W) + 1)) for W, _, _ in layers]
    removed = []
    changed = True
    while changed:
        changed = False
        for li in range(len(layers) - 1):
            W, b, a = layers[li]
            if a is None:
                continue
            zero = [i for i in range(len(W)) if b[i] == 0 and not any(W[i])]
            if not zero or len(zero) == len(W):
                continue  # a layer is never emptied: the network keeps its depth
            keep = [i for i in range(len(W)) if i not in zero]
            removed += [(li + 1, names[li][i]) for i in zero]
            names[li] = [names[li][i] for i in keep]
            layers[li] = ([W[i] for i in keep], [b[i] for i in keep], a)
            W2, b2, a2 = layers[li + 1]
            layers[li + 1] = ([[r[i] for i in keep] for r in W2], b2, a2)
            changed = True
    return layers, sorted(removed)


def _mod_all(layers, T, p) -> None:
    """Raise ZeroDivisionError when p divides a denominator of theta."""
    for W, b, a in layers:
        for r in W:
            for x in r:
                _mod(x, p)
        for x in b:
            _mod(x, p)
        if a is not None:
            _mod(a, p)


def _rows_mod(rows, p, P):
    import numpy as np

    return np.array([[_mod(x, p) for x in v] for v in rows], dtype=np.int64).reshape(len(rows), P)


def _rank_over_q(layers, X, signs, cols=None) -> int:
    """The rank over Q of the stacked Jacobian (small matrices only; ``cols``: these columns only)."""
    if not X:
        return 0
    J = _jacobian_exact(layers, X, signs)
    if cols is not None:
        J = J[:, cols]
    if J.shape[0] == 0 or J.shape[1] == 0:
        return 0
    return fmpq_mat(J.shape[0], J.shape[1], list(J.ravel())).rank()


def _jacobian_q(layers, x, sg) -> list:
    """The exact Jacobian (m rows of fmpq) at one point with its sign pattern ``sg`` (the dense kind's
    reverse mode over the exact backend)."""
    return _jacobian_exact(layers, [x], [None if s is None else [[t] for t in s] for s in sg]).tolist()


def _jacobian_exact(layers, X, signs):
    """The stacked exact Jacobian ``(N m) x P`` (an object array of fmpq) at the points ``X``."""
    bk = Exact()
    return reverse_jacobian(_programs(layers, bk), _columns(bk, X), bk, pointwise=_slopes(bk, layers, signs))


def _reduced(layers, offs, hidden, J, P, p, cols=None) -> dict:
    """The reduced-Jacobian condition: one nonzero outgoing weight of each hidden neuron fixed."""
    fixed = []
    for li, i in hidden:
        W2 = layers[li + 1][0]
        k = next((k for k in range(len(W2)) if W2[k][i] != 0), None)
        if k is None:
            return {"holds": False, "reason": f"neuron {i + 1} of hidden layer {li + 1} has no nonzero outgoing "
                                              "weight (degenerate: the condition does not apply)"}
        fixed.append(offs[li + 1] + k * len(layers[li][0]) + i)
    keep = [c for c in (range(P) if cols is None else cols) if c not in set(fixed)]
    r = _rank_rows(J[:, keep], len(keep), p)
    return {"holds": r == len(keep), "rank": r, "columns": len(keep),
            "fixed": len(fixed), "condition": "Bona-Pellissier, Bachoc, Malgouyres 2022: one nonzero outgoing weight "
                                              "per hidden neuron fixed, the reduced Jacobian has full column rank"}


def exact_functional_dimension(layers, region_limit: int = 2000) -> dict:
    """The functional-dimension record of a hunt find: :meth:`ReluFunctionalDimension.to_json`,
    or ``{"undetermined": reason}`` when a size guard, a region limit or a non-differentiable theta
    stops it (recorded, never raised: the find's proven status does not depend on it)."""
    from ..errors import SymeqError

    try:
        return relu_functional_dimension(layers, region_limit=region_limit).to_json()
    except SymeqError as e:
        return {"undetermined": str(e), "label": "exact functional dimension not computed"}
