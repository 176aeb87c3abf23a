"""Functional dimension: the rank of the Jacobian of theta -> (f_theta(x_j))_j, a numeric identifiability probe.

If theta is identifiable up to a latent group K (the fibre is the orbit K.theta, DESIGN.md), the
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
monomial t^d          one nonzero scaling per hidden neuron: sum of hidden widths
relu                  one positive scaling per hidden neuron: sum of hidden widths
====================  ===============================================================

For a polynomial network the image lies in the space of polynomial maps of degree <= D, so the
expected rank is also at most ``n_out * binom(n_0 + D, D)`` (the neurovariety is then *filling*:
Kileel, Trager, Bruna 2019); :func:`expected_dimension` returns the minimum.  For ReLU it is an
upper bound: hidden symmetries beyond positive scalings exist (Grigsby, Lindsey, Rolnick 2023).

The Jacobian is analytic (backpropagation written out in numpy, batched over points) or from
torch autograd (``torch.func.jacrev`` under ``vmap``, on GPU when present).  The rank is read
from the singular values of the stacked Jacobian, with the gap at the cut reported: a rank is
only as credible as its gap is large (a gap of 1e6 or more is clear in float64).

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
from dataclasses import dataclass
from math import comb

import numpy as np

from ..errors import InputError
from .models import NumericModel

__all__ = ["FunctionalDimension", "functional_dimension", "jacobian", "expected_dimension", "latent_dimension"]


def latent_dimension(model: NumericModel) -> int:
    """dim K: the continuous part of prod K_i (see the module table)."""
    return sum(l.out_dim for l in model.layers[:-1] if l.activation.symmetry in ("monomial", "relu"))


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

    Parameter order is :meth:`NumericModel.parameters` (W_1 row-major, b_1, W_2, ...).
    """
    X = np.asarray(X, dtype=np.float64)
    H = [X]
    Z = []
    for l in model.layers:
        z = l.pre_activation(H[-1])
        Z.append(z)
        H.append(z if l.activation is None else l.activation(z))
    N, n_out = X.shape[0], model.output_dim
    blocks = []
    D = np.broadcast_to(np.eye(n_out), (N, n_out, n_out))  # d f / d z_L
    for i in range(model.depth - 1, -1, -1):
        l = model.layers[i]
        gW = D[:, :, :, None] * H[i][:, None, None, :]  # (N, n_out, out_i, in_i)
        blocks.append(np.concatenate([gW.reshape(N, n_out, -1), D], axis=2))
        if i > 0:
            prev = model.layers[i - 1].activation
            D = (D @ l.weight) * prev.prime(Z[i - 1])[:, None, :]
    J = np.concatenate(blocks[::-1], axis=2)
    return J.reshape(N * n_out, -1)


def _torch_jacobian(model: NumericModel, X: np.ndarray, device=None, chunk: int = 256) -> np.ndarray:
    from .models import _torch

    torch = _torch()
    from torch.func import functional_call, jacrev, vmap

    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    net = model.to_torch(dtype=torch.float64, device=dev)
    names = [n for n, _ in net.named_parameters()]
    params = {n: p.detach() for n, p in net.named_parameters()}

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

    @property
    def deficiency(self) -> int:
        """expected - rank: > 0 means flat directions beyond K (clones, inactive neurons, hidden symmetries)."""
        return self.expected - self.rank

    def report(self) -> str:
        if not np.isfinite(self.gap):
            gap = "full rank, no singular value below rtol"
        elif self.gap < 100:
            gap = f"NO clear gap (largest ratio {self.gap:.3g}): counted above the float64 noise floor, ill-conditioned"
        else:
            gap = f"singular-value gap {self.gap:.3g} at the cut"
        return (f"functional dimension {self.rank} ({gap}; rtol {self.rtol:g}, {self.n_points} points, "
                f"{self.backend}, {self.seconds:.2f} s); expected {self.expected} = {self.expected_reason}")

    def to_json(self) -> dict:
        return {"rank": self.rank, "n_params": self.n_params, "expected": self.expected,
                "expected_reason": self.expected_reason, "gap": self.gap, "n_points": self.n_points,
                "rtol": self.rtol, "backend": self.backend, "seconds": self.seconds,
                "smallest_singular_values": self.singular_values[-10:].tolist()}


def functional_dimension(model: NumericModel, *, n_points: int | None = None, rtol: float = 1e-7,
                         backend: str = "numpy", device=None, rng=None, max_params: int = 20000) -> FunctionalDimension:
    """The rank of the Jacobian of theta -> (f_theta(x_j))_j at Gaussian points x_j.

    Parameters
    ----------
    n_points : sample points (default: enough that N * n_out >= 1.5 #params + 10)
    rtol : the rank is cut at the largest singular-value gap below rtol * s_max
    backend : "numpy" (analytic, batched) or "torch" (autograd, GPU when present)
    max_params : refuse larger models (the dense SVD costs O(#params^3))

    References
    ----------
    Grigsby, Lindsey, Rolnick, *Hidden symmetries of ReLU networks*, ICML 2023 (functional
    dimension as a Jacobian rank); Shahverdi et al. 2026 (identifiability up to K_i).
    """
    P = model.n_params
    if P > max_params:
        raise InputError(f"the model has {P} parameters; the dense Jacobian SVD is limited to max_params={max_params}")
    if backend not in ("numpy", "torch"):
        raise InputError(f"unknown backend {backend!r}; use numpy or torch")
    rng = np.random.default_rng(rng)
    N = n_points or int(np.ceil((1.5 * P + 10) / model.output_dim))
    if N * model.output_dim < P:
        raise InputError(f"{N} points give {N * model.output_dim} rows for {P} parameters: use more points")
    t0 = time.perf_counter()
    X = rng.standard_normal((N, model.input_dim))
    J = jacobian(model, X) if backend == "numpy" else _torch_jacobian(model, X, device)
    s = np.linalg.svd(J, compute_uv=False)
    rank, gap = _rank_from_gap(s, rtol, J.shape)
    e, why = expected_dimension(model)
    return FunctionalDimension(rank, P, e, why, gap, s, N, rtol, backend, time.perf_counter() - t0)
