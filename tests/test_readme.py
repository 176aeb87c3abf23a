"""The README tells the truth: its Python snippet runs as a script and prints what its comments
say, the signature it shows is the real one, the quick start's commands are the ones CI runs
first, and the ``.npz`` layout it documents is the one ``numeric-check`` reads."""

import inspect
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def _blocks(lang):
    return [m.group(2) for m in FENCE.finditer(README) if m.group(1).strip() == lang]


def _snippet() -> str:
    blocks = [b for b in _blocks("python") if "symeq.verify(" in b]
    assert len(blocks) == 1, "expected one Python snippet calling symeq.verify in README.md"
    return blocks[0]


def test_python_snippet_prints_what_its_comments_say(tmp_path):
    code = _snippet()
    script = tmp_path / "snippet.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.splitlines()
    # each print(...) line with a trailing comment that states a literal output: that line is printed
    expected = [m.group(1).strip() for m in re.finditer(r"^print\(.*\)\s+#\s*(.+)$", code, re.MULTILINE)]
    literal = [e for e in expected if re.fullmatch(r"[\w\- ]+", e)]
    assert literal, "the snippet states no output in its comments"
    for e in literal:
        assert e in out, (e, out)
    # the action printed is a 4 x 4 signed permutation matrix (the comment says so)
    rows = [line for line in out if line.startswith("[")]
    assert len(rows) == 4
    entries = [[int(x) for x in row.strip("[] ").split(",")] for row in rows]
    assert all(sorted(abs(x) for x in row) == [0, 0, 0, 1] for row in entries)
    assert sorted(abs(r[j]) for r in entries for j in range(4) if r[j]) == [1, 1, 1, 1]


def test_check_certificate_signature_shown_is_real():
    import symeq

    m = re.search(r"#\s*check_certificate(\(.*\))\s*->\s*(\w+)", _snippet())
    assert m, "the snippet shows check_certificate's signature in a comment"
    sig = inspect.signature(symeq.check.check_certificate if hasattr(symeq, "check") else symeq.check_certificate)
    shown = m.group(1)
    for name in ("cert", "model"):
        assert name in sig.parameters and name in shown
    # the shown keyword-only options exist on the function that does the work
    from symeq.check import _check_action_certificate

    real = inspect.signature(_check_action_certificate)
    for kw in re.findall(r"(\w+)=", shown):
        assert kw in real.parameters, kw
    assert m.group(2) == real.return_annotation or m.group(2) in str(real.return_annotation)


def test_quick_start_commands_are_what_ci_runs_first():
    bash = _blocks("bash")[0].strip().splitlines()
    assert bash == ["pip install . && symeq verify", "pip install '.[test]' && python -m pytest"]
    ci = (ROOT / ".ci" / "run").read_text()
    first = [ci.index(line) for line in bash]
    assert first == sorted(first)
    # before any engine or extra is installed
    assert all(i < ci.index("passagemath") for i in first)


def test_npz_layout_as_documented(tmp_path, capsys):
    """The layout the README describes loads, and a documented field missing is refused (exit 2)."""
    from symeq.cli import main
    from symeq.numeric.models import load_npz

    assert "weight_0, bias_0, weight_1, bias_1" in README and "group_input_k" in README
    rng = np.random.default_rng(0)
    W1 = rng.normal(size=(4, 2))
    W2 = rng.normal(size=(1, 4))
    swap = np.array([[0.0, 1.0], [1.0, 0.0]])
    path = tmp_path / "m.npz"
    np.savez(path, weight_0=W1, bias_0=np.zeros(4), weight_1=W2, bias_1=np.zeros(1),
             activations=np.array(['{"type": "tanh_series", "order": 3}', "none"]),
             group_input_0=swap, group_output_0=np.eye(1))
    m = load_npz(path)
    assert [l.weight.shape for l in m.layers] == [(4, 2), (1, 4)] and m.group is not None
    bad = tmp_path / "bad.npz"
    np.savez(bad, weight_0=W1)  # no "activations"
    assert main(["numeric-check", str(bad)]) == 2
    assert "activations" in capsys.readouterr().err
