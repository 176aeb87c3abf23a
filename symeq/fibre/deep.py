"""Identifiability of networks with two or three hidden layers: the Jacobian-factor certificate.

:mod:`symeq.fibre.tensor` decides one hidden layer by Kruskal's theorem.  For deeper networks the
block-by-block route is unsound as it stands: f = G o h = G' o h' relates neither h' to h nor G' to G,
and the image of the lower layers need not be Zariski-dense.  This module proves identifiability
for one class of deep networks by a different argument (docs/identifiability.md, "Deep networks"),
which never assumes h' = h:

**Theorem.**  Let f(x) = W_3 s_2(W_2 s_1(W_1 x + b_1) + b_2) + b_3 with s_i(t) = c_i (t - e_i)^(r_i)
+ k_i, r_i >= 2, widths (n_0, n, n, n_3) with n_0 >= n <= n_3, and either no biases at all (then
e_i = k_i = 0 and the fibre is taken among bias-free parameters) or biases (any e_i, k_i: the next
bias absorbs k_i).  Write beta_j = b_2j + k_1 (row sum j of W_2) - e_2.  If
rank W_1 = rank W_2 = rank W_3 = n and every row j of W_2 has at least three nonzero entries, or two
with beta_j != 0, or one with beta_j = 0, then every theta' with the same function is k . theta for
exactly one k in K = K_1 x K_2 (monomial matrices): theta is identifiable, and the fibre is the
orbit, a torus of dimension 2n times (n!)^2 permutations.

*Proof sketch.*  (1) By the chain rule and Cauchy-Binet, the gcd of the n x n minors of the Jacobian
of f is, up to a constant, prod_j l_j^(r_1 - 1) prod_j g_j^(r_2 - 1) (l_j = w_j . x + b_1j - e_1 the
first pre-activations around the centre, g_j = second ones minus e_2); the same holds for any
theta' with the same f, and forces W'_1, W'_2, W'_3 to have rank n.  (2) In affine coordinates z
with z_j = l_j, g_j = c_1 sum_i (W_2)_ji z_i^(r_1) + beta_j: with one term and beta_j = 0 its only
degree-1 factor is a z_i; with three terms, or two and beta_j != 0, its homogenisation is a smooth
Fermat form in >= 3 variables, hence irreducible, with no degree-1 factor.  By unique
factorisation the degree-1 factors of the gcd are exactly the n forms l_j, and those of theta' are
n pairwise non-proportional ones among them: (W'_1, b'_1 - e_1) = P D (W_1, b_1 - e_1).  (3) Then
s_1(W'_1 x + b'_1) = P D^(r_1) s_1(W_1 x + b_1), which is onto C^n, so the one-hidden-layer nets
agree as polynomial maps; the same factor argument pins (W'_2, b'_2) and then (W'_3, b'_3).  (4)
Rows of W_1, W_2 are nonzero and pairwise non-proportional, so k is unique (and real when theta' is).

**Three hidden layers** (no biases, widths (n_0, n, n, n, n_4)): the same holds if every weight
matrix has rank n, every row of W_2 and of W_3 has one or at least three nonzero entries, and for
every row j of W_3 with at least three, r_1^(|V_j| - 2) != r_2, where V_j is the set of columns of
W_2 that the rows selected by row j reach.  Step (2) then also needs the linear factors of the third
pre-activations h_j(z) = G_j(z_1^(r_1), ..., z_n^(r_1)): if a linear form a with s >= 2 variables
divided h_j, so would every a(zeta z) (zeta_i^(r_1) = 1, h_j is invariant), and their product, the
norm N_a(z) = N~_a(z^(r_1)) of degree r_1^(s-2) in y = z^(r_1), would divide G_j as a polynomial in y.
G_j = sum_i (W_3)_ji c (W_2 y)_i^(r_2) is a diagonal form in W_2 y, irreducible for >= 3 terms, so
N~_a = const G_j: same variables (s = |V_j|) and same degree (r_1^(s-2) = r_2), excluded.  One term:
G_j = c (W_2 y)_i^(r_2), whose linear factors are those of a second pre-activation.  After step (3)
the remaining network has two hidden layers.

**General activations** (two hidden layers, any polynomials s_i of degree m_i >= 2, with biases or
without any; :func:`_general_layers`): the degree-1 factors of the gcd are the l_j - t_k (t_k the
roots of s_1'), provided every row of W_2 has >= 3 nonzero entries (H4'': the top form of g_j - s is
a smooth Fermat form, so g_j - s is irreducible of degree m_1).  Matching these families gives
l'_j = lambda l_i + c with s_1'(lambda t + c) = kappa s_1'(t), i.e. c = mu (1 - lambda) (mu the
centre) and lambda^g = 1, g = gcd{m - j : tau_j != 0, 1 <= j < m} for tau(u) = s(u + mu) (g = 0: every
lambda).  The real scalings must all be symmetries in symeq's latent group and g <= 2 (complex
lambda would give complex fibre points); then the fibre is the orbit, of (n! |Lambda_1|^n)
(n! |Lambda_2|^n) points when no layer has g = 0 (tanh/sigmoid series with biases: (n! 2^n)^2).
With three hidden layers (biases or none) the same holds if also every row of W_3 has >= 3 nonzero
entries and m_1^(|V_j| - 2) != m_2: the top form of a third pre-activation minus a constant is the
bias-free monomial network's G_j(z^(m_1)), whose linear factors the norm argument above excludes.

Everything is exact: full-rank certificates (an n x n minor nonzero modulo a prime proves it nonzero
over Q), counts of zeros in the rows of W_2 (and W_3) and the centred biases beta_j.  Two entries in
a bias-free row of W_2 (every bias-free (2, 2, 2, .) network with a full W_2), general activations
(or three hidden layers with biases) with a row of W_2 or W_3 of fewer than three entries, with
g >= 3 or with a scaling outside the latent group (sigmoid without biases), unequal hidden widths
other than the widening case below, n_0 < n, n_L < n, and four or more hidden layers are *not
applicable*: the reason says which hypothesis failed, and :func:`symeq.fibre.tensor.decide` falls
back to Gröbner bases (why these are not extended: docs/identifiability.md, "Deep networks, a
widening last hidden layer").

**A widening second layer** (two hidden layers, widths (n_0, n, n_2, n_3) with n_0 >= n < n_2 <= n_3,
monomial or general polynomial activations; :func:`_widening`): if rank W_1 = rank W_2 = n, W_3 is
injective (rank n_2), the rows of W_2 satisfy the condition above (general activations: >= 3
entries, and the first layer's scalings in the latent group) and the top block u -> W_3 s_2(W_2 u + b~_2) + b_3 is
identifiable (one hidden layer, Kruskal: its certificate is nested as ``top``), theta is
identifiable.  The n x n minors of the Jacobian are det D_1 det W_1[:, C] times sums over the row
bases S of W_2; since W_3 is injective their gcd is that of det W_2[S, :] prod_{j in S} d_2j, whose
degree-1 factors are first-layer pre-activations only.  That pins the first layer of every fibre
point; the top block is then compared as a polynomial map on all of C^n (never block-wise alone).
With three hidden layers the last one may widen the same way, widths (n_0, n, n, n_3, n_4)
(:func:`_widening3`): step 2 of the three-layer theorems pins the first layer (W_4 injective), and
the tail, two hidden layers (n, n, n_3, n_4), is decided by the widening theorem (nested as ``tail``).

The theorem is proved in this project (the proof in full: docs/identifiability.md).  It is related
to, but does not rely on, the localisation principle of Usevich, Borsoi, Dérand & Clausel,
*Identifiability of deep polynomial neural networks* (arXiv 2506.17093, NeurIPS 2025), which is a
statement about generic parameters.

Examples
--------
>>> from symeq.models import Model, DenseLayer
>>> from symeq.activations import monomial
>>> W1 = [[1, 2, -1], [2, -1, 1], [1, 1, 3]]
>>> W2 = [[1, -2, 1], [2, 1, -1], [-1, 1, 2]]
>>> m = Model(3, [DenseLayer(W1, [0, 0, 0], monomial(2)), DenseLayer(W2, [0, 0, 0], monomial(2)),
...               DenseLayer([[1, 1, -2], [2, -1, 1]], [0, 0], None)])
>>> deep_decision(m)[0]          # n_3 = 2 < n = 3 outputs
'not-applicable'
"""

from __future__ import annotations

import math
from functools import reduce

from flint import fmpq, fmpq_mat, nmod_mat

from ..budget import Deadline
from ..numbers import mat_rows
from .ideal import _resolve_bias

__all__ = ["METHOD", "deep_decision", "MAX_WIDTH", "MAX_ENTRIES", "MAX_DEGREE"]

#: the ``method`` of the certificate (inside ``symeq-identifiability/1``), checked by :mod:`symeq_check`
METHOD = "jacobian-factors"
#: size guards, checked before any work starts
MAX_WIDTH = 1024
MAX_ENTRIES = 4_000_000
#: activation degree guard of the general path (its centring is a Taylor shift, O(d^2))
MAX_DEGREE = 1000
#: primes for modular ranks: full rank modulo p proves full rank over Q (never the converse)
_PRIMES = (2305843009213693951, 4611686018427387847)
_WHERE = "docs/identifiability.md, 'Deep networks'"
#: exact (non-modular) rank only below this many entries: a rank deficient modulo two 61-bit primes
#: is almost always deficient over Q too, and a large exact elimination could outlive the budget
_EXACT_ENTRIES = 40_000


def _integral_rows(rows):
    """Rows scaled to integers (a nonzero row scaling keeps every minor's zeroness)."""
    out = []
    for r in rows:
        den = 1
        for x in r:
            q = int(fmpq(x).q)
            den = den * q // math.gcd(den, q)
        out.append([int(fmpq(x).p) * (den // int(fmpq(x).q)) for x in r])
    return out


def _independent_columns(rows, k: int, deadline):
    """k columns of the integer matrix ``rows`` (k rows) with a nonzero k x k minor, or None.

    Found modulo a prime (a nonzero minor modulo p is nonzero over Q), else, for small matrices
    only (flint's exact elimination cannot be interrupted), by exact elimination over Q."""
    ncols = len(rows[0]) if rows else 0
    if k == 0 or ncols < k:
        return None
    for p in _PRIMES:
        deadline.check("computing a modular rank")
        E, rank = nmod_mat(k, ncols, [x % p for r in rows for x in r], p).rref()
        if rank == k:
            return [next(c for c in range(ncols) if int(E[i, c]) != 0) for i in range(k)]
    if k * ncols > _EXACT_ENTRIES:
        return None
    deadline.check("computing an exact rank")
    E, rank = fmpq_mat(k, ncols, [x for r in rows for x in r]).rref()
    if rank == k:
        return [next(c for c in range(ncols) if E[i, c] != 0) for i in range(k)]
    return None


def _monomial_exponent(act, bias: bool):
    """r when ``act`` is c t^r with r >= 2, or, when the model has biases (which absorb the shift e and
    the constant kappa), c (t - e)^r + kappa; else None."""
    if act is None or not act.is_polynomial or act.degree < 2:
        return None
    if act.symmetry != "monomial" and not (bias and act.symmetry == "monomial-plus-constant"):
        return None
    if not bias and (act.shift != 0 or any(c != 0 for c in act.coeffs[:-1])):
        return None
    return act.degree


def _rank_proofs(Ws: list, hidden: int, n: int, deadline) -> tuple[dict | None, str | None]:
    """Indices proving every weight matrix has rank n: n independent columns of W_1..W_hidden and n
    independent rows of the last one (certified modulo primes), or (None, why) for the first matrix
    that is not certified."""
    proofs = {}
    mats = [(f"W{k}_columns", Ws[k - 1], f"W_{k}") for k in range(1, hidden + 1)]
    mats.append((f"W{hidden + 1}_rows", [list(c) for c in zip(*Ws[hidden])], f"W_{hidden + 1}"))
    for name, rows, what in mats:
        cols = _independent_columns(_integral_rows(rows), n, deadline)
        if cols is None:
            return None, (f"{what} is not of rank {n} (or not certified: deficient modulo two 61-bit primes); "
                          "clones or inactive neurons make a rank drop, and submodels remove them")
        proofs[name] = cols
    return proofs, None


def _third_layer_spans(Ws: list) -> list[int]:
    """|V_j| for each row j of W_3: the first-layer neurons it reaches through W_2."""
    return [len({c for i, x in enumerate(row) if x != 0 for c, y in enumerate(Ws[1][i]) if y != 0})
            for row in Ws[2]]


def deep_decision(model, *, deadline: Deadline | None = None, certificate: bool = True, fmt: str = "",
                  one_layer=None):
    """The Jacobian-factor decision for a dense model with two or more hidden layers.

    Parameters
    ----------
    model : :class:`~symeq.models.Model` with dense layers only (checked by the caller)
    deadline : :class:`~symeq.budget.Deadline`; past it :class:`~symeq.errors.BudgetExceeded` is raised
    certificate : build the certificate
    fmt : the certificate's ``format`` (``symeq-identifiability/1``, given by :mod:`symeq.fibre.tensor`)
    one_layer : the one-hidden-layer decision (``tensor_identifiability`` of :mod:`symeq.fibre.tensor`,
        passed by it: this module may not import it), used for the top block of a widening network
        (:func:`_widening`); None: widening networks are not applicable

    Returns
    -------
    (status, reason, condition, fields)
        status "identifiable" or "not-applicable" (never "not-identifiable": a failed hypothesis
        says nothing about identifiability); ``fields`` are the remaining
        :class:`~symeq.fibre.tensor.TensorDecision` attributes (orbit dimension, certificate).

    Examples
    --------
    Four hidden layers are beyond the theorem:

    >>> from symeq.models import Model, DenseLayer
    >>> from symeq.activations import monomial
    >>> I = [[1, 0], [0, 1]]
    >>> m = Model(2, [DenseLayer(I, [0, 0], monomial(2)) for _ in range(4)] + [DenseLayer(I, [0, 0], None)])
    >>> status, reason, condition, _ = deep_decision(m)
    >>> status, condition
    ('not-applicable', 'two or three hidden layers')
    """
    deadline = deadline or Deadline(None)
    layers = model.layers
    hidden = len(layers) - 1

    def na(cond, reason):
        return "not-applicable", reason + f" ({_WHERE}); use Gröbner bases", cond, {}

    if hidden not in (2, 3):
        return na("two or three hidden layers", f"{hidden} hidden layers: symeq certifies deep networks with two "
                  "or three hidden layers; with more, the linear factors of "
                  "the deeper pre-activations are not certified")
    bias = _resolve_bias(model, "auto")
    if bias is None:  # the declared parameter space: biases in some layers only
        return na("biases in every layer or in none", f"{hidden} hidden layers: the Jacobian-factor certificate "
                  "takes biases in every layer or in none; this model declares them in some layers only")
    h = f"{hidden} hidden layers"
    # shape and size first, for both arguments: free, and checked before any work
    ws = list(model.widths)
    n, n0, nL = ws[1], ws[0], ws[-1]
    if hidden == 2 and n0 >= n < ws[2] <= nL:
        return _widening(model, bias, deadline, certificate, fmt, na, one_layer)
    if hidden == 3 and n0 >= n == ws[2] < ws[3] <= nL:
        return _widening3(model, bias, deadline, certificate, fmt, na, one_layer)
    if any(w != n for w in ws[1:-1]) or n0 < n or nL < n:
        return na("widths (n0, n, ..., n, nL), n0 >= n <= nL, or widening last: (n0, n, n2, n3) or "
                  "(n0, n, n, n3, n4) with n < n_last <= outputs",
                  f"{h} of widths {ws[1:-1]} ({ws[0]} inputs, {ws[-1]} outputs): the certificate needs equal hidden widths n and at least n inputs and n "
                  "outputs, or a widening last hidden layer n < n_L <= outputs (a narrowing layer, or more outputs "
                  "needed than there are, makes the Jacobian's maximal minors sums in which the first layer's "
                  "factors cancel)")
    if n > MAX_WIDTH or n * (n0 + (hidden - 1) * n + nL) > MAX_ENTRIES or \
            any(l.activation is not None and l.activation.is_polynomial and l.activation.degree > MAX_DEGREE
                for l in layers[:-1]):
        return na("size guard", f"{h} of width {n}: beyond the size guard ({MAX_WIDTH} neurons, {MAX_ENTRIES} "
                  f"weights, degree {MAX_DEGREE})")
    exps = [_monomial_exponent(l.activation, bias) for l in layers[:-1]]
    if (hidden == 3 and bias) or None in exps:
        # general activations, and three hidden layers with biases: the top-form argument
        return _general_layers(model, hidden, bias, deadline, certificate, fmt, na)
    Ws = [mat_rows(l.weight) for l in layers]
    # zero patterns first: they are free, and they name the hypothesis users most often miss.
    # beta_j = b_2j - s_2 is the constant of neuron j's pre-activation around the activation's centre
    # (with sigma_1 = c (t - e_1)^r + kappa_1 the constant kappa_1 enters through W_2: beta_j also gets
    # kappa_1 times the row sum)
    betas = _w2_betas(layers, Ws, bias)
    supports = {k: [sum(1 for x in row if x != 0) for row in Ws[k - 1]] for k in range(2, hidden + 1)}
    refused = _row_support_refusal(supports, betas, exps, bias, h, na)
    if refused is not None:
        return refused
    spans = None
    if hidden == 3:
        # a linear factor a of a third-layer pre-activation with >= 2 variables would make the norm
        # prod_zeta a(zeta z), a polynomial of degree r_1^(s-2) in s variables y = z^(r_1), divide the
        # irreducible diagonal form G_j(y) (r_2-th powers of W_2's rows), so G_j would *be* that norm:
        # impossible when G_j's number of variables |V_j| has r_1^(|V_j| - 2) != r_2
        spans = _third_layer_spans(Ws)
        for j, v in enumerate(spans):
            if supports[3][j] >= 3 and exps[0] ** (v - 2) == exps[1]:
                return na("third layer: r_1^(|V_j| - 2) != r_2", f"{h}; row {j} of W_3 reaches {v} first-layer "
                          f"neurons through W_2 and r_1^{v - 2} = r_2 = {exps[1]}: its pre-activation could be "
                          "a norm form with linear factors in several variables, which is not excluded")
    proofs, why = _rank_proofs(Ws, hidden, n, deadline)
    if proofs is None:
        return na("weights of rank n", f"{h}; {why}")
    return _deep_identifiable(ws, hidden, n, bias, exps, proofs, supports, betas, spans, certificate, fmt)


def _row_support_refusal(supports: dict, betas: list, exps: list, bias: bool, h: str, na):
    """The refusal (``na(...)``) of :func:`deep_decision` when a row of W_2 (or W_3) has a zero pattern the
    Jacobian-factor argument excludes, else None: the zero patterns are free, and they name the
    hypothesis users most often miss."""
    for k, sup in supports.items():
        for j, s in enumerate(sup):
            beta = betas[j] if k == 2 else fmpq(0)
            if s == 0:
                return na("hidden weights of rank n", f"{h}; row {j} of W_{k} is zero (an inactive neuron in hidden "
                          f"layer {k}; submodels remove it)")
            if s == 2 and beta == 0:
                return na(f"rows of W_{k}: 1 or >= 3 nonzero entries" + (" (2 with a bias off the centre)" if bias
                                                                        else ""),
                          f"{h}; row {j} of W_{k} has exactly two nonzero entries"
                          f"{' and its centred bias b_2j + kappa_1 (row sum) - e_2 is 0' if bias else ''}, so its "
                          "pre-activation "
                          f"u z_a^r + v z_b^r splits into {exps[k - 2]} linear factors besides the layer below's, and "
                          f"the Jacobian's factors do not single out W_{k - 1}")
            if s == 1 and beta != 0:
                return na("rows of W_2: one nonzero entry only with a bias at the centre",
                          f"{h}; row {j} of W_2 has one nonzero entry and a centred bias beta = {beta} != 0, so its "
                          f"pre-activation u z^r + beta splits into {exps[0]} parallel "
                          "factors besides the first layer's, and the Jacobian's factors do not single out W_1")
    return None


def _deep_identifiable(ws: list, hidden: int, n: int, bias: bool, exps: list, proofs, supports: dict, betas: list,
                       spans, certificate: bool, fmt: str):
    """The "identifiable" answer of :func:`deep_decision` once every hypothesis holds: its condition, reason
    and certificate."""
    h = f"{hidden} hidden layers"
    dim = hidden * n
    monos = ", ".join(f"t^{r}" for r in exps)
    cond = (f"Jacobian factors ({h}, {'biases' if bias else 'no biases'}, monomials {monos}): every weight matrix "
            f"of rank {n}; every row of W_2{' and W_3' if hidden == 3 else ''} has 1 or >= 3 nonzero entries"
            + (" (or 2 with a bias off the centre; 1 only with the bias at the centre)" if bias else "")
            + ("; r_1^(|V_j| - 2) != r_2 for the rows of W_3" if hidden == 3 else ""))
    reason = (f"fibre = orbit over C: the degree-1 factors of the Jacobian's maximal minors are the first layer's "
              f"pre-activations, which pins the first layer, and the rest follows layer by layer up to monomial "
              f"matrices; orbit a torus of dimension {dim} (x S_{n}^{hidden})")
    cert = None
    if certificate:
        cert = {"format": fmt, "method": METHOD, "verdict": "identifiable", "widths": ws,
                "degrees": exps, "bias": bias, "full_rank": proofs, "w2_row_supports": supports[2],
                "w2_centred_biases": [str(b) for b in betas],
                "orbit_size": None, "orbit_dimension": dim}
        if hidden == 3:
            cert.update({"w3_row_supports": supports[3], "w3_row_spans": spans})
    return "identifiable", reason, cond, {"orbit_dimension": dim, "fibre_dimension": 0, "certificate": cert}


def _layer_scalings(act, bias: bool):
    """The scalings lambda of one hidden layer's neurons that can occur in the fibre over C.

    For theta' in the fibre every first pre-activation is l'_j = lambda l_i + c with
    s'(lambda t + c) = kappa s'(t) (docs/identifiability.md, "Deep networks, general activations").
    With u = t - mu (mu the centre of s, :attr:`~symeq.activations.Activation.shift`) and
    tau(u) = s(u + mu): c = mu (1 - lambda) and lambda^(m - j) = 1 for every tau_j != 0, 1 <= j < m,
    i.e. lambda^g = 1 with g the gcd of those m - j (g = 0: tau is a monomial plus a constant, every
    lambda).  Without biases also c = 0 (so lambda = 1 when mu != 0) and the constant beta of
    s(lambda t + c) = alpha s(t) + beta must vanish.

    Returns
    -------
    (info, None) with info = {"degree", "centre", "g", "lambdas"} (``lambdas`` a list of fmpq or
    "all"), or (None, reason) when a scaling that can occur is not in symeq's latent group.

    >>> from symeq.activations import tanh_series, polynomial
    >>> _layer_scalings(tanh_series(3), True)[0]["lambdas"]
    [1, -1]
    >>> _layer_scalings(polynomial([0, -1, 0, 0, "1/4"]), True)[1]     # s' = t^3 - 1: g = 3
    'lambda^3 = 1 has complex solutions (s(t) = 1/4 t^4 - t, centre 0): complex fibre points outside the latent group'
    """
    if act is None or not act.is_polynomial or act.degree < 2:
        return None, f"activation {act!r} is not a polynomial of degree >= 2"
    m, mu = act.degree, act.shift
    tau = act._reduced()
    g = reduce(math.gcd, [m - j for j in range(1, m) if tau[j] != 0], 0)
    name = f"s(t) = {_poly_text(act.coeffs)}, centre {mu}"
    info = {"degree": m, "centre": mu, "g": g}
    if g == 0:  # c (t - mu)^m + tau_0: every lambda, through the offset mu (1 - lambda) and beta
        if bias or (mu == 0 and tau[0] == 0):
            if not act.continuous(bias):
                return None, f"every scaling occurs ({name}) but the latent group is {act.group_name(bias)}"
            return dict(info, lambdas="all"), None
        if mu != 0:
            return dict(info, lambdas=[fmpq(1)]), None
        return None, f"without biases the constant of {name} makes lambda^{m} = 1 scalings with an offset"
    if not bias and mu != 0:
        return dict(info, lambdas=[fmpq(1)]), None  # c = mu (1 - lambda) must be a zero bias
    if g >= 3:
        return None, (f"lambda^{g} = 1 has complex solutions ({name}): complex fibre points outside the latent "
                      "group")
    if g == 2:
        ok = act.affine_admissible(-1) if bias else act.admissible(-1)
        if ok is None:
            return None, f"lambda = -1 occurs ({name}) but is not in the latent group {act.group_name(bias)}"
        return dict(info, lambdas=[fmpq(1), fmpq(-1)]), None
    return dict(info, lambdas=[fmpq(1)]), None


def _poly_text(coeffs) -> str:
    """'1/4 t^4 - t' for [0, -1, 0, 0, 1/4]."""
    out = ""
    for k in range(len(coeffs) - 1, -1, -1):
        c = coeffs[k]
        if c == 0:
            continue
        mag = -c if c < 0 else c
        num = "" if (mag == 1 and k > 0) else str(mag) + (" " if k > 0 else "")
        term = num + ("" if k == 0 else "t" if k == 1 else f"t^{k}")
        out += (("-" if c < 0 else "") + term) if not out else ((" - " if c < 0 else " + ") + term)
    return out or "0"


def _layer_entry(info: dict) -> dict:
    """The certificate's ``layers`` entry of one general-activation layer (degree, centre, g, lambdas)."""
    lambdas = info["lambdas"]
    return {"degree": info["degree"], "centre": str(info["centre"]), "g": info["g"],
            "lambdas": "all" if lambdas == "all" else [str(x) for x in lambdas]}


def _general_layers(model, hidden, bias, deadline, certificate, fmt, na):
    """Two or three hidden layers with any polynomial activations of degree >= 2.

    Hypotheses (docs/identifiability.md, "Deep networks, general activations"): widths
    (n0, n, ..., n, nL) with n0 >= n <= nL, every weight matrix of rank n, every row of W_2 (and W_3)
    with >= 3 nonzero entries (H4''), with three hidden layers m_1^(|V_j| - 2) != m_2 for every row j
    of W_3 (H5 on the top forms), and for each layer the scalings that can occur
    (:func:`_layer_scalings`) in symeq's latent group.
    """
    layers = model.layers
    h = f"{hidden} hidden layers"
    ws = list(model.widths)  # checked by deep_decision: (n0, n, ..., n, nL)
    n = ws[1]
    infos = []
    for i in range(hidden):
        info, why = _layer_scalings(layers[i].activation, bias)
        if info is None:
            return na(f"hidden layer {i + 1}: scalings in the latent group", f"{h}; hidden layer {i + 1}: {why}")
        infos.append(info)
    Ws = [mat_rows(l.weight) for l in layers]
    supports = {k: [sum(1 for x in row if x != 0) for row in Ws[k - 1]] for k in range(2, hidden + 1)}
    for k, sup in supports.items():
        for j, s in enumerate(sup):
            if s < 3:
                return na(f"rows of W_{k}: >= 3 nonzero entries (H4'')",
                          f"{h}; row {j} of W_{k} has {s} nonzero entr{'y' if s == 1 else 'ies'}: with general "
                          "activations its pre-activation can have degree-1 factors besides the first layer's "
                          "(only >= 3 entries make its top form a smooth Fermat form, irreducible)")
    spans = None
    if hidden == 3:
        # the top form of a third pre-activation minus a constant is the monomial network's
        # G_j(z^(m_1)); a linear factor in >= 2 variables would make the norm of degree m_1^(s-2) in
        # y = z^(m_1) equal the irreducible G_j, impossible when m_1^(|V_j| - 2) != m_2
        m1, m2 = infos[0]["degree"], infos[1]["degree"]
        spans = _third_layer_spans(Ws)
        for j, v in enumerate(spans):
            if m1 ** (v - 2) == m2:
                return na("third layer: m_1^(|V_j| - 2) != m_2 (H5)", f"{h}; row {j} of W_3 reaches {v} first-layer "
                          f"neurons through W_2 and m_1^{v - 2} = m_2 = {m2}: the top form of its pre-activation "
                          "could be a norm form with linear factors in several variables, which is not excluded")
    proofs, why = _rank_proofs(Ws, hidden, n, deadline)
    if proofs is None:
        return na("weights of rank n", f"{h}; {why}")
    continuous = [info["lambdas"] == "all" for info in infos]
    dim = n * sum(continuous)
    size = None
    if not any(continuous):
        # the stabiliser is trivial: the rows of [W_1 | b_1 - mu_1] and of the invertible W_2 (W_3) are
        # nonzero and pairwise non-proportional, so k . theta = theta forces k = 1
        size = 1
        for info in infos:
            size *= math.factorial(n) * len(info["lambdas"]) ** n
    lam = ["all" if i["lambdas"] == "all" else "{" + ", ".join(map(str, i["lambdas"])) + "}" for i in infos]
    gs = ", ".join(str(i["g"]) for i in infos)
    rows_text = "W_2 and W_3" if hidden == 3 else "W_2"
    cond = (f"Jacobian factors ({h}, {'biases' if bias else 'no biases'}, general polynomial activations): every "
            f"weight matrix of rank {n}; every row of {rows_text} has >= 3 nonzero entries"
            + ("; m_1^(|V_j| - 2) != m_2 for the rows of W_3" if hidden == 3 else "")
            + f"; the scalings lambda of the hidden layers ({', '.join(lam)}; g = {gs}) are in the latent group")
    reason = ("fibre = orbit over C: the degree-1 factors of the Jacobian's maximal minors are the first layer's "
              "pre-activations minus the roots of s_1', which pins the first layer up to permutations and the "
              "scalings lambda with s_1'(lambda t + c) ~ s_1'(t); the next layers follow the same way"
              + (f"; the fibre has {size} points" if size is not None else f"; orbit of dimension {dim}"))
    cert = None
    if certificate:
        cert = {"format": fmt, "method": METHOD, "verdict": "identifiable", "widths": ws, "bias": bias,
                "activations": "general",
                "layers": [_layer_entry(i) for i in infos],
                "full_rank": proofs, "w2_row_supports": supports[2],
                "orbit_size": None if size is None else str(size), "orbit_dimension": dim}
        if hidden == 3:
            cert.update({"w3_row_supports": supports[3], "w3_row_spans": spans})
    return "identifiable", reason, cond, {"orbit_dimension": dim, "fibre_dimension": 0, "orbit_size": size,
                                          "certificate": cert}


def _w2_betas(layers, Ws, bias):
    """beta_j = b_2j + kappa_1 (row sum of W_2) - s_2: neuron j's second pre-activation constant
    around the activation's centre (0 without biases)."""
    if not bias:
        return [fmpq(0)] * len(Ws[1])
    s2 = layers[1].activation.shift
    kappa1 = layers[0].activation(layers[0].activation.shift)
    return [fmpq(b) + kappa1 * sum(row, fmpq(0)) - s2 for b, row in zip(layers[1].bias, Ws[1])]


def _widening(model, bias, deadline, certificate, fmt, na, one_layer):
    """Two hidden layers that widen, widths (n0, n, n2, n3) with n0 >= n < n2 <= n3
    (docs/identifiability.md, "Deep networks, a widening last hidden layer").

    Hypotheses: rank W_1 = rank W_2 = n, rank W_3 = n2 (W_3 injective); for monomial activations every
    row of W_2 with >= 3 nonzero entries, 2 with beta_j != 0 or 1 with beta_j = 0, for general ones
    (any polynomial of degree >= 2 in a layer) >= 3 entries (H4'') and the first layer's scalings in
    the latent group (K, :func:`_layer_scalings`); and the top block
    ``u -> W_3 s_2(W_2 u + b~_2) + b_3`` on C^n identifiable (one hidden layer: ``one_layer``,
    Kruskal).  The Jacobian's maximal minors are ``det D_1 det W_1[:, C]`` times sums whose gcd, as
    W_3 is injective, is the gcd of ``det W_2[S, :] prod_{j in S} d_2j`` over the row bases S of W_2:
    its degree-1 factors are first-layer ones only, so the first layer is pinned as for equal widths,
    and the rest is the top block's identifiability.
    """
    layers = model.layers
    ws = list(model.widths)
    n, n2 = ws[1], ws[2]
    h = f"2 hidden layers of widths {ws} (widening)"
    exps = [_monomial_exponent(l.activation, bias) for l in layers[:-1]]
    general = None in exps
    if one_layer is None:
        return na("widening: the top block's decision", f"{h}: no one-hidden-layer decision was given for the top "
                  "block")
    if n2 > MAX_WIDTH or n * ws[0] + n2 * n + ws[3] * n2 > MAX_ENTRIES or \
            any(l.activation is not None and l.activation.is_polynomial and l.activation.degree > MAX_DEGREE
                for l in layers[:-1]):
        return na("size guard", f"{h}: beyond the size guard ({MAX_WIDTH} neurons, {MAX_ENTRIES} weights, degree "
                  f"{MAX_DEGREE})")
    info1 = None
    if general:
        for i in (0, 1):
            act = layers[i].activation
            if act is None or not act.is_polynomial or act.degree < 2:
                return na("widening: polynomial activations of degree >= 2",
                          f"{h}: hidden layer {i + 1}'s activation {act!r} is not a polynomial of degree >= 2")
        info1, why = _layer_scalings(layers[0].activation, bias)
        if info1 is None:
            return na("hidden layer 1: scalings in the latent group", f"{h}; hidden layer 1: {why}")
    Ws = [mat_rows(l.weight) for l in layers]
    betas = _w2_betas(layers, Ws, bias) if not general else None
    supports = [sum(1 for x in row if x != 0) for row in Ws[1]]
    for j, s in enumerate(supports):
        if general and s < 3:
            return na("rows of W_2: >= 3 nonzero entries (H4'')",
                      f"{h}; row {j} of W_2 has {s} nonzero entr{'y' if s == 1 else 'ies'}: with general activations "
                      "its pre-activation can have degree-1 factors besides the first layer's")
        if not general:
            beta = betas[j]
            if s == 0 or (s == 2 and beta == 0) or (s == 1 and beta != 0):
                return na("rows of W_2: >= 3 nonzero entries, 2 with a bias off the centre, 1 with the bias at it",
                          f"{h}; row {j} of W_2 has {s} nonzero entr{'y' if s == 1 else 'ies'} (centred bias {beta}): "
                          "its pre-activation can have a degree-1 factor that is no first-layer pre-activation")
    proofs = {}
    for name, rows, k, what in (("W1_columns", Ws[0], n, "W_1"), ("W2_rows", [list(c) for c in zip(*Ws[1])], n, "W_2"),
                                ("W3_rows", [list(c) for c in zip(*Ws[2])], n2, "W_3")):
        cols = _independent_columns(_integral_rows(rows), k, deadline)
        if cols is None:
            return na("widening: rank W_1 = rank W_2 = n, rank W_3 = n2",
                      f"{h}; {what} is not of rank {k} (or not certified modulo two 61-bit primes)")
        proofs[name] = cols
    from ..models import DenseLayer, Model

    # the top block's input is u = sigma_1(first pre-activations): with a constant kappa_1 = sigma_1(e_1)
    # of a monomial up to a constant, u = c_1 z^r + kappa_1 and kappa_1 moves into b_2 (general
    # activations keep sigma_1 whole: u = sigma_1(z) covers C^n as it is)
    kappa1 = (layers[0].activation(layers[0].activation.shift) if bias and not general else fmpq(0))
    b2 = [fmpq(b) + kappa1 * sum(row, fmpq(0)) for b, row in zip(layers[1].bias, Ws[1])]
    b3 = [fmpq(b) for b in layers[2].bias]
    if bias and not any(b2) and not any(b3):
        return na("widening: a top block with biases", f"{h}: the top block's biases are all zero, and its "
                  "one-hidden-layer certificate would cover bias-free parameters only")
    top = Model(n, [DenseLayer(layers[1].weight, b2, layers[1].activation, has_bias=bias),
                    DenseLayer(layers[2].weight, b3, None, has_bias=bias)], name="top block")
    deadline.check("deciding the top block (one hidden layer)")
    remaining = None if deadline.seconds is None else max(deadline.seconds - deadline.elapsed(), 0.001)
    td = one_layer(top, timeout=remaining, certificate=certificate)
    if td.status != "identifiable":
        extra = (" (a fibre point of the top block outside its orbit gives one of theta's, on top of the same first "
                 "layer: theta is then not identifiable either, which this certificate does not record)"
                 if td.status == "not-identifiable" else "")
        return na("widening: the top block identifiable", f"{h}; the top block u -> W_3 s_2(W_2 u + b~_2) + b_3 "
                  f"(one hidden layer of width {n2} on C^{n}) is {td.status}: {td.reason}{extra}")
    return _widening_identifiable(ws, bias, general, exps, info1, td, proofs, supports, betas, certificate, fmt)


def _widening_identifiable(ws: list, bias: bool, general: bool, exps: list, info1, td, proofs: dict, supports: list,
                           betas, certificate: bool, fmt: str):
    """The "identifiable" answer of :func:`_widening` once every hypothesis holds and the top block ``td`` is
    identifiable: the orbit, the condition, the reason and the certificate."""
    n, n2 = ws[1], ws[2]
    first_continuous = (not general) or info1["lambdas"] == "all"
    dim = (n if first_continuous else 0) + td.orbit_dimension
    size = None
    if not first_continuous and td.orbit_size is not None:
        size = math.factorial(n) * len(info1["lambdas"]) ** n * td.orbit_size
    kind = "general polynomial activations" if general else f"monomials t^{exps[0]}, t^{exps[1]}"
    rows_cond = ("every row of W_2 has >= 3 nonzero entries" if general or not bias else
                 "every row of W_2 has >= 3 nonzero entries (or 2 with a bias off the centre; 1 only with the bias "
                 "at the centre)")
    cond = (f"Jacobian factors (2 hidden layers widening {n} < {n2}, {'biases' if bias else 'no biases'}, {kind}): "
            f"rank W_1 = rank W_2 = {n}, rank W_3 = {n2}; {rows_cond}"
            + (f"; the first layer's scalings ({'all' if info1['lambdas'] == 'all' else info1['lambdas']}) are in "
               "the latent group" if general else "")
            + f"; the top block is identifiable ({td.condition})")
    reason = ("fibre = orbit over C: the degree-1 factors of the Jacobian's maximal minors are the first layer's "
              "(W_3 injective), which pins the first layer up to its latent group; the top block is identifiable "
              "(one hidden layer); " + (f"the fibre has {size} points" if size is not None
                                        else f"orbit of dimension {dim}"))
    cert = None
    if certificate:
        cert = {"format": fmt, "method": METHOD, "verdict": "identifiable", "widths": ws, "bias": bias,
                "full_rank": proofs, "w2_row_supports": supports, "top": td.certificate,
                "orbit_size": None if size is None else str(size), "orbit_dimension": dim}
        if general:
            cert.update({"activations": "general", "layers": [_layer_entry(info1)]})
        else:
            cert.update({"degrees": exps, "w2_centred_biases": [str(b) for b in betas]})
    return "identifiable", reason, cond, {"orbit_dimension": dim, "fibre_dimension": 0, "orbit_size": size,
                                          "certificate": cert}


def _widening3(model, bias, deadline, certificate, fmt, na, one_layer):
    """Three hidden layers, the last one widening: widths (n0, n, n, n3, n4) with n0 >= n < n3 <= n4
    (docs/identifiability.md, "Deep networks, a widening last hidden layer": three hidden layers).

    Step 2 as for three equal hidden layers (with W_4 injective the gcd of the maximal minors is
    Pi d_1 Pi d_2 gcd_S(det W_3[S, :] Pi_{j in S} d_3j), so the rows of W_2 and of W_3 are asked what the
    equal-width theorem asks of them), which pins the first layer; the tail u -> network with two
    hidden layers (n, n, n3, n4) is then decided by the widening theorem (nested as ``tail``).
    """
    layers = model.layers
    ws = list(model.widths)
    n = ws[1]
    h = f"3 hidden layers of widths {ws} (widening last)"
    if n * ws[0] + n * n + ws[3] * n + ws[4] * ws[3] > MAX_ENTRIES or ws[3] > MAX_WIDTH or \
            any(l.activation is None or not l.activation.is_polynomial or l.activation.degree < 2 or
                l.activation.degree > MAX_DEGREE for l in layers[:-1]):
        return na("three hidden layers widening: polynomial activations within the size guard",
                  f"{h}: every hidden activation must be a polynomial of degree 2..{MAX_DEGREE}, within the size guard")
    exps = [_monomial_exponent(l.activation, bias) for l in layers[:-1]]
    general = bias or None in exps  # three monomial layers are certified bias-free; else the top-form path
    info1 = None
    if general:
        info1, why = _layer_scalings(layers[0].activation, bias)
        if info1 is None:
            return na("hidden layer 1: scalings in the latent group", f"{h}; hidden layer 1: {why}")
    Ws = [mat_rows(l.weight) for l in layers]
    supports = {k: [sum(1 for x in row if x != 0) for row in Ws[k - 1]] for k in (2, 3)}
    for k, sup in supports.items():
        for j, s in enumerate(sup):
            if (general and s < 3) or (not general and s in (0, 2)):
                return na(f"rows of W_{k}: " + (">= 3 nonzero entries" if general else "1 or >= 3 nonzero entries"),
                          f"{h}; row {j} of W_{k} has {s} nonzero entr{'y' if s == 1 else 'ies'}: its pre-activation "
                          "can have degree-1 factors besides the first layer's")
    degs = [l.activation.degree for l in layers[:-1]]
    spans = _third_layer_spans(Ws)
    for j, v in enumerate(spans):
        if supports[3][j] >= 3 and degs[0] ** (v - 2) == degs[1]:
            return na("third layer: m_1^(|V_j| - 2) != m_2 (H5)", f"{h}; row {j} of W_3 reaches {v} first-layer "
                      f"neurons through W_2 and m_1^{v - 2} = m_2 = {degs[1]}: a norm form is not excluded")
    cols = _independent_columns(_integral_rows(Ws[0]), n, deadline)
    if cols is None:
        return na("rank W_1 = n", f"{h}; W_1 is not of rank {n} (or not certified modulo two 61-bit primes)")
    from ..models import DenseLayer, Model

    # the tail's input is u = sigma_1(first pre-activations), onto C^n; three monomial layers come
    # without biases, so no constant of sigma_1 moves into b_2
    tail = Model(n, [DenseLayer(layers[1].weight, list(layers[1].bias), layers[1].activation),
                     DenseLayer(layers[2].weight, list(layers[2].bias), layers[2].activation),
                     DenseLayer(layers[3].weight, list(layers[3].bias), None)], name="tail")
    if any(b != 0 for l in tail.layers for b in l.bias) != bias:
        return na("three hidden layers widening: a tail with biases", f"{h}: the tail's biases are all zero, and its "
                  "certificate would cover bias-free parameters only")
    status, reason, cond, fields = _widening(tail, bias, deadline, certificate, fmt, na, one_layer)
    if status != "identifiable":
        return na("three hidden layers widening: the tail identifiable", f"{h}; the tail (two hidden layers "
                  f"{[n] + ws[2:]} on C^{n}) is not certified: {reason}")
    first_continuous = (not general) or info1["lambdas"] == "all"
    dim = (n if first_continuous else 0) + fields["orbit_dimension"]
    size = None
    if not first_continuous and fields.get("orbit_size") is not None:
        size = math.factorial(n) * len(info1["lambdas"]) ** n * fields["orbit_size"]
    cond3 = (f"Jacobian factors (3 hidden layers widening {n} < {ws[3]}, {'biases' if bias else 'no biases'}): rank "
             f"W_1 = {n}; every row of W_2 and W_3 has " + (">= 3" if general else "1 or >= 3")
             + " nonzero entries; m_1^(|V_j| - 2) != m_2 for the rows of W_3"
             + ("; the first layer's scalings are in the latent group" if general else "")
             + f"; the tail is identifiable ({cond})")
    reason3 = ("fibre = orbit over C: with W_4 injective the degree-1 factors of the Jacobian's maximal minors are "
               "the first layer's, which pins the first layer; the tail (two hidden layers, widening) is "
               "identifiable; " + (f"the fibre has {size} points" if size is not None else f"orbit of dimension {dim}"))
    cert = None
    if certificate:
        cert = {"format": fmt, "method": METHOD, "verdict": "identifiable", "widths": ws, "bias": bias,
                "full_rank": {"W1_columns": cols}, "w2_row_supports": supports[2], "w3_row_supports": supports[3],
                "w3_row_spans": spans, "tail": fields["certificate"],
                "orbit_size": None if size is None else str(size), "orbit_dimension": dim}
        if general:
            cert.update({"activations": "general", "layers": [_layer_entry(info1)]})
        else:
            cert["degrees"] = exps
    return "identifiable", reason3, cond3, {"orbit_dimension": dim, "fibre_dimension": 0, "orbit_size": size,
                                            "certificate": cert}
