"""Leaky ReLU in the exact piecewise-linear machinery: canonical form, equivariance, and the
fibre-wide decision for one hidden layer, by reduction to ReLU.

A leaky ReLU with slope ``a`` (``sigma_a(t) = t`` for ``t > 0``, ``a t`` for ``t <= 0``; ``a`` a
rational other than 1 and -1) is positively homogeneous, ``sigma_a(alpha t) = alpha sigma_a(t)``
for ``alpha > 0``, and for ``a != -1`` nothing else: its latent group ``K`` is the positive
monomial matrices, as for ReLU (docs/theory.md).  Unlike ReLU it is injective: there are no dead
neurons and no flat regions, so the ReLU arguments that use them do not carry over (see below).

**The reduction.**  ``sigma_a(z) = (1 - a) relu(z) + a z``.  Write a one-hidden-layer network by
its neurons on oriented hyperplanes, ``f(x) = sum_j u_j sigma_a(l_j(x)) + c`` (``l_j`` the
pre-activation, ``u_j`` the outgoing column after the positive rescaling).  Let ``J_H`` be the
jumps and ``A_f`` the affine part of the canonical form of ``f`` (:mod:`symeq.relu.canonical`:
the canonical form belongs to the piecewise-linear *function*).  Using ``relu(-l) = relu(l) - l``:

* the jump of ``f`` across ``H`` is ``(1 - a) sum_{j on H} u_j``;
* with ``P = sum_{j on H+} u_j l_H`` and ``Q = sum_{j on H-} u_j l_H`` (``l_H`` in normal form),
  the affine part is ``a P - Q + c = a S - (1 + a) Q + c`` where ``S = P + Q = sum_H J_H l_H / (1 - a)``
  depends on ``f`` only.

The ReLU network with the *same* neurons and output bias ``c / (1 + a)`` has jumps
``sum_{j on H} u_j`` and affine part ``-Q + c / (1 + a)``.  Hence the leaky network computes ``f``
if and only if that ReLU network computes the *twin* ``g`` with jumps ``J_H / (1 - a)`` and affine
part ``(A_f - a S) / (1 + a)`` (:func:`relu_twin`).  The correspondence keeps the widths, and the
conditions of layerwise equivariance with positive monomial actions (``W' rho_in(g) = rho(g) W'``,
``b' = rho(g) b'``, ``V' rho(g) = rho_out(g) V'``, ``c' = rho_out(g) c'``; for leaky ReLU these
are necessary and sufficient since ``sigma_a`` is injective; for ReLU they are what a minimal
realisation without dead rows satisfies) are the same on both sides, ``c`` G-fixed iff
``c / (1 + a)`` is.  The reduction to minimal form (docs/relu_hunt.md, :mod:`symeq.relu.fibre`
step 2) holds verbatim for leaky ReLU: merging neurons on one oriented hyperplane, deleting orbits
with ``u = 0`` and constant neurons (``w = 0``: ``u sigma_a(b)`` is a constant), padding with zero
neurons (``sigma_a(0) = 0``).  So the smallest width of a layerwise-equivariant leaky realisation
of ``f`` is the ReLU one of ``g``, decided by :func:`symeq.relu.fibre.minimal_width`; every
realisation is mapped back, and re-checked exactly (same canonical form as ``f``, and the
layerwise check).

**What does not carry over** (refused, not guessed): the first-layer orbit bound of
:mod:`symeq.relu.deep` (it uses that neurons facing away from a cone are *inactive* far out; a
leaky neuron is not), and the removal of inactive neurons in reductions.

Examples
--------
The width-4 identity of Bokman-Kahl: for leaky ReLU ``sigma_a(z) - sigma_a(-z) = (1 + a) z``, so
the same weights with the outgoing layer divided by ``1 + a`` compute the identity, and width 4
still admits no layerwise-equivariant parameter under the order-3 rotation:

>>> from fractions import Fraction
>>> from symeq.relu.hunt import resolve_group
>>> a = Fraction(1, 10)
>>> A, Ainv = [[2, 1], [1, 1]], [[1, -1], [-1, 2]]
>>> W1 = A + [[-v for v in r] for r in A]
>>> W2 = [[x / (1 + a) for x in Ainv[i] + [-v for v in Ainv[i]]] for i in range(2)]
>>> d = decide_fibre_leaky([(W1, [0] * 4, a), (W2, [0, 0], False)], resolve_group("rot3"))
>>> d.verdict, d.smallest_equivariant_width
('no-layerwise-parameter', 6)
"""

from __future__ import annotations

from flint import fmpq

from ..errors import InputError
from .canonical import CanonicalForm, Kink, canonical_form
from .fdim import network_slopes
from .lp import as_fmpq

__all__ = ["leaky_canonical_form", "relu_twin", "equivariant_leaky", "decide_fibre_leaky", "leaky_model"]

_ZERO = fmpq(0)


def _one_layer(layers):
    layers = network_slopes(layers)
    if len(layers) != 2 or layers[0][2] is None or layers[1][2] is not None:
        raise InputError("one hidden (leaky) ReLU layer followed by an affine layer is needed here")
    return layers


def leaky_canonical_form(layers, slope=None) -> CanonicalForm:
    """The canonical form of ``x -> V sigma_a(W x + b) + c`` (the piecewise-linear function).

    ``layers`` is ``[(W, b, a), (V, c, False)]`` (or a Model); ``slope`` overrides ``a``.
    ``sigma_a(z) = (1 - a) relu(z) + a z``: the ReLU network ``((1 - a) V, c + a V b)`` plus the
    linear term ``a V W``.

    >>> cf = leaky_canonical_form([([[1]], [0], "1/2"), ([[1]], [0], False)])
    >>> cf.kinks[0].jump, cf.linear
    ((1/2,), ((1/2,),))
    """
    (W, b, a), (V, c, _) = _one_layer(layers)
    if slope is not None:
        a = as_fmpq(slope)
    n, N, m = len(W[0]), len(W), len(V)
    V1 = [[(1 - a) * x for x in r] for r in V]
    c1 = [ci + a * sum((V[i][j] * b[j] for j in range(N)), _ZERO) for i, ci in enumerate(c)]
    cf = canonical_form([(W, b, True), (V1, c1, False)])
    VW = [[a * sum((V[i][j] * W[j][k] for j in range(N)), _ZERO) for k in range(n)] for i in range(m)]
    lin = tuple(tuple(x + y for x, y in zip(r1, r2)) for r1, r2 in zip(cf.linear, VW))
    return CanonicalForm(cf.n, cf.m, cf.kinks, lin, cf.constant)


def relu_twin(cf: CanonicalForm, slope) -> CanonicalForm:
    """The canonical form of the ReLU twin ``g`` of a leaky function ``f`` (module docstring):
    jumps ``J_H / (1 - a)``, affine part ``(A_f - a S) / (1 + a)``, ``S = sum_H J_H l_H / (1 - a)``."""
    a = as_fmpq(slope)
    if a == 1 or a == -1:
        raise InputError(f"leaky ReLU slope {a}: the reduction needs a != 1 and a != -1")
    kinks = tuple(Kink(k.normal, k.offset, tuple(j / (1 - a) for j in k.jump)) for k in cf.kinks)
    lin = [list(r) for r in cf.linear]
    const = list(cf.constant)
    for k in kinks:
        for i in range(cf.m):
            for t in range(cf.n):
                lin[i][t] -= a * k.jump[i] * k.normal[t]
            const[i] -= a * k.jump[i] * k.offset
    return CanonicalForm(cf.n, cf.m, kinks, tuple(tuple(x / (1 + a) for x in r) for r in lin),
                         tuple(x / (1 + a) for x in const))


def equivariant_leaky(layers, group) -> tuple[bool, int | None]:
    """Exact end-to-end equivariance of a one-hidden-layer leaky ReLU network (equal canonical
    forms of ``f(rho_in x)`` and ``rho_out f(x)`` per generator); ``(holds, failing generator)``."""
    (W, b, a), (V, c, _) = _one_layer(layers)
    from .fibre import _mat_vec, _vec_mat

    for gi, (A, B) in enumerate(group.generators):
        WA = [_vec_mat(row, A) for row in W]
        BV = [[sum((B[i, k] * V[k][j] for k in range(len(V)) if B[i, k]), _ZERO) for j in range(len(W))]
              for i in range(len(V))]
        if leaky_canonical_form([(WA, b, a), (V, c, False)]) != leaky_canonical_form(
                [(W, b, a), (BV, _mat_vec(B, c), False)]):
            return False, gi
    return True, None


def leaky_model(layers, slope, group=None, name: str = "leaky ReLU network"):
    """A :class:`symeq.models.Model` of plain layers with leaky ReLU (slope ``a``) activations."""
    from ..activations import activation_from_spec
    from ..models import DenseLayer, Model
    from ..numbers import format_number, matrix

    act = activation_from_spec({"type": "leaky_relu", "slope": format_number(as_fmpq(slope))})
    return Model(len(layers[0][0][0]), [DenseLayer(matrix(W), list(b), act if r is not False and r is not None
                                                   else None) for W, b, r in layers], group, name=name)


def decide_fibre_leaky(model, group=None, *, check_theta: bool = True, seed: int = 0):
    """The fibre-wide decision of :func:`symeq.relu.fibre.decide_fibre` for one hidden leaky ReLU
    layer, by the reduction of the module docstring.  Returns a
    :class:`~symeq.relu.fibre.FibreDecision` whose realisation and parameter are leaky models."""
    from ..layerwise import check_layerwise, derive_latent_actions
    from .fibre import FibreDecision, _build, decide_fibre, minimal_width, not_equivariant

    if group is None:
        group = getattr(model, "group", None)
    if group is None:
        raise InputError("decide_fibre_leaky needs a group")
    layers = _one_layer(model)
    a = layers[0][2]
    if a == 0:
        return decide_fibre([(layers[0][0], layers[0][1], True), (layers[1][0], layers[1][1], False)], group,
                            check_theta=check_theta, seed=seed)
    N = len(layers[0][0])
    cf = leaky_canonical_form(layers)
    holds, gi = equivariant_leaky(layers, group)
    if not holds:
        return not_equivariant(layers, group, gi, cf)
    mdl = leaky_model(layers, a, group)
    at_theta, theta_actions = None, None
    if check_theta:
        der = derive_latent_actions(mdl, group)
        at_theta = bool(der.found)
        if der.found:
            theta_actions = der.actions[0]
    g = relu_twin(cf, a)
    mw = minimal_width(g, group, seed=seed)
    lo, up, best, prob = mw["lower"], mw["upper"], mw["best"], mw["problem"]
    lines = [f"leaky ReLU (slope {a}) reduced to ReLU: a leaky network computes f iff the ReLU network with the "
             f"same neurons and output bias c / (1 + a) computes the twin g (jumps J / (1 - a)); widths and "
             f"layerwise equivariance correspond (symeq/relu/leaky.py)"] + list(mw["lines"])
    lines.append(f"support choices examined: {len(mw['choices'])}; bounds on the smallest equivariant width: "
                 f"{lo} <= w* <= {up}")

    def to_leaky(pad):
        support, q, extras, ts = best
        relu_model, acts, width = _build(prob, q, extras, ts, group, pad)
        from ..numbers import mat_rows

        lay = [(mat_rows(l.weight), list(l.bias), r) for l, r in zip(relu_model.layers, (a, False))]
        lay[1] = (lay[1][0], [(1 + a) * x for x in lay[1][1]], False)
        leaky = leaky_model(lay, a, group, name=f"layerwise-equivariant leaky realisation (width {len(lay[0][0])})")
        if leaky_canonical_form(lay) != cf:  # pragma: no cover - the reduction is exact; never hidden
            raise RuntimeError("internal error: the leaky realisation does not compute f")
        checks, hom, _, msg = check_layerwise(leaky, group, [acts])
        if not (hom and all(c.holds for c in checks)):  # pragma: no cover
            raise RuntimeError(f"internal error: the leaky realisation fails the layerwise check ({msg})")
        return leaky, acts, width

    realisation = real_actions = None
    if best is not None:
        realisation, real_actions, width = to_leaky(None)
        up = min(up, width)
    exact = lo is not None and up is not None and lo == up
    if at_theta or (up is not None and up <= N):
        verdict = "layerwise-parameter"
    elif lo is not None and lo > N:
        verdict = "no-layerwise-parameter"
    else:
        verdict = "undetermined"
    d = FibreDecision(verdict, N, up if exact else None, lo, up, realisation, real_actions, at_theta=at_theta,
                      canonical=cf)
    if verdict == "layerwise-parameter":
        if at_theta:
            d.parameter, d.actions = mdl, theta_actions
            lines.append("theta itself is layerwise equivariant (actions derived at theta)")
        else:
            d.parameter, d.actions, _ = to_leaky(N)
            lines.append(f"a layerwise-equivariant theta' of width {N} with the same function was built and checked")
    elif verdict == "no-layerwise-parameter":
        lines.append(f"every layerwise-equivariant leaky realisation needs at least {lo} > {N} neurons: none at "
                     f"width {N}")
    d.proof = {"lines": lines, "choices": mw["choices"], "kinks": prob.k, "orbits": [len(o) for o in prob.orbits],
               "group_order": prob.gd.order, "extra_orbit_costs": mw["extra_costs"], "slope": str(a),
               "reduction": "leaky ReLU -> ReLU twin (symeq/relu/leaky.py)"}
    return d
