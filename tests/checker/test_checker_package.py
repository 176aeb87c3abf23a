"""The checker as its own package (issue 26, item 6): it runs as one zipapp file with ``python3 -I -S``
(no site-packages, so no symeq and nothing installed), ``python -m symeq_check`` and the alias
``python -m symeq.check`` give the same exit codes, and one table dispatches every certificate kind."""
from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

import symeq_check
from symeq.io import model_from_json, model_to_json
from symeq.theorem import verify
from symeq_check import CheckError, check_certificate
from symeq_check.dispatch import CERTIFICATE_CHECKERS, checker_for


def _swap():
    model = {"format": "symeq-model/1", "input_dim": 2, "layers": [
        {"type": "dense", "weight": [["1", "2"], ["2", "1"]], "bias": ["1", "1"],
         "activation": {"type": "tanh_series", "order": 3}},
        {"type": "dense", "weight": [["3", "3"]], "bias": None, "activation": None}],
        "group": {"generators": [{"input": [["0", "1"], ["1", "0"]], "output": [["1"]]}]}}
    return model, verify(model_from_json(model)).certificate()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("zipapp")
    model, cert = _swap()
    tampered = copy.deepcopy(cert)
    tampered["latent_actions"][0][0]["factor"][0] = "2"
    for name, doc in (("model", model), ("cert", cert), ("tampered", tampered)):
        (tmp / f"{name}.json").write_text(json.dumps(doc))
    out = subprocess.run([sys.executable, "-m", "symeq_check", "--zipapp", str(tmp / "symeq_check.pyz")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return tmp


def _run(cmd, cwd):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)


def test_the_zipapp_runs_with_an_isolated_python_without_site_packages(files):
    pyz = str(files / "symeq_check.pyz")
    isolated = [sys.executable, "-I", "-S", pyz]  # -S: no site-packages, so neither symeq nor its checker
    ok = _run(isolated + ["cert.json", "model.json"], files)
    assert ok.returncode == 0 and "result: accepted" in ok.stdout, ok.stdout + ok.stderr
    bad = _run(isolated + ["tampered.json", "model.json"], files)
    assert bad.returncode == 1 and "REJECTED" in bad.stdout
    swapped = _run(isolated + ["model.json", "cert.json"], files)
    assert swapped.returncode == 2 and f"usage: python3 -I {pyz} CERT MODEL" in swapped.stderr
    selftest = _run(isolated + ["--self-test"], files)
    assert selftest.returncode == 0 and "0 failed" in selftest.stdout
    probe = _run([sys.executable, "-I", "-S", "-c", "import symeq"], files)
    assert probe.returncode != 0  # the run above could not have used symeq


def test_module_and_alias_give_the_same_exit_codes(files):
    for argv, code in ((["cert.json", "model.json"], 0), (["tampered.json", "model.json"], 1),
                       (["model.json", "cert.json"], 2)):
        for module in ("symeq_check", "symeq.check"):
            out = _run([sys.executable, "-m", module] + argv, files)
            assert out.returncode == code, (module, argv, out.stdout, out.stderr)
    assert "usage: python -m symeq.check CERT MODEL" in _run([sys.executable, "-m", "symeq.check"], files).stdout \
        + _run([sys.executable, "-m", "symeq.check"], files).stderr


def test_importing_the_alias_loads_no_checker():
    out = subprocess.run([sys.executable, "-c", "import sys, symeq.check; print('symeq_check' in sys.modules)"],
                         capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_one_table_dispatches_every_certificate_kind():
    model, cert = _swap()
    assert checker_for(cert) is CERTIFICATE_CHECKERS[(symeq_check.CERT_FORMAT, None, None)]
    assert {fmt for fmt, _, _ in CERTIFICATE_CHECKERS} == {symeq_check.CERT_FORMAT, symeq_check.CERT_FORMAT_DENSE,
                                                          symeq_check.IDENTIFIABILITY_FORMAT}
    ident = {"format": symeq_check.IDENTIFIABILITY_FORMAT, "verdict": "not-identifiable"}
    for method in ("sussmann", "fefferman", "jacobian-factors", "jacobian-rank"):
        assert checker_for(dict(ident, method=method)) is CERTIFICATE_CHECKERS.get(
            (ident["format"], method, "not-identifiable"), CERTIFICATE_CHECKERS[(ident["format"], method, None)])
    rank = CERTIFICATE_CHECKERS[(ident["format"], "jacobian-rank", None)]
    family = CERTIFICATE_CHECKERS[(ident["format"], "jacobian-rank", "not-identifiable")]
    assert rank is not family and checker_for(dict(ident, method="jacobian-rank", verdict="locally-identifiable")) is rank
    # an unknown method: the format's own checker reads the certificate and refuses the key by name
    with pytest.raises(CheckError, match="method"):
        check_certificate(dict(cert, method="none-such"), model)
    with pytest.raises(CheckError, match="format must be one of"):
        check_certificate(dict(cert, format="symeq-certificate/9"), model)
    assert check_certificate(cert, model).accepted is True
    assert check_certificate(cert, model_to_json(model_from_json(model))).accepted is True


def test_symeqs_own_copies_equal_the_checkers():
    """symeq keeps its own classical tables, key check and digests; they are the checker's, value for value."""
    import symeq.digest as prover_digest
    import symeq.fibre.classical as prover_classical
    import symeq.schema as prover_schema
    import symeq_check.digest as checker_digest
    import symeq_check.identifiability.classical as checker_classical
    import symeq_check.schema as checker_schema
    from symeq.errors import InputError

    assert prover_classical.GROUPS == checker_classical.CLASSICAL_GROUPS
    assert prover_classical.STATEMENTS == checker_classical.CLASSICAL_STATEMENTS
    assert prover_classical.MAX_LISTED == checker_classical.CLASSICAL_LISTED
    assert prover_schema.check_keys is not checker_schema.check_keys
    for obj, allowed, required in (({"weight": 1, "biases": 0}, ["type", "weight", "bias"], ["weight"]),
                                   ({"weight": 1}, ["type", "weight", "bias"], ["weight", "bias"])):
        with pytest.raises(InputError) as mine:
            prover_schema.check_keys(obj, "layers[0]", allowed, required)
        with pytest.raises(CheckError) as theirs:
            checker_schema.check_keys(obj, "layers[0]", allowed, required)
        assert str(mine.value) == str(theirs.value)
    layers = [{"type": "dense", "weight": [["1/2", "-1"], ["0.25", "3"]], "bias": None, "activation": {"type": "tanh"}},
              {"type": "dense", "weight": [["1", "1"]], "bias": [0], "activation": None}]
    assert prover_digest.classical_digest(layers, 2) == checker_classical.classical_digest(layers, 2)
    layers[0]["activation"] = {"type": "gelu"}
    assert prover_digest.classical_digest(layers, 2) == checker_classical.classical_digest(layers, 2)
    assert prover_digest.layers_digest(layers, 2) == checker_digest.layers_digest(layers, 2)
