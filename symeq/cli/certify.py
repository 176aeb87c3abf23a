"""``symeq certify``: from a float network to the nearest layerwise-equivariant one, with its certificate.

``symeq certify NETWORK [--group G [--group-output same|k]] [--group-file G.json] --out MODEL.json
--certificate CERT.json [--digits D] [--data X.npz] [--task classifier|autoencoder] [--metric parameters|data]
[--max-distance D] [--restarts N] [--finetune [--finetune-steps N] [--finetune-seconds S]] [--max-width N]
[--json]``

NETWORK is ``.onnx`` (onnx extra), ``.npz`` (weight_i, bias_i, activations) or a symeq model file with
float entries.  The group comes from ``--group``, from ``--group-file`` (a JSON file holding a model
file's ``"group"`` object, or a whole model file whose group is used), or from the network file.
The command recovers the actions, projects theta onto the layerwise-equivariant parameters
exactly, verifies theta-bar with the exact pipeline, writes theta-bar as a model file (``--out``)
and the certificate (``--certificate``; ``symeq check CERT MODEL`` re-checks it) and reports the
distances first (:mod:`symeq.certification`, docs/certify.md).

Every output path is checked for writability before the work (exit 2).
Exit codes: 0 certified, 1 certified but farther than ``--max-distance``, 2 bad input, 3
undetermined (the time budget ran out, or the exact pipeline could not finish).  The budget is the
command's entry in :data:`symeq.budget.DEFAULT_BUDGETS` (``--timeout`` changes it), printed once the
network, the group file and the data are read, like every other command's.
"""

from __future__ import annotations

import json
import sys

from ..errors import InputError
from .loader import add_group_options, load_model_args

__all__ = ["register", "cmd_certify"]

def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _group_file(path):
    from ..groups import FiniteGroup
    from ..io import read_json

    data = read_json(path)
    if isinstance(data, dict) and "generators" not in data and isinstance(data.get("group"), dict):
        return FiniteGroup.from_json(data["group"], f"{path}.group")  # a whole model file: its group
    return FiniteGroup.from_json(data, str(path))


def _check_output_path(path, option: str) -> None:
    """Refuse, before any work, an output path that cannot be written: its folder missing or not
    writable, or the path an existing folder (write_json writes PATH.tmp beside it, then renames)."""
    import os
    from pathlib import Path

    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise InputError(f"{option} {path}: is a folder; give a file name")
    if p.exists() and not p.is_file():  # a device or a pipe: the rename into place would replace it
        raise InputError(f"{option} {path}: is not a regular file (a device, a pipe or a socket); give a file name "
                         "(nothing was computed)")
    if not parent.is_dir():
        raise InputError(f"{option} {path}: the folder {parent} does not exist (nothing was computed)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option} {path}: the folder {parent} is not writable (nothing was computed)")
    if p.exists() and not os.access(p, os.W_OK):
        raise InputError(f"{option} {path}: the file exists and is not writable (nothing was computed)")


def _write(data, path, option: str) -> None:
    from ..io import write_json

    try:
        write_json(data, path)
    except OSError as e:
        raise InputError(f"{option} {path}: could not be written ({e.strerror or e})") from None


def cmd_certify(args) -> int:
    from ..certification import certify
    from ..io import model_to_json
    from ..numeric.onnx_graph_exact import load_float_network_or_graph

    if args.digits is not None and not 1 <= args.digits <= 30:
        raise InputError("--digits must be from 1 to 30")
    if args.max_distance is not None and not args.max_distance >= 0:
        raise InputError("--max-distance must be a non-negative number")
    if args.points < 1:
        raise InputError("--points must be at least 1")
    if not args.tol > 0:
        raise InputError("--tol must be positive")
    if args.group and args.group_file:
        raise InputError("give the group by --group or by --group-file, not both")
    if args.metric == "data" and not args.data:
        raise InputError("--metric data weights the distance by the data: give --data")
    if args.task and not args.data:
        raise InputError(f"--task {args.task} needs --data (the task loss is measured on the data)")
    if not args.finetune and any(v is not None for v in (args.finetune_steps, args.finetune_seconds,
                                                         args.finetune_lr, args.holdout)):
        raise InputError("--finetune-steps, --finetune-seconds, --finetune-lr and --holdout go with --finetune")
    if args.out and args.certificate:
        from pathlib import Path

        if Path(args.out).resolve() == Path(args.certificate).resolve():
            raise InputError("--out and --certificate name the same file")
    for path, option in ((args.out, "--out"), (args.certificate, "--certificate")):
        if path:
            _check_output_path(path, option)  # before the work: a path that cannot be written is bad input
    out = args.out
    if args.certificate and not out:  # theta-bar, the model the certificate is about, beside it (docs/cli.md)
        from pathlib import Path

        from .verify import model_file_beside

        out = model_file_beside(args.certificate)
        if Path(out).resolve() == Path(args.model).resolve():
            raise InputError(f"--certificate {args.certificate} would write theta-bar to {out}, the input network; "
                             "give --out")
    finetune = None
    if args.finetune:
        given = {"steps": args.finetune_steps, "seconds": args.finetune_seconds, "lr": args.finetune_lr,
                 "holdout": args.holdout}  # defaults: symeq.certification._finetune_options
        finetune = {"progress": True, **{k: v for k, v in given.items() if v is not None}}
    from ..certification import read_data

    # every input is read before the budget line (printed by load_model_args: symeq.cli.loader.announce_budget)
    group = _group_file(args.group_file) if args.group_file else None  # None: the network's (or --group's)
    data = read_data(args.data) if args.data else None
    network = load_model_args(args, read=load_float_network_or_graph, builtin=False, need_group=False,
                              graphs=True)  # --group applied; a graph network goes to symeq/certify_graph.py
    timeout = args.timeout  # symeq.cli.main sets it: --timeout or the command's default budget
    if timeout is None:  # called without symeq.cli.main
        from ..budget import DEFAULT_BUDGETS

        timeout = DEFAULT_BUDGETS["certify"]
    sizes = getattr(network, "widths", None) or [s.dim for s in network.spaces()]  # a graph: its spaces' sizes
    _progress(f"certifying {args.model}: {'widths' if hasattr(network, 'widths') else 'spaces'} {sizes}")
    from ..numeric.onnx_io import check_output_op  # a softmax head needs a permutation output action (docs/onnx.md)

    check_output_op(network, group)  # (the reader's folds are printed by load_model_args)
    c = certify(network, group, digits=args.digits, data=data, max_distance=args.max_distance, tol=args.tol,
                timeout=timeout, noise_points=args.points, seed=args.seed, conv=args.conv, task=args.task,
                metric=args.metric, restarts=args.restarts, finetune=finetune)
    if c.verification is not None and c.status != "undetermined":
        if out:
            _write(model_to_json(c.model), out, "--out")
            _progress(f"theta-bar written to {out}" + ("" if args.out else " (beside the certificate)"))
        if args.certificate:
            _write(c.certificate(), args.certificate, "--certificate")
            _progress(f"certificate written to {args.certificate} (check it: symeq check {args.certificate} {out})")
    elif args.out or args.certificate:
        _progress("nothing written: theta-bar is not verified")
    from ..steps import trace_json, trace_lines

    if args.json:  # the candidate steps' trace as "steps" (docs/cli.md)
        out = c.to_json()
        out.setdefault("steps", trace_json(c.steps, decided=CANDIDATE_ADDED))
        print(json.dumps(out, indent=1))
    else:
        print(c.report())
        if args.explain_steps:
            print("\n".join([""] + trace_lines(c.steps, decided=CANDIDATE_ADDED,
                                                title="candidate steps tried (docs/architecture.md, \"Pipelines\"):")))
    return c.exit_code


#: the outcome of a candidate step that added candidate actions (every candidate step runs)
CANDIDATE_ADDED = "added candidate actions"


def register(subparsers) -> None:
    """Add ``certify`` to a ``parser.add_subparsers()`` object."""
    from ..sizes import add_limit_options

    c = subparsers.add_parser("certify", help="nearest layerwise-equivariant network to a float one (.onnx, .npz, "
                                              ".json), proven exactly, with a certificate")
    c.add_argument("model", metavar="NETWORK",
                   help="the float network: .onnx (onnx extra), .npz or symeq-model/1 JSON with floats")
    add_group_options(c)
    c.add_argument("--group-file", metavar="G.json",
                   help="the group as a model file's \"group\" object (or a model file whose group is used)")
    c.add_argument("--out", metavar="MODEL.json", help="write theta-bar (exact rationals) as a model file")
    c.add_argument("--certificate", metavar="CERT.json", help="write the certificate (symeq check CERT MODEL)")
    c.add_argument("--digits", type=int, default=None, metavar="D",
                   help="round every layer to the grid 10^-D before the exact projection (default, per layer: three "
                        "digits below the layer's largest deviation from its projection, at most 15)")
    c.add_argument("--data", metavar="X.npz", help="data (arrays x, optional y labels): function distance, task loss, "
                                                   "data-weighted distances, noise inputs at the data's scale")
    c.add_argument("--task", choices=["classifier", "autoencoder"], default=None,
                   help="the task loss: default read from the data (labels: classifier; no labels and output = input: "
                        "autoencoder); needed when labels come with an output the size of the input")
    c.add_argument("--metric", choices=["parameters", "data"], default="parameters",
                   help="the one metric that chooses theta-bar and judges --max-distance: the whole network's relative "
                        "parameter distance (default) or the same weighted by the data reaching each layer "
                        "(needs --data)")
    c.add_argument("--max-distance", type=float, default=None, metavar="D",
                   help="exit 1 when theta-bar's distance in --metric is above D")
    c.add_argument("--restarts", type=int, default=None, metavar="N",
                   help="seeded random restarts of the joint search over the layers' actions (default 8; chains "
                        "only: a graph network refuses it)")
    c.add_argument("--finetune", action="store_true",
                   help="train inside the layerwise-equivariant subspace of the chosen actions on the data (torch "
                        "extra), then certify the fine-tuned network exactly")
    c.add_argument("--finetune-steps", type=int, default=None, metavar="N",
                   help="fine-tuning steps per run (default 1000; the iterate best on a validation part is kept)")
    c.add_argument("--finetune-seconds", type=float, default=None, metavar="S",
                   help="fine-tuning time budget, all runs together (default 60 s, at most half of what --timeout leaves)")
    c.add_argument("--finetune-lr", type=float, default=None, metavar="LR", help="Adam's step size (default 1e-3)")
    c.add_argument("--holdout", type=float, default=None, metavar="F",
                   help="fraction of the data held out from fine-tuning (default 0.2)")
    c.add_argument("--conv", choices=["auto", "dense", "kernels"], default="auto",
                   help="convolutions averaged through their dense matrix (with the matching search), on their kernels "
                        "(the float twin's actions only), or auto: dense while the dense matrix fits (default)")
    c.add_argument("--tol", type=float, default=1e-6, help="the float twin's tolerance (default 1e-6)")
    c.add_argument("--points", type=int, default=2000, help="noise inputs for the function distance (default 2000)")
    c.add_argument("--seed", type=int, default=0, help="seed of the noise inputs, the restarts, the held-out split "
                                                       "and the exact premise's points")
    c.add_argument("--json", action="store_true", help="the report as JSON")
    c.add_argument("--explain-steps", action="store_true",
                   help="also print every candidate step tried and its outcome (--json always has them)")
    add_limit_options(c, ["width"])
    c.set_defaults(func=cmd_certify)
