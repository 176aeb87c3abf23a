"""``symeq fibre MODEL.json``: is the model's parameter identifiable?  (fibre against orbit)

``symeq fibre MODEL.json [--engine auto|sympy|flint|singular|singular-std|giac|msolve] [--timeout S] [--json] [--out FILE]``
    builds the gauge-fixed fibre ideal, runs the Gröbner engine under the time budget, compares the
    fibre with the orbit of the latent symmetries and prints: the ideal's size, the gauge, the
    fibre's dimension and degree, the field of the Gröbner answer ("QQ" exact, or
    "modular (2 primes agree)"), the orbit size and the verdict, with a witness when theta is not
    identifiable.  ``--json`` prints one JSON object on stdout (keys "dimension", "degree",
    "orbit_size", "status", "field", "engine", "seconds", ...); ``--out`` writes it atomically.

Exit codes: 0 identifiable, 1 not identifiable (witness given), 2 bad input or missing engine,
3 unknown (the budget ran out; no engine process is left behind).

:func:`register` adds the command to an ``argparse`` sub-parser collection (wired in
:mod:`symeq.cli`).
"""

from __future__ import annotations

import json
import sys

from ..errors import InputError

__all__ = ["register", "cmd_fibre", "comparison_to_json", "EXIT_CODES"]

EXIT_CODES = {"identifiable": 0, "not-identifiable": 1, "unknown": 3}


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
        "over": "C (identifiable over C implies over R)" if c.status == "identifiable" else "C",
        "engine": c.engine,
        "seconds": round(c.seconds, 4),
        "ideal": {"unknowns": ideal.n_variables, "generators": ideal.n_generators,
                  "max_degree": int(max((g.total_degree() for g in ideal.generators), default=0)),
                  "bias": ideal.bias, "variables": list(ideal.variables)},
        "gauge": [{"layer": g.layer, "neuron": g.neuron, "name": g.name, "value": str(g.value)} for g in c.gauge],
        "witness": c.witness,
        "witness_real": c.witness_real,
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
        f"dimension: {d['dimension']} (gauge-fixed, over C)",
        f"degree: {d['degree']}" + (" (points with multiplicity)" if d["degree"] is not None else ""),
        f"field: {d['field']}",
        f"orbit size: {d['orbit_size']} (stabilizer {d['stabilizer_size']})",
        f"engine: {d['engine']}, {d['seconds']:.3g} s",
        f"verdict: {d['status']} -- {d['reason']}",
    ]
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
    import signal
    import threading

    old = None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM -> SystemExit, so the engines' finally blocks kill their process groups
        old = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return _fibre(args)
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _fibre(args) -> int:
    from ..io import load_model, write_json
    from .orbit import compare_with_orbit

    timeout = args.timeout
    if timeout is not None and not timeout > 0:
        raise InputError("--timeout must be positive")
    model = load_model(args.model)
    print(f"fibre of {args.model}: engine {args.engine}, budget {timeout if timeout else 'none'} s", file=sys.stderr)
    c = compare_with_orbit(model, engine=args.engine, timeout=timeout)
    d = comparison_to_json(c, str(args.model))
    if args.out:
        write_json(d, args.out)
    if args.json:
        print(json.dumps(d, indent=1))
    else:
        print(_text(d))
    return EXIT_CODES[c.status]


def register(subparsers) -> None:
    """Add the ``fibre`` command to an argparse subparsers object."""
    from .engines import ENGINES

    f = subparsers.add_parser("fibre", help="decide identifiability of a model's parameter (fibre vs orbit)")
    f.add_argument("model", help="model file (symeq-model/1 JSON) with a polynomial activation")
    f.add_argument("--engine", default="auto", choices=("auto",) + tuple(ENGINES),
                   help="Gröbner engine (default auto: exact Singular/giac/sympy and modular msolve side by side)")
    f.add_argument("--timeout", "--budget", dest="timeout", type=float, default=None,
                   help="time budget in seconds (exit 3 past it)")
    f.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    f.add_argument("--out", metavar="OUT.json", help="also write the JSON result here (atomically)")
    f.set_defaults(func=cmd_fibre)
