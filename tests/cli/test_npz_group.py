"""The .npz layout keeps a group's label and generator names (a model saved from from_torch with
symeq's mirror used to come back as "group group" with generators g0, g1, ...)."""

import numpy as np
import pytest

from symeq.errors import InputError
from symeq.numeric.models import (NumericDenseLayer, NumericGroup, NumericModel, load_npz, numeric_activation,
                                  save_npz)


def _model(names=("swap",), label="swap2"):
    P = np.array([[0.0, 1.0], [1.0, 0.0]])
    layers = [NumericDenseLayer(np.array([[1.0, 2.0], [2.0, 1.0]]), np.zeros(2), numeric_activation("tanh")),
              NumericDenseLayer(np.array([[1.0, 1.0]]), np.zeros(1), None)]
    return NumericModel(2, layers, NumericGroup([(P, np.eye(1))], list(names), label), "t")


def test_label_and_names_survive_a_round_trip(tmp_path):
    save_npz(_model(), tmp_path / "m.npz")
    g = load_npz(tmp_path / "m.npz").group
    assert g.label == "swap2" and list(g.names) == ["swap"]


def test_a_file_without_them_names_the_group_after_the_file(tmp_path):
    save_npz(_model(), tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as z:
        arrays = {k: z[k] for k in z.files if k not in ("group_label", "group_names")}
    np.savez(tmp_path / "old.npz", **arrays)
    g = load_npz(tmp_path / "old.npz").group
    assert g.label == "old group"


def test_names_that_do_not_match_the_generators_are_refused(tmp_path):
    save_npz(_model(), tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["group_names"] = np.array(["a", "b"])
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError, match="2 names for 1 generators"):
        load_npz(tmp_path / "bad.npz")
