"""``symeq fibre MODEL.json``: is the model's parameter identifiable?  (fibre against orbit)

``symeq fibre MODEL.json [--engine auto|sympy|flint|singular|singular-std|giac|msolve] [--timeout S] [--json] [--out FILE]``
    decides identifiability at theta (see ``--method``); its Gröbner step builds the gauge-fixed fibre
    ideal, runs the Gröbner engine under the time budget, compares the
    fibre with the orbit of the latent symmetries and prints: the ideal's size, the gauge, the
    fibre's dimension and degree, the field of the Gröbner answer ("QQ" exact, or
    "modular (2 primes agree)"), the orbit size and the verdict, with a witness when theta is not
    identifiable.  ``--json`` prints one JSON object on stdout (keys "dimension", "degree",
    "orbit_size", "status", "field", "engine", "seconds", ...); ``--out`` writes it atomically.

``--method auto|classical|tensor|jacobian-factors|jacobian-rank|groebner`` (default auto): the one
identifiability report of :mod:`symeq.fibre.decide` (shared with ``verify --identifiability`` and
``explain``): classical theorems (real tanh/sigmoid), the tensor method (Kruskal, one hidden layer),
the Jacobian factors (two or three hidden layers), the exact Jacobian rank (local identifiability,
:mod:`symeq.fibre.jacobian`; for ReLU and leaky ReLU the exact functional dimension of
:mod:`symeq.relu.fdim`) and the Gröbner comparison above, in this order; the first global
verdict wins, a local one stands when the Gröbner step cannot start.  The JSON says which method
decided ("method"), by which condition ("condition") and what every method tried said ("tried");
the hints name only options that can succeed.  ``--certificate CERT.json`` writes the
``symeq-identifiability/1`` certificate of the deciding method (not Gröbner), for
``symeq check CERT.json MODEL.json``.

``--field R|C`` (default R): the statuses are about real parameters -- a fibre point counts against
identifiability only when it is real (the tensor method's scalings restricted to R, the Gröbner
step's exact real count); the JSON says ``"over": "R"`` with the complex count or status beside it
where it differs; ``--field C`` asks the complex question.

The report (JSON with ``--json``) is always printed, with the strongest result reached: a Gröbner
step refused by its size guard or stopped by the budget leaves the earlier answer standing (the
Gröbner step after a proven answer is capped at 10 s, enforced).

Exit codes: 0 identifiable, 1 not identifiable (witness or proven family given), 2 bad input, a
missing engine or the one ``--method`` asked for refused by its size guard before it started (the
report is still printed), 3 locally identifiable (near theta the fibre is the orbit; the global
question is open), unknown (the budget ran out, no engine process is left behind; a size guard
refused the Gröbner step after the other methods decided nothing; or no method covers the model,
e.g. GELU: every method's reason is listed) or not applicable (a single ``--method`` whose
sufficient condition fails: nothing is decided).

Text output numbers rows, columns and neurons from 1 (the unknowns ``w{l}_{i}_{j}``, ``b{l}_{i}``
included, with a line saying so); ``--json`` keeps the names with rows and columns from 0.

:func:`register` adds the command to an ``argparse`` sub-parser collection (wired in
:mod:`symeq.cli`); the model is read by :func:`symeq.cli.loader.load_model_args`.
"""

from __future__ import annotations

import json
import sys

from ..errors import InputError
from .loader import load_model_args

__all__ = ["register", "cmd_fibre", "comparison_to_json", "report_to_json", "report_text", "engine_notice",
           "EXIT_CODES"]

EXIT_CODES = {"identifiable": 0, "not-identifiable": 1, "unknown": 3}

#: the conditions behind a verdict reached without a Gröbner basis (symeq.fibre.orbit.structural_decision)
CRITERIA = {
    "inactive-neuron": "an exact line in the fibre along an inactive neuron's free weights, outside the orbit",
    "equation-count": "more unknowns than equations after the gauge: fibre dimension >= their difference "
                      "(Krull's height theorem) > 0 = orbit dimension",
}


def comparison_to_json(c, model_path: str | None = None, max_points: int = 64) -> dict:
    """A :class:`~symeq.fibre.orbit.FibreComparison` as a JSON-ready dict (exact numbers as strings)."""
    ideal = c.ideal
    out = {
        "model": model_path,
        "status": c.status,
        "reason": c.reason,
        "dimension": c.dimension,
        "degree": c.degree,
        "orbit_size": c.orbit_size,
        "stabilizer_size": c.stabilizer_size,
        "distinct_points": c.distinct_points,
        "real_points": c.real_points,
        "radical": c.radical,
        "field": c.groebner_field,
        "exact": c.exact,
        "over": c.over,
        "complex_status": c.complex_status,
        "complex_reason": c.complex_reason,
        "engine": c.engine,
        "seconds": round(c.seconds, 4),
        "ideal": {"unknowns": ideal.n_variables, "generators": ideal.n_generators,
                  "max_degree": int(max((g.total_degree() for g in ideal.generators), default=0)),
                  "bias": ideal.bias, "variables": list(ideal.variables)},
        "gauge": [{"layer": g.layer, "neuron": g.neuron, "name": g.name, "value": str(g.value)} for g in c.gauge],
        "witness": c.witness,
        "witness_real": c.witness_real,
        "criterion": c.criterion,
        "dimension_lower_bound": c.dimension_lower_bound,
    }
    if c.groebner is not None and c.groebner.notes:
        out["notes"] = list(c.groebner.notes)
    if c.points is not None and len(c.points) <= max_points:
        out["points"] = [p.to_json() for p in c.points]
    return out


def _text(d: dict) -> str:
    lines = [
        f"fibre ideal: {d['ideal']['unknowns']} unknowns, {d['ideal']['generators']} generators of degree <= "
        f"{d['ideal']['max_degree']}, {'with' if d['ideal']['bias'] else 'without'} biases",
        "gauge: " + (", ".join(f"{g['name']}={g['value']}" for g in d["gauge"]) or "none (finite latent group)"),
        (f"dimension: {d['dimension']} (gauge-fixed, over C)" if d.get("dimension_lower_bound") is None else
         f"dimension: >= {d['dimension_lower_bound']} (gauge-fixed, over C; decided by {d['criterion']}, "
         "no Gröbner basis)"),
        f"degree: {d['degree']}" + (" (points with multiplicity)" if d["degree"] is not None else ""),
        f"field: {d['field']}",
        f"orbit size: {d['orbit_size']} (stabilizer {d['stabilizer_size']})",
        f"engine: {d['engine']}, {d['seconds']:.3g} s",
        f"verdict: {d['status']} (over {d.get('over') or 'C'}) -- {d['reason']}",
    ]
    if d.get("complex_status"):
        lines.append(f"over C: {d['complex_status']} -- {d.get('complex_reason')}")
    w = d.get("witness")
    if w:
        lines.append("witness: " + w.get("text", json.dumps(w)) + (" (real)" if d.get("witness_real") else ""))
    pts = d.get("points")
    if pts and len(pts) <= 16:
        lines.append("fibre points:")
        for p in pts:
            if p.get("values"):
                lines.append("  " + ", ".join(f"{k}={v}" for k, v in p["values"].items())
                             + (" [orbit]" if p.get("in_orbit") else ""))
            else:
                lines.append(f"  {p['degree']} algebraic point(s), {p['real_roots']} real: "
                             f"root of {p['minimal_polynomial_text']}")
    return "\n".join(lines)


def cmd_fibre(args) -> int:
    # signals (SIGINT/SIGTERM -> the engines' finally blocks kill their process groups), the
    # default budget and --memory are handled by symeq.cli.main for every command
    return _fibre(args)


def _fibre(args) -> int:
    from ..errors import BudgetExceeded, LimitExceeded
    from ..fibre.decide import decide_identifiability
    from ..io import write_json

    timeout = args.timeout
    if timeout is not None and not timeout > 0:
        raise InputError("--timeout must be positive")
    from ..models import linear_hidden_allowed

    with linear_hidden_allowed():  # a hidden affine layer gets an identifiability answer (decide.py)
        model = load_model_args(args, builtin=False, need_group=False, graphs=True)  # graphs: the Jacobian rank
    method = getattr(args, "method", "auto")
    cert_path = getattr(args, "certificate", None)
    try:
        rep = decide_identifiability(model, method=method, timeout=timeout, engine=args.engine,
                                     certificate=bool(cert_path), field=getattr(args, "field", "R"))
    except (LimitExceeded, BudgetExceeded) as e:  # pragma: no cover - the decision returns a report for these
        r = getattr(e, "report", None)
        if r is not None:
            _progress(args, r)
        raise
    _progress(args, rep)
    if rep.refused and rep.limit is not None:  # the one method asked for was refused before it started (exit 2)
        print(f"error: {rep.limit}", file=sys.stderr)
    d = report_to_json(rep, str(args.model))
    if cert_path:
        if rep.certificate is None:
            print(f"no certificate written: {_no_certificate(rep)}", file=sys.stderr)
        else:
            write_json(rep.certificate, cert_path)
            d["certificate"] = str(cert_path)
    return _emit(args, d, report_text(d, rep, getattr(args, "explain_steps", False)), rep.exit_code)


def _progress(args, rep) -> None:
    """The notes first (the Gröbner-engine note only when that step ran), then one line per method tried."""
    from ..fibre.orbit import one_based

    for note in rep.notes:
        print(f"note: {note}", file=sys.stderr, flush=True)
    for t in rep.tried:
        reason = t.get("reason") or ""
        print(f"fibre of {args.model}: {t['method']}: {t['status']}"
              + (f" ({_short(one_based(reason))})" if reason else ""), file=sys.stderr)
    for h in rep.hints:
        print(f"hint: {h}", file=sys.stderr)


def _short(text: str, n: int = 240) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _no_certificate(rep) -> str:
    if rep.method == "groebner":
        return "decided by Gröbner bases, which write no symeq-identifiability certificate"
    return f"the result is {rep.status}" + (f" ({rep.method})" if rep.method else "")


def report_to_json(rep, model_path: str | None = None) -> dict:
    """An :class:`~symeq.fibre.decide.IdentifiabilityReport` as the JSON ``symeq fibre --json`` prints."""
    from ..fibre.orbit import FibreComparison
    from ..steps import trace_json, tried_trace

    c = rep.decision
    if isinstance(c, FibreComparison):
        d = comparison_to_json(c, model_path)
        d["condition"] = ("Gröbner basis of the fibre ideal: dimension and degree against the orbit"
                          if c.criterion == "groebner" else CRITERIA.get(c.criterion, c.criterion))
        d["method"] = "groebner"
    else:
        d = dict(rep.result or {}, model=model_path)
    d["status"] = rep.status
    d["over"] = d.get("over") or rep.over
    if rep.limit is not None:
        from ..fibre.decide import limit_json

        d["limit"] = limit_json(rep.limit)
    if rep.budget is not None:
        d["stopped"] = rep.budget  # the time budget stopped a step; the strongest result reached is kept
    d.setdefault("reason", rep.reason)
    if rep.method is not None:
        d["method"] = rep.method
    d["decided_by"] = rep.method
    d["tried"] = list(rep.tried)
    d["steps"] = trace_json(tried_trace(rep.tried))  # the same trace in the shape of verify's and certify's
    d["hints"] = list(rep.hints)
    if rep.notes:
        d["notes"] = list(dict.fromkeys(list(d.get("notes") or []) + list(rep.notes)))
    if rep.local is not None and rep.method != "jacobian-rank":
        d["local"] = rep.local.to_json()
    d["seconds"] = round(rep.seconds, 4)
    return d


def report_text(d: dict, rep, explain_steps: bool = False) -> str:
    """The text ``symeq fibre`` prints: the deciding method's own block, then what was tried (always with
    ``explain_steps``, ``--explain-steps``; else when more than one method ran or none decided)."""
    from ..fibre.orbit import FibreComparison

    if isinstance(rep.decision, FibreComparison):
        text = _text(d)
    elif d.get("method") in ("tensor", "jacobian-factors") or d.get("engine") == "tensor":
        text = _tensor_text(d)
    elif d.get("engine") == "jacobian-rank":
        text = _jacobian_text(d)
    else:
        text = "\n".join([f"method: {d.get('method') or 'none decided'}"]
                         + ([f"condition: {d['condition']}"] if d.get("condition") else [])
                         + [f"verdict: {d['status']} (over {d.get('over') or rep.over}) -- "
                            f"{d.get('reason', rep.reason)}"]
                         + ([f"witness: {d['witness']['text']}"] if (d.get("witness") or {}).get("text") else [])
                         + ([f"certificate: {d['certificate']} (check with: symeq check {d['certificate']} "
                             f"{d['model']})"] if d.get("certificate") else []))
    lines = [text]
    if len(rep.tried) > 1 or rep.status not in ("identifiable", "not-identifiable") or explain_steps:
        lines.append("methods tried:")
        lines.extend(f"  {t['method']}: {t['status']}" + (f" -- {t['reason']}" if t.get("reason") else "")
                     for t in rep.tried)
    for h in rep.hints:
        lines.append(f"hint: {h}")
    if rep.status == "locally-identifiable":
        lines.append("exit code 3: theta is locally identifiable; whether the fibre has points far from the "
                     "orbit is open")
    from ..fibre.orbit import one_based

    text = "\n".join(lines)
    shown = one_based(text)  # text numbers rows, columns and neurons from 1 (the JSON's names from 0)
    if shown != text:
        shown += ("\nunknowns: w<layer>_<row>_<column>, b<layer>_<row>, numbered from 1 here (--json names them "
                  "with rows and columns from 0)")
    return shown


def _jacobian_text(d: dict) -> str:
    lines = [f"method: jacobian-rank (the exact Jacobian rank modulo 2^61-1 at {d['points']} rational points), "
             f"{d['seconds']:.3g} s",
             f"rank: {d['rank']} (a proven lower bound of the functional dimension)",
             f"parameters: {d['parameters']}, orbit dimension dim K.theta = {d['orbit_dimension']}, upper bound "
             f"{d['upper_bound']}"]
    if d.get("dimension_lower_bound") is not None:
        lines.append(f"dimension: >= {d['dimension_lower_bound']} beyond the orbit (an exact family in the fibre)")
    for f in d.get("families") or []:
        lines.append(f"family: {f['kind']} in hidden layer {f['layer']}, neurons {f['neurons']}: "
                     f"+{f.get('dimension')} dimension(s) -- {f['proof']}")
    ev = d.get("evidence")
    if ev and d["status"] != "locally-identifiable":
        lines.append("ranks by points: " + ", ".join(f"{e['points']} points: {e['rank']}" for e in ev["ranks"])
                     + (" (stable: evidence, not proof)" if ev.get("stable") else ""))
    lines.append(f"verdict: {d['status']} -- {d['reason']}")
    if d.get("certificate"):
        lines.append(f"certificate: {d['certificate']} (check with: symeq check {d['certificate']} {d['model']})")
    return "\n".join(lines)


def engine_notice(engine: str) -> None:
    """Say at the start when the Gröbner step would fall back to sympy (no real engine installed)."""
    from ..fibre.groebner import ENGINES, available_engines

    # a real engine: any registered one but the python fallbacks that auto may pick or race
    real = {name for name, e in ENGINES.items() if name not in ("sympy", "flint")}
    if engine == "auto" and not set(available_engines()) & real:
        pkgs = " ".join(ENGINES[e].install.split()[-1] for e in ("singular", "giac", "msolve"))
        print("note: no Gröbner engine installed (Singular, giac, msolve, Macaulay2): a Gröbner step falls back "
              "to sympy, which is slow beyond tiny ideals and stops at the time budget; install one with "
              f"`pip install --no-deps {pkgs}`", file=sys.stderr, flush=True)
    elif engine == "sympy":
        print("note: --engine sympy is slow beyond tiny ideals (it stops at the time budget)",
              file=sys.stderr, flush=True)


#: exit codes of the tensor method; "not-applicable" decides nothing (3, like "unknown")
TENSOR_EXIT_CODES = {"identifiable": 0, "not-identifiable": 1, "not-applicable": 3, "unknown": 3}


def _emit(args, d: dict, text: str, code: int) -> int:
    from ..io import write_json

    if args.out:
        write_json(d, args.out)
    if args.json:
        print(json.dumps(d, indent=1))
    else:
        print(text)
    return code


def _tensor_text(d: dict) -> str:
    deep = str(d.get("condition", "")).lower().startswith("jacobian")  # symeq.fibre.deep
    how = ("the Jacobian-factor certificate for deep networks" if deep
           else "Kruskal's theorem and per-neuron systems")
    lines = [f"method: tensor ({how}), {d['seconds']:.3g} s", f"condition: {d['condition']}"]
    if d.get("orbit_size") is not None:
        lines.append(f"orbit size: {d['orbit_size']}")
    elif d["status"] == "identifiable":
        perms = "a product of symmetric groups S_n, one per hidden layer," if deep else "S_n"
        lines.append(f"orbit: {perms} x a torus of dimension {d['orbit_dimension']}")
    over = d.get("over") or "C"
    if d.get("fibre_points") is not None:
        extra = ""
        if over == "R" and d.get("complex_fibre_points") not in (None, d["fibre_points"]):
            extra = f" ({d['complex_fibre_points']} over C)"
        lines.append(f"fibre: {d['fibre_points']} points over {over}{extra}")
    lines.append(f"verdict: {d['status']} (over {over}) -- {d['reason']}")
    if d.get("certificate"):
        lines.append(f"certificate: {d['certificate']} (check with: symeq check {d['certificate']} {d['model']})")
    return "\n".join(lines)


def register(subparsers) -> None:
    """Add the ``fibre`` command to an argparse subparsers object."""
    from ..fibre.groebner import ENGINES
    from ..fibre.methods import METHODS

    f = subparsers.add_parser("fibre", help="decide identifiability of a model's parameter (fibre vs orbit)")
    f.add_argument("model", help="model file (symeq-model/1 JSON): polynomial, tanh/sigmoid, ReLU or leaky ReLU "
                                 "activations get an answer; others are reported as open (exit 3)")
    f.add_argument("--engine", default="auto", choices=("auto",) + tuple(ENGINES),
                   help="Gröbner engine (default auto: exact Singular/giac/sympy and modular msolve side by side)")
    f.add_argument("--timeout", "--budget", dest="timeout", type=float, default=None,
                   help="time budget in seconds (exit 3 past it)")
    f.add_argument("--method", default="auto", choices=("auto",) + METHODS,
                   help="classical: Sussmann/Fefferman for real tanh/sigmoid; tensor: Kruskal certificates "
                        "(one hidden layer; deep networks go on to the Jacobian factors); jacobian-factors: "
                        "two or three hidden layers; jacobian-rank: local identifiability by the exact "
                        "Jacobian rank mod p (ReLU, leaky ReLU: the exact functional dimension); groebner: the fibre ideal; auto (default): in this order, "
                        "the first global verdict wins")
    f.add_argument("--field", default="R", choices=("R", "C"),
                   help="R (default): identifiability of theta among real parameters (a fibre point counts only "
                        "when it is real); C: among complex parameters")
    f.add_argument("--certificate", metavar="CERT.json",
                   help="write the symeq-identifiability/1 certificate of the deciding method (classical, "
                        "tensor, Jacobian factors or Jacobian rank) for `symeq check`")
    f.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    f.add_argument("--explain-steps", action="store_true",
                   help="always print the methods tried and their outcomes (--json always has them)")
    f.add_argument("--out", metavar="OUT.json", help="also write the JSON result here (atomically)")
    f.set_defaults(func=cmd_fibre)
