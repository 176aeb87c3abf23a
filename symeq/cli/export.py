"""``symeq export MODEL --onnx OUT.onnx [--float32]``: a model for torch (and every ONNX runtime).

MODEL is a symeq model file (exact rationals, or floats), ``.npz`` or ``.onnx``; dense layers are
written as ``Gemm`` nodes with float64 weights (``--float32``: float32), the activations as ONNX
operators (GELU as the erf pattern, polynomials by Horner's rule): :func:`symeq.numeric.onnx_io.export_onnx`;
a graph model (docs/graphs.md) with its additions and concatenations as ``Add`` and ``Concat`` nodes and
convolutions as ``Conv``: :func:`symeq.numeric.onnx_write_graph.export_graph_onnx`.
Exact weights are rounded to the nearest float (float64 or float32).
"""

from __future__ import annotations

import sys

from ..errors import InputError

__all__ = ["register", "cmd_export"]


def cmd_export(args) -> int:
    from ..numeric.onnx_graph_exact import load_float_network_or_graph
    from ..numeric.onnx_io import export_onnx
    from .loader import load_model_args

    if not args.onnx:
        raise InputError("say where to write: --onnx OUT.onnx")
    model = None
    if str(args.model).lower().endswith(".json"):
        try:  # exact rationals
            model = load_model_args(args, builtin=False, need_group=False, graphs=True)
        except InputError:
            model = None
    if model is None:  # floats allowed (.json, .npz, .onnx)
        model = load_model_args(args, read=load_float_network_or_graph, builtin=False, need_group=False,
                                graphs=True)
    if callable(getattr(model, "hidden_spaces", None)):  # a graph model (docs/graphs.md): Add and Concat nodes
        from ..numeric.onnx_write_graph import export_graph_onnx

        export_graph_onnx(model, args.onnx, float32=args.float32)
        sizes = f"graph of {len(model.nodes)} nodes, {model.input_dim} -> {model.output_dim}"
    else:
        export_onnx(model, args.onnx, float32=args.float32)
        sizes = f"widths {model.widths}"
    print(f"{args.onnx}: ONNX written ({'float32' if args.float32 else 'float64'} weights, {sizes})", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    """Add ``export`` to a ``parser.add_subparsers()`` object."""
    e = subparsers.add_parser("export", help="write a model as ONNX (for torch and other runtimes; onnx extra)")
    e.add_argument("model", help="a symeq model file (.json), .npz or .onnx")
    e.add_argument("--onnx", metavar="OUT.onnx", help="the ONNX file to write")
    e.add_argument("--float32", action="store_true", help="float32 weights (default float64)")
    e.set_defaults(func=cmd_export)
