"""The fibre against the orbit: is theta identifiable?

theta is identifiable when f(.; theta') = f(.; theta) implies theta' = k . theta for a *unique*
k in K = prod K_i (LITERATURE.md, the paper's definition).  The fibre always contains the orbit
K . theta; :func:`compare_with_orbit` builds the orbit explicitly and compares it with the
Gröbner dimension and degree of the gauge-fixed fibre ideal (:mod:`symeq.fibre.ideal`).

The finite group that is left
------------------------------
After gauge fixing the orbit meets the slice in finitely many points, enumerated from the finite
part of K on each hidden layer (DESIGN.md, table of latent symmetries):

* generic polynomial, or odd up to a constant (e.g. t^3 + t^2): permutations S_n;
* odd (e.g. tanh_3 = t - t^3/3): signed permutations {+-1}^n x| S_n;
* even after a shift (e.g. t + t^2 = (t + 1/2)^2 - 1/4): alpha = -1 maps the pre-activation z to
  -z + 2s, which needs biases when s != 0, so bias-free it is S_n;
* monomial c (t - s)^d: for each permutation the gauge (one entry of each incoming row fixed to
  theta's value) determines every scaling alpha uniquely (alpha times the entry must equal the
  fixed value; a linear condition, so no root of unity survives, over Q or over C).  The part left
  is therefore S_n again (only the permutations whose gauge entries are nonzero reach the slice).
  Fixing an entry of the *outgoing* column instead would leave the d-th roots of unity alpha^d = 1
  (over C: d of them; over Q: +-1 for even d); this is why symeq fixes incoming entries.

The orbit size is the number of distinct points (orbit-stabilizer: the elements reaching the slice
divided by the stabilizer).  Zero-dimensional fibre with degree == orbit size proves fibre = orbit:
the degree counts complex points *with multiplicity*, so degree >= distinct points >= orbit size,
and equality forces the fibre to be exactly the orbit and the ideal to be radical there.

Field
-----
Gröbner dimension and degree describe the *complex* fibre.  "identifiable" is proved over C, and
then holds over R too (the orbit points are real).  "not-identifiable" is a statement over C; the
extra points may be non-real (the real count from Hermite's trace form is reported when available).

Examples
--------
Bias-free (2,2,1) with sigma = t^3 + t^2: the fibre is the S_2 orbit, 2 points (LITERATURE.md,
"Small exact facts").

>>> from symeq.models import Model, DenseLayer
>>> from symeq.activations import polynomial
>>> m = Model(2, [DenseLayer([[1, 2], [3, -1]], [0, 0], polynomial([0, 0, 1, 1])),
...               DenseLayer([[2, -1]], [0], None)])
>>> c = compare_with_orbit(m, engine="sympy")
>>> c.status, c.dimension, c.degree, c.orbit_size, c.field
('identifiable', 0, 2, 2, 'C')
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field

from flint import fmpq

from ..errors import BudgetExceeded, InputError
from .engines import GroebnerResult, best_exact_engine, groebner, hermite_counts
from .ideal import FibreIdeal, _needs_gauge, fibre_ideal

__all__ = ["FibreComparison", "compare_with_orbit", "latent_orbit", "MAX_GROUP_ELEMENTS"]

#: refuse to enumerate more latent group elements than this
MAX_GROUP_ELEMENTS = 200_000
#: default seconds for computing a witness of a positive-dimensional fibre
WITNESS_TIMEOUT = 30.0


@dataclass
class FibreComparison:
    """The verdict of :func:`compare_with_orbit`, with the numbers behind it.

    Attributes
    ----------
    status : "identifiable", "not-identifiable" or "unknown"
    reason : one sentence saying why
    dimension : dimension of the gauge-fixed fibre over C (None when unknown)
    degree : complex points counted with multiplicity when the fibre is finite (else None)
    orbit_size : number of distinct points of the orbit in the gauge slice
    stabilizer_size : group elements fixing theta (1 means each orbit point has a unique k)
    distinct_points, real_points : distinct complex and real points of a finite fibre (Hermite's
        trace form, exact over Q; None when not computed)
    radical : True when proved radical, False when proved not, None when not checked
    field : "C": Gröbner counts are of complex points
    exact : False when the Gröbner engine worked modulo a prime (msolve)
    engine, seconds : the engine used and the whole comparison's time
    gauge : the fixed entries (see :class:`~symeq.fibre.ideal.GaugeFix`)
    ideal : the fibre ideal; groebner : the engine's result; orbit : the orbit points
    witness : for "not-identifiable", what shows it (a dict, see :func:`compare_with_orbit`)
    points : for a small zero-dimensional fibre, its points (:class:`~symeq.fibre.witness.FibrePoint`,
        exact when rational; the orbit points themselves when identifiable)
    witness_real : True when the witness is real (so theta is not identifiable over R either),
        False when it is only complex, None when unknown
    """

    status: str
    reason: str
    dimension: int | None
    degree: int | None
    orbit_size: int
    stabilizer_size: int
    distinct_points: int | None
    real_points: int | None
    radical: bool | None
    field: str
    exact: bool
    engine: str
    seconds: float
    gauge: list
    ideal: FibreIdeal
    groebner: GroebnerResult | None = None
    orbit: list = field(default_factory=list, repr=False)
    witness: dict | None = None
    points: list | None = field(default=None, repr=False)
    witness_real: bool | None = None

    @property
    def groebner_field(self) -> str:
        """The Gröbner answer's field: "QQ" (exact) or "modular (2 primes agree)" (msolve)."""
        return self.groebner.field if self.groebner is not None else "n/a"

    def summary(self) -> str:
        return (f"{self.status}: fibre dimension {self.dimension}, degree {self.degree} (over C, with multiplicity), "
                f"orbit {self.orbit_size} -- {self.reason} [{self.engine}, {self.seconds:.3g} s"
                f"{'' if self.exact else ', ' + self.groebner_field}]")

    def describe_witness(self) -> str:
        """One line naming the witness (empty when there is none)."""
        w = self.witness
        if not w:
            return ""
        return w.get("text", str(w))


def _scalings(act, bias: bool) -> list:
    """Finite admissible pre-activation scalings alpha of one neuron (monomials: handled by the gauge)."""
    sym = act.symmetry
    if sym in ("odd", "even") and (bias or act.shift == 0):
        return [fmpq(1), fmpq(-1)]
    if sym == "odd-plus-constant" and bias:
        # sigma(-t + 2s) = 2 sigma(s) - sigma(t): a sign flip whose offset the next bias absorbs
        return [fmpq(1), fmpq(-1)]
    return [fmpq(1)]


def _apply(model, ideal: FibreIdeal, perms, alphas, gauge_at) -> dict | None:
    """k . theta as {name: value}, or None when it leaves the gauge slice / the bias-free models."""
    from ..models import latent_rows

    def scaling(i, j, row, bj):
        # a gauge-fixed neuron's scaling is forced: it must bring the fixed entry to its value
        fix = gauge_at.get((i + 1, perms[i][j]))
        if fix is None:
            return alphas[i][j]
        s = model.layers[i].activation.shift
        cur, target = (bj - s, fix.value - s) if fix.name.startswith("b") else \
            (row[int(fix.name.rsplit("_", 1)[1])], fix.value)
        return None if cur == 0 else target / cur

    parts = latent_rows(model, perms, scaling)
    if parts is None:
        return None
    out = {}
    for l, (rows, b) in enumerate(parts, 1):
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                out[f"w{l}_{i}_{j}"] = v
        for i, v in enumerate(b):
            if ideal.bias:
                out[f"b{l}_{i}"] = v
            elif v != 0:
                return None
    if any(out[k] != v for k, v in ideal.fixed.items()):  # pragma: no cover - a bug
        raise AssertionError("an orbit point left the gauge slice")
    return {v: out[v] for v in ideal.variables}


def latent_orbit(model, ideal: FibreIdeal | None = None, *, max_elements: int = MAX_GROUP_ELEMENTS):
    """The orbit K . theta inside the gauge slice of ``ideal``: (distinct points, stabilizer size).

    Points are ``{name: value}`` over ``ideal.variables``; theta itself comes first.  Every point
    is checked to be a zero of the fibre ideal.

    >>> from symeq.models import Model, DenseLayer
    >>> from symeq.activations import tanh_series
    >>> m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], tanh_series(3)),
    ...               DenseLayer([[2, -1]], [1], None)])
    >>> pts, stab = latent_orbit(m)
    >>> len(pts), stab
    (8, 1)
    """
    if ideal is None:
        ideal = fibre_ideal(model)
    gauge_at = {(g.layer, g.neuron): g for g in ideal.gauge}
    hidden = model.layers[:-1]
    per_layer = []
    total = 1
    for l, layer in enumerate(hidden, 1):
        n = layer.out_dim
        act = layer.activation
        if _needs_gauge(act, ideal.bias) and any((l, i) not in gauge_at for i in range(n)):
            raise InputError(f"layer {l} has a monomial activation without a gauge on every neuron: "
                             "its orbit is infinite; build the ideal with gauge='auto'")
        sc = [fmpq(1)] if _needs_gauge(act, ideal.bias) else _scalings(act, ideal.bias)
        per_layer.append((list(itertools.permutations(range(n))), sc, n))
        total *= math.factorial(n) * len(sc) ** n
    if total > max_elements:
        raise InputError(f"the finite latent group has {total} elements (> {max_elements}); the orbit is "
                         "enumerated only for small models")
    choices = [itertools.product(perms, itertools.product(sc, repeat=n)) for perms, sc, n in per_layer]
    points, seen, hits = [], {}, 0
    theta_key = tuple(ideal.point[v] for v in ideal.variables)
    for combo in itertools.product(*[list(c) for c in choices]):
        perms = [list(p) for p, _ in combo]
        alphas = [list(a) for _, a in combo]
        pt = _apply(model, ideal, perms, alphas, gauge_at)
        if pt is None:
            continue
        hits += 1
        key = tuple(pt[v] for v in ideal.variables)
        if key not in seen:
            seen[key] = len(points)
            points.append(pt)
    i0 = seen[theta_key]
    points.insert(0, points.pop(i0))
    for p in points:
        if not ideal.vanishes_at(p):  # pragma: no cover - a bug
            raise AssertionError("an orbit point is not in the fibre")
    return points, hits // len(points)


def compare_with_orbit(model, *, engine: str = "auto", timeout: float | None = None, bias="auto",
                       check_radical: bool = True, witnesses: bool = True,
                       witness_timeout: float = WITNESS_TIMEOUT) -> FibreComparison:
    """Decide whether theta is identifiable by comparing its fibre with its orbit (small models).

    Parameters
    ----------
    model : a polynomial :class:`~symeq.models.Model`; theta is its parameter
    engine : Gröbner engine ("auto", "sympy", "msolve"; see :func:`~symeq.fibre.engines.groebner`)
    timeout : seconds for the Gröbner computation; past it the status is "unknown"
    bias : as in :func:`~symeq.fibre.ideal.fibre_ideal`
    check_radical : when the finite fibre has more points with multiplicity than the orbit, count
        its distinct complex and real points with Hermite's trace form (exact basis over Q)
    witnesses : compute witnesses of non-identifiability (:mod:`symeq.fibre.witness`): for a finite
        fibre its points (rational ones exactly, the others by the minimal polynomial of a separating
        linear form and their number of real roots) and an extra point outside the orbit; for a
        positive-dimensional fibre a basis of ker J(theta) (directions not tangent to the finite
        orbit), the line theta + s v when it lies in the fibre, and the points of a finite slice

    Returns
    -------
    FibreComparison
        ``"identifiable"`` when the gauge-fixed fibre is finite with degree == orbit size and a
        trivial stabilizer (proved over C, hence over R); ``"not-identifiable"`` when the fibre is
        positive-dimensional, has more points than the orbit, or theta has a nontrivial stabilizer;
        ``"unknown"`` past the budget.

    Notes
    -----
    Gauge fixing lowers the fibre dimension by the number of gauge-fixed neurons: for bias-free
    (2,2,1) with sigma = t^2 the fibre has dimension 3 > dim K = 2 (LITERATURE.md; x^2 + y^2 is a
    sum of two squares in a one-parameter family of ways), and the gauge-fixed fibre has dimension
    3 - 2 = 1 > 0: not identifiable.

    Examples
    --------
    >>> from symeq.models import Model, DenseLayer
    >>> from symeq.activations import monomial
    >>> m = Model(2, [DenseLayer([[1, 2], [3, -1]], [0, 0], monomial(2)),
    ...               DenseLayer([[2, -1]], [0], None)])
    >>> c = compare_with_orbit(m, engine="sympy")
    >>> c.status, c.dimension, c.orbit_size
    ('not-identifiable', 1, 2)
    """
    t0 = time.perf_counter()
    ideal = fibre_ideal(model, gauge="auto", bias=bias)
    points, stab = latent_orbit(model, ideal)
    orbit = len(points)

    def remaining():
        return None if timeout is None else max(1.0, timeout - (time.perf_counter() - t0))

    def witness_budget():
        r = remaining()
        return witness_timeout if r is None else min(r, witness_timeout)

    def done(status, reason, gb=None, distinct=None, real=None, radical=None, witness=None, pts=None,
             witness_real=None):
        return FibreComparison(
            status, reason, gb.dimension if gb else None, gb.degree if gb else None, orbit, stab, distinct, real,
            radical, "C", gb.field == "QQ" if gb else True, gb.engine if gb else engine,
            time.perf_counter() - t0, list(ideal.gauge), ideal, gb, points, witness, pts, witness_real)

    try:
        gb = groebner(ideal, engine=engine, timeout=timeout)
    except BudgetExceeded as e:
        return done("unknown", f"budget exceeded: {e}")
    if gb.dimension < 0:  # pragma: no cover - theta is always a point of its fibre
        raise AssertionError("the fibre ideal has no zero, but theta is one")
    if gb.dimension > 0:
        witness, wreal = _positive_dimensional_witness(ideal, gb, points, witness_budget, witnesses)
        return done("not-identifiable",
                    f"the gauge-fixed fibre has dimension {gb.dimension} > 0 over C, the orbit is finite "
                    f"({orbit} points)", gb, witness=witness, witness_real=wreal)
    if gb.degree is None:
        return done("unknown", "the fibre is finite but its degree was too large to enumerate", gb)
    if gb.degree < orbit:  # pragma: no cover - the orbit lies in the fibre
        raise AssertionError(f"degree {gb.degree} < orbit size {orbit}: the engine's answer is inconsistent")
    orbit_pts = _orbit_as_points(ideal, points)
    if gb.degree == orbit:
        if stab > 1:
            return done("not-identifiable", f"fibre = orbit ({orbit} points) but theta has a stabilizer of size {stab}: "
                        "k is not unique", gb, orbit, orbit, True, pts=orbit_pts,
                        witness={"kind": "stabilizer", "size": stab,
                                 "text": f"a nontrivial latent symmetry (stabilizer of size {stab}) fixes theta"},
                        witness_real=True)
        return done("identifiable", f"fibre = orbit: degree {gb.degree} (with multiplicity) equals the {orbit} orbit "
                    "points, so the ideal is radical and the fibre is the orbit (over C, hence over R)",
                    gb, orbit, orbit, True, pts=orbit_pts)
    distinct = real = None
    fibre_pts = None
    if check_radical:
        res = gb if gb.basis is not None else None
        if res is None and gb.degree <= 400:
            try:
                res = groebner(ideal, engine=best_exact_engine(), timeout=remaining())
            except BudgetExceeded:
                res = None
        counts = hermite_counts(res) if res is not None else None
        if counts is not None:
            distinct, real = counts
        if res is not None and witnesses:
            from .witness import zero_dimensional_points

            fibre_pts = zero_dimensional_points(res, orbit=points)
    witness, wreal = _extra_point_witness(fibre_pts)
    if distinct is None:
        return done("not-identifiable", f"degree {gb.degree} (with multiplicity; radicality not checked) > orbit "
                    f"size {orbit}", gb, witness=witness, pts=fibre_pts, witness_real=wreal)
    radical = distinct == gb.degree
    if distinct == orbit:
        status = "identifiable" if stab == 1 else "not-identifiable"
        return done(status, f"the fibre's {distinct} distinct points are the orbit; the ideal is not radical "
                    f"(degree {gb.degree} counts multiplicity)", gb, distinct, real, False, pts=fibre_pts)
    if wreal is None and real is not None:
        wreal = real > orbit
    return done("not-identifiable", f"the fibre has {distinct} distinct complex points ({real} real) > orbit size "
                f"{orbit}", gb, distinct, real, radical, witness=witness, pts=fibre_pts, witness_real=wreal)


def _orbit_as_points(ideal, points):
    from .witness import FibrePoint

    return [FibrePoint("rational", {}, [], 1, 1, 1, values=dict(p), in_orbit=True) for p in points]


def _extra_point_witness(fibre_pts):
    """The best extra point: a real rational one, else a real algebraic one, else any."""
    if not fibre_pts:
        return None, None
    extra = [p for p in fibre_pts if p.in_orbit is False or (p.kind == "rational" and p.values is None)]
    if not extra:
        return None, None
    extra.sort(key=lambda p: (p.values is None, p.kind != "rational", not p.is_real, p.degree))
    p = extra[0]
    w = {"kind": "extra-point", "point": p.to_json(), "text": "a fibre point outside the orbit: " + p.describe()}
    return w, (True if any(q.is_real for q in extra) else False)


def _positive_dimensional_witness(ideal, gb, orbit_points, budget, witnesses):
    """Tangent directions at theta (exact), a line in the fibre when there is one, and slice points."""
    if not witnesses:
        return None, None
    from .witness import line_in_fibre, slice_points, tangent_directions

    dirs = tangent_directions(ideal)
    w: dict = {"kind": "positive-dimensional", "dimension": gb.dimension,
               "tangent_directions": [{k: str(v) for k, v in d.items() if v != 0} for d in dirs]}
    texts = [f"ker J(theta) has dimension {len(dirs)} (the orbit is finite in the gauge slice, so no direction "
             "is tangent to it)"]
    for d in dirs:
        if line_in_fibre(ideal, d):
            w["line"] = {k: str(v) for k, v in d.items() if v != 0}
            texts.append("the whole line theta + s*(" + ", ".join(f"{k}:{v}" for k, v in d.items() if v != 0)
                         + ") lies in the fibre")
            break
    real = True if "line" in w else None
    try:
        found = slice_points(ideal, gb, engine=best_exact_engine(), timeout=budget(), orbit=orbit_points)
    except Exception as e:  # pragma: no cover - a witness is a bonus; never lose the verdict over it
        found = None
        w["slice_error"] = f"{type(e).__name__}: {e}"
    if found is not None:
        fixed, pts = found
        w["slice"] = {k: str(v) for k, v in fixed.items()}
        w["slice_points"] = [p.to_json() for p in pts]
        best = sorted(pts, key=lambda p: (p.values is None, p.kind != "rational", not p.is_real, p.degree))[0]
        w["point"] = best.to_json()
        texts.append("on the slice " + ", ".join(f"{k}={v}" for k, v in fixed.items()) + ": " + best.describe())
        if any(p.is_real for p in pts):
            real = True
    w["text"] = "; ".join(texts)
    return w, real
