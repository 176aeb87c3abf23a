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
Rows are matched by hashing their canonical representatives (one per orbit of admissible
scalings, computed in theta's column order so that both sides are comparable).  Where rows of
theta tie (clones up to symmetry) every bijection inside the tie class is tried, depth first,
and the next layers decide; the search is exhaustive unless capped, so "no partner" is a proof
that no k(g) in prod K_i exists at theta.  Every derived action is then *checked*, exactly: each layer is equivariant, and g ->
rho_i(g) respects every relation of G (enumerated along the Cayley graph).

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
from typing import Iterator

from flint import fmpq, fmpq_mat

from .activations import Activation
from .budget import Deadline
from .errors import GroupActionError, InputError
from .groups import FiniteGroup, closure
from .models import Model
from .numbers import mat_rows, monomial_matrix, monomial_parts

__all__ = [
    "LayerCheck",
    "Derivation",
    "derive_latent_actions",
    "check_layer",
    "check_layerwise",
    "adjoint_parameters",
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

    @property
    def unique(self) -> bool:
        return bool(self.candidates) and all(v == 1 for v in self.candidates.values())


# -- exact layer check --------------------------------------------------------------------

def _expand_affine(coeffs, alpha, beta) -> list:
    """Coefficients of sigma(alpha t + beta) from those of sigma."""
    out = [fmpq(0)] * len(coeffs)
    power = [fmpq(1)]  # (alpha t + beta)^k
    for k, c in enumerate(coeffs):
        if k > 0:
            nxt = [fmpq(0)] * (len(power) + 1)
            for i, p in enumerate(power):
                nxt[i] += p * beta
                nxt[i + 1] += p * alpha
            power = nxt
        if c != 0:
            for i, p in enumerate(power):
                out[i] += c * p
    return out


def _neuron_relation(act: Activation, u, bu, v, bv, q, o=0) -> str | None:
    """None if sigma(u.x + bu) = q sigma(v.x + bv) + o for all x, else the reason it fails."""
    if all(x == 0 for x in v):
        if any(x != 0 for x in u):
            return "its partner has a zero incoming row but it does not"
        return None if act(bu) == q * act(bv) + o else "constant outputs differ"
    k = next(i for i, x in enumerate(v) if x != 0)
    alpha = u[k] / v[k]
    if any(a != alpha * b for a, b in zip(u, v)):
        return "incoming rows are not proportional"
    beta = bu - alpha * bv
    if act.kind == "relu":
        ok = alpha > 0 and beta == 0 and q == alpha and o == 0
        return None if ok else f"relu(alpha t + beta) != q relu(t) for alpha={alpha}, beta={beta}, q={q}"
    lhs = _expand_affine(list(act.coeffs), alpha, beta)
    rhs = [q * c for c in act.coeffs]
    rhs[0] += o
    return None if lhs == rhs else f"sigma({alpha} t + {beta}) != {q} sigma(t) + {o}"


def check_layer(layer, P: fmpq_mat, Q: fmpq_mat, c_in=None, c_out=None) -> tuple[bool, str]:
    """Decide f(P x + c_in) = Q f(x) + c_out for all real x for one layer f, exactly.

    The offsets c_in, c_out (default zero) carry the affine sign flips of activations that are
    odd up to a constant (sigmoid series).  For an affine layer this is W P = Q W and
    b + W c_in = Q b + c_out.  For sigma(W x + b) with Q monomial, row j reads
    sigma(u.x + b'_j) = q sigma(v.x + b_k) + o_j with b' = b + W c_in; comparing leading forms
    forces u = alpha v, and what remains is a univariate identity in t, checked coefficientwise
    (ReLU: alpha > 0, b_j = alpha b_k, q = alpha, o = 0).  This is necessary and sufficient.
    """
    if getattr(layer, "kind", "dense") == "heads":
        from .attention import check_heads_layer

        if c_in is not None or c_out is not None:
            return False, "affine actions are not supported on attention heads"
        return check_heads_layer(layer, P, Q)
    W, b = layer.weight, list(layer.bias)
    if c_in is not None:
        b = [x + y for x, y in zip(b, (W * fmpq_mat(len(c_in), 1, list(c_in))).entries())]
    if layer.activation is None:
        if W * P != Q * W:
            return False, "W rho_in != rho_out W"
        bq = (Q * fmpq_mat(len(b), 1, list(layer.bias))).entries()
        if c_out is not None:
            bq = [x + y for x, y in zip(bq, c_out)]
        if bq != b:
            return False, "b + W c != rho_out b" if c_in is not None else "b != rho_out b"
        return True, f"W rho(g) = rho'(g) W and b = rho'(g) b ({W.nrows()}x{W.ncols()})"
    parts = monomial_parts(Q)
    if parts is None:
        return False, "the latent action is not a monomial matrix"
    cols, vals = parts
    U = mat_rows(W * P)
    V = mat_rows(W)
    base = layer.bias
    for j, (k, q) in enumerate(zip(cols, vals)):
        o = c_out[j] if c_out is not None else 0
        why = _neuron_relation(layer.activation, U[j], b[j], V[k], base[k], q, o)
        if why:
            return False, f"neuron {j}: {why}"
    kind = "rho'(g) sigma(W x + b) + c'" if c_out is not None and any(x != 0 for x in c_out) else "rho'(g) sigma(W x + b)"
    return True, f"sigma(W rho(g) x + b) = {kind}, {W.nrows()} neurons, exactly"


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
    hidden = (lambda i, gi: affine_matrix(actions[i][gi], offsets[i][gi])) if offsets else (lambda i, gi: actions[i][gi])
    gens = [tuple([A] + [hidden(i, gi) for i in range(L - 1)] + [B]) for gi, (A, B) in enumerate(group.generators)]
    try:
        els = closure(gens, max_order=group.max_order, names=group.names,
                      what=["input"] + [f"the action on hidden layer {i + 1}" for i in range(L - 1)] + ["the output action"],
                      deadline=deadline)
        return checks, True, len(els), f"g -> rho_i(g) respects every relation of G (order {len(els)})"
    except GroupActionError as e:
        return checks, False, None, str(e)


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


def canonical_rows(rows, bias, act: Activation, affine: bool = False):
    """Canonical keys of the shifted pre-activation rows [w | b - s] and their scales.

    Row j equals ``scale[j] * key[j]``; two rows are related by an admissible scaling alpha
    exactly when their keys agree, and then alpha is the ratio of their scales.  With
    ``affine=True`` the affine sign flips of odd-plus-constant activations count too.
    """
    s = act.shift
    keys, scales = [], []
    for r, b in zip(rows, bias):
        vec = list(r) + [b - s]
        c = act.affine_canonical_scale(vec) if affine else act.canonical_scale(vec)
        # (numerator, denominator) pairs hash ~5x faster than fmpq (whose hash goes through Fraction)
        if c == 1:
            keys.append(tuple((int(x.p), int(x.q)) for x in vec))
        else:
            keys.append(tuple((int(y.p), int(y.q)) for y in (x / c for x in vec)))
        scales.append(c)
    return keys, scales


@dataclass
class _Search:
    model: Model
    A: fmpq_mat
    B: fmpq_mat
    deadline: Deadline
    max_candidates: int
    max_nodes: int = 100000
    nodes: int = 0
    capped: bool = False
    ties: bool = False
    failure: str | None = None
    V: list = field(default_factory=list)

    def __post_init__(self):
        # theta's canonical rows per hidden layer do not depend on g: compute them once
        self.V = []
        for l in self.model.layers[:-1]:
            if getattr(l, "kind", "dense") == "heads":
                self.V.append(None)
                continue
            keys, scales = canonical_rows(mat_rows(l.weight), l.bias, l.activation, affine=True)
            index: dict = {}
            for k, key in enumerate(keys):
                index.setdefault(key, []).append(k)
            self.V.append((keys, scales, index))

    def _fail(self, msg: str) -> None:
        if self.failure is None:
            self.failure = msg

    def run(self) -> Iterator[tuple[list, list]]:
        """Yield (actions, offsets) per hidden layer; offsets are None for linear actions."""
        yield from self._layer(0, self.A, [], None, [])

    def _layer(self, i: int, prev: fmpq_mat, acc: list, prev_off=None, acc_off=()) -> Iterator:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            self.capped = True
            return
        self.deadline.check("matching neurons")
        layers = self.model.layers
        layer = layers[i]
        if i == len(layers) - 1:
            ok, detail = check_layer(layer, prev, self.B, prev_off, None)
            if ok:
                yield acc, list(acc_off)
            else:
                self._fail(f"the last layer does not match after the hidden neurons were matched: {detail}")
            return
        if getattr(layer, "kind", "dense") == "heads":
            from .attention import match_heads

            actions, why = match_heads(layer, prev)
            if why:
                self._fail(f"attention heads: {why}")
                if "INCONCLUSIVE" in why:
                    self.capped = True  # not a proof that no k exists
            if len(actions) > 1:
                self.ties = True
            for rho in actions:
                yield from self._layer(i + 1, rho, acc + [rho], None, list(acc_off) + [None])
                if self.capped:
                    return
            return
        act = layer.activation
        U = mat_rows(layer.weight * prev)
        bias = list(layer.bias)
        if prev_off is not None:  # an affine action y -> P y + c on the input: bias b + W c
            bias = [x + y for x, y in zip(bias, (layer.weight * fmpq_mat(len(prev_off), 1, list(prev_off))).entries())]
        ukeys, uscales = canonical_rows(U, bias, act, affine=True)
        vkeys, vscales, index = self.V[i]
        classes: dict = {}
        for j, key in enumerate(ukeys):
            classes.setdefault(key, []).append(j)
        for key, js in classes.items():
            ks = index.get(key, [])
            if len(ks) != len(js):
                j = js[0]
                self._fail(
                    f"neuron {j} of hidden layer {i + 1}, after the action on its input, has no partner: "
                    f"{len(js)} neuron(s) of theta^g but {len(ks)} of theta share its incoming weights and bias "
                    "up to the activation's symmetry"
                )
                return
        tied = [(js, index[key]) for key, js in classes.items() if len(js) > 1]
        if tied:
            self.ties = True
        # Enumerate bijections inside each tie class (clones); without ties there is one.
        choices = [list(itertools.permutations(ks)) for _, ks in tied]
        base = {js[0]: index[key][0] for key, js in classes.items() if len(js) == 1}
        for combo in itertools.product(*choices):
            target = dict(base)
            for (js, _), ks in zip(tied, combo):
                target.update(zip(js, ks))
            n = len(U)
            cols, vals, offs = [0] * n, [fmpq(0)] * n, [fmpq(0)] * n
            for j in range(n):
                k = target[j]
                alpha = uscales[j] / vscales[k]
                qo = act.affine_admissible(alpha)
                if qo is None:  # cannot happen for keys built from admissible scales
                    raise AssertionError("inadmissible scale between equal canonical keys")
                cols[j], (vals[j], offs[j]) = k, qo
            rho = monomial_matrix(cols, vals)
            off = offs if any(x != 0 for x in offs) else None
            yield from self._layer(i + 1, rho, acc + [rho], off, list(acc_off) + [off])
            if self.capped:
                return


def derive_latent_actions(
    model: Model,
    group: FiniteGroup | None = None,
    *,
    max_candidates: int = 64,
    max_combinations: int = 4096,
    deadline: Deadline | None = None,
) -> Derivation:
    """Derive rho_i(g) in K_i for every hidden layer and generator, and check them exactly.

    Parameters
    ----------
    model : a model with polynomial (degree >= 2) or ReLU activations
    group : defaults to ``model.group``
    max_candidates : at most this many k(g) per generator are tried when neurons tie
    max_combinations : at most this many combinations across generators are checked

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
    for gi, (A, B) in enumerate(group.generators):
        name = group.names[gi]
        search = _Search(model, A, B, deadline, max_candidates)
        found = []
        for actions in search.run():
            found.append(actions)
            if len(found) >= max_candidates:
                search.capped = True
                break
        if search.ties:
            method = "canonical matching with backtracking over tied (cloned) neurons"
        if search.capped:
            exhaustive = False
        candidates[name] = len(found)
        if not found:
            return Derivation(False, None, [], None, None, candidates, not search.capped,
                              f"generator {name}: no k in prod K_i with theta^g = k . theta"
                              + (" (search capped)" if search.capped else "") + f": {search.failure}", method)
        per_gen.append(found)
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
