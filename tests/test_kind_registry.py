"""The registry of layer kinds (symeq/layers/registry.py): declarations, capability queries, refusal by
name, and that a new kind is its own module plus one line of KIND_MODULES."""

from __future__ import annotations

import sys
import types

import pytest

from symeq.activations import tanh_series
from symeq.attention import random_equivariant_attention
from symeq.errors import InputError
from symeq.examples import builtin_example
from symeq.io import model_from_json, model_to_json
from symeq.layers import registry
from symeq.layers.conv import ConvLayer, ConvShape
from symeq.layers.dense import DenseLayer
from symeq.layers.registry import (CAPABILITIES, KindUnsupported, all_support, any_supports, kind_class, kind_names,
                                   require, supports)
from symeq.models import Model


def _conv_model():
    conv = ConvLayer(ConvShape(1, 1, 3, 3, 3, 3, padding=1), [[[[0, 1, 0], [1, 2, 1], [0, 1, 0]]]], [1],
                     tanh_series(3))
    return Model(9, [conv, DenseLayer([[1] * 9], [0], None)])


def _models():
    return {"dense": builtin_example(), "conv2d": _conv_model(), "attention": random_equivariant_attention(rng=0)}


def test_every_kind_declares_known_capabilities_and_a_schema():
    assert set(kind_names()) == {"dense", "conv2d", "attention", "heads", "maxpool2d", "group_pool"}
    for name in kind_names():
        cls = kind_class(name)
        assert cls.kind == name
        assert set(cls.capabilities) <= set(CAPABILITIES), name
        assert isinstance(cls.schema, dict)
        for t, (allowed, required) in cls.schema.items():
            assert set(required) <= set(allowed), (name, t)
    with pytest.raises(InputError, match="unknown layer kind 'pooling'"):
        kind_class("pooling")
    with pytest.raises(ValueError, match="unknown capability"):
        supports(DenseLayer([[1]], [0], None), "tie walk")


def test_capabilities_follow_the_kind_not_the_class():
    m = _models()
    assert all_support(m["dense"].layers, "tie-walk") and not any_supports(m["dense"].layers, "token-mixing")
    assert not all_support(m["conv2d"].layers, "tie-walk")  # the tie walk reads dense rows
    assert m["conv2d"].sparse_actions and not m["dense"].sparse_actions
    att = m["attention"]
    assert att.token_mixing and not m["conv2d"].token_mixing
    chain = att.chain()
    heads, tokenwise = chain.layers[0], chain.layers[1]
    assert supports(heads, "head-blocks") and not supports(heads, "last-layer")
    # a token-wise dense layer is dense (tie walk, rows) but not a plain dense layer
    assert tokenwise.kind == "dense" and supports(tokenwise, "tie-walk") and supports(tokenwise, "dense-rows")
    assert not supports(tokenwise, "plain-dense") and not supports(tokenwise, "tensor-decision")


def test_float_twins_answer_as_their_exact_kind():
    from symeq.numeric.models import from_exact

    for name, model in _models().items():
        for exact_model in (model, model.chain()):
            twin = from_exact(exact_model)
            for a, b in zip(exact_model.layers, twin.layers):
                assert a.kind == b.kind
                for cap in CAPABILITIES:
                    assert supports(a, cap) == supports(b, cap), (name, a.kind, cap)


def test_a_missing_capability_is_refused_by_name():
    from symeq.equivariance import _ball_forward

    chain = random_equivariant_attention(rng=0).chain()
    with pytest.raises(KindUnsupported, match="^heads layers do not support ball evaluation$") as e:
        _ball_forward(chain, [0] * chain.input_dim)
    assert e.value.exit_code == 2 and e.value.kind == "heads" and e.value.capability == "ball-evaluation"
    with pytest.raises(KindUnsupported, match="conv2d layers do not support the tie walk"):
        require(_conv_model().layers, "tie-walk", "the tie walk")
    require(builtin_example().layers, "tie-walk")  # every dense layer has it: no refusal


def test_the_model_file_is_read_and_written_by_the_kinds():
    for name, model in _models().items():
        data = model_to_json(model)
        assert [spec["type"] for spec in data["layers"]][0] == name
        back = model_from_json(data)
        assert back.parameters_equal(model) and model_to_json(back) == data
    with pytest.raises(InputError, match='unknown layer type \'pool\'; known: "dense", "conv2d", "flatten", "attention"'):
        model_from_json({"format": "symeq-model/1", "input_dim": 1, "layers": [{"type": "pool"}]})


def test_parameters_equal_tells_layers_apart_by_kind_and_value():
    a, b = random_equivariant_attention(rng=0), random_equivariant_attention(rng=1)
    assert a.parameters_equal(a.copy()) and not a.parameters_equal(b)
    assert not _conv_model().parameters_equal(Model(9, [_conv_model().layers[0].dense(), DenseLayer([[1] * 9], [0], None)]))


class _ScaleLayer:
    """A toy kind for the test: x -> c x (an affine last layer), read from {"type": "scale", "c": "p/q"}."""

    kind = "scale"
    capabilities = frozenset({"last-layer"})
    schema = {"scale": (("type", "c", "dim"), ("type", "c", "dim"))}
    activation = None

    def __init__(self, c, dim):
        self.c, self.dim = c, dim
        self.in_dim = self.out_dim = dim
        self.bias = [0] * dim

    def to_json(self, declared_bias):
        return {"type": "scale", "c": str(self.c), "dim": self.dim}

    def parameters_key(self):
        return ("scale", self.c, self.dim)


def _read_scale(spec, ctx, at):
    from symeq.numbers import parse_number
    from symeq.schema import check_keys

    check_keys(spec, at, *_ScaleLayer.schema["scale"], error=InputError)
    if spec["dim"] != ctx.n:
        raise InputError(f"{at}.dim must be {ctx.n}")
    return _ScaleLayer(parse_number(spec["c"], f"{at}.c"), ctx.n)


@pytest.fixture
def scale_kind(monkeypatch):
    mod = types.ModuleType("toy_scale_kind")
    mod.LAYER_KINDS, mod.JSON_READERS, mod.JSON_ADVERTISED = (_ScaleLayer,), {"scale": _read_scale}, ("scale",)
    monkeypatch.setitem(sys.modules, "toy_scale_kind", mod)
    monkeypatch.setattr(registry, "KIND_MODULES", registry.KIND_MODULES + ("toy_scale_kind",))  # the one line
    monkeypatch.setattr(registry, "_KINDS", {})
    monkeypatch.setattr(registry, "_READERS", {})
    monkeypatch.setattr(registry, "_ADVERTISED", [])
    yield


def test_a_new_kind_is_its_module_plus_one_registry_line(scale_kind):
    data = {"format": "symeq-model/1", "input_dim": 2, "layers": [
        {"type": "dense", "weight": [[1, 2], [3, 4]], "bias": [0, 1], "activation": {"type": "tanh_series", "order": 3}},
        {"type": "scale", "c": "1/2", "dim": 2}]}
    model = model_from_json(data)
    assert "scale" in kind_names() and model.layers[1].kind == "scale"
    assert model_to_json(model)["layers"][1] == {"type": "scale", "c": "1/2", "dim": 2}
    # what the toy kind does not declare is refused by name, never silently taken as dense
    with pytest.raises(KindUnsupported, match="^scale layers do not support ball evaluation$"):
        from symeq.equivariance import _ball_forward

        _ball_forward(model, [0, 0])
    assert not all_support(model.layers, "tie-walk") and not model.token_mixing and not model.sparse_actions
    with pytest.raises(InputError, match='known: "dense", "conv2d", "flatten", "attention", "maxpool2d", "group_pool", "scale"'):
        model_from_json({**data, "layers": [{"type": "nope"}]})


def test_onnx_export_refuses_a_kind_without_it_by_name(tmp_path):
    pytest.importorskip("onnx", reason="ONNX export needs onnx: pip install 'symeq[onnx]'")
    from symeq.numeric.onnx_io import export_onnx

    with pytest.raises(InputError, match="attention layers do not support it"):
        export_onnx(random_equivariant_attention(rng=0), tmp_path / "a.onnx")
    assert not (tmp_path / "a.onnx").exists()


def test_a_layer_without_type_is_refused_by_the_exact_and_the_float_reader_alike():
    from symeq.numeric.models import model_from_json as float_model_from_json

    data = {"format": "symeq-model/1", "input_dim": 1, "layers": [{"weight": [[1]], "bias": [0], "activation": None}]}
    messages = []
    for read in (model_from_json, float_model_from_json):
        with pytest.raises(InputError, match='missing key "type"') as e:
            read(data)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
    data["layers"][0]["type"] = "dense"
    assert model_from_json(data).widths == float_model_from_json(data).widths == [1, 1]


class _FloatScale:
    """The toy kind's float twin: x -> c x in float64, with its torch module read and written."""

    kind = "scale"
    activation = None
    torch_classes = ("ToyScale",)
    json_types = ()

    def __init__(self, c: float, dim: int):
        self.c, self.dim = float(c), dim
        self.in_dim = self.out_dim = dim

    @classmethod
    def float_twin(cls, layer, activation):
        return cls(int(layer.c.p) / int(layer.c.q), layer.dim)

    def forward(self, X):
        return X * self.c

    def torch_modules(self, torch, dtype):
        return [_toy_torch_scale(torch)(self.c)]

    @classmethod
    def from_torch(cls, mod, name, shape, label):
        from symeq.numeric.models import numeric_activation

        layer = cls(mod.c, mod.dim)
        layer.activation = numeric_activation("relu")  # a hidden space's group, named as the pooling kinds name it
        return layer


def _toy_torch_scale(torch):
    class ToyScale(torch.nn.Module):
        def __init__(self, c, dim=2):
            super().__init__()
            self.c, self.dim = c, dim

        def forward(self, x):
            return x * self.c

    return ToyScale


def _scale_form(spec, shape):
    from symeq.canonical import normal

    return {"type": "scale", "c": normal(spec["c"])}, shape  # its own form: "dim" left out


@pytest.fixture
def scale_unit(monkeypatch):
    """The toy kind as a whole unit: its exact module (reader, digest form) and its float unit (float twin,
    torch modules), registered by the one line of KIND_MODULES and nothing else."""
    from symeq.canonical import Form
    from symeq.numeric import models as numeric_models

    exact, floating = types.ModuleType("toy_scale_unit"), types.ModuleType("toy_scale_unit.floating")
    layer_cls = type("_ScaleUnitLayer", (_ScaleLayer,), {"float_module": "toy_scale_unit.floating"})
    def read(spec, ctx, at):
        toy = _read_scale(spec, ctx, at)
        return layer_cls(toy.c, toy.dim)

    exact.LAYER_KINDS, exact.JSON_READERS, exact.JSON_ADVERTISED = (layer_cls,), {"scale": read}, ("scale",)
    exact.DIGEST_FORMS = {"scale": Form(_scale_form)}
    floating.FLOAT_LAYERS = (_FloatScale,)
    monkeypatch.setitem(sys.modules, "toy_scale_unit", exact)
    monkeypatch.setitem(sys.modules, "toy_scale_unit.floating", floating)
    monkeypatch.setattr(registry, "KIND_MODULES", registry.KIND_MODULES + ("toy_scale_unit",))  # the one line
    for table in ("_KINDS", "_READERS", "_FORMS", "_FORMS_AFTER_IMAGE"):
        monkeypatch.setattr(registry, table, {})
    monkeypatch.setattr(registry, "_ADVERTISED", [])
    caches = (numeric_models.float_class, numeric_models.torch_layer_classes, numeric_models.float_json_readers)
    for c in caches:
        c.cache_clear()
    yield
    for c in caches:
        c.cache_clear()


def test_a_new_kind_with_a_float_side_is_still_its_unit_plus_one_line(scale_unit):
    """The float twin, the float reader's hand-over, the digest form and torch in and out of a new kind follow
    from its own declarations: nothing outside the unit names it."""
    import numpy as np

    from symeq.digest import canonical_layers, layers_digest
    from symeq.numeric.models import from_exact, model_from_json as float_model_from_json

    data = {"format": "symeq-model/1", "input_dim": 2, "layers": [
        {"type": "dense", "weight": [[1, 2], [3, 4]], "bias": [0, 1], "activation": {"type": "tanh_series", "order": 3}},
        {"type": "scale", "c": "1/2", "dim": 2}]}
    model = model_from_json(data)
    assert canonical_layers(data["layers"])[1] == {"type": "scale", "c": "1/2"}  # the kind's form, not the plain one
    assert layers_digest(data["layers"], 2) == layers_digest(
        [data["layers"][0], {"type": "scale", "c": "0.5", "dim": 2}], 2)
    twin = from_exact(model)
    assert isinstance(twin.layers[1], _FloatScale) and twin.layers[1].c == 0.5
    x = np.array([[0.25, -1.0]])
    assert np.allclose(twin.forward(x), twin.layers[0].forward(x) * 0.5)
    # the float model-file reader: a type without a float reader goes to the exact reader, floats kept exact
    back = float_model_from_json({**data, "layers": [data["layers"][0], {"type": "scale", "c": 0.5, "dim": 2}]})
    assert isinstance(back.layers[1], _FloatScale) and back.layers[1].c == 0.5
    torch = pytest.importorskip("torch", reason="torch in and out needs torch: pip install 'symeq[numeric]'")
    from symeq.numeric.models import from_torch

    net = twin.to_torch()
    assert type(net[-1]).__name__ == "ToyScale"
    with torch.no_grad():
        assert np.allclose(net(torch.tensor(x)).numpy(), twin.forward(x))
    head = torch.nn.Linear(2, 1, dtype=torch.float64)  # the torch reader wants the affine last layer a Linear
    read = from_torch(torch.nn.Sequential(*net, head))
    assert isinstance(read.layers[1], _FloatScale) and read.layers[1].c == 0.5 and read.widths == [2, 2, 2, 1]
