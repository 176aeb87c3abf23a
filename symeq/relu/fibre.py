"""Fibre-wide decision for one-hidden-layer ReLU networks: is *some* parameter with the same
function layerwise equivariant, and what is the smallest width at which one exists?

Setting.  ``f(x) = V relu(W x + b) + c`` of width ``N``, a finite group ``G`` acting on input and
output by ``rho_in``, ``rho_out``, and ``K = (R_{>0})^N x| S_N`` (positive monomial matrices, the
latent symmetries of ReLU).  A parameter ``theta'`` is *layerwise equivariant* when there is a
homomorphism ``rho : G -> K`` with ``relu(W' rho_in(g) x + b') = rho(g) relu(W' x + b')`` and
``V' rho(g) y + c' = rho_out(g) (V' y + c')`` for all ``x, y`` (exactly what
:func:`symeq.layerwise.check_layerwise` checks).  The question is whether such ``theta'`` exists in
the fibre ``{theta' of width N : f(.; theta') = f}`` -- the paper's conclusion "after a
re-parametrization" (Shahverdi-Marchetti-Bokman-Kohn 2026, Thm 4.1), whose premise
(identifiability) is open for ReLU.

The argument implemented here (every step is exact rational linear algebra):

1. *Neurons as oriented hyperplanes.*  A neuron with ``w != 0`` is ``u relu(l_sigma(x))`` where
   ``sigma`` is an oriented hyperplane (the half-space ``l_sigma > 0``) and, after the positive
   rescaling allowed by ``K``, ``l_sigma = +-(a_H . x + beta_H)`` in the normal form of
   :mod:`symeq.relu.canonical`.  Writing ``rho(g) e_j = d e_{pi_g(j)}`` the first-layer condition
   reads ``w_{pi_g j} rho_in(g) = d w_j``, ``b_{pi_g j} = d b_j`` (for rows that are not dead), i.e.
   ``pi_g`` maps the neuron on ``sigma`` to a neuron on ``rho_in(g) sigma`` (orientation kept,
   ``d > 0``), and the second-layer condition reads ``u_{g sigma} = rho_out(g) u_sigma / d``: the
   extended jump ``u_sigma (w_sigma, b_sigma)`` transforms as ``E -> rho_out(g) E rho~_in(g)^-1``.
2. *Reduction to a minimal form.*  In a layerwise-equivariant ``theta'``: neurons on the same
   oriented hyperplane can be merged (their ``u`` add; the merged family is still equivariant);
   orbits with ``u = 0`` can be deleted (``u = 0`` is ``G``-invariant); constant neurons
   (``w = 0``) only add a ``G``-fixed constant, which the output bias absorbs.  Conversely, dead
   neurons (``w = 0, b = 0, v = 0``, fixed by every ``rho(g)``) pad any layerwise-equivariant
   parameter to a larger width.  Hence *a layerwise-equivariant parameter of width N exists iff
   N >= w**, the smallest width of an equivariant realisation in minimal form.
3. *Minimal forms are linear data.*  Let ``S`` be the kink hyperplanes of ``f`` with jumps ``J_H``
   and affine part ``(M, c0)`` (canonical form).  By uniqueness of the canonical form, a minimal
   realisation has, for every ``H`` in ``S``, neurons on ``H+`` and/or ``H-`` with
   ``u_{H+} + u_{H-} = J_H``; on a hyperplane outside ``S`` it has both orientations with
   ``u_{H+} = -u_{H-}`` (a pair ``t relu(l) - t relu(-l) = t l``: an *extra*, carrying an affine term);
   and ``-sum_H u_{H-} (a_H x + beta_H) + (extras) + c' = M x + c0``.  Write
   ``q_H := u_{H-}``.  For a choice of *support* (which oriented hyperplanes of ``S`` carry a
   nonzero ``u``; it is ``G``-invariant, so a union of orbits of ``G`` on ``S x {+,-}``: for each
   pair of orbits ``(O, -O)`` one of ``O``, ``-O``, both; a self-paired orbit needs both), the
   equivariance of ``u`` and the vanishing off the support are *linear* in ``q``.
4. *Extras.*  A ``G``-orbit of extra pairs through ``v = (a, beta)`` with stabiliser ``K_v`` of
   the unoriented hyperplane (``K0 <= K_v`` preserving orientation) costs ``2 |G| / |K_v|``
   neurons and contributes the equivariant linear map
   ``(1/|K_v|) sum_{g in G} rho_out(g) t a rho_in(g)^-1`` with ``rho_out(k) t = chi(k) t``
   (``chi = +1`` on ``K0``, ``-1`` on ``K_v \\ K0``).  Which stabilisers occur is decided from the
   subgroups of ``G`` and their characters ``K -> {+-1}``: ``v`` lies in the eigenspace
   ``E(K, K0) = {v : v rho~(k)^-1 = chi(k) v}`` of the dual affine representation, with ``a != 0``
   and the hyperplane outside ``S``.  This gives an exact lower bound on the cost of extras:
   zero if the residual ``M + sum_H q_H a_H^T`` can vanish, else the cheapest single orbit that is
   not *proven* useless (a type whose eigenspace is one line is one specific hyperplane, decided by
   a linear system), or two cheapest orbits.  Upper bounds come from explicit constructions
   (linear systems in ``(q, t)`` for chosen hyperplanes), each rebuilt as a network and checked.
5. The verdict is exact whenever the bounds meet at ``N`` (``lower > N``: no layerwise parameter;
   ``upper <= N``: one is built and checked); otherwise ``undetermined``.  Every realisation
   returned is re-checked: same canonical form (so the same function, by uniqueness) and
   layerwise equivariant by :func:`symeq.layerwise.check_layerwise` with explicit actions.

Example (Bokman-Kahl 2023, docs/theory.md): the identity on R^2 through width 4 under the order-3
rotation ``R = [[0, -1], [1, -1]]`` has no kink; every extra orbit is free (3 lines, 6 neurons),
so ``w* = 6`` and width 4 admits no layerwise-equivariant parameter:

>>> from symeq.relu.hunt import resolve_group, identity_example
>>> d = decide_fibre(identity_example(), resolve_group("rot3"))
>>> d.verdict, d.smallest_equivariant_width, d.realisation.widths
('no-layerwise-parameter', 6, [2, 6, 2])
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from flint import fmpq, fmpq_mat

from ..errors import InputError
from ..groups.table import GroupTable
from ..numbers import mat_key, mat_rows, nullspace
from .canonical import CanonicalForm, canonical_form, hyperplane_key, plain_layers

__all__ = ["FibreDecision", "decide_fibre", "minimal_width", "GroupData", "group_data", "equivariant_by_canonical_form"]

_ZERO = fmpq(0)
_ONE = fmpq(1)


# ----------------------------------------------------------------------------------------------
# group data (cached per group)
# ----------------------------------------------------------------------------------------------


@dataclass
class HyperplaneType:
    """Hyperplanes whose stabiliser contains ``K`` with orientation character trivial on ``K0``."""

    K: frozenset
    K0: frozenset
    basis: list  # basis of E(K, K0) in Q^{n+1}
    cost: int  # 2 |G| / |K|: neurons of one orbit of extra pairs (upper bound for points of E)


@dataclass
class GroupData:
    n: int
    m: int
    gens: list  # (rho_in, rho_out, rho_in^-1) of the generators
    elements: list  # (rho_in, rho_out, rho_in^-1) of all elements
    types: list = field(default_factory=list)

    @property
    def order(self) -> int:
        return len(self.elements)


_CACHE: dict = {}


def _rows(M: fmpq_mat) -> list:
    return mat_rows(M)


def group_data(group) -> GroupData:
    """Elements, subgroups and hyperplane stabiliser types of ``group`` (cached)."""
    key = tuple((mat_key(a), mat_key(b)) for a, b in group.generators)
    gd = _CACHE.get(key)
    if gd is not None:
        return gd
    els = group.elements()
    n, m = group.input_dim, group.output_dim
    elements = [(e.mats[0], e.mats[1], e.mats[0].inv()) for e in els]
    gens = [(a, b, a.inv()) for a, b in group.generators]
    gd = GroupData(n, m, gens, elements)
    N = len(elements)
    table = GroupTable(group)
    mult = table.mult
    subgroups = table.subgroups()
    subgroups = sorted(subgroups, key=lambda s: (-len(s), sorted(s)))
    dual = []  # rho~(g)^-1 acting on row vectors (a, beta)
    for a, _, ainv in elements:
        R = [[ainv[i, j] for j in range(n)] + [_ZERO] for i in range(n)] + [[_ZERO] * n + [_ONE]]
        dual.append(R)
    for K in subgroups:
        for K0 in subgroups:
            if not K0 <= K or len(K) not in (len(K0), 2 * len(K0)):
                continue
            rows = []
            for k in K:
                sgn = 1 if k in K0 else -1
                D = dual[k]
                # v D = sgn v  <=>  (D^T - sgn I) v^T = 0
                for c in range(n + 1):
                    rows.append([D[r][c] - (sgn if r == c else 0) for r in range(n + 1)])
            basis = nullspace(fmpq_mat(len(rows), n + 1, [x for r in rows for x in r]))
            if not basis or all(not any(v[:n]) for v in basis):
                continue
            gd.types.append(HyperplaneType(K, K0, basis, 2 * N // len(K)))
    gd.types.sort(key=lambda t: t.cost)
    gd._mult = mult
    _CACHE[key] = gd
    return gd


def _vec_mat(v, M) -> list:
    """Row vector times matrix (fmpq_mat)."""
    nr, nc = M.nrows(), M.ncols()
    return [sum((v[r] * M[r, c] for r in range(nr) if v[r]), _ZERO) for c in range(nc)]


def _mat_vec(M, v) -> list:
    nr, nc = M.nrows(), M.ncols()
    return [sum((M[r, c] * v[c] for c in range(nc) if v[c]), _ZERO) for r in range(nr)]


def _stabiliser(gd: GroupData, v) -> tuple[frozenset, frozenset]:
    """(K, K0): elements mapping the hyperplane v = (a, beta) to itself, resp. preserving orientation."""
    n = gd.n
    K, K0 = set(), set()
    for i, (_, _, ainv) in enumerate(gd.elements):
        w = _vec_mat(v[:n], ainv) + [v[n]]
        if w == list(v):
            K.add(i)
            K0.add(i)
        elif w == [-x for x in v]:
            K.add(i)
    return frozenset(K), frozenset(K0)


# ----------------------------------------------------------------------------------------------
# exact linear systems
# ----------------------------------------------------------------------------------------------


def _solve(rows: list, rhs: list, nvars: int):
    """A solution of ``rows x = rhs`` (free variables 0), or None if inconsistent."""
    if nvars == 0:
        return [] if not any(rhs) else None
    if not rows:
        return [_ZERO] * nvars
    A = fmpq_mat(len(rows), nvars + 1, [x for r, h in zip(rows, rhs) for x in list(r) + [h]])
    R, rank = A.rref()
    x = [_ZERO] * nvars
    for i in range(rank):
        piv = next(j for j in range(nvars + 1) if R[i, j] != 0)
        if piv == nvars:
            return None
        x[piv] = R[i, nvars] / R[i, piv]
    return x


# ----------------------------------------------------------------------------------------------
# the decision
# ----------------------------------------------------------------------------------------------


@dataclass
class FibreDecision:
    """Result of :func:`decide_fibre`.

    Attributes
    ----------
    verdict : "layerwise-parameter" | "no-layerwise-parameter" | "undetermined" | "not-equivariant"
    width : the width N of the given model
    smallest_equivariant_width : w* when the bounds meet, else None
    lower_bound, upper_bound : exact bounds on w* (upper None when no realisation was built)
    realisation : a layerwise-equivariant Model of width w* (or of width ``upper_bound``), same function
    realisation_actions : its actions, one positive monomial matrix per generator
    parameter : when the verdict is "layerwise-parameter", a layerwise-equivariant theta' of width N
        (the model itself when it is layerwise equivariant at theta), with ``actions``
    at_theta : whether theta itself admits positive-monomial actions (None: not examined)
    proof : a JSON-ready summary of the argument
    witness : for "not-equivariant", a rational x with f(rho_in x) != rho_out f(x)
    """

    verdict: str
    width: int
    smallest_equivariant_width: int | None = None
    lower_bound: int | None = None
    upper_bound: int | None = None
    realisation: object = None
    realisation_actions: list | None = None
    parameter: object = None
    actions: list | None = None
    at_theta: bool | None = None
    canonical: CanonicalForm | None = None
    proof: dict = field(default_factory=dict)
    witness: list | None = None

    @property
    def exit_code(self) -> int:
        return {"layerwise-parameter": 0, "no-layerwise-parameter": 1, "not-equivariant": 1}.get(self.verdict, 3)

    def report(self) -> str:
        lines = [f"fibre-wide decision (one hidden ReLU layer, width {self.width}): {self.verdict}"]
        if self.at_theta is not None:
            lines.append(f"  positive-monomial actions at theta itself: {'yes' if self.at_theta else 'none'}")
        if self.lower_bound is not None:
            w = self.smallest_equivariant_width
            lines.append("  smallest width of a layerwise-equivariant realisation: "
                         + (str(w) if w is not None else f"between {self.lower_bound} and {self.upper_bound}"))
        for line in self.proof.get("lines", []):
            lines.append("  " + line)
        if self.realisation is not None:
            lines.append("  realisation (layerwise equivariant, same function):")
            for i, l in enumerate(self.realisation.layers, 1):
                lines.append(f"    W{i} = {[list(map(str, r)) for r in mat_rows(l.weight)]}, b{i} = {list(map(str, l.bias))}")
        return "\n".join(lines)


def equivariant_by_canonical_form(layers, group) -> tuple[bool, int | None]:
    """Exact end-to-end equivariance of a one-hidden-layer ReLU net: compare the canonical forms
    of ``x -> f(rho_in x)`` and ``x -> rho_out f(x)`` for every generator (equal functions iff
    equal canonical forms).  Returns (holds, index of a failing generator)."""
    (W, b, _), (V, c, _) = layers
    for gi, (A, B) in enumerate(group.generators):
        WA = [_vec_mat(row, A) for row in W]
        Bm = B
        BV = [[sum((Bm[i, k] * V[k][j] for k in range(len(V)) if Bm[i, k]), _ZERO) for j in range(len(W))]
              for i in range(len(V))]
        Bc = _mat_vec(Bm, c)
        if canonical_form([(WA, b, True), (V, c, False)]) != canonical_form([(W, b, True), (BV, Bc, False)]):
            return False, gi
    return True, None


class _Problem:
    """The linear data of step 3 for one canonical form and group."""

    def __init__(self, cf: CanonicalForm, gd: GroupData):
        self.cf, self.gd = cf, gd
        n, m = cf.n, cf.m
        self.n, self.m = n, m
        self.k = len(cf.kinks)
        keys = {(k.normal, k.offset): i for i, k in enumerate(cf.kinks)}
        self.keys = keys
        # action of each generator on kinks: (j, s, factor)
        self.act = []
        for A, B, Ainv in gd.gens:
            per = []
            for kink in cf.kinks:
                a2 = _vec_mat(list(kink.normal), Ainv)
                key, beta, lam = hyperplane_key(a2, kink.offset)
                j = keys.get((key, beta))
                if j is None:
                    raise InputError("the kink set is not G-invariant: f is not equivariant")
                per.append((j, 1 if lam > 0 else -1, abs(lam)))
            self.act.append(per)
        # orbits of G on oriented kinks (i, eps)
        seen, orbits = {}, []
        for i in range(self.k):
            for e in (1, -1):
                if (i, e) in seen:
                    continue
                orb, stack = [(i, e)], [(i, e)]
                seen[(i, e)] = len(orbits)
                while stack:
                    ii, ee = stack.pop()
                    for per in self.act:
                        j, s, _ = per[ii]
                        t = (j, ee * s)
                        if t not in seen:
                            seen[t] = len(orbits)
                            orb.append(t)
                            stack.append(t)
                orbits.append(orb)
        self.orbits = orbits
        self.orbit_of = seen
        pairs, done = [], set()
        for oi, orb in enumerate(orbits):
            if oi in done:
                continue
            i, e = orb[0]
            neg = seen[(i, -e)]
            done |= {oi, neg}
            pairs.append((oi, neg))
        self.pairs = pairs
        self.nq = self.k * m
        # base equations: equivariance of u (E1)
        self.eq_rows, self.eq_rhs = [], []
        for (A, B, Ainv), per in zip(gd.gens, self.act):
            for i, kink in enumerate(cf.kinks):
                j, s, fac = per[i]
                for e in (1, -1):
                    e2 = e * s
                    # u_(j,e2) - fac B u_(i,e) = 0 ; u_(i,+) = J - q, u_(i,-) = q
                    al1, ga1 = (1, -1) if e2 == 1 else (0, 1)
                    al0, ga0 = (1, -1) if e == 1 else (0, 1)
                    Jj, Ji = cf.kinks[j].jump, kink.jump
                    BJi = _mat_vec(B, list(Ji))
                    for r in range(m):
                        row = [_ZERO] * self.nq
                        row[j * m + r] += ga1
                        for c in range(m):
                            if B[r, c]:
                                row[i * m + c] -= fac * ga0 * B[r, c]
                        rhs = fac * al0 * BJi[r] - al1 * Jj[r]
                        if any(row) or rhs:
                            self.eq_rows.append(row)
                            self.eq_rhs.append(rhs)
        # residual linear part M + sum_i q_i a_i^T  (rows of the E3 block, before extras)
        self.res_rows = []
        self.res_rhs = []
        for r in range(m):
            for c in range(n):
                row = [_ZERO] * self.nq
                for i, kink in enumerate(cf.kinks):
                    if kink.normal[c]:
                        row[i * m + r] = kink.normal[c]
                self.res_rows.append(row)
                self.res_rhs.append(-cf.linear[r][c])

    def support_rows(self, support: set) -> tuple[list, list]:
        rows, rhs = [], []
        m = self.m
        for oi, orb in enumerate(self.orbits):
            if oi in support:
                continue
            for i, e in orb:
                J = self.cf.kinks[i].jump
                for r in range(m):
                    row = [_ZERO] * self.nq
                    row[i * m + r] = _ONE if e == -1 else -_ONE
                    rows.append(row)
                    rhs.append(_ZERO if e == -1 else -J[r])
        return rows, rhs

    def choices(self):
        """Support choices (sets of orbit indices) with their nominal cost, cheapest first."""
        opts = []
        for o1, o2 in self.pairs:
            if o1 == o2:
                opts.append([(frozenset({o1}), len(self.orbits[o1]))])
            else:
                opts.append([(frozenset({o1}), len(self.orbits[o1])), (frozenset({o2}), len(self.orbits[o2])),
                             (frozenset({o1, o2}), len(self.orbits[o1]) + len(self.orbits[o2]))])
        out = []
        for combo in itertools.product(*opts):
            s = frozenset().union(*[c[0] for c in combo]) if combo else frozenset()
            out.append((sum(c[1] for c in combo), s))
        out.sort(key=lambda t: (t[0], sorted(t[1])))
        return out

    # -- extras --------------------------------------------------------------------------------
    def extra_block(self, v) -> dict:
        """Data of one orbit of extra pairs through v = (a, beta): constraints on t and the
        coefficients of its contribution to the residual linear part."""
        gd, n, m = self.gd, self.n, self.m
        K, K0 = _stabiliser(gd, v)
        a = list(v[:n])
        # contribution entry (r, c) = (1/|K|) sum_g sum_s B_g[r, s] t_s (a Ainv_g)[c]
        coef = [[[_ZERO] * m for _ in range(n)] for _ in range(m)]
        for A, B, Ainv in gd.elements:
            aa = _vec_mat(a, Ainv)
            for r in range(m):
                for s in range(m):
                    if B[r, s]:
                        for c in range(n):
                            if aa[c]:
                                coef[r][c][s] += B[r, s] * aa[c]
        inv = fmpq(1, len(K))
        coef = [[[x * inv for x in coef[r][c]] for c in range(n)] for r in range(m)]
        cons = []
        for kidx in K:
            B = gd.elements[kidx][1]
            sgn = 1 if kidx in K0 else -1
            for r in range(m):
                cons.append([B[r, s] - (sgn if r == s else 0) for s in range(m)])
        return {"v": list(v), "K": K, "K0": K0, "coef": coef, "cons": cons, "cost": 2 * gd.order // len(K)}

    def solve(self, support: set, extras: list):
        """Solve E1 + E2 + E3 (+ extras); returns (q, [t per extra]) or None."""
        m, n = self.m, self.n
        ne = len(extras)
        nv = self.nq + ne * m
        srows, srhs = self.support_rows(support)
        rows = [r + [_ZERO] * (ne * m) for r in self.eq_rows + srows]
        rhs = list(self.eq_rhs) + srhs
        for idx, r in enumerate(self.res_rows):
            row = r + [_ZERO] * (ne * m)
            rr, cc = divmod(idx, n)
            for e, blk in enumerate(extras):
                for s in range(m):
                    row[self.nq + e * m + s] = -blk["coef"][rr][cc][s]
            rows.append(row)
            rhs.append(self.res_rhs[idx])
        for e, blk in enumerate(extras):
            for crow in blk["cons"]:
                row = [_ZERO] * nv
                for s in range(m):
                    row[self.nq + e * m + s] = crow[s]
                rows.append(row)
                rhs.append(_ZERO)
        x = _solve(rows, rhs, nv)
        if x is None:
            return None
        q = [x[i * m:(i + 1) * m] for i in range(self.k)]
        ts = [x[self.nq + e * m:self.nq + (e + 1) * m] for e in range(ne)]
        return q, ts

    def valid_hyperplane(self, v) -> bool:
        a = v[:self.n]
        if not any(a):
            return False
        key, beta, _ = hyperplane_key(a, v[self.n])
        return (key, beta) not in self.keys

    def residual_rows(self, q) -> list:
        """Rows of M + sum_i q_i a_i^T (hints for the normals of extra orbits)."""
        rows = [list(r) for r in self.cf.linear]
        for i, kink in enumerate(self.cf.kinks):
            for r in range(self.m):
                if q[i * self.m + r]:
                    for c in range(self.n):
                        rows[r][c] += q[i * self.m + r] * kink.normal[c]
        return rows

    def projected_points(self, t: HyperplaneType, vectors: list) -> list:
        """Orthogonal projections of (v, 0) and (v, 1) onto E(K, K0), for hint vectors v."""
        B = fmpq_mat(self.n + 1, len(t.basis), [t.basis[j][i] for i in range(self.n + 1) for j in range(len(t.basis))])
        try:
            P = B * (B.transpose() * B).inv() * B.transpose()
        except ZeroDivisionError:
            return []
        out = []
        for v in vectors:
            for beta in (_ZERO, _ONE):
                w = _mat_vec(P, list(v) + [beta])
                if any(w[:self.n]) and self.valid_hyperplane(w):
                    out.append(w)
        return out

    def type_points(self, t: HyperplaneType, rng: random.Random, tries: int) -> list:
        """Valid points of E(K, K0): the line itself when dim E = 1, else a few integer combinations."""
        pts = []
        if len(t.basis) == 1:
            v = t.basis[0]
            return [v] if self.valid_hyperplane(v) else []
        cands = [list(b) for b in t.basis]
        for _ in range(tries):
            coeffs = [rng.randint(-3, 3) for _ in t.basis]
            cands.append([sum((c * b[i] for c, b in zip(coeffs, t.basis)), _ZERO) for i in range(self.n + 1)])
        seen = set()
        for v in cands:
            if not self.valid_hyperplane(v):
                continue
            key = hyperplane_key(v[:self.n], v[self.n])[:2]
            if key in seen:
                continue
            seen.add(key)
            pts.append(v)
        return pts


def _build(prob: _Problem, q, extras, ts, group, pad_to: int | None):
    """Network of a minimal realisation (+ dead padding), its actions; checked."""
    from ..activations import relu as relu_act
    from ..models import DenseLayer, Model
    from ..numbers import matrix

    cf, gd, n, m = prob.cf, prob.gd, prob.n, prob.m
    rows, biases, cols = [], [], []
    for i, kink in enumerate(cf.kinks):
        up = [J - qq for J, qq in zip(kink.jump, q[i])]
        for e, u in ((1, up), (-1, q[i])):
            if any(u):
                rows.append([e * x for x in kink.normal])
                biases.append(e * kink.offset)
                cols.append(list(u))
    for blk, t in zip(extras, ts):
        if not any(t):
            continue
        v = blk["v"]
        seen = set()
        for A, B, Ainv in gd.elements:
            w = _vec_mat(v[:n], Ainv)
            u = _mat_vec(B, t)
            for sgn in (1, -1):
                key = (tuple(sgn * x for x in w), sgn * v[n])
                if key in seen:
                    continue
                seen.add(key)
                rows.append([sgn * x for x in w])
                biases.append(sgn * v[n])
                cols.append([sgn * x for x in u])
    width = len(rows)
    total = max(width, pad_to or 0, 1)
    while len(rows) < total:
        rows.append([_ZERO] * n)
        biases.append(_ZERO)
        cols.append([_ZERO] * m)
    V = [[cols[j][r] for j in range(total)] for r in range(m)]
    cf0 = canonical_form([(rows, biases, True), (V, [_ZERO] * m, False)])
    c = [a - b for a, b in zip(cf.constant, cf0.constant)]
    layers = [(rows, biases, True), (V, c, False)]
    if canonical_form(layers) != cf:
        raise RuntimeError("internal error: the realisation does not compute f")
    model = Model(n, [DenseLayer(matrix(rows), biases, relu_act()), DenseLayer(matrix(V), c, None)],
                  group, name=f"equivariant realisation (width {width})")
    actions = _actions(model, rows, biases, cols, group)
    return model, actions, width


def _actions(model, rows, biases, cols, group):
    """Explicit positive monomial rho(g) for each generator, checked by check_layerwise."""
    from ..layerwise import check_layerwise
    from ..numbers import monomial_matrix

    N = len(rows)
    n = len(rows[0])
    per_gen = []
    for A, B in group.generators:
        Ainv = A.inv()
        targets, vals = [None] * N, [None] * N
        used = set()
        for j in range(N):
            if not any(rows[j]) and not any(cols[j]):
                continue
            w = _vec_mat(rows[j], Ainv)
            Bu = _mat_vec(B, cols[j])
            for k in range(N):
                if k in used:
                    continue
                # w_k = d w rho^-1, b_k = d b_j, u_k = B u_j / d, d > 0
                piv = next((i for i in range(n) if w[i]), None)
                if piv is None or rows[k][piv] == 0:
                    continue
                d = rows[k][piv] / w[piv]
                if d <= 0 or [d * x for x in w] != list(rows[k]) or d * biases[j] != biases[k]:
                    continue
                if [x / d for x in Bu] != list(cols[k]):
                    continue
                targets[j], vals[j] = k, d
                used.add(k)
                break
            if targets[j] is None:
                raise RuntimeError("internal error: no partner neuron for the action")
        free = [k for k in range(N) if k not in used]
        for j in range(N):
            if targets[j] is None:
                k = free.pop(0)
                targets[j], vals[j] = k, _ONE
        # Q[k, j] = d  (row k = pi(j))
        cols_of = [0] * N
        vals_of = [_ONE] * N
        for j in range(N):
            cols_of[targets[j]] = j
            vals_of[targets[j]] = vals[j]
        per_gen.append(monomial_matrix(cols_of, vals_of))
    actions = [per_gen]
    checks, hom, _, msg = check_layerwise(model, group, actions)
    if not (all(c.holds for c in checks) and hom):
        raise RuntimeError(f"internal error: constructed actions fail the layerwise check ({msg})")
    return per_gen


def _classify_types(prob: "_Problem", rng: random.Random, tries: int) -> tuple[list, list]:
    """Split the valid hyperplane types into *exact* ones (all hyperplanes of the type have the
    same normal direction, so one representative decides what a single orbit of the type can
    contribute to the linear part) and *open* ones (a family of directions: only constructive)."""
    exact, open_ = [], []
    n = prob.n
    for t in prob.gd.types:
        arank = fmpq_mat(len(t.basis), n, [x for v in t.basis for x in v[:n]]).rank()
        pts = prob.type_points(t, rng, tries)
        typed = [v for v in pts if _stabiliser(prob.gd, v) == (t.K, t.K0)]
        if arank == 1:
            if typed:
                exact.append((t, typed[0]))
            elif pts:
                open_.append((t, pts))  # no representative with exactly this stabiliser found
        elif pts:
            open_.append((t, typed or pts))
    return exact, open_


def _rank_floor(prob: "_Problem") -> int:
    """rank of M restricted to the common kernel of the kink normals (a lower bound on the rank
    of M + sum_i q_i a_i^T for every q)."""
    n, m = prob.n, prob.m
    normals = [list(k.normal) for k in prob.cf.kinks]
    if normals:
        ker = nullspace(fmpq_mat(len(normals), n, [x for r in normals for x in r]))
    else:
        ker = [[_ONE if i == j else _ZERO for j in range(n)] for i in range(n)]
    if not ker:
        return 0
    M = fmpq_mat(m, n, [x for r in prob.cf.linear for x in r])
    Kmat = fmpq_mat(n, len(ker), [ker[j][i] for i in range(n) for j in range(len(ker))])
    return (M * Kmat).rank()


def _construct(prob, support, open_, exact_blocks, rng, cost_s, upper):
    """Upper bounds by construction: k random orbits of one open type (cheapest first), then the
    same with every exact orbit added.  Returns (cost, best) or None."""
    limit = prob.n * prob.m + 1
    result = None
    for with_exact in (False, True):
        base = [b for _, b in exact_blocks] if with_exact else []
        base_cost = sum(b["cost"] for b in base)
        for t, pts in open_:
            for k in range(1, limit + 1):
                c = cost_s + base_cost + k * t.cost
                if (upper is not None and c >= upper) or (result is not None and c >= result[0]):
                    break
                combos = list(itertools.islice(itertools.combinations(range(len(pts)), k), 24))
                combos += [tuple(rng.randrange(len(pts)) for _ in range(k)) for _ in range(4)]
                hit = None
                for combo in combos:
                    blocks = base + [prob.extra_block(pts[i]) for i in combo]
                    s2 = prob.solve(support, blocks)
                    if s2 is not None:
                        hit = (cost_s + sum(b["cost"] for b in blocks), (support, s2[0], blocks, s2[1]))
                        break
                if hit is not None:
                    result = hit
                    break
        if with_exact is False and not open_ and exact_blocks:
            continue
    if result is None and not open_ and exact_blocks:
        blocks = [b for _, b in exact_blocks]
        s2 = prob.solve(support, blocks)
        if s2 is not None:
            result = (cost_s + sum(b["cost"] for b in blocks), (support, s2[0], blocks, s2[1]))
    return result


def _exact_subsets(exact_blocks: list, open_: list):
    """``(subsets, open_min)`` for :func:`minimal_width`: the sets of at most 4 exact types as (cost, indices),
    cheapest first, and the cheapest open type's cost (bounded by the 5 cheapest exact types when there
    are more than 4 of them, which are not enumerated)."""
    subsets = []
    for r in range(1, min(len(exact_blocks), 4) + 1):
        for comb in itertools.combinations(range(len(exact_blocks)), r):
            subsets.append((sum(exact_blocks[i][0] for i in comb), comb))
    subsets.sort()
    open_min = min((t.cost for t, _ in open_), default=None)
    if len(exact_blocks) > 4 and subsets:
        # subsets of more than 4 exact types were not enumerated: bound them by their cheapest cost
        cheap = sum(sorted(c for c, _ in exact_blocks)[:5])
        open_min = cheap if open_min is None else min(open_min, cheap)
    return subsets, open_min


def _reachable_costs(costs) -> list:
    """The sums of at most 12 orbit costs up to 256, sorted (0 included): the widths extras can add."""
    sums = {0}
    for _ in range(12):
        sums |= {a + c for a in sums for c in costs if a + c <= 256}
    return sorted(sums)


def _cheapest_exact_set(prob, support, subsets: list, exact_blocks: list, open_min, upper, cost_s: int):
    """``(cost, upper, best)`` for the cheapest set of exact types (at most one orbit each) whose extras
    make the linear system on ``support`` solvable, cheaper than ``open_min`` and below ``upper``; None."""
    for c, comb in subsets:
        if open_min is not None and c >= open_min:
            break
        if upper is not None and cost_s + c >= upper:
            break
        blocks = [exact_blocks[i][1] for i in comb]
        s2 = prob.solve(support, blocks)
        if s2 is not None:
            return c, cost_s + c, (support, s2[0], blocks, s2[1])
    return None


def minimal_width(cf: CanonicalForm, group, *, seed: int = 0, tries: int = 6) -> dict:
    """Bounds on the smallest width of a layerwise-equivariant realisation of ``cf`` (steps 3-4).

    Returns a dict with ``lower``, ``upper``, ``best`` (a solution to rebuild), ``lines`` (proof
    summary) and ``choices`` (one entry per support choice examined).

    For every support choice (cheapest first): if the residual linear part can vanish, the
    choice costs exactly its support; otherwise the extras needed cost at least the cheapest
    of (a) an orbit of an *open* type (not excluded), (b) a set of *exact* types (at most one
    orbit each: two orbits of one exact type contribute no more than one) whose linear system
    is solvable -- tested exactly, cheapest set first.
    """
    gd = group_data(group)
    prob = _Problem(cf, gd)
    rng = random.Random(seed)
    exact, open0 = _classify_types(prob, rng, tries)
    open_ = open0
    lines = [f"f has {prob.k} kink hyperplane(s); G (order {gd.order}) has {len(prob.orbits)} orbit(s) on "
             f"oriented kinks ({', '.join(str(len(o)) for o in prob.orbits) or 'none'})"]
    costs = sorted({t.cost for t, _ in exact} | {t.cost for t, _ in open_})
    lines.append("orbits of extra pairs relu(l) - relu(-l) = l on hyperplanes outside the kinks cost "
                 + (", ".join(map(str, costs)) + " neurons" if costs else "nothing: none exist"))
    exact_blocks = [(t.cost, prob.extra_block(v)) for t, v in exact]
    subsets, open_min = _exact_subsets(exact_blocks, open_)
    rank_floor = _rank_floor(prob)
    sums = _reachable_costs(costs)
    lines.append(f"the residual linear part has rank >= {rank_floor} on the common kernel of the kink normals, "
                 f"so extras need >= {2 * rank_floor} neurons when it cannot vanish")
    best = upper = lower = None
    table = []
    for cost_s, support in prob.choices():
        if upper is not None and cost_s >= upper:
            lower = cost_s if lower is None else min(lower, cost_s)
            break
        base = _solve(prob.eq_rows + prob.support_rows(support)[0], prob.eq_rhs + prob.support_rows(support)[1], prob.nq)
        if base is None:
            table.append({"support_cost": cost_s, "feasible": False})
            continue
        sol = prob.solve(support, [])
        if sol is not None:
            table.append({"support_cost": cost_s, "extras": 0, "cost": cost_s})
            if upper is None or cost_s < upper:
                upper, best = cost_s, (support, sol[0], [], [])
            lower = cost_s if lower is None else min(lower, cost_s)
            continue
        # (b) exact sets, cheapest first
        exact_found = None
        hit = _cheapest_exact_set(prob, support, subsets, exact_blocks, open_min, upper, cost_s)
        if hit is not None:
            exact_found, upper, best = hit
        # (a) open types: constructive (hints: rows of the residual for a particular q)
        hints = prob.residual_rows(base)
        open_ = [(t, prob.projected_points(t, hints) + pts0) for t, pts0 in open0]
        open_found = None
        for t, pts in open_:
            if upper is not None and cost_s + t.cost >= upper:
                continue
            for v in pts:
                blk = prob.extra_block(v)
                s2 = prob.solve(support, [blk])
                if s2 is not None:
                    open_found = blk["cost"]
                    upper, best = cost_s + blk["cost"], (support, s2[0], [blk], s2[1])
                    break
        cands = [x for x in (open_min, exact_found) if x is not None]
        if cands:
            # rank bound: an orbit of cost c is c/2 rank-one terms, and the residual
            # M + sum q_i a_i^T agrees with M on the common kernel of the kink normals
            need = max(min(cands), 2 * rank_floor)
            lb = cost_s + min((c for c in sums if c >= need), default=need)
        elif upper is not None:
            lb = upper
        else:
            lb = None
        if lb is not None:
            lower = lb if lower is None else min(lower, lb)
        if lb is None or upper is None or upper > lb:
            # constructive: k orbits of the cheapest open types (random hyperplanes), then with
            # the exact orbits added, until the linear system is solvable
            found2 = _construct(prob, support, open_, exact_blocks, rng, cost_s, upper)
            if found2 is not None:
                upper, best = found2
        table.append({"support_cost": cost_s, "extras_lower_bound": None if lb is None else lb - cost_s,
                      "cost": None if best is None or best[0] != support else upper})
    if lower is None:
        lower = upper
    if upper is not None and lower is not None and lower > upper:
        raise RuntimeError(f"internal error: lower bound {lower} exceeds a checked realisation of width {upper}")
    return {"lower": lower, "upper": upper, "best": best, "problem": prob, "lines": lines, "choices": table,
            "extra_costs": costs}


def not_equivariant(layers, group, gi: int, cf: CanonicalForm) -> FibreDecision:
    """The ``not-equivariant`` decision for generator ``gi``, with an exact witness x (symeq.relu.regions).

    ``layers`` are ReLU or leaky ReLU layers; ``cf`` is their canonical form. Shared with symeq.relu.leaky.
    """
    from .regions import decide_equivariance

    A, B = group.generators[gi]
    dec = decide_equivariance(layers, mat_rows(A), mat_rows(B))
    return FibreDecision("not-equivariant", len(layers[0][0]), canonical=cf, witness=dec.witness,
                         proof={"lines": [f"f is not equivariant under generator {group.names[gi]}: "
                                          f"f(rho_in x) != rho_out f(x) at x = {list(map(str, dec.witness or []))}"]})


def decide_fibre(model, group=None, *, check_theta: bool = True, seed: int = 0) -> FibreDecision:
    """Decide whether some theta' with the same function and width as ``model`` is layerwise
    equivariant (positive monomial actions), and find the smallest such width.

    Parameters
    ----------
    model : Model (one hidden ReLU layer) or plain layers ``[(W, b, True), (V, c, False)]``
    group : FiniteGroup (defaults to ``model.group``)
    check_theta : also run :func:`symeq.layerwise.derive_latent_actions` at theta itself

    Returns
    -------
    FibreDecision
    """
    from ..errors import InputError
    from ..layerwise import derive_latent_actions
    from ..models import Model

    if group is None:
        group = getattr(model, "group", None)
    if group is None:
        raise InputError("decide_fibre needs a group")
    try:
        layers = plain_layers(model)
    except ValueError as e:
        raise InputError(str(e)) from None
    if len(layers) != 2:
        d = FibreDecision("undetermined", 0)
        d.proof = {"lines": ["the fibre-wide decision is implemented for one hidden ReLU layer only; "
                             "deeper networks: see symeq.relu.probe for numeric evidence"]}
        return d
    N = len(layers[0][0])
    cf = canonical_form(layers)
    holds, gi = equivariant_by_canonical_form(layers, group)
    if not holds:
        return not_equivariant(layers, group, gi, cf)
    at_theta = None
    theta_actions = None
    if check_theta:
        if isinstance(model, Model):
            mdl = model.with_group(group)
        else:
            from ..activations import relu as relu_act
            from ..models import DenseLayer
            from ..numbers import matrix

            mdl = Model(cf.n, [DenseLayer(matrix(layers[0][0]), layers[0][1], relu_act()),
                               DenseLayer(matrix(layers[1][0]), layers[1][1], None)], group)
        der = derive_latent_actions(mdl, group)
        at_theta = bool(der.found)
        if der.found:
            theta_actions = der.actions[0]
    mw = minimal_width(cf, group, seed=seed)
    lo, up, best, prob = mw["lower"], mw["upper"], mw["best"], mw["problem"]
    lines = list(mw["lines"])
    lines.append(f"support choices examined: {len(mw['choices'])}; bounds on the smallest equivariant width: "
                 f"{lo} <= w* <= {up}")
    realisation = real_actions = None
    if best is not None:
        support, q, extras, ts = best
        realisation, real_actions, width = _build(prob, q, extras, ts, group, None)
        if width < up:  # some orbit came out zero: a smaller realisation
            up = width
    exact = lo is not None and up is not None and lo == up
    if at_theta:
        verdict = "layerwise-parameter"
    elif up is not None and up <= N:
        verdict = "layerwise-parameter"
    elif lo is not None and lo > N:
        verdict = "no-layerwise-parameter"
    else:
        verdict = "undetermined"
    d = FibreDecision(verdict, N, up if exact else None, lo, up, realisation, real_actions,
                      at_theta=at_theta, canonical=cf)
    if verdict == "layerwise-parameter":
        if at_theta:
            d.parameter, d.actions = (model if isinstance(model, Model) else mdl), theta_actions
            lines.append("theta itself is layerwise equivariant (actions derived at theta)")
        else:
            support, q, extras, ts = best
            d.parameter, d.actions, _ = _build(prob, q, extras, ts, group, N)
            d.parameter.name = f"layerwise-equivariant reparametrisation (width {N})"
            lines.append(f"a layerwise-equivariant theta' of width {N} with the same function was built "
                         "(minimal realisation padded with dead neurons) and checked")
    elif verdict == "no-layerwise-parameter":
        lines.append(f"every layerwise-equivariant realisation needs at least {lo} > {N} neurons, and a "
                     "layerwise-equivariant parameter of width N exists iff N >= w* (merge clones, drop "
                     "zero orbits; pad with dead neurons): none at width " + str(N))
    d.proof = {"lines": lines, "choices": mw["choices"], "kinks": prob.k, "orbits": [len(o) for o in prob.orbits],
               "group_order": prob.gd.order,
               "extra_orbit_costs": mw["extra_costs"]}
    return d
