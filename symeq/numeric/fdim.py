"""Functional dimension: the rank of the Jacobian of theta -> (f_theta(x_j))_j, a numeric identifiability probe.

If theta is identifiable up to a latent group K (the fibre is the orbit K.theta, docs/theory.md), the
fibre near theta is a manifold of dimension dim K, so the map theta -> f_theta has rank
``#params - dim K`` at generic theta; the rank at enough sample points (N n_out >= #params) is that
rank (Grigsby, Lindsey, Rolnick 2023 call it the functional dimension).  A rank below it shows
extra flat directions: cloned or inactive neurons (submodels), or hidden symmetries.

What ``dim K`` is here (the continuous part of prod K_i acting on the parameters):

====================  ===============================================================
activation            dim K
====================  ===============================================================
odd (tanh, tanh_k)    0  (signed permutations: finite)
generic, even, gelu,  0  (permutations: finite)
sigmoid
monomial t^d,         one nonzero scaling per hidden neuron: sum of hidden widths
(t - s)^d
monomial up to a      one nonzero scaling per hidden neuron (z -> alpha (z - s) + s; the
constant, t + t^2,    output's constant e (1 - alpha^d) is absorbed by the next bias):
1 + t^3               sum of hidden widths
relu                  one positive scaling per hidden neuron: sum of hidden widths
====================  ===============================================================

The parameter space here always has biases (a float layer without a bias gets zeros, which are
parameters of the Jacobian), so dim K is that of the latent groups *with* biases: the absorbed-
constant rule of docs/theory.md, as in the exact fibre (:mod:`symeq.fibre.ideal` gauge-fixes one
entry of each neuron that ``Activation.continuous(bias=True)`` makes continuous, and
:mod:`symeq.fibre.orbit` compares the gauge-fixed fibre with the orbit).  The classes and
their tangent directions are read off :class:`~symeq.numeric.models.Scalings`, itself read off the
exact activation.

For a polynomial network the image lies in the space of polynomial maps of degree <= D, so the
expected rank is also at most ``n_out * binom(n_0 + D, D)`` (the neurovariety is then *filling*:
Kileel, Trager, Bruna 2019); :func:`expected_dimension` returns the minimum.  For ReLU it is an
upper bound: hidden symmetries beyond positive scalings exist (Grigsby, Lindsey, Rolnick 2023).

Two methods (``method="auto"`` takes dense up to ``max_params`` = 2*10^4 parameters):

* **dense**: the stacked Jacobian, analytic (backpropagation written out in numpy, batched over
  points) or from torch autograd (``torch.func.jacrev`` under ``vmap``, on GPU when present), and
  its singular values; the rank is cut at the largest gap below rtol, and the gap is reported: a
  rank is only as credible as its gap is large (1e6 or more is clear in float64).
* **krylov** (matrix-free, 10^5+ parameters): :class:`JacobianOperator` applies J and J^T to
  blocks of vectors (forward and reverse mode, numpy or torch); the tangent directions of K
  (:func:`symmetry_directions`) are checked to lie in the kernel and deflated; a block LOBPCG
  with a K-FAC preconditioner and an SVD-based Rayleigh-Ritz step (accurate down to eps s_max,
  where J^T J would stop at sqrt(eps) s_max) looks for further kernel directions.  Found ones are
  rechecked directly (|J V| is recomputed) and counted; the smallest singular value above the cut
  is a Ritz estimate, an *upper* bound.  The result is an estimate with its numbers, not a proof
  of full rank: an iteration can in principle miss a kernel direction (slow convergence shows as
  a small gap, and a search that ends at ``maxiter`` before settling says NOT SETTLED; ReLU and
  deep polynomial nets converge slowly, tanh nets well).

Examples
--------
>>> from symeq.numeric.models import NumericModel, NumericDenseLayer, numeric_activation
>>> rng = np.random.default_rng(0)
>>> m = NumericModel(2, [NumericDenseLayer(rng.standard_normal((3, 2)), rng.standard_normal(3), numeric_activation("tanh")),
...                      NumericDenseLayer(rng.standard_normal((1, 3)), rng.standard_normal(1))])
>>> r = functional_dimension(m, rng=1)
>>> r.rank, r.n_params, r.expected
(13, 13, 13)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from math import comb

import numpy as np

from ..backends import Float64, reverse_jacobian
from ..errors import InputError
from ..layers.dense import DenseProgram
from .models import NumericModel

__all__ = ["FunctionalDimension", "functional_dimension", "jacobian", "expected_dimension", "latent_dimension",
           "JacobianOperator", "symmetry_directions"]


def latent_dimension(model: NumericModel) -> int:
    """dim K: the continuous part of prod K_i (see the module table)."""
    return sum(l.out_dim for l in model.layers[:-1] if l.activation.scalings.alphas in ("nonzero", "positive"))


def expected_dimension(model: NumericModel) -> tuple[int, str]:
    """#params - dim K, capped by the dimension of the polynomial maps for polynomial nets."""
    e = model.n_params - latent_dimension(model)
    why = f"#params {model.n_params} - dim K {latent_dimension(model)}"
    acts = [l.activation for l in model.layers[:-1]]
    if all(a.name == "polynomial" for a in acts):
        D = 1
        for a in acts:
            D *= a.degree
        amb = model.output_dim * comb(model.input_dim + D, D)
        if amb < e:
            return amb, f"{why} exceeds the dimension {amb} of polynomial maps of degree {D} (filling)"
    if any(a.symmetry == "relu" for a in acts):
        why += " (an upper bound for ReLU: hidden symmetries may lower it)"
    return e, why


def jacobian(model: NumericModel, X: np.ndarray) -> np.ndarray:
    """d f(x_j) / d theta for each point, stacked: shape (N * n_out, #params), numpy analytic.

    Parameter order is :meth:`NumericModel.parameters` (W_1 row-major, b_1, W_2, ...).  The dense kind's
    one forward pass and reverse-mode Jacobian (:class:`symeq.layers.dense.DenseProgram` through
    :func:`symeq.backends.reverse_jacobian`) over float64, each layer's float activation and its
    derivative supplied pointwise.
    """
    X = np.asarray(X, dtype=np.float64)
    bk = Float64()
    # a float dense layer's own program; any other layer (a convolution) as its dense expansion, whose
    # entries are the model's parameter vector (NumericModel.parameters)
    programs = [l.program() if hasattr(l, "program") else DenseProgram(bk, l.weight, l.bias, True)
                for l in model.layers]
    pointwise = [None if l.activation is None else _values_and_slopes(l.activation) for l in model.layers]
    return reverse_jacobian(programs, X.T, bk, pointwise=pointwise)


def _values_and_slopes(act):
    return lambda Z: (act(Z), act.prime(Z))


def _torch_net(model: NumericModel, device):
    """(torch, device, float64 nn.Sequential, parameter names, detached parameters) for autograd."""
    from .models import _torch

    torch = _torch()
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    net = model.to_torch(dtype=torch.float64, device=dev)
    names = [n for n, _ in net.named_parameters()]
    return torch, dev, net, names, tuple(p.detach() for _, p in net.named_parameters())


def _torch_jacobian(model: NumericModel, X: np.ndarray, device=None, chunk: int = 256) -> np.ndarray:
    torch, dev, net, names, ps = _torch_net(model, device)
    from torch.func import functional_call, jacrev, vmap

    params = dict(zip(names, ps))

    def f(p, x):
        return functional_call(net, p, (x[None, :],))[0]

    jf = vmap(jacrev(f), in_dims=(None, 0))
    out = []
    Xt = torch.from_numpy(np.asarray(X, dtype=np.float64)).to(dev)
    for s in range(0, Xt.shape[0], chunk):
        jac = jf(params, Xt[s:s + chunk])
        n = jac[names[0]].shape[0]
        # nn.Linear stores weight (out, in) row-major and bias: the same order as parameters()
        out.append(torch.cat([jac[k].reshape(n, model.output_dim, -1) for k in names], dim=2)
                   .reshape(n * model.output_dim, -1).cpu().numpy())
    return np.concatenate(out, axis=0)


def _rank_from_gap(s: np.ndarray, rtol: float, shape: tuple[int, int], min_gap: float = 100.0) -> tuple[int, float]:
    """The numerical rank: the cut at the largest ratio s_k / s_{k+1} below rtol * s_0.

    Singular values are first floored at the float64 noise level (10 eps max(shape) s_0), so
    that exact zeros (1e-33) do not create spurious gaps inside the noise.  If no singular value
    is below rtol * s_0 the rank is full; if the largest gap is below ``min_gap`` there is no clear
    cut and the count above the noise floor is returned with that (small) gap.
    """
    if s.shape[0] == 0 or s[0] == 0:
        return 0, float("inf")
    floor = 10 * np.finfo(np.float64).eps * max(shape) * s[0]
    f = np.maximum(s, floor)
    small = np.nonzero(f < rtol * s[0])[0]
    if small.shape[0] == 0:
        return int(s.shape[0]), float("inf")
    ks = np.arange(max(small[0] - 1, 0), f.shape[0] - 1)
    ratios = f[ks] / f[ks + 1]
    j = int(np.argmax(ratios))
    if ratios[j] < min_gap:
        return int(np.sum(s > floor)), float(ratios[j])
    return int(ks[j]) + 1, float(ratios[j])


# -- matrix-free: 10^5+ parameters --------------------------------------------------------------

class JacobianOperator:
    """The Jacobian J of theta -> (f_theta(x_j))_j at fixed points X, matrix-free and batched.

    ``J @ V`` is forward-mode differentiation (one pass for a block of k directions, shape
    (#params, k)), ``J.T @ U`` is backpropagation, ``gram(V) = J^T J V``.  Rows are ordered as in
    :func:`jacobian` (point-major, then output); nothing of size #params x #params or
    #rows x #params is ever formed.  ``backend="torch"`` uses ``torch.func.jvp`` / ``vjp``
    under ``vmap`` (on GPU when one is present); the numpy backend is the analytic chain rule.

    >>> rng = np.random.default_rng(0)
    >>> from symeq.numeric.models import NumericDenseLayer, NumericModel, numeric_activation
    >>> m = NumericModel(2, [NumericDenseLayer(rng.standard_normal((3, 2)), rng.standard_normal(3), numeric_activation("tanh")),
    ...                      NumericDenseLayer(rng.standard_normal((1, 3)), rng.standard_normal(1))])
    >>> X = rng.standard_normal((5, 2)); V = rng.standard_normal((m.n_params, 2))
    >>> bool(np.allclose(JacobianOperator(m, X).matmat(V), jacobian(m, X) @ V))
    True
    """

    def __init__(self, model: NumericModel, X: np.ndarray, backend: str = "numpy", device=None):
        if backend not in ("numpy", "torch"):
            raise InputError(f"unknown backend {backend!r}; use numpy or torch")
        self.model, self.backend = model, backend
        self.X = np.asarray(X, dtype=np.float64)
        H, S = [self.X], []
        for l in model.layers:
            z = l.pre_activation(H[-1])
            H.append(z if l.activation is None else l.activation(z))
            S.append(None if l.activation is None else l.activation.prime(z))
        self.H, self.S = H, S          # features entering each layer; sigma' at each hidden layer
        self.sizes = [(l.out_dim, l.in_dim) for l in model.layers]
        self.shape = (self.X.shape[0] * model.output_dim, model.n_params)
        self.n_matvecs = 0
        if backend == "torch":
            self._init_torch(device)

    # parameter blocks: V (P, k) -> [(dW (k, out, in), db (k, out)), ...]
    def _split(self, V):
        k, p, out = V.shape[1], 0, []
        for o, i in self.sizes:
            out.append((V[p:p + o * i].T.reshape(k, o, i), V[p + o * i:p + o * i + o].T))
            p += o * i + o
        return out

    def matmat(self, V: np.ndarray) -> np.ndarray:
        """J V for V of shape (#params, k) (or (#params,)): shape (#rows, k)."""
        V = np.asarray(V, dtype=np.float64)
        one = V.ndim == 1
        V = V[:, None] if one else V
        if V.shape[1] == 0:
            return np.zeros((self.shape[0], 0))
        self.n_matvecs += V.shape[1]
        D = self._jvp_torch(V) if self.backend == "torch" else self._jvp(V)   # (k, N, n_out)
        out = D.transpose(1, 2, 0).reshape(-1, V.shape[1])
        return out[:, 0] if one else out

    def rmatmat(self, U: np.ndarray) -> np.ndarray:
        """J^T U for U of shape (#rows, k) (or (#rows,)): shape (#params, k)."""
        U = np.asarray(U, dtype=np.float64)
        one = U.ndim == 1
        U = U[:, None] if one else U
        k = U.shape[1]
        if k == 0:
            return np.zeros((self.shape[1], 0))
        U3 = U.reshape(self.X.shape[0], self.model.output_dim, k).transpose(2, 0, 1)
        out = self._vjp_torch(U3) if self.backend == "torch" else self._vjp(U3)
        return out[:, 0] if one else out

    def gram(self, V: np.ndarray) -> np.ndarray:
        """J^T J V."""
        return self.rmatmat(self.matmat(V))

    def _jvp(self, V):
        D = None
        for j, (l, (dW, db)) in enumerate(zip(self.model.layers, self._split(V))):
            z = np.matmul(self.H[j][None], dW.transpose(0, 2, 1)) + db[:, None, :]
            if D is not None:
                z += D @ l.weight.T
            D = z if self.S[j] is None else z * self.S[j][None]
        return D

    def _vjp(self, U):
        k, grads = U.shape[0], []
        for j in range(len(self.model.layers) - 1, -1, -1):
            gW = np.matmul(U.transpose(0, 2, 1), self.H[j][None])
            grads.append(np.concatenate([gW.reshape(k, -1), U.sum(axis=1)], axis=1))
            if j > 0:
                U = (U @ self.model.layers[j].weight) * self.S[j - 1][None]
        return np.concatenate(grads[::-1], axis=1).T

    # -- torch autograd (forward-mode linearization and reverse mode, vmapped over directions)
    def _init_torch(self, device):
        torch, dev, net, names, ps = _torch_net(self.model, device)
        from torch.func import functional_call, jvp, vjp, vmap

        self._torch = torch
        Xt = torch.from_numpy(self.X).to(dev)

        def f(*p):
            return functional_call(net, dict(zip(names, p)), (Xt,))

        def jvp_fn(*tangents):   # torch.func.jvp (linearize goes through torch.fx and warns)
            return jvp(f, ps, tangents)[1]

        _, vjp_fn = vjp(f, *ps)
        self._tjvp, self._tvjp = vmap(jvp_fn), vmap(vjp_fn)
        self._dev, self._pshapes = dev, [p.shape for p in ps]
        self.device = str(dev)

    def _jvp_torch(self, V):
        torch = self._torch
        Vt = torch.from_numpy(np.ascontiguousarray(V.T)).to(self._dev)
        tangents, p = [], 0
        for shp in self._pshapes:
            n = int(np.prod(shp))
            tangents.append(Vt[:, p:p + n].reshape(V.shape[1], *shp))
            p += n
        return self._tjvp(*tangents).cpu().numpy()

    def _vjp_torch(self, U):
        torch = self._torch
        grads = self._tvjp(torch.from_numpy(np.ascontiguousarray(U)).to(self._dev))
        return torch.cat([g.reshape(U.shape[0], -1) for g in grads], dim=1).cpu().numpy().T

    def kfac_preconditioner(self, damping: float = 1e-10):
        """An approximate inverse of J^T J: per layer the Kronecker factors (K-FAC).

        For layer i the block of J^T J is sum_x (delta delta^T) (x) (h h^T) with h = (input; 1) and
        delta = d f / d z_i; K-FAC replaces it by B (x) A with A = mean h h^T and B = mean
        delta delta^T (exact for the last layer), inverted factor by factor with eigenvalues
        floored at ``damping`` times the largest (Martens and Grosse 2015).  A small damping
        lets preconditioned iterations find exactly-null directions of a block fast.
        """
        m, N = self.model, self.X.shape[0]
        n_out = m.output_dim
        U = np.broadcast_to(np.eye(n_out)[:, None, :], (n_out, N, n_out)).copy()
        Bs = []
        for j in range(len(m.layers) - 1, -1, -1):
            Bs.append(np.einsum("kno,knp->op", U, U) / N)
            if j > 0:
                U = (U @ m.layers[j].weight) * self.S[j - 1][None]
        Bs = Bs[::-1]

        def pinv(M):
            w, Q = np.linalg.eigh(M)
            w = np.maximum(w, damping * max(w[-1], 1e-300))
            return (Q / w) @ Q.T

        inv = []
        for j, (o, i) in enumerate(self.sizes):
            Ht = np.concatenate([self.H[j], np.ones((N, 1))], axis=1)
            inv.append((pinv(Ht.T @ Ht / N), pinv(Bs[j])))

        def apply(V):
            V = np.asarray(V, dtype=np.float64)
            V = V[:, None] if V.ndim == 1 else V
            k, out = V.shape[1], []
            for (dW, db), (Ai, Bi) in zip(self._split(V), inv):
                T = np.concatenate([dW, db[:, :, None]], axis=2)
                T = Bi[None] @ T @ Ai[None]
                out.append(np.concatenate([T[:, :, :-1].reshape(k, -1), T[:, :, -1]], axis=1))
            return np.concatenate(out, axis=1).T

        return apply


def symmetry_directions(model: NumericModel) -> np.ndarray:
    """Tangent directions of the continuous part of prod K_i at theta: shape (#params, dim K).

    For a hidden neuron k with sigma(t) = c (t - s)^d (monomial, ReLU: d = 1, s = 0) the curve
    alpha -> (row_k alpha, bias (b_k - s) alpha + s, outgoing column alpha^-d) keeps f_theta; its
    tangent at alpha = 1 is (row_k, b_k - s, -d column_k).  For c (t - s)^d + e the output also
    moves by o(alpha) = e (1 - alpha^d), which the next bias absorbs (tangent + e d column_k
    there).  Which neurons have such a curve, and d and e, come from the activation's
    :class:`~symeq.numeric.models.Scalings`.  These span the kernel of the Jacobian that
    identifiability up to K predicts.
    """
    P = model.n_params
    offs, p = [], 0
    for l in model.layers:
        offs.append(p)
        p += l.in_dim * l.out_dim + l.out_dim
    cols = []
    for i, l in enumerate(model.layers[:-1]):
        a = l.activation
        sc = a.scalings
        if sc.alphas not in ("nonzero", "positive"):
            continue
        d, s = sc.power, a.shift
        nxt = model.layers[i + 1]
        nb = offs[i + 1] + nxt.in_dim * nxt.out_dim  # the next layer's bias
        for k in range(l.out_dim):
            z = np.zeros(P)
            z[offs[i] + k * l.in_dim: offs[i] + (k + 1) * l.in_dim] = l.weight[k]
            z[offs[i] + l.in_dim * l.out_dim + k] = l.bias[k] - s
            z[offs[i + 1] + k: nb: nxt.in_dim] = -d * nxt.weight[:, k]
            if sc.constant:
                z[nb: nb + nxt.out_dim] = sc.constant * d * nxt.weight[:, k]
            cols.append(z)
    return np.array(cols).T if cols else np.zeros((P, 0))


def _norm2(M: np.ndarray) -> float:
    return float(np.linalg.norm(M, 2)) if M.size else 0.0


def _project_out(V: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """V minus its component in the span of the orthonormal columns of Q (twice, for rounding)."""
    if Q.shape[1] == 0 or V.shape[1] == 0:
        return V
    for _ in range(2):
        V = V - Q @ (Q.T @ V)
    return V


def _orth_cols(V: np.ndarray, rel: float = 1e-10, ref: float | None = None,
               floor: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal Q spanning V (numerically independent part) and T with Q = V T.

    Directions with singular value below ``rel * ref`` are dropped; ``ref`` is the size of V
    *before* it was projected (default: its largest singular value), so that what is left of a
    vector after projecting out a subspace that contains it -- rounding noise -- is not kept;
    and below ``floor`` in any case.
    """
    if V.shape[1] == 0:
        return V, np.zeros((0, 0))
    U, s, Wt = np.linalg.svd(V, full_matrices=False)
    keep = s > max(rel * max(s[0] if ref is None else ref, 1e-300), floor)
    return U[:, keep], Wt[keep].T / s[keep]


def _sigma_max(op: JacobianOperator, rng, iters: int = 30, block: int = 3) -> float:
    """The largest singular value of J by block power iteration on J^T J (a lower bound, close)."""
    Q, _ = np.linalg.qr(rng.standard_normal((op.shape[1], block)))
    for _ in range(iters):
        Q, _ = np.linalg.qr(op.gram(Q))
    return float(np.linalg.svd(op.matmat(Q), compute_uv=False)[0])


def _converged_kernel(op: JacobianOperator, X, sig, lock: float):
    """The mask of :func:`_krylov`'s Ritz vectors to lock as kernel directions: sigma <= ``lock``, and
    |J x| <= lock |x| rechecked directly (with |x| > 0.5)."""
    is_null = sig <= lock
    if is_null.any():                      # kernel candidates: recheck |J x| directly
        Jc = op.matmat(X[:, is_null])
        xn = np.linalg.norm(X[:, is_null], axis=0)
        ok = np.flatnonzero(is_null)[(np.linalg.norm(Jc, axis=0) <= lock * xn) & (xn > 0.5)]
        is_null = np.zeros_like(is_null)
        is_null[ok] = True
    return is_null


def _krylov(op: JacobianOperator, rtol: float, block: int, maxiter: int, chunk: int, max_extra: int, rng,
            progress=None, stall: float = 0.8):
    """The smallest singular values of J on the complement of the K-tangent directions.

    A block LOBPCG for J^T J (Knyazev 2001) whose Rayleigh-Ritz step is an SVD of J S for the
    search space S = [X, W, P], not an eigendecomposition of S^T J^T J S: squaring J would lose
    every singular value below sqrt(eps) s_max, and the kernel test works at rtol s_max
    (the same idea as PRIMME_SVDS, Wu, Romero and Stathopoulos 2017).  W is the residual
    J^T J x - sigma^2 x through the K-FAC preconditioner.  Ritz vectors with sigma <= rtol s_max
    are kernel directions; once converged (sigma <= 1e-2 rtol s_max, rechecked directly) they are
    moved to the constraints and replaced by random vectors, in a block up to twice as wide.
    Every ``chunk`` iterations the smallest Ritz value is compared with the previous one; the
    search stops when it fell by less than the factor ``stall`` (after two rounds) while above
    100 times the cut, at
    ``maxiter``, or after ``max_extra`` kernel directions.
    """
    P = op.shape[1]
    s_max = _sigma_max(op, rng)
    Z = _orth_cols(symmetry_directions(op.model), 1e-12)[0]
    sym_res = _norm2(op.matmat(Z)) / s_max if Z.shape[1] else 0.0
    cut = rtol * s_max
    lock = 1e-2 * cut                  # lock converged kernel vectors only: half-converged ones mix in
    pre = op.kfac_preconditioner(1e-8)
    null = np.zeros((P, 0))
    empty = np.zeros((op.shape[0], 0))
    X = Pd = np.zeros((P, 0))
    JX = JP = empty
    sig = res = np.zeros(0)
    iters, prev, history, settled = 0, None, [], False
    b = min(block, P - Z.shape[1])
    while iters < maxiter and b > 0:
        Y = np.concatenate([Z, null], axis=1)
        if X.shape[1] < b:               # (re)fill the block with random directions
            R0 = rng.standard_normal((P, b - X.shape[1]))
            ref = float(np.linalg.norm(R0, axis=0).max())
            Q, _ = _orth_cols(_project_out(_project_out(R0, Y), X), 1e-6, ref)
            if Q.shape[1] == 0 and X.shape[1] == 0:
                break                  # the complement is used up
            X, JX = np.concatenate([X, Q], axis=1), np.concatenate([JX, op.matmat(Q)], axis=1)
            if iters == 0 or sig.shape[0] != X.shape[1]:
                U, sv, Vt = np.linalg.svd(JX, full_matrices=False)
                X, JX, sig = X @ Vt.T, JX @ Vt.T, sv
        GX = op.rmatmat(JX)
        Rr = GX - X * sig ** 2
        res = np.linalg.norm(Rr, axis=0)
        W = pre(Rr)
        for _ in range(2):             # twice: normalising tiny remainders amplifies what is left of Y
            ref = float(np.linalg.norm(W, axis=0).max()) if W.shape[1] else 0.0
            W = _project_out(_project_out(W, Y), np.concatenate([X, Pd], axis=1))
            W, _ = _orth_cols(W, 1e-8, ref)
        JW = op.matmat(W)
        S = np.concatenate([X, W, Pd], axis=1)
        JS = np.concatenate([JX, JW, JP], axis=1)
        _, sv, Vt = np.linalg.svd(JS, full_matrices=False)
        C = Vt.T[:, ::-1][:, :b]               # the b smallest singular values
        sig = sv[::-1][:b]
        Xn, JXn = S @ C, JS @ C
        nx = X.shape[1]
        Pn, JPn = S[:, nx:] @ C[nx:], JS[:, nx:] @ C[nx:]
        coef = Xn.T @ Pn
        Pn, JPn = Pn - Xn @ coef, JPn - JXn @ coef
        Q, T = _orth_cols(Pn, 1e-4, floor=1e-12)   # J P is carried along, not recomputed: keep T tame
        X, JX, Pd, JP = Xn, JXn, Q, JPn @ T
        iters += 1
        is_null = _converged_kernel(op, X, sig, lock)
        if is_null.any():
            null = _orth_cols(np.concatenate([null, X[:, is_null]], axis=1), 1e-12)[0]
            X, JX, sig = X[:, ~is_null], JX[:, ~is_null], sig[~is_null]
            Pd, JP = np.zeros((P, 0)), empty
            prev = None
            if progress is not None:
                progress(f"krylov: {iters} iterations, kernel directions found {null.shape[1]}")
            if null.shape[1] >= max_extra:
                break
            b = min(max(b, 2 * int(is_null.sum())), 8 * block, P - Z.shape[1] - null.shape[1])
            continue                   # a kernel is one degenerate eigenspace: a wider block takes it at once
        if iters % chunk == 0:
            history.append((iters, float(sig[0] / s_max)))
            if progress is not None:
                progress(f"krylov: {iters} iterations, smallest sigma/sigma_max {sig[0] / s_max:.3g} "
                         f"(residual {res[0]:.2g}), kernel directions found {null.shape[1]}")
            if prev is not None and sig[0] ** 2 > stall * prev ** 2 and iters >= 2 * chunk and sig[0] > 100 * cut:
                settled = True
                break                  # settled well above the cut: a kernel direction would keep falling
            prev = sig[0]
    below = sig <= cut                 # below the cut but not converged to the lock: counted too
    if below.any():
        null = _orth_cols(np.concatenate([null, X[:, below]], axis=1), 1e-12)[0]
        sig, res = sig[~below], res[:len(below)][~below]
    null_bound = _norm2(op.matmat(null)) / s_max if null.shape[1] else 0.0
    return {"sigma_max": s_max, "dim_k_directions": Z.shape[1], "symmetry_residual": sym_res,
            "null_found": null.shape[1], "null_bound": null_bound, "null_capped": null.shape[1] >= max_extra,
            "ritz": np.asarray(sig), "ritz_residual": np.asarray(res[:len(sig)]), "iterations": iters,
            "matvecs": op.n_matvecs, "history": history,
            "settled": settled or null.shape[1] >= max_extra or X.shape[1] == 0}


@dataclass
class FunctionalDimension:
    """Result of :func:`functional_dimension`."""

    rank: int
    n_params: int
    expected: int
    expected_reason: str
    gap: float                 # s_rank / s_{rank+1} at the cut (inf if the rank is full)
    singular_values: np.ndarray
    n_points: int
    rtol: float
    backend: str
    seconds: float
    method: str = "dense"          # "dense" (SVD of the stacked Jacobian) or "krylov" (matrix-free)
    details: dict = field(default_factory=dict)

    @property
    def deficiency(self) -> int:
        """expected - rank: > 0 means flat directions beyond K (clones, inactive neurons, hidden symmetries)."""
        return self.expected - self.rank

    def report(self) -> str:
        if self.method == "krylov":
            return self._krylov_report()
        if not np.isfinite(self.gap):
            gap = "full rank, no singular value below rtol"
        elif self.gap < 100:
            gap = f"NO clear gap (largest ratio {self.gap:.3g}): counted above the float64 noise floor, ill-conditioned"
        else:
            gap = f"singular-value gap {self.gap:.3g} at the cut"
        return (f"functional dimension {self.rank} ({gap}; rtol {self.rtol:g}, {self.n_points} points, "
                f"{self.backend}, {self.seconds:.2f} s); expected {self.expected} = {self.expected_reason}")

    def _krylov_report(self) -> str:
        d = self.details
        at_most = "at most " if d["null_capped"] else ""
        lines = [f"functional dimension {at_most}{self.rank} (matrix-free estimate: LOBPCG on J^T J with K-FAC "
                 f"preconditioning, {d['iterations']} iterations, {d['matvecs']} Jacobian products, "
                 f"{self.n_points} points, {self.backend}, {self.seconds:.1f} s); expected {self.expected} = "
                 f"{self.expected_reason}"]
        lines.append(f"  sigma_max ~ {d['sigma_max']:.4g}; the {d['dim_k_directions']} tangent directions of K "
                     f"have |J Z| / sigma_max = {d['symmetry_residual']:.2g}")
        if d["null_found"]:
            lines.append(f"  {d['null_found']} further kernel directions V found{' (search capped)' if d['null_capped'] else ''}: "
                         f"|J V| / sigma_max = {d['null_bound']:.2g} (an upper bound, recomputed directly)")
        if not d["settled"]:
            lines.append(f"  NOT SETTLED: {d['iterations']} iterations (maxiter) ended with the smallest Ritz value "
                         "still falling near the cut; the rank is uncertain (raise maxiter, or use the dense method)")
        if d["smallest_above"] is not None:
            lines.append(f"  smallest singular value above the cut ~ {d['smallest_above']:.3g} "
                         f"({d['smallest_above'] / d['sigma_max']:.2g} sigma_max; Ritz estimate, an upper bound; a "
                         f"smaller one missed by the iteration is not excluded); gap {self.gap:.3g}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        if self.method == "krylov":
            d = dict(self.details)
            d["ritz"] = [float(x) for x in d["ritz"]]
            d["ritz_residual"] = [float(x) for x in d["ritz_residual"]]
            return {"rank": self.rank, "n_params": self.n_params, "expected": self.expected,
                    "expected_reason": self.expected_reason, "gap": self.gap, "n_points": self.n_points,
                    "rtol": self.rtol, "backend": self.backend, "seconds": self.seconds, "method": "krylov",
                    "details": d}
        return {"rank": self.rank, "n_params": self.n_params, "expected": self.expected,
                "expected_reason": self.expected_reason, "gap": self.gap, "n_points": self.n_points,
                "rtol": self.rtol, "backend": self.backend, "seconds": self.seconds,
                "smallest_singular_values": self.singular_values[-10:].tolist()}


def functional_dimension(model: NumericModel, *, n_points: int | None = None, rtol: float = 1e-7,
                         backend: str = "numpy", device=None, rng=None, method: str = "auto",
                         max_params: int = 20000, block: int = 8, maxiter: int = 1000,
                         max_extra: int = 64, progress=None) -> FunctionalDimension:
    """The rank of the Jacobian of theta -> (f_theta(x_j))_j at Gaussian points x_j.

    Parameters
    ----------
    n_points : sample points (default: enough that N * n_out >= 1.5 #params + 10)
    rtol : singular values below rtol * s_max count as zero
    backend : "numpy" (analytic, batched) or "torch" (autograd, GPU when present)
    method : "dense" (SVD of the stacked Jacobian, O(#params^3), up to ``max_params``),
        "krylov" (matrix-free, any size) or "auto" (dense up to ``max_params``, else krylov)
    block, maxiter, max_extra : krylov only: LOBPCG block size, iteration budget, and how many
        kernel directions beyond those of K are counted before stopping (the rank is then an
        upper bound); ``progress``: a callable receiving one line per LOBPCG round

    The dense method cuts at the largest singular-value gap below rtol.  The krylov method
    deflates the tangent directions of K (:func:`symmetry_directions`, checked to lie in the
    kernel), then runs LOBPCG with a K-FAC preconditioner (:meth:`JacobianOperator.kfac_preconditioner`)
    for the smallest eigenvalues of J^T J: Ritz vectors with ``|J v| <= rtol s_max`` are kernel
    directions (the bound is recomputed directly), they are deflated and the search continues;
    it stops when the smallest Ritz value has settled above the cut.  That value is an upper
    bound on the smallest singular value above the cut, not a certificate that none is smaller:
    the krylov rank is an estimate, reported with its numbers.

    References
    ----------
    Grigsby, Lindsey, Rolnick, *Hidden symmetries of ReLU networks*, ICML 2023 (functional
    dimension as a Jacobian rank); Shahverdi et al. 2026 (identifiability up to K_i); Knyazev
    2001 (LOBPCG); Martens and Grosse 2015 (K-FAC).
    """
    if getattr(model, "token_mixing", False):
        raise InputError("the functional dimension is implemented for dense models only; this one starts with attention")
    from ..layers.registry import KindUnsupported, supports

    bad = next((l for l in model.layers if supports(l, "parameter-free")), None)
    if bad is not None:  # pooling: no weights to differentiate through yet
        raise KindUnsupported(bad.kind, "jacobian-rank", "the functional dimension (the Jacobian through a pooling "
                              "layer is not implemented)")
    P = model.n_params
    if method not in ("auto", "dense", "krylov"):
        raise InputError(f"unknown method {method!r}; use auto, dense or krylov")
    if method == "auto":
        method = "dense" if P <= max_params else "krylov"
    if method == "dense" and P > max_params:
        raise InputError(f"the model has {P} parameters; the dense Jacobian SVD is limited to max_params={max_params} "
                         "(use method='krylov')")
    if backend not in ("numpy", "torch"):
        raise InputError(f"unknown backend {backend!r}; use numpy or torch")
    if not 0 < rtol < 1:
        raise InputError("rtol must lie in (0, 1)")
    rng = np.random.default_rng(rng)
    N = n_points or int(np.ceil((1.5 * P + 10) / model.output_dim))
    if N * model.output_dim < P:
        raise InputError(f"{N} points give {N * model.output_dim} rows for {P} parameters: use more points")
    t0 = time.perf_counter()
    X = rng.standard_normal((N, model.input_dim))
    e, why = expected_dimension(model)
    if method == "krylov":
        op = JacobianOperator(model, X, backend, device)
        d = _krylov(op, rtol, block, maxiter, 25, max_extra, rng, progress)
        above = d["ritz"][d["ritz"] > rtol * d["sigma_max"]]
        d["smallest_above"] = float(above[0]) if above.shape[0] else None
        below = max(d["null_bound"], d["symmetry_residual"]) * d["sigma_max"]
        gap = float("inf") if d["smallest_above"] is None or below == 0 else d["smallest_above"] / below
        rank = P - d["dim_k_directions"] - d["null_found"]
        return FunctionalDimension(rank, P, e, why, gap, d["ritz"][::-1].copy(), N, rtol,
                                   backend if backend == "numpy" else f"torch ({op.device})",
                                   time.perf_counter() - t0, "krylov", d)
    J = jacobian(model, X) if backend == "numpy" else _torch_jacobian(model, X, device)
    s = np.linalg.svd(J, compute_uv=False)
    rank, gap = _rank_from_gap(s, rtol, J.shape)
    return FunctionalDimension(rank, P, e, why, gap, s, N, rtol, backend, time.perf_counter() - t0)
