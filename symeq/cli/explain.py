"""``symeq explain [MODEL.json] [--out DIR] [--group SPEC]``: the step-by-step report on the command line.

The report itself is :func:`symeq.explain.explain`; this module reads the model
(:func:`symeq.cli.loader.load_model_args`), verifies it and says where the files went.
:func:`register` adds the command to an ``argparse`` sub-parser collection (wired in :mod:`symeq.cli`).
"""

from __future__ import annotations

import sys

from .loader import add_group_options, has_extra, load_model_args

__all__ = ["register", "cmd_explain"]


def cmd_explain(args) -> int:
    """``symeq explain``: exit code of the verdict (0, 1 or 3), like ``symeq verify``."""
    from ..explain import explain
    from ..theorem import verify

    model = load_model_args(args)
    print(f"explaining {model.name}: widths {model.widths}, group {model.group.label}", file=sys.stderr)
    has_plot = has_extra("matplotlib")
    if not has_plot:  # said before the work, not after it: the report is written without a picture
        print("no picture: matplotlib is needed for pictures: pip install 'symeq[plot]' (the report is "
              "written without one)", file=sys.stderr)
    v = verify(model, timeout=args.timeout)
    paths = explain(model, out_dir=args.out, verification=v, matrix=args.matrix)
    if "png" not in paths and has_plot:
        print("no picture: matplotlib is needed for pictures: pip install 'symeq[plot]'", file=sys.stderr)
    for key in ("html", "markdown", "png", "svg", "certificate", "model"):
        if key in paths:
            print(f"{key}: {paths[key]}")
    print(f"verdict: {v.verdict}", file=sys.stderr)
    return v.exit_code


def register(subparsers) -> None:
    """Add ``symeq explain [MODEL.json] [--out DIR] [--group SPEC]`` to an argparse subparsers object."""
    p = subparsers.add_parser("explain", help="a step-by-step report (Markdown, HTML with math, picture)",
                              description="Verify a model and write a step-by-step report of the pipeline: "
                                          "report.md, a self-contained report.html, network.png/.svg, "
                                          "certificate.json and model.json.")
    p.add_argument("model", nargs="?", help="model file (symeq-model/1 JSON); default: the built-in example")
    p.add_argument("--out", default="symeq-explain", metavar="DIR",
                   help="output folder (default: ./symeq-explain)")
    add_group_options(p)
    p.add_argument("--timeout", type=float, default=None, help="time budget in seconds (exit 3 past it)")
    p.add_argument("--matrix", action="store_true",
                   help="also write every action as a matrix (default: cycle notation only)")
    p.set_defaults(func=cmd_explain)
