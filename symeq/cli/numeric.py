"""Subcommands of the numeric twin: ``numeric-check MODEL`` and ``experiment mirror``.

``symeq numeric-check MODEL [--group SPEC [--group-output same|k]] [--tol T] [--metric] [--fdim] [--json]``
    per-layer residuals of the numeric derivation of the actions (MODEL: .json with floats
    allowed, or .npz), and the recovered actions in cycle notation (symeq/notation.py; ``--json``:
    the sparse form of the exact certificate's actions, with float factors and each action's
    residual); ``--metric`` adds the paper's metric, ``--fdim`` the functional dimension
    (``--fdim-method dense|krylov``; auto takes the matrix-free krylov above 2*10^4 parameters).
    Exit 0 when every layer is equivariant through K_i within the tolerance, 1 when not, 3 when
    undetermined (the search over tied neurons ran out of ``--max-tie-nodes``).
``symeq experiment mirror --activation tanh gelu [--task autoencoder|classifier] [--epochs N] [--out DIR]``

``symeq experiment attention [--heads H] [--epochs STEPS] [--seed S] [--out DIR]``: the one-layer
multi-head attention autoencoder (:mod:`symeq.numeric.experiment_attention`, docs/attention.md)
    train on scikit-learn's digits (or ``--data FILE.npz``), print the table next to the paper's,
    write table.md, results.json and the filter figures (torch and matplotlib extras).

:func:`register` adds both to an ``argparse`` sub-parser collection (wired in :mod:`symeq.cli`); errors are
:class:`~symeq.errors.InputError` (exit 2) or :class:`~symeq.errors.EngineMissing` (exit 2).
"""

from __future__ import annotations

import json
import sys

from ..errors import InputError
from .loader import add_group_options, load_model_args, require_extra

__all__ = ["register", "cmd_numeric_check", "cmd_experiment"]


def cmd_numeric_check(args) -> int:
    from ..numeric.layerwise import derive_latent_actions_numeric, paper_metric

    if str(args.model).lower().endswith(".onnx"):  # the reader needs the onnx extra: say so before reading
        require_extra("onnx", "pip install 'symeq[onnx]'", f"reading {args.model}")
    if args.tol is not None and not args.tol > 0:
        raise InputError("--tol must be positive")
    model = load_model_args(args, read=_read_float_network, builtin=False, graphs=True)
    from ..numeric.onnx_io import check_output_op

    output_note = check_output_op(model)  # a softmax head: the output action must be a permutation
    tol, tol_why = default_tolerance(model) if args.tol is None else (args.tol, "given")
    from ..graph import GraphModel

    graph = isinstance(model, GraphModel)  # a graph model (docs/graphs.md): derived along its spaces
    shape = f"{len(model.nodes)} nodes, {model.input_dim} -> {model.output_dim}" if graph else f"widths {model.widths}"
    print(f"numeric check of {args.model}: {shape}, group {model.group.label}; tolerance {tol:g} ({tol_why})",
          file=sys.stderr)
    if graph:
        if args.metric or args.fdim:
            raise InputError(f"{args.model}: --metric and --fdim cover chains of layers; this network is a graph "
                             "(additions or concatenations), which numeric-check derives along the graph only")
        from ..numeric.graph import derive_graph_numeric

        d = derive_graph_numeric(model, tol=tol)
    else:
        d = derive_latent_actions_numeric(model, tol=tol, max_tie_variants=args.max_tie_nodes)
    if output_note:
        d.notes.append(output_note)
    out = {"model": str(args.model), "widths": None if graph else model.widths, "tolerance": {"value": tol, "why": tol_why},
           "reader_notes": model.meta.get("reader_notes", []), "derivation": d.to_json()}
    actions = recovered_actions(d, model.group.names, getattr(d, "spaces", None))
    lines = [d.report()] + [_action_line(a) for a in actions if a.get("cycles") is not None]
    if args.metric:
        res = paper_metric(model, n_test=args.points, rng=0)
        out["paper_metric"] = [r.to_json() for r in res]
        lines.append("paper's metric (median relative error on noise inputs; A_i least squares / projected to K_i):")
        lines += [f"  layer {r.layer}, {r.generator}: {r.error:.3g} / {r.projected_error:.3g} ({r.kind})" for r in res]
    if args.fdim:
        from ..numeric.fdim import functional_dimension

        f = functional_dimension(model, rng=0, method=args.fdim_method,
                                 progress=lambda line: print(line, file=sys.stderr))
        out["functional_dimension"] = f.to_json()
        lines.append(f.report())
    if args.json:
        del out["derivation"]["actions"]  # in the sparse form below instead
        out["actions"] = actions
        print(json.dumps(out, indent=1))
    else:
        print("\n".join(lines))
    # a search that ran out of budget is no verdict: exit 3 (undetermined), never 1
    return {"within tolerance": 0, "not within tolerance": 1, "undetermined": 3}[d.status]


def _read_float_network(path):
    """numeric-check's reader: a float chain (:func:`symeq.numeric.onnx_io.load_float_network`), or for an ONNX
    network with additions, concatenations or a tensor read twice the float graph model
    (:func:`symeq.numeric.onnx_graph.load_onnx_graph`, docs/graphs.md)."""
    from ..numeric.onnx_io import load_float_network

    try:
        return load_float_network(path)
    except InputError:
        if not str(path).lower().endswith(".onnx"):
            raise
        from ..numeric.onnx_graph import load_onnx_graph

        graph = load_onnx_graph(path)  # None: a chain, and the chain reader's refusal stands
        if graph is None:
            raise
        return graph


#: numeric-check's default tolerance: 256 unit roundoffs of the weights' float type, at least 1e-6
ROUNDOFFS = 256


def default_tolerance(model) -> tuple[float, str]:
    """numeric-check's tolerance when ``--tol`` is not given, and why.

    The residuals are relative (|u - alpha v| / |u| per neuron).  Weights stored in float32 carry a
    relative rounding of up to u = 2^-24 ~ 6e-8 each, and the exporters compute them by sums
    (escnn's basis expansion, a BatchNorm folded in float32) that add up to a few hundred such
    roundings: 256 u ~ 1.5e-5 covers an exactly equivariant float32 export (escnn readouts show
    1.7e-6), while a genuinely non-equivariant layer (one kernel not symmetric) has residuals of
    1e-3 to 1, far above.  float64 weights keep the documented 1e-6 (256 u = 2.8e-14 would refuse
    float64 networks that were computed in float32 and cast), which is far below the residual of a
    non-equivariant layer too.  Files that do not say their float type (JSON decimals) are float64.
    """
    name = (getattr(model, "meta", None) or {}).get("weights_dtype")
    if name is None or name == "float64":
        return 1e-6, "the default for float64 weights"
    import numpy as np

    try:
        u = float(np.finfo(np.dtype(name)).eps) / 2
    except TypeError:  # bfloat16 and other types numpy does not know: 8 bits of mantissa
        u = 2.0 ** -8
    tol = max(1e-6, ROUNDOFFS * u)
    return tol, f"the default for {name} weights: {ROUNDOFFS} unit roundoffs of {name}, u = {u:.3g}"


MAX_TEXT_NEURONS = 1024  # wider actions are summarised in the text output (all of them are in --json)


def _action_line(a: dict) -> str:
    head = f"  rho_{a['layer']}({a['generator']}): "
    cp = a.get("channel_pixel")
    if cp is not None:  # a conv layer's action (docs/conv.md)
        from ..notation import format_cycles

        return (head + f"channels {format_cycles(cp['source'], [_factor_text(v) for v in cp['factor']])} (x) "
                f"pixels: {cp['transform']} of the {cp['height']}x{cp['width']} grid")
    n = len(a["source"])
    if n > MAX_TEXT_NEURONS:
        moved = sum(1 for j, s_ in enumerate(a["source"]) if s_ != j)
        return head + f"monomial on {n} neurons, {moved} moved (--json gives its cycles)"
    from ..notation import wrap_cycles

    return "\n".join(wrap_cycles(head, a["cycles"]))  # lines of at most 100 characters


def _factor_text(v: float):
    return 1 if v == 1 else -1 if v == -1 else f"{v:.4g}"


def recovered_actions(d, generator_names, spaces=None) -> list[dict]:
    """The actions of a numeric derivation, one dict per hidden layer and generator.

    A monomial action is ``{"kind": "monomial", "source": [s_j], "factor": [c_j]}`` with
    ``(rho y)_j = c_j y_{s_j}`` (the exact certificate's form, docs/certificates.md, with floats),
    plus ``offset`` for an affine action, its ``cycles`` (symeq/notation.py, factors to 4 digits)
    and the ``residual`` of the layer whose matching recovered it; attention value-space actions
    are ``{"kind": "dense", "matrix"}``.  For a graph (``spaces``: the hidden spaces' names) ``"layer"`` is
    the space's name.
    """
    from ..notation import format_cycles
    from ..numeric.monomial import MonomialAction

    residual = {(r.layer, r.generator): r.residual for r in d.residuals}
    out = []
    for i, acts in enumerate(d.actions, 1):
        for gname, a in zip(generator_names, acts):
            entry = {"layer": i if spaces is None else spaces[i - 1], "generator": gname}
            if a is None:  # not derived: the derivation says why (undetermined)
                entry.update(kind="none", cycles=None)
            elif isinstance(a, MonomialAction):
                vals = [float(v) for v in a.vals]
                entry.update(kind="monomial", source=[int(c) for c in a.cols], factor=vals)
                if a.offset is not None:
                    entry["offset"] = [float(v) for v in a.offset]
                if a.__dict__.get("channel_pixel") is not None:  # set by a conv layer's matching
                    entry["channel_pixel"] = a.channel_pixel
                try:
                    entry["cycles"] = format_cycles(entry["source"], [_factor_text(v) for v in vals])
                except ValueError:  # not a permutation: left to the residuals to show
                    entry["cycles"] = None
            else:
                import numpy as np

                entry.update(kind="dense", matrix=np.asarray(a, dtype=float).tolist())
            entry["residual"] = residual.get((entry["layer"], gname))
            out.append(entry)
    return out


def cmd_experiment(args) -> int:
    from ..numeric.experiment import run_mirror_experiment

    if args.which == "attention":  # the attention autoencoder (symeq/numeric/experiment_attention.py)
        from ..certification import certify
        from ..numeric.experiment_attention import cmd_attention

        return cmd_attention(args, certify)
    if args.which != "mirror":
        raise InputError(f"unknown experiment {args.which!r}; known: mirror")
    if args.epochs is not None and args.epochs < 1:
        raise InputError("--epochs must be at least 1")
    data = None
    if args.data:
        from ..numeric.train import load_npz_dataset

        data = load_npz_dataset(args.data)
    from ..certification import certify_mirror_run

    emergence = None
    if args.emergence is not None:
        if not args.emergence or any(not (w >= 0 and w < float("inf")) for w in args.emergence):
            raise InputError("--emergence takes one or more finite penalty weights >= 0, e.g. --emergence 0 1 10")
        emergence = tuple(args.emergence)
    res = run_mirror_experiment(tuple(args.activation), args.task, epochs=args.epochs, out=args.out,
                                seed=args.seed, data=data, progress=not args.quiet, figures=args.out is not None,
                                device=args.device, certifier=certify_mirror_run, emergence=emergence)
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if not k.startswith("_")}, indent=1))
    else:
        print(res["table"])
        for act, rows in (res.get("emergence") or {}).items():
            print(_emergence_table(act, rows))
    if args.out:
        from ..numeric.experiment import written_summary

        print(written_summary(res, args.out), file=sys.stderr)
    return 0


def _emergence_table(activation: str, rows: list) -> str:
    """The emergence curve as a Markdown table (one row per penalty weight; empty cells where a value is
    missing, e.g. no certified network)."""
    cols = [("equivariance_weight", "penalty"), ("end_to_end_data", "end-to-end (data)"),
            ("paper_metric_layer_1", "paper f_1"), ("paper_metric_layer_2", "paper f_2"),
            ("k_distance", "K-distance"), ("held_out_loss_theta", "held-out loss theta"),
            ("held_out_loss_finetuned_certified", "held-out loss fine-tuned certified")]

    def cell(v):
        return "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))

    lines = [f"\nemergence, {activation}:", "| " + " | ".join(h for _, h in cols) + " |",
             "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r.get(k)) for k, _ in cols) + " |" for r in rows]
    return "\n".join(lines)


def register(subparsers) -> None:
    """Add ``numeric-check`` and ``experiment`` to a ``parser.add_subparsers()`` object."""
    n = subparsers.add_parser("numeric-check", help="numeric layerwise analysis of a float model (.json or .npz)")
    n.add_argument("model", help="model file: symeq-model/1 JSON (floats allowed), .npz or .onnx")
    add_group_options(n)
    n.add_argument("--tol", type=float, default=None,
                   help="relative residual tolerance (default: follows the weights' float type: 1e-6 for float64, "
                        "256 unit roundoffs = 1.53e-5 for float32)")
    n.add_argument("--max-tie-nodes", type=int, default=720, metavar="N",
                   help="node budget of the search over tied neurons (default 720; exit 3 when it runs out)")
    n.add_argument("--metric", action="store_true", help="also the paper's metric on noise inputs")
    n.add_argument("--points", type=int, default=2000, help="held-out noise inputs for --metric")
    n.add_argument("--fdim", action="store_true", help="also the functional dimension (Jacobian rank)")
    n.add_argument("--fdim-method", choices=["auto", "dense", "krylov"], default="auto",
                   help="dense SVD (up to 2*10^4 parameters), matrix-free krylov (any size), or auto")
    n.add_argument("--json", action="store_true",
                   help="print the result as JSON on stdout (every action in full; indices from 0)")
    n.set_defaults(func=cmd_numeric_check)

    e = subparsers.add_parser("experiment", help="the paper's mirror experiment (torch extra)")
    e.add_argument("which", choices=["mirror", "attention"], help="the experiment (mirror: the MLPs; attention: the "
                   "one-layer multi-head attention autoencoder, docs/attention.md)")
    e.add_argument("--heads", type=int, default=4, help="attention: the number of heads (1, 2, 4 or 8; default 4)")
    e.add_argument("--activation", nargs="+", default=["tanh", "gelu"], choices=["tanh", "gelu", "relu", "poly"],
                   help="first-layer activations to compare (default: tanh gelu)")
    e.add_argument("--task", default="autoencoder", choices=["autoencoder", "classifier"],
                   help="what the networks are trained for (default: autoencoder)")
    e.add_argument("--epochs", type=int, default=None,
                   help="training epochs of mirror (default: the task's setting, 300 for the autoencoder, 600 for the "
                        "classifier); Adam steps of attention (default 1200)")
    e.add_argument("--data", help="a data set .npz (x, optional y, shape) instead of scikit-learn's digits")
    e.add_argument("--seed", type=int, default=0, help="random seed of the training (default 0)")
    e.add_argument("--device", default="cpu", help="torch device for training: cpu (default), cuda, or auto")
    e.add_argument("--out", help="directory for table.md, results.json and PNG figures")
    e.add_argument("--emergence", type=float, nargs="*", default=None, metavar="W",
                   help="mirror: also train one network per equivariance-penalty weight W (e.g. 0 0.3 1 3 10) and report "
                        "the end-to-end error, the paper's metric, the K-distance and the certified fine-tuned task loss "
                        "along them (emergence_<act>_<task>.png under --out)")
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    e.set_defaults(func=cmd_experiment)
