"""The ``symeq`` command line.

Commands
--------
``symeq verify [MODEL.json] [--group SPEC] [--certificate OUT.json] [--json]``
    premise, derived actions, checks, verdict.  No MODEL: the built-in example.
``symeq check CERT.json MODEL.json``
    re-verify a certificate with the independent standard-library checker.
``symeq example [--out FILE] [--unscrambled]``
    write the built-in example model file.
``symeq generate --group SPEC --activation SPEC --latent SPEC... [--scramble] [--out FILE]``
    a random layerwise-equivariant model (for tests, teaching and benchmarks).
``symeq groups``
    list the built-in groups.
``symeq numeric-check MODEL`` / ``symeq experiment mirror --activation tanh gelu``
    the float twin: layerwise analysis of real-size trained networks, the paper's experiment.
``symeq explain [MODEL.json] [--out DIR]``
    a step-by-step report (Markdown and self-contained HTML with MathML) and a picture.
``symeq fibre MODEL.json [--engine auto|sympy|flint|singular|giac|msolve] [--timeout S]``
    identifiability at theta: the fibre ideal's dimension and degree against the orbit, with a witness.
``symeq hunt --arch 2,4,2 --group rot3 --out results.jsonl [--workers N | --scheduler tcp://...]``
    search for equivariant ReLU networks with no layerwise-equivariant parameter (resumable).

Exit codes: 0 conclusion established (or certificate accepted), 1 refuted (or certificate
rejected), 2 bad input or usage (including a size limit, named with the option that raises it),
3 undetermined (including a time budget that ran out, or an engine that failed), 130 Ctrl-C
(143 SIGTERM), 70 an internal error; see :mod:`symeq.errors`.

Budgets: every computing command has a default time budget (:data:`symeq.budget.DEFAULT_BUDGETS`)
printed as its first line of output and changed with ``--timeout``; ``--memory GB`` caps each
engine process (default 75 % of the RAM).  Engine processes never outlive symeq
(:mod:`symeq.procs`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .cliargs import group_output_arg
from .errors import InputError, SymeqError
from .sizes import add_limit_options, apply_limit_options

__all__ = ["main"]


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _load(args):
    from .examples import builtin_example
    from .groups import builtin_group
    from .io import load_model

    if args.model is None:
        model = builtin_example()
        _progress(f"no model file given: using the built-in example ({model.name})")
    else:
        model = load_model(args.model)
    if args.group is not None:
        group = builtin_group(args.group, output=args.group_output)
        model = model.with_group(group)
    if model.group is None:
        raise InputError("the model has no \"group\"; add one to the file or pass --group (see `symeq groups`)")
    return model


def cmd_verify(args) -> int:
    from .io import write_json
    from .theorem import verify

    model = _load(args)
    _progress(f"verifying {model.name}: widths {model.widths}, group {model.group.label}")
    if args.identifiability:
        from .fibre.cli import engine_notice

        engine_notice("auto")  # at the start: a Gröbner step without a real engine falls back to sympy
    v = verify(model, method=args.method, timeout=args.timeout, seed=args.seed, fibre_search=not args.no_fibre_search,
               identifiability=args.identifiability, max_tie_nodes=args.max_tie_nodes)
    if args.certificate:
        write_json(v.certificate(), args.certificate)
        _progress(f"certificate written to {args.certificate}")
    if args.json:
        print(json.dumps(v.to_json(), indent=1))
    else:
        print(v.report(matrix=args.matrix))
    return v.exit_code


def cmd_check(args) -> int:
    from .check import CheckError, check_files

    try:
        report = check_files(args.certificate, args.model)
    except CheckError as e:
        raise InputError(str(e)) from None
    if args.json:
        print(json.dumps({"accepted": report.accepted, "verdict": report.verdict,
                          "reasons": report.reasons, "checks": report.checks}, indent=1))
    else:
        print("\n".join(report.lines()))
    return report.exit_code


def _emit_model(data: dict, out) -> int:
    """Write a model file atomically, or print it to stdout when no --out is given."""
    from .io import write_json

    if out:
        write_json(data, out)
        _progress(f"model written to {out}")
    else:
        print(json.dumps(data, indent=1))
    return 0


def cmd_example(args) -> int:
    from .examples import builtin_example
    from .io import model_to_json

    data = model_to_json(builtin_example(scrambled=not args.unscrambled))
    return _emit_model(data, args.out)


def cmd_generate(args) -> int:
    from .activations import activation_from_spec
    from .groups import builtin_group
    from .io import model_to_json
    from .models import random_equivariant_model, scramble

    group = builtin_group(args.group, output=args.group_output)
    try:
        spec = json.loads(args.activation) if args.activation.lstrip().startswith("{") else _activation_shorthand(args.activation)
    except json.JSONDecodeError as e:
        raise InputError(f"--activation: malformed JSON ({e.msg})") from None
    act = activation_from_spec(spec, "--activation")
    latent = args.latent or ["regular"]
    model = random_equivariant_model(group, latent, act, rng=args.seed, bias=not args.no_bias)
    if args.scramble:
        model, _ = scramble(model, rng=args.seed + 1)
        model.name += " (scrambled)"
    data = model_to_json(model)
    return _emit_model(data, args.out)


def _activation_shorthand(text: str) -> dict:
    """tanh3, tanh_series:5, sigmoid_series:3, monomial:2, relu, polynomial:0,1,1."""
    name, _, arg = text.partition(":")
    if name.startswith("tanh") and name[4:].isdigit():
        return {"type": "tanh_series", "order": int(name[4:])}
    if name in ("tanh", "tanh_series"):
        return {"type": "tanh_series", "order": _int(arg or "3", text)}
    if name in ("sigmoid", "sigmoid_series"):
        return {"type": "sigmoid_series", "order": _int(arg or "3", text)}
    if name == "monomial":
        return {"type": "monomial", "degree": _int(arg or "2", text)}
    if name == "relu":
        return {"type": "relu"}
    if name in ("polynomial", "poly"):
        return {"type": "polynomial", "coeffs": arg.split(",")}
    raise InputError(f"unknown activation {text!r}; use tanh3, sigmoid:5, monomial:2, relu, poly:0,1,1 or JSON")


def _int(s: str, where: str) -> int:
    try:
        return int(s)
    except ValueError:
        raise InputError(f"expected an integer in {where!r}") from None


def cmd_groups(args) -> int:
    from .groups import BUILTIN_GROUPS

    for desc in BUILTIN_GROUPS.values():
        print(desc)
    print("join factors with '*' for direct products, e.g. mirror:2x3*sign:1 acts on R^6 x R^1")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .version import __version__

    p = argparse.ArgumentParser(prog="symeq", description="Exact verification that identifiable equivariant "
                                "networks are layerwise equivariant (Theorem 4.1, arXiv 2601.21645).")
    p.add_argument("--version", action="version", version=f"symeq {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    v = sub.add_parser("verify", help="verify the conclusion of Theorem 4.1 for a model")
    v.add_argument("model", nargs="?", help="model file (symeq-model/1 JSON); default: the built-in example")
    v.add_argument("--group", help="a built-in group overriding the file's (see `symeq groups`)")
    v.add_argument("--group-output", type=group_output_arg, default="same",
                   help="how --group acts on the output: 'same' (default) or k for the trivial action on R^k")
    v.add_argument("--certificate", metavar="OUT.json", help="write the certificate here")
    v.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    v.add_argument("--method", default="auto", choices=["auto", "grid", "symbolic", "probabilistic"],
                   help="how end-to-end equivariance is decided (default: auto)")
    v.add_argument("--timeout", type=float, default=None, help="time budget in seconds (exit 3 past it)")
    v.add_argument("--seed", type=int, default=0, help="seed of the random points (probabilistic method)")
    v.add_argument("--max-tie-nodes", type=_positive_int("--max-tie-nodes"), default=100000, metavar="N",
                   help="node budget of the search among neurons that tie as multisets (default 100000; "
                        "running out is undetermined, never a refutation)")
    v.add_argument("--identifiability", action="store_true",
                   help="also decide identifiability at theta (tensor method, then fibre vs orbit by Groebner)")
    v.add_argument("--no-fibre-search", action="store_true",
                   help="do not search the fibre for a layerwise-equivariant theta' when none exists at theta")
    v.add_argument("--matrix", action="store_true",
                   help="also print every action as a dense matrix (default: cycle notation only)")
    v.set_defaults(func=cmd_verify)

    c = sub.add_parser("check", help="re-verify a certificate with the independent checker")
    c.add_argument("certificate")
    c.add_argument("model")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_check)

    e = sub.add_parser("example", help="write the built-in example model")
    e.add_argument("--out")
    e.add_argument("--unscrambled", action="store_true", help="the model before scrambling")
    e.set_defaults(func=cmd_example)

    g = sub.add_parser("generate", help="a random layerwise-equivariant model")
    g.add_argument("--group", required=True)
    g.add_argument("--group-output", type=group_output_arg, default="same")
    g.add_argument("--activation", default="tanh3")
    g.add_argument("--latent", action="append", help="per hidden layer: regular[*m] or input[*m] (repeat)")
    g.add_argument("--no-bias", action="store_true")
    g.add_argument("--scramble", action="store_true")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out")
    g.set_defaults(func=cmd_generate)

    s = sub.add_parser("groups", help="list the built-in groups")
    s.set_defaults(func=cmd_groups)

    from .explain import register as register_explain
    from .fibre.cli import register as register_fibre
    from .numeric.cli import register as register_numeric
    from .relu.cli import register as register_hunt

    register_explain(sub)
    register_fibre(sub)
    register_hunt(sub)
    register_numeric(sub)
    _add_budget_options(sub)
    return p


#: commands that take the size limits of :mod:`symeq.sizes` (``--max-degree`` ...), and which
LIMIT_COMMANDS = {"verify": ("degree", "total_degree", "width", "monomials", "orbit"),
                  "fibre": ("degree", "total_degree", "width", "monomials", "orbit"),
                  "explain": ("degree", "total_degree", "width", "monomials", "orbit"),
                  "generate": ("degree",), "numeric-check": ("degree", "width")}

#: commands whose engine child processes get the ``--memory`` cap
ENGINE_COMMANDS = ("verify", "fibre", "explain")
#: commands that pass ``--timeout`` to a deadline of their own (the backstop alarm waits a little longer)
OWN_DEADLINE = ("verify", "fibre", "explain")


def _positive_int(name: str):
    """argparse type: a whole number >= 1."""
    def parse(text: str) -> int:
        try:
            x = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} takes a whole number") from None
        if x < 1:
            raise argparse.ArgumentTypeError(f"{name} must be at least 1")
        return x
    return parse


def _positive(name: str, zero: bool = False):
    """argparse type: a finite number > 0 (>= 0 with ``zero``)."""
    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} takes a number") from None
        if not (x >= 0 if zero else x > 0) or x == float("inf"):
            raise argparse.ArgumentTypeError(f"{name} must be a {'non-negative' if zero else 'positive'} number")
        return x
    return parse


def _add_budget_options(sub) -> None:
    """``--timeout`` on every command with a default budget that lacks one; ``--memory`` for engines."""
    from .budget import DEFAULT_BUDGETS

    for name, sp in sub.choices.items():
        dests = {a.dest for a in sp._actions}
        if name in DEFAULT_BUDGETS and "timeout" not in dests:
            sp.add_argument("--timeout", type=_positive("--timeout", zero=True), default=None,
                            help=f"time budget in seconds (default {DEFAULT_BUDGETS[name]:g}; exit 3 past it)")
        elif name in DEFAULT_BUDGETS:  # a command's own --timeout: say what the default is
            for a in sp._actions:
                if a.dest == "timeout" and a.help and "default" not in a.help:
                    a.help = f"time budget in seconds (default {DEFAULT_BUDGETS[name]:g}; exit 3 past it)"
        if name in ENGINE_COMMANDS and "memory" not in dests:
            sp.add_argument("--memory", type=_positive("--memory"), default=None, metavar="GB",
                            help="address-space cap of each engine process in GB (default: 75%% of the RAM)")
        if name in LIMIT_COMMANDS:  # size guards checked before the work starts (symeq.sizes)
            add_limit_options(sp, [k for k in LIMIT_COMMANDS[name] if f"max_{k}" not in dests])


def _budget_line(args) -> float | None:
    """Print the budget as the first line of output; return it in seconds (None: no time budget)."""
    from .budget import DEFAULT_BUDGETS

    cmd = args.command
    if cmd == "hunt":
        # printed by the hunt before its first progress line (a finished hunt prints one line only)
        n = getattr(args, "budget", None)
        secs = getattr(args, "seconds", None)
        args.budget_line = (f"symeq hunt: budget {n if n is not None else 'unlimited'} candidates, "
                            f"{f'{secs:g} s' if secs is not None else 'no time limit'} "
                            "(--budget N candidates, --seconds S to change; resumable)")
        return None
    if cmd not in DEFAULT_BUDGETS:
        return None
    t = getattr(args, "timeout", None)
    if t is not None and not (t >= 0 and t != float("inf")):  # 0: undetermined at once (exit 3)
        raise InputError("--timeout must be a non-negative number of seconds")
    budget = t if t is not None else DEFAULT_BUDGETS[cmd]
    _progress(f"symeq {cmd}: budget {budget:g} s ({'--timeout' if t is not None else 'default; --timeout to change'})")
    return budget


class _Terminated(BaseException):
    """SIGTERM/SIGHUP arrived (a BaseException, like KeyboardInterrupt: nothing swallows it)."""


def _on_signal(signum, frame):
    raise _Terminated(signum)


def main(argv=None) -> int:
    """Run one command; map errors to exit codes (see :mod:`symeq.errors`) and stop children on any exit.

    SIGINT (Ctrl-C) exits 130 and SIGTERM/SIGHUP 128 + the signal, each with one line on stderr;
    on the way out the engines' ``finally`` blocks and :func:`symeq.procs.kill_all` kill every
    child process group.  The command's time budget is printed first and enforced by
    :class:`symeq.budget.Alarm` as a backstop.
    """
    import signal
    import threading

    from . import procs
    from .budget import Alarm, BudgetAlarm, alarm_grace

    parser = build_parser()
    args = parser.parse_args(argv)
    old = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is not None:
                old[sig] = signal.signal(sig, _on_signal)
    try:
        try:
            budget = _budget_line(args)
            apply_limit_options(args)  # every limit: the given value or its default (no leak between calls)
            if getattr(args, "memory", None) is not None:
                procs.set_memory_cap(args.memory)
            if budget is not None and args.command in ("verify", "explain") and args.timeout is None:
                args.timeout = budget  # they stop themselves and report what they established
            # the backstop: exactly at the budget where the command has no deadline of its own
            own = args.command in OWN_DEADLINE and getattr(args, "timeout", None) is not None
            grace = alarm_grace(budget) if budget is not None and own else 0.0
            with Alarm(budget, f"symeq {args.command}", grace=grace):
                return args.func(args)
        finally:
            procs.kill_all()
    except SymeqError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except BudgetAlarm as e:
        print(f"error: {e.message}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print(f"symeq {args.command}: interrupted (SIGINT); stopped", file=sys.stderr)
        return 130
    except _Terminated as e:
        signum = e.args[0]
        print(f"symeq {args.command}: terminated ({signal.Signals(signum).name}); stopped", file=sys.stderr)
        return 128 + signum
    except MemoryError:
        print(f"error: symeq {args.command} ran out of memory; use a smaller model or more memory", file=sys.stderr)
        return 3
    except BrokenPipeError:  # the reader of stdout went away (symeq ... | head): stop quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        except (OSError, ValueError):
            pass
        return 141
    except Exception as e:  # a bug, not bad input: say so without a wall of traceback
        if os.environ.get("SYMEQ_DEBUG"):
            raise
        print(f"internal error: {type(e).__name__}: {e} (please report it; SYMEQ_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return 70
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
