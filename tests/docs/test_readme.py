"""The README and the reference pages it links tell the truth.

The README is a short front door: under 200 lines, its relative links (and docs/index.md's) point
at files that exist, docs/index.md lists every page of docs/, the quick start's two commands are the
ones CI runs first, the worked example prints exactly what the README shows, and the extras and the
citation match pyproject.toml and the package.  The reference material that moved to docs/ is
tested there: the Python snippet of docs/python.md runs and prints what its comments say, the
``.npz`` layout of docs/model-files.md is the one ``numeric-check`` reads, the time budgets of
docs/cli.md are the commands' defaults, and the blocks of docs/examples.md run and print what the
page says.
"""

import difflib
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
#: the pages this front door created; their links are checked too
NEW_PAGES = ("index.md", "install.md", "cli.md", "model-files.md", "python.md", "methods.md", "examples.md",
             "numeric.md", "performance.md", "limits.md")


def _read(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _blocks(text: str, lang: str) -> list[str]:
    return [m.group(2) for m in FENCE.finditer(text) if m.group(1).strip() == lang]


def _section(text: str, heading: str) -> str:
    """The text under a ``## heading`` up to the next heading of level 2 (or the end)."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert m, f"no section '## {heading}'"
    return m.group(1)


def _normalise(lines):
    """Timings vary from run to run: '(exit 0; 0.27 s)' -> '(exit 0; T s)'."""
    return [re.sub(r"\b\d+\.\d+ s\)", "T s)", line.rstrip()) for line in lines]


# ---------------------------------------------------------------- the front door itself


def test_readme_is_a_short_front_door():
    lines = README.splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines; reference material belongs in docs/"
    headings = [line for line in lines if line.startswith("## ")]
    for h in ("## Quick start", "## A worked example", "## What it decides", "## Optional engines and extras",
              "## Citing", "## License"):
        assert h in headings, h


@pytest.mark.parametrize("page", ["README.md"] + [f"docs/{p}" for p in NEW_PAGES])
def test_relative_links_point_at_existing_files(page):
    path = ROOT / page
    text = path.read_text(encoding="utf-8")
    # links inside code blocks are code, not links
    prose = FENCE.sub("", text)
    targets = [t for t in LINK.findall(prose) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert targets, f"{page} links to nothing"
    missing = [t for t in targets if not (path.parent / t.split("#", 1)[0]).exists()]
    assert not missing, f"{page}: links to missing files {missing}"


def test_docs_index_lists_every_page():
    index = _read("index.md")
    linked = {t.split("#", 1)[0] for t in LINK.findall(index)}
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert pages <= linked, f"docs/index.md does not list {sorted(pages - linked)}"
    assert "docs/index.md" in README


def test_license_is_mit_as_pyproject_says():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "Copyright (c) 2026 the symeq authors" in text
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'license = "MIT"' in pyproject and 'license-files = ["LICENSE"]' in pyproject  # PEP 639
    assert "MIT" in _section(README, "License")


def test_quick_start_commands_are_what_ci_runs_first():
    bash = _blocks(README, "bash")[0].strip().splitlines()
    assert bash == ["pip install . && symeq verify", "pip install '.[test]' && python -m pytest"]
    ci = (ROOT / ".ci" / "run").read_text()
    first = [ci.index(line) for line in bash]
    assert first == sorted(first)
    # before any engine or extra is installed
    assert all(i < ci.index("passagemath") for i in first)


def test_worked_example_prints_what_the_readme_shows(tmp_path, monkeypatch, capsys):
    """The README's model file, saved as tanh.json, and its two commands: each exits 0 and prints,
    line for line, what the README shows (timings aside)."""
    from symeq.cli import main

    text = _section(README, "A worked example")
    [model] = _blocks(text, "json")
    [console] = _blocks(text, "console")
    monkeypatch.chdir(tmp_path)
    Path("tanh.json").write_text(model)
    runs = re.split(r"^\$ ", console, flags=re.MULTILINE)[1:]
    assert len(runs) == 2
    for run in runs:
        command, *shown = run.rstrip("\n").split("\n")
        argv = shlex.split(command)
        assert argv[0] == "symeq"
        code = main(argv[1:])
        out = capsys.readouterr().out
        assert code == 0, (command, out)
        real, said = _normalise(out.rstrip("\n").split("\n")), _normalise(shown)
        assert real == said, (f"README.md's worked example: `{command}` prints something else now; paste its real "
                              "output into the README:\n" + "\n".join(difflib.unified_diff(said, real, "README", "real",
                                                                                      lineterm="")))
    assert "(-1)(2 3)" in text and "Both exit 0" in text


def test_worked_example_changed_weight_is_refuted_as_the_readme_says(tmp_path, capsys):
    import json

    from symeq.cli import main

    text = _section(README, "A worked example")
    data = json.loads(_blocks(text, "json")[0])
    assert data["layers"][1]["weight"][-1][-1] == "1" and 'changed to `"3/2"`' in text
    data["layers"][1]["weight"][-1][-1] = "3/2"
    path, cert = tmp_path / "bad.json", tmp_path / "c.json"
    path.write_text(json.dumps(data))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 1
    capsys.readouterr()
    assert json.loads(cert.read_text())["equivariance"]["witness"]["kind"] == "arb"
    assert main(["check", str(cert), str(path)]) == 0
    assert "result: accepted" in capsys.readouterr().out


def test_extras_table_matches_pyproject():
    import tomllib

    from conftest import ENGINES_INSTALL

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    table = _section(README, "Optional engines and extras")
    shown = set(re.findall(r"pip install '\.\[(\w+)\]'", table))
    assert shown == set(extras), (shown, set(extras))
    assert ENGINES_INSTALL in table
    # each extra's row names what it brings: its packages
    for name, reqs in extras.items():
        row = next(line for line in table.splitlines() if f"'.[{name}]'" in line)
        for req in reqs:
            pkg = re.match(r"[A-Za-z0-9_-]+", req).group(0).split("[")[0].lower()
            assert pkg.replace("-", "") in row.lower().replace("-", "").replace(".", ""), (name, pkg)


def test_citation_names_the_paper_and_this_version():
    import symeq

    cite = _section(README, "Citing")
    assert "arXiv:2601.21645" in cite and "Identifiable Equivariant Networks are Layerwise Equivariant" in cite
    for name in ("Shahverdi", "Marchetti", 'B{\\"o}kman', "Kohn"):
        assert name in cite, name
    assert f"version = {{{symeq.__version__}}}" in cite


def test_what_it_decides_names_real_commands(capsys):
    from symeq.cli import main

    table = _section(README, "What it decides")
    named = set(re.findall(r"^\| `symeq ([\w-]+)`", table, re.MULTILINE))
    named |= set(re.findall(r"`symeq [\w-]+`, `([\w-]+)`", table))
    assert len(named) >= 6, named
    for command in sorted(named):  # a command that exists answers --help with exit 0
        with pytest.raises(SystemExit) as e:
            main([command, "--help"])
        assert e.value.code == 0, command


# ---------------------------------------------------------------- reference pages (moved from the README)


def _snippet() -> str:
    blocks = [b for b in _blocks(_read("python.md"), "python") if "symeq.verify(" in b]
    assert len(blocks) == 1, "expected one Python snippet calling symeq.verify in docs/python.md"
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
    """The call the snippet's comment shows works as shown: its keyword options are accepted, and
    what comes back is the class it names."""
    import symeq
    import symeq_check

    m = re.search(r"#\s*check_certificate\((.*)\)\s*->\s*(\w+)", _snippet())
    assert m, "the snippet shows check_certificate's signature in a comment"
    shown, returned = m.group(1), m.group(2)
    assert shown.startswith("cert: dict, model: dict")
    options = dict(re.findall(r"(\w+)=(\w+)", shown))
    assert options, shown
    model = symeq.random_equivariant_model(symeq.mirror(1, 2), ["regular"], symeq.tanh_series(3), rng=0)
    v = symeq.verify(model)
    report = symeq_check.check_certificate(v.certificate(), symeq.model_to_json(v.model),
                                     **{k: int(x) for k, x in options.items()})
    assert type(report).__name__ == returned and report.accepted
    with pytest.raises(TypeError):
        symeq_check.check_certificate(v.certificate(), symeq.model_to_json(v.model), no_such_option=1)


def test_npz_layout_as_documented(tmp_path, capsys):
    """The layout docs/model-files.md describes loads, and a documented field missing is refused (exit 2)."""
    from symeq.cli import main
    from symeq.numeric.models import load_npz

    text = _section(_read("model-files.md"), "NumPy archives (`.npz`)")
    assert "weight_0, bias_0, weight_1, bias_1" in text and "group_input_k" in text
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


def test_cli_page_states_the_default_budgets():
    from symeq.budget import DEFAULT_BUDGETS

    text = _section(_read("cli.md"), "Budgets, limits and exit codes").replace("\n  ", " ")
    m = re.search(r"\*\*Time budgets\.\*\*(.*?)change it with", text, re.DOTALL)
    assert m
    stated = {}
    for names, secs in re.findall(r"((?:`[\w-]+`,? ?)+) (\d+) s", m.group(1)):
        for name in re.findall(r"`([\w-]+)`", names):
            stated[name] = float(secs)
    assert stated == DEFAULT_BUDGETS


def test_examples_identifiability_block_runs_as_written(tmp_path, monkeypatch, capsys):
    """docs/examples.md, "Identifiability at real widths": every command exits 0, the fibres are the
    orbits the comments state, and the checker accepts both certificates."""
    import math

    from symeq.cli import main

    [block] = _blocks(_section(_read("examples.md"), "Identifiability at real widths"), "bash")
    monkeypatch.chdir(tmp_path)
    outputs = []
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        for command in filter(None, (c.strip() for c in line.split("&&"))):
            argv = shlex.split(command)
            assert argv[0] == "symeq"
            assert main(argv[1:]) == 0, command
            outputs.append((argv[1], capsys.readouterr().out))
    assert [c for c, _ in outputs] == ["generate", "fibre", "check", "generate", "fibre", "check"]
    orbit = math.factorial(16) * 2 ** 16
    assert "16!·2^16" in block and "(16!·2^16)^2" in block
    assert f"orbit size: {orbit}\n" in outputs[1][1] and f"orbit size: {orbit ** 2}\n" in outputs[4][1]
    assert "Kruskal" in outputs[1][1] and "jacobian-factors: identifiable" in outputs[4][1]
    assert all("result: accepted" in out for c, out in outputs if c == "check")


def test_examples_hunt_report_is_the_real_output(tmp_path, monkeypatch, capsys):
    """docs/examples.md, "Hunting ReLU counterexamples": the two commands, run as written, print the
    catalogue the page shows, line for line."""
    from symeq.cli import main

    text = _section(_read("examples.md"), "Hunting ReLU counterexamples")
    [commands] = _blocks(text, "bash")
    [shown] = _blocks(text, "text")
    monkeypatch.chdir(tmp_path)
    out = ""
    for line in commands.splitlines():
        argv = shlex.split(line.split("#", 1)[0])
        assert argv[:2] == ["symeq", "hunt"]
        assert main(argv[1:]) == 0, line
        out = capsys.readouterr().out
    real, said = out.rstrip("\n").split("\n"), shown.rstrip("\n").split("\n")
    assert real == said, ("docs/examples.md's hunt catalogue differs from the real output; paste it into the page:\n"
                          + "\n".join(difflib.unified_diff(said, real, "docs/examples.md", "real", lineterm="")))
    assert Path("deep-find.svg").is_file()
