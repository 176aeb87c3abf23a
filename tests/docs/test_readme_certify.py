"""The command reference's `symeq certify` / `export --onnx` / `.onnx` commands run as written
(issue 22; the block moved from the README to docs/cli.md in issue 26).

The "Commands" block of docs/cli.md shows certify on ``net.onnx``, the check of what it wrote, the
export of the certified model and its exact verification from ONNX.  This test builds such a
``net.onnx`` (a tanh MLP layerwise equivariant under the mirror of 4x4 images, scrambled, relative
noise 1e-3) and runs those lines, in order, in one directory: each must exit 0.  The parameter
distance docs/examples.md quotes ("about 7·10⁻⁴") is checked too.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
CLI = (DOCS / "cli.md").read_text(encoding="utf-8")
EXAMPLES = (DOCS / "examples.md").read_text(encoding="utf-8")


def _using_it_lines(prefixes):
    block = re.search(r"^## Commands\n+```bash\n(.*?)^```", CLI, re.MULTILINE | re.DOTALL)
    assert block, "docs/cli.md has a bash block under 'Commands'"
    lines = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line.startswith(prefixes)]


def test_readme_certify_export_and_onnx_lines_run(tmp_path, monkeypatch, capsys):
    pytest.importorskip("onnx", reason="ONNX files need onnx: pip install 'symeq[onnx]'")
    from symeq.cli import main
    from symeq.groups import mirror
    from symeq.numeric.generate import random_equivariant_numeric, scramble_numeric
    from symeq.numeric.models import numeric_activation
    from symeq.numeric.onnx_io import export_onnx

    net = random_equivariant_numeric(mirror(4, 4), [16, 16], numeric_activation("tanh"), rng=0)
    net, _ = scramble_numeric(net, rng=1)
    th = net.parameters()
    noisy = net.with_parameters(th * (1.0 + 1e-3 * np.random.default_rng(2).standard_normal(th.shape)))
    monkeypatch.chdir(tmp_path)
    export_onnx(noisy, "net.onnx")

    lines = _using_it_lines(("symeq certify", "symeq check bar", "symeq export", "symeq verify bar.onnx"))
    assert [line.split()[1] for line in lines] == ["certify", "check", "export", "verify"], lines
    for line in lines:
        argv = shlex.split(line)[1:]
        assert main(argv) == 0, (line, capsys.readouterr())
        out = capsys.readouterr().out
        if argv[0] == "certify":
            assert "certified: theta-bar is layerwise equivariant" in out
            # docs/examples.md's figure: a parameter distance of about 7e-4, within the noise
            assert "parameter distance of about 7·10⁻⁴" in EXAMPLES
            dists = [float(d) for d in re.findall(r"relative parameter distance ([0-9.e-]+)", out)]
            assert len(dists) == 3 and 1e-4 < max(dists) < 3e-3, out
    assert Path("bar.json").is_file() and Path("bar_cert.json").is_file() and Path("bar.onnx").is_file()
