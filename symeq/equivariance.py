"""End-to-end equivariance f(rho_in(g) x) = rho_out(g) f(x), decided exactly.

For a polynomial model the difference h_g(x) = f(rho_in(g) x) - rho_out(g) f(x) is a vector of
polynomials of total degree at most D (the product of the activation degrees).  Three methods:

``"grid"``
    exact evaluation on the principal lattice {a in N^n : a_1 + ... + a_n <= D}, which is
    unisolvent for polynomials of total degree <= D (Chung and Yao 1977; Nicolaides 1972):
    a polynomial of degree <= D vanishing there is zero.  A proof, with C(n + D, D) points.
``"symbolic"``
    full expansion with ``fmpq_mpoly`` (a proof; affordable for small n and D).
``"probabilistic"``
    exact evaluation at k random integer points from {-M..M}^n.  By the Schwartz-Zippel lemma a
    nonzero h_g vanishes at all of them with probability <= (D / (2M + 1))^k; the verdict says so.

For ReLU models the decision is exact by linear-region enumeration (:mod:`symeq.relu.regions`).
A failing check always returns a rational witness x, re-evaluated exactly.

Models with real activations (tanh, sigmoid, GELU, ...; :data:`symeq.activations.REAL_ACTIVATIONS`)
are not polynomials.  Their premise is proved *layers first* (:func:`layers_first`): when the
derivation finds actions and every layer passes its exact identity check, the composition of
equivariant layers is equivariant.  Refutation is by :func:`refute_with_balls`: a rational input x
and a precision at which python-flint's arb ball of some output of f(g x) - g f(x) excludes 0
(a :class:`BallWitness`).  Anything else is undetermined.

Examples
--------
>>> from symeq.groups import global_sign
>>> from symeq.activations import tanh_series
>>> from symeq.models import DenseLayer, Model
>>> from symeq.numbers import matrix
>>> odd = Model(1, [DenseLayer(matrix([[1]]), None, tanh_series(3)), DenseLayer(matrix([[2]]), None)])
>>> decide_equivariance(odd, global_sign(1)).holds
True
>>> shifted = Model(1, [DenseLayer(matrix([[1]]), [1], tanh_series(3)), DenseLayer(matrix([[2]]), None)])
>>> r = decide_equivariance(shifted, global_sign(1))
>>> r.holds, r.method, r.witness.generator
(False, 'symbolic', 'neg')
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from math import comb

from flint import fmpq, fmpq_mat

from .budget import Deadline
from .errors import InputError
from .groups import FiniteGroup
from .layers.base import real_valued_layer
from .layers.registry import KindUnsupported, supports
from .models import Model
from .numbers import format_number, format_vector, mat_rows
from .sizes import guard_expansion

__all__ = ["Witness", "BallWitness", "EquivarianceResult", "decide_equivariance", "principal_lattice",
           "layers_first", "refute_with_balls", "BALL_PRECISIONS"]

DEFAULT_MAX_GRID = 20000
DEFAULT_MAX_SYMBOLIC = 2000


@dataclass
class Witness:
    """A point x where f(rho_in(g) x) != rho_out(g) f(x), with both sides."""

    generator: str
    generator_index: int
    x: list
    lhs: list
    rhs: list

    def to_json(self) -> dict:
        return {"generator": self.generator_index, "generator_name": self.generator, "x": format_vector(self.x),
                "f_of_gx": format_vector(self.lhs), "g_of_fx": format_vector(self.rhs)}


@dataclass
class BallWitness:
    """A rational x where a ball of f(rho_in(g) x) - rho_out(g) f(x) excludes 0: a proof of failure.

    ``enclosures[j] = (lo, hi)`` (exact dyadic rationals) encloses output j of the difference at
    ``precision`` bits (python-flint's arb); ``output`` is one j with 0 outside [lo, hi].
    """

    generator: str
    generator_index: int
    x: list
    precision: int
    output: int
    enclosures: list

    def to_json(self) -> dict:
        return {"kind": "arb", "generator": self.generator_index, "generator_name": self.generator,
                "x": format_vector(self.x), "precision": self.precision, "output": self.output,
                "enclosures": [[format_number(lo), format_number(hi)] for lo, hi in self.enclosures]}

    def lines(self) -> list[str]:
        lo, hi = self.enclosures[self.output]
        return [f"  witness for generator {self.generator}: x = [{', '.join(map(str, self.x))}]",
                f"    output {self.output + 1} of f(g x) - g f(x) lies in [{float(lo):.6g}, {float(hi):.6g}] "
                f"(exact ends {lo} .. {hi}; arb balls at {self.precision} bits), which excludes 0"]


@dataclass
class EquivarianceResult:
    """The end-to-end verdict: holds, how it was decided, and a witness when it fails.

    ``holds`` is None when the premise could not be decided (real activations: no action found
    and no ball witness; the verdict is then undetermined).
    """

    holds: bool | None
    method: str
    probabilistic: bool = False
    error_bound: fmpq | None = None
    witness: Witness | None = None
    points: int = 0
    detail: str = ""

    @property
    def exact(self) -> bool:
        return not self.probabilistic

    def to_json(self) -> dict:
        return {
            "holds": self.holds,
            "method": self.method,
            "probabilistic": self.probabilistic,
            "error_bound": None if self.error_bound is None else str(self.error_bound),
            "points": self.points,
            "detail": self.detail,
            "witness": None if self.witness is None else self.witness.to_json(),
        }


def principal_lattice(n: int, d: int):
    """Points a in N^n with |a| <= d: unisolvent for polynomials of total degree <= d.

    >>> sorted(principal_lattice(2, 1))
    [(0, 0), (0, 1), (1, 0)]
    """
    def rec(prefix, left, k):
        if k == 0:
            yield tuple(prefix)
            return
        for a in range(left + 1):
            prefix.append(a)
            yield from rec(prefix, left - a, k - 1)
            prefix.pop()

    yield from rec([], d, n)


def _check_batch(model: Model, A: fmpq_mat, B: fmpq_mat, X: fmpq_mat):
    """Column index of the first point where f(A x) != B f(x), with both sides; else None."""
    lhs = model.forward(A * X)
    rhs = B * model.forward(X)
    if lhs == rhs:
        return None
    n = lhs.nrows()
    for c in range(X.ncols()):
        if any(lhs[r, c] != rhs[r, c] for r in range(n)):
            return c, [lhs[r, c] for r in range(n)], [rhs[r, c] for r in range(n)]
    raise AssertionError("unreachable: matrices differ but no column does")


def _witness_from(model, group, gi, X, hit) -> Witness:
    c, lhs, rhs = hit
    x = [X[r, c] for r in range(X.nrows())]
    A, B = group.generators[gi]
    # re-evaluate the single point: the witness must really fail
    assert model([sum((A[i, j] * x[j] for j in range(len(x))), fmpq(0)) for i in range(len(x))]) != [
        sum((B[i, j] * v for j, v in enumerate(model(x))), fmpq(0)) for i in range(B.nrows())
    ]
    return Witness(group.names[gi], gi, x, lhs, rhs)


def decide_equivariance(
    model: Model,
    group: FiniteGroup | None = None,
    *,
    method: str = "auto",
    max_grid: int = DEFAULT_MAX_GRID,
    random_points: int = 4,
    random_range: int = 2**31,
    rng: random.Random | int | None = None,
    deadline: Deadline | None = None,
    batch: int = 512,
) -> EquivarianceResult:
    """Decide whether the model is G-equivariant end to end (exactly, or say it is probabilistic).

    Parameters
    ----------
    model : the model (polynomial, ReLU or real activations; real ones: layers first, then ball
        witnesses, ``holds=None`` when neither decides)
    group : defaults to ``model.group``
    method : "auto" (symbolic up to 2000 monomials, grid up to ``max_grid`` points, else probabilistic),
        "grid", "symbolic", "probabilistic"; ReLU models always use "relu-regions"
    random_points, random_range : k and M of the Schwartz-Zippel bound (D / (2M + 1))^k

    Returns
    -------
    EquivarianceResult
    """
    group = group if group is not None else model.group
    if group is None:
        raise InputError("no group given: put a \"group\" in the model file or pass one (--group)")
    model.check_group(group)
    group.validate()
    deadline = deadline or Deadline(None)
    if _has_real(model):
        # not a polynomial: layers first (a proof), else a ball witness (a proof of failure), else undecided
        _, res = layers_first(model, group, deadline)
        if res is None:
            res = refute_with_balls(model, group, deadline=deadline, rng=rng)
        return res if res is not None else EquivarianceResult(
            None, "undetermined", detail="no layerwise action at theta and no refuting input found with arb balls "
                                         f"(precisions up to {BALL_PRECISIONS[-1]} bits)")
    if model.has_relu:
        return _decide_relu(model, group, deadline)
    if not model.is_polynomial:
        raise InputError("equivariance can be decided for polynomial and ReLU models only")
    n, D = model.input_dim, model.degree()
    grid_size = comb(n + D, D)
    if method == "auto":
        # Both exact methods are proofs; the fmpq_mpoly expansion is faster while the number of
        # monomials is small (benchmarks/README.md), the grid evaluation scales further.
        method = ("symbolic" if grid_size <= DEFAULT_MAX_SYMBOLIC and not model.token_mixing
                  else "grid" if grid_size <= max_grid else "probabilistic")
    if method == "grid":
        return _by_grid(model, group, n, D, deadline, batch)
    if method == "symbolic":
        return _by_expansion(model, group, n, D, deadline)
    if method == "probabilistic":
        return _at_random_points(model, group, n, D, deadline, rng, random_points, random_range)
    raise InputError(f"unknown equivariance method {method!r}; use auto, grid, symbolic or probabilistic")


def _by_grid(model: Model, group: FiniteGroup, n: int, D: int, deadline: Deadline, batch: int) -> EquivarianceResult:
    """The premise on the principal lattice of degree D (unisolvent for degree <= D: a proof), in batches."""
    pts = principal_lattice(n, D)
    done = 0
    while True:
        chunk = []
        for p in pts:
            chunk.append(p)
            if len(chunk) == batch:
                break
        if not chunk:
            break
        X = fmpq_mat(n, len(chunk), [p[i] for i in range(n) for p in chunk])
        for gi, (A, B) in enumerate(group.generators):
            deadline.check("checking equivariance on the unisolvent grid")
            hit = _check_batch(model, A, B, X)
            if hit:
                return EquivarianceResult(False, "grid", witness=_witness_from(model, group, gi, X, hit),
                                          points=done + hit[0] + 1,
                                          detail=f"fails at a point of the degree-{D} principal lattice")
        done += len(chunk)
    return EquivarianceResult(True, "grid", points=done,
                              detail=f"h_g = 0 on all {done} points of the principal lattice of degree {D} "
                                     f"in {n} variables, which is unisolvent for degree <= {D}: a proof")


def _by_expansion(model: Model, group: FiniteGroup, n: int, D: int, deadline: Deadline) -> EquivarianceResult:
    """The premise by expanding both sides into polynomials (fmpq_mpoly), a lattice witness when they differ."""
    from flint import fmpq_mpoly_ctx

    # size first (a forced --method symbolic on a large model would exhaust memory inside FLINT)
    guard_expansion(model, "expanding the model symbolically (premise)", symbolic=False,
                    input_terms=n, hint="--method grid or probabilistic evaluate instead of expanding")
    ctx = fmpq_mpoly_ctx.get(("x", n), "degrevlex")
    f = model.polynomial_map(ctx)
    for gi, (A, B) in enumerate(group.generators):
        deadline.check("expanding the model symbolically")
        fA = model.polynomial_map(ctx, input_matrix=A)
        Bf = [sum((B[i, j] * f[j] for j in range(len(f)) if B[i, j] != 0), ctx.from_dict({})) for i in range(B.nrows())]
        if fA != Bf:
            # a difference polynomial is nonzero: find a lattice point where it is, exactly
            for p in principal_lattice(n, D):
                X = fmpq_mat(n, 1, list(p))
                hit = _check_batch(model, A, B, X)
                if hit:
                    return EquivarianceResult(False, "symbolic", witness=_witness_from(model, group, gi, X, hit),
                                              detail="the expanded polynomials differ")
            raise AssertionError("unisolvence violated")
    return EquivarianceResult(True, "symbolic", detail="f(rho_in(g) x) and rho_out(g) f(x) expand to the same polynomials")


def _at_random_points(model: Model, group: FiniteGroup, n: int, D: int, deadline: Deadline, rng, random_points: int,
                      random_range: int) -> EquivarianceResult:
    """The premise at random integer points: a proof of failure, else probabilistic (Schwartz-Zippel)."""
    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    X = fmpq_mat(n, random_points, [rng.randint(-random_range, random_range) for _ in range(n * random_points)])
    for gi, (A, B) in enumerate(group.generators):
        deadline.check("checking equivariance at random points")
        hit = _check_batch(model, A, B, X)
        if hit:
            return EquivarianceResult(False, "probabilistic", witness=_witness_from(model, group, gi, X, hit),
                                      points=random_points, detail="fails at a random point (a proof of failure)")
    bound = (fmpq(D, 2 * random_range + 1)) ** random_points
    return EquivarianceResult(
        True, "probabilistic", probabilistic=True, error_bound=bound, points=random_points,
        detail=f"h_g vanished at {random_points} random points of {{-M..M}}^{n}, M = {random_range}; "
               f"a nonzero h_g of degree <= {D} does so with probability <= (D/(2M+1))^k = {float(bound):.3g} "
               "(Schwartz-Zippel): probabilistic, not a proof",
    )


def _decide_relu(model: Model, group: FiniteGroup, deadline: Deadline) -> EquivarianceResult:
    from .numbers import mat_rows
    from .relu.regions import decide_equivariance as relu_decide

    if not all(l.activation is None or l.activation.kind == "relu" for l in model.layers):
        raise InputError("mixing ReLU and polynomial activations is not supported")
    if model.sparse_actions:  # convolutions: exact evaluation at random rational points refutes first (docs/conv.md)
        rng = random.Random(0)
        n = model.input_dim
        X = fmpq_mat(n, 4, [fmpq(rng.randint(-2**20, 2**20), 2**10) for _ in range(4 * n)])
        for gi, (A, B) in enumerate(group.generators):
            deadline.check("checking equivariance at random points")
            hit = _check_batch(model, A, B, X)
            if hit:
                return EquivarianceResult(False, "random points", witness=_witness_from(model, group, gi, X, hit),
                                          points=4, detail="fails at a random rational point (exact evaluation): "
                                                           "a proof of failure")
    layers = [(mat_rows(l.weight), list(l.bias), l.activation is not None) for l in model.layers]
    total = 0
    for gi, (A, B) in enumerate(group.generators):
        deadline.check("enumerating ReLU linear regions")
        dec = relu_decide(layers, mat_rows(A), mat_rows(B), deadline=deadline)
        total += dec.regions
        if not dec.holds:
            x = list(dec.witness)
            X = fmpq_mat(len(x), 1, x)
            hit = _check_batch(model, A, B, X)
            assert hit, "ReLU witness does not fail"
            return EquivarianceResult(False, "relu-regions", witness=_witness_from(model, group, gi, X, hit),
                                      points=total, detail="h_g is a nonzero affine map on a linear region")
    return EquivarianceResult(True, "relu-regions", points=total,
                              detail=f"h_g is identically zero on each of its {total} open linear regions "
                                     "(exact LP over Q); by continuity it vanishes everywhere: a proof")


#: precisions (bits) tried in turn by :func:`refute_with_balls`
BALL_PRECISIONS = (64, 128, 256, 512, 1024)


def has_real(model: Model) -> bool:
    return any(real_valued_layer(l) for l in model.layers)  # a real activation, or softmax attention


def layers_first(model: Model, group: FiniteGroup, deadline: Deadline, *, max_candidates: int = 64,
                 max_nodes: int = 100000):
    """Derive the latent actions before deciding the premise: (derivation, result or None).

    When every layer passes its exact check (polynomial identities, the ReLU rule, or a real
    activation's symmetry identity) and the actions form a homomorphism, f is equivariant: a
    composition of equivariant maps is equivariant.  The result then says so (method
    ``"layerwise"``); otherwise it is None and the derivation's failure is kept for the caller
    (ReLU: the region enumeration may still refute or prove within the budget; real
    activations: :func:`refute_with_balls`).
    """
    from .layerwise import derive_latent_actions

    d = derive_latent_actions(model, group, max_candidates=max_candidates, deadline=deadline, max_nodes=max_nodes)
    if not d.found:
        return d, None
    checks = len(d.layer_checks)
    return d, EquivarianceResult(
        True, "layerwise", detail=f"every layer is equivariant ({checks} exact layer checks: identities on (W, b) "
                                  "and the activation's symmetry identity) and g -> rho_i(g) is a homomorphism; a "
                                  "composition of equivariant layers is equivariant: a proof")


def _ball_forward(model: Model, x: list):
    """f(x) with every entry an arb ball (x exact rationals or balls)."""
    from flint import arb

    y = [v if isinstance(v, arb) else arb(v) for v in x]
    if getattr(model, "nodes", None) is not None:  # a graph model (symeq/graph/model.py): its own ball pass
        return model.ball_forward(y)
    for l in model.layers:  # each kind's own enclosure (dense rows, conv kernels, attention)
        if not supports(l, "ball-evaluation"):
            raise KindUnsupported(l.kind, "ball-evaluation", "ball evaluation")
        y = l.ball_forward(y)
    return y


def _ball_ends(b):
    """Exact rational ends (lo, hi) of an arb ball."""
    def exact(e):
        m, k = e.man_exp()
        return fmpq(int(m)) * (fmpq(2) ** int(k)) if k >= 0 else fmpq(int(m), 2 ** int(-k))
    return exact(b.lower()), exact(b.upper())


def _candidate_points(n: int, rng: random.Random, count: int) -> list:
    """Rational test inputs with small numerators and denominators 4 or 2 (entries in [-1, 1] or
    [-2, 2]: saturating activations such as tanh keep differences visible there), seeded."""
    pts = []
    for k in range(count):
        den = 4 if k % 2 == 0 else 2
        pts.append([fmpq(rng.randint(-4, 4), den) for _ in range(n)])
    return pts


def refute_with_balls(model: Model, group: FiniteGroup | None = None, *, deadline: Deadline | None = None,
                      points: int = 8, precisions=BALL_PRECISIONS, rng=0) -> EquivarianceResult | None:
    """Look for a rational x with f(g x) != g f(x), proved by arb balls; None if none was found.

    For each precision of ``precisions`` in turn (while the budget lasts) and each generator, the
    difference h_g(x) = f(rho_in(g) x) - rho_out(g) f(x) is evaluated with python-flint's arb
    balls at ``points`` seeded rational inputs; a witness counts only when the ball of some output
    excludes 0.  A difference that is exactly 0 (an equivariant f) never yields one.

    Examples
    --------
    >>> from symeq.groups import global_sign
    >>> from symeq.activations import real
    >>> from symeq.models import DenseLayer, Model
    >>> shifted = Model(1, [DenseLayer([[1]], [1], real("tanh")), DenseLayer([[2]], None)])
    >>> r = refute_with_balls(shifted, global_sign(1))
    >>> r.holds, r.method, r.witness.precision
    (False, 'arb-witness', 64)
    >>> odd = Model(1, [DenseLayer([[1]], None, real("tanh")), DenseLayer([[2]], None)])
    >>> refute_with_balls(odd, global_sign(1)) is None
    True
    """
    from flint import arb, ctx

    group = group if group is not None else model.group
    deadline = deadline or Deadline(None)
    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    n = model.input_dim
    pts = _candidate_points(n, rng, points)
    old = ctx.prec
    tried = 0
    try:
        for prec in precisions:
            ctx.prec = prec
            for gi, (A, B) in enumerate(group.generators):
                Ar, Br = mat_rows(A), mat_rows(B)
                for x in pts:
                    deadline.check(f"looking for a refuting input with arb balls ({prec} bits)")
                    tried += 1
                    gx = [sum((a * v for a, v in zip(row, x)), fmpq(0)) for row in Ar]
                    lhs = _ball_forward(model, gx)
                    fx = _ball_forward(model, x)
                    diff = []
                    for i, row in enumerate(Br):
                        acc = lhs[i]
                        for c, v in zip(row, fx):
                            if c != 0:
                                acc -= arb(c) * v
                        diff.append(acc)
                    hit = next((j for j, h in enumerate(diff) if not h.contains(0)), None)
                    if hit is not None:
                        w = BallWitness(group.names[gi], gi, x, prec, hit, [_ball_ends(h) for h in diff])
                        return EquivarianceResult(
                            False, "arb-witness", witness=w, points=tried,
                            detail=f"at x = [{', '.join(map(str, x))}] the arb ball ({prec} bits) of output {hit + 1} "
                                   f"of f(g x) - g f(x) excludes 0 (generator {group.names[gi]}): a proof of failure")
    finally:
        ctx.prec = old
    return None


_has_real = has_real  # the earlier private name, for callers not yet moved to the public one
