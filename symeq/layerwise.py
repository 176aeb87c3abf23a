"""Derivation of the layerwise actions rho_i : G -> K_i from an equivariant network.

For each generator g, the parameter theta^g (g acting on the first layer by W_1 -> W_1 rho_in(g)^-1
and on the last by (W_L, b_L) -> rho_out(g)(W_L, b_L), the *adjunction* of the paper) has the
same function as theta when f is equivariant.  If theta is identifiable, there is a unique
k(g) in prod K_i with theta^g = k(g) . theta, and rho_i(g) := k_i(g)^-1 makes every layer
equivariant (Theorem 4.1 of Shahverdi, Marchetti, Bokman, Kohn 2026).

How k(g) is found, layer by layer: with rho_{i-1}(g) known (rho_0 = rho_in), each row j of
[W_i rho_{i-1}(g) | b_i] must equal, up to an admissible change of the pre-activation
(alpha z + s(1 - alpha): signs for odd/even sigma, any nonzero alpha for monomials, positive
alpha for ReLU), a row k of [W_i | b_i]; then rho_i(g) has the factor q(alpha) at (j, k).
The walk itself is written once, in :mod:`symeq.walk`, and shared with the float derivation
(:func:`symeq.numeric.layerwise.derive_latent_actions_numeric`); this module supplies the exact
row matchers.  Rows are matched by hashing their canonical representatives (one per orbit of
admissible scalings, computed in theta's column order so that both sides are comparable):
:class:`_ExactRows` for the chain walk (:class:`symeq.walk.ChainWalk`).  Where rows of theta tie
(clones up to symmetry), tied neurons can only be told apart by their outgoing weights: the rows
of the next layer are compared through keys invariant under permutations inside the tie
classes, and the bijections are then read off the outgoing columns from the last layer down
(:class:`symeq.walk.TieWalk` over :class:`_ExactMatcher`, polynomial in the widths); only rows
that tie as multisets but not as vectors are searched, within a node budget.  The search is
exhaustive unless capped, so "no partner" is a proof that no k(g) in prod K_i exists at theta,
and a capped search is no proof.  Every derived action is then *checked*, exactly: each layer is
equivariant, and g -> rho_i(g) respects every relation of G (enumerated along the Cayley graph,
:func:`symeq.walk.cayley_homomorphism`).

Examples
--------
>>> from symeq.groups import mirror
>>> from symeq.activations import tanh_series
>>> from symeq.models import random_equivariant_model, scramble
>>> m = random_equivariant_model(mirror(1, 2), ["regular*2"], tanh_series(3), rng=3)
>>> s, _ = scramble(m, rng=4)
>>> d = derive_latent_actions(s)
>>> d.found, d.homomorphism, all(c.holds for c in d.layer_checks)
(True, True, True)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from flint import fmpq, fmpq_mat

from .budget import Deadline
from .errors import GroupTooLarge, InputError
from .groups import FiniteGroup
from .layers.registry import all_support, supports
from .layers.dense import _partner_classes, canonical_rows  # canonical_rows: re-exported (submodels, tests)
from .models import Model
from .numbers import identity, mat_key, mat_rows, monomial_matrix
from .walk import ChainWalk, NoPartner, TieWalk, cayley_homomorphism

__all__ = [
    "LayerCheck",
    "Derivation",
    "derive_latent_actions",
    "check_layer",
    "check_layerwise",
    "adjoint_parameters",
    "canonical_rows",
]


@dataclass
class LayerCheck:
    """The exact check f_i(rho_{i-1}(g) x) = rho_i(g) f_i(x) for one layer and generator."""

    layer: int
    generator: str
    holds: bool
    detail: str

    def to_json(self) -> dict:
        return {"layer": self.layer, "generator": self.generator, "holds": self.holds, "detail": self.detail}


@dataclass
class Derivation:
    """Result of :func:`derive_latent_actions`.

    Attributes
    ----------
    found : an action through K_i on every hidden layer was found and passed every check
    actions : ``actions[i][g]`` is rho_{i+1}(g), the post-activation action on hidden layer i+1
    layer_checks : every exact layer check made
    homomorphism : whether g -> (rho_i(g))_i respects the group's relations (None: not reached)
    group_order : |G|
    candidates : number of k(g) in prod K_i with theta^g = k(g) theta, per generator (capped)
    exhaustive : the search over K was complete (so "not found" proves no action at theta)
    failure : why not found
    """

    found: bool
    actions: list | None = None
    layer_checks: list = field(default_factory=list)
    homomorphism: bool | None = None
    group_order: int | None = None
    candidates: dict = field(default_factory=dict)
    exhaustive: bool = True
    failure: str | None = None
    method: str = "hash"
    offsets: list | None = None  # offsets[i][g]: constant parts of affine actions (sigmoid sign flips)
    nodes: dict = field(default_factory=dict)  # search nodes visited per generator (tied neurons)

    @property
    def unique(self) -> bool:
        return bool(self.candidates) and all(v == 1 for v in self.candidates.values())


# -- exact layer check --------------------------------------------------------------------

def check_layer(layer, P: fmpq_mat, Q: fmpq_mat, c_in=None, c_out=None) -> tuple[bool, str]:
    """Decide f(P x + c_in) = Q f(x) + c_out for all real x for one layer f, exactly: the layer's
    own check (``layer.check_action``, :class:`symeq.layers.base.Layer`; for dense layers see
    :meth:`symeq.layers.dense.DenseLayer.check_action`)."""
    return layer.check_action(P, Q, c_in, c_out)


def affine_matrix(M: fmpq_mat, c) -> fmpq_mat:
    """The augmented matrix [[M, c], [0, 1]] of the affine map y -> M y + c (composition = product)."""
    n = M.nrows()
    A = fmpq_mat(n + 1, n + 1)
    for i in range(n):
        for j in range(n):
            if M[i, j] != 0:
                A[i, j] = M[i, j]
        A[i, n] = c[i]
    A[n, n] = 1
    return A


def check_layerwise(model: Model, group: FiniteGroup, actions, deadline: Deadline | None = None, offsets=None):
    """Run every layer check and the homomorphism check for given latent actions.

    ``offsets[i][g]`` (optional) are the constant parts of affine latent actions
    y -> rho_i(g) y + c_i(g).  Returns (layer_checks, homomorphism_ok, group_order, message).
    """
    checks = []
    model = model.chain()
    L = model.depth
    for gi, (A, B) in enumerate(group.generators):
        chain = [A] + [actions[i][gi] for i in range(L - 1)] + [B]
        offs = [None] + [offsets[i][gi] if offsets else None for i in range(L - 1)] + [None]
        for i, layer in enumerate(model.layers):
            if deadline is not None:
                deadline.check("checking layer equivariance")
            ok, detail = check_layer(layer, chain[i], chain[i + 1], offs[i], offs[i + 1])
            checks.append(LayerCheck(i + 1, group.names[gi], ok, detail))
    conv = model.sparse_actions
    if conv and offsets:
        return checks, False, None, ("affine latent actions (offsets) on convolutions: the homomorphism check is not "
                                     "implemented for them")
    hidden = (lambda i, gi: affine_matrix(actions[i][gi], offsets[i][gi])) if offsets else (lambda i, gi: actions[i][gi])
    inputs = [A for A, _ in group.generators]
    outputs = [B for _, B in group.generators]
    if conv:  # channel action (x) pixel permutation: compose and compare in the sparse form (linear cost)
        inputs = [_sparse(model.layers[0], A, "in") for A in inputs]
        outputs = [_sparse(model.layers[-1], B, "out") for B in outputs]
    latents = [[hidden(i, gi) for i in range(L - 1)] + [outputs[gi]] for gi in range(len(group.generators))]
    r = cayley_homomorphism(inputs, latents, compose=_compose,
                            identity=_identity_like, key=_action_key,
                            deviation=lambda x, y: 0 if x == y else 1, max_order=group.max_order,
                            names=group.names, stop_at_first=True, deadline=deadline,
                            what=[f"the action on hidden layer {i + 1}" for i in range(L - 1)] + ["the output action"])
    if r.too_large:
        raise GroupTooLarge(f"the group has more than {group.max_order} elements; raise max_order or use fewer generators")
    if r.conflict is not None:
        return checks, False, None, r.conflict
    return checks, True, r.order, f"g -> rho_i(g) respects every relation of G (order {r.order})"


def _sparse(layer, M, side: str):
    """M as a :class:`symeq.layers.conv.ConvAction` on a conv layer's input or output, when it is one."""
    if not supports(layer, "sparse-actions"):
        return M
    a = layer.sparse_action(M, side)
    return M if a is None else a


def _compose(a, b):
    """a * b; two monomial matrices that remember their parts (numbers.MonomialMatrix) in linear time."""
    pa, pb = getattr(a, "parts", None), getattr(b, "parts", None)
    if pa is None or pb is None:
        return a * b
    (ca, va), (cb, vb) = pa, pb
    return monomial_matrix([cb[c] for c in ca], [x * vb[c] for x, c in zip(va, ca)])


def _identity_like(a):
    if getattr(a, "parts", None) is not None:
        return monomial_matrix(range(a.nrows()), [1] * a.nrows())
    return a.identity() if hasattr(a, "identity") and not isinstance(a, fmpq_mat) else identity(a.nrows())


def _action_key(a):
    return mat_key(a) if isinstance(a, fmpq_mat) else a.key()


# -- matching neurons ----------------------------------------------------------------------

def adjoint_parameters(model: Model, A: fmpq_mat, B: fmpq_mat) -> list[tuple[list, list]]:
    """theta^g as per-layer (rows, bias): W_1 -> W_1 A^-1, (W_L, b_L) -> B (W_L, b_L).

    f(x; theta^g) = B f(A^-1 x; theta), so theta^g lies in the fibre of theta exactly when f is
    equivariant under g (the adjunction of the paper).
    """
    layers = [(mat_rows(l.weight), list(l.bias)) for l in model.layers]
    Wfirst = model.layers[0].weight * A.inv()
    layers[0] = (mat_rows(Wfirst), layers[0][1])
    WL = (B * Wfirst) if len(model.layers) == 1 else (B * model.layers[-1].weight)
    bL = (B * fmpq_mat(len(model.layers[-1].bias), 1, model.layers[-1].bias)).entries()
    layers[-1] = (mat_rows(WL), bL)
    return layers


def absorbs_offsets(model) -> bool:
    """Whether latent actions may carry offsets: the model has biases (not every bias is zero).

    The absorbed-constant rule (docs/theory.md): an offset o on a hidden layer's output is absorbed
    by the next layer's bias; a bias-free model has no bias to absorb it, so its latent groups are
    the offset-free ones -- the same convention as the fibre (symeq.fibre.ideal, ``bias="auto"``).
    """
    return any(b != 0 for layer in model.layers for b in (getattr(layer, "bias", None) or []))


class _ExactRows:
    """The exact row matcher of the chain walk (:class:`symeq.walk.ChainWalk`): canonical rows.

    Each step is the layer's own matching of actions
    (:meth:`symeq.layers.base.Layer.match_action`, with theta's side computed once by
    ``match_reference``): for a dense layer, rows of [W_i rho_{i-1}(g) | b_i + W_i c_{i-1}(g)] are
    hashed by their canonical representatives and looked up among theta's.  Where no rows tie there
    is one action per layer.  The walk goes this way for attention heads (:func:`symeq.layers.attention.match_heads`)
    and for untied dense networks; it also stays the fallback for ties the tie walk refuses
    (dead neurons under continuous scalings), where every bijection inside a class of equal rows
    is enumerated within the node budget.
    """

    def __init__(self, model: Model, deadline: Deadline, affine: bool):
        self.model, self.deadline, self.affine = model, deadline, affine
        self.hidden = len(model.layers) - 1
        self.ties = False  # some class of equal rows had more than one neuron (or heads tied)
        # theta's side of the matching per hidden layer does not depend on g: compute it once
        self.V = [layer.match_reference(affine) for layer in model.layers[:-1]]

    def tied_rows(self) -> bool:
        """Whether two neurons of some hidden dense layer of theta have equal rows up to an admissible scaling
        (a dense layer's reference is (keys, scales, index), :meth:`symeq.layers.dense.DenseLayer.match_reference`)."""
        return any(v is not None and len(v[2]) < len(v[0]) for v in self.V)

    def tick(self) -> None:
        self.deadline.check("matching neurons")

    def start(self, A: fmpq_mat) -> tuple:
        self.ties = False
        return A, None

    def close(self, prev: tuple, B: fmpq_mat, acc: list) -> tuple[list, list]:
        """(actions, offsets) per hidden layer if the last layer matches (offsets None: linear)."""
        rho, off = prev
        ok, detail = check_layer(self.model.layers[-1], rho, B, off, None)
        if not ok:
            raise NoPartner(f"the last layer does not match after the hidden neurons were matched: {detail}")
        return [a for a, _ in acc], [o for _, o in acc]

    def step(self, i: int, prev: tuple):
        """The candidate (rho, offset) on hidden layer i + 1 given (rho, offset) on its input: the
        layer's own matching of actions (:meth:`symeq.layers.base.Layer.match_action`)."""
        prev_rho, prev_off = prev
        tied, candidates = self.model.layers[i].match_action(prev_rho, prev_off, reference=self.V[i],
                                                             affine=self.affine, li=i)
        if tied:
            self.ties = True
        return ((c, c) for c in candidates)


# -- tied neurons: a forward relaxation and a backward resolution (polynomial) --------------

def _pq(x) -> tuple:
    return (int(x.p), int(x.q))


_ABS, _EXACT = "abs", "exact"


class _Unsupported(Exception):
    """A tie the polynomial method does not resolve (continuous stabilizers): use the bounded search."""


@dataclass
class _LayerTies:
    """Invariant keys of one hidden layer's rows (theta or theta^g side).

    ``keys[k]`` is the key of neuron k's row (equal keys: rows equal up to an admissible scaling
    and up to permutations inside the tie classes of the layer before), ``iota[k]`` the
    admissible scale with row_k / iota[k] in the canonical form, ``stab[k]`` "trivial" or "sign"
    (the canonical form is fixed by alpha = -1, so the sign cannot be read off the row; the next
    layer then sees this neuron's outgoing weights only up to q(-1)).
    """

    keys: list
    iota: list
    stab: list


class _ExactMatcher:
    """The exact row matcher of the one walk (:class:`symeq.walk.TieWalk`), in polynomial time.

    Forward: the rows of hidden layer i+1 are compared through keys that are invariant under
    permutations inside the tie classes of layer i (per class the sorted multiset of the row's
    entries in that class's columns, after multiplying out the admissible scales of those neurons,
    so that theta and theta^g are comparable); equal keys are a necessary condition.
    Backward (:meth:`pair`): inside each tie class the bijection is read off the outgoing
    columns, exactly; neurons whose rows and columns agree are interchangeable and paired in
    increasing order; rows that agree as multisets but not as vectors, with columns that cannot
    tell them apart, are the walk's real choices.  Every result is checked exactly by
    :func:`check_layerwise` afterwards.

    Activations that are odd up to a constant (affine sign flips) are handled in centred
    coordinates y - sigma(s), where the flips act linearly; the next layer's bias then reads
    b + sigma(s) W 1 on both sides.  Exact entries are compared as (numerator, denominator) pairs.
    """

    def __init__(self, model: Model, deadline: Deadline, affine: bool):
        self.model, self.deadline, self.affine = model, deadline, affine
        self.interchangeable = 0  # neurons paired among interchangeable clones
        self.first_pq: list = []
        layers = model.layers
        self.L = len(layers)
        self.acts = [l.activation for l in layers[:-1]]
        self.rows = [mat_rows(l.weight) for l in layers]
        self.pq = [[[_pq(x) for x in r] for r in rows] for rows in self.rows]
        self.pqT = [[list(col) for col in zip(*rows)] for rows in self.pq]
        # centred biases b~_l = b_l + c0_{l-1} W_l 1 (c0: sigma(s) for affine sign flips, else 0)
        self.btil = []
        for li, l in enumerate(layers):
            b = list(l.bias)
            c0 = self._c0(li - 1) if li > 0 else 0
            if c0 != 0:
                b = [x + c0 * sum(r, fmpq(0)) for x, r in zip(b, self.rows[li])]
            self.btil.append(b)
        self.theta = []  # per hidden layer: (_LayerTies, {key: [neurons]}, class of neuron, class modes)
        prev = None
        for li in range(self.L - 1):
            if prev is None:
                cc, fac, modes = list(range(layers[0].in_dim)), None, None
            else:
                cc, modes = prev[2], prev[3]
                fac = [self._q(li - 1, x) for x in prev[0].iota]
            lt = self._keys(li, self.rows[li], self.pq[li], cc, fac, modes)
            index: dict = {}
            for k, key in enumerate(lt.keys):
                index.setdefault(key, []).append(k)
            cid = {key: c for c, key in enumerate(index)}
            cls = [cid[key] for key in lt.keys]
            modes_next = {cid[key]: self._mode(li, lt.stab[ks[0]]) for key, ks in index.items()}
            prev = (lt, index, cls, modes_next)
            self.theta.append(prev)

    # -- scalings ------------------------------------------------------------------------------
    def _sym(self, li: int) -> str:
        """'one', 'sign', 'positive' or 'nonzero': the admissible alpha of hidden layer li."""
        neg = self._qo(li, fmpq(-1)) is not None
        if self._qo(li, fmpq(2)) is not None:  # a continuous family of scalings
            return "nonzero" if neg else "positive"
        return "sign" if neg else "one"

    def _c0(self, li: int):
        """The centre c0 with offsets o(alpha) = c0 (1 - q(alpha)) (sigma(s); 0 for linear actions)."""
        for alpha in (fmpq(-1), fmpq(2)):
            qo = self._qo(li, alpha)
            if qo is not None and qo[1] != 0:
                return qo[1] / (1 - qo[0])
        return fmpq(0)

    def _qo(self, li: int, alpha):
        """(q, o) of the admissible scaling alpha of hidden layer li, or None."""
        act = self.acts[li]
        if self.affine:
            return act.affine_admissible(alpha)
        q = act.admissible(alpha)
        return None if q is None else (q, fmpq(0))

    def _q(self, li: int, alpha):
        qo = self._qo(li, alpha)
        if qo is None:  # cannot happen for scales read off canonical forms
            raise AssertionError("inadmissible scale")
        return qo[0]

    def _mode(self, li: int, stab: str) -> str:
        """How the next layer sees this neuron's outgoing weights given only its class."""
        if stab == "trivial":
            return _EXACT
        if stab == "sign":
            return _ABS if self._q(li, fmpq(-1)) == -1 else _EXACT
        raise _Unsupported("a row fixed by a continuous family of scalings (a dead neuron)")

    # -- invariant keys ----------------------------------------------------------------------
    def _keys(self, li: int, rows, pqrows, col_cls, col_fac, modes) -> _LayerTies:
        """Keys of rows [w | b~ - s] invariant under permutations inside the column classes."""
        act = self.acts[li]
        s = act.shift
        sym = self._sym(li)
        groups: dict = {}
        for c, k in enumerate(col_cls):
            groups.setdefault(k, []).append(c)
        mode_of = (lambda k: modes[k]) if modes else (lambda k: _EXACT)
        singles = [groups[k][0] for k in sorted(groups) if len(groups[k]) == 1 and mode_of(k) == _EXACT]
        multi = [(mode_of(k), groups[k]) for k in sorted(groups) if len(groups[k]) > 1 or mode_of(k) != _EXACT]
        unit = sym in ("sign", "one") and (col_fac is None or all(f == 1 or f == -1 for f in col_fac))
        fsign = None if col_fac is None else [1 if f == 1 else -1 for f in col_fac] if unit else None
        bias = self.btil[li]
        keys, iotas, stabs = [], [], []
        for j in range(len(rows)):
            beta = bias[j] - s
            mag = fmpq(1)
            if unit:
                r = pqrows[j]
                if fsign is not None:
                    r = [(f * p, q) for f, (p, q) in zip(fsign, r)]
                bq = _pq(beta)
            else:
                r = rows[j]
                if col_fac is not None:
                    r = [x * f for x, f in zip(r, col_fac)]
                if sym in ("positive", "nonzero"):
                    m = max([abs(r[c]) for c in singles] + [abs(r[c]) for md, cs in multi if md == _EXACT or md == _ABS
                                                             for c in cs] + [abs(beta)])
                    if m == 0:
                        raise _Unsupported("a zero row under a continuous family of scalings (a dead neuron)")
                    mag = m
                    r = [x / m for x in r]
                    beta = beta / m
                r = [_pq(x) for x in r]
                bq = _pq(beta)

            def rep(sg, r=r, bq=bq):
                out = [tuple((sg * r[c][0], r[c][1]) for c in singles)]
                for md, cs in multi:
                    if md == _EXACT:
                        out.append(tuple(sorted((sg * r[c][0], r[c][1]) for c in cs)))
                    else:
                        out.append(tuple(sorted((abs(r[c][0]), r[c][1]) for c in cs)))
                out.append((sg * bq[0], bq[1]))
                return tuple(out)

            kp = rep(1)
            sign, stab = 1, "trivial"
            if sym in ("sign", "nonzero"):
                km = rep(-1)
                if km > kp:
                    kp, sign = km, -1
                elif km == kp:
                    stab = "sign"
            keys.append(kp)
            iotas.append(fmpq(sign) * mag)
            stabs.append(stab)
        return _LayerTies(keys, iotas, stabs)

    # -- the row matcher of the one walk (symeq.walk.TieWalk) ---------------------------------
    @property
    def hidden(self) -> int:
        return self.L - 1

    def tick(self) -> None:
        self.deadline.check("matching tied neurons")

    def forward(self, A: fmpq_mat) -> list:
        """Step 1 of the walk: theta^g's tie classes and scales per hidden layer, by exact keys."""
        self.interchangeable = 0
        fwd = []
        prev_cls, prev_fac, prev_modes = None, None, None
        first_rows = mat_rows(self.model.layers[0].weight * A)
        self.first_pq = [[_pq(x) for x in r] for r in first_rows]
        for li in range(self.L - 1):
            self.deadline.check("matching tied neurons")
            lt_v, index, cls_v, modes_v = self.theta[li]
            if li == 0:
                lt = self._keys(0, first_rows, self.first_pq, list(range(A.ncols())), None, None)
            else:
                lt = self._keys(li, self.rows[li], self.pq[li], prev_cls, prev_fac, prev_modes)
            cls_u: list = [None] * len(lt.keys)
            members = _partner_classes(lt.keys, index, li, " and up to the order of tied neurons in the layer before")
            for key, js in members.items():
                for j in js:
                    cls_u[j] = cls_v[index[key][0]]
            fwd.append((lt, cls_u))
            prev_cls, prev_fac, prev_modes = cls_u, [self._q(li, x) for x in lt.iota], modes_v
        return fwd

    def top(self, B: fmpq_mat, fwd) -> list:
        """The last layer's columns after rho_out(g) (the walk goes backward from there)."""
        last = self.L - 1
        bt = fmpq_mat(len(self.btil[last]), 1, self.btil[last])
        if (B * bt).entries() != self.btil[last]:
            raise NoPartner("the output bias is not invariant: b_L != rho_out(g) b_L (in centred coordinates)")
        return [[_pq(x) for x in col] for col in zip(*mat_rows(B * self.model.layers[last].weight))]

    def result(self, acc: list) -> tuple[list, list]:
        return [a for a, _ in acc], [o for _, o in acc]

    def _scaled(self, li: int, k: int, iota) -> tuple:
        """Row k of theta's layer li divided by the scale iota, as (p, q) pairs."""
        if iota == 1:
            return tuple(self.pq[li][k])
        if iota == -1:
            return tuple((-p, q) for p, q in self.pq[li][k])
        return tuple(_pq(x / iota) for x in self.rows[li][k])

    def pair(self, li: int, YT, fwd) -> tuple[dict, list]:
        """Step 2 on hidden layer li: pair neurons inside each tie class by their outgoing columns.

        ``YT`` are the columns of rho-pre(li+1) W_{li+1} as (p, q) pairs.  Returns the forced
        pairs {m: (k, sign)} and the real choices ``(items, types)`` for the walk's search.
        """
        first_pq = self.first_pq
        lt_u, cls_u = fwd[li]
        lt_v, index, cls_v, modes = self.theta[li]
        XT = self.pqT[li + 1]
        n = len(cls_u)
        qu = [self._q(li, x) for x in lt_u.iota]
        qv = [self._q(li, x) for x in lt_v.iota]

        def col_key(col, q, mode):
            if q == 1:
                vec = tuple(col)
            elif q == -1:
                vec = tuple((-p, d) for p, d in col)
            else:
                vec = tuple(_pq(fmpq(p, d) * q) for p, d in col)
            if mode == _EXACT:
                return vec, 1
            first = next((p for p, _ in vec if p != 0), None)
            if first is None:
                raise _Unsupported("a zero outgoing column of a neuron whose sign is not fixed by its row")
            if first > 0:
                return vec, 1
            return tuple((-p, d) for p, d in vec), -1

        by_class_u: dict = {}
        by_class_v: dict = {}
        for m in range(n):
            by_class_u.setdefault(cls_u[m], []).append(m)
            by_class_v.setdefault(cls_v[m], []).append(m)
        # per class: groups of equal (normalised) outgoing columns, on both sides
        base: dict = {}
        choices = []
        for c, js in by_class_u.items():
            mode = modes[c]
            if len(js) == 1:  # a class of one: nothing to choose
                (m,), (k,) = js, by_class_v[c]
                ku, su = col_key(XT[m], qu[m], mode)
                kv, sv = col_key(YT[k], qv[k], mode)
                if ku != kv:
                    raise NoPartner(self._col_failure(li, m, 0, 1))
                if li == 0 and _div_pq(first_pq[m], lt_u.iota[m] * su) != self._scaled(0, k, lt_v.iota[k] * sv):
                    raise NoPartner(f"hidden layer 1: neuron {m + 1}'s incoming weights, after the action on the input, "
                                    f"are not an admissible multiple of those of its only partner {k + 1}")
                base[m] = (k, su * sv)
                continue
            gu: dict = {}
            for m in js:
                key, sg = col_key(XT[m], qu[m], mode)
                if li == 0:  # theta^g's first layer is known exactly: its rows must match too
                    key = (key, _div_pq(first_pq[m], lt_u.iota[m] * sg))
                gu.setdefault(key, []).append((m, sg))
            gv: dict = {}
            for k in by_class_v[c]:
                key, sg = col_key(YT[k], qv[k], mode)
                if li == 0:
                    key = (key, self._scaled(0, k, lt_v.iota[k] * sg))
                gv.setdefault(key, []).append((k, sg))
            for key, mu in gu.items():
                kv = gv.get(key, [])
                if len(kv) != len(mu):
                    raise NoPartner(self._col_failure(li, mu[0][0], len(kv), len(mu)))
                # inside a group, neurons of theta whose normalised rows agree are interchangeable
                # (the sign read off the column is part of the row the layer below sees)
                types: dict = {}
                for k, sg in kv:
                    types.setdefault(self._scaled(li, k, lt_v.iota[k] * sg), []).append((k, sg))
                if len(types) == 1:
                    if len(mu) > 1:
                        self.interchangeable += len(mu)
                    for (m, sm), (k, sk) in zip(sorted(mu), sorted(kv)):
                        base[m] = (k, sm * sk)
                else:
                    choices.append((sorted(mu), [sorted(t) for t in types.values()]))
        return base, choices

    @staticmethod
    def _col_failure(li: int, m: int, have: int, need: int) -> str:
        return (f"hidden layer {li + 1}: neuron {m + 1}'s outgoing weights, after the action on the next layer, "
                f"match {have} neuron(s) of theta among those with its incoming weights, but {need} are needed")

    def descend(self, li: int, base: dict, picks: list, fwd) -> tuple[tuple, list | None]:
        """rho(li) from the completed pairing, and the columns of rho-pre(li) W_li for the layer below."""
        chosen = dict(base)
        for (m, sm), (k, sk) in picks:
            chosen[m] = (k, sm * sk)
        lt_u, _ = fwd[li]
        lt_v = self.theta[li][0]
        n = len(chosen)
        s = self.acts[li].shift
        cols, vals, offs, alphas = [0] * n, [fmpq(0)] * n, [fmpq(0)] * n, [fmpq(0)] * n
        for m, (k, c) in chosen.items():
            alpha = lt_u.iota[m] * c / lt_v.iota[k]
            qo = self._qo(li, alpha)
            if qo is None:
                raise NoPartner(f"hidden layer {li + 1}: neuron {m + 1} would need the inadmissible scaling {alpha}")
            if self.btil[li][m] - s != alpha * (self.btil[li][k] - s):
                raise NoPartner(f"hidden layer {li + 1}: the bias of neuron {m + 1} does not match")
            cols[m], alphas[m] = k, alpha
            vals[m], offs[m] = qo
        rho = monomial_matrix(cols, vals)
        off = offs if any(x != 0 for x in offs) else None
        if li == 0:
            return (rho, off), None
        # the columns of rho-pre(li) W_li: row m of it is alpha_m W_li[cols[m]]
        WT = self.pqT[li]
        if all(a == 1 or a == -1 for a in alphas):
            sg = [1 if a == 1 else -1 for a in alphas]
            YT = [[(sg[m] * colk[cols[m]][0], colk[cols[m]][1]) for m in range(n)] for colk in WT]
        else:
            R = self.rows[li]
            YT = [[_pq(alphas[m] * R[cols[m]][c]) for m in range(n)] for c in range(len(WT))]
        return (rho, off), YT


def _div_pq(row, iota) -> tuple:
    if iota == 1:
        return tuple(row)
    if iota == -1:
        return tuple((-p, q) for p, q in row)
    return tuple(_pq(fmpq(p, q) / iota) for p, q in row)


def derive_latent_actions(
    model: Model,
    group: FiniteGroup | None = None,
    *,
    max_candidates: int = 64,
    max_combinations: int = 4096,
    deadline: Deadline | None = None,
    max_nodes: int = 100000,
) -> Derivation:
    """Derive rho_i(g) in K_i for every hidden layer and generator, and check them exactly.

    The walk (:mod:`symeq.walk`, shared with the float derivation) runs over exact row matchers:
    the tie walk with :class:`_ExactMatcher` where rows of theta tie, else (and through attention
    heads, and for dead neurons under continuous scalings) the chain walk with :class:`_ExactRows`.
    Tied neurons (rows equal up to an admissible scaling) are resolved by their outgoing weights,
    from the last layer down (see :mod:`symeq.walk`): polynomial in the widths for clones; only
    rows that agree as multisets but not as vectors, with columns that cannot tell them apart,
    are searched, within ``max_nodes``.  A search that runs out of nodes is reported as not
    exhaustive (never as a proof that no action exists).

    Parameters
    ----------
    model : a model with polynomial (degree >= 2) or ReLU activations
    group : defaults to ``model.group``
    max_candidates : at most this many k(g) per generator are tried when neurons tie
    max_combinations : at most this many combinations across generators are checked
    max_nodes : node budget of the search over tied neurons, per generator

    Returns
    -------
    Derivation
        ``found`` is True only if every layer check and the homomorphism check passed.

    References
    ----------
    Shahverdi, Marchetti, Bokman, Kohn, *Identifiable Equivariant Networks are Layerwise
    Equivariant*, arXiv 2601.21645 (2026), Theorem 4.1 and its proof (k(g) unique => homomorphism).
    """
    group = group if group is not None else model.group
    if group is None:
        raise InputError("no group given: put a \"group\" in the model file or pass one")
    model.check_group(group)
    deadline = deadline or Deadline(None)
    model = model.chain()
    if model.depth == 1:
        checks, hom, order, msg = check_layerwise(model, group, [], deadline)
        ok = all(c.holds for c in checks)
        return Derivation(ok, [], checks, hom, order, {}, True, None if ok else "the single affine layer is not equivariant")
    per_gen: list = []
    candidates = {}
    exhaustive = True
    method = "canonical matching"
    affine = absorbs_offsets(model)
    nodes: dict = {}
    ties = matcher = None
    rows = _ExactRows(model, deadline, affine)
    # the tie walk reads dense rows: only models whose kinds all have "tie-walk" take it (dense; other
    # kinds stay on the chain walk)
    if all_support(model.layers, "tie-walk") and rows.tied_rows():
        try:
            matcher = _ExactMatcher(model, deadline, affine)
            ties = TieWalk(matcher, max_nodes)
        except _Unsupported:
            # dead neurons under continuous scalings: the tie walk cannot read their scale off a row,
            # so the chain walk below enumerates the bijections inside each tie class, within max_nodes
            ties = None
    for gi, (A, B) in enumerate(group.generators):
        name = group.names[gi]
        found, search, how = _generator_candidates(A, B, name, ties, matcher, rows, max_nodes, max_candidates,
                                                   candidates)
        method = how or method
        if search.capped:
            exhaustive = False
        candidates[name] = max(candidates.get(name, 0), len(found))
        nodes[name] = search.nodes
        if not found:
            why = search.failure
            if search.capped and search.nodes > search.max_nodes:
                why = (f"the search over tied neurons ran out of its node budget ({search.max_nodes} nodes); "
                       f"undetermined, not a proof" + (f" (last failure: {why})" if why else ""))
            d = Derivation(False, None, [], None, None, candidates, not search.capped,
                           f"generator {name}: no k in prod K_i with theta^g = k . theta"
                           + (" (search capped)" if search.capped else "") + f": {why}", method)
            d.nodes = nodes
            return d
        per_gen.append(found)
    d = _check_combinations(model, group, per_gen, max_combinations, deadline, candidates, exhaustive, method)
    d.nodes = nodes
    return d


def _generator_candidates(A, B, name: str, ties, matcher, rows, max_nodes: int, max_candidates: int,
                          candidates: dict):
    """``(found, search, method)`` for one generator of :func:`derive_latent_actions`: at most
    ``max_candidates`` k(g) by the tie walk ``ties`` when there is one (interchangeable clones noted in
    ``candidates``), else by the chain walk over ``rows``; ``method`` names the walk that ran, None when it
    leaves the derivation's method as it was."""
    search, method = None, None
    found = []
    if ties is not None:
        try:
            for actions in ties.run(A, B):
                found.append(actions)
                if len(found) >= max_candidates:
                    ties.capped = True
                    break
            search = ties
            method = ("canonical matching; tied (cloned) neurons resolved by their outgoing weights, layer by "
                      "layer from the last one, backtracking only over rows tied as multisets")
            if matcher.interchangeable:
                # interchangeable clones: k(g) is not unique, one representative per orbit is kept
                candidates[name] = max(len(found), 2)
        except _Unsupported:
            found = []
    if search is None:
        search = ChainWalk(rows, max_nodes)
        for actions in search.run(A, B):
            found.append(actions)
            if len(found) >= max_candidates:
                search.capped = True
                break
        if rows.ties:
            method = "canonical matching with backtracking over tied (cloned) neurons"
    return found, search, method


def _check_combinations(model, group, per_gen: list, max_combinations: int, deadline, candidates: dict,
                        exhaustive: bool, method: str) -> Derivation:
    """The first combination of the generators' candidates (at most ``max_combinations``) whose layer
    checks and homomorphism hold, as a found :class:`Derivation`, else the derivation that failed."""
    last_failure = None
    for n_tried, combo in enumerate(itertools.product(*per_gen)):
        if n_tried >= max_combinations:
            exhaustive = False
            break
        deadline.check("checking candidate latent actions")
        L1 = model.depth - 1
        actions = [[combo[gi][0][i] for gi in range(len(combo))] for i in range(L1)]
        n_i = [model.layers[i].out_dim for i in range(L1)]
        affine = any(o is not None for c in combo for o in c[1])
        offsets = ([[combo[gi][1][i] if combo[gi][1][i] is not None else [fmpq(0)] * n_i[i]
                     for gi in range(len(combo))] for i in range(L1)] if affine else None)
        checks, hom, order, msg = check_layerwise(model, group, actions, deadline, offsets)
        if all(c.holds for c in checks) and hom:
            d = Derivation(True, actions, checks, True, order, candidates, exhaustive, None, method)
            d.offsets = offsets
            return d
        bad = [c for c in checks if not c.holds]
        last_failure = (f"layer {bad[0].layer}, generator {bad[0].generator}: {bad[0].detail}" if bad else msg)
    return Derivation(False, None, [], False, None, candidates, exhaustive,
                      "no choice of the matched k(g) gives a group action: " + (last_failure or ""), method)
