"""Every skip in the suite says how to install what it misses.

The test reads every file under tests/ (AST, nothing is imported or run) and finds each
``pytest.importorskip``, ``pytest.skip``, ``pytest.mark.skip`` and ``pytest.mark.skipif``.  Its
reason must carry an install line (``pip install ...``, or ``apt-get install ...`` for a system
package), either written out or through one of the install helpers below, whose lines are checked
here too.  Skips that are not about a missing package (a platform, or a computation that did not
finish in its budget) are listed in :data:`NOT_AN_EXTRA`, each with why.
"""

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
INSTALL_WORDS = ("pip install", "apt-get install")

#: names whose value is an install line, allowed in a reason; each is checked by a test below
INSTALL_HELPERS = ("install_command", "engine_skip_reason", "MSOLVE_INSTALL", "MACAULAY2_INSTALL",
                   "ENGINES_INSTALL")

#: (file, start of the reason's source) of the skips that no package installs, and why
NOT_AN_EXTRA = {
    ("test_architecture.py", '"needs Python 3.10+'): "a Python version, not a package",
    ("test_limits.py", '"needs RLIMIT_AS'): "a Linux kernel facility",
    ("test_processes.py", '"needs Linux /proc'): "a Linux kernel facility",
    ("test_fibre_deep.py", 'f"Gröbner bases did not finish'): "an engine that ran out of its budget here",
    ("test_fibre_deep.py", 'f"Gröbner gave no degree'): "an engine that ran out of its budget here",
    ("conftest.py", "cache[key]"): "the line of engine_skip_reason (checked below)",
    ("test_kind_units.py", 'f"{kind} layers'): "a layer kind without a capability (skipped with symeq's refusal)",
    ("test_activation_units.py", 'f"{name} has no'): "an activation without a torch module or ONNX form",
    ("test_backends.py", 'f"{kind} layers'): "a layer kind without a polynomial Jacobian program",
    # not an extra but a module of symeq itself still being written: remove when it is committed
}


def _is_pytest_attr(node, *names) -> bool:
    """``pytest.<a>.<b>...`` with the given attribute chain."""
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    return isinstance(node, ast.Name) and node.id == "pytest" and tuple(reversed(chain)) == names


def skip_calls(path: Path):
    """Yield (line, kind, reason node or None) for every skip call in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        if _is_pytest_attr(node.func, "importorskip"):
            yield node.lineno, "importorskip", kw.get("reason")
        elif _is_pytest_attr(node.func, "skip") or _is_pytest_attr(node.func, "mark", "skip"):
            yield node.lineno, "skip", kw.get("reason", node.args[0] if node.args else None)
        elif _is_pytest_attr(node.func, "mark", "skipif"):
            yield node.lineno, "skipif", kw.get("reason")


def problems(path: Path) -> list[str]:
    """The skips of one file whose reason gives no install line (and is not listed as no extra)."""
    text = path.read_text(encoding="utf-8")
    out = []
    for line, kind, reason in skip_calls(path):
        if reason is None:
            out.append(f"{path.name}:{line}: {kind} without a reason")
            continue
        src = ast.get_source_segment(text, reason) or ""
        if any(w in src for w in INSTALL_WORDS) or any(h in src for h in INSTALL_HELPERS):
            continue
        if any(path.name == f and src.startswith(start) for f, start in NOT_AN_EXTRA):
            continue
        out.append(f"{path.name}:{line}: {kind} reason {src[:80]} gives no install line")
    return out


def _test_files():
    return sorted(TESTS.rglob("*.py"))  # the subject folders (tests/kinds, tests/activations) too


def test_the_scan_finds_skips():
    """The scan sees the suite's skips (torch, matplotlib, the engines) at all."""
    found = [(p.name, kind) for p in _test_files() for _, kind, _ in skip_calls(p)]
    assert sum(kind == "importorskip" for _, kind in found) >= 5
    assert sum(kind == "skipif" for _, kind in found) >= 5


@pytest.mark.parametrize("path", _test_files(), ids=lambda p: p.name)
def test_every_skip_reason_has_its_install_line(path):
    assert not problems(path), "\n".join(problems(path))


def test_a_skip_without_an_install_line_is_caught(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text('import pytest\n'
                   'torch = pytest.importorskip("torch")\n'
                   'ok = pytest.importorskip("torch", reason="pip install torch")\n'
                   '@pytest.mark.skipif(True, reason="needs msolve")\n'
                   'def test_x():\n    pytest.skip("no engine")\n')
    found = problems(bad)
    assert len(found) == 3 and "without a reason" in found[0]


def test_every_listed_exception_still_exists():
    """An exception that no longer matches a skip is stale: remove it from NOT_AN_EXTRA."""
    seen = set()
    for path in _test_files():
        text = path.read_text(encoding="utf-8")
        for _, _, reason in skip_calls(path):
            src = ast.get_source_segment(text, reason) or "" if reason is not None else ""
            seen |= {(f, s) for f, s in NOT_AN_EXTRA if path.name == f and src.startswith(s)}
    assert seen == set(NOT_AN_EXTRA)


def test_the_install_helpers_give_install_lines():
    from conftest import ENGINES_INSTALL, FAST_ENGINES, engine_skip_reason

    from symeq.fibre.groebner import ENGINES, install_command
    from symeq.fibre.groebner.msolve import MSOLVE_INSTALL

    assert ENGINES_INSTALL.startswith("pip install") and MSOLVE_INSTALL.startswith("pip install")
    for name in ENGINES:
        assert any(w in install_command(name) for w in INSTALL_WORDS), name
    for engines in [(), *[(e,) for e in FAST_ENGINES]]:
        reason = engine_skip_reason(*engines)
        assert reason is None or "pip install --no-deps passagemath-" in reason
