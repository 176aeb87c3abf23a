"""Identifiability by tensor decomposition: Kruskal certificates for one hidden layer.

For a one-hidden-layer model f(x) = W_2 sigma(W_1 x + b_1) + b_2 with a polynomial activation
sigma(t) = sum_m a_m t^m of degree d >= 2, deciding identifiability at theta is linear algebra
(docs/identifiability.md):

1. **Top degree.**  The degree-d homogeneous part of f is a_d sum_j v_j (w_j . x)^d, i.e. the
   partially symmetric tensor T = sum_j v_j (x) w_j^{(x) d} (v_j column j of W_2, w_j row j of W_1).
   Reshaped into a 3-way tensor with modes A = V (.) W^{(.)a}, B = W^{(.)b}, C = W^{(.)c}
   (a + b + c = d; (.) is the column-wise Khatri-Rao product), Kruskal's theorem says: if
   k_A + k_B + k_C >= 2R + 2 (k = Kruskal rank, R = n_1 neurons), then T has rank R and its
   rank-one terms are unique (Kruskal 1977; Sidiropoulos & Bro 2000 for the version over any
   field).  Every theta' in the fibre gives a decomposition of the same T with R terms, so
   w'_{pi(j)} = lambda_j w_j and v'_{pi(j)} = lambda_j^{-d} v_j.  The k-ranks are bounded from
   below by cheap certificates: full column rank (a nonzero maximal minor, found modulo a large
   prime -- rank mod p <= rank over Q, so full rank mod p proves full rank over Q), every maximal
   minor nonzero for a matrix with fewer rows than columns (k-rank = its rows), the Khatri-Rao lemma k(A (.) B) >= min(k_A + k_B - 1, R), no two proportional columns (k >= 2),
   no zero column (k >= 1).  When they do not reach 2R + 2 the method is *not applicable*.
2. **Lower degrees.**  The degree-k part (k < d) is sum_j v_j (w_j . x)^k times
   lambda_j^{k-d} s_k(b'_j) - s_k(b_j), with s_k(b) = sigma^{(k)}(b) / k!.  Where the terms
   v_j (x) w_j^{(x)k} are linearly independent (V (.) W^{(.)k} of full column rank, again
   certified), every bracket vanishes: a *per-neuron system* in (lambda_j, b'_j).  With biases the
   degree-0 part only fixes b'_2, and k = d-1 gives b'_j - s = lambda_j (b_j - s) (s the shift of
   sigma), leaving univariate polynomials P_k(lambda) whose common nonzero roots are the neuron's
   solutions.  Without biases b' = b = 0 and the systems are a_k (1 - lambda^{d-k}) = 0.
3. **Verdict.**  The fibre has R! * prod_j |S_j| points over C (S_j: solutions of neuron j; the
   rank-one terms are distinct, so distinct choices give distinct points).  It is the orbit of the
   latent group K exactly when every S_j is K's set of admissible scalings (+-1 for odd
   activations, 1 for generic ones, every alpha != 0 for monomials).  A solution outside K that
   satisfies *all* the per-neuron equations is a fibre point outside the orbit whatever Kruskal
   says: an exact witness of non-identifiability.

Deep networks go to :mod:`symeq.fibre.deep`: a Jacobian-factor certificate for two hidden layers
(monomial activations, with or without biases, widths (n0, n, n, n3) with n0 >= n <= n3;
docs/identifiability.md, "Deep networks").  Every other deep model is reported as not applicable, with the hypothesis that
failed, and :func:`decide` falls back to Groebner bases.

Examples
--------
>>> from symeq.models import Model, DenseLayer
>>> from symeq.activations import tanh_series
>>> m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], tanh_series(3)),
...               DenseLayer([[2, -1], [1, 1]], [1, 0], None)])
>>> r = tensor_identifiability(m)
>>> r.status, r.orbit_size, r.fibre_points
('identifiable', 8, 8)
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field

from flint import fmpq, fmpq_poly, nmod_mat

from ..budget import Deadline
from ..errors import BudgetExceeded, InputError
from ..layers.registry import all_support
from ..numbers import mat_rows
from .deep import deep_decision
from .ideal import _needs_gauge, _resolve_bias
from .orbit import _scalings, compare_with_orbit
from .reals import real_root_count

__all__ = ["FORMAT", "TensorDecision", "tensor_identifiability", "decide", "MAX_NEURONS", "MAX_MODE_ENTRIES"]

#: certificate format written by :func:`tensor_identifiability`, checked by :mod:`symeq_check`
FORMAT = "symeq-identifiability/1"
#: primes for the modular rank: a full rank modulo p proves full rank over Q (never the converse)
PRIMES = (2305843009213693951, 4611686018427387847)  # 2^61 - 1 and the largest prime below 2^62
#: size guards, checked before any work starts
MAX_NEURONS = 1024
MAX_DEGREE = 24
#: an explicit Khatri-Rao matrix (rows x R) is built only below this many entries
MAX_MODE_ENTRIES = 4_000_000
#: subsets of columns examined for an "all-minors" k-rank proof
MAX_SUBSETS = 5000
#: pairs of columns examined for "no two proportional columns"
MAX_PAIRS = 200_000


@dataclass
class TensorDecision:
    """The tensor method's verdict at theta.

    Attributes
    ----------
    status : "identifiable", "not-identifiable", "not-applicable" or "unknown" (budget spent)
    reason : one sentence
    condition : which condition decided (Kruskal sum, failed k-rank, per-neuron witness ...)
    orbit_size : points of the orbit K . theta when K is finite (None for monomial activations,
        whose orbit is a torus of dimension ``orbit_dimension``)
    orbit_dimension : 0, or the number of neurons with a continuous scaling
    fibre_points : distinct points of the fibre over ``over`` (R: real points) when it is finite and known exactly
    fibre_dimension : dimension of the fibre modulo the continuous scalings (0 when it is finite
        after fixing them, like the gauge-fixed dimension of :mod:`symeq.fibre.orbit`), when known
    seconds : wall time
    certificate : a ``symeq-identifiability/1`` dict (identifiable / not-identifiable), else None
    witness : the per-neuron solution outside K (not-identifiable)
    """

    status: str
    reason: str
    condition: str
    orbit_size: int | None = None
    orbit_dimension: int = 0
    fibre_points: int | None = None
    fibre_dimension: int | None = None
    seconds: float = 0.0
    certificate: dict | None = field(default=None, repr=False)
    witness: dict | None = None
    kruskal: dict | None = field(default=None, repr=False)
    #: the field the status is about: "R" (real parameters, the default) or "C" (``field="C"``)
    over: str = "R"
    #: distinct complex / real points of the fibre when known (Kruskal and the per-neuron counts)
    complex_fibre_points: int | None = None
    real_fibre_points: int | None = None
    #: over R: a per-neuron solution outside K that is not real (it counts only over C)
    complex_witness: dict | None = None

    def to_json(self) -> dict:
        """A JSON-ready dict (big integers as strings)."""
        return {"method": "tensor", "engine": "tensor", "field": "QQ", "exact": True,
                "status": self.status, "reason": self.reason, "condition": self.condition,
                "orbit_size": self.orbit_size, "orbit_dimension": self.orbit_dimension,
                "fibre_points": self.fibre_points, "dimension": self.fibre_dimension,
                "over": self.over, "complex_fibre_points": self.complex_fibre_points,
                "real_fibre_points": self.real_fibre_points, "seconds": round(self.seconds, 4),
                "kruskal": None if self.kruskal is None else {k: v for k, v in self.kruskal.items() if k != "modes"},
                "witness": self.witness, "complex_witness": self.complex_witness}


# ----------------------------------------------------------------------------- exact helpers

def _q(x) -> str:
    return str(fmpq(x))


def _poly_json(p: fmpq_poly) -> list[str]:
    return [str(c) for c in p.coeffs()]


def _monic(p: fmpq_poly) -> fmpq_poly:
    return p / p.coeffs()[-1] if p != 0 else p


def _strip_x(p: fmpq_poly) -> fmpq_poly:
    """p without its factors lambda (lambda = 0 is never a scaling)."""
    x = fmpq_poly([0, 1])
    while p != 0 and p(0) == 0:
        p = p // x
    return p


def _distinct_roots(p: fmpq_poly) -> int:
    """Number of distinct complex roots of p != 0 (its degree minus that of gcd(p, p'))."""
    if p.degree() <= 0:
        return 0
    return p.degree() - p.gcd(p.derivative()).degree()


def _gcd_all(polys) -> fmpq_poly | None:
    """Monic gcd of the nonzero polys, lambda factors removed; None when every poly is zero."""
    g = None
    for p in polys:
        if p == 0:
            continue
        g = p if g is None else g.gcd(p)
    return None if g is None else _monic(_strip_x(g))


class _Factors:
    """V (columns v_j) and W (rows w_j) of one hidden layer, scaled to integers column by column."""

    def __init__(self, model, deadline):
        first, last = model.layers
        self.W = [[fmpq(x) for x in row] for row in mat_rows(first.weight)]         # R x n0
        W2 = mat_rows(last.weight)
        self.V = [[fmpq(W2[i][j]) for i in range(len(W2))] for j in range(len(self.W))]  # R x n2
        self.R, self.n0, self.n2 = len(self.W), model.input_dim, len(W2)
        # scaling a column by a nonzero number changes neither a rank nor a k-rank
        self.Vi = [self._integral(c) for c in self.V]
        self.Wi = [self._integral(c) for c in self.W]
        self.deadline = deadline
        self.memo: dict = {}

    @staticmethod
    def _integral(col):
        den = 1
        for x in col:
            den = den * int(x.q) // math.gcd(den, int(x.q))
        return [int(x.p) * (den // int(x.q)) for x in col]

    def rows(self, factors: str):
        """Row indices of the Khatri-Rao matrix of ``factors`` ("V" first, then "W"s): one per
        multiset of W indices (permuted copies are equal rows)."""
        nw = factors.count("W")
        ws = list(itertools.combinations_with_replacement(range(self.n0), nw))
        if factors.startswith("V"):
            return [(i,) + w for i in range(self.n2) for w in ws]
        return ws

    def n_rows(self, factors: str) -> int:
        nw = factors.count("W")
        return (self.n2 if factors.startswith("V") else 1) * math.comb(self.n0 + nw - 1, nw)

    def entry(self, factors: str, row, j: int) -> int:
        e = 1
        for f, i in zip(factors, row):
            e *= (self.Vi if f == "V" else self.Wi)[j][i]
        return e

    # -- k-rank lower bounds with their proofs ------------------------------------------------
    def full_rank(self, factors: str):
        """R rows with a nonzero maximal minor, or None (found modulo a prime; exact)."""
        R = self.R
        if self.n_rows(factors) < R or self.n_rows(factors) * R > MAX_MODE_ENTRIES:
            return None
        rows = self.rows(factors)
        for p in PRIMES:
            self.deadline.check("computing a modular rank")
            T = nmod_mat(R, len(rows), [self.entry(factors, r, j) % p for j in range(R) for r in rows], p)
            E, rank = T.rref()
            if rank == R:
                pivots = []
                for i in range(R):
                    pivots.append(next(c for c in range(len(rows)) if int(E[i, c]) != 0))
                return [list(rows[c]) for c in pivots]
        return None

    def all_minors(self, factors: str) -> bool:
        """Every m columns of the m-row matrix V or W independent (k-rank m): all C(R, m) maximal
        minors nonzero modulo a prime (so over Q).  Only below MAX_SUBSETS subsets."""
        m, R = self.n_rows(factors), self.R
        if math.comb(R, m) > MAX_SUBSETS:
            return False
        cols = self.Vi if factors == "V" else self.Wi
        for sub in itertools.combinations(range(R), m):
            self.deadline.check("checking maximal minors")
            if not any(nmod_mat(m, m, [cols[j][i] % p for i in range(m) for j in sub], p).det() != 0
                       for p in PRIMES):
                return False
        return True

    def nonzero_columns(self, factors: str):
        rows = self.rows(factors) if self.n_rows(factors) * self.R <= MAX_MODE_ENTRIES else []
        out = []
        for j in range(self.R):
            hit = next((r for r in rows if self.entry(factors, r, j) != 0), None)
            if hit is None:
                return None
            out.append(list(hit))
        return out

    def non_proportional(self, factors: str):
        R = self.R
        if R * (R - 1) // 2 > MAX_PAIRS or self.n_rows(factors) > 64:
            return None
        rows = self.rows(factors)
        out = []
        for j in range(R):
            self.deadline.check("looking for proportional columns")
            for k in range(j + 1, R):
                hit = None
                for r1, r2 in itertools.combinations(rows, 2):
                    if self.entry(factors, r1, j) * self.entry(factors, r2, k) != \
                            self.entry(factors, r2, j) * self.entry(factors, r1, k):
                        hit = [list(r1), list(r2)]
                        break
                if hit is None:
                    return None
                out.append([j, k] + hit)
        return out

    def krank(self, factors: str):
        """(lower bound on the Kruskal rank of the Khatri-Rao matrix of ``factors``, its proof)."""
        if factors in self.memo:
            return self.memo[factors]
        R = self.R
        best = (0, {"factors": factors, "kind": "none"})
        if len(factors) > 1:
            kl, pl = self.krank(factors[:1])
            kr, pr = self.krank(factors[1:])
            if kl >= 1 and kr >= 1:
                best = (min(kl + kr - 1, R), {"factors": factors, "kind": "khatri-rao", "left": pl, "right": pr})
        if best[0] < R:
            rows = self.full_rank(factors)
            if rows is not None:
                best = (R, {"factors": factors, "kind": "full-column-rank", "rows": rows})
        if best[0] < R and len(factors) == 1 and max(best[0], 2) < self.n_rows(factors) < R:
            if self.all_minors(factors):
                best = (self.n_rows(factors), {"factors": factors, "kind": "all-minors"})
        if best[0] < 2 and R >= 2 and len(factors) == 1:
            pairs = self.non_proportional(factors)
            if pairs is not None:
                best = (2, {"factors": factors, "kind": "no-proportional-columns", "pairs": pairs})
        if best[0] < 1:
            rows = self.nonzero_columns(factors)
            if rows is not None:
                best = (1, {"factors": factors, "kind": "nonzero-columns", "rows": rows})
        best[1]["k"] = best[0]
        self.memo[factors] = best
        return best


def _kruskal(F: _Factors, d: int) -> dict:
    """The best reshaping (a, b, c) of sum_j v_j (x) w_j^{(x)d} for Kruskal's condition."""
    R = F.R
    tried = []
    for a in range(0, d - 1):
        for b in range(1, d - a):
            c = d - a - b
            if c < b:
                continue
            modes = ["V" + "W" * a, "W" * b, "W" * c]
            ks = [F.krank(m) for m in modes]
            total = sum(k for k, _ in ks)
            ok = total >= 2 * R + 2 or (R == 1 and all(k >= 1 for k, _ in ks))
            entry = {"reshaping": modes, "k_lower": [k for k, _ in ks], "sum": total, "needed": 2 * R + 2,
                     "holds": ok, "modes": [p for _, p in ks]}
            tried.append(entry)
            if ok:
                return dict(entry, tried=[{k: v for k, v in t.items() if k != "modes"} for t in tried])
    best = max(tried, key=lambda t: t["sum"]) if tried else {"reshaping": [], "k_lower": [], "sum": 0,
                                                             "needed": 2 * R + 2, "holds": False, "modes": []}
    return dict(best, tried=[{k: v for k, v in t.items() if k != "modes"} for t in tried])


# ----------------------------------------------------------------------------- per-neuron systems

def _neuron_polys(act, b, bias: bool, d: int) -> dict:
    """{degree k: polynomial in lambda} of one neuron's equations (see the module docstring).

    With biases, degree d-1 gives b' = s + lambda (b - s) and is not listed; the others are
    P_k = sum_m tau_m C(m, k) u^(m-k) (lambda^(m-k) - lambda^(d-k)), u = b - s.  Without biases:
    a_k (1 - lambda^(d-k)) for k = 0 .. d-1.
    """
    out = {}
    if bias:
        tau, u = act._reduced(), fmpq(b) - act.shift
        for k in range(1, d - 1):
            c = [fmpq(0)] * (d - k + 1)
            for m in range(k, d + 1):
                t = tau[m] * math.comb(m, k) * u ** (m - k)
                c[m - k] += t
                c[d - k] -= t
            out[k] = fmpq_poly(c)
    else:
        a = act.coeffs
        for k in range(0, d):
            c = [fmpq(0)] * (d - k + 1)
            c[0] += a[k]
            c[d - k] -= a[k]
            out[k] = fmpq_poly(c)
    return out


def _latent(act, bias: bool):
    """K's scalings of one neuron: a list of alpha, or "all" (monomial: every alpha != 0)."""
    return "all" if _needs_gauge(act, bias) else [fmpq(a) for a in _scalings(act, bias)]


def _outside_witness(polys_all: dict, latent, F: _Factors, j: int, act, b, bias: bool, d: int,
                     real: bool = False):
    """A solution of *all* the equations of neuron j outside K, or None; ``real``: a real one only (an
    irreducible factor without a real root, counted by Sturm's theorem, is skipped)."""
    def proportional(k):
        return all(F.W[j][i] * F.W[k][i0] == F.W[k][i] * F.W[j][i0] for i in range(F.n0) for i0 in range(i))

    if not any(F.W[j]) or not any(F.V[j]) or any(proportional(k) for k in range(F.R) if k != j):
        return None  # a clone or a dead neuron: the extra point might lie in the orbit after all
    g = _gcd_all(polys_all.values())
    if latent == "all":
        return None
    if g is None:
        lam = next(fmpq(x) for x in (2, 3, 5, 7) if fmpq(x) not in latent)
        return _witness_point(F, j, act, b, bias, d, lam, None)
    _, factors = g.factor()
    for q, _ in factors:
        if q.degree() == 1:
            lam = -q.coeffs()[0] / q.coeffs()[1]
            if lam in latent:
                continue
            return _witness_point(F, j, act, b, bias, d, lam, q)
        if real and real_root_count(q) == 0:
            continue  # only complex lambda: a fibre point over C, not over R
        return _witness_point(F, j, act, b, bias, d, None, _monic(q))
    return None


def _witness_point(F, j, act, b, bias, d, lam, q):
    w = {"kind": "per-neuron", "neuron": j, "degree": d}
    if lam is not None:
        w["real"] = True
        bp = act.shift + lam * (fmpq(b) - act.shift) if bias else fmpq(0)
        w.update({"lambda": str(lam), "bias": str(bp),
                  "text": f"neuron {j + 1}: lambda = {lam}, b' = {bp} solves every per-neuron equation and is not a "
                          f"latent scaling: theta' = (lambda w_{j + 1}, b', lambda^-{d} v_{j + 1}) (b_2 adjusted) is in the "
                          "fibre and not in the orbit"})
    else:
        # lambda is irrational (possibly non-real): the point is not rational, so it is none of the
        # (rational) orbit points; "real_roots" counts the real ones exactly (Sturm)
        nreal = real_root_count(q)
        w.update({"minimal_polynomial": _poly_json(q), "real_roots": nreal, "real": nreal > 0,
                  "text": f"neuron {j + 1}: every root lambda of {q.str()} (irreducible over Q, degree {q.degree()}, "
                          f"{nreal} real root(s)) solves every per-neuron equation: an algebraic fibre point "
                          "outside the rational orbit" + ("" if nreal else " over C (no real one)")})
    return w


def _fibre_count(F, d, bias, polys, latent):
    """(complex points, dimension, real points) of the fibre when Kruskal holds and every lower degree
    is independent, else (None, None, None): R! prod |S_j| points (S_j over C, or its real part counted
    by Sturm's theorem), or one dimension per neuron with a curve of solutions."""
    R = F.R
    if not _kruskal(F, d)["holds"]:
        return None, None, None
    if any(F.krank("V" + "W" * k)[0] < R for k in (range(1, d) if bias else range(d))):
        return None, None, None
    sizes, real, dim = [], [], 0
    for ps in polys:
        g = _gcd_all(ps.values())
        if g is None:
            dim += 1
        else:
            sizes.append(_distinct_roots(g))
            real.append(real_root_count(g, nonzero=True) if g.degree() > 0 else 0)
    if latent == "all":
        return None, None, None
    if dim:
        return None, dim, None
    return math.factorial(R) * math.prod(sizes), dim, math.factorial(R) * math.prod(real)


# ----------------------------------------------------------------------------- the decision

def tensor_identifiability(model, *, timeout: float | None = None, certificate: bool = True,
                           field: str = "R") -> TensorDecision:
    """Decide identifiability of ``model``'s theta by Kruskal's theorem and per-neuron systems.

    Parameters
    ----------
    model : :class:`~symeq.models.Model`, one hidden layer with a polynomial activation of degree >= 2
        (anything else is "not-applicable")
    timeout : seconds; past it the status is "unknown"
    certificate : build the ``symeq-identifiability/1`` certificate
    field : "R" (default): about real parameters -- a per-neuron scaling lambda counts only when it is
        real (Sturm's theorem, exact); "C": about complex parameters

    Returns
    -------
    TensorDecision
        "identifiable" (fibre = orbit over ``field``, orbit size given; over R the complex count is
        given beside it), "not-identifiable" (an exact per-neuron witness, real over R),
        "not-applicable" (the sufficient condition failed -- this says nothing about
        identifiability), "unknown" (budget).

    Examples
    --------
    Two clones make Kruskal fail: not applicable (never "not identifiable").

    >>> from symeq.models import Model, DenseLayer
    >>> from symeq.activations import tanh_series
    >>> m = Model(2, [DenseLayer([[1, 2], [1, 2]], [1, 1], tanh_series(3)),
    ...               DenseLayer([[2, -1], [1, 1]], [1, 0], None)])
    >>> tensor_identifiability(m).status
    'not-applicable'
    """
    if field not in ("R", "C"):
        raise InputError(f"field must be 'R' or 'C', got {field!r}")
    t0 = time.perf_counter()
    deadline = Deadline(timeout)

    def na(cond, reason):
        return TensorDecision("not-applicable", reason, cond, seconds=time.perf_counter() - t0, over=field)

    layers = model.layers
    if not all_support(layers, "tensor-decision"):  # plain dense layers
        return na("dense layers", "the tensor method covers dense layers only")
    if len(layers) > 2:
        # deep networks: the Jacobian-factor certificate (symeq/fibre/deep.py), two hidden layers
        try:
            status, reason, cond, fields = deep_decision(model, deadline=deadline, certificate=certificate, fmt=FORMAT,
                                                         one_layer=tensor_identifiability)
        except BudgetExceeded as e:
            return TensorDecision("unknown", f"budget exceeded: {e}", "budget", seconds=time.perf_counter() - t0,
                                  over=field)
        # the Jacobian factors say identifiable (fibre = orbit over C, so over R too) or not applicable
        return TensorDecision(status, reason, cond, seconds=time.perf_counter() - t0, over=field, **fields)
    if len(layers) != 2:
        return na("one hidden layer", f"{len(layers) - 1} hidden layers: the tensor method needs a hidden layer")
    act = layers[0].activation
    if act is None or not act.is_polynomial:
        return na("polynomial activation", "the tensor method needs a polynomial activation")
    d = act.degree
    if d < 2:
        return na("degree >= 2", f"activation of degree {d}: no tensor structure")
    R = layers[0].out_dim
    if R > MAX_NEURONS or d > MAX_DEGREE:
        return na("size guard", f"{R} neurons, degree {d}: beyond the size guard ({MAX_NEURONS} neurons, degree "
                  f"{MAX_DEGREE})")
    bias = _resolve_bias(model, "auto")
    if bias is None:  # issue 25: the declared parameter space has biases in one of the two layers only
        return na("biases in both layers or in none", "the tensor method takes biases in both layers or in none; "
                  "this model declares them in one layer only")
    try:
        return _decide(model, act, d, bias, deadline, t0, certificate, field)
    except BudgetExceeded as e:
        return TensorDecision("unknown", f"budget exceeded: {e}", "budget", seconds=time.perf_counter() - t0,
                              over=field)


def _per_neuron_solutions(polys: list, avail: set, latent, real: bool, b1: list):
    """``(neurons, sizes, complex_sizes, failure)`` for step 4 of :func:`_decide`: each neuron's certified
    equations (degrees ``avail``) solved against the latent scalings -- its certificate entry, the latent
    count, the exact complex count (or None) -- or ``failure``, the reason when a neuron's solutions are
    not exactly the latent ones (the other three are then None)."""
    neurons, sizes, complex_sizes = [], [], []
    for j in range(len(polys)):
        ps = {k: p for k, p in polys[j].items() if k in avail}
        g = _gcd_all(ps.values())
        if g is None:
            sols = real_sols = "all"
        else:
            sols = _distinct_roots(g)
            # over R only the real lambda count (distinct real roots, Sturm's theorem over Q)
            real_sols = real_root_count(g, nonzero=True) if g.degree() > 0 else 0
        counted = real_sols if real else sols
        ok = (counted == "all" and latent == "all") or (counted != "all" and latent != "all"
                                                        and counted == len(latent))
        if not ok:
            return None, None, None, (
                f"neuron {j + 1}: the certified equations (degrees {sorted(avail)}) leave "
                f"{counted} {'real ' if real else ''}solution(s) for "
                f"{'a torus' if latent == 'all' else len(latent)} latent scaling(s), "
                "and no extra solution satisfies every equation: undecided by this method")
        if sols != "all":
            # the complex count is exact when every equation (not only the certified ones) has as many roots
            g_all = _gcd_all(polys[j].values())
            complex_sizes.append(sols if g_all is not None and _distinct_roots(g_all) == sols else None)
        if latent != "all":
            for a in latent:  # pragma: no branch - K always solves its own system
                if g(a) != 0:
                    raise AssertionError(f"latent scaling {a} does not solve neuron {j + 1}'s system")
            sizes.append(len(latent))
        neurons.append({"neuron": j, "b": _q(b1[j]), "degrees": sorted(ps),
                        "polynomials": [[k, _poly_json(p)] for k, p in sorted(ps.items())],
                        "gcd": None if g is None else _poly_json(g), "solutions": sols,
                        "real_solutions": real_sols,
                        "latent": "all" if latent == "all" else [_q(a) for a in latent]})
    return neurons, sizes, complex_sizes, None


def _decide(model, act, d, bias, deadline, t0, want_cert, field="R") -> TensorDecision:
    F = _Factors(model, deadline)
    R = F.R
    b1 = [fmpq(x) for x in model.layers[0].bias]
    latent = _latent(act, bias)
    polys = [_neuron_polys(act, b1[j], bias, d) for j in range(R)]
    real = field == "R"
    header = {"format": FORMAT, "widths": model.widths, "degree": d, "bias": bias, "over": field,
              "rank_one_terms": [{"neuron": j, "v": [_q(x) for x in F.V[j]], "w": [_q(x) for x in F.W[j]]}
                                 for j in range(R)]}
    complex_w = None

    def done(status, reason, cond, **kw):
        kw.setdefault("complex_witness", complex_w)
        return TensorDecision(status, reason, cond, seconds=time.perf_counter() - t0, over=field, **kw)

    # 1. a genuine fibre point outside the orbit (every per-neuron equation holds): not identifiable
    #    (over R only a real one: a lambda without a real root is a fibre point over C only)
    for j in range(R):
        deadline.check("solving the per-neuron systems")
        w = _outside_witness(polys[j], latent, F, j, act, b1[j], bias, d, real=real)
        if w is None and real and complex_w is None:
            complex_w = _outside_witness(polys[j], latent, F, j, act, b1[j], bias, d)
        if w is not None:
            cert = _certificate(header, verdict="not-identifiable", witness=dict(w, polynomials=[
                [k, _poly_json(p)] for k, p in sorted(polys[j].items())])) if want_cert else None
            points, dim, rpoints = _fibre_count(F, d, bias, polys, latent)
            return done("not-identifiable", "a per-neuron solution outside the latent group satisfies every "
                        "equation of f(.; theta') = f(.; theta): " + w["text"], "per-neuron witness",
                        witness=w, certificate=cert, fibre_points=rpoints if real else points,
                        fibre_dimension=dim, complex_fibre_points=points, real_fibre_points=rpoints)
    # 2. Kruskal on the top-degree tensor
    kr = _kruskal(F, d)
    kinfo = {k: v for k, v in kr.items()}
    if not kr["holds"]:
        return done("not-applicable", f"Kruskal's condition is not certified: best reshaping {kr['reshaping']} has "
                    f"k-rank lower bounds {kr['k_lower']}, sum {kr['sum']} < 2R+2 = {2 * R + 2} (clones, inactive "
                    "neurons or too few inputs/outputs)", "kruskal fails", kruskal=kinfo)
    # 3. linear independence of the lower-degree terms
    needed = range(1, d) if bias else range(0, d)
    independence = []
    for k in needed:
        kk, proof = F.krank("V" + "W" * k)
        if kk == R:
            independence.append({"degree": k, "proof": proof})
    avail = {e["degree"] for e in independence}
    if bias and (d - 1) not in avail:
        return done("not-applicable", f"the degree-{d - 1} terms v_j (x) w_j^{d - 1} are not certified independent, so "
                    "the biases b'_j are not determined neuron by neuron", "independence fails", kruskal=kinfo)
    # 4. per-neuron solution sets against K
    neurons, sizes, complex_sizes, failure = _per_neuron_solutions(polys, avail, latent, real, b1)
    if failure is not None:
        return done("not-applicable", failure, "per-neuron system underdetermined", kruskal=kinfo)
    continuous = latent == "all"
    orbit = None if continuous else math.factorial(R) * math.prod(sizes)
    complex_points = None if continuous or None in complex_sizes else math.factorial(R) * math.prod(complex_sizes)
    cond = (f"Kruskal on {' (x) '.join(kr['reshaping'])}: k >= {kr['k_lower']}, sum {kr['sum']} >= 2R+2 = "
            f"{2 * R + 2}; lower-degree terms independent for degrees {sorted(avail)}; every per-neuron system "
            + ("has exactly the latent scalings as its real solutions (Sturm)" if real
               else "has exactly the latent scalings"))
    cert = None
    if want_cert:
        cert = _certificate(header, verdict="identifiable",
                    kruskal={"R": R, "reshaping": kr["reshaping"], "k_lower": kr["k_lower"], "modes": kr["modes"]},
                    independence=independence, neurons=neurons,
                    orbit_size=None if orbit is None else str(orbit), orbit_dimension=R if continuous else 0)
    extra = ""
    if real and complex_points is not None and complex_points > orbit:
        extra = (f"; over C the fibre has {complex_points} points (scalings lambda that are not real), "
                 "not-identifiable over C")
    reason = (f"fibre = orbit over {'R' if real else 'C'}: the top-degree tensor has unique rank-one terms (Kruskal) "
              "and every neuron's system is solved exactly by the latent scalings"
              + (" among the real lambda (a real theta' has real scalings)" if real else "") + "; "
              + (f"orbit of {orbit} points" if orbit is not None else f"orbit a torus of dimension {R} (x S_{R})")
              + extra)
    return done("identifiable", reason, cond, orbit_size=orbit, orbit_dimension=R if continuous else 0,
                fibre_points=orbit, fibre_dimension=0, certificate=cert, kruskal=kinfo,
                complex_fibre_points=complex_points, real_fibre_points=orbit)


def _certificate(header: dict, **fields) -> dict:
    """The certificate: the complex claim (no "over" key; it implies the real one) where the real and the
    complex claims agree; where they differ -- an identifiability over R whose per-neuron systems have
    complex solutions outside K, a witness given by its minimal polynomial -- the real claim, with
    "over": "R" and the real-root counts ("real_solutions" per neuron, "real_roots" of the witness) that
    ``symeq check`` recounts with Sturm sequences over the rationals."""
    cert = dict(header, **fields)
    over = cert.pop("over", "C")
    neurons = cert.get("neurons") or []
    w = cert.get("witness")
    if w is not None:
        w = cert["witness"] = dict(w)
        w.pop("real", None)
        real_claim = over == "R" and "minimal_polynomial" in w
        if not real_claim:
            w.pop("real_roots", None)
    else:
        real_claim = over == "R" and any(n.get("real_solutions") != n.get("solutions") for n in neurons)
    if not real_claim:
        for n in neurons:
            n.pop("real_solutions", None)
        return cert
    return dict(cert, over="R")


def decide(model, *, method: str = "auto", engine: str = "auto", timeout: float | None = None):
    """Identifiability at theta by ``method``: "tensor", "groebner" or "auto" (tensor, then Gröbner).

    Returns ``(tensor decision or None, Gröbner comparison or None)``; with "auto" the Gröbner
    comparison is run only when the tensor method is not applicable (or ran out of budget).
    """
    if method not in ("auto", "tensor", "groebner"):
        raise InputError(f"method must be 'auto', 'tensor' or 'groebner', got {method!r}")
    t0 = time.perf_counter()
    td = None
    if method in ("auto", "tensor"):
        td = tensor_identifiability(model, timeout=timeout)
        if method == "tensor" or td.status in ("identifiable", "not-identifiable"):
            return td, None
    left = None if timeout is None else max(1.0, timeout - (time.perf_counter() - t0))
    return td, compare_with_orbit(model, engine=engine, timeout=left)
