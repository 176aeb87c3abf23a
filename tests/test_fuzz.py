"""Property-based fuzzing of the command line with mutated model and certificate files.

Valid files (a small model, its certificate) are mutated the way broken or hostile input looks:
wrong types, wrong shapes, odd numbers ("1/0", 10^12, floats, NaN), deep nesting, huge sizes and
degrees, missing and unknown keys, renamed keys, wrong formats, files that are not JSON at all.  ``verify``,
``check`` and ``fibre`` run in process (:func:`symeq.cli.main`) with a short ``--timeout``, and
every answer must be an exit code a user can act on (0, 1, 2 or 3), never a traceback or an
internal error (exit 70), and it must come within the budget.  A renamed key must moreover give
exit 2 or the verdict of the unmutated file (``test_key_renames_never_change_the_verdict``).

The default suite runs a few dozen examples per command (about half a minute); the slow variant
(``-m slow``) runs many more.
"""

import copy
import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symeq.cli import main

BUDGET = 4.0           # --timeout of every run
SLACK = 12.0           # the backstop's grace plus a loaded 2-core machine
EXIT_CODES = {0, 1, 2, 3}

MODEL = {
    "format": "symeq-model/1", "name": "fuzz seed", "input_dim": 2,
    "layers": [{"type": "dense", "weight": [["1", "2"], ["2", "1"]], "bias": ["1", "1"],
                "activation": {"type": "tanh_series", "order": 3}},
               {"type": "dense", "weight": [["3", "3"]], "bias": ["1/2"], "activation": None}],
    "group": {"generators": [{"input": [["0", "1"], ["1", "0"]], "output": [["1"]]}]},
}

RELU_MODEL = {
    "format": "symeq-model/1", "name": "fuzz relu seed", "input_dim": 2,
    "layers": [{"type": "dense", "weight": [["1", "-1"], ["-1", "1"]], "bias": ["0", "0"],
                "activation": {"type": "relu"}},
               {"type": "dense", "weight": [["1", "1"]], "bias": ["0"], "activation": None}],
    "group": {"generators": [{"input": [["0", "1"], ["1", "0"]], "output": [["1"]]}]},
}

CONV_MODEL = {
    "format": "symeq-model/1", "name": "fuzz conv seed", "input_dim": 4,
    # ReLU: verify proves it layers first (a polynomial native conv2d currently hits the premise's
    # symbolic expansion, which does not know conv2d layers: reported in issue 18's closing note)
    "layers": [{"type": "conv2d", "input_shape": [1, 2, 2], "kernel": [[[["1", "1"], ["2", "2"]]]], "bias": ["1"],
                "activation": {"type": "relu"}},
               {"type": "flatten"},
               {"type": "dense", "weight": [["2"]], "bias": ["0"], "activation": None}],
    "group": {"generators": [{"input": [["0", "1", "0", "0"], ["1", "0", "0", "0"], ["0", "0", "0", "1"],
                                        ["0", "0", "1", "0"]], "output": [["1"]]}]},
}


def _deep(depth: int):
    v = "1"
    for _ in range(depth):
        v = [v]
    return v


_ODD = st.one_of(
    st.none(), st.booleans(), st.integers(-10 ** 12, 10 ** 12), st.sampled_from([10 ** 9, 10 ** 30, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
    st.sampled_from(["1/0", "0/0", "-", "1e400", "1e-400", "10**9", "nan", "inf", "1/3", " 1", "0x10", "1_000",
                     "\u0661", "3/-4", "2.5e3", "--1", "999999999999999999999999999/7", "", "relu", "monomial",
                     "symeq-model/1", "symeq-certificate/2", "layerwise-equivariant", "dense", "attention"]),
    st.just([]), st.just({}), st.just([[]]), st.just([[[]]]), st.just({"type": "monomial", "degree": 10 ** 9}),
    st.just({"type": "tanh_series", "order": 999}), st.just(_deep(60)), st.just(["1"] * 500),
    st.just([["1"] * 40] * 40),
)
#: numbers a valid file may hold: the model stays well-formed and the commands do real work on it
NUMBERS = st.one_of(st.integers(-50, 50).map(str), st.integers(-10 ** 40, 10 ** 40).map(str),
                    st.fractions(max_denominator=10 ** 6).map(str), st.sampled_from(["0", "0.25", "-1.5", "1/3"]))
ODD_VALUES = _ODD.map(copy.deepcopy)  # st.just hands out one object: copies, so mutations never touch it


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:12]):
            yield from _paths(v, prefix + (i,))


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def mutated(draw, seed):
    """A JSON document derived from ``seed`` by 1-3 mutations (or raw bytes that are not JSON)."""
    doc = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        kind = draw(st.sampled_from(["replace", "replace", "replace", "delete", "duplicate", "add-key",
                                     "rename-key", "shrink", "grow", "wrap", "number", "number", "number"]))
        if kind == "number":  # a numeric leaf gets another valid number
            leaves = [q for q in paths if q and isinstance(_get(doc, q), str) and _get(doc, q)[-1:].isdigit()]
            if not leaves:
                continue
            path = draw(st.sampled_from(leaves))
            _get(doc, path[:-1])[path[-1]] = draw(NUMBERS)
            continue
        if not path:
            if kind in ("replace", "wrap"):
                doc = draw(ODD_VALUES) if kind == "replace" else [doc]
            continue
        parent, key = _get(doc, path[:-1]), path[-1]
        cur = parent[key]
        if kind == "replace":
            parent[key] = draw(ODD_VALUES)
        elif kind == "delete":
            del parent[key]
        elif kind == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(cur))
        elif kind == "add-key" and isinstance(cur, dict):
            cur[draw(st.sampled_from(["extra", "type", "format", "weight", "bias", "degree", "order"]))] = \
                draw(ODD_VALUES)
        elif kind == "rename-key" and isinstance(parent, dict):
            new = draw(st.sampled_from(VOCABULARY + (key + "s", key[:-1], key.capitalize())))
            if new not in parent:
                parent[new] = parent.pop(key)
        elif kind == "shrink" and isinstance(cur, list) and cur:
            parent[key] = cur[:-1]
        elif kind == "grow" and isinstance(cur, list):
            parent[key] = cur + copy.deepcopy(cur[-1:]) * draw(st.sampled_from([1, 2, 50]))
        elif kind == "wrap":
            parent[key] = [cur]
    return doc


@st.composite
def file_text(draw, seed):
    """The text of a file: a mutated document, or something that is not a valid JSON document."""
    how = draw(st.sampled_from(["json"] * 8 + ["truncated", "garbage", "empty", "deep", "nan"]))
    doc = draw(mutated(seed))
    text = json.dumps(doc)
    if how == "truncated":
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if how == "garbage":
        return draw(st.text(max_size=40))
    if how == "empty":
        return ""
    if how == "deep":
        return "[" * 200_000 + "]" * 200_000
    if how == "nan":
        return text.replace('"1"', "NaN", 1).replace('"3"', "1e999", 1)
    return text


def _certificate(tmp_path_factory, model):
    d = tmp_path_factory.mktemp("seed")
    (d / "m.json").write_text(json.dumps(model))
    assert main(["verify", str(d / "m.json"), "--certificate", str(d / "c.json"), "--timeout", "60"]) == 0
    return json.loads((d / "c.json").read_text())


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return {"model": MODEL, "relu": RELU_MODEL, "conv": CONV_MODEL,
            "model_cert": _certificate(tmp_path_factory, MODEL),
            "relu_cert": _certificate(tmp_path_factory, RELU_MODEL),
            "conv_cert": _certificate(tmp_path_factory, CONV_MODEL)}


def _run(argv, capsys):
    t0 = time.monotonic()
    code = main(argv)
    secs = time.monotonic() - t0
    out = capsys.readouterr()
    return code, secs, out.err


def _assert_clean(argv, code, secs, err):
    assert code in EXIT_CODES, (argv, code, err[-2000:])
    assert "Traceback" not in err and "internal error" not in err, (argv, err[-2000:])
    assert secs < BUDGET + SLACK, (argv, secs)


def _fuzz_once(tmp_path, capsys, seeds, data):
    base = data.draw(st.sampled_from(["model", "relu", "conv"]))
    model_text = data.draw(file_text(seeds[base]), label="model")
    cert = seeds[f"{base}_cert"]
    cert_text = data.draw(st.one_of(st.just(json.dumps(cert)), file_text(cert)), label="cert")
    m, c = tmp_path / "m.json", tmp_path / "c.json"
    m.write_text(model_text)
    c.write_text(cert_text)
    t = f"{BUDGET:g}"
    commands = [["verify", str(m), "--timeout", t], ["check", str(c), str(m), "--timeout", t]]
    if base != "relu":
        commands.append(["fibre", str(m), "--timeout", t])
    for argv in commands:
        _assert_clean(argv, *_run(argv, capsys))


SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                      HealthCheck.data_too_large], derandomize=True)


@settings(max_examples=40, **SETTINGS)
@given(data=st.data())
def test_mutated_files_never_crash(tmp_path, capsys, seeds, data):
    _fuzz_once(tmp_path, capsys, seeds, data)


@pytest.mark.slow
@settings(max_examples=600, **dict(SETTINGS, derandomize=False))
@given(data=st.data())
def test_mutated_files_never_crash_many(tmp_path, capsys, seeds, data):
    _fuzz_once(tmp_path, capsys, seeds, data)


# ----------------------------------------------------------------------------- key renames
# A renamed key (issue 18: "bias" -> "biases" once turned a refuted model into a verified one) must
# give exit 2 or the unmutated file's verdict, never another verdict: every reader is strict.

NEAR_MISSES = (lambda k: k + "s", lambda k: k[:-1], lambda k: k.capitalize(), lambda k: k + "_",
               lambda k: k[1:2] + k[:1] + k[2:], lambda k: k.replace("_", ""))
#: other real key names, so that a rename can also land on a key that is valid somewhere else
VOCABULARY = ("bias", "biases", "weight", "weights", "activation", "type", "kind", "order", "degree", "name",
              "label", "input", "output", "generators", "layers", "format", "heads", "tokens", "padding",
              "stride", "latent_offsets", "latent_actions", "layers_sha256", "source", "factor", "seconds")


@st.composite
def renamed(draw, seed):
    """``seed`` with 1-2 keys (at any depth) renamed to a near miss or to another real key name."""
    doc = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 2))):
        keyed = [(p, k) for p in _paths(doc) if isinstance(_get(doc, p), dict) for k in _get(doc, p)]
        path, key = draw(st.sampled_from(keyed))
        obj = _get(doc, path)
        new = draw(st.one_of(st.sampled_from(NEAR_MISSES).map(lambda f, k=key: f(k)), st.sampled_from(VOCABULARY)))
        if new not in obj:
            obj[new] = obj.pop(key)
    return doc


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory, seeds):
    """The exit codes of verify and check on the unmutated seed files."""
    d = tmp_path_factory.mktemp("verdicts")
    out = {}
    for base in ("model", "relu", "conv"):
        m, c = d / f"{base}.json", d / f"{base}_cert.json"
        m.write_text(json.dumps(seeds[base]))
        c.write_text(json.dumps(seeds[f"{base}_cert"]))
        out[base] = (main(["verify", str(m), "--timeout", "60"]), main(["check", str(c), str(m)]))
    return out


def _rename_once(tmp_path, capsys, seeds, verdicts, data):
    base = data.draw(st.sampled_from(["model", "relu", "conv"]))
    which = data.draw(st.sampled_from(["model", "cert", "both"]))
    model = data.draw(renamed(seeds[base]), label="model") if which != "cert" else seeds[base]
    cert = seeds[f"{base}_cert"]
    cert = data.draw(renamed(cert), label="cert") if which != "model" else cert
    m, c = tmp_path / "m.json", tmp_path / "c.json"
    m.write_text(json.dumps(model))
    c.write_text(json.dumps(cert))
    t = f"{BUDGET:g}"
    capsys.readouterr()
    for argv, base_code in ((["verify", str(m), "--timeout", t], verdicts[base][0]),
                            (["check", str(c), str(m), "--timeout", t], verdicts[base][1])):
        if argv[0] == "verify" and which == "cert":
            continue
        code, secs, err = _run(argv, capsys)
        _assert_clean(argv, code, secs, err)
        assert code in (2, base_code), (argv[0], base, which, code, base_code, err[-1000:])


@settings(max_examples=100, **SETTINGS)
@given(data=st.data())
def test_key_renames_never_change_the_verdict(tmp_path, capsys, seeds, verdicts, data):
    _rename_once(tmp_path, capsys, seeds, verdicts, data)


@pytest.mark.slow
@settings(max_examples=600, **dict(SETTINGS, derandomize=False))
@given(data=st.data())
def test_key_renames_never_change_the_verdict_many(tmp_path, capsys, seeds, verdicts, data):
    _rename_once(tmp_path, capsys, seeds, verdicts, data)


@pytest.mark.parametrize("text", ["[" * 200_000 + "]" * 200_000, '{"format": "symeq-model/1", "input_dim": ' +
                                  "[" * 100_000 + "]" * 100_000 + "}", "\x00\xff", "{}", "[]", "null", "1e999"])
@pytest.mark.parametrize("cmd", ["verify", "fibre", "check-model", "check-cert"])
def test_hostile_files(tmp_path, capsys, text, cmd):
    p = tmp_path / "f.json"
    p.write_text(text, encoding="utf-8", errors="surrogateescape")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(MODEL))
    argv = {"verify": ["verify", str(p)], "fibre": ["fibre", str(p)],
            "check-model": ["check", str(good), str(p)], "check-cert": ["check", str(p), str(good)]}[cmd]
    argv += ["--timeout", f"{BUDGET:g}"]
    code, secs, err = _run(argv, capsys)
    _assert_clean(argv, code, secs, err)
    assert code == 2, (argv, err)
