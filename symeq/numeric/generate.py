"""Random layerwise-equivariant float models at any width, and their scrambling by prod K_i.

The float twin of :func:`symeq.models.random_equivariant_model` and :func:`symeq.models.scramble`
for sizes the exact path cannot reach (width 4096 and more): the latent actions are signed
permutations stored as :class:`~symeq.numeric.monomial.MonomialAction`, and the Reynolds
projection W -> (1/|G|) sum_g rho_out(g)^-1 W rho_in(g) is a sum of index operations.

Examples
--------
>>> from symeq.groups import mirror
>>> from symeq.numeric.models import numeric_activation
>>> m = random_equivariant_numeric(mirror(2, 2), [8, 8], numeric_activation("tanh"), rng=0)
>>> m.widths
[4, 8, 8, 4]
>>> m.equivariance_error(rng=1) < 1e-12
True
>>> s, k = scramble_numeric(m, rng=2)
>>> bool(abs(s(m.group.generators[0][0][0]) - m(m.group.generators[0][0][0])).max() < 1e-12)
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .models import NumericDenseLayer, NumericGroup, NumericModel, _as_group
from .monomial import MonomialAction, as_action, left_multiply, right_multiply

__all__ = ["random_equivariant_numeric", "scramble_numeric", "NumericLatentElement", "regular_actions"]


def regular_actions(group: NumericGroup, copies: int) -> list[MonomialAction]:
    """Generators of ``copies`` copies of the regular representation (permutations of G x copies)."""
    words = group.words()
    els = []
    for w in words:
        m = np.eye(group.input_dim)
        for gi in w:
            m = m @ group.generators[gi][0]
        els.append(m)
    keys = {NumericGroup._key(m, 1e-9): i for i, m in enumerate(els)}
    order = len(els)
    gens = []
    for a, _ in group.generators:
        perm = np.array([keys[NumericGroup._key(a @ m, 1e-9)] for m in els])
        # P e_j = e_perm[j]: row perm[j] has its 1 in column j
        cols = np.empty(order, dtype=np.int64)
        cols[perm] = np.arange(order)
        cols = (np.arange(copies)[:, None] * order + cols[None, :]).ravel()
        gens.append(MonomialAction(cols, np.ones(order * copies)))
    return gens


def _elements(group: NumericGroup, reps: list) -> list[list]:
    """For each group element (word), the product of each representation's generators."""
    out = []
    for w in group.words():
        mats = []
        for rep in reps:
            m = rep[0].__class__.identity(rep[0].n) if isinstance(rep[0], MonomialAction) else np.eye(rep[0].shape[0])
            for gi in w:
                m = m @ rep[gi]
            mats.append(m)
        out.append(mats)
    return out


def random_equivariant_numeric(group, widths, activations, rng=None, *, bias: bool = True,
                               latent=None, name: str = "random layerwise-equivariant float model") -> NumericModel:
    """A random float model, every layer equivariant for regular latent actions.

    Parameters
    ----------
    group : exact or numeric group acting on input and output
    widths : hidden widths, each a multiple of |G| (the latent action is regular * width/|G|)
    activations : one NumericActivation for all hidden layers, or one per hidden layer
    latent : optional list of generator actions (MonomialAction or dense) per hidden layer
    """
    group = _as_group(group)
    rng = np.random.default_rng(rng)
    if not isinstance(activations, (list, tuple)):
        activations = [activations] * len(widths)
    if len(activations) != len(widths):
        raise InputError(f"{len(widths)} hidden widths but {len(activations)} activations")
    order = len(group.words())
    reps = [[as_action(a) for a, _ in group.generators]]
    for i, w in enumerate(widths):
        if latent is not None:
            reps.append([as_action(m) for m in latent[i]])
        else:
            if w % order:
                raise InputError(f"hidden width {w} is not a multiple of the group order {order}")
            reps.append(regular_actions(group, w // order))
    reps.append([as_action(b) for _, b in group.generators])
    els = _elements(group, reps)
    layers = []
    dims = [group.input_dim] + list(widths) + [group.output_dim]
    for i in range(len(dims) - 1):
        W0 = rng.standard_normal((dims[i + 1], dims[i])) / np.sqrt(dims[i])
        b0 = rng.standard_normal(dims[i + 1]) * 0.5 if bias else np.zeros(dims[i + 1])
        act = activations[i] if i < len(widths) else None
        if act is not None and act.symmetry not in ("odd",):
            for mats in els:  # latent entries must be in K for the activation
                v = mats[i + 1].vals if isinstance(mats[i + 1], MonomialAction) else None
                if v is not None and np.any(v != 1.0):
                    raise InputError(f"signed latent actions need an odd activation (layer {i + 1})")
        # Reynolds: W -> mean_g rho_out(g)^-1 W rho_in(g); for odd sigma the signs act before
        # sigma too, so the same formula holds pre-activation.  Biases: b - s invariant.
        s = act.shift if act is not None else 0.0
        W = np.zeros_like(W0)
        b = np.zeros_like(b0)
        for mats in els:
            rin, rout = mats[i], mats[i + 1]
            rout_inv = rout.inverse() if isinstance(rout, MonomialAction) else np.linalg.inv(rout)
            W += left_multiply(rout_inv, right_multiply(W0, rin))
            b += left_multiply(rout_inv, (b0 - s)[:, None])[:, 0]
        layers.append(NumericDenseLayer(W / len(els), b / len(els) + s, act))
    model = NumericModel(group.input_dim, layers, group, name)
    model.meta["latent_representations"] = reps[1:-1]
    return model


@dataclass
class NumericLatentElement:
    """k in prod K_i: per hidden layer a permutation and admissible pre-activation scalings."""

    perms: list
    alphas: list

    def post_actions(self, model: NumericModel) -> list[MonomialAction]:
        """The post-activation action of k on each hidden layer (new neuron perm[j] = q_j old j + o_j;
        the offsets o_j are those of affine sign flips, e.g. sigmoid)."""
        out = []
        for layer, perm, alphas in zip(model.layers, self.perms, self.alphas):
            sc = layer.activation.scalings
            alphas = np.asarray(alphas, dtype=np.float64)
            cols = np.empty(len(perm), dtype=np.int64)
            vals = np.empty(len(perm))
            offs = np.empty(len(perm))
            cols[perm] = np.arange(len(perm))
            vals[perm] = sc.q(alphas)
            offs[perm] = sc.offset(alphas)
            out.append(MonomialAction(cols, vals, offs))
        return out


def _scale_choices(act, rng, n):
    """Random admissible alphas, from the activation's :class:`~symeq.numeric.models.Scalings`."""
    cls = act.scalings.alphas
    if cls == "sign":
        return rng.choice([-1.0, 1.0], size=n)
    if cls == "nonzero":
        return rng.choice([-1.0, 1.0], size=n) * rng.uniform(0.5, 2.0, size=n)
    if cls == "positive":
        return rng.uniform(0.5, 2.0, size=n)
    return np.ones(n)


def apply_latent_numeric(model: NumericModel, k: NumericLatentElement) -> NumericModel:
    """k . theta: neurons permuted and rescaled; the function does not change."""
    layers = [l.copy() for l in model.layers]
    prev = None
    for i, layer in enumerate(layers):
        W, b = layer.weight, layer.bias
        if prev is not None:
            # new neuron perm[j] outputs q_j y_j + o_j, so y_j = (new - o_j) / q_j: the column is
            # divided by q_j and the bias absorbs -o_j / q_j (affine sign flips, e.g. sigmoid)
            perm, q, o = prev
            b = b - (W / q) @ o
            W2 = np.empty_like(W)
            W2[:, perm] = W / q
            W = W2
        if i < len(layers) - 1:
            perm, alphas = np.asarray(k.perms[i]), np.asarray(k.alphas[i], dtype=np.float64)
            act = layer.activation
            q, o = act.scalings.q(alphas), act.scalings.offset(alphas)
            if np.any(np.isnan(q)):
                raise InputError(f"a scaling is not admissible for the activation of layer {i + 1}")
            W2, b2 = np.empty_like(W), np.empty_like(b)
            W2[perm] = alphas[:, None] * W
            b2[perm] = alphas * b + act.shift * (1 - alphas)
            W, b = W2, b2
            prev = (perm, q, o)
        layers[i] = NumericDenseLayer(W, b, layer.activation)
    return NumericModel(model.input_dim, layers, model.group, model.name, dict(model.meta))


def scramble_numeric(model: NumericModel, rng=None) -> tuple[NumericModel, NumericLatentElement]:
    """Hide a model's structure by a random k in prod K_i; returns the scrambled model and k."""
    rng = np.random.default_rng(rng)
    perms, alphas = [], []
    for layer in model.layers[:-1]:
        perms.append(rng.permutation(layer.out_dim))
        alphas.append(_scale_choices(layer.activation, rng, layer.out_dim))
    k = NumericLatentElement(perms, alphas)
    return apply_latent_numeric(model, k), k
