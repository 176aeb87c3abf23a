"""Every proofs/ script runs, and its certificate is accepted by `symeq check` and rejected
after tampering."""

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from symeq.cli import main as symeq_main

PROOFS = sorted(p for p in (Path(__file__).parents[2] / "proofs").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", PROOFS, ids=[p.stem for p in PROOFS])
def test_proof_script(script, tmp_path, capsys):
    r = subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Verdict:" in r.stdout
    cert, model = tmp_path / "certificate.json", tmp_path / "model.json"
    assert symeq_main(["check", str(cert), str(model)]) == 0
    data = json.loads(cert.read_text())
    if data.get("latent_actions"):
        a = data["latent_actions"][0][0]  # sparse (symeq-certificate/2): change one factor or block entry
        if a["kind"] == "monomial":
            a["factor"][0] = str(Fraction(a["factor"][0]) * 5)
        elif a["kind"] == "block-monomial":
            a["blocks"][0][0][0] = str(Fraction(a["blocks"][0][0][0]) + 5)
        else:
            a["matrix"][0] = ["5"] + a["matrix"][0][1:]
    else:
        data["parameters"]["layers"][0]["weight"][0][0] = "12345"
    cert.write_text(json.dumps(data))
    assert symeq_main(["check", str(cert), str(model)]) == 1


def test_there_are_proofs():
    assert PROOFS
