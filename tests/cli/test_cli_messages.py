"""Messages and exit codes of the command line (issue 18, parts 3-5).

* ``symeq check`` / ``python -m symeq_check``: a certificate of another model is exit 2 (bad
  input), a tampered certificate of the same model exit 1, swapped arguments are named;
* the budget line comes after the argument and file checks;
* group names: one canonical spelling, old ones as aliases, a short "did you mean";
* text output numbers neurons from 1; long actions are wrapped or summarised.
"""

import copy
import json

import pytest

import symeq_check as checker
from symeq.cli import main
from symeq.examples import builtin_example
from symeq.io import model_to_json
from symeq.theorem import verify


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("check")
    m = builtin_example()
    model = model_to_json(m)
    cert = verify(m).certificate()
    other = copy.deepcopy(model)
    other["layers"][0]["weight"][0][0] = "12345"
    tampered = copy.deepcopy(cert)
    act = tampered["latent_actions"][0][0]
    act["factor"][0] = "7/3" if act["factor"][0] != "7/3" else "5"
    paths = {}
    for name, doc in (("model", model), ("cert", cert), ("other", other), ("tampered", tampered)):
        paths[name] = d / f"{name}.json"
        paths[name].write_text(json.dumps(doc))
    return {k: str(v) for k, v in paths.items()}


def _both(argv):
    """(exit code of `symeq check ...`, exit code of `python -m symeq_check ...`)."""
    return main(["check", *argv]), checker.main(list(argv))


def test_check_accepts_its_own_model(files, capsys):
    assert _both([files["cert"], files["model"]]) == (0, 0)


def test_check_against_another_model_is_exit_2(files, capsys):
    assert _both([files["cert"], files["other"]]) == (2, 2)
    cap = capsys.readouterr()
    assert "not about this model" in cap.out and "digest" in cap.out
    assert "is not a certificate of the model" in cap.err


def test_a_tampered_certificate_of_the_same_model_is_still_exit_1(files, capsys):
    assert _both([files["tampered"], files["model"]]) == (1, 1)
    assert "result: rejected" in capsys.readouterr().out


def test_swapped_arguments_are_named(files, capsys):
    assert _both([files["model"], files["cert"]]) == (2, 2)
    err = capsys.readouterr().err
    assert err.count("did you swap the arguments?") == 2
    assert "usage: symeq check CERT MODEL" in err and "usage: python -m symeq_check CERT MODEL" in err
    assert "budget" not in err  # an argument error comes before the budget line
    # a model twice, or a certificate twice: the message says which one is out of place
    assert main(["check", files["model"], files["model"]]) == 2
    assert "not a certificate: the certificate comes first" in capsys.readouterr().err
    assert main(["check", files["cert"], files["cert"]]) == 2
    assert "not a model: the model comes second" in capsys.readouterr().err


def test_check_json_says_mismatch(files, capsys):
    assert main(["check", files["cert"], files["other"], "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["mismatch"] is True and out["accepted"] is False


def test_another_group_or_input_size_is_a_mismatch(files):
    cert = json.loads(open(files["cert"]).read())
    model = json.loads(open(files["model"]).read())
    bad = copy.deepcopy(model)
    gen = bad["group"]["generators"][0]
    gen["output"] = [[1 if i == j else 0 for j in range(len(gen["output"]))] for i in range(len(gen["output"]))]
    r = checker.check_certificate(cert, bad)
    assert r.mismatch and r.exit_code == 2
    small = copy.deepcopy(cert)
    small["input_dim"] = 5
    r = checker.check_certificate(small, model)
    assert r.mismatch and r.exit_code == 2


@pytest.mark.parametrize("argv", [["verify", "missing.json"], ["explain", "missing.json"],
                                  ["fibre", "missing.json"], ["numeric-check", "missing.json"],
                                  ["check", "missing.json", "missing.json"], ["verify", "--group", "mirorr:2x3"],
                                  ["generate", "--group", "nonsense"]])
def test_bad_input_errors_before_any_budget_line(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err


def test_group_aliases_and_canonical_names(capsys):
    from symeq.groups import builtin_group
    from symeq.groups.builtins import GROUP_ALIASES, canonical_spec

    assert canonical_spec("rot3") == "rot:3" and canonical_spec("mirror:2x3*rot6") == "mirror:2x3*rot:6"
    for alias, canon in GROUP_ALIASES.items():
        a, b = builtin_group(alias), builtin_group(canon)
        assert a.generators == b.generators and a.label == b.label
    assert main(["generate", "--group", "rot3", "--latent", "regular"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "symeq-model/1"
    assert main(["groups"]) == 0
    out = capsys.readouterr().out
    assert "rot:N" in out and "rot3 = rot:3" in out


def test_an_unknown_group_suggests_the_closest_names_only(capsys):
    assert main(["generate", "--group", "dihedal:3"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'dihedral'?" in err and len(err) < 200
    assert main(["generate", "--group", "zzz"]) == 2
    err = capsys.readouterr().err
    assert "known: mirror, vmirror" in err and "HxW" not in err and len(err) < 250


def test_orbits_number_neurons_from_one():
    from symeq.display import network_columns

    m = builtin_example()
    cols = network_columns(m, verify(m).actions)
    for col in cols:
        assert col["nodes"][0] == "1" and col["nodes"][-1] == str(col["n"])


def test_long_actions_wrap_at_100_characters(tmp_path, capsys):
    """A width-128 action (mirror of 8x8 images, two copies of the input representation): every
    line of verify's and numeric-check's text stays within 100 characters; --json has it all."""
    from symeq.activations import tanh_series
    from symeq.groups import builtin_group
    from symeq.models import random_equivariant_model, scramble

    m = random_equivariant_model(builtin_group("mirror:8x8"), ["input*2"], tanh_series(3), rng=0)
    m, _ = scramble(m, rng=1)
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(model_to_json(m)))
    for argv in (["verify", str(path)], ["numeric-check", str(path)]):
        assert main(argv) == 0
        out = capsys.readouterr().out.splitlines()
        at = next(i for i, x in enumerate(out) if x.startswith("  rho_1(mirror)"))
        assert out[at + 1].startswith("     ") and out[at + 1].strip().startswith("(")
        action_lines = [x for x in out if x.startswith("  rho_")
                        or x.startswith("     ") and x.strip().startswith(("(", "... "))]
        assert action_lines and max(len(x) for x in action_lines) <= 100, argv
    assert main(["numeric-check", str(path), "--json"]) == 0
    actions = json.loads(capsys.readouterr().out)["actions"]
    assert len(actions[0]["source"]) == 128


def test_a_group_from_a_file_without_a_label_is_named_by_its_generators(tmp_path, capsys):
    doc = {"format": "symeq-model/1", "input_dim": 2,
           "layers": [{"type": "dense", "weight": [["1", "2"], ["2", "1"]], "bias": ["0", "0"],
                       "activation": {"type": "tanh_series", "order": 3}},
                      {"type": "dense", "weight": [["1", "1"]], "bias": ["0"], "activation": None}],
           "group": {"generators": [{"input": [["0", "1"], ["1", "0"]], "output": [["1"]]}]}}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    assert main(["verify", str(path)]) == 0
    cap = capsys.readouterr()
    assert "group group" not in cap.err + cap.out
    assert "group <g0>" in cap.err and "group: <g0>, generators g0" in cap.out


def _hide(monkeypatch, *modules):
    """Make importlib.util.find_spec report ``modules`` as not installed."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None if name in modules else real(name, *a, **k))


def test_a_missing_extra_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    from symeq.cli.loader import require_extra
    from symeq.errors import EngineMissing

    require_extra("json", "pip install json")  # present: nothing happens
    _hide(monkeypatch, "distributed", "onnx")
    with pytest.raises(EngineMissing, match=r"pip install 'symeq\[plot\]'"):
        require_extra("distributed", "pip install 'symeq[plot]'")
    out = tmp_path / "h.jsonl"
    argv = ["hunt", "--arch", "2,4,2", "--group", "rot:3", "--budget", "2", "--out", str(out),
            "--scheduler", "tcp://127.0.0.1:1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "pip install 'symeq[distributed]'" in err and not out.exists()
    assert main(["numeric-check", str(tmp_path / "net.onnx"), "--group", "mirror:1x2"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'symeq[onnx]'" in err and "no such file" not in err


def test_hunt_writes_the_canonical_group_name_and_resumes_an_alias(tmp_path, capsys):
    out = tmp_path / "h.jsonl"
    assert main(["hunt", "--arch", "2,4,2", "--group", "rot3", "--budget", "2", "--out", str(out)]) == 0
    assert json.loads(out.read_text().splitlines()[0])["group"] == "rot:3"
    old = tmp_path / "old.jsonl"  # a file started as rot3 resumes under either spelling
    old.write_text(out.read_text().replace('"rot:3"', '"rot3"', 1))
    assert main(["hunt", "--arch", "2,4,2", "--group", "rot:3", "--budget", "3", "--out", str(old)]) == 0
    assert json.loads(old.read_text().splitlines()[0])["group"] == "rot3"
    assert len(old.read_text().splitlines()) == 4


def test_an_identifiability_certificate_of_another_model_is_exit_2(tmp_path, capsys):
    import random

    from symeq.activations import tanh_series
    from symeq.io import save_model
    from symeq.models import DenseLayer, Model

    def net(seed):
        rng = random.Random(seed)
        nz = [x for x in range(-9, 10) if x]
        return Model(6, [DenseLayer([[rng.choice(nz) for _ in range(6)] for _ in range(6)],
                                    [rng.randint(-9, 9) for _ in range(6)], tanh_series(3)),
                         DenseLayer([[rng.choice(nz) for _ in range(6)] for _ in range(6)],
                                    [rng.randint(-9, 9) for _ in range(6)], None)])

    path, other, cert = tmp_path / "m.json", tmp_path / "o.json", tmp_path / "c.json"
    save_model(net(7), path)
    save_model(net(8), other)
    assert main(["fibre", str(path), "--method", "tensor", "--certificate", str(cert)]) == 0
    assert main(["check", str(cert), str(path)]) == 0
    assert main(["check", str(cert), str(other)]) == 2
    assert "not about this model" in capsys.readouterr().out
    data = json.loads(cert.read_text())
    data["neurons"][3]["gcd"] = None
    data["neurons"][3]["solutions"] = "all"
    cert.write_text(json.dumps(data))
    assert main(["check", str(cert), str(path)]) == 1  # a tampered proof of the same model


def test_explain_says_there_will_be_no_picture_before_the_work(tmp_path, monkeypatch, capsys):
    import sys

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    assert main(["explain", "--out", str(tmp_path / "ex")]) == 0
    err = capsys.readouterr().err.splitlines()
    note = next(i for i, x in enumerate(err) if x.startswith("no picture"))
    assert "pip install 'symeq[plot]'" in err[note]
    assert note < next(i for i, x in enumerate(err) if x.startswith("verdict:"))
    assert sum(x.startswith("no picture") for x in err) == 1
    assert (tmp_path / "ex" / "report.md").exists() and not (tmp_path / "ex" / "network.png").exists()
