"""Subcommands of the numeric twin: ``numeric-check MODEL`` and ``experiment mirror``.

``symeq numeric-check MODEL [--group SPEC] [--tol T] [--metric] [--fdim] [--json]``
    per-layer residuals of the numeric derivation of the actions (MODEL: .json with floats
    allowed, or .npz); ``--metric`` adds the paper's metric, ``--fdim`` the functional dimension
    (``--fdim-method dense|krylov``; auto takes the matrix-free krylov above 2*10^4 parameters).
    Exit 0 when every layer is equivariant through K_i within the tolerance, 1 when not.
``symeq experiment mirror --activation tanh gelu [--task autoencoder|classifier] [--epochs N] [--out DIR]``
    train on scikit-learn's digits (or ``--data FILE.npz``), print the table next to the paper's,
    write table.md, results.json and the filter figures (torch and matplotlib extras).

:func:`register` adds both to an ``argparse`` sub-parser collection; errors are
:class:`~symeq.errors.InputError` (exit 2) or :class:`~symeq.errors.EngineMissing` (exit 2).
"""

from __future__ import annotations

import json
import sys

from ..errors import InputError

__all__ = ["register", "cmd_numeric_check", "cmd_experiment"]


def cmd_numeric_check(args) -> int:
    from .layerwise import derive_latent_actions_numeric, paper_metric
    from .models import load_numeric_model

    model = load_numeric_model(args.model)
    if args.group is not None:
        from ..groups import builtin_group

        model = model.with_group(builtin_group(args.group))
    if model.group is None:
        raise InputError("the model has no \"group\"; add one to the file or pass --group (see `symeq groups`)")
    if not args.tol > 0:
        raise InputError("--tol must be positive")
    print(f"numeric check of {args.model}: widths {model.widths}, group {model.group.label}", file=sys.stderr)
    d = derive_latent_actions_numeric(model, tol=args.tol)
    out = {"model": str(args.model), "widths": model.widths, "derivation": d.to_json()}
    lines = [d.report()]
    if args.metric:
        res = paper_metric(model, n_test=args.points, rng=0)
        out["paper_metric"] = [r.to_json() for r in res]
        lines.append("paper's metric (median relative error on noise inputs; A_i least squares / projected to K_i):")
        lines += [f"  layer {r.layer}, {r.generator}: {r.error:.3g} / {r.projected_error:.3g} ({r.kind})" for r in res]
    if args.fdim:
        from .fdim import functional_dimension

        f = functional_dimension(model, rng=0, method=args.fdim_method,
                                 progress=lambda line: print(line, file=sys.stderr))
        out["functional_dimension"] = f.to_json()
        lines.append(f.report())
    if args.json:
        del out["derivation"]["actions"]
        print(json.dumps(out, indent=1))
    else:
        print("\n".join(lines))
    return 0 if d.within_tolerance else 1


def cmd_experiment(args) -> int:
    from .experiment import run_mirror_experiment

    if args.which != "mirror":
        raise InputError(f"unknown experiment {args.which!r}; known: mirror")
    if args.epochs is not None and args.epochs < 1:
        raise InputError("--epochs must be at least 1")
    data = None
    if args.data:
        from .train import load_npz_dataset

        data = load_npz_dataset(args.data)
    res = run_mirror_experiment(tuple(args.activation), args.task, epochs=args.epochs, out=args.out,
                                seed=args.seed, data=data, progress=not args.quiet, figures=args.out is not None,
                                device=args.device)
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if not k.startswith("_")}, indent=1))
    else:
        print(res["table"])
    if args.out:
        print(f"table, results and figures written to {args.out}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    """Add ``numeric-check`` and ``experiment`` to a ``parser.add_subparsers()`` object."""
    n = subparsers.add_parser("numeric-check", help="numeric layerwise analysis of a float model (.json or .npz)")
    n.add_argument("model", help="model file: symeq-model/1 JSON (floats allowed) or .npz")
    n.add_argument("--group", help="a built-in group overriding the file's (see `symeq groups`)")
    n.add_argument("--tol", type=float, default=1e-6, help="relative residual tolerance (default 1e-6)")
    n.add_argument("--metric", action="store_true", help="also the paper's metric on noise inputs")
    n.add_argument("--points", type=int, default=2000, help="held-out noise inputs for --metric")
    n.add_argument("--fdim", action="store_true", help="also the functional dimension (Jacobian rank)")
    n.add_argument("--fdim-method", choices=["auto", "dense", "krylov"], default="auto",
                   help="dense SVD (up to 2*10^4 parameters), matrix-free krylov (any size), or auto")
    n.add_argument("--json", action="store_true")
    n.set_defaults(func=cmd_numeric_check)

    e = subparsers.add_parser("experiment", help="the paper's mirror experiment (torch extra)")
    e.add_argument("which", choices=["mirror"], help="the experiment")
    e.add_argument("--activation", nargs="+", default=["tanh", "gelu"], choices=["tanh", "gelu", "relu", "poly"],
                   help="first-layer activations to compare (default: tanh gelu)")
    e.add_argument("--task", default="autoencoder", choices=["autoencoder", "classifier"])
    e.add_argument("--epochs", type=int, default=None,
                   help="training epochs (default: the task's setting, 300 for the autoencoder, 600 for the classifier)")
    e.add_argument("--data", help="a data set .npz (x, optional y, shape) instead of scikit-learn's digits")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--device", default="cpu", help="torch device for training: cpu (default), cuda, or auto")
    e.add_argument("--out", help="directory for table.md, results.json and PNG figures")
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=cmd_experiment)
