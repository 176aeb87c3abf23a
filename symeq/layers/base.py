"""The Layer protocol: what every layer of a symeq model says about itself.

A deep model is a composition of parametric layers f_i : V_{i-1} x Theta_i -> V_i with a group K_i
of latent symmetries acting on each hidden space V_i (Shahverdi, Marchetti, Bokman, Kohn 2026,
Section 2; ``docs/theory.md``).  The rest of symeq talks to a layer only through this protocol, so
a new kind of layer is one new file in ``symeq/layers/`` (see ``docs/architecture.md``):

``kind``
    a plain class attribute, one of :data:`KINDS`: ``"dense"`` (x -> sigma(W x + b)), ``"conv2d"``
    (a convolution on its kernels, :mod:`symeq.layers.conv`; its actions are channel actions times
    pixel permutations, :class:`symeq.layers.conv.ConvAction`), ``"attention"`` (a whole lightning
    attention layer) or ``"heads"`` (the value spaces of an attention layer, the first layer of a
    model's chain, see ``symeq.models.Model.chain``);
``backend``
    the number backend the layer holds its numbers in (:mod:`symeq.backends`): ``EXACT`` (rationals) or
    ``FLOAT64`` (a float layer); ``layer.backend.exact`` is how code asks whether a layer is exact;
``in_dim``, ``out_dim``
    the dimensions of V_{i-1} and V_i;
``forward(X)``
    the layer on a batch (exact layers: an ``fmpq_mat`` with one column per point; float layers: a
    numpy array with one row per point);
``label``
    a short text for reports, e.g. ``"dense 8->16 tanh_series(3)"``;
``hidden_label``
    the name of the hidden space the layer outputs, as the reports print it, e.g.
    ``"tanh_series(3)"`` or ``"attention heads (2 heads, d_v = 1, 4 tokens)"``;
``latent_group_name``
    the name of K_i acting on the layer's output (None for an affine layer: its output is the
    model's output, acted on by G itself);
``check_action(P_in, Q_out, c_in=None, c_out=None)``
    exact layers only: decide f(P_in x + c_in) = Q_out f(x) + c_out for all real x, returning
    ``(holds, detail)``.  Float layers have no such check: a float result reports its error
    (``symeq.numeric``), it never decides;
``match_reference(affine=False)``
    what theta's layer contributes to the matching of actions, computed once per derivation by
    the row matcher of the chain walk (exact dense: canonical keys, scales and their index; float
    dense: the shifted rows [W | b - s]; heads: None);
``match_action(P_in, c_in=None, *, reference=None, affine=False, li=0)``
    the matching of actions: given the action y -> P_in y + c_in of theta^g on the layer's input,
    the candidate actions on its output, as ``(tied, candidates)`` (``tied``: more than one
    candidate is possible, clones or tied heads).  Exact layers yield ``(rho, offset)`` lazily;
    float layers return a list of ``(rho, record)`` with the record (max residual, median
    residual, margin, how).  No partner raises :class:`NoPartner`; ``li`` only names the hidden
    layer in messages.  The walk over the layers (``symeq.walk``) needs nothing else of a layer.

:class:`LayerBase` is the part shared by exact and float layers, :class:`Layer` the exact one.
Both are ``runtime_checkable`` protocols, so ``isinstance(layer, Layer)`` tests that the members
exist (not their types).

Examples
--------
>>> from symeq.models import DenseLayer
>>> from symeq.activations import tanh_series
>>> layer = DenseLayer([[1, 2], [3, 4]], [0, 1], tanh_series(3))
>>> isinstance(layer, Layer), layer.kind, layer.label
(True, 'dense', 'dense 2->2 tanh_series(3)')
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

__all__ = ["KINDS", "TOKEN_MIXING", "NoPartner", "LayerBase", "Layer", "DenseNames", "declared_bias",
           "declared_biases", "polynomial_layer", "real_valued_layer"]

KINDS = ("dense", "attention", "heads", "conv2d")
"""The layer kinds symeq knows, as ``layer.kind`` spells them."""

TOKEN_MIXING = frozenset({"attention", "heads"})
"""Kinds that mix tokens: allowed only as a model's first layer (the chain splits them)."""


def polynomial_layer(layer) -> bool:
    """Whether the layer's map is a polynomial of its input and parameters: the kind says so when it can be
    otherwise whatever its activation (``polynomial_map``: softmax attention is not), else its activation."""
    own = getattr(layer, "polynomial_map", None)
    if own is not None:
        return bool(own)
    act = getattr(layer, "activation", None)
    return act is None or bool(act.is_polynomial)


def real_valued_layer(layer) -> bool:
    """Whether the layer's values are real numbers with no rational value in general (a real activation such
    as tanh, or a kind that says so: ``real_valued``, softmax attention), decided on arb balls."""
    if getattr(layer, "real_valued", False):
        return True
    act = getattr(layer, "activation", None)
    return act is not None and bool(act.is_real)


def declared_bias(layer) -> bool | None:
    """The bias declaration of one layer: False (given none: no bias parameters), True (given a bias
    vector, zeros included, as a model file's reader records it) or None (a bias list given in Python
    without ``has_bias``: :func:`declared_biases` decides).  Attention layers: False (no biases)."""
    if layer.kind in TOKEN_MIXING:
        return False
    flag = getattr(layer, "has_bias", None)
    return None if flag is None else bool(flag)


def declared_biases(model) -> tuple[bool, ...]:
    """Per layer of ``model``, whether it has bias parameters in the declared parameter space.

    A layer read from a model file has them when the file gives it a bias vector, zeros included,
    and none when it says ``"bias": null`` -- per layer, whatever the other layers do.  A layer built
    in Python with a bias list but without ``has_bias`` (the convenience of the Python API) has them
    when some layer of the model with a bias list has a nonzero bias: a model built with zero lists
    only is bias-free.  Every method of ``symeq fibre``, the writers and the checker count this way.

    >>> from symeq.models import Model, DenseLayer
    >>> from symeq.activations import monomial
    >>> declared_biases(Model(1, [DenseLayer([[1]], [1], monomial(2)), DenseLayer([[1]], None, None)]))
    (True, False)
    >>> declared_biases(Model(1, [DenseLayer([[1]], [0], monomial(2)), DenseLayer([[1]], [0], None)]))
    (False, False)
    >>> declared_biases(Model(1, [DenseLayer([[1]], [0], monomial(2), has_bias=True), DenseLayer([[1]], None, None)]))
    (True, False)
    """
    flags = [declared_bias(layer) for layer in model.layers]
    legacy = any(b != 0 for layer, f in zip(model.layers, flags) if f is None for b in layer.bias)
    return tuple(legacy if f is None else f for f in flags)


class NoPartner(Exception):
    """Raised by a row matcher when a neuron of theta^g has no partner in theta (a failure, not a proof
    of anything unless the walk was exhaustive); the message says which neuron and why.

    ``inconclusive=True``: the matcher could not decide (e.g. a degenerate attention head), so the
    walk counts as capped, never as a proof that no action exists.

    >>> NoPartner("neuron 0 of hidden layer 1 has no partner", inconclusive=True).inconclusive
    True
    """

    def __init__(self, message: str, inconclusive: bool = False):
        super().__init__(message)
        self.inconclusive = inconclusive


@runtime_checkable
class LayerBase(Protocol):
    """The members every layer has, exact or float (see the module docstring)."""

    kind: ClassVar[str]
    backend: Any

    @property
    def in_dim(self) -> int: ...

    @property
    def out_dim(self) -> int: ...

    def forward(self, X: Any) -> Any: ...

    @property
    def label(self) -> str: ...

    @property
    def hidden_label(self) -> str: ...

    @property
    def latent_group_name(self) -> str | None: ...

    def match_reference(self, affine: bool = False) -> Any: ...

    def match_action(self, P_in: Any, c_in: Any = None, *, reference: Any = None, affine: bool = False,
                     li: int = 0) -> tuple[bool, Any]: ...


@runtime_checkable
class Layer(LayerBase, Protocol):
    """An exact layer: the members of :class:`LayerBase` (the matching of actions included) and the
    exact check of an action."""

    def check_action(self, P_in: Any, Q_out: Any, c_in: Any = None, c_out: Any = None) -> tuple[bool, str]: ...


class DenseNames:
    """The names a dense layer (exact or float) gives itself, from ``hidden_label`` and ``activation``."""

    @property
    def label(self) -> str:
        return f"dense {self.in_dim}->{self.out_dim} {self.hidden_label}"

    @property
    def latent_group_name(self) -> str | None:
        return None if self.activation is None else self.activation.latent_group
