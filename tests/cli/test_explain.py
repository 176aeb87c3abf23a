"""`symeq explain` and the pictures: the report files, the picture's formats, the certificate the
independent checker accepts, the notebook reprs, the command line, and (slow) a real browser
rendering the self-contained HTML page."""

import argparse
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from flint import fmpq

import symeq
from symeq_check import check_certificate
from symeq.errors import EngineMissing
from symeq.examples import builtin_example
from symeq.cli.explain import register
from symeq.explain import explain
from symeq.io import read_json, save_model

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    pytest.importorskip("matplotlib", reason="needs matplotlib: pip install 'symeq[plot]'")
    out = tmp_path_factory.mktemp("explain")
    return explain(builtin_example(), out_dir=out)


def test_explain_writes_every_file(report):
    assert set(report) == {"markdown", "html", "png", "svg", "certificate", "model"}
    assert all(p.exists() and p.stat().st_size > 0 for p in report.values())


def test_markdown_has_each_step_in_latex(report):
    md = report["markdown"].read_text()
    for heading in ("The model", "The group", "Premise", "Derived actions", "Each layer's check",
                    "Homomorphism", "Identifiability", "Verdict", "Certificate"):
        assert heading in md
    assert "$$" in md and r"\rho" in md and r"\begin{matrix}" in md
    assert "**Verdict: layerwise-equivariant**" in md
    assert "![" in md and "network.png" in md


def test_html_is_self_contained_with_mathml_and_the_picture(report):
    page = report["html"].read_text()
    assert "<math" in page and "<mtable" in page
    assert "<svg" in page  # the picture, inline
    # nothing is fetched when the page is viewed: no scripts, no remote sources or styles
    assert "<script" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(http" not in page


def test_picture_formats(report):
    assert report["png"].read_bytes().startswith(PNG_SIGNATURE)
    root = ET.parse(report["svg"]).getroot()
    assert root.tag.endswith("svg")


def test_certificate_is_accepted_by_the_independent_checker(report):
    cert, model = read_json(report["certificate"]), read_json(report["model"])
    assert cert["verdict"] == "layerwise-equivariant"
    assert check_certificate(cert, model).accepted


def test_notebook_reprs():
    pytest.importorskip("matplotlib", reason="needs matplotlib: pip install 'symeq[plot]'")
    from symeq.display import model_png, verification_png

    m = builtin_example()
    v = symeq.verify(m)
    assert isinstance(model_png(m), bytes) and model_png(m).startswith(PNG_SIGNATURE)
    assert verification_png(v).startswith(PNG_SIGNATURE)
    for obj in (m, m.group, v):
        latex = obj._repr_latex_()
        assert isinstance(latex, str) and latex.startswith("$")


def test_without_matplotlib_the_reports_are_written_and_say_so(tmp_path, monkeypatch):
    from symeq import display

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(EngineMissing, match=r"pip install 'symeq\[plot\]'"):
        display.model_png(builtin_example())
    paths = explain(builtin_example(), out_dir=tmp_path)
    assert "png" not in paths and "svg" not in paths
    assert "No picture" in paths["markdown"].read_text()
    assert "symeq[plot]" in paths["html"].read_text()


def _relu_rotation_identity():
    """The identity on R^2 through width 4 under the order-3 rotation: no action at theta."""
    from symeq.activations import relu
    from symeq.groups import FiniteGroup
    from symeq.models import DenseLayer, Model
    from symeq.numbers import matrix

    R = matrix([[0, -1], [1, -1]])
    W1 = matrix([[1, 2], [0, 1], [-1, -2], [0, -1]])
    W2 = matrix([[1, -2, -1, 2], [0, 1, 0, -1]])
    return Model(2, [DenseLayer(W1, None, relu()), DenseLayer(W2, None, None)], FiniteGroup([(R, R)], ["rot3"]))


def test_explain_attention_relu_and_a_broken_model(tmp_path):
    pytest.importorskip("matplotlib", reason="needs matplotlib: pip install 'symeq[plot]'")
    from symeq.attention import random_equivariant_attention, scramble_attention
    from symeq.models import DenseLayer

    att = scramble_attention(random_equivariant_attention(rng=0), rng=1)
    p = explain(att, out_dir=tmp_path / "att")
    md = p["markdown"].read_text()
    assert "P \\otimes R" in md and "head" in md and "png" in p

    m = _relu_rotation_identity()
    assert m([fmpq(3), fmpq(-1, 2)]) == [fmpq(3), fmpq(-1, 2)]
    p = explain(m, out_dir=tmp_path / "relu")
    md = p["markdown"].read_text()
    assert "No action found at θ" in md and "not-identifiable" in md and "png" in p

    bad = builtin_example()
    from flint import fmpq_mat

    W = fmpq_mat(bad.layers[0].weight)
    W[0, 0] = W[0, 0] + fmpq(1, 7)
    bad.layers[0] = DenseLayer(W, bad.layers[0].bias, bad.layers[0].activation)
    p = explain(bad, out_dir=tmp_path / "bad")
    md = p["markdown"].read_text()
    assert "**Fails**" in md and "Witness" in md and "not-equivariant" in md
    assert check_certificate(read_json(p["certificate"]), read_json(p["model"])).accepted


def test_group_argument_accepts_a_builtin_spec(tmp_path):
    m = builtin_example().with_group(None)
    p = explain(m, "mirror:2x3", out_dir=tmp_path)
    assert "mirror 2x3" in p["markdown"].read_text()


def _cli(argv):
    parser = argparse.ArgumentParser(prog="symeq")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_command_line(tmp_path, capsys):
    assert _cli(["explain", "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "html:" in out and (tmp_path / "a" / "report.html").exists()
    # a model file with a group given on the command line
    f = tmp_path / "m.json"
    save_model(builtin_example().with_group(None), f)
    assert _cli(["explain", str(f), "--group", "mirror:2x3", "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "certificate.json").exists()
    with pytest.raises(symeq.errors.InputError, match="no \"group\""):
        _cli(["explain", str(f), "--out", str(tmp_path / "c")])


CHROMIUM = "/usr/bin/chromium"


@pytest.mark.slow
def test_html_renders_in_headless_chromium(report, tmp_path):
    """The page renders in a real browser, offline: math typeset, picture visible."""
    browser = shutil.which("chromium") or (CHROMIUM if shutil.which(CHROMIUM) else None)
    if browser is None:
        pytest.skip("no chromium binary: apt-get install -y chromium (Debian package) to run this test")
    shot = tmp_path / "shot.png"
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,2000",
           report["html"].resolve().as_uri()]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    data = shot.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 50_000
    from PIL import Image

    with Image.open(shot) as im:
        im = im.convert("RGB")
        assert im.size == (1200, 2000)
        colours = im.getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 200  # text, math, and the coloured picture
        # the orbit colours of the picture (matplotlib's tab20), near the top of the page, are visible
        tab20 = {(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40)}
        assert len(tab20 & {c for _, c in colours}) >= 3


def test_jupyter_png_reprs():
    pytest.importorskip("matplotlib", reason="needs matplotlib: pip install 'symeq[plot]'")
    import symeq

    class Formatter:  # IPython's PNG formatter registers renderers by (module, class name)
        def __init__(self):
            self.renderers = {}

        def for_type_by_name(self, module, name, func):
            self.renderers[(module, name)] = func

    fmt = Formatter()
    assert symeq.register_notebook_pictures(fmt)
    m = symeq.builtin_example()
    v = symeq.verify(m)
    for obj in (m, v):
        render = fmt.renderers[(type(obj).__module__, type(obj).__name__)]
        assert render(obj)[:8] == b"\x89PNG\r\n\x1a\n"
    assert "\\rho" in v._repr_latex_()
