"""The Layer protocol: what every layer of a symeq model says about itself.

A deep model is a composition of parametric layers f_i : V_{i-1} x Theta_i -> V_i with a group K_i
of latent symmetries acting on each hidden space V_i (Shahverdi, Marchetti, Bokman, Kohn 2026,
Section 2; ``docs/theory.md``).  The rest of symeq talks to a layer only through this protocol, so
a new kind of layer is one new file in ``symeq/layers/`` (see ``docs/architecture.md``):

``kind``
    a plain class attribute, one of :data:`KINDS`: ``"dense"`` (x -> sigma(W x + b), convolutions
    included: they are dense layers with shared weights), ``"attention"`` (a whole lightning
    attention layer) or ``"heads"`` (the value spaces of an attention layer, the first layer of a
    model's chain, see ``symeq.models.Model.chain``);
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
    (``symeq.numeric``), it never decides.

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

__all__ = ["KINDS", "TOKEN_MIXING", "LayerBase", "Layer"]

KINDS = ("dense", "attention", "heads")
"""The layer kinds symeq knows, as ``layer.kind`` spells them."""

TOKEN_MIXING = frozenset({"attention", "heads"})
"""Kinds that mix tokens: allowed only as a model's first layer (the chain splits them)."""


@runtime_checkable
class LayerBase(Protocol):
    """The members every layer has, exact or float (see the module docstring)."""

    kind: ClassVar[str]

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


@runtime_checkable
class Layer(LayerBase, Protocol):
    """An exact layer: the members of :class:`LayerBase` and the exact check of an action."""

    def check_action(self, P_in: Any, Q_out: Any, c_in: Any = None, c_out: Any = None) -> tuple[bool, str]: ...
