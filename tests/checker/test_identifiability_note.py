"""An equivariance certificate's ``identifiability`` is for people (docs/certificates.md): the checker does not
re-verify it, and its report says so whenever the claim is more than ``unknown`` (a chain and a graph alike),
so that "accepted" is not read as covering it."""
from __future__ import annotations

import json

from symeq.cli import main
from symeq_check import check_certificate

TANH = {"format": "symeq-model/1", "name": "tanh", "input_dim": 2,
        "layers": [{"type": "dense", "weight": [["1", "-1"], ["1", "2"], ["2", "1"]], "bias": ["0", "1", "1"],
                    "activation": {"type": "tanh"}},
                   {"type": "dense", "weight": [["1", "1", "2"], ["-1", "2", "1"]], "bias": ["1/2", "1/2"],
                    "activation": None}],
        "group": {"generators": [{"input": [["0", "1"], ["1", "0"]], "output": [["0", "1"], ["1", "0"]]}]}}


def _said(report) -> list:
    return [c for c in report.checks if c.startswith("identifiability")]


def test_the_report_names_an_identifiability_claim_it_does_not_re_verify(tmp_path, capsys):
    path, cert = tmp_path / "m.json", tmp_path / "c.json"
    path.write_text(json.dumps(TANH))
    assert main(["verify", str(path), "--identifiability", "--certificate", str(cert)]) == 0
    data = json.loads(cert.read_text())
    assert data["identifiability"]["status"] == "identifiable"
    report = check_certificate(data, TANH)
    assert report.accepted is True
    assert len(_said(report)) == 1 and "not re-verified" in _said(report)[0]
    data["identifiability"]["status"] = "unknown"  # nothing claimed: nothing said
    assert _said(check_certificate(data, TANH)) == []
    del data["identifiability"]
    assert _said(check_certificate(data, TANH)) == []
