"""The forward polynomial expansion, written once: f(x; theta) layer by layer in any polynomial ring.

A polynomial MLP computes, for each layer l and neuron j,

    z_j = sum_k w(l, j, k) y_k + b(l, j),      y'_j = sigma_l(z_j)

(the last layer affine).  Expanding this exactly over ``fmpq_mpoly`` gives the polynomial map of a
model (:meth:`symeq.models.Model.polynomial_map`), the fibre ideal (the coefficients in x of
f(x; theta') - f(x; theta) with theta' unknown, :func:`symeq.fibre.ideal.fibre_ideal`) and the
fibre equations of a candidate action (theta' on a linear space, :mod:`symeq.fibre.search`).  They
differ only in what a weight *is* -- a number, an unknown, a linear form in unknowns -- so
:func:`expand_forward` takes the weights and biases as callbacks returning ring elements (or
``None`` for a structural zero, which costs nothing) and does the rest: the size guard of
:mod:`symeq.sizes` *before* any product is formed, Horner's rule through
:meth:`symeq.activations.Activation.compose`, and the time budget between neurons.

Only dense layers expand (a conv2d layer through its size-guarded dense weight,
:attr:`symeq.layers.conv.ConvLayer.weight`); lightning attention layers are refused with an :class:`InputError`
(their symbolic expansion is not implemented; the grid checks of :mod:`symeq.equivariance` handle
them numerically-exactly without it).

Examples
--------
f(x) = (x0 + 2 x1)^2 - 1 for the (2,1,1) model with sigma = t^2:

>>> from flint import fmpq_mpoly_ctx
>>> from symeq.models import Model, DenseLayer
>>> from symeq.activations import monomial
>>> m = Model(2, [DenseLayer([[1, 2]], [0], monomial(2)), DenseLayer([[1]], [-1], None)])
>>> ctx = fmpq_mpoly_ctx.get(("x", 2), "degrevlex")
>>> rows = [l.weight for l in m.layers]
>>> f = expand_forward(m, ctx.from_dict({}), list(ctx.gens()),
...                    lambda l, j, k: rows[l - 1][j, k] or None,
...                    lambda l, j: m.layers[l - 1].bias[j] or None)
>>> f[0] == (ctx.gens()[0] + 2 * ctx.gens()[1]) ** 2 - 1
True
"""

from __future__ import annotations

from typing import Callable, Sequence

from .errors import InputError
from .layers.registry import supports
from .numbers import mat_rows
from .sizes import guard_expansion

__all__ = ["expand_forward", "theta_entries"]


def theta_entries(model) -> tuple[Callable, Callable | None]:
    """theta's own weights and biases as the callbacks of :func:`expand_forward` (zeros skipped).

    The bias callback is ``None`` for a bias-free theta (every bias zero).

    >>> from symeq.models import Model, DenseLayer
    >>> w, b = theta_entries(Model(2, [DenseLayer([[0, 3]], [0], None)]))
    >>> w(1, 0, 0), w(1, 0, 1), b
    (None, 3, None)
    """
    rows = [mat_rows(layer.weight) for layer in model.layers]

    def weight(l, j, k):
        c = rows[l - 1][j][k]
        return c if c != 0 else None

    def bias(l, j):
        c = model.layers[l - 1].bias[j]
        return c if c != 0 else None

    return weight, (None if all(c == 0 for layer in model.layers for c in layer.bias) else bias)


def expand_forward(model, zero, inputs: Sequence, weight: Callable, bias: Callable | None = None, *,
                   deadline=None, what: str = "expanding the polynomial map", symbolic: bool = False,
                   nvars: int | None = None, weight_terms: int = 1, input_terms: int = 1,
                   hint: str = "") -> list:
    """The outputs of ``model``'s layers applied to ``inputs``, expanded in the ring of ``zero``.

    Parameters
    ----------
    model : :class:`symeq.models.Model`
        A model of dense layers with polynomial activations (or none); only its architecture
        (widths, activations) is used -- the parameters come from ``weight`` and ``bias``.
    zero : ring element
        The zero of the ring (e.g. ``ctx.from_dict({})`` for an ``fmpq_mpoly`` context).
    inputs : sequence of ring elements
        The input coordinates (the variables x, or linear forms in them for f(A x)).
    weight : callable ``weight(l, j, k)``
        Layer l's (1-based) weight from input k to neuron j, as a ring element or a number the
        ring accepts, or ``None`` for a structural zero (skipped).
    bias : callable ``bias(l, j)``, optional
        Neuron j's bias in layer l, or ``None`` for zero; ``bias=None``: a bias-free theta.
    deadline : :class:`~symeq.budget.Deadline`, optional
        Checked before every neuron and between Horner steps (:class:`~symeq.errors.BudgetExceeded`).
    what, hint : str
        Name the work and suggest a way out in the size guard's error message.
    symbolic, nvars, weight_terms, input_terms
        The shape of the entries, passed to :func:`symeq.sizes.expansion_size`: ``symbolic`` when
        the weights are unknowns (each a linear form in ``weight_terms`` of them), ``nvars`` the
        ring's variables, ``input_terms`` the terms of each input coordinate.

    Returns
    -------
    list
        The ``model.output_dim`` output polynomials.

    Raises
    ------
    MonomialLimit
        Before any expansion, when :func:`symeq.sizes.expansion_size`'s bound exceeds
        ``symeq.sizes.LIMITS.monomials`` (``--max-monomials``).
    InputError
        A layer that is not dense, a non-polynomial activation, or inputs of the wrong length.
    """
    layers = list(model.layers)
    for l, layer in enumerate(layers, 1):
        # the kind's capability "dense-expansion" (symeq/layers/registry.py): dense layers, and conv2d
        # through its dense weight (ConvLayer.weight, size-guarded); the expansion's own size guard comes first
        if not supports(layer, "dense-expansion"):
            raise InputError(f"layer {l} is not a dense layer ({layer.kind}): its symbolic expansion is not "
                             "implemented (attention: use the grid checks of symeq.equivariance)")
        act = layer.activation
        if act is not None and not act.is_polynomial:
            raise InputError(f"layer {l}: only polynomial activations expand into polynomials "
                             f"({act.spec['type']} does not)")
    if len(inputs) != model.input_dim:
        raise InputError(f"the model takes {model.input_dim} inputs, got {len(inputs)} expressions")
    # size first: an unguarded expansion can exhaust memory inside FLINT before any budget check runs
    guard_expansion(model, what, symbolic=symbolic, hint=hint, bias=bias is not None, nvars=nvars,
                    weight_terms=weight_terms, input_terms=input_terms)
    cur = list(inputs)
    for l, layer in enumerate(layers, 1):
        new = []
        for j in range(layer.out_dim):
            if deadline is not None:
                deadline.check(what)
            z = zero
            for k in range(layer.in_dim):
                w = weight(l, j, k)
                if w is not None:
                    z = z + w * cur[k]
            if bias is not None:
                b = bias(l, j)
                if b is not None:
                    z = z + b
            if layer.activation is not None:
                z = layer.activation.compose(z, zero, deadline)
            new.append(z)
        cur = new
    return cur
