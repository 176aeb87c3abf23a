"""One identifiability report: which method decided, which were tried, and why each did not apply.

:func:`decide_identifiability` is what ``symeq fibre``, ``symeq verify --identifiability`` and
``symeq explain`` call, so that they agree.  With ``method="auto"`` it tries, in order
(docs/identifiability.md):

1. **classical** -- Sussmann's and Fefferman's theorems for real tanh/sigmoid networks
   (:mod:`symeq.fibre.classical`, when that module is present);
2. **tensor** -- Kruskal certificates for one hidden layer (:mod:`symeq.fibre.tensor`);
3. **jacobian-factors** -- the Jacobian-factor certificate for two or three hidden layers
   (:mod:`symeq.fibre.deep`, reached through the tensor method);
4. **jacobian-rank** -- local identifiability by the exact Jacobian rank mod p, or a proven family in
   the fibre (:mod:`symeq.fibre.jacobian`); for ReLU / leaky ReLU networks the exact functional
   dimension (:mod:`symeq.relu.fdim`, :func:`relu_local_identifiability`): locally identifiable only
   when the rank meets #params - dim T;
5. **groebner** -- the fibre ideal against the orbit, when its size guard lets it start; a global
   answer from it replaces a local one.

The first global verdict (identifiable / not identifiable) ends the search; a classical verdict is
reported with the theorem's name as its method ("sussmann" / "fefferman").  A model that no method
covers (GELU, SiLU, ... networks) is "unknown" (exit 3) with every method's reason: nothing in the
input is wrong.  ``locally-identifiable``
is kept when the Gröbner step cannot start (its size guard) or does not finish.  Every step's outcome is
in :attr:`IdentifiabilityReport.tried`; :attr:`IdentifiabilityReport.hints` lists only options that
can succeed (``--max-monomials`` only when the memory estimate at the raised limit fits the memory
budget), and the Gröbner-engine note appears only when that step started without a real engine.

Examples
--------
>>> from symeq.examples import builtin_example
>>> r = decide_identifiability(builtin_example())
>>> r.status, r.method, r.exit_code
('locally-identifiable', 'jacobian-rank', 3)
>>> [t["method"] for t in r.tried]
['classical', 'tensor', 'jacobian-factors', 'jacobian-rank', 'groebner']
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..budget import Deadline
from ..errors import BudgetExceeded, InputError, LimitExceeded, MemoryLimit, MonomialLimit

__all__ = ["METHODS", "EXIT_CODES", "IdentifiabilityReport", "decide_identifiability", "relu_local_identifiability"]

#: the methods in the order ``auto`` tries them
METHODS = ("classical", "tensor", "jacobian-factors", "jacobian-rank", "groebner")
#: exit codes of a report: a local answer leaves the global question open (3)
EXIT_CODES = {"identifiable": 0, "not-identifiable": 1, "locally-identifiable": 3, "unknown": 3,
              "undetermined": 3, "not-applicable": 3}
_GLOBAL = ("identifiable", "not-identifiable")
#: the Jacobian step's answers that stand when the Gröbner step cannot start or finish
_ANSWERS = ("locally-identifiable", "not-identifiable")


@dataclass
class IdentifiabilityReport:
    """The identifiability of theta and how it was reached.

    Attributes
    ----------
    status : "identifiable", "not-identifiable", "locally-identifiable" (near theta the fibre is the
        orbit; the global question is open), "unknown" (nothing decided) or "not-applicable"
        (the method asked for does not cover this model)
    method : the method that decided (None when none did)
    reason : one sentence from the deciding method
    tried : one dict per method tried or skipped: ``method``, ``status``, ``reason``
    result : the deciding method's JSON (``to_json`` of its decision)
    decision : the deciding method's object (TensorDecision, JacobianDecision, FibreComparison, ...)
    local : the Jacobian-rank decision when it ran (also when Gröbner decided afterwards)
    certificate : a ``symeq-identifiability/1`` certificate of the decision, when there is one
    hints : options that can succeed, with why
    notes : remarks (the Gröbner-engine note when that step ran without a real engine)
    limit : the size guard that stopped the Gröbner step (a :class:`~symeq.errors.LimitExceeded`), if any
    """

    status: str
    method: str | None
    reason: str
    tried: list = field(default_factory=list)
    result: dict | None = None
    decision: object = field(default=None, repr=False)
    local: object = field(default=None, repr=False)
    certificate: dict | None = field(default=None, repr=False)
    hints: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    limit: LimitExceeded | None = field(default=None, repr=False)
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, 3)

    def summary(self) -> str:
        """The tried methods in one line each, e.g. ``tensor: not-applicable (one hidden layer needed ...)``."""
        return "\n".join(f"  {t['method']}: {t['status']}" + (f" ({t['reason']})" if t.get("reason") else "")
                         for t in self.tried)

    def to_json(self) -> dict:
        out = dict(self.result or {})
        out.update({"status": self.status, "method": self.method, "reason": self.reason,
                    "tried": list(self.tried), "hints": list(self.hints), "seconds": round(self.seconds, 4)})
        if self.notes:
            out["notes"] = list(dict.fromkeys(list(out.get("notes") or []) + self.notes))
        if self.local is not None and self.method != "jacobian-rank":
            out["local"] = self.local.to_json()
        return out


def _hidden(model) -> int:
    return len(model.layers) - 1


def decide_identifiability(model, *, method: str = "auto", timeout: float | None = None, engine: str = "auto",
                           certificate: bool = True) -> IdentifiabilityReport:
    """Decide identifiability of ``model``'s theta by the first method that applies (see the module docstring).

    Parameters
    ----------
    model : :class:`~symeq.models.Model` (its group is ignored: identifiability is about theta)
    method : "auto" or one of :data:`METHODS` (only that one is run)
    timeout : seconds for the whole decision (each step gets what is left)
    engine : the Gröbner engine (``symeq fibre --engine``)
    certificate : build the certificate of the deciding method where it has one

    Returns
    -------
    IdentifiabilityReport

    Raises
    ------
    LimitExceeded, BudgetExceeded
        When the Gröbner step is refused by a size guard or runs out of time and no earlier step
        reached a verdict (not even a local one); the report is the exception's ``report`` attribute.
    """
    if method != "auto" and method not in METHODS:
        raise InputError(f"method must be 'auto' or one of {', '.join(METHODS)}; got {method!r}")
    t0 = time.perf_counter()
    deadline = Deadline(timeout)
    model = model.with_group(None)
    tried: list = []
    hints: list = []
    notes: list = []
    local = None

    def left():
        return None if timeout is None else max(0.5, timeout - deadline.elapsed())

    def report(status, meth, reason, result=None, decision=None, cert=None, limit=None):
        return IdentifiabilityReport(status, meth, reason, tried, result, decision, local, cert, hints, notes, limit,
                                     time.perf_counter() - t0)

    def wanted(name):
        return method in ("auto", name)

    # 1. classical theorems (real activations)
    if wanted("classical"):
        try:
            from .classical import classical_identifiability
        except ImportError:  # pragma: no cover - the module ships with symeq
            tried.append({"method": "classical", "status": "not-available", "reason": "symeq.fibre.classical missing"})
        else:
            cd = classical_identifiability(model, timeout=left(), certificate=certificate)
            tried.append({"method": "classical", "status": cd.status, "reason": cd.reason})
            if cd.status in _GLOBAL or method == "classical":
                # the theorem that decided ("sussmann" / "fefferman") names the method in the report
                return report(cd.status, cd.method if cd.status in _GLOBAL else None, cd.reason, cd.to_json(), cd,
                              cd.certificate)
    # 2./3. tensor (one hidden layer) and the Jacobian factors (two or three)
    if wanted("tensor") or wanted("jacobian-factors"):
        from .tensor import tensor_identifiability

        h = _hidden(model)
        if method == "jacobian-factors" and h == 1:
            tried.append({"method": "jacobian-factors", "status": "not-applicable",
                          "reason": "two or three hidden layers needed, this model has 1"})
            return report("not-applicable", None, tried[-1]["reason"])
        td = tensor_identifiability(model, timeout=left(), certificate=certificate)
        if h == 1 or td.condition == "dense layers":
            name = "tensor"
            tried.append({"method": "tensor", "status": td.status, "reason": td.reason})
            if method == "auto":
                tried.append({"method": "jacobian-factors", "status": "not-applicable",
                              "reason": f"two or three hidden layers needed, this model has {h}"})
        else:
            name = "jacobian-factors"
            tried.append({"method": "tensor", "status": "not-applicable",
                          "reason": f"one hidden layer needed, this model has {h}"})
            tried.append({"method": "jacobian-factors", "status": td.status, "reason": td.reason})
        if td.status in _GLOBAL or method != "auto":
            return report(td.status, name if td.status in _GLOBAL else None, td.reason, td.to_json(), td,
                          td.certificate)
    # 4. local: the Jacobian rank (modulo 2^61-1 for polynomial activations; on the linear regions for
    #    ReLU / leaky ReLU, symeq.relu.fdim)
    if wanted("jacobian-rank"):
        from .jacobian import jacobian_identifiability

        try:
            if _piecewise_linear(model):
                local = relu_local_identifiability(model, deadline=deadline, certificate=certificate)
            else:
                local = jacobian_identifiability(model, deadline=deadline, certificate=certificate)
        except LimitExceeded as e:
            tried.append({"method": "jacobian-rank", "status": "refused", "reason": str(e)})
            if method == "jacobian-rank":
                raise
        else:
            tried.append({"method": "jacobian-rank", "status": local.status,
                          "reason": local.reason.removeprefix("jacobian-rank: ")})
            if method == "jacobian-rank":
                return report(local.status, "jacobian-rank" if local.status in _GLOBAL + ("locally-identifiable",)
                              else None, local.reason, local.to_json(), local, local.certificate)
    # 5. Gröbner: a global answer where its size guard lets it start (after a proof of non-identifiability
    #    by the Jacobian step it only adds the fibre's dimension and degree, within at most 10 s)
    if not wanted("groebner"):  # pragma: no cover - every single method returned above
        return report("unknown", None, "no method decided")
    from .orbit import compare_with_orbit

    proven = local is not None and local.status == "not-identifiable"
    if model.has_relu or not model.is_polynomial or model.has_attention:
        tried.append({"method": "groebner", "status": "not-applicable",
                      "reason": "the fibre ideal needs dense layers with polynomial activations"})
        return _fallback(report, local, tried)
    from ..layers.base import declared_biases

    if len(set(declared_biases(model))) > 1:  # issue 25: the orbit count takes one bias declaration
        tried.append({"method": "groebner", "status": "not-applicable",
                      "reason": "the orbit count of the Gröbner step takes biases in every layer or in none; "
                                "this model declares them in some layers only"})
        return _fallback(report, local, tried)
    try:
        budget = left()
        if proven:
            budget = 10.0 if budget is None else min(budget, 10.0)
        _engine_note(engine, notes)
        c = compare_with_orbit(model, engine=engine, timeout=budget)
    except LimitExceeded as e:
        tried.append({"method": "groebner", "status": "refused", "reason": str(e)})
        if isinstance(e, MonomialLimit):
            _monomial_hint(model, e, hints)
            if hints and "would not help" in hints[-1]:  # the size guard's own "raise it" would lead nowhere
                tried[-1]["reason"] = tried[-1]["reason"].replace(
                    "raise it with --max-monomials", "raising --max-monomials would not help (memory)")
        elif isinstance(e, MemoryLimit):
            hints.append("the Gröbner step needs more memory than the budget: --memory GB raises it where the "
                         "machine has it")
        notes[:] = [n for n in notes if "Gröbner engine" not in n]  # the engine was never needed
        if method == "groebner" or local is None or local.status not in _ANSWERS:
            # nothing better than "unknown": the size guard is the answer (exit 2 in fibre, "undetermined"
            # with the limit in verify), the report rides on the exception
            e.report = report("unknown", None, str(e), limit=e)
            raise
        out = _fallback(report, local, tried)
        out.limit = e
        return out
    except BudgetExceeded as e:
        tried.append({"method": "groebner", "status": "unknown", "reason": f"budget exceeded: {e}"})
        if method == "groebner" or local is None or local.status not in _ANSWERS:
            e.report = report("unknown", None, str(e))
            raise
        return _fallback(report, local, tried)
    tried.append({"method": "groebner", "status": c.status, "reason": c.reason})
    if c.criterion != "groebner":  # decided structurally (equation count, inactive neuron): no engine was needed
        notes[:] = [n for n in notes if "Gröbner engine" not in n]
    if c.status in _GLOBAL:
        if proven and c.status == "identifiable":  # pragma: no cover - two proofs disagree
            raise AssertionError("the Gröbner fibre contradicts a proven family in the fibre")
        return report(c.status, "groebner", c.reason, None, c)
    if method == "groebner" or local is None or local.status not in ("locally-identifiable", "not-identifiable"):
        return report(c.status, None, c.reason, None, c)
    return _fallback(report, local, tried)


def _fallback(report, local, tried):
    """The Jacobian step's answer when the Gröbner step reached nothing global (or "unknown")."""
    if local is not None and local.status in ("locally-identifiable", "not-identifiable", "unknown", "undetermined"):
        status = local.status if local.status in ("locally-identifiable", "not-identifiable") else "unknown"
        return report(status, "jacobian-rank" if status != "unknown" else None, local.reason,
                      local.to_json(), local, local.certificate)
    if all(t["status"] == "not-applicable" for t in tried):
        # nothing the user did wrong: the question is open for this model (exit 3), with every reason
        return report("unknown", None, "no identifiability method covers this model: "
                      + "; ".join(f"{t['method']}: {t['reason']}" for t in tried))
    reasons = "; ".join(f"{t['method']}: {t['reason']}" for t in tried if t.get("reason"))
    return report("unknown", None, f"no method decided ({reasons})")


def _piecewise_linear(model) -> bool:
    """Dense layers whose activations are ReLU or leaky ReLU (or none), at least one of them."""
    from ..relu.fdim import activation_slope

    acts = [l.activation for l in model.layers if l.activation is not None]
    if not acts or any(l.kind != "dense" for l in model.layers) or model.is_polynomial:
        return False
    try:
        for a in acts:
            activation_slope(a)
    except InputError:
        return False
    return True


@dataclass
class ReluLocalDecision:
    """The Jacobian-rank step for a ReLU / leaky ReLU network (:func:`relu_local_identifiability`).

    ``status`` is "locally-identifiable" only when the exact rank on the sample (a proven lower bound of
    the functional dimension) reaches ``#params - dim T`` (T: the tangent of the positive-rescaling
    orbit, computed); otherwise "unknown" with the shortfall and its explanation: a missed bound proves
    nothing about the fibre by itself.
    """

    status: str
    reason: str
    fdim: object = field(default=None, repr=False)
    seconds: float = 0.0
    certificate: dict | None = field(default=None, repr=False)

    def to_json(self) -> dict:
        f = self.fdim
        out = {"method": "jacobian-rank", "engine": "relu-fdim", "exact": True, "status": self.status,
               "reason": self.reason, "seconds": round(self.seconds, 4), "over": "R (near theta)"}
        if f is not None:
            out.update({"condition": f"rank of the Jacobian on {f.points} points off every bent hyperplane "
                                     f"mod {f.prime} = {f.rank}; #params - dim T = {f.params} - {f.orbit_dim}",
                        "field": f"GF({f.prime}) (rank mod p: a lower bound over QQ)", "rank": f.rank,
                        "parameters": f.params, "orbit_dimension": f.orbit_dim, "upper_bound": f.bound,
                        "points": f.points, "prime": str(f.prime), "dimension_lower_bound": None,
                        "families": [], "functional_dimension": f.to_json()})
        return out


def relu_local_identifiability(model, *, deadline=None, certificate: bool = True) -> ReluLocalDecision:
    """Local identifiability of a ReLU / leaky ReLU network by its exact functional dimension.

    Examples
    --------
    >>> from symeq.models import Model, DenseLayer
    >>> from symeq.activations import relu
    >>> m = Model(2, [DenseLayer([[1, 2], [3, -1], [-2, 1]], [1, -1, 2], relu()),
    ...               DenseLayer([[1, -1, 2]], [0], None)])
    >>> relu_local_identifiability(m).status
    'locally-identifiable'
    """
    from ..relu.fdim import relu_functional_dimension

    t0 = time.perf_counter()
    try:
        f = relu_functional_dimension(model, deadline=deadline)
    except LimitExceeded:
        raise
    except BudgetExceeded as e:
        return ReluLocalDecision("undetermined", f"budget exceeded: {e}", seconds=time.perf_counter() - t0)
    except InputError as e:  # e.g. every sampled point on a bent hyperplane: the rank is not defined there
        return ReluLocalDecision("unknown", f"the ReLU functional dimension is not defined here: {e}",
                                 seconds=time.perf_counter() - t0)
    cert = None
    if f.locally_identifiable:
        status = "locally-identifiable"
        reason = (f"{f.summary()}: near theta every parameter with the same function is a positive rescaling "
                  "of theta (the activation patterns at the sample stay fixed near theta; constant-rank "
                  "theorem, Bona-Pellissier, Bachoc and Malgouyres 2022); the global question stays open")
        cert = _relu_certificate(model, f) if certificate else None
    else:
        status = "unknown"
        reason = f"{f.summary()}: a missed bound is not a proof that the fibre is larger than the orbit"
    return ReluLocalDecision(status, reason, f, time.perf_counter() - t0, cert)


def _relu_certificate(model, f) -> dict | None:
    """The ``symeq-identifiability/1`` jacobian-rank certificate of a locally identifiable ReLU network: the
    sample points and every row of the Jacobian there; ``symeq check`` re-checks exactly that no hidden
    pre-activation is 0 at a point, recomputes the rows and the positive rescalings' tangent, and eliminates.

    Written for dense networks with ReLU or leaky ReLU hidden layers and some nonzero bias (the checker
    counts the biases of such a model among the parameters, as :mod:`symeq.relu.fdim` does); else None."""
    from ..check import layers_digest
    from ..io import layers_to_json

    layers = model.layers
    if any(l.kind != "dense" or l.tokens is not None for l in layers) or layers[-1].activation is not None \
            or any(l.activation is None or not (l.activation.kind == "relu" or l.activation.name == "leaky_relu")
                   for l in layers[:-1]):
        return None
    if not any(b != 0 for l in layers for b in l.bias) or not f.sample_points:
        return None
    P = sum(l.in_dim * l.out_dim + l.out_dim for l in layers)
    if P != f.params:  # pragma: no cover - fdim counts W and b of every layer
        return None
    K = layers[-1].out_dim
    return {
        "format": "symeq-identifiability/1",
        "method": "jacobian-rank",
        "verdict": "locally-identifiable",
        "widths": model.widths,
        "bias": True,
        "layers_sha256": layers_digest(layers_to_json(model), model.input_dim),
        "prime": str((1 << 61) - 1),
        "seed": 0,
        "parameters": P,
        "parameter_order": "per layer: W row-major, then b",
        "points": [[str(x) for x in pt] for pt in f.sample_points],
        "rows": list(range(len(f.sample_points) * K)),
        "rank": f.rank,
        "orbit_dimension": f.orbit_dim,
        "orbit_generators": [f"positive rescaling of neuron {i + 1} of hidden layer {li + 1}"
                             for li, l in enumerate(layers[:-1]) for i in range(l.out_dim)],
    }


def _engine_note(engine: str, notes: list) -> None:
    from .groebner import ENGINES, available_engines

    real = {name for name in ENGINES if name not in ("sympy", "flint")}
    if engine == "sympy":
        notes.append("--engine sympy is slow beyond tiny ideals (it stops at the time budget)")
    elif engine == "auto" and not set(available_engines()) & real:
        pkgs = " ".join(ENGINES[e].install.split()[-1] for e in ("singular", "giac", "msolve"))
        notes.append("no Gröbner engine installed (Singular, giac, msolve, Macaulay2): the Gröbner step fell back "
                     f"to sympy, which is slow beyond tiny ideals; install one with `pip install --no-deps {pkgs}`")


def _monomial_hint(model, e: MonomialLimit, hints: list) -> None:
    """Suggest --max-monomials only when the memory estimate at the raised limit fits the budget."""
    from ..procs import memory_cap
    from ..sizes import ExpansionSize, expansion_bytes

    value = e.value
    if not isinstance(value, int):
        return
    nvars = model.input_dim + sum(l.in_dim * l.out_dim + l.out_dim for l in model.layers)
    need = expansion_bytes(ExpansionSize(max_terms=value, total_terms=value, degree=0, nvars=nvars))
    cap = memory_cap()
    if cap is not None and need > cap:
        hints.append(f"raising --max-monomials to {value} would not help: the fibre ideal would then need about "
                     f"{need / 2**30:.3g} GB > the memory budget of {cap / 2**30:.3g} GB")
    else:
        hints.append(f"--max-monomials {value} lets the Gröbner step start (about {need / 2**30:.3g} GB estimated)")
