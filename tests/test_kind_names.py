"""Issue 26's structural acceptance: outside the kinds' own modules (``symeq/layers/``), at most 10 places
of ``symeq/`` name a layer kind; the rest ask the kind registry (``symeq/layers/registry.py``:
``supports``/``require``/``any_supports``, or a method on the kind's class). docs/architecture.md,
"Where to add things", lists what adding a kind touches.

The places are found by reading the syntax trees (not by grep). A *site* is one of

* a comparison (``==``, ``!=``, ``in``, ``not in``, ``is``) with a string constant that is a registered kind
  name or a model-file ``"type"`` of the kinds' schemas and readers (``l.kind == "conv2d"``,
  ``spec.get("type") in ("maxpool2d", "group_pool")``); a tuple of choices that holds other words too
  (``conv not in ("auto", "dense", "kernels")``, an option's values) is not one;
* a literal tuple, list or set of two or more such names (a list of kinds kept outside the kinds);
* a dict literal all of whose string keys are such names, or ``dict(dense=...)`` (a dispatch table by kind);
* a subscript by such a name of a kind's ``schema`` or of an upper-case table (``ConvLayer.schema["conv2d"]``,
  ``FLOAT_TWINS["dense"]``);
* ``isinstance``/``issubclass`` against a layer class (an exact kind class, a float twin, or a subclass of
  one; found by their ``kind`` declarations and bases);
* a ``case "conv2d":`` of a match statement;
* the old switches ``.has_conv`` and ``.has_attention``.

A *place* is one function (or the module level) of one file holding one or more sites: a switch with six
branches is one place, and its sites are printed. Not counted: a float twin class's own declaration
``kind = "conv2d"`` (the kind's unit: the registry answers a float layer by it), and the homonyms listed
below (the same word with another meaning: an option's value, a torch function's name), each by its
reason; an entry of either list that no longer matches fails the test, so the lists stay true.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import flint  # noqa: F401,E402  # the kind modules import python-flint (core dependency)

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "symeq"
LIMIT = 10

#: the places outside symeq/layers/ that still name a kind ("file:function" -> why it stays, for now)
ALLOWED: dict = {}  # none left: every place asks the registry or the kind (7 in the previous session, 90 at ac97227)

#: sites that name the same word with another meaning ("file:function:word" -> the meaning)
HOMONYMS = {
    "symeq/certification.py:_pooling_road:dense": "the value of certify's --conv option (the dense matching road)",
    "symeq/certify_graph.py:_option_guards:dense": "the value of certify's --conv option",
    "symeq/cli/numeric.py:cmd_experiment:attention": "the experiment's name (`symeq experiment attention`)",
    "symeq/numeric/fdim.py:functional_dimension:dense": "the value of --method (the dense Jacobian, not krylov)",
    "symeq/numeric/torch_graph.py:_function_modules:flatten": "torch.flatten, a traced function's name",
}


@functools.lru_cache(maxsize=1)
def _kind_vocabulary():
    """(names, classes, trees): the kind names and file types; the layer classes (exact, float twins and
    their subclasses); the parsed modules of symeq."""
    from symeq.layers import registry

    names = set(registry.kind_names())
    for k in registry.kind_names():
        names |= set(getattr(registry.kind_class(k), "schema", {}) or {})
    names |= set(registry._READERS)  # the readers' types (group_maxpool, an old spelling)
    classes = {registry.kind_class(k).__name__ for k in registry.kind_names()}
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PKG.rglob("*.py"))}
    defs = [n for tree in trees.values() for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    classes |= {n.name for n in defs if any(_declares_kind(s, names) for s in n.body)}
    grown = True
    while grown:  # subclasses of layer classes (NumericAttention is an AttentionShape)
        more = {n.name for n in defs if n.name not in classes and any(_ref(b) in classes for b in n.bases)}
        classes |= more
        grown = bool(more)
    return frozenset(names), frozenset(classes), trees


def _declares_kind(stmt, names) -> bool:
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target if isinstance(stmt, ast.AnnAssign) \
        else None
    value = getattr(stmt, "value", None)
    return isinstance(target, ast.Name) and target.id == "kind" and isinstance(value, ast.Constant) \
        and value.value in names


def _ref(node):
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _strings(node) -> list:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None for e in node.elts]
    return []


def _walk_scoped(tree):
    """(node, the qualified name of the function or class around it, "<module>" at the top) for every node."""
    stack = [(tree, "")]
    while stack:
        node, where = stack.pop()
        for child in ast.iter_child_nodes(node):
            inner = f"{where}.{child.name}".lstrip(".") if isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else where
            yield child, inner or "<module>"
            stack.append((child, inner))


def _site(node, names, classes):
    """The kind names a node names as a switch (a sorted tuple), or None."""
    if isinstance(node, ast.Compare):
        hit = set()
        for side in [node.left, *node.comparators]:
            words = _strings(side)
            if words and all(w in names for w in words):
                hit |= set(words)
        return tuple(sorted(hit)) or None
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        words = _strings(node)
        return tuple(sorted(words)) if len(words) >= 2 and all(w in names for w in words) else None
    if isinstance(node, ast.Dict):
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        return tuple(sorted(keys)) if keys and all(k in names for k in keys) else None
    if isinstance(node, ast.Call) and _ref(node.func) == "dict" and node.keywords and \
            all(k.arg in names for k in node.keywords):
        return tuple(sorted(k.arg for k in node.keywords))
    if isinstance(node, ast.Call) and _ref(node.func) in ("isinstance", "issubclass") and len(node.args) == 2:
        arg = node.args[1]
        hit = {_ref(e) for e in (arg.elts if isinstance(arg, ast.Tuple) else [arg])} & classes
        return tuple(sorted(hit)) or None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in names:
        table = _ref(node.value) or ""
        if table == "schema" or table.lstrip("_").isupper():
            return (node.slice.value,)
    if isinstance(node, ast.MatchValue) and isinstance(node.value, ast.Constant) and node.value.value in names:
        return (node.value.value,)  # case "conv2d": in a match statement
    if isinstance(node, ast.Attribute) and node.attr in ("has_conv", "has_attention"):
        return (node.attr,)
    return None


def kind_sites(only=None):
    """[(file, scope, line, names)] for every site outside symeq/layers/ (or in the files ``only``), in
    reading order."""
    names, classes, trees = _kind_vocabulary()
    out = []
    for path, tree in trees.items():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("symeq/layers/") or only is not None and rel not in only:
            continue
        nodes = list(_walk_scoped(tree))
        # the tuples inside a comparison are counted with it
        inside = {id(s) for n, _ in nodes if isinstance(n, ast.Compare) for s in [n.left, *n.comparators]}
        for node, scope in nodes:
            if id(node) in inside and not isinstance(node, ast.Compare):
                continue
            hit = _site(node, names, classes)
            if hit:
                out.append((rel, scope, node.lineno, hit))
    return sorted(out)


def _split(sites):
    places, homonyms = {}, set()
    for rel, scope, line, hit in sites:
        words = [w for w in hit if f"{rel}:{scope}:{w}" in HOMONYMS]
        homonyms |= {f"{rel}:{scope}:{w}" for w in words}
        if len(words) < len(hit):
            places.setdefault(f"{rel}:{scope}", []).append((line, hit))
    return places, homonyms


def test_the_counter_sees_kind_names():
    """The counter is not blind: it finds the switches it is written for, in a toy source."""
    names, classes, _ = _kind_vocabulary()
    src = ("def f(l, spec, M):\n    if l.kind == 'conv2d' or isinstance(l, ConvLayer): pass\n"
           "    if spec.get('type') in ('maxpool2d', 'group_pool'): pass\n    T = {'dense': 1, 'heads': 2}\n"
           "    x = M.has_conv\n    if conv in ('auto', 'dense'): pass\n    k = ConvLayer.schema['conv2d']\n"
           "    match l.kind:\n        case 'heads': pass\n")
    hits = [h for n in ast.walk(ast.parse(src)) if (h := _site(n, names, classes))]
    assert ("conv2d",) in hits and ("ConvLayer",) in hits and ("group_pool", "maxpool2d") in hits
    assert ("dense", "heads") in hits and ("has_conv",) in hits and hits.count(("conv2d",)) == 2 and ("heads",) in hits
    assert ("dense",) not in hits  # an option's choices that hold other words are not a kind switch
    assert {"dense", "conv2d", "attention", "heads", "maxpool2d", "group_pool", "flatten"} <= names


def test_at_most_ten_places_outside_the_kinds_name_a_kind(capsys):
    sites = kind_sites()
    places, homonyms = _split(sites)
    with capsys.disabled():
        print(f"\n{len(places)} places outside symeq/layers/ name a layer kind ({sum(map(len, places.values()))} sites):")
        for place, where in sorted(places.items()):
            print(f"  {place}: " + "; ".join(f"line {ln} {', '.join(h)}" for ln, h in where))
    unlisted = sorted(set(places) - set(ALLOWED))
    assert not unlisted, "places that name a layer kind (ask the registry instead, docs/architecture.md): " + \
        "; ".join(f"{p} lines {[ln for ln, _ in places[p]]}" for p in unlisted)
    stale = sorted(set(ALLOWED) - set(places))
    assert not stale, f"allow-listed places that no longer name a kind (take them off ALLOWED): {stale}"
    assert not sorted(set(HOMONYMS) - homonyms), f"stale HOMONYMS: {sorted(set(HOMONYMS) - homonyms)}"
    assert len(places) <= LIMIT, f"{len(places)} places name a layer kind outside symeq/layers/ (at most {LIMIT})"
