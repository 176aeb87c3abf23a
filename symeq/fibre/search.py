"""Fibre-wide search: a layerwise-equivariant theta' with the same function as theta, or a proof that none exists.

When f(.; theta) is G-equivariant but theta has no latent action (typically because theta is not
identifiable, so Theorem 4.1 of the paper does not apply at theta), the conclusion may still hold
for another parameter theta' of the same architecture in the fibre
F(theta) = {theta' : f(.; theta') = f(.; theta)} (docs/theory.md, "The fibre as a variety").
:func:`search_fibre` decides this for small polynomial MLPs, exactly.

The search
----------
1. **Candidate actions.**  A layerwise action is a homomorphism rho_i : G -> K_i for every hidden
   layer.  Conjugating rho_i by k_i in K_i replaces theta' by k . theta', which has the same function,
   so it suffices to take one action per conjugacy class.  Homomorphisms into the signed
   permutations {+-1}^n x| S_n up to conjugacy are the *signed G-sets* of size n: multisets of
   transitive pieces Ind_H^G(chi), one per G-conjugacy class of pairs (H, chi) with H <= G and
   chi : H -> {+-1} (equivalently ker chi of index 1 or 2 in H), of total size sum [G : H] = n.
   Into S_n only chi = 1 occurs (G-sets).  Subgroups are enumerated from the multiplication table of G,
   so G must be small (at most ``MAX_GROUP_ORDER`` elements).
2. **Pre- and post-activation actions.**  The candidate is the *pre-activation* action rho^_i (a signed
   permutation matrix; z -> -z means z - s -> -(z - s) for an activation centred at its shift s).  The
   post-activation action, the one :func:`symeq.layerwise.check_layerwise` checks and that
   ``actions`` (and ``offsets``) return, is y -> rho_i y + o_i with (q, o) =
   ``activation.affine_admissible(alpha)`` per entry: rho = rho^ for generic and odd sigma and odd
   monomials t^d, rho = |rho^| for even sigma and even monomials, and an offset o = (1 - q) sigma(s)
   for the activations that are odd or monomial only *up to a constant* (sigmoid series, 1 + t^3,
   (t + 1)^3 - 1).
   Which K_i: the rule of the orbit and the gauge (docs/theory.md, the absorbed-constant rule).  A
   neuron gets signed candidates when alpha = -1 is one of its latent scalings
   (``Activation.finite_scalings``): with biases also the affine sign flips, whose offsets the next
   bias absorbs; without biases only offset-free ones at centre 0.  Otherwise permutations.
3. **Linear space.**  theta' is layerwise equivariant for the candidate exactly when
   W_i rho_{i-1}(g) = rho^_i(g) W_i and b~_i - rho^_i(g) b~_i + W_i o_{i-1}(g) = 0 with
   b~_i = b_i - s_i 1 for the generators g (rho_0 = rho_in, o_0 = 0), and W_L rho_{L-1}(g) = rho_out(g) W_L,
   b_L - rho_out(g) b_L + W_L o_{L-1}(g) = 0: linear in (W_i, b~_i), which offsets couple.  The solutions are
   parametrised exactly (one rational nullspace per connected block of entries) by unknowns
   t_0, t_1, ...; each block meets one orbit of neurons, which is what makes the gauge below diagonal.
4. **One Gröbner computation per candidate.**  Substituting the parametrisation into the coefficients
   in x of f(x; theta') - f(x; theta) gives polynomials in t (bias-free theta gives bias-free theta',
   as in :func:`~symeq.fibre.ideal.fibre_ideal`).  No gauge is fixed for this computation: the
   basis {1} then proves that *no* complex theta' is layerwise equivariant for this candidate.
5. **A point.**  When the intersection is not empty, a rational point is searched for: single-variable
   equations are solved exactly (rational roots), positive-dimensional parts are sliced by fixing an
   independent set of unknowns (incoming weights of early layers first: for sigma = t^d fixing an
   incoming weight to 1 *is* the gauge, and leaves the outgoing weights linear), and finite parts
   are solved with the multiplication matrices of the quotient ring (its characteristic polynomial
   has every coordinate as a root, so no rational root means no rational point).  The point is then
   verified without trusting any engine: ``check_layerwise`` for the actions and equality of the
   expanded polynomial maps of theta' and theta.
6. **No real point.**  When a candidate is nonempty over C but no rational point is found, symeq tries
   to prove it has no *real* point: for layers with continuous scalings (monomials, and monomials up
   to a constant with biases, e.g. t + t^2 = (t + 1/2)^2 - 1/4, whose scalings
   z -> alpha (z + 1/2) - 1/2 act affinely) the scalings lambda_O (one per orbit O of
   neurons; they commute with the action) are gauged by charts that cover every real point:
   t = 1 for each incoming unknown t of O (real lambda = 1/t), or all incoming unknowns of O zero
   (inactive neurons; their outgoing unknowns are then set to 0, which changes neither f nor
   equivariance).  Each chart must be empty over C or finite with no real point by Hermite's trace
   form (:func:`~symeq.fibre.groebner.hermite_counts`, exact over Q).

Why signed permutations suffice for monomial activations
--------------------------------------------------------
For sigma = c (t - s)^d the latent group is the monomial matrices (nonzero scalings x| S_n); for
sigma = c (t - s)^d + e with biases the same group acts affinely (the argument below is about the
pre-activations u = z - s, on which it acts linearly, and D is again a latent scaling).
Let rho^ : G -> (R^*)^n x| S_n be a pre-activation action of a finite G.  Taking absolute values is a
homomorphism, |rho^(g)| = Lambda_g P_g with Lambda_g positive diagonal, and
Lambda_{gh} = Lambda_g (P_g Lambda_h P_g^-1) (a multiplicative cocycle).  With the positive diagonal
D := (prod_h Lambda_h)^(1/|G|) one gets Lambda_g = D P_g D^-1 P_g^-1, hence
D^-1 rho^(g) D = (signs of rho^(g)) P_g: a signed permutation.  D is a latent scaling (it preserves the
fibre), so D^-1 . theta' is in the fibre and layerwise equivariant for a signed-permutation action.
Hence:

* over R nothing is lost: a real layerwise-equivariant theta' exists for *some* monomial action iff
  one exists for a signed-permutation action, so "empty for every candidate" is a proof for all real
  theta';
* over Q the *rationality* of the witness may be lost (D has |G|-th roots): a rational theta' whose
  action has scalings other than +-1 may correspond only to an irrational one here, and the search
  may then answer "undetermined" (it never answers wrongly);
* over C it loses complex scalings (roots of unity of order > 2, not conjugate into signed
  permutations by a positive D): the emptiness statements are made over C *for the signed
  candidates*, and conclude over R.

Exhaustiveness caveat (even sigma, even monomials): the search enumerates pre-activation actions
that are homomorphisms.  The pre-activation sign of a neuron is determined by theta' when its row
[w | b - s] is nonzero and not +-proportional to another row of its layer, and then the signs form a
homomorphism automatically (zero rows can take sign +1).  For odd sigma, generic sigma and odd
monomials pre = post, so there is no caveat.  A theta' of an even activation with +-proportional
(cloned) nonzero rows could need a non-homomorphic sign pattern; such theta' are not searched.

Field
-----
Gröbner bases are over Q (sympy, Singular, giac, flint: ``field = "QQ"``) or modulo primes (msolve:
its label, e.g. "modular (2 primes agree)"; ``engine="auto"`` runs an exact engine beside msolve and
keeps the exact answer when it comes in time, see :func:`~symeq.fibre.groebner.groebner`); "empty"
means no point over C, and :attr:`FibreSearch.exact` says whether every emptiness used is exact.  Points returned are rational and verified exactly.  "no real point" is over R
(Hermite's signature, exact).

Examples
--------
The rotated sum of squares: f = ((3x+4y)/5)^2 + ((-4x+3y)/5)^2 = x^2 + y^2 is swap-invariant, theta
has no layerwise action, but W_1 = I (and W_2 = [1, 1]) has the same function and is.

>>> from symeq.models import Model, DenseLayer
>>> from symeq.activations import monomial
>>> from symeq.groups import FiniteGroup
>>> from symeq.numbers import matrix
>>> G = FiniteGroup([(matrix([[0, 1], [1, 0]]), matrix([[1]]))], ["swap"])
>>> m = Model(2, [DenseLayer([["3/5", "4/5"], ["-4/5", "3/5"]], None, monomial(2)),
...               DenseLayer([[1, 1]], None, None)], G)
>>> r = search_fibre(m, engine="sympy", check_theta=False)
>>> r.verdict, r.exit_code
('layerwise-parameter', 0)
>>> r.parameter.polynomial_map() == m.polynomial_map()
True
"""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass, field

from flint import fmpq, fmpq_mat, fmpq_mpoly_ctx, fmpq_poly

from ..budget import Deadline
from ..errors import BudgetExceeded, EngineFailed, InputError
from ..groups.table import GroupTable
from ..numbers import format_matrix, monomial_matrix, monomial_parts, nullspace
from ..steps import Skip, run_steps
from ..expand import expand_forward, theta_entries
from .groebner import ENGINES, best_exact_engine, groebner, hermite_counts, standard_monomials
from .groebner.normal import grevlex_key, normal_form  # shared exact reduction modulo a Groebner basis
from .ideal import resolve_bias

__all__ = ["FibreSearch", "Candidate", "search_fibre", "SEARCH_STEPS", "MAX_GROUP_ORDER", "DEFAULT_MAX_CANDIDATES"]

#: largest group whose subgroups are enumerated
MAX_GROUP_ORDER = 128
#: default cap on the number of candidate actions (all layers together)
DEFAULT_MAX_CANDIDATES = 256
#: largest finite quotient ring handled by the multiplication-matrix solver and Hermite's form
MAX_QUOTIENT_DIMENSION = 200
#: at most this many gauge charts in a proof that a candidate has no real point
MAX_CHARTS = 64

_SLICE_VALUES = [fmpq(1), fmpq(-1), fmpq(2), fmpq(0), fmpq(1, 2), fmpq(3), fmpq(-2), fmpq(1, 3)]


# -- results ---------------------------------------------------------------------------------------

@dataclass
class Candidate:
    """One candidate action and what the search found for it.

    Attributes
    ----------
    index : position in the enumeration (0-based)
    label : the action per hidden layer as a sum of transitive signed G-sets
    pre : ``pre[i][g]``, pre-activation action of generator g on hidden layer i+1 (signed permutation)
    post : ``post[i][g]``, post-activation action (what :func:`symeq.layerwise.check_layerwise` checks)
    linear_dimension : dimension of the space of layerwise-equivariant parameters for this action
    outcome : "point" (a rational theta', verified), "empty" (no complex point), "no-real-point"
        (Hermite on every chart), "real-point" (real points proven, none rational found),
        "nonempty" (complex points, no decision), "budget" (ran out of time here), "not-tried"
    detail : one sentence on how the outcome was obtained
    dimension : dimension over C of the (ungauged) intersection, -1 when empty, None when unknown
    field : "QQ" (exact), msolve's modular label, "R" (Hermite), or None
    engine, seconds : the Gröbner engine of the main computation and the time spent on this candidate
    offsets : ``offsets[i][g]``, the constant part o of the affine post-activation action
        y -> post[i][g] y + o (a list, absorbed by the next bias; docs/theory.md), or None when every
        action is linear
    """

    index: int
    label: str
    pre: list
    post: list
    linear_dimension: int = 0
    outcome: str = "not-tried"
    detail: str = ""
    dimension: int | None = None
    field: str | None = None
    engine: str | None = None
    seconds: float = 0.0
    offsets: list | None = None

    def to_json(self) -> dict:
        out = {"index": self.index, "label": self.label, "linear_dimension": self.linear_dimension,
               "outcome": self.outcome, "detail": self.detail, "dimension": self.dimension,
               "field": self.field, "engine": self.engine, "seconds": round(self.seconds, 4),
               "post_actions": [[format_matrix(M) for M in layer] for layer in self.post]}
        if self.offsets is not None:
            out["post_offsets"] = [[[str(c) for c in o] for o in layer] for layer in self.offsets]
        return out


@dataclass
class FibreSearch:
    """The outcome of :func:`search_fibre`.

    Attributes
    ----------
    verdict : "layerwise-parameter" (``parameter`` is a verified layerwise-equivariant theta' in the
        fibre, exit 0), "no-layerwise-parameter" (every candidate proved empty over C or without real
        point, the enumeration being exhaustive; exit 1), "not-equivariant" (f itself is not
        G-equivariant, so no theta' in the fibre is layerwise equivariant; exit 1) or "undetermined"
        (budget, capped enumeration, or a candidate left undecided; exit 3)
    parameter : theta' as a :class:`~symeq.models.Model` (with the group), or None
    actions : ``actions[i][g]`` post-activation action of generator g on hidden layer i+1 (monomial
        matrices, as :func:`symeq.layerwise.derive_latent_actions` returns them), or None
    offsets : ``offsets[i][g]``, the constant parts of affine actions y -> actions[i][g] y + o (lists;
        offsets of the "-plus-constant" activations, absorbed by the next bias), or None when linear
    candidates : every :class:`Candidate` enumerated, with its outcome
    proof : lines of the argument (the candidates and their Gröbner bases for a negative verdict)
    field_notes : over which field each statement holds
    exhaustive : the enumeration covered every conjugacy class of candidate actions
    exact : every emptiness statement used is exact over Q (False when one rests on msolve alone)
    real_point_exists : some candidate was proved to have a real point that is not rational (the
        conclusion then holds over R, without an exact theta' to return)
    engine, seconds : the engine used and the total time
    """

    verdict: str
    parameter: object = None
    actions: list | None = None
    candidates: list = field(default_factory=list)
    proof: list = field(default_factory=list)
    field_notes: list = field(default_factory=list)
    exhaustive: bool = True
    exact: bool = True
    real_point_exists: bool = False
    engine: str = ""
    seconds: float = 0.0
    candidate: Candidate | None = None
    offsets: list | None = None

    @property
    def exit_code(self) -> int:
        return {"layerwise-parameter": 0, "no-layerwise-parameter": 1, "not-equivariant": 1}.get(self.verdict, 3)

    def summary(self) -> str:
        tried = sum(1 for c in self.candidates if c.outcome != "not-tried")
        return (f"fibre-wide search: {self.verdict} ({tried} of {len(self.candidates)} candidate action(s) examined"
                f"{'' if self.exhaustive else ', enumeration capped'}; {self.engine}, {self.seconds:.3g} s)")

    def report(self) -> str:
        lines = [self.summary()]
        lines += ["  " + p for p in self.proof]
        lines += ["  field: " + f for f in self.field_notes]
        return "\n".join(lines)

    def to_json(self) -> dict:
        from ..io import model_to_json

        return {"verdict": self.verdict, "exit_code": self.exit_code, "exhaustive": self.exhaustive,
                "exact": self.exact, "real_point_exists": self.real_point_exists, "engine": self.engine,
                "seconds": round(self.seconds, 4), "proof": list(self.proof), "field_notes": list(self.field_notes),
                "candidates": [c.to_json() for c in self.candidates],
                "parameter": model_to_json(self.parameter) if self.parameter is not None else None,
                "actions": [[format_matrix(M) for M in layer] for layer in self.actions] if self.actions else None,
                "offsets": [[[str(c) for c in o] for o in layer] for layer in self.offsets] if self.offsets else None}

    def __str__(self) -> str:
        return self.report()


# -- the group: multiplication table, subgroups, signed G-sets --------------------------------------

class _Table(GroupTable):
    """The group's multiplication table (:class:`symeq.groups.GroupTable`), size-checked first."""

    def __init__(self, group, deadline: Deadline):
        order = len(group.elements(deadline=deadline))
        if order > MAX_GROUP_ORDER:
            raise InputError(f"the group has {order} elements; the fibre-wide search enumerates subgroups "
                             f"and handles groups of at most {MAX_GROUP_ORDER} elements")
        super().__init__(group, deadline)


@dataclass
class _Piece:
    """A transitive signed G-set Ind_H^G(chi): ``gens[g]`` its signed permutation matrices."""

    size: int
    label: str
    gens: list
    key: tuple


def _induced(T: _Table, H: frozenset, K: frozenset) -> list[fmpq_mat]:
    reps, coset = [], {}
    for x in range(T.n):
        if x not in coset:
            k = len(reps)
            reps.append(x)
            for h in H:
                coset[T.mult[x][h]] = k
    m = len(reps)
    mats = []
    for g in T.gens:
        cols, vals = [0] * m, [1] * m
        for k, r in enumerate(reps):
            y = T.mult[g][r]
            k2 = coset[y]
            h = T.mult[T.inv[reps[k2]]][y]
            cols[k2] = k
            vals[k2] = 1 if h in K else -1
        mats.append(monomial_matrix(cols, vals))
    return mats


def _pieces(T: _Table, subs: list, signed: bool, max_size: int) -> list[_Piece]:
    out: dict = {}
    for H in subs:
        m = T.n // len(H)
        if m > max_size:
            continue
        kernels = [H] + ([K for K in subs if 2 * len(K) == len(H) and K <= H] if signed else [])
        for K in kernels:
            key = min((T.conj(H, g), T.conj(K, g)) for g in range(T.n))
            if key in out:
                continue
            if len(H) == T.n:
                label = "trivial" if K == H else f"sign character (kernel of order {len(K)})"
            elif len(H) == 1:
                label = f"regular ({m})"
            else:
                label = f"G/H ({m}, |H| = {len(H)}" + (", twisted by a sign of H)" if K != H else ")")
            out[key] = _Piece(m, label, _induced(T, H, K), key)
    return sorted(out.values(), key=lambda p: (p.size, p.label, p.key))


def _block_diag(mats: list[fmpq_mat]) -> fmpq_mat:
    n = sum(M.nrows() for M in mats)
    out = fmpq_mat(n, n)
    o = 0
    for M in mats:
        for i in range(M.nrows()):
            for j in range(M.ncols()):
                if M[i, j] != 0:
                    out[o + i, o + j] = M[i, j]
        o += M.nrows()
    return out


def _layer_options(pieces: list[_Piece], n: int) -> list[list[_Piece]]:
    out = []

    def rec(start, remaining, acc):
        if remaining == 0:
            out.append(list(acc))
            return
        for i in range(start, len(pieces)):
            if pieces[i].size <= remaining:
                acc.append(pieces[i])
                rec(i, remaining - pieces[i].size, acc)
                acc.pop()

    rec(0, n, [])
    return out


def _signed(act, bias: bool) -> bool:
    """Whether hidden neurons of ``act`` are searched with pre-activation signs.

    The rule of the orbit and the gauge (docs/theory.md, the absorbed-constant rule): the sign flip
    alpha = -1 is a latent scaling of ``act`` -- with biases, an affine one whose offset the next bias
    absorbs (sigmoid series, 1 + t^3, (t + 1)^3 - 1); without biases only an offset-free one at
    centre 0.  Continuous classes (monomials, and monomials up to a constant with biases) are
    searched through their signs too (module docstring: a positive latent scaling conjugates any
    finite action into the signed permutations).
    """
    return act.kind != "relu" and fmpq(-1) in act.finite_scalings(bias)


def _post(pre: fmpq_mat, act, bias: bool) -> tuple[fmpq_mat, list | None]:
    """(rho, o): the post-activation action y -> rho y + o of the pre-activation action ``pre``.

    u -> P u on u = z - s (P[j, k] = +-1) gives y_j = sigma(s + P[j, k] u_k) = q y_k + o with
    (q, o) = ``act.affine_admissible(P[j, k])`` (offsets only with biases; ``o`` is None when 0).
    """
    cols, vals = monomial_parts(pre)
    qo = [act.affine_admissible(v) if bias else (act.admissible(v), fmpq(0)) for v in vals]
    offsets = [o for _, o in qo]
    return monomial_matrix(cols, [q for q, _ in qo]), (offsets if any(o != 0 for o in offsets) else None)


def _kind_name(act, bias: bool) -> str:
    if not _signed(act, bias):
        return "permutations"
    affine = " acting affinely, offsets absorbed by the next bias" if act.symmetry.endswith("plus-constant") else ""
    if act.continuous(bias):
        return f"monomial matrices{affine} (searched: signed pre-activation permutations, see the module docstring)"
    if act.symmetry in ("odd", "odd-plus-constant"):
        return "signed permutations" + affine
    return "permutations (pre-activation signs)"


# -- the linear space of layerwise-equivariant parameters ---------------------------------------------

@dataclass
class _TVar:
    name: str
    layer: int
    kind: str          # "w" or "b"
    rows: frozenset
    cols: frozenset
    vec: dict          # {(layer, kind, row, col): fmpq}


def _components(entries: list, rows: list[dict]) -> list[tuple[list, list]]:
    from ..unionfind import union_find

    find = union_find(entries, ((first, k) for r in rows for first, *rest in [list(r)] for k in rest))
    comps: dict = {}
    for e in entries:
        comps.setdefault(find(e), ([], []))[0].append(e)
    for r in rows:
        comps[find(next(iter(r)))][1].append(r)
    return list(comps.values())


def _space(model, group, pre, post, bias: bool, post_offsets=None):
    """(tvars, offsets, consistent): theta' = offsets + sum_t t * vec_t over the equivariant space.

    ``post_offsets[i][g]``: the offsets o of the affine post-activation action y -> rho y + o on hidden
    layer i + 1 (None: 0).  The next layer absorbs them in its bias: with b~ = b - s 1 the layer is
    equivariant when W rho = S W and b~ - S b~ + W o = 0, linear in (W, b~) together.
    """
    L = model.depth
    tvars, offsets = [], {}
    prev = [A for A, _ in group.generators]
    prev_off = [None] * len(prev)
    for l, layer in enumerate(model.layers, 1):
        nout, nin = layer.out_dim, layer.in_dim
        if l < L:
            S, s = pre[l - 1], layer.activation.shift
        else:
            S, s = [B for _, B in group.generators], fmpq(0)
        blocks = []
        wrows = []
        for P, Sg in zip(prev, S):
            for j in range(nout):
                for k in range(nin):
                    r: dict = {}
                    for m in range(nin):
                        if P[m, k] != 0:
                            key = (l, "w", j, m)
                            r[key] = r.get(key, fmpq(0)) + P[m, k]
                    for m in range(nout):
                        if Sg[j, m] != 0:
                            key = (l, "w", m, k)
                            r[key] = r.get(key, fmpq(0)) - Sg[j, m]
                    r = {e: c for e, c in r.items() if c != 0}
                    if r:
                        wrows.append(r)
        blocks.append(("w", [(l, "w", j, k) for j in range(nout) for k in range(nin)], wrows))
        if bias:
            brows = []
            for Sg, o in zip(S, prev_off):
                for j in range(nout):
                    r = {(l, "b", j, 0): fmpq(1)}
                    for m in range(nout):
                        if Sg[j, m] != 0:
                            key = (l, "b", m, 0)
                            r[key] = r.get(key, fmpq(0)) - Sg[j, m]
                    for k in range(nin if o is not None else 0):
                        if o[k] != 0:  # W o: the previous layer's offsets, absorbed by this bias
                            key = (l, "w", j, k)
                            r[key] = r.get(key, fmpq(0)) + o[k]
                    r = {e: c for e, c in r.items() if c != 0}
                    if r:
                        brows.append(r)
            bentries = [(l, "b", j, 0) for j in range(nout)]
            if any(o is not None for o in prev_off):
                # the offsets couple weights and biases: one block, solved together
                kind, wentries, _ = blocks.pop()
                blocks.append((kind, wentries + bentries, wrows + brows))
            else:
                blocks.append(("b", bentries, brows))
            if s != 0:
                for j in range(nout):
                    offsets[(l, "b", j, 0)] = s
        elif s != 0:
            # bias-free theta' with sigma centred at s != 0: b - s 1 = -s 1 must be fixed by S
            for Sg in S:
                if any(sum((Sg[j, m] for m in range(nout)), fmpq(0)) != 1 for j in range(nout)):
                    return [], {}, False
        for kind, entries, rows in blocks:
            for comp, crow in _components(entries, rows):
                pos = {e: i for i, e in enumerate(comp)}
                if crow:
                    M = fmpq_mat(len(crow), len(comp))
                    for i, r in enumerate(crow):
                        for e, c in r.items():
                            M[i, pos[e]] = c
                    basis = nullspace(M)
                else:
                    basis = [[fmpq(1) if i == k else fmpq(0) for i in range(len(comp))] for k in range(len(comp))]
                for v in basis:
                    vec = {e: c for e, c in zip(comp, v) if c != 0}
                    wcols = frozenset(e[3] for e in vec if e[1] == "w")
                    tvars.append(_TVar(f"t{len(tvars)}", l, "w" if wcols else "b", frozenset(e[2] for e in vec),
                                       wcols, vec))
        if l < L:
            prev = post[l - 1]
            prev_off = post_offsets[l - 1] if post_offsets else [None] * len(prev)
    return tvars, offsets, True


# -- the polynomial system ------------------------------------------------------------------------

def _system(model, tvars, offsets, use_bias: bool):
    """(ctx over the t unknowns, generators as fmpq_mpoly): the fibre equations on the linear space."""
    n = model.input_dim
    names = [t.name for t in tvars]
    big = fmpq_mpoly_ctx.get(tuple(f"x{i}" for i in range(n)) + tuple(names), "degrevlex")
    gens = big.gens()
    xs, ts = gens[:n], gens[n:]
    lin: dict = {}
    for t, g in zip(tvars, ts):
        for e, c in t.vec.items():
            lin[e] = lin[e] + c * g if e in lin else c * g
    for e, c in offsets.items():
        lin[e] = lin[e] + c if e in lin else big.from_dict({}) + c

    def w_new(l, j, k):
        return lin.get((l, "w", j, k))

    def b_new(l, j):
        return lin.get((l, "b", j, 0))

    w_old, b_old = theta_entries(model)

    # every entry of theta' is a linear form in the t unknowns: symeq.expand bounds the expansion first
    zero = big.from_dict({})
    new = expand_forward(model, zero, xs, w_new, b_new if use_bias else None,
                         what="building the fibre equations of a candidate action", symbolic=True,
                         nvars=n + len(names), weight_terms=max((len(p.to_dict()) for p in lin.values()), default=1),
                         hint="too large for a Gröbner basis")
    old = expand_forward(model, zero, xs, w_old, b_old if use_bias else None, what="expanding f(x; theta)")
    small = fmpq_mpoly_ctx.get(tuple(names) if names else ("_t",), "degrevlex")
    collected: dict = {}
    for k, (a, b) in enumerate(zip(new, old)):
        for exps, c in (a - b).to_dict().items():
            key = (k, tuple(exps[:n]))
            d = collected.setdefault(key, {})
            te = tuple(exps[n:]) if names else (0,)
            d[te] = d.get(te, fmpq(0)) + c
    polys, seen = [], set()
    for key in sorted(collected):
        terms = {e: c for e, c in collected[key].items() if c != 0}
        if not terms:
            continue
        lead = max(terms, key=grevlex_key)
        c0 = terms[lead]
        terms = {e: c / c0 for e, c in terms.items()}
        k = tuple(sorted(terms.items()))
        if k not in seen:
            seen.add(k)
            polys.append(small.from_dict(terms))
    return small, names, polys


# -- small exact polynomial tools -----------------------------------------------------------------



def _used(p, nvars: int) -> list[int]:
    degs = p.degrees()
    return [i for i in range(nvars) if degs[i] > 0]


def _project(polys, indices: list[int]) -> list[dict]:
    return [{tuple(int(e[i]) for i in indices): fmpq(c) for e, c in p.to_dict().items()} for p in polys]


def _rational_roots(coeffs: list) -> list[fmpq]:
    p = fmpq_poly([fmpq(c) for c in coeffs])
    if p.degree() < 1:
        return []
    roots = []
    for fac, _ in p.factor()[1]:
        if fac.degree() == 1:
            c = fac.coeffs()
            roots.append(-fmpq(c[0]) / fmpq(c[1]))
    return sorted(set(roots), key=lambda r: (abs(r), -r))


def _univariate_coeffs(p, i: int) -> list:
    d = p.degrees()[i]
    out = [fmpq(0)] * (d + 1)
    for e, c in p.to_dict().items():
        out[int(e[i])] += c
    return out




def _coordinate_polynomial(gb, i: int):
    """Characteristic polynomial (coefficients, constant first) of multiplication by variable i."""
    lead = [tuple(m) for m in gb.leading_monomials]
    n = len(gb.variables)
    std = standard_monomials(lead, n, limit=MAX_QUOTIENT_DIMENSION)
    if std is None:
        return None
    index = {b: k for k, b in enumerate(std)}
    D = len(std)
    M = fmpq_mat(D, D)
    for k, b in enumerate(std):
        e = list(b)
        e[i] += 1
        for m, c in normal_form({tuple(e): fmpq(1)}, gb.basis, lead).items():
            M[index[m], k] = c
    return [fmpq(c) for c in M.charpoly().coeffs()]


# -- searching a point ----------------------------------------------------------------------------

class _Solver:
    """Rational points of a system in the t unknowns (see the module docstring, step 5)."""

    def __init__(self, ctx, names, priority, engine, exact_engine, deadline, rng, max_groebner=40, max_states=400):
        self.ctx, self.names, self.n = ctx, names, len(names)
        self.rank = {v: k for k, v in enumerate(priority)}
        self.engine, self.exact_engine, self.deadline, self.rng = engine, exact_engine, deadline, rng
        self.max_groebner, self.max_states = max_groebner, max_states
        self.calls = self.states = 0
        self.real_point = False
        self.notes: list = []

    def _gb(self, polys, used, engine):
        if self.calls >= self.max_groebner:
            return None
        self.calls += 1
        vars_ = [self.names[i] for i in used]
        return groebner((vars_, _project(polys, used)), engine=engine, timeout=_remaining(self.deadline))

    def _propagate(self, polys, values):
        self.states += 1
        if self.states > self.max_states:
            return
        self.deadline.check("searching a rational point")
        polys = [p for p in polys if not p.is_zero()]
        if any(p.is_constant() for p in polys):
            return
        best = None
        for p in polys:
            u = _used(p, self.n)
            if len(u) == 1:
                d = p.degrees()[u[0]]
                if best is None or d < best[2]:
                    best = (p, u[0], d)
        if best is None:
            yield polys, values
            return
        p, i, _ = best
        name = self.names[i]
        for r in _rational_roots(_univariate_coeffs(p, i)):
            yield from self._propagate([q.subs({name: r}) for q in polys], {**values, name: r})

    def solve(self, polys, values=None, depth=0, gb=None):
        """A rational point {name: value} (unknowns not in any equation set to 0), or None.

        ``gb``: a Gröbner result already known for ``polys`` (used while no substitution happened).
        """
        values = dict(values or {})
        for state, vals in self._propagate(polys, values):
            used = sorted({i for p in state for i in _used(p, self.n)})
            if not used:
                return vals
            if depth > 6:
                continue
            g = gb if (gb is not None and len(vals) == len(values) and len(gb.variables) == len(used)) else None
            if g is None:
                g = self._gb(state, used, self.engine)
            if g is None or g.dimension < 0:
                continue
            if g.dimension == 0:
                pt = self._finite(state, used, vals, g)
            else:
                pt = self._slice(state, used, vals, g, depth)
            if pt is not None:
                return pt
        return None

    def _finite(self, state, used, vals, gb):
        """Rational points of a finite system: every coordinate is a root of the characteristic
        polynomial of its multiplication matrix; try the rational roots depth first."""
        if gb.basis is None:
            gb = self._gb(state, used, self.exact_engine)
            if gb is None or gb.dimension != 0 or gb.basis is None:
                return None
        if gb.degree is None or gb.degree > MAX_QUOTIENT_DIMENSION:
            return None
        order = sorted(range(len(used)), key=lambda k: self.rank[self.names[used[k]]])
        roots = {}
        for k in order:
            self.deadline.check("solving a finite system")
            cp = _coordinate_polynomial(gb, k)
            roots[k] = _rational_roots(cp) if cp is not None else []
            if not roots[k]:
                counts = hermite_counts(gb, max_degree=MAX_QUOTIENT_DIMENSION)
                if counts is not None and counts[1] > 0:
                    self.real_point = True
                    self.notes.append(f"a finite slice has {counts[1]} real point(s) ({counts[0]} complex), "
                                      "none rational")
                return None

        def dfs(pos, polys, acc):
            self.states += 1
            if self.states > self.max_states * 50:
                return None
            if pos == len(order):
                return acc if all(p.is_zero() for p in polys) else None
            name = self.names[used[order[pos]]]
            for r in roots[order[pos]]:
                nxt = [p.subs({name: r}) for p in polys]
                if any(p.is_constant() and not p.is_zero() for p in nxt):
                    continue
                got = dfs(pos + 1, nxt, {**acc, name: r})
                if got is not None:
                    return got
            return None

        return dfs(0, state, dict(vals))

    def _independent_sets(self, lms, used, dim, limit=3):
        order = sorted(range(len(used)), key=lambda k: self.rank[self.names[used[k]]])
        sups = [frozenset(i for i, e in enumerate(m) if e) for m in lms]
        found = 0
        for U in itertools.combinations(order, dim):
            Us = set(U)
            if not any(s <= Us for s in sups):
                yield U
                found += 1
                if found >= limit:
                    return

    def _slice(self, state, used, vals, gb, depth, tries=6):
        for U in self._independent_sets(gb.leading_monomials, used, gb.dimension):
            choices = [tuple(fmpq(1) for _ in U)]
            choices += [tuple(self.rng.choice(_SLICE_VALUES) for _ in U) for _ in range(tries - 1)]
            for ch in dict.fromkeys(choices):
                sub = {self.names[used[k]]: v for k, v in zip(U, ch)}
                pt = self.solve([p.subs(sub) for p in state], {**vals, **sub}, depth + 1)
                if pt is not None:
                    return pt
        return None


def _remaining(deadline: Deadline):
    if deadline.seconds is None:
        return None
    left = deadline.seconds - deadline.elapsed()
    if left <= 0:
        raise BudgetExceeded(f"time budget of {deadline.seconds:g} s exceeded in the fibre-wide search")
    return left


# -- building and verifying theta' ----------------------------------------------------------------

def _build(model, group, tvars, offsets, values, use_bias: bool):
    from ..models import DenseLayer, Model

    entries = {e: fmpq(c) for e, c in offsets.items()}
    for t in tvars:
        v = fmpq(values.get(t.name, 0))
        if v != 0:
            for e, c in t.vec.items():
                entries[e] = entries.get(e, fmpq(0)) + c * v
    layers = []
    for l, layer in enumerate(model.layers, 1):
        W = [[entries.get((l, "w", j, k), fmpq(0)) for k in range(layer.in_dim)] for j in range(layer.out_dim)]
        b = [entries.get((l, "b", j, 0), fmpq(0)) if use_bias else fmpq(0) for j in range(layer.out_dim)]
        layers.append(DenseLayer(fmpq_mat(layer.out_dim, layer.in_dim, [x for r in W for x in r]), b,
                                 layer.activation))
    return Model(model.input_dim, layers, group, model.name + " (fibre-wide re-parametrization)", dict(model.meta))


def _verify(model, theta2, group, actions, deadline, offsets=None) -> tuple[bool, str]:
    from ..layerwise import check_layerwise

    if theta2.polynomial_map() != model.polynomial_map():
        return False, "f(.; theta') != f(.; theta)"
    # not interrupted by the budget: cheap, and a found theta' should not be lost at the last step
    checks, hom, _, msg = check_layerwise(theta2, group, actions, None, offsets)
    bad = [c for c in checks if not c.holds]
    if bad:
        return False, f"layer {bad[0].layer}, generator {bad[0].generator}: {bad[0].detail}"
    if not hom:
        return False, msg
    return True, "same polynomial map as theta (expanded exactly); every layer equivariant; " + msg


def _equivariant(model, group) -> str | None:
    f = model.polynomial_map()
    for name, (A, B) in zip(group.names, group.generators):
        fa = model.polynomial_map(input_matrix=A)
        for i in range(model.output_dim):
            bf = sum((B[i, j] * f[j] for j in range(model.output_dim) if B[i, j] != 0), f[0] * 0)
            if fa[i] != bf:
                return f"f(rho_in(g) x) != rho_out(g) f(x) for generator {name}, output {i}"
    return None


# -- the search -----------------------------------------------------------------------------------



def _torus(model, tvars, use_bias: bool, post) -> list[tuple[list, list]]:
    """(incoming unknowns, outgoing unknowns) of each orbit of neurons with continuous scalings.

    Continuous as in the orbit (``Activation.continuous``): monomials, and monomials up to a constant
    with biases, whose scalings z -> alpha (z - s) + s act affinely (docs/theory.md).  The outgoing
    unknowns are set to 0 in the chart of an inactive orbit; when the previous offsets couple the
    next layer's weights with its biases (a mixed unknown) that is not a pure change of weights, so
    they are left free there (the chart may then stay undecided, never wrong).
    """
    out = []
    for l, layer in enumerate(model.layers[:-1], 1):
        act = layer.activation
        if not act.continuous(use_bias) or not _signed(act, use_bias):
            continue
        n = layer.out_dim
        parent = list(range(n))
        for M in post[l - 1]:
            cols, _ = monomial_parts(M)
            for j, k in enumerate(cols):
                a, b = j, k
                while parent[a] != a:
                    a = parent[a]
                while parent[b] != b:
                    b = parent[b]
                parent[a] = b
        orbits: dict = {}
        for j in range(n):
            r = j
            while parent[r] != r:
                r = parent[r]
            orbits.setdefault(r, set()).add(j)
        for O in orbits.values():
            inc = [t.name for t in tvars if t.layer == l and t.rows and t.rows <= O]
            nxt = [t for t in tvars if t.layer == l + 1]
            mixed = any(t.kind == "w" and any(e[1] == "b" for e in t.vec) for t in nxt)
            outg = [] if mixed else [t.name for t in nxt if t.kind == "w" and t.cols and t.cols <= O]
            out.append((inc, outg))
    return out


def _no_real_point(ctx, names, polys, torus, deadline, exact_engine) -> tuple[str, str]:
    """("no-real-point" | "real-point" | "unknown", detail) by Hermite's form on gauge charts."""
    per_orbit = []
    for inc, outg in torus:
        charts = [{t: fmpq(1)} for t in inc] + [{**{t: fmpq(0) for t in inc}, **{t: fmpq(0) for t in outg}}]
        per_orbit.append(charts)
    total = 1
    for c in per_orbit:
        total *= len(c)
    if total > MAX_CHARTS:
        return "unknown", f"{total} gauge charts needed (> {MAX_CHARTS})"
    n = len(names)
    for combo in itertools.product(*per_orbit):
        sub: dict = {}
        for c in combo:
            sub.update(c)
        ps = [p.subs(sub) if sub else p for p in polys]
        ps = [p for p in ps if not p.is_zero()]
        if any(p.is_constant() for p in ps):
            continue
        used = sorted({i for p in ps for i in _used(p, n)})
        if not used:
            return "real-point", "a gauge chart has no equation left"
        gb = groebner(([names[i] for i in used], _project(ps, used)), engine=exact_engine, timeout=_remaining(deadline))
        if gb.dimension < 0:
            continue
        if gb.dimension > 0:
            return "unknown", f"a gauge chart is positive-dimensional (dimension {gb.dimension})"
        counts = hermite_counts(gb, max_degree=MAX_QUOTIENT_DIMENSION)
        if counts is None:
            return "unknown", f"a finite gauge chart has degree {gb.degree} (> {MAX_QUOTIENT_DIMENSION})"
        if counts[1] > 0:
            return "real-point", f"a gauge chart has {counts[1]} real point(s) of {counts[0]} complex ones (Hermite)"
    charts = "every gauge chart" if torus else "the system"
    return "no-real-point", (f"{charts} ({total} chart(s)) is empty over C or finite without real points "
                             "(Hermite's trace form, exact over Q)")


class _Search:
    """The state the steps of :func:`search_fibre` share."""

    def __init__(self, model, group, deadline, res, *, use_bias, main_engine, exact_engine, rng, check_theta,
                 max_candidates, candidate_filter, t0):
        self.model, self.group, self.deadline, self.res = model, group, deadline, res
        self.use_bias, self.main_engine, self.exact_engine, self.rng = use_bias, main_engine, exact_engine, rng
        self.check_theta, self.max_candidates, self.candidate_filter, self.t0 = \
            check_theta, max_candidates, candidate_filter, t0

    def finish(self, verdict=None) -> FibreSearch:
        if verdict is not None:
            self.res.verdict = verdict
        self.res.seconds = time.perf_counter() - self.t0
        return self.res


def _step_not_equivariant(st: _Search):
    """f is not G-equivariant (exact polynomial identity): no parameter with the same function is."""
    st.group.validate()
    why = _equivariant(st.model, st.group)
    if why is None:
        return Skip("f is G-equivariant")
    st.res.proof.append(f"f is not G-equivariant ({why}): no parameter with the same function is "
                        "layerwise equivariant (exact polynomial identity)")
    st.res.field_notes.append("exact over Q: the polynomial maps were expanded")
    return st.finish("not-equivariant")


def _step_theta_itself(st: _Search):
    """theta itself, by the derivation of its latent actions (``check_theta``, or one affine layer)."""
    from ..layerwise import derive_latent_actions

    model, res = st.model, st.res
    if not (st.check_theta or model.depth == 1):
        return Skip("check_theta is off")
    d = derive_latent_actions(model, st.group, deadline=st.deadline)
    if d.found:
        res.parameter, res.actions, res.offsets = model, d.actions, d.offsets
        res.proof.append("theta itself is layerwise equivariant (latent actions derived and checked exactly)")
        res.field_notes.append("exact: layer checks over Q")
        return st.finish("layerwise-parameter")
    if model.depth == 1:  # pragma: no cover - an equivariant affine layer always passes
        return st.finish()
    return Skip(f"no latent action at theta ({d.failure})")


def _candidate_options(st: _Search):
    """Per hidden layer, the candidate actions up to conjugacy (sums of the subgroups' pieces); the proof line."""
    T = _Table(st.group, st.deadline)
    subs = T.subgroups(st.deadline)
    options, kinds = [], []
    for layer in st.model.layers[:-1]:
        act = layer.activation
        pieces = _pieces(T, subs, _signed(act, st.use_bias), layer.out_dim)
        options.append(_layer_options(pieces, layer.out_dim))
        kinds.append(_kind_name(act, st.use_bias))
    total = 1
    for o in options:
        total *= len(o)
    res = st.res
    res.exhaustive = total <= st.max_candidates
    res.proof.append(f"G has order {T.n} and {len(subs)} subgroups; candidate actions up to conjugacy: "
                     + " x ".join(f"{len(o)} on hidden layer {l} (K = {k})"
                                  for l, (o, k) in enumerate(zip(options, kinds), 1))
                     + f" = {total}" + ("" if res.exhaustive else f", capped at {st.max_candidates}"))
    return options


def _build_candidates(st: _Search, options) -> list:
    """The candidates (at most ``max_candidates``) with their linear spaces of equivariant parameters."""
    model, group, use_bias, hidden = st.model, st.group, st.use_bias, st.model.layers[:-1]
    built = []
    for idx, combo in enumerate(itertools.islice(itertools.product(*options), st.max_candidates)):
        st.deadline.check("building candidate actions")
        pre, post, offs, labels = [], [], [], []
        for l, (layer, opt) in enumerate(zip(hidden, combo), 1):
            P = [_block_diag([p.gens[g] for p in opt]) for g in range(len(group.generators))]
            pre.append(P)
            ro = [_post(M, layer.activation, use_bias) for M in P]
            post.append([r for r, _ in ro])
            offs.append([o for _, o in ro])
            labels.append(f"layer {l}: " + " + ".join(p.label for p in opt))
        affine = any(o is not None for layer in offs for o in layer)
        cand = Candidate(idx, "; ".join(labels), pre, post)
        if affine:
            cand.offsets = [[o if o is not None else [fmpq(0)] * M.nrows() for o, M in zip(lo, lp)]
                            for lo, lp in zip(offs, post)]
        tvars, offsets, ok = _space(model, group, pre, post, use_bias, offs)
        cand.linear_dimension = len(tvars) if ok else -1
        if st.candidate_filter is not None and not st.candidate_filter(cand):
            st.res.exhaustive = False
            continue
        built.append((cand, tvars, offsets, ok))
    st.res.candidates = [c for c, *_ in built]
    return built


def _step_candidate_actions(st: _Search):
    """Every candidate action up to conjugacy, larger linear spaces first: a rational theta' found, or every
    candidate's space proven empty (over C, or without real points): no layerwise parameter.  Always decides."""
    model, res = st.model, st.res
    built = _build_candidates(st, _candidate_options(st))
    undecided = False
    for cand, tvars, offsets, ok in sorted(built, key=lambda b: (-b[0].linear_dimension, b[0].index)):
        c0 = time.perf_counter()
        try:
            outcome = _examine(model, st.group, cand, tvars, offsets, ok, st.use_bias, st.main_engine,
                               st.exact_engine, st.deadline, st.rng, res)
        except (BudgetExceeded, EngineFailed) as e:
            cand.outcome, cand.detail = "budget" if isinstance(e, BudgetExceeded) else "engine-failed", str(e)
            cand.seconds = time.perf_counter() - c0
            raise
        cand.seconds = time.perf_counter() - c0
        if outcome == "found":
            res.candidate = cand
            res.proof.append(f"candidate {cand.index} ({cand.label}): {cand.detail}")
            res.field_notes.append("exact: theta' is rational, its polynomial map equals theta's and its "
                                   "layers are equivariant (checked over Q, no Gröbner engine trusted)")
            return st.finish("layerwise-parameter")
        if cand.outcome not in ("empty", "no-real-point"):
            undecided = True
    for cand in res.candidates:
        res.proof.append(f"candidate {cand.index} ({cand.label}; equivariant parameters: "
                         f"{cand.linear_dimension}-dimensional): {cand.outcome}: {cand.detail}")
    res.exact = all(c.field in ("QQ", "R") for c in res.candidates if c.outcome in ("empty", "no-real-point"))
    _field_notes(res, model, st.use_bias)
    if res.real_point_exists:
        res.proof.append("a real layerwise-equivariant theta' exists (Hermite), but no rational one was found")
    if not undecided and res.exhaustive:
        return st.finish("no-layerwise-parameter")
    return st.finish("undetermined")


#: the steps of :func:`search_fibre`, in order (docs/architecture.md, "Pipelines"); the last always decides
SEARCH_STEPS = (_step_not_equivariant, _step_theta_itself, _step_candidate_actions)


def search_fibre(model, group=None, *, engine: str = "auto", timeout: float | None = None,
                 max_candidates: int = DEFAULT_MAX_CANDIDATES, bias="auto", check_theta: bool = True,
                 seed: int = 0, candidate_filter=None) -> FibreSearch:
    """Search the fibre of theta for a layerwise-equivariant theta', or prove that there is none.

    Parameters
    ----------
    model : :class:`~symeq.models.Model`
        A polynomial MLP (dense layers, exact parameters); theta is its parameter.
    group : :class:`~symeq.groups.FiniteGroup`, optional
        Defaults to ``model.group``; at most ``MAX_GROUP_ORDER`` elements.
    engine : {"auto", "sympy", "msolve", ...}
        Engine of the one Gröbner computation per candidate (any name
        :func:`~symeq.fibre.groebner.groebner` accepts; ``"auto"``: an exact engine beside msolve).
        Exact bases, needed to solve finite systems and for Hermite's form, come from ``engine``
        when it is exact, else from :func:`~symeq.fibre.groebner.best_exact_engine`.
    timeout : float, optional
        Seconds for the whole search; past it the verdict is "undetermined" (engines killed, no
        process left behind).
    max_candidates : int
        At most this many candidate actions are examined; when there are more, a negative verdict
        is impossible ("undetermined" unless a theta' is found).
    bias : {"auto", True, False}
        Whether theta' has biases; ``"auto"``: none when every bias of theta is zero (as in
        :func:`~symeq.fibre.ideal.fibre_ideal`).
    check_theta : bool
        First try theta itself (:func:`symeq.layerwise.derive_latent_actions`).
    seed : int
        Seed of the random slices used to find rational points (answers never depend on it, only
        whether a point is found).
    candidate_filter : callable, optional
        ``candidate_filter(candidate) -> bool`` keeps only some candidate actions (e.g. one given
        ``post`` action); the search is then not exhaustive, so it never answers
        "no-layerwise-parameter".

    Returns
    -------
    FibreSearch
        ``verdict`` ("layerwise-parameter", "no-layerwise-parameter", "not-equivariant",
        "undetermined"), ``parameter`` and ``actions`` when found, ``candidates`` with per-candidate
        outcomes, ``proof`` lines, ``field_notes``, ``exit_code`` (0, 1, 3).

    Raises
    ------
    InputError
        Not a polynomial dense model, no group, or a group too large to enumerate.

    Examples
    --------
    Rotation by 120 degrees R = [[0, -1], [1, -1]] fixes f = x^2 - xy + y^2, which (2,2,1) with sigma = t^2
    realises as (x - y/2)^2 + 3/4 y^2.  The signed permutations of two neurons have no element of order 3,
    so the only candidate is the trivial action; it forces W_1 R = W_1, i.e. W_1 = 0: no real theta' in
    the fibre is layerwise equivariant (a counterexample to the conclusion; theta is not identifiable).

    >>> from symeq.models import Model, DenseLayer
    >>> from symeq.activations import monomial
    >>> from symeq.groups import FiniteGroup
    >>> from symeq.numbers import matrix
    >>> G = FiniteGroup([(matrix([[0, -1], [1, -1]]), matrix([[1]]))], ["r"])
    >>> m = Model(2, [DenseLayer([[1, "-1/2"], [0, 1]], None, monomial(2)),
    ...               DenseLayer([[1, "3/4"]], None, None)], G)
    >>> r = search_fibre(m, engine="sympy")
    >>> r.verdict, r.exit_code, [c.outcome for c in r.candidates]
    ('no-layerwise-parameter', 1, ['empty'])
    """
    t0 = time.perf_counter()
    deadline = Deadline(timeout)
    group = group if group is not None else model.group
    if group is None:
        raise InputError("no group: give the model a \"group\" or pass one")
    model.check_group(group)
    if not model.is_polynomial or model.token_mixing:
        raise InputError("the fibre-wide search handles polynomial dense models (ReLU: symeq.relu.fibre; "
                         "attention: not supported)")
    known = tuple(ENGINES)
    if engine != "auto" and engine not in known:
        raise InputError(f"unknown Gröbner engine {engine!r}; known: auto, {', '.join(known)}")
    main_engine = engine
    # an exact engine of the registry serves for finite systems and Hermite's form; msolve and auto need one beside
    exact_engine = engine if engine != "auto" and ENGINES[engine].exact else best_exact_engine()
    use_bias = resolve_bias(model, bias)
    rng = random.Random(seed)
    res = FibreSearch("undetermined", engine=main_engine)
    if use_bias is None:  # issue 25: some layers declare biases, others none
        res.proof.append("the fibre-wide search takes biases in every layer or in none; this model declares them "
                         "in some layers only, so nothing was searched")
        res.seconds = time.perf_counter() - t0
        return res
    st = _Search(model, group, deadline, res, use_bias=use_bias, main_engine=main_engine, exact_engine=exact_engine,
                 rng=rng, check_theta=check_theta, max_candidates=max_candidates, candidate_filter=candidate_filter,
                 t0=t0)
    try:
        return run_steps(SEARCH_STEPS, st)
    except (BudgetExceeded, EngineFailed) as e:  # out of time, or a crashed engine: the question stays open
        res.proof.append(f"undetermined: {e}")
        _field_notes(res, model, use_bias)
        return st.finish("undetermined")


def _field_notes(res: FibreSearch, model, use_bias: bool) -> None:
    notes = ["'empty' = Gröbner basis {1}: no point over C (hence none over R) in the fibre intersected with the "
             "candidate's linear space"]
    if any(c.field not in (None, "QQ", "R") for c in res.candidates):
        notes.append("some emptiness statements rest on msolve's computation modulo a prime (not re-checked "
                     "over Q): they hold for all but finitely many primes, not certified")
    if any(c.outcome == "no-real-point" for c in res.candidates):
        notes.append("'no-real-point': over R, by Hermite's trace form on gauge charts covering every real point")
    acts = [l.activation for l in model.layers[:-1]]
    if any(a.continuous(use_bias) and _signed(a, use_bias) for a in acts):
        notes.append("monomial activations (and monomials up to a constant with biases, whose scalings act "
                     "affinely): candidates are signed pre-activation permutations; every finite group "
                     "of real monomial matrices is conjugate to one by a positive latent scaling, so the negative "
                     "statements cover every real theta' (over C, complex scalings are not covered)")
    if any((a.symmetry == "odd-plus-constant" or (a.symmetry == "monomial-plus-constant" and a.degree % 2))
           and _signed(a, use_bias) for a in acts):
        notes.append("activations up to a constant: sign flips act affinely, y -> q y + o, and the next layer's "
                     "bias absorbs o (the absorbed-constant rule of docs/theory.md)")
    if any(a.symmetry in ("even", "monomial", "monomial-plus-constant") and a.degree % 2 == 0
           and _signed(a, use_bias) for a in acts):
        notes.append("even activations: only homomorphic pre-activation sign patterns are searched (exhaustive "
                     "for theta' without +-proportional nonzero rows in a layer)")
    res.field_notes.extend(notes)


def _examine(model, group, cand, tvars, offsets, ok, use_bias, main_engine, exact_engine, deadline, rng, res) -> str:
    """Decide one candidate; sets its outcome; returns "found" when theta' is found and verified."""
    if not ok:
        cand.outcome, cand.field, cand.dimension = "empty", "QQ", -1
        cand.detail = "bias-free theta' cannot satisfy b - s 1 = rho^(g)(b - s 1) (linear, exact)"
        return cand.outcome
    ctx, names, polys = _system(model, tvars, offsets, use_bias)
    if any(p.is_constant() for p in polys):
        cand.outcome, cand.field, cand.dimension = "empty", "QQ", -1
        cand.detail = ("Gröbner basis {1}: a nonzero constant among the equations (the linear space alone cannot "
                       "realise f)")
        return cand.outcome
    if not polys:
        values = {}
    else:
        n = len(names)
        used = sorted({i for p in polys for i in _used(p, n)})
        gb = groebner(([names[i] for i in used], _project(polys, used)), engine=main_engine,
                      timeout=_remaining(deadline))
        cand.engine, cand.field = gb.engine, gb.field
        cand.dimension = gb.dimension + (n - len(used)) if gb.dimension >= 0 else -1
        if gb.dimension < 0:
            exact = gb.field == "QQ"
            cand.outcome = "empty"
            cand.detail = (f"Gröbner basis {{1}} ({gb.engine}, {'exact over Q' if exact else gb.field}"
                           f", {len(names)} unknowns, {len(polys)} equations): no complex point")
            return cand.outcome
        priority = sorted(names, key=lambda v: _priority(tvars[int(v[1:])]))
        solver = _Solver(ctx, names, priority, main_engine, exact_engine, deadline, rng)
        values = solver.solve(polys, gb=gb)
        if values is None:
            cand.outcome = "nonempty"
            cand.detail = (f"nonempty over C (dimension {cand.dimension}, {gb.engine}); no rational point found "
                           f"({solver.calls} slice computation(s))")
            if solver.real_point:
                cand.outcome, cand.field = "real-point", "R"
                cand.detail += "; " + "; ".join(solver.notes)
                res.real_point_exists = True
                return cand.outcome
            torus = _torus(model, tvars, use_bias, cand.post)
            status, why = _no_real_point(ctx, names, polys, torus, deadline, exact_engine)
            if status == "no-real-point":
                cand.outcome, cand.field = "no-real-point", "R"
                cand.detail = f"nonempty over C (dimension {cand.dimension}) but no real point: {why}"
            elif status == "real-point":
                cand.outcome, cand.field = "real-point", "R"
                cand.detail += f"; real points exist: {why}"
                res.real_point_exists = True
            else:
                cand.detail += f"; no decision over R: {why}"
            return cand.outcome
    theta2 = _build(model, group, tvars, offsets, values, use_bias)
    ok2, msg = _verify(model, theta2, group, cand.post, deadline, cand.offsets)
    if not ok2:  # pragma: no cover - a bug: the point solves the system of an exact parametrisation
        cand.outcome, cand.detail = "nonempty", f"a point was found but failed its exact verification: {msg}"
        return cand.outcome
    cand.outcome, cand.field = "point", "QQ"
    cand.detail = f"rational theta' found and verified: {msg}"
    res.parameter, res.actions, res.offsets = theta2, cand.post, cand.offsets
    return "found"


def _priority(t: _TVar):
    # incoming weights of early layers first (fixing them is the gauge for monomials), then biases
    return (t.layer, t.kind == "b", int(t.name[1:]))
