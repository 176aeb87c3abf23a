"""``symeq hunt``: the ReLU counterexample hunter on the command line.

``symeq hunt --arch 2,4,2 --group rot:3 [--budget N | --seconds S] [--workers N | --scheduler tcp://HOST:PORT] --out results.jsonl``
    run (or resume) a hunt; one JSON line per candidate, in index order, counterexamples with
    certificates.  ``--arch 2,4,4,2`` (two or more hidden layers) hunts deep networks with the
    statuses of :mod:`symeq.relu.deep`.  Resuming a finished hunt prints one line.
``symeq hunt --report results.jsonl [more.jsonl ...] [--picture find.svg | --no-picture]``
    the catalogue of finds per depth, architecture and status, with a picture of the smallest
    proven find (default: next to the first file, ``.svg``).

Exit codes: 0 done (finds or not), 2 bad input, 130 interrupted (the file stays resumable).
"""

from __future__ import annotations

import json
import sys

__all__ = ["register", "cmd_hunt"]


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _budget_first(args):
    """``_progress`` that prints the budget line (set by symeq.cli.main) first.

    At once for a new hunt; when resuming, before the first progress message, so that a
    finished hunt (no work, no progress) prints one line only."""
    from pathlib import Path

    pending = [getattr(args, "budget_line", None)]
    if pending[0] and not Path(args.out).exists():
        _progress(pending.pop())
        pending.append(None)

    def progress(msg: str) -> None:
        if pending[0]:
            _progress(pending.pop())
            pending.append(None)
        _progress(msg)
    return progress


def _group_spelling(spec: str, out: str) -> str:
    """The group's canonical spelling (``rot3`` -> ``rot:3``), or the one a file being resumed was started with.

    A hunt file records its group as written; resuming it under an alias of the same group keeps
    the file's spelling, so that the header still matches.
    """
    import json
    from pathlib import Path

    from ..groups.builtins import canonical_spec

    canon = canonical_spec(spec)
    try:
        with open(Path(out), encoding="utf-8") as fh:
            header = json.loads(fh.readline())
        old = header.get("group") if isinstance(header, dict) else None
    except (OSError, ValueError):
        return canon
    return old if isinstance(old, str) and canonical_spec(old) == canon else canon


def _hunt_activation(args):
    """``--activation``: relu (default) or leaky_relu:SLOPE (the exact machinery is piecewise linear)."""
    text = getattr(args, "activation", None)
    if not text:
        return None
    from ..activations import activation_from_text

    return activation_from_text(text, "--activation")


def cmd_hunt(args) -> int:
    from ..errors import InputError
    from ..relu.hunt import hunt, report

    if args.report:
        from pathlib import Path

        picture = None
        if not args.no_picture:
            first = Path(args.report[0])
            picture = args.picture or str(first.with_name(first.stem + "-find.svg"))
        print(report(args.report, picture=picture))
        return 0
    if not args.arch or not args.group or not args.out:
        raise InputError("symeq hunt needs --arch, --group and --out (or --report FILE); groups: the plane "
                         "rotations rot:3, rot:4, rot:6 or any built-in spec (see `symeq groups`)")
    group = _group_spelling(args.group, args.out)
    if args.workers < 1:
        raise InputError("--workers must be at least 1")
    if args.scheduler:  # before the hunt starts, not when its first unit is sent
        from .loader import require_extra

        require_extra("distributed", "pip install 'symeq[distributed]'", "--scheduler")
    summary = hunt(args.arch, group, args.out, budget=args.budget, seconds=args.seconds,
                   workers=args.workers, scheduler=args.scheduler, seed=args.seed, lag=args.lag,
                   minimise_finds=not args.no_minimise, progress=_budget_first(args),
                   activation=_hunt_activation(args))
    if args.json:
        print(json.dumps(summary, indent=1))
    elif summary["verified"] == 0 and summary.get("complete"):
        print(f"{args.out}: hunt already complete ({summary['total']} candidates, {summary['finds']} find(s)); "
              f"nothing to do")
    else:
        rate = summary["per_second"]
        print(f"verified {summary['verified']} new candidate(s) ({summary['total']} in {args.out}), "
              f"{summary['finds']} find(s) (counterexamples and proven no-action candidates); {summary['seconds']:.1f} s"
              + (f", {rate:.1f} candidates/s" if rate else ""))
    return 0


def register(subparsers) -> None:
    """Add the ``hunt`` command to an argparse subparsers object."""
    h = subparsers.add_parser("hunt", help="search for equivariant ReLU networks with no layerwise-equivariant parameter")
    h.add_argument("--arch", help="n,h1,...,m: input, hidden ReLU widths, output; e.g. 2,4,2 or 2,4,4,2")
    h.add_argument("--group", metavar="SPEC", help="rot:3, rot:4, rot:6 (rotations of R^2) or any built-in group spec "
                   "(see `symeq groups`; the older rot3 is accepted)")
    h.add_argument("--budget", type=int, default=None, help="number of candidates (indices 0..N-1)")
    h.add_argument("--seconds", type=float, default=None, help="stop after this many seconds (resumable)")
    h.add_argument("--workers", type=int, default=1, help="local worker processes (default 1: in-process)")
    h.add_argument("--scheduler", default=None, help="dask.distributed scheduler address tcp://HOST:PORT")
    h.add_argument("--out", help="results file (JSON lines; an existing file is resumed)")
    h.add_argument("--seed", type=int, default=0, help="seed of the candidate stream")
    h.add_argument("--activation", default=None, metavar="ACT",
                   help="relu (default) or leaky_relu:SLOPE, e.g. leaky_relu:1/10: the same candidates with leaky "
                        "hidden layers (stored in the file; resume with the same value)")
    h.add_argument("--lag", "--batch", dest="lag", type=int, default=None,
                   help="candidate i may mutate finds among candidates < i - LAG (part of the stream, stored in "
                        "the file; default 512); work units are sized automatically (about 1 s each)")
    h.add_argument("--no-minimise", action="store_true", help="do not minimise finds")
    h.add_argument("--report", nargs="+", metavar="FILE", help="print the catalogue of these hunt files")
    h.add_argument("--picture", default=None, help="with --report: where to draw the smallest proven find "
                   "(.svg by hand; .png/.pdf need matplotlib); default FILE-find.svg")
    h.add_argument("--no-picture", action="store_true", help="with --report: draw no picture")
    h.add_argument("--json", action="store_true", help="print the run summary as JSON")
    h.set_defaults(func=cmd_hunt)
