"""Local identifiability by the exact rank of the Jacobian modulo a prime.

For a model f(x; theta) with polynomial activations and N points x_1, ..., x_N, let
J = d(f(x_1; theta), ..., f(x_N; theta)) / d theta, a (N n_L) x P matrix (P parameters).  Then
(docs/identifiability.md, "Local identifiability"):

* **a proven lower bound.**  Every entry of J is a rational number; reduced modulo the prime
  p = 2^61 - 1 (when no denominator is divisible by p) it is the entry of J mod p.  A nonzero r x r
  minor mod p is a nonzero integer over Q, so rank_p J <= rank_Q J <= the functional dimension (the
  generic rank of theta -> f_theta).
* **the orbit tangent.**  The continuous part of the latent group K (the scalings of neurons with a
  monomial activation c (t - s)^d (+ e); finite K contributes nothing) moves theta along its orbit
  without changing f, so its infinitesimal generators t_1, ..., t_m (computed at theta, exactly)
  lie in ker J over Q: rank_Q J <= P - dim K.theta with dim K.theta = rank_Q(t_1, ..., t_m).
* **locally identifiable.**  If rank_p J = P - rank_p(t), both bounds meet: rank_Q J = P - dim
  K.theta.  Ranks only rise near theta and orbit dimensions only rise too, so the rank is constant
  near theta and, by the constant-rank theorem, the fibre of theta -> (f_theta(x_i))_i near theta is
  a manifold of dimension dim K.theta containing the orbit: near theta the fibre of theta -> f_theta
  is the orbit.  This says nothing about fibre points far from theta: the global question stays open
  (exit 3 in ``symeq fibre``).
* **not identifiable, proven.**  When the rank falls short, exact families through theta inside the
  fibre are looked for: a dead neuron (zero outgoing weights: its incoming weights are free), a
  constant neuron (zero incoming weights: its outgoing weights move into the next bias, when the next
  layer has biases, or are free when its constant is 0), two clones
  (equal incoming weights: the outgoing weights split), and a *hidden rotation* (a degree-2
  activation a (t - e)^2 + c whose neurons have proportional outgoing columns mu_j v: the
  pre-activations u = z - e can be moved by any R with R^T diag(mu) R = diag(mu), a rational curve
  by the Cayley transform).  Each family is a curve or linear space in the fibre, proven by the
  identity it rests on; its tangent together with the orbit's spans a space of dimension D (rank
  mod p, a lower bound), so the fibre has dimension >= D > dim K.theta: theta is
  **not identifiable** with ``dimension_lower_bound`` = D - dim K.theta.
* otherwise the rank deficit is **evidence** only (the status stays ``unknown``): the rank is
  recomputed at 1.5 times as many points and the report says whether it stayed put.

The parameters are the declared ones (:func:`layer_biases`): a layer with ``"bias": null`` has no bias
parameters, one with a bias vector (zeros included) has them, per layer; the orbit tangent and the
families never move a missing bias.

The Jacobian is computed by reverse mode in modular arithmetic, never by expanding polynomials:
one forward pass over all points (matrix products in python-flint's ``nmod_mat``), one backward
pass of the cotangents (N n_L rows at once), and the block of W_i as the row-wise outer product of
the pre-activation cotangents and the layer's inputs (vectorised multiplication modulo the
Mersenne prime in numpy).  The rank is python-flint's ``nmod_mat`` elimination of J^T, which also
names rows of J of rank r for the certificate (all of them when there are at most 5 % more, else r
independent ones; the checker eliminates only those).

Each layer kind takes part through its one forward pass and Jacobian, written over the number
backends of symeq/backends.py and run here over ``Modular(2^61 - 1)``: a layer whose kind declares the
``jacobian-rank`` capability gives ``parameter_counts()`` and ``jacobian_program(backend, bias)`` (with
``forward`` and ``backward``): dense layers (token-wise ones after attention
included: one W and b shared by the tokens), native convolutions (``conv2d``: kernel taps and
channel biases through the layer's ``sources`` map) and lightning attention (Q_h, K_h, V_h, O_h).
Any other kind is refused with a clear reason ("not-applicable"), never guessed.  For attention the
orbit tangent also holds the reparametrisations that keep the chain's parameters (GL(d_k) on
(Q_h, K_h), the scalar between scores and values, GL(d_out) between O and the next token-wise layer),
so "locally identifiable" is then about the chain's parameters.  Next to a convolution or a
token-wise layer, continuous scalings are refused and exact families are looked for between plain dense
layers only.  Certificates are written for models of dense, conv2d, token-wise and attention layers (the checker
re-reads each layer, a conv's kernels and geometry included, from the model file and recomputes the
rows by its own reverse mode); ReLU models get theirs from symeq/fibre/decide.py.

Examples
--------
>>> from symeq.models import Model, DenseLayer
>>> from symeq.activations import tanh_series
>>> m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], tanh_series(3)),
...               DenseLayer([[2, -1], [1, 1]], [1, 0], None)])
>>> r = jacobian_identifiability(m)
>>> r.status, r.rank, r.n_params, r.orbit_dimension
('locally-identifiable', 12, 12, 0)
"""

from __future__ import annotations

import random
import time
from types import SimpleNamespace
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from flint import fmpq, fmpq_mat, nmod_mat

from ..backends import (Denominator, Modular, NotPolynomial, addmod61, from_nmod, mulmod61, reverse_jacobian,
                        to_nmod)
from ..budget import Deadline, process_deadline
from ..errors import BudgetExceeded
from ..layers.base import declared_biases
from ..layers.registry import all_support, supports
from ..numbers import mat_rows

__all__ = ["METHOD", "PRIME", "JacobianDecision", "jacobian_identifiability", "parameter_layout",
           "MAX_PARAMS"]

#: the ``method`` of the certificate (inside ``symeq-identifiability/1``), checked by :mod:`symeq_check`
METHOD = "jacobian-rank"
#: the Mersenne prime 2^61 - 1 (numpy multiplies modulo it with shifts and masks)
PRIME = (1 << 61) - 1
#: size guard, checked before any work starts
MAX_PARAMS = 20000
#: rows of J beyond the parameter count (more points: more chances for a nonzero minor)
EXTRA_POINTS = 2
#: rounds of more points (x 1.5 each) while the rank falls short and still rises
MAX_ROUNDS = 4
#: seconds per M P min(M, P) of the nmod_mat elimination, an optimistic (idle 2-core) estimate: the
#: elimination is refused before it starts when even this does not fit the time left
RANK_SECONDS_PER_OP = 1e-10
#: eliminate the last affine layer's Kronecker block before the rank (:func:`_structured_rank`)
STRUCTURED = True
#: ... from this many parameters on (below, the conversions cost more than the smaller elimination saves)
STRUCTURED_MIN_PARAMS = 1000
#: families whose tangents are tried one by one (each is a curve or linear space in the fibre)
MAX_FAMILIES = 2000
#: name the r pivot columns in a certificate with r < #params (the checker then eliminates that block only)
PIVOT_COLUMNS = True
#: the sample points f_theta(t) = f_theta is re-checked at exactly, for a rotation curve, up to this many parameters
_CURVE_CHECK_PARAMS = 2000

#: the modular backend every Jacobian here is computed over (symeq/backends.py)
MOD = Modular(PRIME)
_P = np.uint64(PRIME)
_Denominator = Denominator
_mulmod, _addmod, _to_nmod, _from_nmod = mulmod61, addmod61, to_nmod, from_nmod


def _mod(x) -> int:
    """A rational number modulo p (raises :class:`_Denominator` when p divides its denominator)."""
    return MOD.scalar(x)


def _matmul(a: np.ndarray, b: nmod_mat) -> np.ndarray:
    """(a mod p) * b for a uint64 array a and an nmod_mat b."""
    if a.shape[0] == 0 or a.shape[1] == 0:
        return np.zeros((a.shape[0], b.ncols()), dtype=np.uint64)
    return _from_nmod(_to_nmod(a) * b)


# ----------------------------------------------------------------------------- parameters

def layer_biases(model, bias=None) -> tuple[bool, ...]:
    """Per layer, whether it has bias parameters: the declared parameter space by default
    (:func:`symeq.layers.base.declared_biases`: a layer given a bias vector, zeros included, has them,
    one with ``"bias": null`` has none); a bool applies to every layer (attention layers never have any).

    >>> from symeq.models import Model, DenseLayer
    >>> from symeq.activations import monomial
    >>> m = Model(1, [DenseLayer([[1]], [1], monomial(2)), DenseLayer([[1]], None, None)])
    >>> layer_biases(m), layer_biases(m, True)
    ((True, False), (True, True))
    """
    if bias is None:
        return declared_biases(model)
    if isinstance(bias, bool):
        return tuple(bias and not supports(layer, "token-mixing") for layer in model.layers)  # attention: none
    out = tuple(bool(b) for b in bias)
    if len(out) != len(model.layers):
        raise ValueError(f"one bias flag per layer ({len(model.layers)}), got {len(out)}")
    return out


def bias_field(bias: tuple, model=None) -> bool | list:
    """The certificate's ``bias``: a bool when every layer agrees (attention layers, which have no
    biases, left out), else one bool per layer."""
    mixing = [False] * len(bias) if model is None else [supports(layer, "token-mixing") for layer in model.layers]
    rest = {b for b, m in zip(bias, mixing) if not m}
    return (rest.pop() if rest else False) if len(rest) <= 1 else list(bias)


def parameter_layout(model, bias=None) -> list[tuple[str, int, int]]:
    """The parameter vector's layout: per layer ``(name, layer index, count)``, weights row-major then biases.

    This order is the certificate's (and :mod:`symeq_check` rebuilds it from the model file): for
    each layer its weight matrix W_i row by row, then its bias b_i when the layer has bias parameters
    in the declared parameter space (:func:`layer_biases`; ``bias`` True/False: every layer/none).

    >>> from symeq.examples import builtin_example
    >>> [(n, c) for n, _, c in parameter_layout(builtin_example(), True)]
    [('W1', 48), ('b1', 8), ('W2', 48), ('b2', 6), ('W3', 36), ('b3', 6)]
    """
    bias = layer_biases(model, bias)
    out = []
    for i, layer in enumerate(model.layers):
        weights, biases = layer.parameter_counts()
        out.append((f"W{i + 1}", i, weights))
        if bias[i]:
            out.append((f"b{i + 1}", i, biases))
    return out


class _NotApplicable(Exception):
    pass


def _plain(layer) -> bool:
    """A dense layer that is not token-wise (the orbit tangent and the families are written for these)."""
    return supports(layer, "plain-dense")


def _attention_tangent(model, offs) -> list[tuple[str, dict]]:
    """GL(d_v) per head on (V_h, O_h) (symeq's latent group of the heads), and the reparametrisations of
    a head that keep its output Y_h = (X Q K^T X^T) X V: GL(d_k) on (Q_h, K_h) and the scalar exchanged
    between scores and values: V E, -E O; Q E, -K E^T; Q, -V.  (The mixing of heads that
    symeq.attention.symmetry_dimension adds when no rank constraint binds is not among them: its
    directions then show as a rank deficit, never as a wrong verdict.)"""
    layer = model.layers[0]
    gens, c = [], offs["W1"]
    for hi, h in enumerate(layer.heads):
        Q, Kk, V, O = (mat_rows(M) for M in (h.query, h.key, h.value, h.out))
        d, dk, dv, do = len(Q), len(Q[0]), len(V[0]), len(O[0])
        oq, ok = c, c + d * dk
        ov, oo = ok + d * dk, ok + d * dk + d * dv
        for a in range(dv):
            for b in range(dv):  # E = e_a e_b^T: (V E)[i, b] = V[i, a]; (E O)[a, j] = O[b, j]
                v = {}
                for i in range(d):
                    if V[i][a] != 0:
                        v[ov + i * dv + b] = fmpq(V[i][a])
                for j in range(do):
                    if O[b][j] != 0:
                        v[oo + a * do + j] = v.get(oo + a * do + j, fmpq(0)) - fmpq(O[b][j])
                gens.append((f"GL(d_v) of head {hi + 1}, E_{a + 1}{b + 1}", {k: x for k, x in v.items() if x != 0}))
        for a in range(dk):
            for b in range(dk):  # (Q E)[i, b] = Q[i, a]; (K E^T)[i, a] = K[i, b]
                v = {}
                for i in range(d):
                    if Q[i][a] != 0:
                        v[oq + i * dk + b] = fmpq(Q[i][a])
                    if Kk[i][b] != 0:
                        v[ok + i * dk + a] = v.get(ok + i * dk + a, fmpq(0)) - fmpq(Kk[i][b])
                gens.append((f"GL(d_k) of head {hi + 1} (scores Q K^T), E_{a + 1}{b + 1}",
                             {k: x for k, x in v.items() if x != 0}))
        v = {}  # the scalar exchanged between scores and values: A -> lambda A (Q -> lambda Q), V -> V / lambda
        for i in range(d):
            for j in range(dk):
                if Q[i][j] != 0:
                    v[oq + i * dk + j] = fmpq(Q[i][j])
            for j in range(dv):
                if V[i][j] != 0:
                    v[ov + i * dv + j] = -fmpq(V[i][j])
        gens.append((f"scores against values of head {hi + 1} (A -> lambda A, V -> V / lambda)", v))
        c = oo + dv * do
    if len(model.layers) > 1:
        # the output projection merges into the next token-wise layer: O_h -> O_h g (every head), W -> W g^-T
        nxt = mat_rows(model.layers[1].token_weight)
        outs = []
        c = offs["W1"]
        for h in layer.heads:
            Q, V, O = mat_rows(h.query), mat_rows(h.value), mat_rows(h.out)
            oo = c + 2 * len(Q) * len(Q[0]) + len(V) * len(V[0])
            outs.append((oo, O))
            c = oo + len(O) * len(O[0])
        do = layer.d_out
        for a in range(do):
            for b in range(do):  # E = e_a e_b^T: (O E)[i, b] = O[i, a]; (W E^T)[r, a] = W[r, b]
                v = {}
                for oo, O in outs:
                    for i, row in enumerate(O):
                        if row[a] != 0:
                            v[oo + i * do + b] = fmpq(row[a])
                for r, row in enumerate(nxt):
                    if row[b] != 0:
                        v[offs["W2"] + r * do + a] = v.get(offs["W2"] + r * do + a, fmpq(0)) - fmpq(row[b])
                gens.append((f"GL(d_out) between the output projection and layer 2, E_{a + 1}{b + 1}",
                             {k: x for k, x in v.items() if x != 0}))
    return gens


def _twins(model, bias=None):
    """Each layer's program over the modular backend (``layer.jacobian_program``: the kind's one forward
    pass and Jacobian, symeq/layers/)."""
    bias = layer_biases(model, bias)
    twins = []
    for i, layer in enumerate(model.layers):
        if not supports(layer, "jacobian-rank"):
            raise _NotApplicable(f"layer {i + 1} ({layer.label}): {layer.kind} layers have no Jacobian rows "
                                 "(the jacobian-rank capability)")
        try:
            twins.append(layer.jacobian_program(MOD, bias[i]))
        except NotPolynomial as e:
            raise _NotApplicable(str(e)) from None
    return twins


def _jacobian(twins, X: np.ndarray, deadline, keep: dict | None = None) -> np.ndarray:
    """J mod p (N K x P, rows point-major) at the points X (n0 x N, entries mod p).

    With ``keep`` (a dict), ``keep["last_input"]`` is the last layer's input (in x N) and
    ``keep["last_col"]`` its first column in J (for :func:`_structured_rank`)."""
    inner: dict = {}
    J = reverse_jacobian(twins, X, MOD, deadline.check, keep=inner)
    if keep is not None:
        keep["last_input"], keep["last_col"] = inner["caches"][-1][0], inner["cols"][-1]
    return J


def _points(n0: int, N: int, seed: int) -> list[list[Fraction]]:
    """N rational points in R^n0, deterministic from ``seed`` (numerators |a| <= 9, denominators 1..5)."""
    rng = random.Random(seed)
    return [[Fraction(rng.randint(-9, 9), rng.randint(1, 5)) for _ in range(n0)] for _ in range(N)]


def _points_mod(points) -> np.ndarray:
    return np.array([[_mod(fmpq(x.numerator, x.denominator)) for x in pt] for pt in points],
                    dtype=np.uint64).T.copy()


def _echelon_pivots(R, r: int) -> list[int]:
    """The pivot columns of the first r rows of R, a reduced row echelon form (an ``nmod_mat``)."""
    pivots, j, M = [], 0, R.ncols()
    for i in range(r):
        while j < M and int(R[i, j]) == 0:
            j += 1
        pivots.append(j)
        j += 1
    return pivots


def _rank_rows(J: np.ndarray, want_rows: bool, threads: int = 2) -> tuple[int, list[int] | None]:
    """rank_p J and, with ``want_rows``, row indices of J of the same rank mod p: every row when at most
    5 % more than the rank (no second elimination), else r independent ones (the pivots of J^T)."""
    import flint

    old = flint.ctx.threads
    try:
        flint.ctx.threads = max(1, threads)
        r = _to_nmod(J).rank()
        if not want_rows:
            return r, None
        if J.shape[0] <= r + max(8, r // 20):
            return r, list(range(J.shape[0]))
        R, r = _to_nmod(J.T).rref()
    finally:
        flint.ctx.threads = old
    return r, _echelon_pivots(R, r)


def _pivot_columns(J: np.ndarray, r: int, threads: int = 2) -> list[int]:
    """r columns of J (the certificate's rows) whose block has rank r mod p: the pivots of J's echelon form.
    ``symeq check`` then eliminates only that block (rows x r instead of rows x P)."""
    import flint

    old = flint.ctx.threads
    try:
        flint.ctx.threads = max(1, threads)
        R, rk = _to_nmod(J).rref()
    finally:
        flint.ctx.threads = old
    if rk != r:  # pragma: no cover - the same matrix, the same prime
        raise AssertionError(f"the certified rows have rank {rk}, not {r}")
    return _echelon_pivots(R, rk)


def _affine_last(twins) -> bool:
    """Whether the last layer is a plain affine map x -> W x + b (no activation, no tokens): then its
    columns of J are the Kronecker block I_K (x) [H^T, 1] that :func:`_structured_rank` eliminates."""
    return twins[-1].affine_plain and len(twins) > 1


def _matmul_mod_blas(G: np.ndarray, B: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """G B mod 2^61 - 1 (uint64 entries < p) by float64 BLAS products that are exact.

    Every entry is split into limbs of 21, 21 and 19 bits; a product of two limbs is < 2^42 and a sum of
    at most 1024 of them < 2^52 < 2^53, so each float64 matrix product is exact.  The limb products are
    recombined with 2^61 = 1 mod p (2^63 = 4, 2^84 = 2^23): multiplying by 2^r is a rotation of 61 bits.  Columns of B go in chunks (bounded memory).
    """
    a, m = G.shape
    out = np.zeros((a, B.shape[1]), dtype=np.uint64)
    mask = np.uint64((1 << 21) - 1)
    limbs = lambda X: [((X >> np.uint64(21 * i)) & mask).astype(np.float64) for i in range(3)]  # noqa: E731
    rot = [(21 * s) % 61 for s in range(5)]  # 2^(21 s) = 2^rot mod p: a rotation of the 61 bits
    for k0 in range(0, m, 1024):  # inner dimension <= 1024 per exact product
        Gl = limbs(G[:, k0:k0 + 1024])
        for c0 in range(0, B.shape[1], chunk):
            Bl = limbs(B[k0:k0 + 1024, c0:c0 + chunk])
            acc = np.zeros((a, Bl[0].shape[1]), dtype=np.uint64)
            for s_ in range(5):
                T = None
                for i in range(3):
                    j = s_ - i
                    if 0 <= j < 3:
                        prod = (Gl[i] @ Bl[j]).astype(np.uint64)  # exact, < 2^52
                        T = prod if T is None else T + prod       # < 3 * 2^52 < p
                r_ = rot[s_]
                if r_:  # T < p: T 2^r mod p = (the low 61 - r bits moved up) + (the high r bits moved down)
                    T = ((T << np.uint64(r_)) & _P) | (T >> np.uint64(61 - r_))
                acc = _addmod(acc, T)
            out[:, c0:c0 + chunk] = _addmod(out[:, c0:c0 + chunk], acc)
    return out


def _structured_rank(J: np.ndarray, H: np.ndarray, col: int, K: int, bias: bool, threads: int = 2) -> int:
    """rank_p J, exactly as :func:`_rank_rows` would find it, by eliminating the last affine layer first.

    The last layer's columns (from ``col`` on: W_L row-major, then b_L) are, with rows point-major
    ``(n, k)``, the block ``I_K (x) C`` (up to the order of the columns) with ``C = [H^T, 1]`` (N x m,
    m = in_dim (+1)): the row ``(n, k)`` has ``C[n]`` in output ``k``'s columns and 0 elsewhere.  Grouping
    the rows by output, ``J = [A_k | e_k (x) C]``.  Let ``S`` be ``rank C`` independent rows of ``C``
    (the pivots of ``C^T``'s echelon form) and ``C[n] = sum_i g_ni C[S_i]`` for the others: the rows
    ``e_n - sum_i g_ni e_{S_i}`` (n outside S) are a basis ``Q`` of the left null space of ``C``.  Row
    operations inside each output's block turn ``J`` into ``C[S]`` in that block's own columns above
    ``Q A_k`` (zero in every last-layer column), so, over GF(p) and without any assumption,

        ``rank_p J = K rank_p C + rank_p [Q A_1; ...; Q A_K]``,

    the number the full elimination gives (a lower bound of the rank over Q: a nonzero minor mod p is
    nonzero).  The reduced matrix has ``K (N - rank C)`` rows and ``col`` columns instead of ``N K`` and
    ``P``; ``Q A_k = A_k[rest] - g A_k[S]`` is one exact BLAS product (:func:`_matmul_mod_blas`).
    """
    import flint

    N = H.shape[1]
    C = H.T.copy()
    if bias:
        C = np.concatenate([C, np.ones((N, 1), dtype=np.uint64)], axis=1)
    old = flint.ctx.threads
    try:
        flint.ctx.threads = max(1, threads)
        E, rc = _to_nmod(C.T.copy()).rref()   # m x N: pivot columns S, E[i, n] = g_ni
        Ea = _from_nmod(E)[:rc]
        S, j = [], 0
        for i in range(rc):
            while Ea[i, j] == 0:
                j += 1
            S.append(j)
            j += 1
        rest = [n for n in range(N) if n not in set(S)]
        if col == 0 or not rest:
            return K * rc
        g = Ea[:, rest].T.copy()             # (N - rc) x rc
        A = J[:, :col].reshape(N, K * col)   # row n: A_1[n], ..., A_K[n] side by side
        R = _matmul_mod_blas(g, A[S])
        Ar = A[rest]
        del A
        R = np.where(Ar >= R, Ar - R, Ar + (_P - R))   # A[rest] - g A[S] mod p
        del Ar
        return K * rc + _to_nmod(R.reshape(len(rest) * K, col)).rank()
    finally:
        flint.ctx.threads = old


# ----------------------------------------------------------------------------- orbit and families

def _continuous(act, own: bool, nxt: bool | None = None):
    """(s, d, e) when every alpha != 0 scales a neuron with this activation (sigma = c (t - s)^d + e), else None.

    ``own``: the neuron's layer has biases (they absorb the shift s (1 - alpha) of the pre-activation);
    ``nxt``: the next layer has biases (they absorb the offset e (1 - alpha^d)); None: as ``own``
    (:func:`symeq.fibre.ideal.scalings_continuous`)."""
    from .ideal import scalings_continuous

    if not scalings_continuous(act, own, own if nxt is None else nxt):
        return None
    return fmpq(act.shift), act.degree, fmpq(act._reduced()[0])


def _offsets(model, bias):
    offs, c = {}, 0
    for name, i, count in parameter_layout(model, bias):
        offs[name] = c
        c += count
    return offs, c


def orbit_tangent(model, bias=None) -> list[tuple[str, dict]]:
    """The infinitesimal generators of K's continuous part at theta: ``(label, {index: value})``.

    A neuron j of hidden layer i with sigma(t) = c (t - s)^d + e is scaled by z -> alpha (z - s) + s,
    which the next layer undoes: its incoming row (and b_j - s) times alpha, its outgoing column
    times alpha^-d, the next bias plus e (1 - alpha^-d) times the column.  At alpha = 1 the
    derivative is (row, b_j - s) on the incoming side, -d col on the outgoing one, d e col on the
    next bias.  Only the declared parameter space's scalings count: the shift needs the layer's own
    biases unless s = 0, the offset the next layer's unless e = 0 (:func:`_continuous`).
    """
    bias = layer_biases(model, bias)
    offs, _ = _offsets(model, bias)
    gens = _attention_tangent(model, offs) if supports(model.layers[0], "token-mixing") else []
    for i, layer in enumerate(model.layers[:-1]):
        if supports(layer, "token-mixing"):  # no activation scalings: its tangent is GL(d_v) per head
            continue
        cont = _continuous(layer.activation, bias[i], bias[i + 1])
        if cont is None:
            continue
        if not _plain(layer) or not _plain(model.layers[i + 1]):
            raise _NotApplicable(f"the orbit tangent of continuous scalings at hidden layer {i + 1} next to a "
                                 f"{layer.kind}/{model.layers[i + 1].kind} layer is not implemented")
        s, d, e = cont
        rows, nxt = mat_rows(layer.weight), model.layers[i + 1]
        nrows = mat_rows(nxt.weight)
        for j in range(layer.out_dim):
            v = {}
            for k, x in enumerate(rows[j]):
                if x != 0:
                    v[offs[f"W{i + 1}"] + j * layer.in_dim + k] = fmpq(x)
            if bias[i] and layer.bias[j] - s != 0:
                v[offs[f"b{i + 1}"] + j] = fmpq(layer.bias[j]) - s
            for k in range(nxt.out_dim):
                if nrows[k][j] != 0:
                    v[offs[f"W{i + 2}"] + k * nxt.in_dim + j] = -d * fmpq(nrows[k][j])
                    if bias[i + 1] and e != 0:
                        v[offs[f"b{i + 2}"] + k] = d * e * fmpq(nrows[k][j])
            gens.append((f"scaling of neuron {j + 1} of hidden layer {i + 1}", v))
    return gens


def _families(model, bias=None) -> list[dict]:
    """Exact families through theta inside the fibre, each with its tangent vectors and its proof.

    Every family stays in the declared parameter space: it moves no bias of a layer without one (a
    constant neuron's outgoing weights move into the next bias only when the next layer has biases)."""
    bias = layer_biases(model, bias)
    offs, _ = _offsets(model, bias)
    fams = []
    for i, layer in enumerate(model.layers[:-1]):
        if not _plain(layer) or not _plain(model.layers[i + 1]):
            continue  # families next to other kinds are not looked for (a deficit there stays evidence)
        rows, nxt = mat_rows(layer.weight), model.layers[i + 1]
        nrows = mat_rows(nxt.weight)
        n, m = layer.out_dim, nxt.out_dim
        cols = [[nrows[k][j] for k in range(m)] for j in range(n)]
        act = layer.activation
        where = f"hidden layer {i + 1}"
        for j in range(n):
            if all(x == 0 for x in cols[j]):
                vecs = [{offs[f"W{i + 1}"] + j * layer.in_dim + k: fmpq(1)} for k in range(layer.in_dim)]
                if bias[i]:
                    vecs.append({offs[f"b{i + 1}"] + j: fmpq(1)})
                fams.append({"kind": "dead-neuron", "layer": i + 1, "neurons": [j + 1], "tangents": vecs,
                             "proof": f"neuron {j + 1} of {where} has zero outgoing weights: its incoming weights "
                                      "do not enter f, so they move freely in the fibre (a linear space)"})
            elif all(x == 0 for x in rows[j]):
                c = act(layer.bias[j]) if bias[i] else act(fmpq(0))
                if bias[i + 1] or c == 0:
                    vecs = []
                    for k in range(m):
                        v = {offs[f"W{i + 2}"] + k * nxt.in_dim + j: fmpq(1)}
                        if bias[i + 1] and c != 0:
                            v[offs[f"b{i + 2}"] + k] = -fmpq(c)
                        vecs.append(v)
                    fams.append({"kind": "constant-neuron", "layer": i + 1, "neurons": [j + 1], "tangents": vecs,
                                 "proof": f"neuron {j + 1} of {where} has zero incoming weights: its output is the "
                                          f"constant {c}, so its outgoing weights "
                                          + ("move into the next bias" if c != 0 else "do not enter f")
                                          + " (a linear space in the fibre)"})
        keys = {}
        for j in range(n):
            key = (tuple(rows[j]), layer.bias[j] if bias[i] else 0)
            keys.setdefault(key, []).append(j)
        for js in keys.values():
            if len(js) < 2 or all(x == 0 for x in rows[js[0]]):
                continue
            j1 = js[0]
            vecs = []
            for j2 in js[1:]:
                for k in range(m):
                    vecs.append({offs[f"W{i + 2}"] + k * nxt.in_dim + j1: fmpq(1),
                                 offs[f"W{i + 2}"] + k * nxt.in_dim + j2: fmpq(-1)})
            fams.append({"kind": "clones", "layer": i + 1, "neurons": [j + 1 for j in js], "tangents": vecs,
                         "proof": f"neurons {', '.join(str(j + 1) for j in js)} of {where} have equal incoming "
                                  "weights and biases: only the sum of their outgoing columns enters f, so the "
                                  "split between them moves freely (a linear space in the fibre)"})
        fams.extend(_rotations(model, bias, i, rows, cols, offs))
    return fams


def _rotations(model, bias, i, rows, cols, offs) -> list[dict]:
    """Hidden rotations of a degree-2 layer: neurons with proportional outgoing columns."""
    layer = model.layers[i]
    bias = bias[i]  # the layer's own biases: the rotation moves its shifted pre-activations
    act = layer.activation
    if act is None or not act.is_polynomial or act.degree != 2:
        return []
    e = fmpq(act.shift)  # sigma(t) = a (t - e)^2 + c
    if not bias and e != 0:
        return []
    groups = []
    for j, c in enumerate(cols):
        piv = next((k for k, x in enumerate(c) if x != 0), None)
        if piv is None or all(x == 0 for x in rows[j]):
            continue
        for g in groups:
            ref = cols[g[0][0]]
            if ref[piv] != 0 and all(x * ref[piv] == y * c[piv] for x, y in zip(c, ref)):
                g.append((j, fmpq(c[piv]) / fmpq(ref[piv])))
                break
        else:
            groups.append([(j, fmpq(1))])
    out = []
    nin = layer.in_dim
    for g in groups:
        if len(g) < 2:
            continue
        (j1, mu1) = g[0]
        vecs, curves = [], []
        for j2, mu2 in g[1:]:
            # Q = diag(mu1, mu2); A = Q^-1 [[0, 1], [-1, 0]] is Q-skew: delta u1 = u2 / mu1, delta u2 = -u1 / mu2
            v = {}
            u1 = [fmpq(x) for x in rows[j1]] + ([fmpq(layer.bias[j1]) - e] if bias else [])
            u2 = [fmpq(x) for x in rows[j2]] + ([fmpq(layer.bias[j2]) - e] if bias else [])
            for k in range(nin + (1 if bias else 0)):
                idx1 = offs[f"W{i + 1}"] + j1 * nin + k if k < nin else offs[f"b{i + 1}"] + j1
                idx2 = offs[f"W{i + 1}"] + j2 * nin + k if k < nin else offs[f"b{i + 1}"] + j2
                if u2[k] != 0:
                    v[idx1] = u2[k] / mu1
                if u1[k] != 0:
                    v[idx2] = -u1[k] / mu2
            vecs.append(v)
            curves.append((j1, j2, mu1, mu2))
        out.append({"kind": "rotation", "layer": i + 1, "neurons": [j + 1 for j, _ in g], "tangents": vecs,
                    "curves": curves, "centre": e,
                    "proof": f"hidden layer {i + 1} has the degree-2 activation a (t - e)^2 + c (e = {e}) and neurons "
                             f"{', '.join(str(j + 1) for j, _ in g)} have proportional outgoing columns mu_j v "
                             f"(mu = {', '.join(str(mu) for _, mu in g)}): the next layer sees v a sum_j mu_j "
                             "(z_j - e)^2, kept by every R with R^T diag(mu) R = diag(mu); the Cayley transform "
                             "R(t) = (I - t A / 2)^-1 (I + t A / 2) of the diag(mu)-skew A gives a rational curve "
                             "of such R through the identity (checked exactly at t = 1, or at t = 2 where R(1) "
                             "is not defined)"})
    return out


def _rotate(model, bias, i, j1, j2, mu1, mu2, e, t):
    """theta with the pre-activations (z_j1 - e, z_j2 - e) of layer i moved by the Cayley rotation R(t)."""
    bias = layer_biases(model, bias)[i]
    # A = Q^-1 S with S = [[0, 1], [-1, 0]]; R = (I - tA/2)^-1 (I + tA/2)
    A = fmpq_mat(2, 2, [0, 1 / mu1, -1 / mu2, 0])
    I2 = fmpq_mat(2, 2, [1, 0, 0, 1])
    R = (I2 - A * (fmpq(t) / 2)).inv() * (I2 + A * (fmpq(t) / 2))
    Q = fmpq_mat(2, 2, [mu1, 0, 0, mu2])
    if R.transpose() * Q * R != Q:  # pragma: no cover - the Cayley identity
        raise AssertionError("the Cayley transform is not an isometry of diag(mu)")
    new = model.copy()
    layer = new.layers[i]
    rows = mat_rows(layer.weight)
    u1 = [fmpq(x) for x in rows[j1]] + [fmpq(layer.bias[j1]) - e]
    u2 = [fmpq(x) for x in rows[j2]] + [fmpq(layer.bias[j2]) - e]
    w1 = [R[0, 0] * a + R[0, 1] * b for a, b in zip(u1, u2)]
    w2 = [R[1, 0] * a + R[1, 1] * b for a, b in zip(u1, u2)]
    for k in range(layer.in_dim):
        layer.weight[j1, k] = w1[k]
        layer.weight[j2, k] = w2[k]
    if bias:
        layer.bias[j1], layer.bias[j2] = w1[-1] + e, w2[-1] + e
    return new, R


# ----------------------------------------------------------------------------- the decision

def _work_bytes(model, N: int, K: int) -> int:
    """Bytes of the forward caches and backward temporaries at N points (uint64 arrays, an upper
    estimate), so that the memory guard runs before the work: a convolution keeps its patches
    (taps x pixels x N: four uint64 copies with the backward pass, and the Python lists through which
    they reach python-flint, about 80 bytes an entry in all), every other layer a few N x width
    arrays, and the backward pass carries an (N K) x width array through each layer."""
    total = 0
    for layer in model.layers:
        if supports(layer, "image-output"):  # a convolution keeps its patches
            shape = layer.shape
            npix = layer.out_dim // shape.out_channels
            total += 80 * shape.taps * npix * N + 3 * 8 * layer.out_dim * N  # measured: ~2.5 GB for 38M patch entries
        else:
            total += 3 * 8 * layer.out_dim * N
        total += 2 * 8 * N * K * (layer.in_dim + 1)
    return total


@dataclass
class JacobianDecision:
    """The Jacobian-rank verdict at theta.

    Attributes
    ----------
    status : "locally-identifiable", "not-identifiable" (a proven family in the fibre),
        "unknown" (the rank falls short and nothing is proven; see ``evidence``),
        "not-applicable" (layers or activations it cannot handle) or "undetermined" (budget)
    reason : one sentence
    rank : rank of J modulo :data:`PRIME` (a proven lower bound of the functional dimension)
    n_params : P
    orbit_dimension : dim K.theta (exact)
    dimension_lower_bound : not-identifiable: the fibre's dimension beyond the orbit is at least this
    families : the exact families found (kind, layer, neurons, the dimension they give, the proof)
    evidence : when the rank falls short and nothing is proven: the ranks at more points
    certificate : the ``symeq-identifiability/1`` dict (locally-identifiable), else None
    """

    status: str
    reason: str
    rank: int | None = None
    n_params: int = 0
    orbit_dimension: int | None = None
    dimension_lower_bound: int | None = None
    points: int = 0
    seconds: float = 0.0
    families: list = field(default_factory=list)
    evidence: dict | None = None
    certificate: dict | None = field(default=None, repr=False)
    timings: dict = field(default_factory=dict)

    @property
    def condition(self) -> str:
        if self.rank is None:
            return self.reason
        return (f"rank of the Jacobian at {self.points} points mod 2^61-1 = {self.rank}; "
                f"#params - dim K.theta = {self.n_params} - {self.orbit_dimension}")

    def to_json(self) -> dict:
        return {"method": METHOD, "engine": "jacobian-rank", "field": f"GF({PRIME}) (rank mod p: a lower bound over QQ)",
                "exact": True, "status": self.status, "reason": self.reason, "condition": self.condition,
                "rank": self.rank, "parameters": self.n_params, "orbit_dimension": self.orbit_dimension,
                "upper_bound": None if self.orbit_dimension is None else self.n_params - self.orbit_dimension,
                "points": self.points, "prime": str(PRIME),
                "dimension_lower_bound": self.dimension_lower_bound,
                "families": [{k: v for k, v in f.items() if k in ("kind", "layer", "neurons", "dimension", "proof")}
                             for f in self.families],
                "evidence": self.evidence, "over": "R and C (near theta)" if self.status == "locally-identifiable"
                else "C", "seconds": round(self.seconds, 4),
                "timings": {k: round(v, 4) for k, v in self.timings.items()}}


def _sparse_rows(vecs, P) -> np.ndarray:
    A = np.zeros((len(vecs), P), dtype=np.uint64)
    for r, v in enumerate(vecs):
        for k, x in v.items():
            A[r, k] = _mod(x)
    return A


def _exact_rank(vecs, P) -> int:
    if not vecs:
        return 0
    cols = sorted({k for v in vecs for k in v})
    where = {k: c for c, k in enumerate(cols)}
    M = fmpq_mat(len(vecs), len(cols))
    for r, v in enumerate(vecs):
        for k, x in v.items():
            M[r, where[k]] = x
    return M.rank()


def jacobian_identifiability(model, *, timeout: float | None = None, certificate: bool = True, seed: int = 0,
                             deadline: Deadline | None = None, threads: int = 2) -> JacobianDecision:
    """Decide local identifiability of ``model``'s theta by the Jacobian rank modulo 2^61 - 1.

    Parameters
    ----------
    model : :class:`~symeq.models.Model` with dense layers and polynomial activations
    timeout : seconds (or pass a ``deadline``); past it the status is "undetermined"
    certificate : build the ``symeq-identifiability/1`` certificate (method "jacobian-rank")
    seed : the seed of the rational sample points (stored in the certificate)
    threads : FLINT threads for the elimination

    Returns
    -------
    JacobianDecision

    Examples
    --------
    Two clones: the split of their outgoing weights is a line in the fibre.

    >>> from symeq.models import Model, DenseLayer
    >>> from symeq.activations import tanh_series
    >>> m = Model(2, [DenseLayer([[1, 2], [1, 2]], [1, 1], tanh_series(3)),
    ...               DenseLayer([[2, -1], [1, 1]], [1, 0], None)])
    >>> r = jacobian_identifiability(m)
    >>> r.status, r.dimension_lower_bound, r.families[0]["kind"]
    ('not-identifiable', 2, 'clones')
    """
    t0 = time.perf_counter()
    deadline = deadline if deadline is not None else Deadline(timeout)
    timings: dict = {}

    def done(status, reason, **kw):
        return JacobianDecision(status, reason, seconds=time.perf_counter() - t0, timings=timings, **kw)

    if any(getattr(layer, "real_valued", False) for layer in model.layers):  # the kind says (softmax attention)
        return done("not-applicable", "jacobian-rank: softmax attention is not polynomial (exp has no twin modulo a "
                                      "prime); the Jacobian-rank method covers lightning attention only")
    if model.has_relu or not model.is_polynomial:
        return done("not-applicable", "jacobian-rank: polynomial activations only here (ReLU and leaky "
                                      "ReLU: symeq.relu.fdim, which symeq fibre calls; tanh/sigmoid: the classical "
                                      "theorems)")
    for i, layer in enumerate(model.layers):
        if not supports(layer, "jacobian-rank"):
            return done("not-applicable", f"jacobian-rank: layer {i + 1} ({layer.label}): {layer.kind} layers have "
                                          "no Jacobian rows yet (the jacobian-rank capability)")
    # the declared parameter space: per layer, biases when it was given a bias vector (zeros included)
    bias = layer_biases(model)
    P = sum(c for _, _, c in parameter_layout(model, bias))
    if P > MAX_PARAMS:
        return done("not-applicable", f"jacobian-rank: {P} parameters > the size guard {MAX_PARAMS}", n_params=P)
    K = model.layers[-1].out_dim
    N = -(-P // K) + EXTRA_POINTS
    from ..sizes import check_memory

    check_memory(N * K * P * 56 + _work_bytes(model, N, K),
                 "the Jacobian modulo p (uint64 entries, then python-flint's copy) and the per-point work arrays")
    try:
        return _decide(model, bias, P, K, N, seed, certificate, deadline, t0, timings, threads, done)
    except _NotApplicable as e:
        return done("not-applicable", f"jacobian-rank: {e}", n_params=P)
    except _Denominator as e:
        return done("undetermined", f"jacobian-rank: the prime 2^61-1 divides the denominator of {e}", n_params=P)
    except BudgetExceeded as e:
        return done("undetermined", f"jacobian-rank: budget exceeded: {e}", n_params=P)


def _rank_at(run, n):
    """The rank of J mod p at n sample points (and, for a certificate, its rows and pivot columns): the
    Jacobian, the orbit tangent's check, the time estimate that refuses an elimination that cannot fit."""
    model, bias, P, K, seed, want_cert, deadline, timings, threads, twins, tangents, dim_orbit, history, pivots = (
        run.model, run.bias, run.P, run.K, run.seed, run.want_cert, run.deadline, run.timings, run.threads,
        run.twins, run.tangents, run.dim_orbit, run.history, run.pivots)
    t = time.perf_counter()
    pts = _points(model.input_dim, n, seed)
    keep: dict = {}
    J = _jacobian(twins, _points_mod(pts), deadline, keep)
    timings["jacobian"] = timings.get("jacobian", 0.0) + time.perf_counter() - t
    if tangents and not history:  # the orbit tangent lies in ker J (a check of the formulas, mod p)
        prod = _matmul(J, _to_nmod(_sparse_rows(tangents, P).T.copy()))
        if prod.any():  # pragma: no cover - a wrong tangent formula
            raise AssertionError("an orbit tangent is not in the kernel of the Jacobian")
    deadline.check("the rank of the Jacobian modulo p")
    # the elimination cannot be interrupted: refuse it before it starts when it cannot fit the budget
    M, slack = J.shape[0], max(8, (P - dim_orbit) // 20)
    structured = STRUCTURED and P >= STRUCTURED_MIN_PARAMS and _affine_last(twins) and \
        (not want_cert or M <= P - dim_orbit + slack)
    # the matrix eliminated: with the structured path K (N - rank C) rows and the columns before the
    # last layer (rank C >= 1 with the bias column)
    Me, Pe = (M - (K if bias[-1] else 0), keep["last_col"]) if structured else J.shape
    est = RANK_SECONDS_PER_OP * Me * Pe * min(Me, Pe)
    left = [deadline.seconds - deadline.elapsed()] if deadline.seconds is not None else []
    if process_deadline() is not None:  # the command's own budget (symeq.cli.main's alarm)
        left.append(process_deadline() - time.perf_counter())
    if left and min(left) < est:
        raise BudgetExceeded(f"the rank of the {J.shape[0]} x {J.shape[1]} Jacobian modulo p needs about {est:.3g} s "
                             f"(an uninterruptible elimination), more than the {max(0.0, min(left)):.3g} s left; "
                             "raise --timeout")
    t = time.perf_counter()
    # the certificate lists all rows when they are at most 5 % more than the rank (no pivots
    # needed); then the structured elimination gives the same rank for less (_structured_rank)
    if structured:
        r = _structured_rank(J, keep["last_input"], keep["last_col"], K, bias[-1], threads)
        rows = list(range(M)) if want_cert and M <= r + max(8, r // 20) else None
        # the certificate's rows are needed only at rank = the bound, where M <= r + slack holds
        if want_cert and rows is None and r == P - dim_orbit:  # pragma: no cover
            r, rows = _rank_rows(J, want_cert, threads)
    else:
        r, rows = _rank_rows(J, want_cert, threads)
    timings["rank"] = timings.get("rank", 0.0) + time.perf_counter() - t
    history.append({"points": n, "rank": r})
    if PIVOT_COLUMNS and want_cert and rows is not None and r == P - dim_orbit and r < P:
        # fewer pivots than parameters (a continuous orbit): name the r x r block for the checker
        t = time.perf_counter()
        pivots[:] = _pivot_columns(J[rows], r, threads)
        timings["pivots"] = time.perf_counter() - t
    return pts, r, rows


def _decide(model, bias, P, K, N, seed, want_cert, deadline, t0, timings, threads, done):
    twins = _twins(model, bias)
    t = time.perf_counter()
    gens = orbit_tangent(model, bias)
    tangents = [v for _, v in gens]
    dim_orbit = _exact_rank(tangents, P)
    timings["orbit"] = time.perf_counter() - t
    history: list = []
    pivots: list = []
    run = SimpleNamespace(model=model, bias=bias, P=P, K=K, seed=seed, want_cert=want_cert, deadline=deadline,
                          timings=timings, threads=threads, twins=twins, tangents=tangents, dim_orbit=dim_orbit,
                          history=history, pivots=pivots)

    def rank_at(n):
        return _rank_at(run, n)

    upper = P - dim_orbit
    pts, r, rows = rank_at(N)
    fams, best = [], None
    for attempt in range(MAX_ROUNDS):
        if r >= upper:
            break
        if attempt == 0:  # the rank falls short: exact families in the fibre first (cheap)
            t = time.perf_counter()
            fams, best = _proven_family(model, bias, P, tangents, dim_orbit, pts, deadline)
            timings["families"] = time.perf_counter() - t
            if best is not None:
                break
        # more points: the rank at N points can stay below the functional dimension
        N = N + N // 2 + 1
        deadline.check("the rank at more points")
        pts, r2, rows = rank_at(N)
        if r2 == r:
            r = r2
            break
        r = r2
    common = dict(rank=r, n_params=P, orbit_dimension=dim_orbit, points=N)
    if r == upper:
        # the checker re-reads dense and conv2d layers: other kinds get the verdict without a certificate
        covered = all_support(model.layers, "rank-certificate")
        cert = _certificate(model, bias, pts, rows, r, dim_orbit, seed, gens) if want_cert and covered else None
        if cert is not None and pivots:
            cert["pivot_columns"] = list(pivots)
        return done("locally-identifiable",
                    f"the Jacobian of theta -> (f_theta(x_1), ..., f_theta(x_{N})) has rank {r} modulo 2^61-1 = "
                    f"#params {P} - dim K.theta {dim_orbit}: near theta the fibre is the orbit (constant-rank "
                    "theorem); the global question stays open", certificate=cert,
                    evidence={"ranks": history} if len(history) > 1 else None, **common)
    if r > upper:  # pragma: no cover - the tangents lie in the kernel
        raise AssertionError(f"rank {r} exceeds #params - dim K.theta = {upper}")
    if best is not None:
        cert = None
        if want_cert and all(_plain(layer) for layer in model.layers):
            cert = _family_certificate(model, bias, best, dim_orbit, gens)
        return done("not-identifiable",
                    f"the fibre contains an exact {best['kind']} family through theta ({best['proof']}); with the "
                    f"orbit's tangent it spans {best['dimension'] + dim_orbit} dimensions (rank mod p, a lower bound) "
                    f"> dim K.theta = {dim_orbit}, so the fibre is larger than the orbit; the Jacobian rank is {r} < "
                    f"{upper}", dimension_lower_bound=best["dimension"], certificate=cert,
                    families=[f for f in fams if f.get("dimension", 0) > 0], **common)
    stable = len(history) > 1 and history[-1]["rank"] == history[-2]["rank"]
    evidence = {"ranks": history, "stable": stable, "missing_directions": upper - r}
    reason = (f"the Jacobian rank {r} is below #params - dim K.theta = {upper} by {upper - r}"
              + (f" and stays {r} from {history[-2]['points']} to {history[-1]['points']} points: evidence (not a "
                 f"proof) of {upper - r} direction(s) of the fibre beyond the orbit (a deficit modulo p can also "
                 "come from an unlucky prime or points)" if stable else
                 f" at {history[-1]['points']} points, and it still rose with the points")
              + "; no exact family in the fibre was found, so nothing is proven")
    return done("unknown", reason, evidence=evidence, **common)


def _proven_family(model, bias, P, tangents, dim_orbit, pts, deadline):
    """The exact families in the fibre and the one whose tangent adds most to the orbit's (or None)."""
    fams = _families(model, bias)[:MAX_FAMILIES]
    best = None
    base = _sparse_rows(tangents, P) if tangents else np.zeros((0, P), dtype=np.uint64)
    for f in fams:
        deadline.check("the tangent spaces of exact families in the fibre")
        stack = np.vstack([base, _sparse_rows(f["tangents"], P)])
        f["dimension"] = _to_nmod(stack).rank() - dim_orbit
        if f["kind"] == "rotation":
            _check_rotation(model, bias, f, pts)
        if f["dimension"] > 0 and (best is None or f["dimension"] > best["dimension"]):
            best = f
    return fams, best


def _check_rotation(model, bias, fam, pts) -> None:
    """f at theta(t = 1) equals f at theta at the sample points, exactly (small models)."""
    if model.n_params > _CURVE_CHECK_PARAMS:
        return
    i = fam["layer"] - 1
    X = fmpq_mat(model.input_dim, min(len(pts), 64), [fmpq(pt[r].numerator, pt[r].denominator)
                                                       for r in range(model.input_dim) for pt in pts[:64]])
    for j1, j2, mu1, mu2 in fam["curves"]:
        # I - tA/2 has determinant 1 + t^2 / (4 mu1 mu2): singular at t = 1 when mu1 mu2 = -1/4, never at t = 2 then
        t = 2 if 4 * mu1 * mu2 == -1 else 1
        new, _ = _rotate(model, bias, i, j1, j2, mu1, mu2, fam["centre"], t)
        if new.forward(X) != model.forward(X):  # pragma: no cover - the proof says equal
            raise AssertionError("a rotation curve leaves the fibre")


_PARAMETER_ORDER = ("per layer: W row-major, then b (when the layer has biases); a conv2d layer: its kernel "
                    "row-major (output channel, then taps in (input channel, i, j) order), then its channel biases")


def _certificate(model, bias, pts, rows, r, dim_orbit, seed, gens) -> dict:
    from ..digest import layers_digest
    from ..io import layers_to_json

    layers_json = layers_to_json(model)
    return {
        "format": "symeq-identifiability/1",
        "method": METHOD,
        "verdict": "locally-identifiable",
        "widths": model.widths,
        "bias": bias_field(bias, model),
        "layers_sha256": layers_digest(layers_json, model.input_dim),
        "prime": str(PRIME),
        "seed": seed,
        "parameters": sum(c for _, _, c in parameter_layout(model, bias)),
        "parameter_order": _PARAMETER_ORDER,
        "points": [[str(x) for x in pt] for pt in pts],
        "rows": rows,
        "rank": r,
        "orbit_dimension": dim_orbit,
        "orbit_generators": [label for label, _ in gens],
    }


def _family_certificate(model, bias, fam, dim_orbit, gens) -> dict:
    """``not-identifiable``: the family (kind, hidden layer, neurons) and the dimension it proves; the checker
    re-derives the family's condition and tangents from the model and recomputes the ranks."""
    from ..digest import layers_digest
    from ..io import layers_to_json

    return {
        "format": "symeq-identifiability/1",
        "method": METHOD,
        "verdict": "not-identifiable",
        "widths": model.widths,
        "bias": bias_field(bias, model),
        "layers_sha256": layers_digest(layers_to_json(model), model.input_dim),
        "prime": str(PRIME),
        "parameters": sum(c for _, _, c in parameter_layout(model, bias)),
        "parameter_order": "per layer: W row-major, then b (when the layer has biases)",
        "family": {"kind": fam["kind"], "layer": fam["layer"], "neurons": list(fam["neurons"])},
        "orbit_dimension": dim_orbit,
        "orbit_generators": [label for label, _ in gens],
        "dimension_lower_bound": fam["dimension"],
    }
