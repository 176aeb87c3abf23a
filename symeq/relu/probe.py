"""Numeric functional-dimension probe for ReLU networks (numpy only).

Grigsby-Lindsey-Rolnick (2023): the *functional dimension* of a ReLU network at a parameter is the
rank of the Jacobian of the map parameters -> (outputs at many inputs).  Positive rescaling of each
hidden neuron is a one-parameter symmetry, so the rank is at most ``#params - #hidden neurons``;
a strictly smaller rank flags *hidden symmetries* -- non-identifiable parameters beyond
permutations and scalings (for instance the pairs ``relu(z) - relu(-z) = z`` of the width-4
identity, whose directions can move freely).

The network is affine in each single parameter on a fixed activation pattern, so central
differences are exact up to rounding as long as no kink is crossed; the step is small and the
inputs random, and the rank is read with a relative singular-value threshold.  This is numeric
evidence, never a proof.

>>> from symeq.relu.hunt import identity_example
>>> r = functional_dimension(identity_example())
>>> r["rank"] < r["bound"]          # the pairs give hidden symmetries
True
"""

from __future__ import annotations

__all__ = ["functional_dimension"]


def _arrays(model):
    import numpy as np

    from .canonical import plain_layers

    layers = plain_layers(model)
    out = []
    for W, b, relu in layers:
        out.append((np.array([[float(x) for x in r] for r in W]), np.array([float(x) for x in b]), relu))
    return out


def _forward(params, shapes, X):
    import numpy as np

    h = X
    k = 0
    for (r, c, relu) in shapes:
        W = params[k:k + r * c].reshape(r, c)
        k += r * c
        b = params[k:k + r]
        k += r
        h = h @ W.T + b
        if relu:
            h = np.maximum(h, 0.0)
    return h


def functional_dimension(model, n_points: int = 200, seed: int = 0, step: float = 1e-6, tol: float = 1e-7) -> dict:
    """Rank of the parameter Jacobian at random inputs, against ``#params - #hidden neurons``.

    Returns ``{"rank", "params", "hidden", "bound", "hidden_symmetry"}``.
    """
    import numpy as np

    arrs = _arrays(model)
    shapes = [(W.shape[0], W.shape[1], relu) for W, b, relu in arrs]
    theta = np.concatenate([np.concatenate([W.ravel(), b]) for W, b, _ in arrs])
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_points, shapes[0][1])) * 3
    J = np.empty((n_points * shapes[-1][0], theta.size))
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = step
        J[:, i] = ((_forward(theta + e, shapes, X) - _forward(theta - e, shapes, X)) / (2 * step)).ravel()
    s = np.linalg.svd(J, compute_uv=False)
    rank = int((s > tol * max(s[0], 1.0)).sum()) if s.size else 0
    hidden = sum(r for r, _, relu in shapes if relu)
    bound = theta.size - hidden
    return {"rank": rank, "params": int(theta.size), "hidden": hidden, "bound": bound,
            "hidden_symmetry": rank < bound}
