"""The Jacobian-rank method refuses a model whose per-point work arrays exceed the memory budget
before it starts (a 12x12 conv network once took 6 GB in `symeq explain` unguarded)."""

from symeq.activations import tanh_series
from symeq.cli import main
from symeq.fibre.jacobian import _work_bytes
from symeq.io import save_model
from symeq.layers.conv.nets import regular_network
from symeq.models import Model


def _conv_model(n: int) -> Model:
    layers, group = regular_network("C4", n, 1, 2, tanh_series(3), rng=0)
    return Model(layers[0].in_dim, layers, group, f"c4-{n}")


def test_conv_patches_are_counted_in_the_estimate():
    small, large = _conv_model(4), _conv_model(8)
    # the patches grow with the pixels: four times the pixels, about four times the bytes at equal N
    assert _work_bytes(large, 100, 1) > 3.9 * _work_bytes(small, 100, 1)
    dense_only = sum(3 * 8 * layer.out_dim * 100 + 2 * 8 * 100 * (layer.in_dim + 1) for layer in large.layers)
    assert _work_bytes(large, 100, 1) > dense_only


def test_memory_guard_refuses_before_the_work(tmp_path, capsys):
    path = tmp_path / "conv.json"
    save_model(_conv_model(8), path)
    code = main(["fibre", str(path), "--method", "jacobian-rank", "--memory", "0.01"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "per-point work arrays" in err and "GB estimated" in err
