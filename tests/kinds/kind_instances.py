"""Small random instances of every layer kind, for the generic tests of tests/kinds/.

The kinds are discovered from symeq's registry (:func:`registered_kinds`); each needs an entry in
:data:`BUILDERS`: its own ``examples(seed)`` declared in its unit (the pooling kinds', found here without
an edit) or a builder here, or the generic tests fail for it by name (adding a kind puts it under test).
A builder gives, for a seed, a few exact models that contain a layer of its kind, as
``(variant, model, index of the layer)``, and, where the kind has Jacobian rows, how to rebuild
one of its layers from a flat parameter vector in the rank method's layout (weights row-major in
the modular twin's order, then biases when the layer has bias parameters).

Nothing here knows what a kind supports: that is asked of the registry (:func:`supports`), and a
capability the registry does not name is tried and must be refused with an InputError.
"""

from __future__ import annotations

import random

import numpy as np
from flint import fmpq, fmpq_mat

from symeq.activations import monomial, polynomial, real, relu, tanh_series
from symeq.groups import builtin_group
from symeq.io import model_from_json
from symeq.models import DenseLayer, Model


def registered_kinds() -> tuple[str, ...]:
    """Every layer kind symeq registers, as ``layer.kind`` spells it."""
    try:
        from symeq.layers import registry
    except ImportError:  # before the registry of kind classes (issue 26 item 2): the tuple of names
        from symeq.layers.base import KINDS

        return tuple(KINDS)
    return tuple(registry.kind_names())


def supports(layer, capability: str) -> bool | None:
    """The registry's answer (None where symeq has no registry of capabilities yet)."""
    try:
        from symeq.layers import registry
    except ImportError:
        return None
    return registry.supports(layer, capability)


def kind_schema(kind: str):
    """The kind's model-file schema as its class declares it (None: no declaration)."""
    try:
        from symeq.layers import registry
    except ImportError:
        return None
    return getattr(registry.kind_class(kind), "schema", None)


def _q(rng: random.Random, lo: int = -4, hi: int = 4, dens=(1, 2, 4)) -> fmpq:
    return fmpq(rng.randint(lo, hi), rng.choice(dens))


def _matrix(rng, r, c) -> fmpq_mat:
    return fmpq_mat(r, c, [_q(rng) for _ in range(r * c)])


def rational_points(n: int, count: int, seed: int) -> fmpq_mat:
    """``count`` rational points in Q^n, one per column (small numerators, denominators 1, 2, 3)."""
    rng = random.Random(seed)
    return fmpq_mat(n, count, [fmpq(rng.randint(-5, 5), rng.randint(1, 3)) for _ in range(n * count)])


def to_float(M: fmpq_mat) -> np.ndarray:
    """An fmpq_mat (one point per column) as float rows (one point per row)."""
    from symeq.numbers import mat_rows

    return np.array([[int(x.p) / int(x.q) for x in row] for row in mat_rows(M.transpose())], dtype=np.float64)


# -- dense ------------------------------------------------------------------------------------------

class Dense:
    """x -> sigma(W x + b) then an affine layer: a polynomial, ReLU and a real activation (GELU)."""

    @staticmethod
    def models(seed: int):
        rng = random.Random(seed)
        out = []
        for variant, act in (("tanh_series", tanh_series(3)), ("relu", relu()), ("gelu", real("gelu"))):
            l1 = DenseLayer(_matrix(rng, 4, 3), [_q(rng) for _ in range(4)], act, has_bias=True)
            l2 = DenseLayer(_matrix(rng, 2, 4), [_q(rng) for _ in range(2)], None, has_bias=True)
            out.append((variant, Model(3, [l1, l2], name=f"dense {variant}"), 0))
        # no bias parameters in the declared space ("bias": null), and a monomial (continuous scalings)
        l1 = DenseLayer(_matrix(rng, 3, 3), None, monomial(2))
        l2 = DenseLayer(_matrix(rng, 2, 3), None, None)
        out.append(("no-bias", Model(3, [l1, l2], name="dense without biases"), 0))
        return out

    @staticmethod
    def set_parameters(layer, values: list, bias: bool):
        """A dense layer (token-wise ones too: one W and b shared by the tokens) from its parameter vector."""
        from symeq.layers.attention import tokenwise

        T = layer.tokens or 1
        out, inp = layer.out_dim // T, layer.in_dim // T
        W = fmpq_mat(out, inp, values[:out * inp])
        b = list(values[out * inp:]) if bias else list(layer.token_bias)
        if layer.tokens is None:
            return DenseLayer(W, b, layer.activation, has_bias=layer.has_bias)
        return DenseLayer(tokenwise(W, T), b * T, layer.activation, T, has_bias=layer.has_bias)


# -- conv2d -----------------------------------------------------------------------------------------

class Conv2d:
    """A C4 lifting convolution (4 rotated copies of one 3x3 kernel) on 3x3 images, read from a model
    file: conv2d -> tanh_series(3) -> flatten -> dense (which the reader makes a whole-image conv2d)."""

    @staticmethod
    def models(seed: int):
        rng = np.random.default_rng(seed)
        N, denom = 3, 8
        base = rng.integers(-denom, denom + 1, size=(3, 3))
        kernel = [[[[f"{int(v)}/{denom}" for v in row] for row in np.rot90(base, -r)]] for r in range(4)]
        lin = rng.integers(-denom, denom + 1, size=(N, N))
        weight = [f"{int(v)}/{denom}" for r in range(4) for v in np.rot90(lin, -r).ravel()]
        data = {
            "format": "symeq-model/1", "name": "C4 lifting conv", "input_dim": N * N,
            "layers": [
                {"type": "conv2d", "input_shape": [1, N, N], "kernel": kernel, "padding": 1,
                 "bias": [f"{int(rng.integers(-4, 5))}/4"] * 4, "activation": {"type": "tanh_series", "order": 3}},
                {"type": "flatten"},
                {"type": "dense", "weight": [weight], "bias": ["1/2"], "activation": None},
            ],
            "group": builtin_group(f"rot90:{N}", output=1).to_json(),
        }
        strided = {
            "format": "symeq-model/1", "name": "strided circular conv", "input_dim": 2 * 4 * 4,
            "layers": [
                {"type": "conv2d", "input_shape": [2, 4, 4], "padding": 1, "padding_mode": "circular", "stride": 2,
                 "kernel": [[[[f"{int(v)}/2" for v in rng.integers(-2, 3, size=3)] for _ in range(3)]
                             for _ in range(2)] for _ in range(3)],
                 "bias": None, "activation": {"type": "polynomial", "coeffs": ["0", "1", "1"]}},
                {"type": "flatten"},
                {"type": "dense", "weight": [[f"{int(v)}/4" for v in rng.integers(-4, 5, size=3 * 2 * 2)]
                                             for _ in range(2)], "bias": ["1", "-1/2"], "activation": None},
            ],
        }
        return [("c4-lifting", model_from_json(data), 0), ("strided-circular", model_from_json(strided), 0)]

    @staticmethod
    def set_parameters(layer, values: list, bias: bool):
        """A convolution from its kernel taps (one row per output channel, taps in (c, i, j) order)
        and its per-channel biases."""
        s = layer.shape
        taps = s.taps
        rows = [values[o * taps:(o + 1) * taps] for o in range(s.out_channels)]
        kernel = layer.numbers.nested(s, rows)
        cb = list(values[s.out_channels * taps:]) if bias else list(layer.channel_bias)
        return type(layer)(s, kernel, cb, layer.activation, layer.has_bias)


# -- attention and its heads -------------------------------------------------------------------------

def _attention_model(seed: int):
    from symeq.attention import random_equivariant_attention

    return random_equivariant_attention(rng=seed, dense=[tanh_series(3)])


class Attention:
    """Lightning attention (4 tokens) -> token-wise tanh_series(3) -> affine, from the generator of
    equivariant attention models."""

    @staticmethod
    def models(seed: int):
        from symeq.attention import random_equivariant_attention

        softmax = random_equivariant_attention(rng=seed, dense=[tanh_series(3)], scoring="softmax")
        return [("lightning", _attention_model(seed), 0), ("lightning-small", Attention.small(seed), 0),
                ("softmax", softmax, 0)]

    @staticmethod
    def small(seed: int):
        """3 tokens of dimension 2, two heads (d_k = d_v = 1) with small integer weights, token-wise
        t + t^3 and a token-wise affine layer: small enough that the Jacobian rows lift from mod p to Q."""
        from symeq.layers.attention import AttentionLayer, Head, tokenwise

        rng = random.Random(seed)
        ints = lambda r, c: fmpq_mat(r, c, [rng.randint(-2, 2) for _ in range(r * c)])  # noqa: E731
        T = 3
        heads = [Head(ints(2, 1), ints(2, 1), ints(2, 1), ints(1, 2)) for _ in range(2)]
        W1, W2 = ints(2, 2), ints(1, 2)
        l2 = DenseLayer(tokenwise(W1, T), [fmpq(rng.randint(-2, 2)) for _ in range(2)] * T, polynomial([0, 1, 0, 1]), T,
                        has_bias=True)
        l3 = DenseLayer(tokenwise(W2, T), [fmpq(1)] * T, None, T, has_bias=True)
        return Model(T * 2, [AttentionLayer(T, heads), l2, l3], name="small lightning attention")

    @staticmethod
    def set_parameters(layer, values: list, bias: bool):
        """An attention layer from Q_h, K_h, V_h, O_h of every head, row-major, head by head."""
        from symeq.layers.attention import Head

        heads, k = [], 0
        for h in layer.heads:
            mats = []
            for M in (h.query, h.key, h.value, h.out):
                n = M.nrows() * M.ncols()
                mats.append(fmpq_mat(M.nrows(), M.ncols(), values[k:k + n]))
                k += n
            heads.append(Head(*mats, score_bias=h.score_bias))
        return type(layer)(layer.tokens, heads, layer.activation, layer.scoring, layer.scale, layer.bias)


class Heads:
    """The value spaces of lightning attention: the first layer of an attention model's chain."""

    @staticmethod
    def models(seed: int):
        return [("lightning-chain", _attention_model(seed).chain(), 0)]

    set_parameters = None  # the heads are the chain's view of an attention layer, not parameters of their own


# -- pooling ------------------------------------------------------------------------------------------

class _KindExamples:
    """A builder from a kind's own ``examples(seed)`` (small model files with a layer of the kind, declared
    in the kind's unit): a kind that declares them is under the generic tests without an entry here; one
    with Jacobian rows still needs ``set_parameters``, so a builder of its own."""

    def __init__(self, cls):
        self.cls = cls

    def models(self, seed: int):
        return [(variant, model_from_json(data), index) for variant, data, index in self.cls.examples(seed)]

    set_parameters = None  # parameter-free kinds (a kind with parameters has a builder above)


def _declared_examples() -> dict:
    try:
        from symeq.layers import registry
    except ImportError:
        return {}
    return {k: _KindExamples(registry.kind_class(k)) for k in registry.kind_names()
            if getattr(registry.kind_class(k), "examples", None) is not None}


#: kind -> its builder: the kinds' own ``examples`` (the pooling kinds), and the builders above for the kinds
#: with parameters.  A kind registered in symeq with neither fails the generic tests by name.
BUILDERS = {**_declared_examples(), "dense": Dense, "conv2d": Conv2d, "attention": Attention, "heads": Heads}

#: the variants whose Jacobian rows are checked (polynomial activations: the rank method is modular;
#: small numbers: the rows lift from mod p to Q).  A kind not listed: all its variants.
JACOBIAN_VARIANTS = {"dense": ("tanh_series", "no-bias"), "conv2d": ("c4-lifting", "strided-circular"),
                     "attention": ("lightning-small",)}

__all__ = ["BUILDERS", "JACOBIAN_VARIANTS", "registered_kinds", "supports", "kind_schema", "rational_points",
           "to_float"]
