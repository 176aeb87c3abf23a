"""``symeq hunt``: the ReLU counterexample hunter on the command line.

``symeq hunt --arch 2,4,2 --group rot3 [--budget N | --seconds S] [--workers N | --scheduler tcp://HOST:PORT] --out results.jsonl``
    run (or resume) a hunt; one JSON line per candidate, counterexamples with certificates.
``symeq hunt --report results.jsonl [more.jsonl ...]``
    the catalogue of finds per architecture and group.

Exit codes: 0 done (finds or not), 2 bad input, 130 interrupted (the file stays resumable).
"""

from __future__ import annotations

import json
import sys

__all__ = ["register", "cmd_hunt"]


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_hunt(args) -> int:
    from ..errors import InputError
    from .hunt import HUNT_GROUPS, hunt, report

    if args.report:
        print(report(args.report))
        return 0
    if not args.arch or not args.group or not args.out:
        raise InputError("symeq hunt needs --arch, --group and --out (or --report FILE); groups: "
                         + ", ".join(HUNT_GROUPS) + " or any built-in spec (see `symeq groups`)")
    if args.workers < 1:
        raise InputError("--workers must be at least 1")
    summary = hunt(args.arch, args.group, args.out, budget=args.budget, seconds=args.seconds,
                   workers=args.workers, scheduler=args.scheduler, seed=args.seed, batch=args.batch,
                   minimise_finds=not args.no_minimise, progress=_progress)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        rate = summary["per_second"]
        print(f"verified {summary['verified']} new candidate(s) ({summary['total']} in {args.out}), "
              f"{summary['finds']} counterexample(s); {summary['seconds']:.1f} s"
              + (f", {rate:.1f} candidates/s" if rate else ""))
    return 0


def register(subparsers) -> None:
    """Add the ``hunt`` command to an argparse subparsers object."""
    h = subparsers.add_parser("hunt", help="search for equivariant ReLU networks with no layerwise-equivariant parameter")
    h.add_argument("--arch", help="n,width,m: one hidden ReLU layer, e.g. 2,4,2")
    h.add_argument("--group", help="rot3, rot4, rot6 (rotations of R^2) or a built-in group spec")
    h.add_argument("--budget", type=int, default=None, help="number of candidates (indices 0..N-1)")
    h.add_argument("--seconds", type=float, default=None, help="stop after this many seconds (resumable)")
    h.add_argument("--workers", type=int, default=1, help="local worker processes (default 1: in-process)")
    h.add_argument("--scheduler", default=None, help="dask.distributed scheduler address tcp://HOST:PORT")
    h.add_argument("--out", help="results file (JSON lines; an existing file is resumed)")
    h.add_argument("--seed", type=int, default=0, help="seed of the candidate stream")
    h.add_argument("--batch", type=int, default=None, help="candidates per batch (mutations see earlier batches)")
    h.add_argument("--no-minimise", action="store_true", help="do not minimise finds")
    h.add_argument("--report", nargs="+", metavar="FILE", help="print the catalogue of these hunt files")
    h.add_argument("--json", action="store_true", help="print the run summary as JSON")
    h.set_defaults(func=cmd_hunt)
