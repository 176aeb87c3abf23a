"""``symeq verify``, ``check``, ``example``, ``generate`` and ``groups``: the exact path on the command line.

``symeq verify [MODEL.json] [--group SPEC] [--certificate OUT.json] [--json]``
    premise, derived actions, checks, verdict.  No MODEL: the built-in example.
``symeq check CERT.json MODEL.json`` (or ``MODEL.onnx``)
    re-verify a certificate with the independent standard-library checker; an ``.onnx`` MODEL is
    read by symeq's exact ONNX reader into the model JSON the checker checks, and the output says so.
``symeq example [--out FILE] [--unscrambled]``
    write the built-in example model file.
``symeq generate --group SPEC --activation SPEC --latent SPEC... [--scramble] [--out FILE]``
    a random layerwise-equivariant model (for tests, teaching and benchmarks).
``symeq groups``
    list the built-in groups.

:func:`register` adds the five commands to an ``argparse`` sub-parser collection (wired in
:mod:`symeq.cli`); models are read by :func:`symeq.cli.loader.load_model_args`.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..cliargs import group_output_arg
from ..errors import InputError
from .loader import add_group_options, announce_budget, group_from_args, load_model_args, require_extra

__all__ = ["register", "cmd_verify", "cmd_check", "cmd_example", "cmd_generate", "cmd_groups"]


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_verify(args) -> int:
    from ..io import write_json
    from ..theorem import verify

    model = load_model_args(args, graphs=True)
    _progress(f"verifying {model.name}: widths {model.widths}, group {model.group.label}")
    # the Gröbner-engine note comes with the identifiability result, only when that step ran (issue 18)
    v = verify(model, method=args.method, timeout=args.timeout, seed=args.seed, fibre_search=not args.no_fibre_search,
               identifiability=args.identifiability, max_tie_nodes=args.max_tie_nodes,
               identifiability_field=getattr(args, "field", "R"))
    if args.certificate:
        write_json(v.certificate(), args.certificate)
        _progress(f"certificate written to {args.certificate}")
        if _is_onnx(args.model):  # the exact reading the certificate is about, for the plain checker
            from ..io import model_to_json

            beside = model_file_beside(args.certificate)
            write_json(model_to_json(model), beside)
            _progress(f"exact model (the reading of {args.model} the certificate is about) written to {beside} "
                      f"(check it: symeq check {args.certificate} {beside})")
    if args.json:
        print(json.dumps(_with_steps(v.to_json(), v), indent=1))
    else:
        print(v.report(matrix=args.matrix))
        if args.explain_steps:
            print("\n".join(_steps_text(v)))
    if v.identifiability.get("status") == "undetermined":
        # the layerwise result is on stdout; say on stderr why the run exits 3
        _progress(f"identifiability undetermined: {v.identifiability['detail']}")
    return v.exit_code


def _with_steps(out: dict, v) -> dict:
    """``--json``: the verify pipeline's trace as "steps" (docs/cli.md), and the identifiability decision's
    as "identifiability"."steps" when it ran."""
    from ..steps import trace_json, tried_trace

    out.setdefault("steps", trace_json(v.steps))
    ident = out.get("identifiability")
    if isinstance(ident, dict) and ident.get("tried"):
        ident.setdefault("steps", trace_json(tried_trace(ident["tried"])))
    return out


def _steps_text(v) -> list[str]:
    """``--explain-steps``: every step of the verify pipeline tried, with its outcome, then those of the
    identifiability decision when ``--identifiability`` ran it."""
    from ..steps import trace_lines, tried_trace

    lines = [""] + trace_lines(v.steps, title="verify steps tried (docs/architecture.md, \"Pipelines\"):")
    tried = (v.identifiability or {}).get("tried") if isinstance(v.identifiability, dict) else None
    if tried:
        lines += trace_lines(tried_trace(tried), title="identifiability steps tried:")
    return lines


def _is_onnx(path) -> bool:
    return path is not None and str(path).lower().endswith(".onnx")


def model_file_beside(certificate) -> str:
    """The exact model file written beside a certificate of an ONNX network: ``C.json`` -> ``C.model.json``.

    >>> model_file_beside("out/C.json"), model_file_beside("cert")
    ('out/C.model.json', 'cert.model.json')
    """
    from pathlib import Path

    p = Path(certificate)
    stem = p.name[:-5] if p.name.lower().endswith(".json") else p.name
    return str(p.with_name(stem + ".model.json"))


def _read_model_for_check(args):
    """symeq's exact reading of an ``.onnx`` MODEL as a model document (``None`` for a JSON MODEL).

    The checker reads JSON only; an ONNX file is read here by symeq's reader
    (:func:`symeq.numeric.onnx_io.load_onnx_exact`, every weight the dyadic rational it is, through
    :func:`symeq.cli.loader.load_model_args`: ``--group`` applied, the reader's notes printed), and
    written as the ``symeq-model/1`` document the checker then checks.  The budget line waits until
    the certificate is read too (bad input stays one error line).
    """
    path = str(args.model)
    if path.lower().endswith(".npz"):
        raise InputError(f"{path}: symeq check reads a model file (symeq-model/1 JSON) or an .onnx file; an .npz "
                         "file holds float weights that `symeq verify` does not read exactly, so no certificate is "
                         "about it (check certify's certificate against theta-bar: its --out, or C.model.json "
                         "beside C.json)")
    if not _is_onnx(path):
        if getattr(args, "group", None) is not None:
            raise InputError("--group goes with an .onnx MODEL (a model file carries its own group)")
        return None
    require_extra("onnx", "pip install 'symeq[onnx]'", f"reading {path}")
    from ..io import model_to_json
    from ..numeric.onnx_graph_exact import load_onnx_exact_network  # a chain, or a graph (docs/graphs.md)

    banner, args.budget_banner = getattr(args, "budget_banner", None), None  # printed by check_files' before_check
    try:
        model = load_model_args(args, read=load_onnx_exact_network, builtin=False, need_group=False,
                                graphs=True)  # --group applied
    finally:
        args.budget_banner = banner
    return model_to_json(model)


def cmd_check(args) -> int:
    """Exit 0 accepted, 1 rejected, 2 malformed or swapped files or a certificate of another model, 3 nothing verifiable."""
    from symeq_check import CheckError, check_files, graph_digest, layers_digest, read_graph_model  # the one import
    # of the checker in symeq
    from symeq_check import accel

    from ..numbers import install_check_accelerator

    doc = _read_model_for_check(args)
    try:  # the budget line comes once both files are read and in order: bad input is one error line
        install_check_accelerator(accel.install)  # python-flint's nmod_mat for the rank step, for this check only
        try:
            report = check_files(args.certificate, args.model, usage="usage: symeq check CERT MODEL",
                                 before_check=lambda: announce_budget(args), model_doc=doc)
        finally:
            accel.uninstall()
        reading = None
        if doc is not None:  # say which part is trusted: symeq's reader, then the checker
            graph = "graph" in doc  # a graph network (docs/graphs.md): its graph_sha256
            digest = graph_digest(read_graph_model(doc)) if graph else layers_digest(doc["layers"], doc["input_dim"])
            reading = {"reader": "symeq.numeric.onnx_graph_exact.load_onnx_exact_network", "file": str(args.model),
                       "graph_sha256" if graph else "layers_sha256": digest,
                       "note": f"the model was read from {args.model} by symeq's ONNX reader; the checker checked "
                               f"the certificate against that reading (digest {digest})"}
    except CheckError as e:
        raise InputError(str(e)) from None
    if args.json:
        out = {"accepted": report.accepted, "verdict": report.verdict, "mismatch": report.mismatch,
               "reasons": report.reasons, "checks": report.checks}
        if reading is not None:
            out["model_reading"] = reading
        print(json.dumps(out, indent=1))
    else:
        if reading is not None:
            print(reading["note"])
        print("\n".join(report.lines()))
    if report.mismatch:
        _progress(f"error: {args.certificate} is not a certificate of the model {args.model}: "
                  + "; ".join(report.reasons))
    return report.exit_code


def _emit_model(data: dict, out) -> int:
    """Write a model file atomically, or print it to stdout when no --out is given."""
    from ..io import write_json

    if out:
        write_json(data, out)
        _progress(f"model written to {out}")
    else:
        print(json.dumps(data, indent=1))
    return 0


def cmd_example(args) -> int:
    from ..examples import builtin_example
    from ..io import model_to_json

    data = model_to_json(builtin_example(scrambled=not args.unscrambled))
    return _emit_model(data, args.out)


def cmd_generate(args) -> int:
    from ..activations import activation_from_text
    from ..io import model_to_json
    from ..models import random_equivariant_model, scramble

    group = group_from_args(args)
    act = activation_from_text(args.activation, "--activation")
    announce_budget(args)
    latent = args.latent or ["regular"]
    model = random_equivariant_model(group, latent, act, rng=args.seed, bias=not args.no_bias)
    if args.scramble:
        model, _ = scramble(model, rng=args.seed + 1)
        model.name += " (scrambled)"
    data = model_to_json(model)
    return _emit_model(data, args.out)


def cmd_groups(args) -> int:
    from ..groups.builtins import BUILTIN_GROUPS, GROUP_ALIASES

    for desc in BUILTIN_GROUPS.values():
        print(desc)
    print("join factors with '*' for direct products, e.g. mirror:2x3*sign:1 acts on R^6 x R^1")
    print("older spellings accepted: " + ", ".join(f"{a} = {c}" for a, c in GROUP_ALIASES.items()))
    return 0


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


def register(sub) -> None:
    """Add ``verify``, ``check``, ``example``, ``generate`` and ``groups`` to an argparse subparsers object."""
    v = sub.add_parser("verify", help="verify the conclusion of Theorem 4.1 for a model")
    v.add_argument("model", nargs="?", help="model file (symeq-model/1 JSON); default: the built-in example")
    add_group_options(v)
    v.add_argument("--certificate", metavar="OUT.json", help="write the certificate here")
    v.add_argument("--json", action="store_true",
                   help="print the result as JSON on stdout (every action in full, indices from 0 as in arrays)")
    v.add_argument("--method", default="auto", choices=["auto", "grid", "symbolic", "probabilistic"],
                   help="how end-to-end equivariance is decided (default: auto)")
    v.add_argument("--timeout", type=float, default=None, help="time budget in seconds (exit 3 past it)")
    v.add_argument("--seed", type=int, default=0, help="seed of the random points (probabilistic method)")
    v.add_argument("--exact-floats", action="store_true",
                   help="read an .onnx model's float weights as the exact dyadic rationals they are (onnx extra)")
    v.add_argument("--max-tie-nodes", type=_positive_int("--max-tie-nodes"), default=100000, metavar="N",
                   help="node budget of the search among neurons that tie as multisets (default 100000; "
                        "running out is undetermined, never a refutation)")
    v.add_argument("--identifiability", action="store_true",
                   help="also decide identifiability at theta (tensor method, then fibre vs orbit by Groebner)")
    v.add_argument("--field", default="R", choices=("R", "C"),
                   help="with --identifiability: R (default) among real parameters, C among complex ones")
    v.add_argument("--no-fibre-search", action="store_true",
                   help="do not search the fibre for a layerwise-equivariant theta' when none exists at theta")
    v.add_argument("--matrix", action="store_true",
                   help="also print every action as a dense matrix (default: cycle notation only)")
    v.add_argument("--explain-steps", action="store_true",
                   help="also print every step of the pipeline tried and its outcome (--json always has them)")
    v.set_defaults(func=cmd_verify)

    c = sub.add_parser("check", help="re-verify a certificate with the independent checker",
                       description="Re-verify a certificate against its model with the standard-library checker "
                                   "(the symeq_check package; also `python -m symeq_check CERT MODEL`). Exit 0 accepted, "
                                   "1 rejected, 2 malformed input or a certificate of another model, 3 nothing "
                                   "verifiable.")
    c.add_argument("certificate", metavar="CERT", help="certificate file (symeq-certificate/2 or symeq-identifiability/1)")
    c.add_argument("model", metavar="MODEL", help="the model file the certificate is about (symeq-model/1), or "
                   "the .onnx network, read by symeq's exact ONNX reader for the checker")
    c.add_argument("--group", help="with an .onnx MODEL: a built-in group (as verify --group; see `symeq groups`)")
    c.add_argument("--group-output", type=group_output_arg, default="same",
                   help="with --group: how it acts on the output ('same' or k)")
    c.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    c.set_defaults(func=cmd_check)

    e = sub.add_parser("example", help="write the built-in example model")
    e.add_argument("--out", metavar="FILE", help="write the model here (default: print it on stdout)")
    e.add_argument("--unscrambled", action="store_true", help="the model before scrambling")
    e.set_defaults(func=cmd_example)

    g = sub.add_parser("generate", help="a random layerwise-equivariant model")
    g.add_argument("--group", required=True, metavar="SPEC",
                   help="a built-in group, e.g. mirror:2x3 or rot:3 (see `symeq groups`)")
    g.add_argument("--group-output", type=group_output_arg, default="same",
                   help="how the group acts on the output: 'same' (default) or k for the trivial action on R^k")
    g.add_argument("--activation", default="tanh_series:3", metavar="SPEC",
                   help="the hidden layers' activation: a name such as tanh (the real tanh), sigmoid, gelu, "
                        "leaky_relu:1/10, tanh_series:3 (its Taylor polynomial; old spelling tanh3), "
                        "sigmoid_series:3, monomial:2, relu or polynomial:0,1,1, or a JSON activation object "
                        "(default: %(default)s)")
    g.add_argument("--latent", action="append", metavar="REP",
                   help="per hidden layer: regular[*m] or input[*m] (repeat once per hidden layer; default: one "
                        "regular layer)")
    g.add_argument("--no-bias", action="store_true", help="a model without biases (every bias zero)")
    g.add_argument("--scramble", action="store_true",
                   help="hide the structure: permute and rescale the hidden neurons by a random element of K_i")
    g.add_argument("--seed", type=int, default=0, help="seed of the random weights (and of --scramble); default 0")
    g.add_argument("--out", metavar="FILE", help="write the model here (default: print it on stdout)")
    g.set_defaults(func=cmd_generate)

    s = sub.add_parser("groups", help="list the built-in groups")
    s.set_defaults(func=cmd_groups)
