"""The ``symeq`` command line.

Commands, one module each (each module's docstring gives the full usage):

* :mod:`symeq.cli.verify` -- ``verify``, ``check``, ``example``, ``generate``, ``groups``: the exact
  path (premise, derived actions, checks, verdict, certificate) and its independent checker;
* :mod:`symeq.cli.explain` -- ``explain``: a step-by-step report (Markdown, HTML) with a picture;
* :mod:`symeq.cli.fibre` -- ``fibre``: identifiability at theta (Sussmann/Fefferman, tensor,
  Jacobian-factor and local Jacobian-rank certificates, else the fibre ideal against the orbit, with
  a witness);
* :mod:`symeq.cli.hunt` -- ``hunt``: the resumable search for ReLU counterexamples;
* :mod:`symeq.cli.numeric` -- ``numeric-check``, ``experiment``: the float twin for real-size
  trained networks and the paper's experiment;
* :mod:`symeq.cli.certify` -- ``certify``: from a float network (.onnx, .npz, .json) to the nearest
  layerwise-equivariant one, proven exactly, with its certificate (docs/certify.md);
* :mod:`symeq.cli.export` -- ``export``: a model as ONNX, for torch and other runtimes.

Exit codes: 0 conclusion established (or certificate accepted), 1 refuted (or certificate
rejected), 2 bad input or usage (including a size limit, named with the option that raises it),
3 undetermined (including a time budget that ran out, or an engine that failed), 130 Ctrl-C
(143 SIGTERM), 70 an internal error; see :mod:`symeq.errors`.

Each module has a ``register(subparsers)`` function called from :func:`build_parser`; every
command reads its model through :func:`symeq.cli.loader.load_model_args`.

Budgets: every computing command has a default time budget (:data:`symeq.budget.DEFAULT_BUDGETS`)
printed as its first line of output and changed with ``--timeout``; ``--memory GB`` caps each
engine process and the largest in-process expansion (default 75 % of the RAM).  Engine processes
never outlive symeq (:mod:`symeq.procs`).
"""

from __future__ import annotations

import argparse
import os
import sys

from ..cliargs import group_output_arg
from ..errors import InputError, SymeqError
from ..sizes import add_limit_options, apply_limit_options, set_limits

__all__ = ["main", "build_parser", "group_output_arg", "ENGINE_COMMANDS", "LIMIT_COMMANDS", "OWN_DEADLINE"]


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


#: the end of ``symeq --help``: where to start, and what the exit codes mean
START_HERE = """\
where to start:
  symeq verify                          the built-in example: premise, actions, checks, verdict
  symeq example --out model.json        write that example as a model file to edit
  symeq verify model.json --certificate cert.json
  symeq check cert.json model.json      re-check the certificate independently
  symeq explain model.json              a step-by-step report with a picture
  symeq groups                          the built-in groups for --group
  symeq COMMAND --help                  the options of one command

exit codes:
  0  established (verify: layerwise equivariant; fibre: identifiable) or accepted (check)
  1  refuted (verify, numeric-check; fibre: not identifiable, with a witness) or rejected (check)
  2  bad input or usage, including a size limit (named with the option that raises it)
     and a certificate checked against another model
  3  undetermined: a time budget ran out, an engine failed, or no method decides
     (fibre, verify --identifiability: also locally identifiable, the global question open)
  130 / 143  interrupted (Ctrl-C / SIGTERM); 70 an internal error (please report it)
"""


def build_parser() -> argparse.ArgumentParser:
    from ..version import __version__

    p = argparse.ArgumentParser(prog="symeq", description="Exact verification that identifiable equivariant "
                                "networks are layerwise equivariant (Theorem 4.1, arXiv 2601.21645).",
                                epilog=START_HERE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"symeq {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    from .certify import register as register_certify
    from .export import register as register_export
    from .explain import register as register_explain
    from .fibre import register as register_fibre
    from .hunt import register as register_hunt
    from .numeric import register as register_numeric
    from .verify import register as register_verify

    register_verify(sub)
    register_explain(sub)
    register_fibre(sub)
    register_hunt(sub)
    register_numeric(sub)
    register_certify(sub)
    register_export(sub)
    _add_budget_options(sub)
    return p


#: commands that take the size limits of :mod:`symeq.sizes` (``--max-degree`` ...), and which
LIMIT_COMMANDS = {"verify": ("degree", "total_degree", "width", "monomials", "orbit"),
                  "fibre": ("degree", "total_degree", "width", "monomials", "orbit"),
                  "explain": ("degree", "total_degree", "width", "monomials", "orbit"),
                  "generate": ("degree",), "numeric-check": ("degree", "width")}

#: commands that print the budget line only after their arguments and input files are read (a
#: missing file is one error line, with no banner before it): they read their input through
#: :func:`symeq.cli.loader.load_model_args` or call :func:`symeq.cli.loader.announce_budget`
BANNER_AFTER_INPUT = ("verify", "explain", "fibre", "numeric-check", "check", "generate", "certify")

#: commands whose engine child processes get the ``--memory`` cap
ENGINE_COMMANDS = ("verify", "fibre", "explain")
#: commands that pass ``--timeout`` to a deadline of their own (the backstop alarm waits a little longer)
OWN_DEADLINE = ("verify", "fibre", "explain", "certify")


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
    from ..budget import DEFAULT_BUDGETS

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
                            help="memory budget in GB: the address-space cap of each engine process and the largest "
                                 "in-process expansion (default: 75%% of the RAM)")
        if name in LIMIT_COMMANDS:  # size guards checked before the work starts (symeq.sizes)
            add_limit_options(sp, [k for k in LIMIT_COMMANDS[name] if f"max_{k}" not in dests])


def _budget_line(args) -> float | None:
    """The budget line (printed first, or after the input checks: :data:`BANNER_AFTER_INPUT`); its seconds.

    Returns None where the command has no time budget."""
    from ..budget import DEFAULT_BUDGETS

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
    line = f"symeq {cmd}: budget {budget:g} s ({'--timeout' if t is not None else 'default; --timeout to change'})"
    if cmd in BANNER_AFTER_INPUT:
        args.budget_banner = line  # printed by symeq.cli.loader.announce_budget once the input is read
    else:
        _progress(line)
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

    from .. import procs
    from ..budget import Alarm, BudgetAlarm, alarm_grace
    from .loader import announce_budget

    parser = build_parser()
    args = parser.parse_args(argv)
    old = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is not None:
                old[sig] = signal.signal(sig, _on_signal)
    saved_limits, saved_cap = None, procs.saved_memory_cap()
    try:
        try:
            budget = _budget_line(args)
            saved_limits = apply_limit_options(args)  # every limit: the given value or its default
            procs.set_memory_cap(getattr(args, "memory", None))  # None: the default
            if budget is not None and args.command in ("verify", "explain", "certify") and args.timeout is None:
                args.timeout = budget  # they stop themselves and report what they established
            # the backstop: exactly at the budget where the command has no deadline of its own
            own = args.command in OWN_DEADLINE and getattr(args, "timeout", None) is not None
            grace = alarm_grace(budget) if budget is not None and own else 0.0
            with Alarm(budget, f"symeq {args.command}", grace=grace):
                return args.func(args)
        finally:
            procs.kill_all()
            # the options hold for this call only: a caller's limits and memory budget come back
            if saved_limits is not None:
                set_limits(**vars(saved_limits))
            procs.restore_memory_cap(saved_cap)
    except SymeqError as e:
        if e.exit_code == 3:  # a budget that ran out is named after the budget line
            announce_budget(args)
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except BudgetAlarm as e:
        announce_budget(args)
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
