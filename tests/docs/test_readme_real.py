"""The real-activation example of docs/model-files.md (moved there from the README in issue 26)
tells the truth: its model file verifies with the action it quotes, the changed weight is refuted
at the quoted x by a witness the checker re-proves, and `symeq fibre` says what the page says
(Sussmann, 48 parameters)."""

import json
import re
from pathlib import Path

from symeq.cli import main

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "model-files.md").read_text(encoding="utf-8")


def _section() -> str:
    m = re.search(r"^## Real activations\n(.*?)(?=^## |\Z)", PAGE, re.MULTILINE | re.DOTALL)
    assert m, "docs/model-files.md has a 'Real activations' section"
    return m.group(1)


def _model() -> dict:
    blocks = re.findall(r"^```json\n(.*?)^```", _section(), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1
    data = json.loads(blocks[0])
    assert data["layers"][0]["activation"] == {"type": "tanh"}
    return data


def test_readme_real_example_verifies_and_checks(tmp_path, capsys):
    text = _section()
    path, cert = tmp_path / "tanh.json", tmp_path / "c.json"
    path.write_text(json.dumps(_model()))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    out = capsys.readouterr().out
    quoted = re.search(r"prints `(rho_1\(g0\) on hidden layer 1 [^`]+)`", text.replace("\n", " ")).group(1)
    assert quoted in out
    assert main(["check", str(cert), str(path)]) == 0
    assert "result: accepted" in capsys.readouterr().out
    assert main(["fibre", str(path)]) == 0
    out = capsys.readouterr().out
    assert "identifiable" in out and "Sussmann" in out and "= 48 points" in out and "48 parameters" in text


def test_readme_real_example_changed_weight_is_refuted(tmp_path, capsys):
    data = _model()
    last = data["layers"][1]["weight"][-1]
    assert last[-1] == "1"
    last[-1] = "3/2"  # as the page says
    path, cert = tmp_path / "bad.json", tmp_path / "cb.json"
    path.write_text(json.dumps(data))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 1
    capsys.readouterr()
    w = json.loads(cert.read_text())["equivariance"]["witness"]
    assert w["kind"] == "arb" and w["x"] == ["1/2", "1/2"] and "x = (1/2, 1/2)" in _section()
    assert main(["check", str(cert), str(path)]) == 0
    assert "result: accepted" in capsys.readouterr().out
