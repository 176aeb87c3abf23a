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

A model with a hidden affine (degree-1) layer is decided before these by :func:`_affine_decision` (its GL
symmetry against the monomial latent group).  Every status is about real parameters by default
(``field="R"``: a fibre point counts only when it is real); ``field="C"`` asks the complex question.
The report is always returned, with the strongest result reached (docs/identifiability.md, "No answer
lost").

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

import contextlib
import signal
import threading
import time
from dataclasses import dataclass, field

from ..budget import BudgetAlarm, Deadline, process_deadline
from ..errors import BudgetExceeded, InputError, LimitExceeded, MemoryLimit, MonomialLimit
from ..layers.registry import all_support
from ..steps import Skip, run_steps

__all__ = ["METHODS", "EXIT_CODES", "IDENTIFIABILITY_STEPS", "IdentifiabilityReport", "decide_identifiability",
           "relu_local_identifiability", "limit_json"]

from .methods import METHODS  # noqa: E402  (the methods in the order ``auto`` tries them)
#: exit codes of a report: a local answer leaves the global question open (3)
EXIT_CODES = {"identifiable": 0, "not-identifiable": 1, "locally-identifiable": 3, "unknown": 3,
              "undetermined": 3, "not-applicable": 3}
_GLOBAL = ("identifiable", "not-identifiable")
#: the Jacobian step's answers that stand when the Gröbner step cannot start or finish
_ANSWERS = ("locally-identifiable", "not-identifiable")
#: seconds the Gröbner step may add after a proven answer (its dimension and degree), enforced
PROVEN_STEP_CAP = 10.0
#: seconds kept back from the command's budget so that the report is printed before its alarm
_REPORT_MARGIN = 1.0


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
    over : the field the status is about: "R" (real parameters, the default) or "C" (``field="C"``)
    refused : True when the one method asked for (``method`` not "auto") was refused by its size guard
        before it started: ``symeq fibre`` prints the report and exits 2
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
    over: str = "R"
    refused: bool = False
    #: the budget message when the time budget stopped a step (the report keeps what was reached)
    budget: str | None = None

    @property
    def exit_code(self) -> int:
        if self.refused and self.status not in _GLOBAL + ("locally-identifiable",):
            return 2
        return EXIT_CODES.get(self.status, 3)

    def summary(self) -> str:
        """The tried methods in one line each, e.g. ``tensor: not-applicable (one hidden layer needed ...)``."""
        return "\n".join(f"  {t['method']}: {t['status']}" + (f" ({t['reason']})" if t.get("reason") else "")
                         for t in self.tried)

    def to_json(self) -> dict:
        out = dict(self.result or {})
        out.update({"status": self.status, "method": self.method, "reason": self.reason, "over": self.over,
                    "tried": list(self.tried), "hints": list(self.hints), "seconds": round(self.seconds, 4)})
        if self.limit is not None:
            out["limit"] = limit_json(self.limit)
        if self.budget is not None:
            out["stopped"] = self.budget
        if self.notes:
            out["notes"] = list(dict.fromkeys(list(out.get("notes") or []) + self.notes))
        if self.local is not None and self.method != "jacobian-rank":
            out["local"] = self.local.to_json()
        return out


def _hidden(model) -> int:
    return len(model.layers) - 1


def limit_json(e: LimitExceeded) -> dict:
    return {"limit": e.limit, "value": e.value, "maximum": e.maximum, "option": e.option, "what": e.what,
            "message": str(e)}


class _StepCapped(BaseException):
    """Raised by :func:`_hard_cap` when a step ran past its cap (a BaseException: nothing swallows it)."""


@contextlib.contextmanager
def _hard_cap(seconds: float | None):
    """Interrupt the enclosed step after ``seconds`` with :class:`_StepCapped`, also inside code that checks
    no deadline (a real-time timer in the main thread; engine processes are killed by their ``finally``
    blocks).  A command's own alarm (:class:`~symeq.budget.Alarm`) is suspended meanwhile and re-armed with
    the time it had left; when it would fire first, it fires.  Elsewhere (no SIGALRM, another thread) the
    step's own deadline is all there is."""
    if seconds is None or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return
    seconds = max(0.05, seconds)
    old = signal.getsignal(signal.SIGALRM)
    outer, _ = signal.getitimer(signal.ITIMER_REAL)
    outer_first = 0 < outer <= seconds
    t0 = time.monotonic()

    def fire(signum, frame):
        if outer_first and callable(old):
            old(signum, frame)  # the command's budget: its own BudgetAlarm
        raise _StepCapped()

    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, outer if outer_first else seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer > 0 and not outer_first:
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, outer - (time.monotonic() - t0)))


def _command_left() -> float | None:
    """Seconds before the command's alarm fires, less the margin to print the report (None: no alarm)."""
    end = process_deadline()
    return None if end is None else max(0.05, end - time.perf_counter() - _REPORT_MARGIN)


class _Decision:
    """The state the steps of :func:`decide_identifiability` share: the question, the budget, the report
    being built (``tried``, ``hints``, ``notes``), and the Jacobian step's decision (``local``)."""

    def __init__(self, model, method, timeout, engine, certificate, field):
        self.model, self.method, self.timeout, self.engine = model, method, timeout, engine
        self.certificate, self.field = certificate, field
        self.t0 = time.perf_counter()
        self.deadline = Deadline(timeout)
        self.tried: list = []
        self.hints: list = []
        self.notes: list = []
        self.local = None
        self.stopped = None  # the budget message of a step the time budget stopped

    def left(self):
        return None if self.timeout is None else max(0.5, self.timeout - self.deadline.elapsed())

    def wanted(self, name) -> bool:
        return self.method in ("auto", name)

    def report(self, status, meth, reason, result=None, decision=None, cert=None, limit=None, refused=False):
        return IdentifiabilityReport(status, meth, reason, self.tried, result, decision, self.local, cert, self.hints,
                                     self.notes, limit, time.perf_counter() - self.t0, self.field, refused,
                                     self.stopped)

    def fallback(self):
        return _fallback(self.report, self.local, self.tried)


def _step_affine(st: _Decision):
    """A hidden affine (degree-1) layer: its GL symmetry against the monomial latent group."""
    from ..models import linear_hidden_allowed

    with linear_hidden_allowed():  # a hidden affine layer is a kind of activation here (_affine_decision)
        st.model = st.model.with_group(None)
        affine = _affine_decision(st.model)
    if affine is None:
        return Skip("no hidden affine layer")
    status, reason, witness = affine
    st.tried.append({"method": "affine", "status": status, "reason": reason})
    return st.report(status, "affine" if status in _GLOBAL else None, reason,
                     {"method": "affine", "status": status, "reason": reason, "over": "R",
                      "condition": "hidden affine (degree-1) layers: their GL symmetry against the "
                                   "monomial latent group", "witness": witness, "exact": True})


def _step_classical(st: _Decision):
    """1. Sussmann's and Fefferman's theorems (real tanh/sigmoid networks)."""
    if not st.wanted("classical"):
        return Skip(f"only {st.method} asked for")
    try:
        from .classical import classical_identifiability
    except ImportError:  # pragma: no cover - the module ships with symeq
        st.tried.append({"method": "classical", "status": "not-available", "reason": "symeq.fibre.classical missing"})
        return Skip("symeq.fibre.classical missing")
    cd = classical_identifiability(st.model, timeout=st.left(), certificate=st.certificate)
    st.tried.append({"method": "classical", "status": cd.status, "reason": cd.reason})
    if cd.status in _GLOBAL or st.method == "classical":
        # the theorem that decided ("sussmann" / "fefferman") names the method in the report
        return st.report(cd.status, cd.method if cd.status in _GLOBAL else None, cd.reason, cd.to_json(), cd,
                         cd.certificate)
    return Skip(cd.reason)


def _step_tensor(st: _Decision):
    """2./3. Kruskal's tensor certificates (one hidden layer) and the Jacobian factors (two or three)."""
    if not (st.wanted("tensor") or st.wanted("jacobian-factors")):
        return Skip(f"only {st.method} asked for")
    from .tensor import tensor_identifiability

    tried, h = st.tried, _hidden(st.model)
    if st.method == "jacobian-factors" and h == 1:
        tried.append({"method": "jacobian-factors", "status": "not-applicable",
                      "reason": "two or three hidden layers needed, this model has 1"})
        return st.report("not-applicable", None, tried[-1]["reason"])
    td = tensor_identifiability(st.model, timeout=st.left(), certificate=st.certificate, field=st.field)
    if h == 1 or td.condition == "dense layers":
        name = "tensor"
        tried.append({"method": "tensor", "status": td.status, "reason": td.reason})
        if st.method == "auto":
            tried.append({"method": "jacobian-factors", "status": "not-applicable",
                          "reason": f"two or three hidden layers needed, this model has {h}"})
    else:
        name = "jacobian-factors"
        tried.append({"method": "tensor", "status": "not-applicable",
                      "reason": f"one hidden layer needed, this model has {h}"})
        tried.append({"method": "jacobian-factors", "status": td.status, "reason": td.reason})
    if td.status in _GLOBAL or st.method != "auto":
        return st.report(td.status, name if td.status in _GLOBAL else None, td.reason, td.to_json(), td,
                         td.certificate)
    if td.complex_witness is not None and st.field == "R":
        st.notes.append("over C the tensor method found a fibre point outside the orbit (a scaling lambda that is "
                        "not real): " + td.complex_witness.get("text", ""))
    return Skip(td.reason)


def _step_jacobian_rank(st: _Decision):
    """4. Local identifiability: the exact Jacobian rank mod p (polynomial activations), or the exact
    functional dimension on the linear regions (ReLU / leaky ReLU, symeq.relu.fdim).  Its answer is
    kept in ``st.local`` for the Gröbner step; it decides only when it was the one method asked for."""
    if not st.wanted("jacobian-rank"):
        return Skip(f"only {st.method} asked for")
    from .jacobian import jacobian_identifiability

    try:
        if _piecewise_linear(st.model):
            st.local = relu_local_identifiability(st.model, deadline=st.deadline, certificate=st.certificate)
        else:
            st.local = jacobian_identifiability(st.model, deadline=st.deadline, certificate=st.certificate)
    except LimitExceeded as e:
        st.tried.append({"method": "jacobian-rank", "status": "refused", "reason": str(e)})
        if st.method == "jacobian-rank":
            return st.report("unknown", None, str(e), limit=e, refused=True)
        return Skip(str(e))
    except BudgetExceeded as e:
        st.tried.append({"method": "jacobian-rank", "status": "unknown", "reason": f"budget exceeded: {e}"})
        st.stopped = str(e)
        if st.method == "jacobian-rank":
            return st.report("unknown", None, f"budget exceeded: {e}")
        return Skip(f"budget exceeded: {e}")
    local = st.local
    st.tried.append({"method": "jacobian-rank", "status": local.status,
                     "reason": local.reason.removeprefix("jacobian-rank: ")})
    if st.method == "jacobian-rank":
        return st.report(local.status, "jacobian-rank" if local.status in _GLOBAL + ("locally-identifiable",)
                         else None, local.reason, local.to_json(), local, local.certificate)
    return Skip(f"{local.status}: a global answer is tried next")


def _groebner_refused(st: _Decision, e: LimitExceeded):
    """The Gröbner step's size guard refused it: the hint that can help, and the earlier answer."""
    st.tried.append({"method": "groebner", "status": "refused", "reason": str(e)})
    if isinstance(e, MonomialLimit):
        _monomial_hint(st.model, e, st.hints)
        if st.hints and "would not help" in st.hints[-1]:  # the size guard's own "raise it" would lead nowhere
            st.tried[-1]["reason"] = st.tried[-1]["reason"].replace(
                "raise it with --max-monomials", "raising --max-monomials would not help (memory)")
    elif isinstance(e, MemoryLimit):
        st.hints.append("the Gröbner step needs more memory than the budget: --memory GB raises it where the "
                        "machine has it")
    st.notes[:] = [n for n in st.notes if "Gröbner engine" not in n]  # the engine was never needed
    if st.method == "groebner":
        return st.report("unknown", None, str(e), limit=e, refused=True)
    out = st.fallback()
    out.limit = e
    return out


def _step_groebner(st: _Decision):
    """5. The fibre ideal against the orbit, when its size guard lets it start; a global answer from it
    replaces a local one (after a proof of non-identifiability by the Jacobian step it only adds the
    fibre's dimension and degree, within at most 10 s, enforced).  Always ends the decision."""
    if not st.wanted("groebner"):  # pragma: no cover - every single method returned above
        return st.report("unknown", None, "no method decided")
    from .orbit import compare_with_orbit

    model, local = st.model, st.local
    proven = local is not None and local.status == "not-identifiable"
    if model.has_relu or not model.is_polynomial or model.token_mixing:
        st.tried.append({"method": "groebner", "status": "not-applicable",
                         "reason": "the fibre ideal needs dense layers with polynomial activations"})
        return st.fallback()
    from ..layers.base import declared_biases

    if len(set(declared_biases(model))) > 1:  # issue 25: the orbit count takes one bias declaration
        st.tried.append({"method": "groebner", "status": "not-applicable",
                         "reason": "the orbit count of the Gröbner step takes biases in every layer or in none; "
                                   "this model declares them in some layers only"})
        return st.fallback()
    cap = st.left()
    if proven:
        cap = PROVEN_STEP_CAP if cap is None else min(cap, PROVEN_STEP_CAP)
    try:
        _engine_note(st.engine, st.notes)
        hard = None if cap is None else cap + (0.5 if proven else 1.0)
        if hard is not None and _command_left() is not None:
            hard = min(hard, _command_left())
        with _hard_cap(hard):
            c = compare_with_orbit(model, engine=st.engine, timeout=cap, field=st.field)
    except LimitExceeded as e:
        return _groebner_refused(st, e)
    except (BudgetExceeded, _StepCapped, BudgetAlarm) as e:
        why = (f"stopped at its cap of {cap:.3g} s" if isinstance(e, _StepCapped) else
               getattr(e, "message", None) or f"budget exceeded: {e}")
        st.tried.append({"method": "groebner", "status": "unknown", "reason": why})
        st.stopped = why
        if st.method == "groebner":
            return st.report("unknown", None, why)
        return st.fallback()
    st.tried.append({"method": "groebner", "status": c.status, "reason": c.reason})
    if c.criterion != "groebner":  # decided structurally (equation count, inactive neuron): no engine was needed
        st.notes[:] = [n for n in st.notes if "Gröbner engine" not in n]
    if c.complex_status is not None:
        st.notes.append(f"over C the Gröbner step says {c.complex_status}: {c.complex_reason}")
    if c.status in _GLOBAL:
        if proven and c.status == "identifiable":  # pragma: no cover - two proofs disagree
            raise AssertionError("the Gröbner fibre contradicts a proven family in the fibre")
        return st.report(c.status, "groebner", c.reason, None, c)
    if st.method == "groebner" or local is None or local.status not in ("locally-identifiable", "not-identifiable"):
        return st.report(c.status, None, c.reason, None, c)
    return st.fallback()


#: the steps of :func:`decide_identifiability`, in order (docs/architecture.md, "Pipelines"); the
#: report's ``tried`` lists each method's outcome, the last step always returns the report
IDENTIFIABILITY_STEPS = (_step_affine, _step_classical, _step_tensor, _step_jacobian_rank, _step_groebner)


def decide_identifiability(model, *, method: str = "auto", timeout: float | None = None, engine: str = "auto",
                           certificate: bool = True, field: str = "R") -> IdentifiabilityReport:
    """Decide identifiability of ``model``'s theta by the first method that applies (see the module docstring).

    Parameters
    ----------
    model : :class:`~symeq.models.Model` (its group is ignored: identifiability is about theta)
    method : "auto" or one of :data:`METHODS` (only that one is run)
    timeout : seconds for the whole decision (each step gets what is left)
    engine : the Gröbner engine (``symeq fibre --engine``)
    certificate : build the certificate of the deciding method where it has one
    field : "R" (default): about real parameters, a fibre point counts only when it is real; "C": the
        complex question (``symeq fibre --field C``)

    Returns
    -------
    IdentifiabilityReport
        Always a report, with the strongest result reached: a size guard that refuses the Gröbner step,
        or a budget that runs out in it, leaves the earlier answer (or "unknown" with ``limit`` set, and
        ``refused`` when the one method asked for was refused before it started).  The steps are
        :data:`IDENTIFIABILITY_STEPS`.
    """
    if method != "auto" and method not in METHODS:
        raise InputError(f"method must be 'auto' or one of {', '.join(METHODS)}; got {method!r}")
    if field not in ("R", "C"):
        raise InputError(f"field must be 'R' or 'C', got {field!r}")
    # every step ends before the command's alarm (symeq.budget.Alarm) would interrupt it, so that the
    # report with the strongest result reached is printed
    command = _command_left()
    if command is not None:
        timeout = command if timeout is None else min(timeout, command)
    if getattr(model, "nodes", None) is not None:  # a graph model (docs/graphs.md): the Jacobian rank only
        return _graph_decision(_Decision(model, method, timeout, engine, certificate, field))
    return run_steps(IDENTIFIABILITY_STEPS, _Decision(model, method, timeout, engine, certificate, field))


def _graph_decision(st: _Decision) -> IdentifiabilityReport:
    """A graph model: the other methods are about chains and say so; the Jacobian rank along the graph
    (symeq.fibre.graph_rank) decides local identifiability where its rank is full."""
    from .graph_rank import graph_jacobian_identifiability

    for name in ("affine", "classical", "tensor", "jacobian-factors", "groebner"):
        st.tried.append({"method": name, "status": "not-applicable", "reason": "chains only, not graph models"})
    if not st.wanted("jacobian-rank"):
        return st.report("not-applicable", None, f"{st.method}: covers chains only, not graph models (the "
                         "jacobian-rank method covers graphs)")
    d = graph_jacobian_identifiability(st.model, deadline=st.deadline, certificate=bool(st.certificate))
    st.tried.insert(4, {"method": "jacobian-rank", "status": d.status,
                        "reason": d.reason.removeprefix("jacobian-rank (graph): ")})
    if d.status == "undetermined":
        st.stopped = d.reason
    # auto: only the local answer stands, everything else leaves the question open
    status = d.status if st.method == "jacobian-rank" or d.status == "locally-identifiable" else "unknown"
    st.local = d
    local = status == "locally-identifiable"
    return st.report(status, "jacobian-rank" if local else None, d.reason, d.to_json(), d,
                     d.certificate if local else None)


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
    if not acts or not all_support(model.layers, "tie-walk") or model.is_polynomial:
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

    Written for dense networks with ReLU or leaky ReLU hidden layers; the parameters are the declared ones
    (a layer's biases when it has any, as :mod:`symeq.relu.fdim` and the checker count them); else None."""
    from ..digest import layers_digest
    from ..io import layers_to_json

    layers = model.layers
    if not all_support(layers, "plain-dense") or layers[-1].activation is not None \
            or any(l.activation is None or not l.activation.piecewise_linear for l in layers[:-1]):
        return None
    if not f.sample_points:
        return None
    from ..layers.base import declared_biases
    from .jacobian import bias_field

    flags = declared_biases(model)  # issue 25: the declared parameter space
    P = sum(l.in_dim * l.out_dim + (l.out_dim if b else 0) for l, b in zip(layers, flags))
    if P != f.params:  # neurons with zero incoming weights and bias were pruned by fdim: no certificate
        return None
    K = layers[-1].out_dim
    return {
        "format": "symeq-identifiability/1",
        "method": "jacobian-rank",
        "verdict": "locally-identifiable",
        "widths": model.widths,
        "bias": bias_field(flags, model),
        "layers_sha256": layers_digest(layers_to_json(model), model.input_dim),
        "prime": str((1 << 61) - 1),
        "seed": 0,
        "parameters": P,
        "parameter_order": "per layer: W row-major, then b (when the layer has biases)",
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


def _affine_decision(model):
    """(status, reason, witness) when a hidden layer has an affine (degree-1) activation, else None.

    sigma(t) = a t + c commutes with every invertible A with A 1 = 1 (sigma(A z) = A sigma(z)), so a hidden
    affine layer of width n has a GL-type symmetry: (W_l, b_l, W_{l+1}) -> (A W_l, A b_l, W_{l+1} A^-1) keeps f
    and moves no bias that is not declared.  The latent group of Theorem 4.1 is a group of monomial matrices
    (docs/identifiability.md, "Affine activations"):

    * width n >= 2: the family A_s = I + s e_i (e_j - e_i)^T (s != 1) is exact and leaves the orbit: its
      tangent at s = 0 is not in the span of the tangents of every diagonal scaling of hidden layers l-1,
      l, l+1 (checked by an exact rank over Q, on the weight coordinates, which offsets never touch); the
      orbit K . theta is a finite union of orbits of the torus K° and near theta it is K° . theta, a smooth
      manifold, so a curve in it has its tangent there.  Not identifiable (over R and C).
    * width 1: GL_1 is the scaling alpha of the neuron, in K; with one hidden layer the linear part a u v^T
      of f is a rank-one matrix, so every theta' in the fibre is (u / alpha, alpha v) with biases left to
      decide: identifiable unless a declared bias pair trades (b_1 + t, b_2 - a t u) or, without b_2 and
      with c != 0, the scaling needs a bias change K cannot make.  Deeper networks: "unknown".

    Examples
    --------
    >>> from symeq.models import Model, DenseLayer, linear_hidden_allowed
    >>> from symeq.activations import polynomial
    >>> with linear_hidden_allowed():
    ...     m = Model(2, [DenseLayer([[1, 2], [3, -1]], None, polynomial([0, 1])),
    ...                   DenseLayer([[2, -1]], None, None)])
    >>> _affine_decision(m)[0]
    'not-identifiable'
    """
    layers = model.layers
    affine = [i for i, l in enumerate(layers[:-1])
              if l.activation is not None and getattr(l.activation, "symmetry", None) == "affine"]
    if not affine:
        return None
    for l in affine:
        if layers[l].out_dim >= 2:
            return _affine_wide(model, l)
    # every affine hidden layer has width 1: its GL_1 is the neuron's scaling alpha, in the latent group
    if len(layers) != 2:
        names = ", ".join(str(l + 1) for l in affine)
        return ("unknown", f"hidden layer(s) {names} are affine of width 1: GL_1 is the scaling (alpha, 1/alpha) of "
                "the neuron, inside the monomial latent group, so it decides nothing by itself; the other methods do "
                "not cover affine layers in deeper networks: undecided", None)
    return _affine_width_one(model)


def _affine_wide(model, l: int):
    """An affine hidden layer ``l`` (from 0) of width n >= 2: a GL family A_s that leaves the orbit
    (not identifiable), or "unknown" when every family is tangent to the diagonal scalings."""
    from flint import fmpq, fmpq_mat

    from ..numbers import mat_rows

    layers = model.layers
    hidden_last = len(layers) - 2
    n = layers[l].out_dim
    a, c = layers[l].activation.coeffs[1], layers[l].activation.coeffs[0]
    W = [[fmpq(x) for x in r] for r in mat_rows(layers[l].weight)]
    Wn = [[fmpq(x) for x in r] for r in mat_rows(layers[l + 1].weight)]
    b = [fmpq(x) for x in layers[l].bias]
    m, p = len(W[0]), len(Wn)

    def vec(dW, dWn):
        return [dW[i][k] for i in range(n) for k in range(m)] + [dWn[q][i] for q in range(p) for i in range(n)]

    zero_W = [[fmpq(0)] * m for _ in range(n)]
    zero_Wn = [[fmpq(0)] * n for _ in range(p)]
    gens = []
    for k in range(n):  # the scalings of layer l's own neurons: row k of W_l, column k of W_{l+1} (negated)
        dW = [[W[i][t] if i == k else fmpq(0) for t in range(m)] for i in range(n)]
        dWn = [[-Wn[q][i] if i == k else fmpq(0) for i in range(n)] for q in range(p)]
        gens.append(vec(dW, dWn))
    if l >= 1:  # the previous hidden layer's scalings: columns of W_l
        for k in range(m):
            gens.append(vec([[W[i][t] if t == k else fmpq(0) for t in range(m)] for i in range(n)], zero_Wn))
    if l + 1 <= hidden_last:  # the next hidden layer's scalings: rows of W_{l+1}
        for k in range(p):
            gens.append(vec(zero_W, [[Wn[q][i] if q == k else fmpq(0) for i in range(n)] for q in range(p)]))
    G = fmpq_mat(len(gens), len(gens[0]), [x for g in gens for x in g])
    base = G.rank()
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            dW = [[W[j][t] - W[i][t] if r == i else fmpq(0) for t in range(m)] for r in range(n)]
            dWn = [[(Wn[q][i] if r == i else -Wn[q][i] if r == j else fmpq(0)) for r in range(n)] for q in range(p)]
            v = vec(dW, dWn)
            if not any(v):
                continue
            H = fmpq_mat(len(gens) + 1, len(v), [x for g in gens + [v] for x in g])
            if H.rank() == base:
                continue
            _check_gl_family(W, b, Wn, a, c, i, j)
            name = f"hidden layer {l + 1}"
            fam = (f"W_{l + 1} -> A_s W_{l + 1}, b_{l + 1} -> A_s b_{l + 1}, W_{l + 2} -> W_{l + 2} A_s^-1 with "
                   f"A_s = I + s e_{i + 1} (e_{j + 1} - e_{i + 1})^T (s != 1): row {i + 1} of W_{l + 1} becomes "
                   f"(1 - s) row {i + 1} + s row {j + 1}")
            reason = (f"{name} is affine (sigma(t) = {a} t + {c}) of width {n} >= 2: for every invertible A with "
                      "A 1 = 1, sigma(A z) = A sigma(z), so the parameter with (A W, A b, W' A^-1) in place of "
                      f"(W, b, W') there has the same function; the family {fam} is exact (checked at s = 1/2) and "
                      f"leaves the orbit of the monomial latent group: its tangent at s = 0 is not in the span of "
                      "the tangents of the diagonal scalings (exact rank over Q), so the fibre is larger than the "
                      "orbit (a GL symmetry, not a monomial one): not identifiable over R (and over C)")
            witness = {"kind": "gl-family", "layer": l + 1, "neurons": [i + 1, j + 1], "family": fam,
                       "real": True, "text": f"the exact family {fam} in the fibre, outside the orbit"}
            return "not-identifiable", reason, witness
    return ("unknown", f"hidden layer {l + 1} is affine of width {n}: its GL families are tangent to the "
            "diagonal scalings at this theta (degenerate weights); undecided", None)


def _affine_width_one(model):
    """One hidden affine layer of width 1 (GL_1 is the neuron's scaling, in K): decided by the declared biases."""
    from flint import fmpq

    from ..numbers import mat_rows

    layers = model.layers
    first, last = layers
    a, c = first.activation.coeffs[1], first.activation.coeffs[0]
    v = [fmpq(x) for x in mat_rows(first.weight)[0]]
    u = [fmpq(r[0]) for r in mat_rows(last.weight)]
    if not any(v) or not any(u):
        return ("unknown", "the hidden neuron is affine of width 1 and " + ("dead (zero incoming weights)" if not any(v)
                else "unused (zero outgoing weights)") + ": the fibre is not a rank-one factorization; undecided", None)
    from ..layers.base import declared_biases

    b1, b2 = declared_biases(model)  # the declared parameter space ("bias": null: none)
    lin = ("the linear part a W_2 W_1 = a u v^T of f is a nonzero rank-one matrix, so every theta' in the fibre has "
           "W_1' = alpha W_1, W_2' = W_2 / alpha for one real alpha != 0")
    if b1 and b2:
        reason = (f"hidden layer 1 is affine (sigma(t) = {a} t + {c}) of width 1 and both biases are declared: the "
                  "line (b_1 + t, b_2 - a t W_2) keeps f exactly (sigma(z + t) = sigma(z) + a t) and every orbit point "
                  "with W_1' = W_1 is theta itself (the scaling alpha is read off W_1 != 0): not identifiable over R "
                  "(and over C)")
        return "not-identifiable", reason, {"kind": "bias-line", "real": True,
                                            "text": "the line b_1 -> b_1 + t, b_2 -> b_2 - a t W_2 in the fibre"}
    if b1 and not b2 and c != 0:
        reason = (f"hidden layer 1 is affine (sigma(t) = {a} t + {c}) of width 1 and the output layer has no bias: "
                  f"{lin}; each alpha gives a point of the fibre with b_1' = alpha (b_1 + c/a) - c/a, while a latent "
                  "scaling alpha != 1 would add sigma(0) (1 - alpha) W_2 / alpha to an output bias that is not "
                  "declared, so the orbit is {theta}: not identifiable over R (and over C)")
        return "not-identifiable", reason, {"kind": "scaling-curve", "real": True,
                                            "text": "alpha -> (alpha W_1, alpha (b_1 + c/a) - c/a, W_2 / alpha)"}
    if b2 and not b1:
        orbit = ("{(alpha W_1, W_2 / alpha, b_2 + " + (f"{c} (1 - 1/alpha) W_2" if c != 0 else "0") + ") : alpha != 0}")
    elif not b1 and not b2 and c != 0:
        orbit = "{theta} (a scaling alpha != 1 would move sigma(0) W_2 / alpha, and no declared bias absorbs it)"
    else:
        orbit = "{(alpha W_1, alpha b_1, W_2 / alpha) : alpha != 0}" if b1 else "{(alpha W_1, W_2 / alpha) : alpha != 0}"
    reason = (f"hidden layer 1 is affine (sigma(t) = {a} t + {c}) of width 1: GL_1 is the neuron's scaling alpha, "
              f"in the latent group; {lin}, and the constant term then fixes the declared biases, so the fibre is "
              f"the orbit {orbit} and alpha is unique (read off W_1 != 0): identifiable over R (and over C)")
    return "identifiable", reason, None


def _check_gl_family(W, b, Wn, a, c, i, j) -> None:
    """The GL family's point at s = 1/2 has the same affine map z_l -> z_{l+1} (exact; a bug otherwise)."""
    from flint import fmpq, fmpq_mat

    n = len(W)
    s = fmpq(1, 2)
    A = fmpq_mat(n, n, [fmpq(int(r == k)) + (s * (int(k == j) - int(k == i)) if r == i else 0)
                        for r in range(n) for k in range(n)])
    Ai = A.inv()
    Wm, Wnm = fmpq_mat(W), fmpq_mat(Wn)
    bm = fmpq_mat(n, 1, b)
    one = fmpq_mat(n, 1, [1] * n)
    if A * one != one:  # pragma: no cover - the construction keeps A 1 = 1
        raise AssertionError("A 1 != 1")
    W2, b2, Wn2 = A * Wm, A * bm, Wnm * Ai
    if Wn2 * W2 != Wnm * Wm or Wn2 * (b2 * a + one * c) != Wnm * (bm * a + one * c):  # pragma: no cover
        raise AssertionError("the GL family left the fibre")

