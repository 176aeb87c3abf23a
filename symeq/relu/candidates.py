"""Candidates of the ReLU counterexample hunter, and their exact verification (one hidden layer).

* **Candidates** come from a deterministic stream: candidate ``i`` of a hunt with seed ``s`` is a
  function of ``(s, i)`` and, for mutations, of the finds among candidates ``< i - lag`` (``lag``
  is stored in the file's header), so any worker count or interruption yields the same
  candidates.  Generators: ``pairs`` (an equivariant linear map written through
  pairs ``t relu(a.x + beta) - t relu(-a.x - beta) = t (a.x + beta)``, the structure of the
  width-4 identity), ``orbit+pairs`` (a ``G``-orbit of neurons plus pairs), ``symmetrised``
  (random small integer neurons symmetrised over ``G``: layerwise equivariant by construction),
  ``random`` (plain small integers) and ``mutation`` (a small edit of an earlier find's recipe).
* **Verification** (exact): end-to-end equivariance from canonical forms
  (:mod:`symeq.relu.canonical`); positive-monomial actions at theta
  (:func:`symeq.layerwise.derive_latent_actions`); the fibre-wide decision
  (:func:`symeq.relu.fibre.decide_fibre`).  A *counterexample* is equivariant with smallest
  layerwise-equivariant width ``w* > N``.
* **Minimisation** of each find: drop neurons and shrink the integers of its recipe while it stays
  a counterexample, then rescale each neuron (a positive scaling in ``K``) to primitive integers.

The driver (work units, workers, resumable files) is :mod:`symeq.relu.hunt`; networks with two or
more hidden layers are :mod:`symeq.relu.deep`; the catalogue of finds is :mod:`symeq.relu.catalogue`.

Examples
--------
>>> d = decide_fibre(identity_example(), resolve_group("rot3"))
>>> d.verdict, d.smallest_equivariant_width
('no-layerwise-parameter', 6)
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from flint import fmpq, fmpq_mat

from ..schema import check_keys
from ..errors import InputError
from ..groups.builtins import PLANE_ROTATIONS
from ..numbers import format_matrix, mat_rows, matrix, nullspace, parse_number
from .canonical import canonical_form, hyperplane_key
from .fibre import decide_fibre, equivariant_by_canonical_form, minimal_width

__all__ = [
    "FORMAT",
    "FIND_STATUSES",
    "PARENT_STATUSES",
    "HUNT_GROUPS",
    "resolve_group",
    "identity_example",
    "generate_candidate",
    "build_layers",
    "minimise",
    "certificate",
    "normalise_neurons",
    "verify_candidate",
    "read_records",
]

FORMAT = "symeq-hunt/2"
# statuses whose recipe later candidates may mutate, and those the summary counts as finds
PARENT_STATUSES = ("counterexample", "no-action-at-reduced", "no-action-at-theta")
FIND_STATUSES = PARENT_STATUSES
_ZERO = fmpq(0)
_ONE = fmpq(1)

# order-3, order-4 and order-6 integer rotations of the plane, acting on input and output
# (the plane rotations of symeq.groups; rot3 is also the built-in group spec rot:3)
HUNT_GROUPS = {
    "rot3": (PLANE_ROTATIONS[3], "order-3 integer rotation R = [[0,-1],[1,-1]] on R^2 (input and output)"),
    "rot4": (PLANE_ROTATIONS[4], "rotation by 90 degrees on R^2 (input and output)"),
    "rot6": (PLANE_ROTATIONS[6], "order-6 integer rotation [[1,-1],[1,0]] on R^2 (input and output)"),
}

_GROUP_CACHE: dict = {}


def resolve_group(spec: str):
    """A group from ``rot3``/``rot4``/``rot6`` or any :func:`symeq.groups.builtin_group` spec.

    >>> resolve_group("rot3").order()
    3
    """
    g = _GROUP_CACHE.get(spec)
    if g is not None:
        return g
    from ..groups import FiniteGroup, builtin_group

    if spec in HUNT_GROUPS:
        R = matrix(HUNT_GROUPS[spec][0])
        g = FiniteGroup([(R, R)], ["r"], label=spec)
    else:
        g = builtin_group(spec)
    g.validate()
    _GROUP_CACHE[spec] = g
    return g


def identity_example(A=((2, 1), (1, 1)), group: str = "rot3"):
    """The width-4 identity on R^2: ``W1 = [A; -A]``, ``W2 = [A^-1, -A^-1]`` (Bokman-Kahl 2023; docs/relu_hunt.md)."""
    from ..activations import relu
    from ..models import DenseLayer, Model

    Am = matrix([list(r) for r in A])
    Ainv = mat_rows(Am.inv())
    Ar = mat_rows(Am)
    W1 = Ar + [[-v for v in r] for r in Ar]
    W2 = [Ainv[i] + [-v for v in Ainv[i]] for i in range(2)]
    return Model(2, [DenseLayer(matrix(W1), [0] * 4, relu()), DenseLayer(matrix(W2), [0, 0], None)],
                 resolve_group(group), name="width-4 identity on R^2")


# ----------------------------------------------------------------------------------------------
# group helpers (per process caches)
# ----------------------------------------------------------------------------------------------

_INFO: dict = {}


def group_info(spec: str) -> dict:
    info = _INFO.get(spec)
    if info is not None:
        return info
    from ..models import equivariant_basis

    G = resolve_group(spec)
    ins = [a for a, _ in G.generators]
    outs = [b for _, b in G.generators]
    hom = equivariant_basis(ins, outs)
    m = G.output_dim
    rows = []
    for B in outs:
        for r in range(m):
            rows.append([B[r, s] - (1 if r == s else 0) for s in range(m)])
    fix = nullspace(fmpq_mat(len(rows), m, [x for r in rows for x in r]))
    els = [(e.mats[0], e.mats[1]) for e in G.elements()]
    info = {"group": G, "hom": hom, "fix": fix, "elements": els, "n": G.input_dim, "m": m}
    _INFO[spec] = info
    return info


def candidate_rng(seed: int, index: int, salt: str = "") -> random.Random:
    return random.Random(f"symeq-hunt:{seed}:{index}:{salt}")


def _q(x) -> fmpq:
    return x if isinstance(x, fmpq) else parse_number(x)


# ----------------------------------------------------------------------------------------------
# recipes -> networks
# ----------------------------------------------------------------------------------------------
# A recipe is JSON data (strings/ints):
#   {"orbits": [[w, b, t], ...],      oriented seed neurons, expanded over G (u = rho_out(g) t,
#                                     t averaged over the orientation stabiliser)
#    "L": [coefficients on the basis of Hom_G(rho_in, rho_out)],
#    "A": r x n integer rows,         pairs t_k relu(a_k x + beta_k) - t_k relu(-a_k x - beta_k)
#    "beta": r biases,                with T A = L (least squares: T = L A^T (A A^T)^-1 ... see below)
#    "cfix": [coefficients on the basis of Fix(rho_out)],
#    "dead": k}                       dead neurons
#   or {"raw": [[W, b], [V, c]]}


def _orbit_neurons(info, w, b, t):
    """Neurons (row, bias, column) of the G-orbit of the oriented neuron (w, b) with jump t."""
    n, m = info["n"], info["m"]
    w = [_q(x) for x in w]
    b = _q(b)
    t = [_q(x) for x in t]
    if not any(w):
        return []
    # orientation stabiliser K0 = {g : w rho_in(g)^-1 = w}; average t over it
    imgs = []
    for A, B in info["elements"]:
        Ainv = A.inv()
        wi = [sum((w[r] * Ainv[r, c] for r in range(n)), _ZERO) for c in range(n)]
        imgs.append((wi, A, B))
    K0 = [B for wi, A, B in imgs if wi == w]
    tt = [sum((B[r, s] * t[s] for B in K0 for s in range(m)), _ZERO) / len(K0) for r in range(m)]
    if not any(tt):
        return []
    out, seen = [], set()
    for wi, A, B in imgs:
        key = (tuple(wi), b)
        if key in seen:
            continue
        seen.add(key)
        u = [sum((B[r, s] * tt[s] for s in range(m)), _ZERO) for r in range(m)]
        out.append((wi, b, u))
    return out


def build_layers(recipe: dict, spec: str):
    """Plain layers ``[(W, b, True), (V, c, False)]`` of a recipe (None if it does not build)."""
    info = _group_info(spec)
    n, m = info["n"], info["m"]
    if "raw" in recipe:
        (W, b), (V, c) = recipe["raw"]
        return [([[_q(x) for x in r] for r in W], [_q(x) for x in b], True),
                ([[_q(x) for x in r] for r in V], [_q(x) for x in c], False)]
    neurons = []
    for w, b, t in recipe.get("orbits", []):
        neurons += _orbit_neurons(info, w, b, t)
    const = [_ZERO] * m
    for coef, f in zip(recipe.get("cfix", []), info["fix"]):
        const = [x + _q(coef) * y for x, y in zip(const, f)]
    A = [[_q(x) for x in r] for r in recipe.get("A", [])]
    if A:
        L = fmpq_mat(m, n)
        for coef, H in zip(recipe.get("L", []), info["hom"]):
            L += H * _q(coef)
        Am = fmpq_mat(len(A), n, [x for r in A for x in r])
        # T with T A = L: needs the rows of L in the row space of A; T = L A^T (A A^T)^+ via
        # the normal equations on the column space (A has full column rank n)
        AtA = Am.transpose() * Am
        try:
            P = AtA.inv()
        except ZeroDivisionError:
            return None
        T = L * P * Am.transpose()
        if T * Am != L:
            return None
        beta = [_q(x) for x in recipe.get("beta", [0] * len(A))]
        for k in range(len(A)):
            tk = [T[r, k] for r in range(m)]
            if not any(tk):
                continue
            neurons.append((A[k], beta[k], tk))
            neurons.append(([-x for x in A[k]], -beta[k], [-x for x in tk]))
            const = [x - y * beta[k] for x, y in zip(const, tk)]
    for _ in range(int(recipe.get("dead", 0))):
        neurons.append(([_ZERO] * n, _ZERO, [_ZERO] * m))
    if not neurons:
        return None
    W = [list(r) for r, _, _ in neurons]
    b = [x for _, x, _ in neurons]
    V = [[u[r] for _, _, u in neurons] for r in range(m)]
    return [(W, b, True), (V, const, False)]


def _width(layers) -> int:
    return len(layers[0][0])


def _small(rng, lo=-2, hi=2, nonzero=False):
    while True:
        v = rng.randint(lo, hi)
        if v or not nonzero:
            return v


def _pairs_part(rng, info, r):
    n = info["n"]
    for _ in range(20):
        A = [[_small(rng) for _ in range(n)] for _ in range(r)]
        Am = fmpq_mat(r, n, [x for row in A for x in row])
        if Am.rank() == n:
            break
    else:
        A = [[1 if i == j else 0 for j in range(n)] for i in range(r)]
    L = [0] * len(info["hom"])
    while not any(L):
        L = [_small(rng) for _ in info["hom"]]
    beta = [(_small(rng) if rng.random() < 0.3 else 0) for _ in range(r)]
    return A, L, beta


def _select_parent(seed: int, index: int, parents):
    """The find that candidate ``index`` mutates (15% of candidates once there are finds), or None.

    Selecting from a one-element list made by this function returns the same element, so the
    main process can ship only the chosen parent to a worker."""
    if not parents or _rng(seed, index).random() >= 0.15:
        return None
    parents = list(parents)
    return parents[_rng(seed, index, "parent").randrange(len(parents))]


def generate_candidate(arch, spec: str, seed: int, index: int, parents=(), salt: str = "") -> tuple[str, dict]:
    """Candidate ``index`` of the stream: ``(kind, recipe)``; deterministic in its arguments.

    ``parents``: ``[(index, recipe), ...]`` of earlier finds (for mutations), sorted by index.
    ``salt`` gives independent streams for the blocks of a deeper network.
    """
    n, N, m = arch
    info = _group_info(spec)
    rng = _rng(seed, index, salt)
    x = rng.random()
    cfix = [(_small(rng) if rng.random() < 0.5 else 0) for _ in info["fix"]]
    parent = _select_parent(seed, index, parents)
    if parent is not None:
        return "mutation", _mutate(rng, parent[1], info, N)
    if x < 0.5 and N >= 2 * n:
        r = N // 2
        A, L, beta = _pairs_part(rng, info, r)
        return "pairs", {"A": A, "L": L, "beta": beta, "cfix": cfix, "dead": N - 2 * r}
    if x < 0.7:
        # one orbit plus pairs
        w = [_small(rng, nonzero=False) for _ in range(n)]
        if not any(w):
            w[0] = 1
        seed_neuron = [w, _small(rng), [_small(rng) for _ in range(m)]]
        size = len(_orbit_neurons(info, *seed_neuron)) or 1
        rest = N - size
        if rest >= 0:
            r = rest // 2
            rec = {"orbits": [seed_neuron], "cfix": cfix, "dead": rest - 2 * r if r >= n else rest}
            if r >= n:
                rec["A"], rec["L"], rec["beta"] = _pairs_part(rng, info, r)
            return "orbit+pairs", rec
    if x < 0.93:
        orbits, used = [], 0
        for _ in range(4):
            w = [_small(rng) for _ in range(n)]
            if not any(w):
                continue
            s = [w, _small(rng), [_small(rng) for _ in range(m)]]
            size = len(_orbit_neurons(info, *s))
            if size and used + size <= N:
                orbits.append(s)
                used += size
        return "symmetrised", {"orbits": orbits, "cfix": cfix, "dead": N - used}
    W = [[_small(rng) for _ in range(n)] for _ in range(N)]
    b = [_small(rng) for _ in range(N)]
    V = [[_small(rng) for _ in range(N)] for _ in range(m)]
    c = [_small(rng) for _ in range(m)]
    return "random", {"raw": [[W, b], [V, c]]}


def _mutate(rng, recipe: dict, info, N: int) -> dict:
    rec = json.loads(json.dumps(recipe))
    if "raw" in rec:
        (W, b), _ = rec["raw"]
        i, j = rng.randrange(len(W)), rng.randrange(len(W[0]))
        W[i][j] = str(_q(W[i][j]) + rng.choice([-1, 1]))
        return rec
    choices = [k for k in ("A", "L", "beta", "cfix") if rec.get(k)]
    if rec.get("orbits"):
        choices.append("orbits")
    if not choices:
        return rec
    k = rng.choice(choices)
    if k == "A":
        i, j = rng.randrange(len(rec["A"])), rng.randrange(len(rec["A"][0]))
        rec["A"][i][j] = int(rec["A"][i][j]) + rng.choice([-1, 1])
    elif k == "orbits":
        o = rec["orbits"][rng.randrange(len(rec["orbits"]))]
        part = rng.randrange(3)
        if part == 1:
            o[1] = int(_q(o[1])) + rng.choice([-1, 1])
        else:
            j = rng.randrange(len(o[part]))
            o[part][j] = int(_q(o[part][j])) + rng.choice([-1, 1])
    else:
        j = rng.randrange(len(rec[k]))
        rec[k][j] = int(_q(rec[k][j])) + rng.choice([-1, 1])
    return rec


# ----------------------------------------------------------------------------------------------
# verification, minimisation, certificates
# ----------------------------------------------------------------------------------------------


def _model(layers, spec: str, name: str = "candidate"):
    from ..activations import relu
    from ..models import DenseLayer, Model

    (W, b, _), (V, c, _) = layers
    return Model(len(W[0]), [DenseLayer(matrix(W), b, relu()), DenseLayer(matrix(V), c, None)],
                 resolve_group(spec), name=name)


def _is_counterexample(layers, spec: str):
    """(True, bounds) when f is equivariant and no layerwise parameter exists at its width."""
    G = resolve_group(spec)
    ok, _ = equivariant_by_canonical_form(layers, G)
    if not ok:
        return False, None
    mw = minimal_width(canonical_form(layers), G)
    return (mw["lower"] is not None and mw["lower"] > _width(layers)), mw


def normalise_neurons(layers):
    """Rescale each neuron by a positive factor (an element of K) so that its incoming row and bias
    are primitive integers; drop neurons with zero outgoing column (they change nothing)."""
    (W, b, _), (V, c, _) = layers
    m = len(V)
    keep_W, keep_b, cols = [], [], []
    for j, (w, bj) in enumerate(zip(W, b)):
        v = [V[r][j] for r in range(m)]
        if not any(v) or (not any(w) and bj <= 0):
            continue
        if any(w):
            key, beta, lam = hyperplane_key(w, bj)
            # (w, b) = lam (key, beta); make (key, beta) integral
            den = int(beta.q)
            s = abs(lam) / den
            w2 = [x / s for x in w]
            b2 = bj / s
            v2 = [x * s for x in v]
        else:
            w2, b2, v2 = list(w), bj, v
        keep_W.append(w2)
        keep_b.append(b2)
        cols.append(v2)
    if not keep_W:
        return layers
    V2 = [[cols[j][r] for j in range(len(cols))] for r in range(m)]
    return [(keep_W, keep_b, True), (V2, list(c), False)]


def _recipe_numbers(rec):
    """Paths to every integer of a recipe (for shrinking)."""
    paths = []
    for k in ("A",):
        for i, row in enumerate(rec.get(k, [])):
            for j, _ in enumerate(row):
                paths.append((k, i, j))
    for k in ("L", "beta", "cfix"):
        for i, _ in enumerate(rec.get(k, [])):
            paths.append((k, i))
    for oi, (w, b, t) in enumerate(rec.get("orbits", [])):
        for j, _ in enumerate(w):
            paths.append(("orbits", oi, 0, j))
        paths.append(("orbits", oi, 1))
        for j, _ in enumerate(t):
            paths.append(("orbits", oi, 2, j))
    return paths


def _get(rec, path):
    x = rec
    for p in path:
        x = x[p]
    return x


def _set(rec, path, value):
    x = rec
    for p in path[:-1]:
        x = x[p]
    x[path[-1]] = value


def minimise(recipe: dict, spec: str, max_steps: int = 200) -> tuple[dict, list]:
    """Fewest neurons, then smallest integers, keeping the counterexample property.

    Works on the recipe (whose structure keeps f equivariant): drop dead neurons, pairs (rows of
    ``A``) and orbits; then move every integer towards 0.  Returns (recipe, layers)."""
    rec = json.loads(json.dumps(recipe))
    layers = build_layers(rec, spec)
    steps = 0

    def good(r):
        nonlocal steps
        steps += 1
        lay = build_layers(r, spec)
        if lay is None:
            return None
        ok, _ = _is_counterexample(lay, spec)
        return lay if ok else None

    if "raw" in rec:
        return rec, normalise_neurons(layers)
    # fewer neurons
    changed = True
    while changed and steps < max_steps:
        changed = False
        cands = []
        if rec.get("dead", 0):
            r2 = dict(rec, dead=rec["dead"] - 1)
            cands.append(r2)
        for i in range(len(rec.get("A", []))):
            r2 = json.loads(json.dumps(rec))
            del r2["A"][i]
            if "beta" in r2:
                del r2["beta"][i]
            cands.append(r2)
        for i in range(len(rec.get("orbits", []))):
            r2 = json.loads(json.dumps(rec))
            del r2["orbits"][i]
            cands.append(r2)
        for r2 in cands:
            lay = good(r2)
            if lay is not None and _width(lay) < _width(layers):
                rec, layers, changed = r2, lay, True
                break
    # smaller integers
    for path in _recipe_numbers(rec):
        if steps >= max_steps:
            break
        v = int(_q(_get(rec, path)))
        for target in sorted({0, (1 if v > 0 else -1), v // 2 if v > 0 else -((-v) // 2)}, key=abs):
            if abs(target) >= abs(v):
                continue
            r2 = json.loads(json.dumps(rec))
            _set(r2, path, target)
            lay = good(r2)
            if lay is not None and _width(lay) <= _width(layers):
                rec, layers = r2, lay
                break
    return rec, normalise_neurons(layers)


def _verify_leaky(layers, recipe, spec: str, a: fmpq, rec: dict) -> dict:
    """One hidden leaky ReLU layer: the exact equivariance (leaky canonical forms), actions at theta,
    and the fibre-wide decision by reduction to the ReLU twin (:mod:`symeq.relu.leaky`).  Finds are
    not minimised (the minimiser is written for ReLU)."""
    from ..layerwise import derive_latent_actions
    from .fdim import exact_functional_dimension
    from .leaky import decide_fibre_leaky, equivariant_leaky, leaky_model

    G = resolve_group(spec)
    (W, b, _), (V, c, _) = layers
    lay = [(W, b, a), (V, c, False)]
    rec["activation"] = {"type": "leaky_relu", "slope": str(a)}
    ok, _ = equivariant_leaky(lay, G)
    if not ok:
        rec["status"] = "not-equivariant"
        return rec
    der = derive_latent_actions(leaky_model(lay, a, G), G)
    if der.found:
        rec["status"] = "layerwise-at-theta"
        return rec
    d = decide_fibre_leaky(lay, G, check_theta=False)
    rec["min_width"] = [d.lower_bound, d.upper_bound]
    if d.verdict == "no-layerwise-parameter":
        rec["status"] = "counterexample"
        rec["recipe"] = recipe
        rec["model"] = _layers_json(layers)
        rec["certificate"] = leaky_certificate(lay, spec, d, der)
        rec["functional_dimension"] = exact_functional_dimension(lay)
    elif d.verdict == "layerwise-parameter":
        rec["status"] = "layerwise-in-fibre"
    else:
        rec["status"] = "undetermined"
    return rec


def leaky_certificate(lay, spec: str, d, der) -> dict:
    """The record of a leaky counterexample, as :func:`certificate` for ReLU: end-to-end
    equivariance by linear regions, no action at theta, the fibre-wide proof (reduction to the
    ReLU twin) with the smallest equivariant realisation (a leaky model) and its actions."""
    from ..io import model_to_json
    from .regions import decide_equivariance

    G = resolve_group(spec)
    regions = []
    for A, B in G.generators:
        e = decide_equivariance(lay, mat_rows(A), mat_rows(B))
        regions.append({"holds": e.holds, "regions": e.regions})
    return {
        "verdict": d.verdict, "activation": {"type": "leaky_relu", "slope": str(lay[0][2])},
        "end_to_end": {"holds": all(r["holds"] for r in regions), "method": "leaky canonical form and regions",
                       "per_generator": regions},
        "at_theta": {"actions_found": bool(der.found), "exhaustive": der.exhaustive, "failure": der.failure},
        "fibre": {"width": d.width, "smallest_equivariant_width": d.smallest_equivariant_width,
                  "lower_bound": d.lower_bound, "upper_bound": d.upper_bound, "proof": d.proof.get("lines", [])},
        "canonical_form": d.canonical.to_json() if d.canonical else None,
        "realisation": None if d.realisation is None else model_to_json(d.realisation),
        "realisation_actions": None if d.realisation_actions is None
        else [format_matrix(M) for M in d.realisation_actions],
    }


def _layers_json(layers):
    (W, b, _), (V, c, _) = layers
    return {"W1": [[str(x) for x in r] for r in W], "b1": [str(x) for x in b],
            "W2": [[str(x) for x in r] for r in V], "b2": [str(x) for x in c]}


def certificate(layers, spec: str) -> dict:
    """Exact certificate of a counterexample: end-to-end equivariance decided twice (canonical
    forms and linear regions), no positive-monomial action at theta, and the fibre-wide proof
    with the smallest equivariant realisation and its actions."""
    from ..io import model_to_json
    from ..layerwise import derive_latent_actions
    from .regions import decide_equivariance

    G = resolve_group(spec)
    model = _model(layers, spec)
    regions = []
    for A, B in G.generators:
        d = decide_equivariance([(layers[0][0], layers[0][1], True), (layers[1][0], layers[1][1], False)],
                                mat_rows(A), mat_rows(B))
        regions.append({"holds": d.holds, "regions": d.regions})
    der = derive_latent_actions(model, G)
    fd = decide_fibre(model, G, check_theta=False)
    return {
        "verdict": fd.verdict,
        "end_to_end": {"holds": all(r["holds"] for r in regions), "method": "canonical form and relu-regions",
                       "per_generator": regions},
        "at_theta": {"actions_found": bool(der.found), "exhaustive": der.exhaustive, "failure": der.failure},
        "fibre": {"width": fd.width, "smallest_equivariant_width": fd.smallest_equivariant_width,
                  "lower_bound": fd.lower_bound, "upper_bound": fd.upper_bound,
                  "proof": fd.proof.get("lines", [])},
        "canonical_form": fd.canonical.to_json() if fd.canonical else None,
        "realisation": None if fd.realisation is None else model_to_json(fd.realisation),
        "realisation_actions": None if fd.realisation_actions is None
        else [format_matrix(M) for M in fd.realisation_actions],
    }


def verify_candidate(arch, spec: str, seed: int, index: int, parents=(), minimise_finds: bool = True,
                     slope=None) -> dict:
    """Generate candidate ``index`` and verify it exactly; return its JSON record.

    ``slope`` (a rational, as text or number): the hidden layer is a leaky ReLU with that slope
    instead of ReLU (the same candidate stream; :func:`_verify_leaky`)."""
    arch = tuple(arch)
    kind, recipe = generate_candidate(arch, spec, seed, index, parents)
    rec = {"type": "candidate", "index": index, "kind": kind}
    layers = build_layers(recipe, spec)
    if layers is None or _width(layers) != arch[1]:
        rec["status"] = "skipped"
        return rec
    if slope is not None:
        return _verify_leaky(layers, recipe, spec, fmpq(slope) if not isinstance(slope, fmpq) else slope, rec)
    G = resolve_group(spec)
    ok, _ = equivariant_by_canonical_form(layers, G)
    if not ok:
        rec["status"] = "not-equivariant"
        return rec
    from ..layerwise import derive_latent_actions

    der = derive_latent_actions(_model(layers, spec), G)
    if der.found:
        rec["status"] = "layerwise-at-theta"
        return rec
    mw = minimal_width(canonical_form(layers), G)
    rec["min_width"] = [mw["lower"], mw["upper"]]
    N = arch[1]
    if mw["lower"] is not None and mw["lower"] > N:
        rec["status"] = "counterexample"
        rec["recipe"] = recipe
        rec["model"] = _layers_json(layers)
        if minimise_finds:
            r2, lay2 = minimise(recipe, spec)
            rec["minimised"] = {"recipe": r2, "model": _layers_json(lay2), "width": _width(lay2)}
            rec["certificate"] = certificate(lay2, spec)
        else:
            lay2 = layers
            rec["certificate"] = certificate(layers, spec)
        from .fdim import exact_functional_dimension

        rec["functional_dimension"] = exact_functional_dimension(lay2)
    elif mw["upper"] is not None and mw["upper"] <= N:
        rec["status"] = "layerwise-in-fibre"
    else:
        rec["status"] = "undetermined"
    return rec


#: the keys of a hunt file's header line (allowed, required); "batch": older hunters' name of "lag"
HEADER_KEYS = (("type", "format", "arch", "group", "seed", "lag", "minimise", "batch", "activation"),
               ("type", "format", "arch", "group", "seed"))


def read_records(path) -> tuple[dict | None, list]:
    """(header, records) of a hunt file; a torn last line is ignored; duplicates (same index)
    keep the first occurrence."""
    p = Path(path)
    if not p.exists():
        return None, []
    header, recs, seen = None, [], set()
    for line in p.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            continue
        if d.get("type") == "header":
            if header is None:  # strict keys: a misspelt "seed" or "minimise" must not resume another hunt
                check_keys(d, f"{p}: header", *HEADER_KEYS, error=InputError)
            header = header or d
        elif d.get("type") == "candidate" and d.get("index") not in seen:
            seen.add(d["index"])
            recs.append(d)
    return header, recs


_rng = candidate_rng  # the earlier private name, for callers not yet moved to the public one


_group_info = group_info  # the earlier private name, for callers not yet moved to the public one
