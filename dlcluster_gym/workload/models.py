"""Model zoo: per-model profiles (STUB: being replaced by the calibrated zoo)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from dlcluster_gym.errors import UnknownNameError


@dataclass(frozen=True)
class CommParams:
    """Calibrated parameters of the network-tier model for one model."""

    volume_scale: float = 1.0
    messages: float = 50.0
    fixed_frac: float = 0.0


@dataclass(frozen=True)
class ModelProfile:
    """One DNN model: size, skew, parallelism, default compute time and comm parameters."""

    name: str
    params_m: float
    largest_tensor_m: float
    skew: Literal["high", "low"]
    parallelism: Literal["data", "model"]
    compute_s: float
    batch_size: int = 32
    reference_gpu: str = "V100"
    family: str = "cnn"
    source: str = ""
    comm: CommParams = field(default_factory=CommParams)

    @property
    def grad_bytes(self) -> float:
        return self.params_m * 1e6 * 4.0


DALLY_MODELS: tuple[str, ...] = (
    "vgg11", "alexnet", "mobilenetv3", "resnet18", "resnet50", "bert-large",
)

MODEL_ZOO: dict[str, ModelProfile] = {
    p.name: p
    for p in (
        ModelProfile("vgg11", 132.9, 102.8, "high", "data", 0.10),
        ModelProfile("alexnet", 61.1, 37.8, "high", "data", 0.03),
        ModelProfile("mobilenetv3", 5.5, 1.3, "high", "data", 0.02),
        ModelProfile("resnet18", 11.7, 2.4, "low", "data", 0.03),
        ModelProfile("resnet50", 25.6, 2.4, "low", "data", 0.10),
        ModelProfile("bert-large", 340.0, 31.3, "low", "data", 0.30, family="nlp"),
    )
}


def get_model(name: str) -> ModelProfile:
    key = name.lower().replace("_", "-")
    try:
        return MODEL_ZOO[key]
    except KeyError:
        raise UnknownNameError("model", name, MODEL_ZOO) from None


def model_names() -> list[str]:
    return sorted(MODEL_ZOO)
