"""Model zoo: figures, sources, lookup."""

from __future__ import annotations

import pytest

from dlcluster_gym.errors import UnknownNameError
from dlcluster_gym.workload.models import DALLY_MODELS, MODEL_ZOO, get_model, model_names

TRACE_MODELS = (
    "resnet50", "vgg16", "vgg19", "inception3", "bert", "gpt2", "deepspeech2", "cifar10",
    "ncf", "imagenet", "yolov3", "alexnet", "googlenet", "inception4", "resnet101",
    "resnet152", "vgg11",
)  # fmt: skip
CASSINI_MODELS = ("vgg11", "vgg16", "vgg19", "wide-resnet101", "resnet50", "bert", "roberta",
                  "camembert", "xlm", "gpt1", "gpt2-medium", "gpt3", "dlrm")  # fmt: skip


@pytest.mark.parametrize("name", sorted(MODEL_ZOO))
def test_every_entry_has_positive_figures_and_a_source(name: str) -> None:
    p = MODEL_ZOO[name]
    assert p.name == name
    assert p.params_m > 0 and p.compute_s > 0 and p.batch_size > 0
    assert 0 < p.largest_tensor_m <= p.params_m
    assert p.grad_bytes == pytest.approx(p.params_m * 4e6)
    assert p.skew in ("high", "low") and p.parallelism in ("data", "model")
    assert len(p.source) > 20
    assert p.comm.volume_scale >= 0 and p.comm.messages >= 0
    assert 0 <= p.comm.overlap < 1 and min(p.comm.tier_scale) > 0


def test_dally_models_and_table1_skew() -> None:
    assert DALLY_MODELS == ("vgg11", "alexnet", "mobilenetv3", "resnet18", "resnet50",
                            "bert-large")  # fmt: skip
    skews = {m: get_model(m).skew for m in DALLY_MODELS}
    assert skews == {"vgg11": "high", "alexnet": "high", "mobilenetv3": "high",
                     "resnet18": "low", "resnet50": "low", "bert-large": "low"}  # fmt: skip


@pytest.mark.parametrize("name", TRACE_MODELS + CASSINI_MODELS)
def test_trace_and_cassini_models_present(name: str) -> None:
    assert get_model(name).name == name


def test_model_parallel_entries() -> None:
    for name in ("gpt1", "gpt2-medium", "gpt3", "dlrm"):
        assert get_model(name).parallelism == "model"
    assert get_model("resnet50").parallelism == "data"


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("BERT-large", "bert-large"),
        ("bert_large", "bert-large"),
        ("MobileNetV3", "mobilenetv3"),
        ("inception_v3", "inception3"),
        ("ResNet50", "resnet50"),
        ("VGG-16", "vgg16"),
        ("WideResNet101", "wide-resnet101"),
        ("GPT-2", "gpt2"),
        ("wide_resnet101", "wide-resnet101"),
    ],
)
def test_aliases(alias: str, canonical: str) -> None:
    assert get_model(alias) is MODEL_ZOO[canonical]


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_model("not-a-model")
    err = info.value
    assert err.kind == "model" and err.name == "not-a-model"
    assert err.valid == model_names()
    assert "resnet50" in str(err) and "not-a-model" in str(err)
    with pytest.raises(KeyError):
        get_model("resnet51")


def test_model_names_sorted_and_complete() -> None:
    assert model_names() == sorted(MODEL_ZOO)
