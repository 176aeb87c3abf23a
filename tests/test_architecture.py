"""The package's levels (docs/architecture.md): every import of a symeq module, function-local ones
included, points to the same level or a lower one; the certificate checker imports only the
standard library and nothing of symeq, and symeq imports it only in its check command; docstrings cite
files inside the repository."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "symeq"

# lowest first; a module belongs to the longest prefix that names it
LEVELS = [
    ["symeq.errors", "symeq.version", "symeq.numbers", "symeq.budget", "symeq.sizes", "symeq.procs", "symeq.unionfind",
     "symeq.cliargs", "symeq.notation", "symeq.schema", "symeq.canonical", "symeq.steps", "symeq.backends"],
    ["symeq.groups"],
    ["symeq.activations", "symeq.layers", "symeq.layers.base", "symeq.layers.dense"],
    ["symeq.models", "symeq.io", "symeq.examples", "symeq.expand", "symeq.graph", "symeq.digest"],
    ["symeq.layerwise", "symeq.walk", "symeq.submodels", "symeq.attention", "symeq.graph.derive"],
    ["symeq.equivariance", "symeq.fibre", "symeq.fibre.deep", "symeq.relu", "symeq.numeric",
     "symeq.layers.dense.floating", "symeq.layers.conv.floating", "symeq.layers.attention.floating",
     "symeq.layers.attention.onnx", "symeq.layers.attention.torch_modules",
     "symeq.layers.pooling.floating"],
    ["symeq.theorem", "symeq.certification", "symeq.certify_attention", "symeq.certify_graph",
     "symeq.graph.verify"],
    ["symeq.explain", "symeq.display"],
    ["symeq.cli", "symeq.__main__", "symeq.check", "symeq"],
]


def level(module: str) -> int | None:
    best = None
    for lv, prefixes in enumerate(LEVELS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (lv, len(p))
    return None if best is None else best[0]


def modules():
    for path in sorted(PKG.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        yield path, name


def imports(path: Path, name: str):
    """(line, target module) for every import of a symeq module in the file, function-local included."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.ImportFrom) and node.level:
            parts = pkg.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            targets = [base] if node.module else [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "symeq":
            targets = [node.module]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.split(".")[0] == "symeq"]
        else:
            continue
        for t in targets:
            yield node.lineno, t


def test_every_module_has_a_level():
    missing = [name for _, name in modules() if level(name) is None]
    assert not missing, f"modules without a level in docs/architecture.md: {missing}"


def test_imports_point_down():
    bad = []
    for path, name in modules():
        here = level(name)
        for line, target in imports(path, name):
            there = level(target)
            if there is None:
                bad.append(f"{path.relative_to(ROOT)}:{line}: unknown module {target}")
            elif there > here:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {name} (level {here}) imports {target} (level {there})")
    assert not bad, "imports that point up:\n" + "\n".join(bad)


CHECKER = ROOT / "symeq_check"
#: the one place of symeq that imports the checker: the ``symeq check`` command (and the alias
#: ``python -m symeq.check``, whose import runs only as a script)
CHECK_COMMAND = {"symeq/cli/verify.py", "symeq/check.py"}


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> ast.Module:
    """The syntax tree of one file, parsed once for all the tests here (they only read it)."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@functools.lru_cache(maxsize=None)
def _top_imports(path: Path) -> tuple:
    """(line, top-level module, in a function or under ``if __name__``) of every absolute import."""
    tree = _parse(path)
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.If)) and id(node) not in guarded:
            guarded |= {id(n) for n in ast.walk(node) if n is not node}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out.append((node.lineno, a.name.split(".")[0], id(node) in guarded))
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            out.append((node.lineno, (node.module or "").split(".")[0], id(node) in guarded))
    return tuple(out)


def test_checker_imports_only_the_standard_library():
    """symeq_check (every module, function-local imports included) imports the standard library and
    itself (relative imports), nothing else: no symeq, no flint, sympy or numpy."""
    if not hasattr(sys, "stdlib_module_names"):
        pytest.skip("needs Python 3.10+ to know the standard library's names")
    files = sorted(CHECKER.rglob("*.py"))
    assert len(files) > 10, "the checker package was not found"
    # the optional accelerator is a hook (symeq_check/accel.py): `symeq check` installs python-flint's rank
    bad = [f"{path.relative_to(ROOT)}:{line}: imports {mod}" for path in files for line, mod, guarded in _top_imports(path)
           if mod != "__future__" and mod not in sys.stdlib_module_names]
    assert not bad, "the checker imports outside the standard library:\n" + "\n".join(bad)


def test_only_the_check_command_imports_the_checker():
    """Library code never reads the checker (its axioms, tables or digest): symeq keeps its own copies."""
    bad = []
    for path, _ in modules():
        rel = path.relative_to(ROOT).as_posix()
        for line, mod, guarded in _top_imports(path):
            if mod != "symeq_check":
                continue
            if rel not in CHECK_COMMAND or (rel == "symeq/check.py" and not guarded):
                bad.append(f"{rel}:{line}")
    assert not bad, "symeq modules importing symeq_check outside the check command: " + ", ".join(bad)
    found = {path.relative_to(ROOT).as_posix() for path, _ in modules()
             if any(mod == "symeq_check" for _, mod, _ in _top_imports(path))}
    assert found == CHECK_COMMAND, found  # the test reads the files it means


def test_checker_has_no_import_cycles():
    """Inside symeq_check, each module imports only modules below it (its docstring's map, lowest first)."""
    import networkx as nx

    graph = nx.DiGraph()
    for path in CHECKER.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        graph.add_node(name)
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + ([node.module] if node.module else []))
                for target in [base] + [f"{base}.{a.name}" for a in node.names]:
                    if (CHECKER.parent / (target.replace(".", "/") + ".py")).exists() and target != name \
                            and not target.startswith(name + "."):
                        graph.add_edge(name, target)
    assert graph.number_of_edges() > 20, "the test is not reading the checker's imports"
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"import cycles in the checker: {cycles}"


def test_the_layerwise_kernel_stays_small_enough_to_audit():
    """The modules a layerwise-equivariant verdict rests on (symeq_check.KERNEL, docs/certificates.md): under
    3 500 lines in all (graph models, pooling and average pooling included), and none of them imports an identifiability module."""
    import symeq_check

    files = [CHECKER / f"{m}.py" for m in symeq_check.KERNEL]
    assert sum(len(f.read_text().splitlines()) for f in files) <= 3500
    for f in files:
        if f.name == "dispatch.py":  # the table names every checker
            continue
        assert "identifiability" not in {(n.module or "").split(".")[0] for n in ast.walk(_parse(f))
                                         if isinstance(n, ast.ImportFrom)}, f.name


def test_checker_modules_stay_small():
    """No module of the checker over 900 lines (docs/architecture.md: read in a sitting per subject)."""
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in CHECKER.rglob("*.py")}
    assert sizes and max(sizes.values()) <= 900, {k: v for k, v in sizes.items() if v > 900}


def test_docstrings_cite_files_inside_the_repository():
    outside = ("DESIGN.md", "LITERATURE.md", "STYLE.md", "../shared")
    bad = [f"{path.relative_to(ROOT)}:{i}" for path, _ in modules()
           for i, line in enumerate(path.read_text().splitlines(), 1) if any(o in line for o in outside)]
    assert not bad, f"references to files outside the repository: {bad}"


def test_no_import_cycles():
    """No cycle among modules, not even within one level (function-local imports counted)."""
    import networkx as nx

    graph = nx.DiGraph()
    names = {name for _, name in modules()}
    for path, name in modules():
        graph.add_node(name)
        for _, target in imports(path, name):
            while target and target not in names:
                target = target.rsplit(".", 1)[0] if "." in target else ""
            # a package's __init__ re-exporting its submodules is not a cycle of ideas
            if target and target != name and not name.startswith(target + "."):
                graph.add_edge(name, target)
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


#: builtins that run text as code, and sympy's text parsers (as plain names or as sympy.X)
_NO_CODE_FROM_TEXT = {"eval", "exec", "compile", "__import__", "sympify", "parse_expr"}
_SYMPY_PARSERS = {"sympify", "parse_expr", "S"}
#: the modules that import modules by name, each from a table of its own (never from a file or argument)
_IMPORT_BY_NAME = {"symeq/__init__.py", "symeq/layers/registry.py", "symeq/fibre/groebner/__init__.py"}


def test_no_text_from_a_file_or_argument_reaches_eval_exec_or_sympify():
    """No module of symeq or of the checker calls eval, exec, compile, __import__, sympify,
    parse_expr or sympy.S (each would run or parse user text as code); np.load never allows pickles;
    modules are imported by name only from the three internal tables."""
    root = Path(__file__).resolve().parent.parent
    problems = []
    for path in sorted([*(root / "symeq").rglob("*.py"), *(root / "symeq_check").rglob("*.py")]):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(_parse(path)):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if isinstance(f, ast.Name) and name in _NO_CODE_FROM_TEXT or \
                    isinstance(f, ast.Attribute) and name in _SYMPY_PARSERS:
                problems.append(f"{rel}:{node.lineno}: {name}(...)")
            if name == "import_module" and rel not in _IMPORT_BY_NAME:
                problems.append(f"{rel}:{node.lineno}: import_module(...) outside the registries")
            if name == "load" and any(k.arg == "allow_pickle" and not (isinstance(k.value, ast.Constant)
                                                                       and k.value.value is False)
                                      for k in node.keywords):
                problems.append(f"{rel}:{node.lineno}: load(allow_pickle=...)")
    assert not problems, "\n".join(problems)


#: functions allowed over MAX_FUNCTION_LINES for now, each with who splits it (issue 26); keep it honest:
#: a function that is split comes off the list (the test fails on a stale entry)
LONG_FUNCTIONS_BEING_SPLIT: set = set()  # none left (the checker's four were split on 2026-12-06)
MAX_FUNCTION_LINES = 100


def _long_functions() -> dict[str, int]:
    out = {}
    for pkg in (PKG, ROOT / "symeq_check"):
        for path in sorted(pkg.rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for node in ast.walk(_parse(path)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = node.end_lineno - node.lineno + 1  # decorators aside, docstring and body included
                    if n > MAX_FUNCTION_LINES:
                        out[f"{rel}:{node.name}"] = n
    return out


def test_no_function_is_over_100_lines():
    """No function of symeq or of the checker is over MAX_FUNCTION_LINES lines, but the short allow-list of
    those being split; an allow-listed function that is now short must leave the list."""
    long = _long_functions()
    assert len(list(PKG.rglob("*.py"))) > 50, "the test is not reading the package"
    bad = sorted(f"{k} ({n} lines)" for k, n in long.items() if k not in LONG_FUNCTIONS_BEING_SPLIT)
    assert not bad, f"functions over {MAX_FUNCTION_LINES} lines (split them):\n" + "\n".join(bad)
    stale = sorted(LONG_FUNCTIONS_BEING_SPLIT - set(long))
    assert not stale, "allow-listed functions that are short now (take them off the list): " + ", ".join(stale)


def test_the_docs_name_every_module():
    """docs/architecture.md names every module of symeq (in backticks: `walk`, `graph/derive`, `result.py`), so
    its level table and descriptions follow the package as modules are added."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    quoted = " ".join(re.findall(r"`([^`]+)`", text))
    missing = []
    for path, name in modules():
        short = name.rsplit(".", 1)[-1]
        if name == "symeq" or short.startswith("_"):
            continue
        if not re.search(rf"(?<![\w]){re.escape(short)}(?![\w])", quoted):
            missing.append(name)
    assert not missing, f"modules docs/architecture.md does not name: {missing}"
