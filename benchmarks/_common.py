"""Helpers shared by every benchmark: one Markdown table writer, one results writer, one metadata block.

Each benchmark writes ``OUT/<stem>.md`` (what it prints) and ``OUT/<stem>.json`` (its numbers plus
:func:`metadata`: machine, CPUs, load, date and the versions of python, numpy, python-flint, sympy and
symeq), so that results from different runs and machines can be compared."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np


def markdown_table(rows: list[dict], cols: list[str], fmt=None) -> list[str]:
    """One Markdown table, a line per row; ``fmt`` formats a cell (default: floats to 3 digits)."""
    fmt = fmt or (lambda v: f"{v:.3g}" if isinstance(v, float) else str(v))
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + \
        ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in rows]


def metadata() -> dict:
    """The machine and the versions a result was measured with (the same block in every results file)."""
    from importlib.metadata import PackageNotFoundError, version

    def ver(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {"machine": platform.machine(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "loadavg": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
            "python": platform.python_version(), "numpy": np.__version__, "python-flint": ver("python-flint"),
            "sympy": ver("sympy"), "symeq": ver("symeq"), "date": time.strftime("%Y-%m-%d %H:%M")}


def write_results(out, stem: str, text: str, payload: dict) -> None:
    """``OUT/stem.md`` (the text) and ``OUT/stem.json`` (payload plus :func:`metadata` under "meta")."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text(text.rstrip("\n") + "\n")
    (out / f"{stem}.json").write_text(json.dumps(dict(payload, meta=metadata()), indent=1, default=float) + "\n")
