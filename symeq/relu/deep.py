"""Hunting equivariant ReLU networks with two or more hidden layers, and what can be proven.

For one hidden layer, :mod:`symeq.relu.fibre` decides whether *some* parameter of the same width
is layerwise equivariant.  With depth, hidden symmetries beyond permutations and positive
scalings become common (Grigsby, Lindsey, Rolnick 2023) and no such decision is known, so each
candidate gets the strongest status that is *proven*, plus its exact functional dimension:

``not-equivariant``
    a rational ``x`` with ``f(rho_in x) != rho_out f(x)`` (exact evaluation), or the exact region
    decision (:func:`symeq.relu.regions.decide_equivariance`).
``layerwise-at-theta``
    end-to-end equivariant (regions, exact), and :func:`symeq.layerwise.derive_latent_actions`
    found positive-monomial actions rho_i(g) making every layer equivariant (checked exactly,
    homomorphism included).
``layerwise-at-reduced``
    no action at theta, but the reduced submodel (inactive neurons removed, clones merged,
    :func:`symeq.submodels.reduce_model`) has one; :func:`symeq.submodels.lift` gives theta' of
    the same widths with the same function (checked on every linear region of ``f - f'``) and
    layerwise-equivariant actions (checked): the conclusion of Theorem 4.1 via weak
    identifiability.
``no-action-at-theta`` (proven)
    equivariant, and the exhaustive search over prod K_i found no action at theta; the search at
    the reduced parameter was not conclusive.
``no-action-at-reduced`` (proven)
    equivariant, and neither theta nor its reduced submodel admits an action through prod K_i.
    This is a *candidate* counterexample, not a counterexample: another theta' with the same
    function and widths may still be layerwise equivariant.
``counterexample``
    equivariant, and *no* parameter theta' of the same widths is layerwise equivariant, by the
    first-layer orbit bound below.
``undetermined``
    a search was capped or a region limit was reached.

Every equivariant candidate without an action also carries ``functional_dimension``: the exact
rank of the parameter Jacobian (modulo a prime, at rational points off every bent hyperplane:
:mod:`symeq.relu.fdim`), a *proven lower bound* of the functional dimension, against
``#params - dim T`` (``dim T`` the computed dimension of the positive-scaling orbit).  When the two
meet, theta is proven *locally identifiable* (up to positive rescaling); when every linear region
was sampled the rank is the functional dimension itself, and a shortfall is hidden symmetry
(explained where a reason is proven: inactive neurons, linear groups, clones).  The float
estimate of older hunt files (``evidence.functional_dimension``, :func:`functional_dimension_evidence`)
is still read by the report, labelled as evidence.

The first-layer orbit bound (a proof for any depth, in a stated scope; docs/relu_hunt.md)
-------------------------------------------------------------------------------------------
Scope: input dimension 2; the group's image on the input is cyclic of order ``k in {2, 3}`` and
no element other than the identity fixes a nonzero vector (e.g. ``rot3``, or ``-I``).

Lemma.  Let theta' be layerwise equivariant with first-layer width ``h1``.  Layer 1 equivariance
``relu(W' rho_in(g) x + b') = rho_1(g) relu(W' x + b')`` with ``rho_1(g)`` a positive monomial
matrix forces, neuron by neuron, ``relu(a.x + beta) = relu(a'.x + beta')`` as functions, so the
open rays of the nonzero rows of ``W'`` form a set invariant under ``w -> w rho_in(g)``.  A ray
fixed by a group element of finite order is a fixed vector, so every ray orbit has ``k``
elements.  Hence: if ``h1 < k`` every row is zero and ``f`` is constant (bound ``B = 0``); if
``h1 < 2k`` the rows span at most one orbit ``{a, a rho_in(g), ...}``.  In an invariant inner
product this orbit is ``k`` equally spaced rays (``k = 3``: 120 degrees apart; ``k = 2``:
``+-a``), so an open cone ``C`` of directions ``d`` has ``a.d > 0`` for exactly one ray and
``< 0`` for the others.  Far out in ``C`` the first layer depends on ``x`` only through ``a.x``,
so the recession function ``f_inf(d) = lim f(t d) / t`` has Jacobian rank ``<= B = 1`` on ``C``.
But ``f_inf`` is a function of ``f`` alone, computed by theta with every bias set to zero
(``relu(t W d + b) / t -> relu(W d)``, layer by layer).  So if every open linear region of the
bias-free theta has Jacobian rank ``> B`` (exact region enumeration), no theta' of first-layer
width ``h1`` -- whatever its depth and later widths -- is layerwise equivariant: a
``counterexample``.  Outside the scope (``n != 2``, larger groups, ``h1 >= 2k``) the status stays
a candidate.  For ``k = 4`` the argument fails (rays 90 degrees apart: every open cone sees two).

Examples
--------
The width-4 identity of R^2 composed with itself, (2,4,4,2) under ``rot3``:

>>> from symeq.relu.hunt import identity_example
>>> from symeq.relu.canonical import plain_layers
>>> one = plain_layers(identity_example())
>>> two = compose_blocks([one, one])
>>> [len(W) for W, _, _ in two]
[4, 4, 2]
>>> first_layer_bound(two, "rot3")["holds"]
True
"""

from __future__ import annotations

import json
import random

from flint import fmpq, fmpq_mat

from ..errors import InputError, LimitExceeded
from ..numbers import format_matrix
from . import regions as _regions
from .canonical import plain_layers
from .fdim import exact_functional_dimension
from .candidates import (_group_info, _mutate, _q, _rng, _select_parent, build_layers, generate_candidate,
                   resolve_group, _GROUP_CACHE)

__all__ = [
    "DEEP_STATUSES",
    "warm",
    "hidden_spec",
    "compose_blocks",
    "generate_deep_candidate",
    "build_deep_layers",
    "deep_model",
    "layers_json",
    "layers_from_json",
    "same_function_deep",
    "first_layer_bound",
    "functional_dimension_evidence",
    "exact_functional_dimension",
    "verify_deep_candidate",
    "classify_deep",
]

DEEP_STATUSES = ("skipped", "not-equivariant", "layerwise-at-theta", "layerwise-at-reduced", "no-action-at-theta",
                 "no-action-at-reduced", "counterexample", "undetermined")
REGION_LIMIT = 20000
# the region enumeration raises the project's limit error (older trees: RegionLimitExceeded)
_LIMIT_ERRORS = tuple({LimitExceeded, getattr(_regions, "RegionLimitExceeded", LimitExceeded)})
_ZERO = fmpq(0)


def hidden_spec(spec: str) -> str:
    """The key of G acting by its *input* matrices on both sides (the blocks between hidden layers)."""
    return spec + "@hidden"


def warm(spec: str) -> None:
    """Register the hidden-block group of ``spec`` in this process (a per-process cache)."""
    key = hidden_spec(spec)
    if key in _GROUP_CACHE:
        return
    from ..groups import FiniteGroup

    G = resolve_group(spec)
    H = FiniteGroup([(A, A) for A, _ in G.generators], list(G.names), label=key)
    H.validate()
    _GROUP_CACHE[key] = H
    _group_info(key)


def compose_blocks(blocks) -> list:
    """Plain layers of the composition of one-hidden-layer blocks ``x -> V relu(W x + b) + c``.

    The affine output of block ``j`` folds into the first layer of block ``j + 1``:
    ``W' = W_{j+1} V_j``, ``b' = W_{j+1} c_j + b_{j+1}``.
    """
    layers = []
    carry = None  # (V, c) of the previous block, not yet folded
    for (W, b, _), (V, c, _) in blocks:
        W = [[_q(x) for x in r] for r in W]
        b = [_q(x) for x in b]
        if carry is not None:
            Vp, cp = carry
            W2 = [[sum((r[k] * Vp[k][j] for k in range(len(r))), _ZERO) for j in range(len(Vp[0]))] for r in W]
            b = [sum((r[k] * cp[k] for k in range(len(r))), _ZERO) + bj for r, bj in zip(W, b)]
            W = W2
        layers.append((W, b, True))
        carry = ([[_q(x) for x in r] for r in V], [_q(x) for x in c])
    layers.append((carry[0], carry[1], False))
    return layers


def _block_specs(arch, spec: str) -> list:
    L = len(arch) - 2
    return [((arch[0], arch[j + 1], arch[0]) if j < L - 1 else (arch[0], arch[j + 1], arch[-1]),
             hidden_spec(spec) if j < L - 1 else spec) for j in range(L)]


def generate_deep_candidate(arch, spec: str, seed: int, index: int, parents=()) -> tuple[str, dict]:
    """Candidate ``index`` of a deep hunt: ``(kind, recipe)``, deterministic in its arguments.

    A recipe is ``{"blocks": [block recipe, ...]}`` (each an equivariant-by-structure
    one-hidden-layer recipe of :mod:`symeq.relu.hunt`, composed) or ``{"raw": [[W, b], ...]}``.
    Mutations edit one block (or one raw entry) of an earlier find.
    """
    warm(spec)
    rng = _rng(seed, index, "deep")
    parent = _select_parent(seed, index, parents)
    specs = _block_specs(arch, spec)
    if parent is not None:
        rec = json.loads(json.dumps(parent[1]))
        if "raw" in rec:
            layer = rec["raw"][rng.randrange(len(rec["raw"]))]
            i, j = rng.randrange(len(layer[0])), rng.randrange(len(layer[0][0]))
            layer[0][i][j] = str(_q(layer[0][i][j]) + rng.choice([-1, 1]))
        else:
            j = rng.randrange(len(rec["blocks"]))
            (n, N, m), bspec = specs[j]
            rec["blocks"][j] = _mutate(rng, rec["blocks"][j], _group_info(bspec), N)
        return "mutation", rec
    if rng.random() < 0.05:
        dims = list(arch)
        raw = []
        for a, b in zip(dims[:-1], dims[1:]):
            raw.append([[[rng.randint(-2, 2) for _ in range(a)] for _ in range(b)], [rng.randint(-2, 2) for _ in range(b)]])
        return "random", {"raw": raw}
    kinds, blocks = [], []
    for j, (barch, bspec) in enumerate(specs):
        kind, rec = generate_candidate(barch, bspec, seed, index, (), salt=f"block{j}")
        kinds.append(kind)
        blocks.append(rec)
    return "|".join(kinds), {"blocks": blocks}


def build_deep_layers(recipe: dict, arch, spec: str):
    """Plain layers of a deep recipe with exactly the widths of ``arch``, or None."""
    warm(spec)
    if "raw" in recipe:
        raw = recipe["raw"]
        layers = [([[_q(x) for x in r] for r in W], [_q(x) for x in b], i < len(raw) - 1) for i, (W, b) in enumerate(raw)]
    else:
        blocks = []
        for rec, ((n, N, m), bspec) in zip(recipe["blocks"], _block_specs(arch, spec)):
            lay = build_layers(rec, bspec)
            if lay is None or len(lay[0][0]) != N:
                return None
            blocks.append(lay)
        layers = compose_blocks(blocks)
    widths = [len(layers[0][0][0])] + [len(W) for W, _, _ in layers]
    return layers if widths == list(arch) else None


def deep_model(layers, spec: str, name: str = "candidate"):
    """A :class:`symeq.models.Model` of plain ReLU layers (a rational in place of ``relu``: a leaky
    ReLU with that slope)."""
    from ..activations import activation_from_spec, relu
    from ..models import DenseLayer, Model
    from ..numbers import matrix

    def act(r):
        if r is True:
            return relu()
        if r is False or r is None:
            return None
        return activation_from_spec({"type": "leaky_relu", "slope": str(r)})

    return Model(len(layers[0][0][0]), [DenseLayer(matrix(W), b, act(r)) for W, b, r in layers],
                 resolve_group(spec), name=name)


def layers_json(layers) -> list:
    """JSON of plain layers: exact rationals as strings."""
    return [{"W": [[str(x) for x in r] for r in W], "b": [str(x) for x in b], "relu": bool(r)} for W, b, r in layers]


def layers_from_json(data) -> list:
    """Plain layers from :func:`layers_json` (numbers parsed exactly, never evaluated)."""
    return [([[_q(x) for x in r] for r in d["W"]], [_q(x) for x in d["b"]], bool(d["relu"])) for d in data]


# ----------------------------------------------------------------------------------------------
# exact checks
# ----------------------------------------------------------------------------------------------


def _sample_witness(layers, G, seed: int):
    """A rational x with f(A x) != B f(x) for some generator, from a few exact evaluations, or None."""
    rng = random.Random(f"symeq-deep-sample:{seed}")
    n = len(layers[0][0][0])
    for _ in range(6):
        x = [fmpq(rng.randint(-9, 9), rng.randint(1, 4)) for _ in range(n)]
        fx = _regions.evaluate(layers, x)
        for A, B in G.generators:
            Ax = [sum((A[r, c] * x[c] for c in range(n)), _ZERO) for r in range(n)]
            lhs = _regions.evaluate(layers, Ax)
            rhs = [sum((B[r, c] * fx[c] for c in range(len(fx))), _ZERO) for r in range(len(fx))]
            if lhs != rhs:
                return x
    return None


def _equivariance(layers, G, seed: int) -> dict:
    """Exact end-to-end equivariance: a sampled witness, else the region decision per generator."""
    from ..numbers import mat_rows

    w = _sample_witness(layers, G, seed)
    if w is not None:
        return {"holds": False, "witness": [str(v) for v in w], "method": "exact evaluation at a rational point"}
    regions = []
    for A, B in G.generators:
        d = _regions.decide_equivariance(layers, mat_rows(A), mat_rows(B), limit=REGION_LIMIT)
        if not d.holds:
            return {"holds": False, "witness": [str(v) for v in d.witness], "method": "relu-regions"}
        regions.append(d.regions)
    return {"holds": True, "regions": regions, "method": "relu-regions"}


def _stack_difference(f, g) -> list:
    """Plain layers of ``x -> f(x) - g(x)`` for two nets of equal depth (block-diagonal stacking)."""
    out = []
    for i, ((W1, b1, r1), (W2, b2, r2)) in enumerate(zip(f, g)):
        last = i == len(f) - 1
        if i == 0:
            W = [list(r) for r in W1] + [list(r) for r in W2]
        else:
            c1, c2 = len(f[i - 1][0]), len(g[i - 1][0])
            if last:
                W = [list(a) + [-x for x in b] for a, b in zip(W1, W2)]
            else:
                W = [list(r) + [_ZERO] * c2 for r in W1] + [[_ZERO] * c1 + list(r) for r in W2]
        b = [x - y for x, y in zip(b1, b2)] if last else list(b1) + list(b2)
        out.append((W, b, not last))
    return out


def same_function_deep(f, g, limit: int = REGION_LIMIT) -> bool:
    """Exact: ``f == g`` on R^n, by the affine map of ``f - g`` on every open linear region."""
    if len(f) != len(g):
        raise InputError("same_function_deep compares networks of equal depth")
    h = _stack_difference(f, g)
    for region in _regions.linear_regions(h, limit=limit):
        A, c = region.affine
        if any(c) or any(any(r) for r in A):
            return False
    return True


def _cyclic_input_order(G):
    """k when the image of G on the input is cyclic of order k and acts freely on nonzero vectors."""
    ins = []
    for e in G.elements():
        A = e.mats[0]
        if all(A != B for B in ins):
            ins.append(A)
    k = len(ins)
    n = ins[0].nrows()
    I = fmpq_mat(n, n, [1 if i == j else 0 for i in range(n) for j in range(n)])
    if any(A != I and (A - I).rank() < n for A in ins):
        return None, "a group element fixes a nonzero input vector"
    for A in ins:
        P, seen = I, []
        for _ in range(k):
            P = P * A
            if all(P != Q for Q in seen):
                seen.append(P)
        if len(seen) == k:
            return k, None
    return None, "the group's image on the input is not cyclic"


def first_layer_bound(layers, spec: str, limit: int = REGION_LIMIT) -> dict:
    """The first-layer orbit bound of the module docstring: does it prove that no parameter with
    this first-layer width (any depth) is layerwise equivariant?

    Returns ``{"holds": bool | None, "scope": str, ...}``: ``holds`` True is a proof; False means
    the bound does not apply to this function (some region of the bias-free network has rank
    ``<= B``); None means out of scope.
    """
    G = resolve_group(spec)
    n = G.input_dim
    h1 = len(layers[0][0])
    if any(r is not True and r is not False for _, _, r in layers):
        # step 3 needs neurons facing away from the cone to be inactive far out; a leaky neuron is not
        return {"holds": None, "scope": "leaky ReLU (the bound needs ReLU: a neuron facing away from a cone is "
                                        "inactive far out only for ReLU)"}
    if n != 2:
        return {"holds": None, "scope": f"input dimension {n} (the bound needs 2)"}
    k, why = _cyclic_input_order(G)
    if k is None or k not in (2, 3):
        return {"holds": None, "scope": why or f"the image on the input has order {k} (the bound needs 2 or 3)"}
    if h1 >= 2 * k:
        return {"holds": None, "scope": f"first-layer width {h1} >= 2k = {2 * k}: two ray orbits fit"}
    bound = 0 if h1 < k else 1
    bias_free = [(W, [_ZERO] * len(b), r) for W, b, r in layers]
    count, low = 0, None
    try:
        for region in _regions.linear_regions(bias_free, limit=limit):
            count += 1
            A, _ = region.affine
            r = fmpq_mat(len(A), n, [x for row in A for x in row]).rank() if A else 0
            low = r if low is None else min(low, r)
            if r <= bound:
                break
    except _LIMIT_ERRORS:
        return {"holds": None, "scope": f"more than {limit} regions"}
    holds = low is not None and low > bound
    return {"holds": holds, "k": k, "h1": h1, "rank_bound": bound, "regions": count, "min_rank": low,
            "scope": "input dimension 2, cyclic image of order k in {2,3} acting freely, h1 < 2k",
            "method": "first-layer orbit bound: rank of the recession function (biases set to zero) on every "
                      "open linear region exceeds what one orbit of first-layer rays allows"}


def _singular_values(J):
    """Singular values with one BLAS thread where threadpoolctl is installed: the matrices are
    small, and a multi-threaded OpenBLAS spinning on a busy machine made this 18x slower."""
    import numpy as np

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return np.linalg.svd(J, compute_uv=False)
    with threadpool_limits(1):
        return np.linalg.svd(J, compute_uv=False)


def functional_dimension_evidence(layers, seed: int = 0) -> dict:
    """Numeric EVIDENCE (never a proof): Jacobian rank of parameters -> outputs at random inputs,
    against ``#params - #hidden neurons``; the singular values at the cut are its error margin."""
    import numpy as np

    from .probe import _forward

    arrs = [(np.array([[float(x) for x in r] for r in W]).reshape(len(W), -1), np.array([float(x) for x in b]), r)
            for W, b, r in layers]
    shapes = [(W.shape[0], W.shape[1], r) for W, b, r in arrs]
    theta = np.concatenate([np.concatenate([W.ravel(), b]) for W, b, _ in arrs])
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(200, shapes[0][1])) * 3
    step = 1e-6
    J = np.empty((X.shape[0] * shapes[-1][0], theta.size))
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = step
        J[:, i] = ((_forward(theta + e, shapes, X) - _forward(theta - e, shapes, X)) / (2 * step)).ravel()
    s = _singular_values(J)
    tol = 1e-7 * max(float(s[0]) if s.size else 1.0, 1.0)
    rank = int((s > tol).sum())
    hidden = sum(r for r, _, relu in shapes if relu)
    bound = int(theta.size) - hidden
    return {"label": "numeric evidence (float Jacobian rank), not a proof", "rank": rank, "params": int(theta.size),
            "dim_K": hidden, "bound": bound, "hidden_symmetry_evidence": rank < bound,
            "sigma_last_kept": float(s[rank - 1]) if rank else None,
            "sigma_first_dropped": float(s[rank]) if rank < s.size else None, "threshold": tol}


# ----------------------------------------------------------------------------------------------
# one candidate
# ----------------------------------------------------------------------------------------------


def verify_deep_candidate(arch, spec: str, seed: int, index: int, parents=(), minimise_finds: bool = True,
                          slope=None) -> dict:
    """Generate deep candidate ``index`` and give it the strongest proven status (module docstring).

    ``minimise_finds`` is accepted for symmetry with one hidden layer; deep finds are not minimised.
    ``slope``: leaky ReLU hidden layers (:func:`classify_deep`).
    """
    arch = tuple(arch)
    kind, recipe = generate_deep_candidate(arch, spec, seed, index, parents)
    rec = {"type": "candidate", "index": index, "kind": kind, "depth": len(arch) - 2}
    layers = build_deep_layers(recipe, arch, spec)
    if layers is None:
        rec["status"] = "skipped"
        return rec
    rec.update(classify_deep(layers, spec, seed=seed * 1000003 + index, slope=slope))
    if rec["status"] in ("no-action-at-theta", "no-action-at-reduced", "counterexample"):
        rec["recipe"] = recipe  # later candidates may mutate it
    return rec


def classify_deep(layers, spec: str, seed: int = 0, slope=None) -> dict:
    """The strongest proven status of a ReLU network of any depth (module docstring), with what
    backs it: ``{"status", "model", "equivariance", ...}``.

    ``layers`` are plain ``[(W, b, relu), ...]``; ``seed`` picks the sample points tried before
    the region decision.  ``slope``: the hidden layers are leaky ReLUs with that slope.  Then the
    regions, the actions at theta and the functional dimension are exact as for ReLU, but the
    reduction (it removes *inactive* neurons, which leaky ReLU does not have) and the first-layer
    orbit bound (it needs neurons that are inactive far out) are not applied: finds stay
    ``no-action-at-theta`` candidates.
    """
    from ..layerwise import check_layerwise, derive_latent_actions
    from ..submodels import lift, reduce_model

    layers = [([[_q(x) for x in r] for r in W], [_q(x) for x in b], bool(r)) for W, b, r in layers]
    rec = {"model": layers_json(layers)}
    if slope is not None:
        a = slope if isinstance(slope, fmpq) else _q(slope)
        layers = [(W, b, a if r else False) for W, b, r in layers]
        rec["activation"] = {"type": "leaky_relu", "slope": str(a)}
    G = resolve_group(spec)
    try:
        eq = _equivariance(layers, G, seed)
    except _LIMIT_ERRORS as e:
        rec.update(status="undetermined", reason=f"end-to-end equivariance: {e}")
        return rec
    rec["equivariance"] = eq
    if not eq["holds"]:
        rec["status"] = "not-equivariant"
        return rec
    model = deep_model(layers, spec)
    der = derive_latent_actions(model, G)
    if der.found:
        rec["status"] = "layerwise-at-theta"
        rec["actions"] = [[format_matrix(M) for M in acts] for acts in der.actions]
        return rec
    rec["at_theta"] = {"exhaustive": der.exhaustive, "failure": der.failure}
    if slope is not None:
        if not der.exhaustive:
            rec.update(status="undetermined", reason="the search for actions at theta was capped")
            return rec
        rec["status"] = "no-action-at-theta"
        rec["reduced"] = {"skipped": "leaky ReLU: no reduction (it removes inactive neurons, a ReLU notion)"}
        rec["first_layer_bound"] = first_layer_bound(layers, spec)
        rec["functional_dimension"] = exact_functional_dimension(layers, region_limit=REGION_LIMIT // 10)
        return rec
    red = reduce_model(model)
    rec["reduced"] = {"widths": red.model.widths, "removed": len(red.removed), "merged": len(red.merged)}
    if red.changed:
        der2 = derive_latent_actions(red.model, G)
        if der2.found:
            lifted, acts = lift(model, red, der2.actions)
            lay2 = plain_layers(lifted)
            checks, hom, _, _ = check_layerwise(lifted, G, acts)
            try:
                same = same_function_deep(layers, lay2)
            except _LIMIT_ERRORS as e:
                rec.update(status="undetermined", reason=f"checking the lifted parameter: {e}")
                return rec
            if hom and all(c.holds for c in checks) and same:
                rec["status"] = "layerwise-at-reduced"
                rec["lifted"] = layers_json(lay2)
                rec["lifted_actions"] = [[format_matrix(M) for M in a] for a in acts]
            else:  # pragma: no cover - lift is exact; reported, never hidden
                rec.update(status="undetermined", reason="the lifted parameter failed its checks")
            return rec
        at_reduced = der2.exhaustive
    else:
        at_reduced = der.exhaustive  # theta is its own reduced submodel
    if not der.exhaustive:
        rec.update(status="undetermined", reason="the search for actions at theta was capped")
        return rec
    rec["status"] = "no-action-at-reduced" if at_reduced else "no-action-at-theta"
    bound = first_layer_bound(layers, spec)
    rec["first_layer_bound"] = bound
    if bound.get("holds"):
        rec["status"] = "counterexample"
    rec["functional_dimension"] = exact_functional_dimension(layers, region_limit=REGION_LIMIT // 10)
    return rec

