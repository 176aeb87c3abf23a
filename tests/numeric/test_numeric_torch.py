"""The numeric twin with torch: nn.Sequential loading, autograd Jacobian, training, the experiment."""

import argparse

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is an optional extra (pip install 'symeq[numeric]')")

from symeq.errors import InputError  # noqa: E402
from symeq.groups import mirror  # noqa: E402
from symeq.numeric import derive_latent_actions_numeric, from_torch, numeric_activation  # noqa: E402
from symeq.numeric.fdim import functional_dimension  # noqa: E402
from symeq.numeric.generate import random_equivariant_numeric, scramble_numeric  # noqa: E402


def test_sequential_round_trip_has_the_same_function():
    m = random_equivariant_numeric(mirror(2, 3), [12, 6], numeric_activation("tanh"), rng=0)
    s, _ = scramble_numeric(m, rng=1)
    net = s.to_torch()
    back = from_torch(net, group=mirror(2, 3))
    x = np.random.default_rng(0).standard_normal((5, 6))
    assert np.allclose(back(x), net(torch.from_numpy(x)).detach().numpy(), rtol=0, atol=1e-12)
    assert derive_latent_actions_numeric(back).within_tolerance


@pytest.mark.parametrize("act", ["tanh", "gelu", "sigmoid", "relu", {"type": "tanh_series", "order": 3}])
def test_numpy_and_torch_forward_and_jacobian_agree(act):
    from symeq.numeric.fdim import _torch_jacobian, jacobian

    rng = np.random.default_rng(1)
    from symeq.numeric.models import NumericDenseLayer, NumericModel

    a = numeric_activation(act)
    m = NumericModel(3, [NumericDenseLayer(rng.standard_normal((4, 3)), rng.standard_normal(4), a),
                         NumericDenseLayer(rng.standard_normal((3, 4)), rng.standard_normal(3), a),
                         NumericDenseLayer(rng.standard_normal((2, 3)), rng.standard_normal(2))])
    X = rng.standard_normal((7, 3))
    # float64 all the way: agreement to rounding, not to float32 (rtol=0)
    assert np.allclose(m.forward(X), m.to_torch()(torch.from_numpy(X)).detach().numpy(), rtol=0, atol=1e-12)
    assert np.allclose(jacobian(m, X), _torch_jacobian(m, X, device="cpu"), rtol=0, atol=1e-10)
    assert np.array_equal(m.to_torch()[0].weight.detach().numpy(), m.layers[0].weight)
    assert functional_dimension(m, backend="torch", rng=0).rank == functional_dimension(m, rng=0).rank


def test_bad_sequentials_are_input_errors():
    with pytest.raises(InputError, match="Sequential"):
        from_torch(torch.nn.Linear(2, 2))
    with pytest.raises(InputError, match="Conv"):
        from_torch(torch.nn.Sequential(torch.nn.Conv1d(1, 1, 1)))
    with pytest.raises(InputError, match="end with a Linear"):
        from_torch(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh()))
    with pytest.raises(InputError, match="shape|size"):
        from_torch(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(4, 1)))
    lin = torch.nn.Linear(2, 1)
    with torch.no_grad():
        lin.weight[0, 0] = float("nan")
    with pytest.raises(InputError, match="NaN"):
        from_torch(torch.nn.Sequential(lin))


def test_short_training_run_and_cli(tmp_path, capsys):
    from symeq.cli.numeric import register
    from symeq.numeric.train import build_mlp, load_npz_dataset, train_mlp

    rng = np.random.default_rng(0)
    p = tmp_path / "data.npz"
    np.savez(p, x=rng.standard_normal((40, 4, 4)), y=rng.integers(0, 3, 40))
    data = load_npz_dataset(p)
    assert data.shape == (4, 4, 1) and data.n_classes == 3
    net = build_mlp(16, 3, "tanh", widths=(8, 8))
    stats = train_mlp(net, data, "classifier", epochs=2, progress=False)
    assert "train_accuracy" in stats and stats["device"] == "cpu"
    # the same seed gives the same training on an explicit device (batches are drawn on the CPU)
    again = build_mlp(16, 3, "tanh", widths=(8, 8))
    again.load_state_dict(build_mlp(16, 3, "tanh", widths=(8, 8)).state_dict())
    if not torch.cuda.is_available():
        from symeq.errors import EngineMissing

        with pytest.raises(EngineMissing, match="CUDA"):
            train_mlp(again, data, "classifier", epochs=1, progress=False, device="cuda")
    assert train_mlp(again, data, "classifier", epochs=1, progress=False, device="auto")["device"] in ("cpu", "cuda")
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    out = tmp_path / "exp"
    args = parser.parse_args(["experiment", "mirror", "--activation", "tanh", "--epochs", "2", "--data", str(p),
                              "--task", "classifier", "--quiet", "--out", str(out), "--device", "auto"])
    assert args.func(args) == 0
    assert "f_1, horizontal" in capsys.readouterr().out
    assert (out / "table.md").is_file() and (out / "results.json").is_file()
    bad = tmp_path / "bad.npz"
    np.savez(bad, z=np.ones(3))
    with pytest.raises(InputError, match="\"x\""):
        load_npz_dataset(bad)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["autoencoder", "classifier"])
def test_mirror_experiment_reproduces_the_papers_direction(task, tmp_path):
    """Acceptance: tanh layer-1 error under the horizontal mirror clearly below GELU's; the
    vertical control high for both; the nets really are equivariant end to end (the theorem's
    premise).  Digits 8x8, the recipe of experiment.TASK_DEFAULTS, seed 0 (a few minutes)."""
    from symeq.numeric.experiment import run_mirror_experiment

    res = run_mirror_experiment(("tanh", "gelu"), task, out=tmp_path, progress=False)
    print(res["table"])
    tanh, gelu = res["_runs"]
    h, v = "f_1, horizontal", "f_1, vertical (control)"
    assert tanh.errors[h] < 0.5 * gelu.errors[h], res["table"]
    assert tanh.errors[v] > 2 * tanh.errors[h] and gelu.errors[v] > 2 * tanh.errors[h], res["table"]
    assert tanh.equivariance["horizontal"]["noise"] < 0.05, res["table"]
    assert "digits" in res["table"] and "CIFAR10" in res["table"]


def test_matrix_free_jacobian_by_torch_autograd_matches_numpy():
    from symeq.numeric.fdim import JacobianOperator
    from symeq.numeric.models import NumericDenseLayer, NumericModel

    rng = np.random.default_rng(2)
    a = numeric_activation({"type": "tanh_series", "order": 3})
    m = NumericModel(3, [NumericDenseLayer(rng.standard_normal((5, 3)), rng.standard_normal(5), a),
                         NumericDenseLayer(rng.standard_normal((2, 5)), rng.standard_normal(2))])
    X = rng.standard_normal((6, 3))
    ops = [JacobianOperator(m, X), JacobianOperator(m, X, backend="torch", device="cpu")]
    V, U = rng.standard_normal((m.n_params, 3)), rng.standard_normal((12, 2))
    assert np.allclose(ops[0].matmat(V), ops[1].matmat(V), rtol=0, atol=1e-12)
    assert np.allclose(ops[0].rmatmat(U), ops[1].rmatmat(U), rtol=0, atol=1e-12)
    r = functional_dimension(m, backend="torch", method="krylov", device="cpu", rng=0)
    assert r.rank == functional_dimension(m, rng=0).rank and r.backend.startswith("torch")


def test_gpu_check_script_runs_on_the_cpu(tmp_path):
    """benchmarks/gpu_check.py is the prepared device check; here its steps run on the CPU."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"
    proc = subprocess.run([sys.executable, str(script), "--device", "cpu", "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads((tmp_path / "gpu_check.json").read_text())
    assert res["all_agree"] and res["products_rel_diff"] < 1e-12 and res["training"]["device"] == "cpu"
    if not torch.cuda.is_available():
        proc = subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2 and "no CUDA device" in proc.stderr
