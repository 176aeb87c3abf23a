"""Helpers shared by the numeric benchmarks: a Markdown table and the results files."""

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


def write_results(out, stem: str, text: str, payload: dict) -> None:
    """``OUT/stem.md`` (the text) and ``OUT/stem.json`` (payload plus machine and versions)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text(text + "\n")
    meta = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "date": time.strftime("%Y-%m-%d")}
    (out / f"{stem}.json").write_text(json.dumps(dict(payload, meta=meta), indent=1, default=float) + "\n")
