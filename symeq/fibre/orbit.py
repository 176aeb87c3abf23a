"""The fibre against the orbit: is theta identifiable?

theta is identifiable when f(.; theta') = f(.; theta) implies theta' = k . theta for a *unique*
k in K = prod K_i (docs/theory.md, the paper's definition).  The fibre always contains the orbit
K . theta; :func:`compare_with_orbit` builds the orbit explicitly and compares it with the
Gröbner dimension and degree of the gauge-fixed fibre ideal (:mod:`symeq.fibre.ideal`).

The finite group that is left
------------------------------
After gauge fixing the orbit meets the slice in finitely many points, enumerated from the finite
part of K on each hidden layer (docs/theory.md, "Latent symmetries K_i"):

* generic polynomial: permutations S_n;
* odd (e.g. tanh_3 = t - t^3/3): signed permutations {+-1}^n x| S_n;
* odd up to a constant (e.g. t^3 + t^2, the sigmoid series): sign flips act affinely, with
  offsets the next bias absorbs: signed permutations with biases, S_n without (the
  absorbed-constant rule, docs/theory.md);
* even after a shift (e.g. 1 + t^2 + t^4): alpha = -1 maps the pre-activation z to -z + 2s,
  which needs biases when s != 0, so bias-free it is S_n unless s = 0;
* monomial c (t - s)^d, and c (t - s)^d + e with biases (e.g. t + t^2 = (t + 1/2)^2 - 1/4, whose
  scalings add e (1 - alpha^d) to the output): for each permutation the gauge (one entry of each
  incoming row fixed to theta's value) determines every scaling alpha uniquely (alpha times the
  entry must equal the fixed value; a linear condition, so no root of unity survives, over Q or
  over C).  The part left is therefore S_n again (only the permutations whose gauge entries are
  nonzero reach the slice).  Fixing an entry of the *outgoing* column instead would leave the d-th
  roots of unity alpha^d = 1 (over C: d of them; over Q: +-1 for even d); this is why symeq fixes
  incoming entries.  Without biases c (t - s)^d + e keeps only its offset-free scalings.

Before any Gröbner basis, :func:`structural_decision` settles two cases in milliseconds: more
unknowns than equations (Krull's height theorem) and inactive neurons (an exact line in the
fibre).  After one, an "identifiable" verdict on the slice is completed by
:func:`gauge_completeness` (no fibre point outside the slice; docs/theory.md).

The orbit size is the number of distinct points (orbit-stabilizer: the elements reaching the slice
divided by the stabilizer).  Zero-dimensional fibre with degree == orbit size proves fibre = orbit:
the degree counts complex points *with multiplicity*, so degree >= distinct points >= orbit size,
and equality forces the fibre to be exactly the orbit and the ideal to be radical there.

Field
-----
Gröbner dimension and degree describe the *complex* fibre.  "identifiable" is proved over C, and
then holds over R too (the orbit points are real).  Over C, "not-identifiable" may rest on non-real
points; :func:`compare_with_orbit` answers over R by default (:func:`real_reading`): a real witness,
or the exact real count from Hermite's trace form against the orbit, and "unknown" over R when only
complex extra points are known (``field="C"`` keeps the complex answer).

Examples
--------
Bias-free (2,2,1) with sigma = t^3 + t^2: the fibre is the S_2 orbit, 2 points (docs/theory.md,
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
import re
import time
from dataclasses import dataclass, field

from flint import fmpq

from ..budget import Deadline
from ..errors import BudgetExceeded, EngineFailed, InputError, MemoryLimit, OrbitLimit
from ..sizes import check_orbit
from .groebner import GroebnerResult, best_exact_engine, groebner, hermite_counts
from .ideal import FibreIdeal, _needs_gauge, fibre_ideal, offsets_into, safe_gauge_entries

__all__ = ["FibreComparison", "compare_with_orbit", "real_reading", "latent_orbit", "MAX_GROUP_ELEMENTS", "StructuralDecision",
           "structural_decision", "gauge_completeness"]

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
    criterion : what decided: "groebner" (dimension and degree against the orbit), "inactive-neuron"
        (an exact line through theta in the fibre, along a dead neuron's free weights) or
        "equation-count" (more unknowns than equations: Krull's height theorem), see
        :func:`structural_decision`
    dimension_lower_bound : a proved lower bound for the fibre dimension when ``dimension`` is None
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
    criterion: str = "groebner"
    dimension_lower_bound: int | None = None
    #: the field the status is about: "R" (real parameters, the default of :func:`compare_with_orbit`)
    #: or "C"; over R a fibre point counts only when it is real
    over: str = "C"
    #: over R: the status and reason over C, when they differ from the real ones (else None)
    complex_status: str | None = None
    complex_reason: str | None = None

    @property
    def groebner_field(self) -> str:
        """The Gröbner answer's field: "QQ" (exact) or "modular (2 primes agree)" (msolve)."""
        return self.groebner.field if self.groebner is not None else "n/a"

    def summary(self) -> str:
        if self.criterion != "groebner":
            return (f"{self.status}: fibre dimension >= {self.dimension_lower_bound}, orbit {self.orbit_size} -- "
                    f"{self.reason} [{self.criterion}, {self.seconds:.3g} s]")
        return (f"{self.status}: fibre dimension {self.dimension}, degree {self.degree} (over C, with multiplicity), "
                f"orbit {self.orbit_size} -- {self.reason} [{self.engine}, {self.seconds:.3g} s"
                f"{'' if self.exact else ', ' + self.groebner_field}]")

    def describe_witness(self) -> str:
        """One line naming the witness (empty when there is none)."""
        w = self.witness
        if not w:
            return ""
        return w.get("text", str(w))


_NAME = re.compile(r"\b([wb])(\d+)_(\d+)(?:_(\d+))?\b")


def one_based(text: str) -> str:
    """``text`` with the fibre ideal's unknowns numbered from 1, as every text output numbers them.

    The unknowns are named ``w{l}_{i}_{j}`` and ``b{l}_{i}`` with the layer ``l`` from 1 and the row
    ``i`` and column ``j`` from 0 (docs/identifiability.md); the JSON keeps these names, text shows
    rows and columns from 1.

    >>> one_based("the whole line theta + s*(w2_0_1:1, b1_2:-3)")
    'the whole line theta + s*(w2_1_2:1, b1_3:-3)'
    """
    def sub(m):
        out = f"{m.group(1)}{m.group(2)}_{int(m.group(3)) + 1}"
        return out + (f"_{int(m.group(4)) + 1}" if m.group(4) is not None else "")

    return _NAME.sub(sub, text)


def _scalings(act, bias: bool) -> list:
    """Finite admissible pre-activation scalings alpha of one neuron (monomials: handled by the gauge).

    With biases the offsets count (sigma(-t + 2s) = 2 sigma(s) - sigma(t): a sign flip whose offset
    the next bias absorbs); without, only the offset-free ones (docs/theory.md, absorbed constants).
    """
    return act.finite_scalings(bias)


def _apply(model, ideal: FibreIdeal, perms, alphas, gauge_at) -> dict | None:
    """k . theta as {name: value}, or None when it leaves the gauge slice / the bias-free models."""
    from ..models import latent_rows

    def scaling(i, j, row, bj):
        # a gauge-fixed neuron's scaling is forced: it must bring the fixed entry to its value
        fix = gauge_at.get((i + 1, perms[i][j]))
        if fix is None:
            return alphas[i][j]
        s = model.layers[i].activation.shift
        cur = fix.shifted_value_of(row, bj - s)
        target = fix.value if fix.form or not fix.name.startswith("b") else fix.value - s
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


def latent_orbit(model, ideal: FibreIdeal | None = None, *, max_elements: int | None = None, deadline=None):
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
        if _needs_gauge(act, ideal.bias) and any((l, i) not in gauge_at and (l, i) not in ideal.ungauged
                                                 for i in range(n)):
            raise InputError(f"layer {l} has a monomial activation without a gauge on every neuron: "
                             "its orbit is infinite; build the ideal with gauge='auto'")
        # an inactive neuron without a gauge (zero shifted row, ideal.ungauged) keeps alpha = 1 here:
        # the enumeration is then of the finite part only, and compare_with_orbit knows it
        sc = [fmpq(1)] if _needs_gauge(act, ideal.bias) else _scalings(act, ideal.bias)
        per_layer.append((n, sc))
        total *= math.factorial(min(n, 50)) * len(sc) ** min(n, 50)  # capped: 50! is past every limit
    # size first, before any permutation is listed
    if max_elements is not None and total > max_elements:
        raise OrbitLimit(value=total, maximum=max_elements, option="max_elements",
                         what="enumerating the orbit of the finite latent group")
    check_orbit(total, "enumerating the orbit of the finite latent group (its elements are listed one by one)")
    per_layer = [(list(itertools.permutations(range(n))), sc, n) for n, sc in per_layer]
    choices = [itertools.product(perms, itertools.product(sc, repeat=n)) for perms, sc, n in per_layer]
    points, seen, hits = [], {}, 0
    theta_key = tuple(ideal.point[v] for v in ideal.variables)
    for combo in itertools.product(*[list(c) for c in choices]):
        if deadline is not None:
            deadline.check("enumerating the orbit")
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


#: build the Jacobian at theta for the equation-count witness only up to this many entries
MAX_JACOBIAN_ENTRIES = 40_000


@dataclass
class StructuralDecision:
    """A verdict reached without a Gröbner basis (see :func:`structural_decision`)."""

    criterion: str
    reason: str
    dimension_lower_bound: int
    witness: dict
    witness_real: bool | None


def _zero_pattern_count(model, values: dict, bias: bool, which: str) -> int:
    """Hidden neurons with a zero incoming weight row and a nonzero outgoing column ("dead"), or with a
    zero outgoing column and a nonzero incoming weight row ("unused"), at the parameter ``values``.

    Both counts are invariant under every k in K: k permutes neurons and multiplies incoming rows and
    outgoing columns entrywise by nonzero factors (alpha, 1/q); its offsets move biases only.
    """
    count = 0
    layers = model.layers
    for l in range(1, len(layers)):
        for j in range(layers[l - 1].out_dim):
            row = [values[f"w{l}_{j}_{m}"] for m in range(layers[l - 1].in_dim)]
            col = [values[f"w{l + 1}_{k}_{j}"] for k in range(layers[l].out_dim)]
            zero_row, zero_col = all(v == 0 for v in row), all(v == 0 for v in col)
            count += (zero_row and not zero_col) if which == "dead" else (zero_col and not zero_row)
    return count


def _inactive_lines(model, ideal: FibreIdeal):
    """Candidate lines theta + s d in the gauge slice along an inactive neuron's free weights.

    Yields (direction, text, invariant) where ``invariant`` names the zero-pattern count that
    differs at theta + d (then theta + d is outside the orbit whatever the orbit is), or None.
    """
    from ..numbers import mat_rows

    unknown = set(ideal.variables)
    layers = model.layers
    for l in range(1, len(layers)):
        layer, nxt = layers[l - 1], layers[l]
        act = layer.activation
        for j, row in enumerate(mat_rows(layer.weight)):
            col = [fmpq(r[j]) for r in mat_rows(nxt.weight)]
            if all(v == 0 for v in row):
                # dead: its output is the constant c = sigma(b_j); the next pre-activations see
                # sum_k v_kj c, so moving the column by d_k and the next biases by -c d_k keeps f.
                c = act(fmpq(layer.bias[j]))
                ok = [k for k in range(nxt.out_dim) if f"w{l + 1}_{k}_{j}" in unknown
                      and (c == 0 or f"b{l + 1}_{k}" in unknown)]
                nonzero = [k for k, v in enumerate(col) if v != 0]
                if nonzero and all(k in ok for k in nonzero):
                    d = {}
                    for k in nonzero:
                        d[f"w{l + 1}_{k}_{j}"] = -col[k]
                        if c != 0:
                            d[f"b{l + 1}_{k}"] = c * col[k]
                    yield d, (f"neuron {j + 1} of hidden layer {l} is dead (zero incoming weights, constant output "
                              f"{c}): its outgoing weights move to 0, the next biases absorb the constant"), "dead"
                elif ok:
                    k = ok[0]
                    d = {f"w{l + 1}_{k}_{j}": fmpq(1)}
                    if c != 0:
                        d[f"b{l + 1}_{k}"] = -c
                    yield d, (f"neuron {j + 1} of hidden layer {l} is dead (zero incoming weights, constant output "
                              f"{c}): its outgoing weight w{l + 1}_{k}_{j} is free, the next bias absorbs "
                              "the constant"), ("dead" if not nonzero else None)
            if all(v == 0 for v in col):
                # unused: nothing reads its output, so its incoming weights and bias are free
                names = [f"w{l}_{j}_{m}" for m in range(layer.in_dim)]
                free = [n for n in names + [f"b{l}_{j}"] if n in unknown]
                if not free:
                    continue
                if any(v != 0 for v in row) and all(n in unknown for n in names):
                    d = {n: -fmpq(v) for n, v in zip(names, row) if v != 0}
                    yield d, (f"neuron {j + 1} of hidden layer {l} is unused (zero outgoing weights): its incoming "
                              "weights move to 0"), "unused"
                else:
                    yield {free[0]: fmpq(1)}, (f"neuron {j + 1} of hidden layer {l} is unused (zero outgoing weights): "
                                               f"its incoming entry {free[0]} is free"), \
                        ("unused" if all(v == 0 for v in row) and free[0].startswith("w") else None)


def structural_decision(model, ideal: FibreIdeal) -> StructuralDecision | None:
    """Decide non-identifiability without a Gröbner basis, where the structure of theta suffices.

    Two exact arguments, tried in this order (both cost milliseconds):

    1. **Inactive neuron.**  A hidden neuron with a zero incoming weight row outputs a constant
       sigma(b_j); its outgoing weights are free when the next biases absorb the change (or
       sigma(b_j) = 0).  A neuron with a zero outgoing column has free incoming weights.  The line
       theta + s d is checked to lie in the fibre (:func:`~symeq.fibre.witness.line_in_fibre`), and
       theta + d lies outside the orbit K . theta: either a K-invariant zero pattern differs (the
       number of neurons with a zero row and a nonzero column, or the converse), or the orbit is
       finite in the gauge slice and a line is not.
    2. **Equation count.**  With n unknowns and m generators, every component of the fibre has
       dimension >= n - m (Krull's height theorem; the fibre is not empty since theta lies on it).
       The orbit is finite in the gauge slice, so n - m > 0 means fibre != orbit.  When the m
       generators have independent gradients at theta (rank J(theta) = m), the implicit function
       theorem gives a *real* manifold of dimension n - m through theta, and ker J(theta) is its
       tangent space: the witness is then real.

    Returns None when neither applies (the Gröbner comparison decides).

    Examples
    --------
    (2,3,1) tanh_3 with biases: 13 unknowns, 10 equations (the cubics in two variables).

    >>> from symeq.models import Model, DenseLayer
    >>> from symeq.activations import tanh_series
    >>> m = Model(2, [DenseLayer([[1, 2], [3, -1], [2, 5]], [1, -2, 3], tanh_series(3)),
    ...               DenseLayer([[2, -1, 3]], [1], None)])
    >>> d = structural_decision(m, fibre_ideal(m))
    >>> d.criterion, d.dimension_lower_bound, d.witness_real
    ('equation-count', 3, True)
    """
    from .witness import jacobian_at, line_in_fibre

    orbit_finite = not ideal.ungauged
    for d, text, invariant in _inactive_lines(model, ideal):
        if not (invariant or orbit_finite) or not line_in_fibre(ideal, d):
            continue
        if invariant:
            moved = {**ideal.fixed, **{v: ideal.point[v] + d.get(v, 0) for v in ideal.variables}}
            here = {**ideal.fixed, **ideal.point}
            if _zero_pattern_count(model, moved, ideal.bias, invariant) == _zero_pattern_count(
                    model, here, ideal.bias, invariant):  # pragma: no cover - the construction changes it
                if not orbit_finite:
                    continue
        why = ("a K-invariant zero pattern (neurons with a zero row and a nonzero column, or the converse) "
               "changes along it, so theta + d is not in the orbit") if invariant else \
            "the orbit is finite in the gauge slice and a line is not"
        line = {k: str(v) for k, v in d.items() if v != 0}
        return StructuralDecision(
            "inactive-neuron",
            f"{text}; the line theta + s*d lies in the fibre (checked exactly) and {why}",
            1,
            {"kind": "line", "line": line,
             "text": "the whole line theta + s*(" + ", ".join(f"{k}:{v}" for k, v in line.items())
                     + ") lies in the fibre: " + text},
            True)
    if not orbit_finite or ideal.excess <= 0:
        return None
    n, m = ideal.n_variables, ideal.n_generators
    reason = (f"{n} unknowns but {m} equations after the gauge: every component of the fibre has dimension "
              f">= {n - m} (Krull's height theorem; theta is a point of it), while the orbit is finite in the slice")
    witness: dict = {"kind": "equation-count", "unknowns": n, "equations": m, "dimension_lower_bound": n - m,
                     "text": f"more unknowns ({n}) than equations ({m}): fibre dimension >= {n - m} over C"}
    real = None
    if n * m <= MAX_JACOBIAN_ENTRIES:
        J = jacobian_at(ideal)
        rank = J.rank() if m else 0
        if rank == m:
            from ..numbers import nullspace

            dirs = [{v: x for v, x in zip(ideal.variables, vec) if x != 0} for vec in nullspace(J)] if m else \
                [{v: fmpq(1)} for v in ideal.variables]
            witness["tangent_directions"] = [{k: str(v) for k, v in dd.items()} for dd in dirs]
            real = True
            witness["text"] += (f"; J(theta) has full rank {m}, so near theta the real fibre is a manifold of "
                                f"dimension {n - m} (implicit function theorem), tangent to ker J(theta)")
            for dd in dirs[:8]:
                if line_in_fibre(ideal, dd):
                    witness["line"] = {k: str(v) for k, v in dd.items()}
                    witness["text"] += "; the whole line theta + s*(" + ", ".join(
                        f"{k}:{v}" for k, v in dd.items()) + ") lies in the fibre"
                    break
    return StructuralDecision("equation-count", reason, n - m, witness, real)


def compare_with_orbit(model, *, engine: str = "auto", timeout: float | None = None, bias="auto",
                       check_radical: bool = True, witnesses: bool = True,
                       witness_timeout: float = WITNESS_TIMEOUT, structural: bool = True,
                       field: str = "R") -> FibreComparison:
    """Decide whether theta is identifiable by comparing its fibre with its orbit (small models).

    ``field`` ("R", the default, or "C") is the field the status is about: the Gröbner comparison
    counts complex points (``field`` "C" keeps that answer); over R a fibre point outside the orbit
    counts only when it is real (:func:`real_reading`): a real witness, or more real points than the
    orbit in the exact real count (Hermite's trace form); a larger complex fibre with as many real
    points as the orbit is identifiable over R, with the complex status beside it.  Other arguments
    and the returned fields: :func:`_compare_over_c`.
    """
    if field not in ("R", "C"):
        raise InputError(f"field must be 'R' or 'C', got {field!r}")
    t0 = time.perf_counter()
    c = _compare_over_c(model, engine=engine, timeout=timeout, bias=bias, check_radical=check_radical,
                        witnesses=witnesses, witness_timeout=witness_timeout, structural=structural)
    if field == "C":
        return c
    left = None if timeout is None else max(1.0, timeout - (time.perf_counter() - t0))
    return real_reading(model, c, engine=engine, timeout=left)


def real_reading(model, c: FibreComparison, *, engine: str = "auto", timeout: float | None = None) -> FibreComparison:
    """``c`` (a comparison over C) read over R: the status about real parameters.

    * identifiable over C: identifiable over R (the orbit points are real);
    * not identifiable with a real witness (a real line, a nontrivial stabilizer, a real extra point, or
      more real points than the orbit): not identifiable over R;
    * a finite fibre whose real points, counted exactly, are the orbit's (and no fibre point outside the
      gauge slice, :func:`gauge_completeness`; the scaling onto the slice of a real point is real):
      identifiable over R -- the real fibre is the orbit;
    * otherwise (only complex witnesses known): "unknown" over R, the complex answer beside it.
    """
    import dataclasses

    if c.over == "R":
        return c
    if c.status != "not-identifiable" or c.witness_real is True:
        return dataclasses.replace(c, over="R")
    if c.dimension == 0 and c.real_points is not None and c.distinct_points is not None             and c.real_points == c.orbit_size and c.stabilizer_size == 1:
        t0 = time.perf_counter()
        ok, why = gauge_completeness(model, c.ideal, engine=engine, timeout=timeout)
        if ok:
            reason = (f"the real fibre is the orbit: of the fibre's {c.distinct_points} distinct complex points "
                      f"exactly {c.real_points} are real (Hermite's trace form, exact over Q), the {c.orbit_size} "
                      "orbit points" + ("; " + why if c.ideal.gauge else ""))
            return dataclasses.replace(c, status="identifiable", reason=reason, over="R",
                                       complex_status=c.status, complex_reason=c.reason,
                                       seconds=c.seconds + time.perf_counter() - t0)
        return dataclasses.replace(
            c, status="unknown", over="R", complex_status=c.status, complex_reason=c.reason,
            reason=f"over R undecided: the {c.real_points} real points of the gauge slice are the orbit, but points "
                   f"outside the slice are not excluded ({why}); over C: {c.reason}",
            seconds=c.seconds + time.perf_counter() - t0)
    return dataclasses.replace(
        c, status="unknown", over="R", complex_status=c.status, complex_reason=c.reason,
        reason=f"over R undecided: no real fibre point outside the orbit is known; over C not identifiable: {c.reason}")


def _compare_over_c(model, *, engine: str = "auto", timeout: float | None = None, bias="auto",
                    check_radical: bool = True, witnesses: bool = True,
                    witness_timeout: float = WITNESS_TIMEOUT, structural: bool = True) -> FibreComparison:
    """Decide whether theta is identifiable over C by comparing its fibre with its orbit (small models).

    Parameters
    ----------
    model : a polynomial :class:`~symeq.models.Model`; theta is its parameter
    engine : Gröbner engine ("auto", "sympy", "msolve"; see :func:`~symeq.fibre.groebner.groebner`)
    timeout : seconds for the Gröbner computation; past it the status is "unknown"
    bias : as in :func:`~symeq.fibre.ideal.fibre_ideal`
    check_radical : when the finite fibre has more points with multiplicity than the orbit, count
        its distinct complex and real points with Hermite's trace form (exact basis over Q)
    witnesses : compute witnesses of non-identifiability (:mod:`symeq.fibre.witness`): for a finite
        fibre its points (rational ones exactly, the others by the minimal polynomial of a separating
        linear form and their number of real roots) and an extra point outside the orbit; for a
        positive-dimensional fibre a basis of ker J(theta) (directions not tangent to the finite
        orbit), the line theta + s v when it lies in the fibre, and the points of a finite slice
    structural : first try :func:`structural_decision` (an inactive neuron's line, or more unknowns
        than equations): a verdict in milliseconds, with ``criterion`` saying which, ``dimension``
        None and ``dimension_lower_bound`` set.  ``False``: always compute the Gröbner basis

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
    (2,2,1) with sigma = t^2 the fibre has dimension 3 > dim K = 2 (docs/theory.md; x^2 + y^2 is a
    sum of two squares in a one-parameter family of ways), and the gauge-fixed fibre has dimension
    3 - 2 = 1 > 0: not identifiable.

    Examples
    --------
    >>> from symeq.models import Model, DenseLayer
    >>> from symeq.activations import monomial
    >>> m = Model(2, [DenseLayer([[1, 2], [3, -1]], [0, 0], monomial(2)),
    ...               DenseLayer([[2, -1]], [0], None)])
    >>> c = compare_with_orbit(m, engine="sympy")        # 4 unknowns, 3 equations: Krull decides
    >>> c.status, c.criterion, c.dimension_lower_bound, c.orbit_size
    ('not-identifiable', 'equation-count', 1, 2)
    >>> c = compare_with_orbit(m, engine="sympy", structural=False)
    >>> c.status, c.dimension, c.orbit_size
    ('not-identifiable', 1, 2)
    """
    t0 = time.perf_counter()
    budget = Deadline(timeout)
    ideal = fibre_ideal(model, gauge="auto", bias=bias, deadline=budget)
    if not isinstance(ideal.bias, bool):  # issue 25: the orbit below is counted for one bias declaration
        raise InputError("the Gröbner orbit count takes biases in every layer or in none; this model declares them "
                         "in some layers only (symeq fibre decides it by the Jacobian rank)")
    decided = structural_decision(model, ideal) if structural else None
    if decided is not None:
        try:
            points, stab = latent_orbit(model, ideal, deadline=budget)
        except InputError:  # too many group elements to list: the verdict does not need them
            points, stab = [], None
        return FibreComparison(
            "not-identifiable", decided.reason, None, None, len(points) if points else None, stab, None, None,
            None, "C", True, "none", time.perf_counter() - t0, list(ideal.gauge), ideal, None, points,
            decided.witness, None, decided.witness_real, decided.criterion, decided.dimension_lower_bound)
    points, stab = latent_orbit(model, ideal, deadline=budget)
    orbit = len(points)
    if ideal.ungauged:
        # an inactive neuron with continuous scalings and no usable gauge entry, and no line found
        # along its free weights: the orbit is not finite in the slice, so dimension and degree
        # cannot be compared with it
        return FibreComparison(
            "unknown", "an inactive neuron (" + "; ".join(ideal.notes) + ") keeps a continuous orbit in the gauge "
            "slice, and no line along its free weights lies in the slice: undecided", None, None, orbit, stab,
            None, None, None, "C", True, "none", time.perf_counter() - t0, list(ideal.gauge), ideal, None, points)

    run = _Comparison(model, ideal, engine, timeout, witness_timeout, t0, points, stab)
    try:
        gb = groebner(ideal, engine=engine, timeout=timeout)
    except BudgetExceeded as e:
        return run.done("unknown", f"budget exceeded: {e}")
    except EngineFailed as e:  # a crashed engine leaves the question open; the report is kept
        return run.done("unknown", f"the Gröbner engine failed: {e}")
    return _compare_basis(run, gb, check_radical, witnesses)


@dataclass
class _Comparison:
    """What the steps of :func:`_compare_over_c` after the orbit share: the model and its fibre ideal, the
    engine and budgets, the start time, the orbit's points and its stabilizer's size."""

    model: object
    ideal: object
    engine: str
    timeout: float | None
    witness_timeout: float
    t0: float
    points: list
    stab: int

    @property
    def orbit(self) -> int:
        return len(self.points)

    def remaining(self):
        return None if self.timeout is None else max(1.0, self.timeout - (time.perf_counter() - self.t0))

    def witness_budget(self):
        r = self.remaining()
        return self.witness_timeout if r is None else min(r, self.witness_timeout)

    def done(self, status, reason, gb=None, distinct=None, real=None, radical=None, witness=None, pts=None,
             witness_real=None) -> FibreComparison:
        return FibreComparison(
            status, reason, gb.dimension if gb else None, gb.degree if gb else None, self.orbit, self.stab, distinct,
            real, radical, "C", gb.field == "QQ" if gb else True, gb.engine if gb else self.engine,
            time.perf_counter() - self.t0, list(self.ideal.gauge), self.ideal, gb, self.points, witness, pts,
            witness_real)

    def slice_checked(self, reason, gb, distinct, real, radical, pts) -> FibreComparison:
        # "identifiable" on the slice; it holds for the whole fibre once no fibre point has a zero
        # gauge entry (gauge_completeness; docs/theory.md, points outside the gauge slice)
        ok, why = gauge_completeness(self.model, self.ideal, engine=self.engine, timeout=self.remaining())
        if ok:
            return self.done("identifiable", reason + ("; " + why if self.ideal.gauge else ""), gb, distinct, real,
                             radical, pts=pts)
        if ok is False:
            return self.done("not-identifiable", f"on the gauge slice {reason}, but {why}", gb, distinct, real,
                             radical, pts=pts, witness={"kind": "outside-slice", "text": why}, witness_real=None)
        return self.done("unknown", f"on the gauge slice {reason}, but points outside it are not excluded: {why}",
                         gb, distinct, real, radical, pts=pts)


def _compare_basis(run: _Comparison, gb, check_radical: bool, witnesses: bool) -> FibreComparison:
    """:func:`_compare_over_c` once the Gröbner basis ``gb`` of the fibre ideal is known: its dimension, then
    its degree against the orbit's size."""
    orbit, stab, points, ideal = run.orbit, run.stab, run.points, run.ideal
    if gb.dimension < 0:  # pragma: no cover - theta is always a point of its fibre
        raise AssertionError("the fibre ideal has no zero, but theta is one")
    if gb.dimension > 0:
        witness, wreal = _positive_dimensional_witness(ideal, gb, points, run.witness_budget, witnesses)
        return run.done("not-identifiable",
                        f"the gauge-fixed fibre has dimension {gb.dimension} > 0 over C, the orbit is finite "
                        f"({orbit} points)", gb, witness=witness, witness_real=wreal)
    if gb.degree is None:
        return run.done("unknown", "the fibre is finite but its degree was too large to enumerate", gb)
    if gb.degree < orbit:  # pragma: no cover - the orbit lies in the fibre
        raise AssertionError(f"degree {gb.degree} < orbit size {orbit}: the engine's answer is inconsistent")
    if gb.degree == orbit:
        orbit_pts = _orbit_as_points(ideal, points)
        if stab > 1:
            return run.done("not-identifiable", f"fibre = orbit ({orbit} points) but theta has a stabilizer of size "
                            f"{stab}: k is not unique", gb, orbit, orbit, True, pts=orbit_pts,
                            witness={"kind": "stabilizer", "size": stab,
                                     "text": f"a nontrivial latent symmetry (stabilizer of size {stab}) fixes theta"},
                            witness_real=True)
        return run.slice_checked(f"fibre = orbit: degree {gb.degree} (with multiplicity) equals the {orbit} orbit "
                                 "points, so the ideal is radical and the fibre is the orbit (over C, hence over R)",
                                 gb, orbit, orbit, True, pts=orbit_pts)
    return _compare_distinct_points(run, gb, check_radical, witnesses)


def _compare_distinct_points(run: _Comparison, gb, check_radical: bool, witnesses: bool) -> FibreComparison:
    """A finite fibre of degree above the orbit's size: count its distinct (and real) points by Hermite's
    trace form when ``check_radical``, and compare them with the orbit."""
    orbit, stab, points, ideal = run.orbit, run.stab, run.points, run.ideal
    distinct = real = None
    fibre_pts = None
    if check_radical:
        res = gb if gb.basis is not None else None
        if res is None and gb.degree <= 400:
            try:
                res = groebner(ideal, engine=best_exact_engine(), timeout=run.remaining())
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
        return run.done("not-identifiable", f"degree {gb.degree} (with multiplicity; radicality not checked) > "
                        f"orbit size {orbit}", gb, witness=witness, pts=fibre_pts, witness_real=wreal)
    radical = distinct == gb.degree
    if distinct == orbit:
        text = f"the fibre's {distinct} distinct points are the orbit; the ideal is not radical (degree {gb.degree} " \
               "counts multiplicity)"
        if stab == 1:
            return run.slice_checked(text, gb, distinct, real, False, pts=fibre_pts)
        return run.done("not-identifiable", text, gb, distinct, real, False, pts=fibre_pts)
    if wreal is None and real is not None:
        wreal = real > orbit
    return run.done("not-identifiable", f"the fibre has {distinct} distinct complex points ({real} real) > orbit "
                    f"size {orbit}", gb, distinct, real, radical, witness=witness, pts=fibre_pts, witness_real=wreal)


def _orbit_avoids_zero(model, ideal, fix) -> bool:
    """True when no point of K . theta has a zero at the gauge entry ``fix`` (see
    :func:`~symeq.fibre.ideal.safe_gauge_entries`)."""
    if fix.form:  # chosen nonzero on every row of the first layer (symeq.fibre.ideal._first_layer_form)
        return True
    safe = safe_gauge_entries(model, fix.layer, ideal.bias)
    return ("bias" if fix.name.startswith("b") else fix.name.rsplit("_", 1)[1]) in safe


def gauge_completeness(model, ideal: FibreIdeal, *, engine: str = "auto", timeout: float | None = None):
    """Whether every point of the fibre reaches the gauge slice: (True | False | None, text).

    The slice fixes one entry phi_j of each gauged neuron's incoming row; it meets the orbit of
    the scalings of a fibre point p exactly when every phi_j(p) != 0.  A point with phi_j(p) = 0 is
    never seen (docs/theory.md, "Points outside the gauge slice").  This checks, for the gauged
    neurons j = 1, ..., N in layer order, that the ideal of the un-gauged fibre together with
    phi_j = 0 and phi_i = (theta's value) for i < j has no zero (a Gröbner basis {1}).  Then no
    fibre point has a zero gauge entry: given one, take the first j with phi_j = 0 and scale the
    neurons i < j onto their slice (a scaling multiplies the later gauge entries by nonzero
    factors) -- a zero of that ideal.

    Returns True when every ideal is empty; False when one is not and no orbit point has a zero
    there (so the fibre has a point outside the orbit: not identifiable); None when undecided (a
    nonempty ideal where orbit points may lie too, a bias entry that offsets move, or the budget).
    """
    if not ideal.gauge:
        return True, "no gauge"
    t0 = time.perf_counter()
    if any(g.name.startswith("b") and offsets_into(model, g.layer, ideal.bias) for g in ideal.gauge):
        return None, "a gauge entry is a bias that the previous layer's offsets move"
    base = fibre_ideal(model, gauge="none", bias=ideal.bias)
    names = base.variables
    index = {v: i for i, v in enumerate(names)}
    polys = base.polynomial_dicts()

    def linear(fix, shifted_value):
        # the gauged quantity (an entry, shifted for a bias, or a linear form of them) = shifted_value
        s = model.layers[fix.layer - 1].activation.shift
        terms = fix.form or ((fix.name, fmpq(1)),)
        out, const = {}, -fmpq(shifted_value)
        for name, c in terms:
            e = [0] * len(names)
            e[index[name]] = 1
            out[tuple(e)] = fmpq(c)
            if name.startswith("b"):
                const -= c * s
        if const != 0:
            out[tuple([0] * len(names))] = const
        return out

    def theta_value(fix):
        s = model.layers[fix.layer - 1].activation.shift
        return fix.value if fix.form or not fix.name.startswith("b") else fix.value - s

    for j, fix in enumerate(ideal.gauge):
        extra = [linear(fix, 0)] + [linear(g, theta_value(g)) for g in ideal.gauge[:j]]
        left = None if timeout is None else timeout - (time.perf_counter() - t0)
        if left is not None and left <= 0:
            return None, "budget exceeded while checking points outside the gauge slice"
        try:
            r = groebner((names, polys + extra), engine=engine, timeout=left, want_basis=False)
        except BudgetExceeded:
            return None, "budget exceeded while checking points outside the gauge slice"
        except MemoryLimit as e:  # the slice's answer stands; only the completion is left open
            return None, f"the engine ran into the memory budget while checking points outside the gauge slice ({e})"
        if r.dimension >= 0:
            where = f"{fix.name} = {'s' if fix.name.startswith('b') and not fix.form else 0}"
            if _orbit_avoids_zero(model, ideal, fix):
                return False, (f"the fibre has points with the gauge entry {where} (dimension {r.dimension} over C, "
                               f"{r.field}); no orbit point has one: outside the orbit")
            return None, f"the fibre has points with the gauge entry {where}, and orbit points may too"
    return True, (f"no fibre point has a zero gauge entry ({len(ideal.gauge)} empty ideals, "
                  f"{'exact' if r.field == 'QQ' else r.field}): every fibre point reaches the slice")


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
