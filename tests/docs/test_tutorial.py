"""Every ```python block of docs/tutorial.md runs, in order, in one namespace, so the tutorial
never goes stale; the blocks state their outputs with ``assert``."""

import re
import traceback
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, source) of each ```python block, in order."""
    return [(text.count("\n", 0, m.start(2)) + 1, m.group(2))
            for m in FENCE.finditer(text) if m.group(1).strip() == "python"]


def test_fences_are_python_or_plain():
    """A typo such as ```py would silently drop a block from the run below."""
    langs = {m.group(1).strip() for m in FENCE.finditer(TUTORIAL.read_text(encoding="utf-8"))}
    assert langs <= {"python", "", "console", "text", "json"}, langs


def test_tutorial_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks that write files write them here
    blocks = python_blocks(TUTORIAL.read_text(encoding="utf-8"))
    assert len(blocks) >= 10
    namespace = {"__name__": "tutorial"}
    for n, (line, source) in enumerate(blocks, 1):
        # padded so that tracebacks point at (and quote) the right line of the tutorial itself
        code = compile("\n" * (line - 1) + source, str(TUTORIAL), "exec")
        try:
            exec(code, namespace)
        except Exception:
            pytest.fail(f"docs/tutorial.md python block {n} (line {line}) failed:\n{traceback.format_exc()}",
                        pytrace=False)
