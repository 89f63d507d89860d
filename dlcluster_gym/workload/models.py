"""Model zoo: size, skew, parallelism, default compute time and network-model parameters.

Every figure carries a source note (``ModelProfile.source``). Conventions:

- ``params_m`` / ``largest_tensor_m``: millions of parameters, from the reference implementation
  named in the note (torchvision, HuggingFace, the original paper). Tiresias skew = largest
  tensor / model size; ``skew`` is "high" when that ratio is at least 0.25, except for the six
  Dally models, which keep the class printed in Dally Table 1.
- ``compute_s``: forward+backward time of one iteration at ``batch_size`` per GPU on
  ``reference_gpu``. Where a trace holds measured step times we use them (ElasticFlow
  ``throughputs_A100``: 1 / iterations-per-second on one GPU; Pollux ``placements.csv``: the
  ``step_time`` of placement "1", one T4). Otherwise the time is scaled from a measured
  relative by forward FLOPs (CNNs) or parameter count (transformers) and says so.
- ``comm`` (:class:`CommParams`): derived from physics by :func:`physics_comm`: the gradient
  volume unscaled, one all-reduce per PyTorch DDP bucket (25 MB), and no overlap (Pollux
  placements.csv: the step-time increase over one GPU is about the measured sync time). This is
  the ``physics`` profile; other sources (Dally Table 1's per-tier calibration) are applied on
  top by ``workload.profiles.model_profile``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from dlcluster_gym.errors import UnknownNameError
from dlcluster_gym.workload.large_models import LARGE_MODELS, is_large_model, parse_large_model

DDP_BUCKET_BYTES = 25 * 1024 * 1024  # PyTorch DistributedDataParallel bucket_cap_mb=25
DEFAULT_OVERLAP = 0.0  # Pollux traces: sync_time ~ step-time increase, i.e. little overlap


@dataclass(frozen=True)
class CommParams:
    """Per-model parameters of the hierarchical all-reduce model (``perf.network``).

    volume_scale: multiplier on the fp32 gradient volume (1.0 = plain gradient bytes).
    messages: collective calls per iteration (gradient buckets); each pays the per-step
        latency of every tier the placement spans.
    overlap: fraction of the communication that compute hides, in [0, 1); the exposed time
        is ``(1 - overlap) * comm``.
    tier_scale: per-tier calibration factors (machine, rack, network) on the physical stage
        times. Dally 4.2.2 scales each model's ASTRA-sim workload file so that simulation
        matches measurement; we scale each tier's stage so that the model reproduces Dally
        Table 1 at the reference placements (``perf.network.calibrate``). 1.0 = uncalibrated.
    rate_cap_Bps: the highest rate (bytes/s) one flow of the job reaches on the network (rack
        and network stages), whatever the links would give it: a profile measured on a
        testbed whose jobs never fill their NIC (the Cassini testbed's Up rates,
        ``workload.profiles.testbed_model_profile``). ``inf`` (the default, every ``physics``
        and ``dally-table1`` profile) = the link share decides alone.
    backward_fraction: share of ``compute_s`` that is the backward pass, behind which the
        gradient buckets' all-reduces run (PyTorch DDP); 0 (the default) = no overlap rule,
        ``overlap`` applies. When > 0, ``overlap`` must be 0 and the exposed communication
        follows :func:`ddp_exposed_s` (profile source ``physics-ddp``).
    """

    volume_scale: float = 1.0
    messages: float = 1.0
    overlap: float = DEFAULT_OVERLAP
    tier_scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    rate_cap_Bps: float = math.inf
    backward_fraction: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.overlap < 1.0:
            raise ValueError(f"CommParams.overlap must be in [0, 1), got {self.overlap}")
        if self.volume_scale < 0 or self.messages < 0 or min(self.tier_scale) < 0:
            raise ValueError(f"CommParams must be non-negative, got {self}")
        if not 0.0 <= self.backward_fraction < 1.0:
            raise ValueError(
                f"CommParams.backward_fraction must be in [0, 1), got {self.backward_fraction}"
            )
        if self.backward_fraction > 0 and self.overlap > 0:
            raise ValueError("CommParams: set overlap or backward_fraction, not both")
        if not self.rate_cap_Bps > 0:
            raise ValueError(f"CommParams.rate_cap_Bps must be > 0, got {self.rate_cap_Bps}")


DDP_BACKWARD_FRACTION = 2.0 / 3.0
"""Backward pass share of one iteration's compute: the backward pass costs about twice the
forward (two matrix products per layer against one: Kaplan et al. 2020, "Scaling Laws",
sec. 2.1, C = 6N of which 2N forward; Narayanan et al. 2021, Megatron-LM, sec. 3.2)."""


def ddp_exposed_s(
    comm_s: float, compute_s: float, buckets: float, backward_fraction: float
) -> float:
    """Exposed communication of PyTorch DDP's bucketed all-reduce behind the backward pass.

    PyTorch DDP (Li et al., VLDB 2020, "PyTorch Distributed", sec. 3.2.3 and 4.2) launches the
    all-reduce of each gradient bucket as soon as the backward pass has filled it, so the
    communication runs while the rest of the backward pass computes. Our rule (the papers give
    no closed form; chosen before looking at any validation error): ``n = buckets`` equal
    buckets become ready evenly through the backward pass ``B = backward_fraction *
    compute_s`` (bucket ``k`` at ``k B / n``), their all-reduces run one after the other,
    each taking ``c = comm_s / n``. The last one ends at ``max_k (k B / n + (n - k + 1) c)``,
    so the time after the backward pass is::

        exposed = max(c, comm_s - B (n - 1) / n)

    (compute-bound: only the last bucket shows; communication-bound: everything but ``n - 1``
    bucket-intervals of the backward pass shows). One bucket = no overlap (``comm_s``).
    """
    n = max(1.0, float(buckets))
    if comm_s <= 0:
        return 0.0
    backward = backward_fraction * compute_s
    return max(comm_s / n, comm_s - backward * (n - 1.0) / n)


def physics_comm(params_m: float, overlap: float = DEFAULT_OVERLAP) -> CommParams:
    """CommParams from first principles: fp32 gradients, one all-reduce per 25 MB DDP bucket."""
    buckets = max(1, math.ceil(params_m * 1e6 * 4.0 / DDP_BUCKET_BYTES))
    return CommParams(volume_scale=1.0, messages=float(buckets), overlap=overlap)


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
    reference_gpu: str = "A100"
    family: str = "cnn"
    source: str = ""
    comm: CommParams = field(default_factory=CommParams)

    @property
    def grad_bytes(self) -> float:
        """fp32 gradient bytes exchanged per all-reduce of the full model."""
        return self.params_m * 1e6 * 4.0

    @property
    def skew_ratio(self) -> float:
        """Tiresias skew: largest tensor / model size."""
        return self.largest_tensor_m / self.params_m


def _skew(params_m: float, largest_m: float) -> Literal["high", "low"]:
    return "high" if largest_m / params_m >= 0.25 else "low"


def _p(
    name: str,
    params_m: float,
    largest_m: float,
    compute_s: float,
    batch: int,
    gpu: str,
    family: str,
    source: str,
    *,
    parallelism: Literal["data", "model"] = "data",
    skew: Literal["high", "low"] | None = None,
    comm: CommParams | None = None,
) -> ModelProfile:
    return ModelProfile(
        name=name,
        params_m=params_m,
        largest_tensor_m=largest_m,
        skew=skew or _skew(params_m, largest_m),
        parallelism=parallelism,
        compute_s=compute_s,
        batch_size=batch,
        reference_gpu=gpu,
        family=family,
        source=source,
        comm=comm or physics_comm(params_m),
    )


# Measured anchors (ElasticFlow throughputs_A100, 1 GPU, smallest global batch in the file).
_EF_RESNET50 = 1 / 6.8429775823889685  # bs 64 -> 0.1461 s
_EF_VGG16 = 1 / 5.053019147087227  # bs 64 -> 0.1979 s
_EF_INCEPTION3 = 1 / 4.820647821167875  # bs 64 -> 0.2074 s
_EF_BERT = 1 / 6.030661553957379  # bs 64 -> 0.1658 s
_EF_GPT2 = 1 / 7.3088357107474415  # bs 128 -> 0.1368 s
_EF_DEEPSPEECH2 = 1 / 3.0231577845960493  # bs 32 -> 0.3308 s

# Forward GFLOPs per 224x224 image (299x299 for Inception), as commonly tabulated for the
# torchvision / reference models; used only to scale compute times from measured relatives.
_GF_RESNET50 = 4.09
_GF_VGG16 = 15.47
_GF_INCEPTION3 = 5.71

_DALLY = (
    _p(
        "vgg11",
        132.86,
        102.76,
        _EF_VGG16 * 7.61 / _GF_VGG16,
        64,
        "A100",
        "cnn",
        "torchvision vgg11: 132.9M params; largest tensor fc6 25088x4096 = 102.8M; compute: "
        "ElasticFlow throughputs_A100 vgg16 1-GPU bs64 scaled by forward GFLOPs 7.61/15.47",
        skew="high",
    ),
    _p(
        "alexnet",
        61.10,
        37.75,
        _EF_RESNET50 * 0.71 / _GF_RESNET50,
        64,
        "A100",
        "cnn",
        "torchvision alexnet: 61.1M params; largest tensor fc6 9216x4096 = 37.7M; compute: "
        "ElasticFlow throughputs_A100 resnet50 1-GPU bs64 scaled by forward GFLOPs 0.71/4.09",
        skew="high",
    ),
    _p(
        "mobilenetv3",
        5.48,
        1.28,
        _EF_RESNET50 * 0.22 / _GF_RESNET50,
        64,
        "A100",
        "cnn",
        "torchvision mobilenet_v3_large: 5.48M params; largest tensor classifier 1280x1000 = "
        "1.28M (skew 0.23; Dally Table 1 class 'High'); compute: ElasticFlow throughputs_A100 "
        "resnet50 1-GPU bs64 scaled by forward GFLOPs 0.22/4.09",
        skew="high",
    ),
    _p(
        "resnet18",
        11.69,
        2.36,
        _EF_RESNET50 * 1.82 / _GF_RESNET50,
        64,
        "A100",
        "cnn",
        "torchvision resnet18: 11.7M params; largest tensor layer4 3x3 conv 512x512 = 2.36M; "
        "compute: ElasticFlow throughputs_A100 resnet50 1-GPU bs64 scaled by GFLOPs 1.82/4.09",
        skew="low",
    ),
    _p(
        "resnet50",
        25.56,
        2.36,
        _EF_RESNET50,
        64,
        "A100",
        "cnn",
        "torchvision resnet50: 25.6M params; largest tensor layer4 3x3 conv 512x512 = 2.36M "
        "(fc 2048x1000 = 2.05M); compute: ElasticFlow throughputs_A100 resnet50 1-GPU bs64",
        skew="low",
    ),
    _p(
        "bert-large",
        335.1,
        31.26,
        _EF_BERT * 335.1 / 110.1,
        64,
        "A100",
        "nlp",
        "HuggingFace bert-large-uncased: 335M params; largest tensor word embeddings "
        "30522x1024 = 31.3M; compute: ElasticFlow throughputs_A100 bert (BERT-base, 110M) "
        "1-GPU bs64 scaled by parameter count 335/110",
        skew="low",
    ),
)

DALLY_MODELS: tuple[str, ...] = (
    "vgg11",
    "alexnet",
    "mobilenetv3",
    "resnet18",
    "resnet50",
    "bert-large",
)

_OTHERS = (
    # ---- ElasticFlow / Philly (ElasticFlow) / Tiresias trace models -------------------------
    _p(
        "vgg16",
        138.36,
        102.76,
        _EF_VGG16,
        64,
        "A100",
        "cnn",
        "torchvision vgg16: 138.4M params; largest tensor fc6 25088x4096 = 102.8M; compute: "
        "ElasticFlow throughputs_A100 vgg16 1-GPU bs64",
    ),
    _p(
        "vgg19",
        143.67,
        102.76,
        _EF_VGG16 * 19.63 / _GF_VGG16,
        64,
        "A100",
        "cnn",
        "torchvision vgg19: 143.7M params; largest tensor fc6 25088x4096 = 102.8M; compute: "
        "ElasticFlow throughputs_A100 vgg16 1-GPU bs64 scaled by forward GFLOPs 19.63/15.47",
    ),
    _p(
        "inception3",
        27.16,
        2.05,
        _EF_INCEPTION3,
        64,
        "A100",
        "cnn",
        "torchvision inception_v3 (with aux head): 27.2M params; largest tensor fc 2048x1000 "
        "= 2.05M; compute: ElasticFlow throughputs_A100 inception3 1-GPU bs64",
    ),
    _p(
        "inception4",
        42.68,
        1.54,
        _EF_INCEPTION3 * 12.3 / _GF_INCEPTION3,
        64,
        "A100",
        "cnn",
        "Inception-v4 (Szegedy et al. 2017, timm inception_v4): 42.7M params; largest tensor "
        "fc 1536x1000 = 1.54M; compute: ElasticFlow inception3 1-GPU bs64 scaled by forward "
        "GFLOPs 12.3/5.71",
    ),
    _p(
        "googlenet",
        6.62,
        1.02,
        _EF_RESNET50 * 1.50 / _GF_RESNET50,
        64,
        "A100",
        "cnn",
        "torchvision googlenet (no aux heads): 6.6M params; largest tensor fc 1024x1000 = "
        "1.02M; compute: ElasticFlow resnet50 1-GPU bs64 scaled by forward GFLOPs 1.50/4.09",
    ),
    _p(
        "resnet101",
        44.55,
        2.36,
        _EF_RESNET50 * 7.83 / _GF_RESNET50,
        64,
        "A100",
        "cnn",
        "torchvision resnet101: 44.5M params; largest tensor 3x3 conv 512x512 = 2.36M; "
        "compute: ElasticFlow resnet50 1-GPU bs64 scaled by forward GFLOPs 7.83/4.09",
    ),
    _p(
        "resnet152",
        60.19,
        2.36,
        _EF_RESNET50 * 11.56 / _GF_RESNET50,
        64,
        "A100",
        "cnn",
        "torchvision resnet152: 60.2M params; largest tensor 3x3 conv 512x512 = 2.36M; "
        "compute: ElasticFlow resnet50 1-GPU bs64 scaled by forward GFLOPs 11.56/4.09",
    ),
    _p(
        "bert",
        110.1,
        23.44,
        _EF_BERT,
        64,
        "A100",
        "nlp",
        "HuggingFace bert-base-uncased: 110M params; largest tensor word embeddings 30522x768 "
        "= 23.4M; compute: ElasticFlow throughputs_A100 bert 1-GPU bs64 (Pollux placements.csv "
        "gives 0.92 s at local bsz 12 on one T4)",
    ),
    _p(
        "gpt2",
        124.4,
        38.6,
        _EF_GPT2,
        128,
        "A100",
        "nlp",
        "HuggingFace gpt2 (small): 124M params; largest tensor wte 50257x768 = 38.6M; "
        "compute: ElasticFlow throughputs_A100 gpt2 1-GPU bs128",
    ),
    _p(
        "deepspeech2",
        86.5,
        5.37,
        _EF_DEEPSPEECH2,
        32,
        "A100",
        "speech",
        "deepspeech.pytorch DeepSpeech2 default (2 conv + 5 BiLSTM layers, hidden 1024, RNN "
        "input 1312): ~86.5M params; largest tensor first-layer weight_ih 4096x1312 = 5.37M; "
        "compute: ElasticFlow throughputs_A100 deepspeech2 1-GPU bs32 (Pollux "
        "placements.csv: 0.68 s at local bsz 20 on one T4)",
    ),
    # ---- Pollux (AdaptDL OSDI'21 artifact) models, measured on T4 ---------------------------
    _p(
        "cifar10",
        11.17,
        2.36,
        0.10378,
        129,
        "T4",
        "cnn",
        "Pollux cifar10 = ResNet-18 (CIFAR variant, 3x3 stem): 11.2M params; largest tensor "
        "3x3 conv 512x512 = 2.36M; compute: Pollux placements.csv step_time at placement 1, "
        "local bsz 129 on T4",
    ),
    _p(
        "imagenet",
        25.56,
        2.36,
        0.25339,
        40,
        "T4",
        "cnn",
        "Pollux imagenet = torchvision ResNet-50: 25.6M params; largest tensor 3x3 conv "
        "512x512 = 2.36M; compute: Pollux placements.csv step_time at placement 1, local bsz "
        "40 on T4",
    ),
    _p(
        "ncf",
        1.6027,
        0.7731,
        0.0073059,
        32,
        "T4",
        "recommendation",
        "Pollux ncf = NeuMF-end on MovieLens-1M (adaptdl benchmark/models/ncf: config.py "
        "dataset ml-1m, model NeuMF-end; main.py factor_num 32, num_layers 3), 6,040 users x "
        "3,706 items: GMF embeddings 9,746x32, MLP embeddings 9,746x128, MLP 256-128-64-32, "
        "predict 64-1 = 1,602,657 params; largest tensor user MLP embedding 6040x128 = "
        "0.773M; compute: Pollux placements.csv step_time at placement 1, local bsz 32 on T4",
    ),
    _p(
        "yolov3",
        61.95,
        4.72,
        0.32610,
        8,
        "T4",
        "detection",
        "YOLOv3-416 (Darknet-53 backbone, ultralytics): 61.9M params; largest tensor 3x3 conv "
        "512->1024 = 4.72M; compute: Pollux placements.csv step_time at placement 1, local "
        "bsz 8 on T4",
    ),
    # ---- Cassini thesis Table 4.2 models -----------------------------------------------------
    _p(
        "wide-resnet101",
        126.89,
        9.44,
        _EF_RESNET50 * 22.8 / _GF_RESNET50,
        64,
        "A100",
        "cnn",
        "torchvision wide_resnet101_2 (Cassini Table 4.2 WideResNet101): 126.9M params; "
        "largest tensor 3x3 conv 1024x1024 = 9.44M; compute: ElasticFlow resnet50 1-GPU bs64 "
        "scaled by forward GFLOPs 22.8/4.09",
    ),
    _p(
        "roberta",
        124.6,
        38.6,
        _EF_BERT * 124.6 / 110.1,
        64,
        "A100",
        "nlp",
        "HuggingFace roberta-base (Cassini Table 4.2 RoBERTa): 124.6M params; largest tensor "
        "word embeddings 50265x768 = 38.6M; compute: ElasticFlow bert 1-GPU bs64 scaled by "
        "parameter count 124.6/110.1",
    ),
    _p(
        "camembert",
        110.6,
        24.6,
        _EF_BERT * 110.6 / 110.1,
        64,
        "A100",
        "nlp",
        "HuggingFace camembert-base (Cassini Table 4.2 CamemBERT): 110.6M params; largest "
        "tensor word embeddings 32005x768 = 24.6M; compute: ElasticFlow bert 1-GPU bs64 "
        "scaled by parameter count",
    ),
    _p(
        "xlm",
        249.9,
        65.5,
        _EF_BERT * 249.9 / 110.1,
        32,
        "A100",
        "nlp",
        "HuggingFace xlm-mlm-enfr-1024 (Cassini Table 4.2 XLM, 1116 MB): ~250M params; "
        "largest tensor embeddings 64139x1024 = 65.7M; compute: ElasticFlow bert 1-GPU bs64 "
        "scaled by parameter count",
    ),
    _p(
        "gpt1",
        116.5,
        31.1,
        _EF_GPT2 * 116.5 / 124.4,
        64,
        "A100",
        "nlp",
        "openai-gpt (GPT-1, Cassini Table 4.2 GPT1, model parallel): 116.5M params; largest "
        "tensor token embeddings 40478x768 = 31.1M; compute: ElasticFlow gpt2 1-GPU bs128 "
        "scaled by parameter count",
        parallelism="model",
    ),
    _p(
        "gpt2-medium",
        354.8,
        51.5,
        _EF_GPT2 * 354.8 / 124.4,
        32,
        "A100",
        "nlp",
        "HuggingFace gpt2-medium (Cassini Table 4.2 GPT2, 1623 MB lower bound, model "
        "parallel): 354.8M params; largest tensor wte 50257x1024 = 51.5M; compute: ElasticFlow "
        "gpt2 1-GPU bs128 scaled by parameter count",
        parallelism="model",
    ),
    _p(
        "gpt3",
        488.0,
        64.3,
        _EF_GPT2 * 488.0 / 124.4,
        16,
        "A100",
        "nlp",
        "Cassini Table 4.2 GPT3 (model parallel, DeepSpeed), 1952 MB lower bound / 4 B per "
        "fp32 param = 488M params; largest tensor token embeddings 50257x1280 = 64.3M "
        "(d_model 1280 assumed); compute: ElasticFlow gpt2 1-GPU scaled by parameter count",
        parallelism="model",
    ),
    _p(
        "dlrm",
        222.5,
        162.1,
        0.05,
        1024,
        "A100",
        "recommendation",
        "Meta DLRM (Cassini Table 4.2, model parallel, 890 MB lower bound / 4 B = 222.5M "
        "params); largest tensor Criteo Kaggle embedding table 10,131,227 x 16 = 162.1M; "
        "compute: no trace measurement, 0.05 s per bs1024 iteration is our estimate",
        parallelism="model",
    ),
)


@cache
def large_model_profile(name: str) -> ModelProfile:
    """Zoo entry of a Crius Table 2 model (``workload.large_models``). Jobs of these models run
    with adaptive parallelism (``perf.parallelism``), which decides their speed; ``compute_s``
    here is only nominal: the global batch on one A100 at 50% of its fp16 peak, memory
    ignored."""
    model, batch = parse_large_model(name)
    flops = 3.0 * model.fwd_flops_per_sample * batch
    family = {"bert": "nlp", "moe": "nlp", "wresnet": "cnn"}[model.family]
    label = model.name if batch == model.default_batch else f"{model.name}-bs{batch}"
    return _p(
        label, model.params / 1e6, float(model.layers.params.max()) / 1e6,
        flops / (312e12 * 0.5), batch, "A100", family,
        f"Crius Table 2 {model.description}; global batch {batch}; runs with adaptive "
        "parallelism (perf.parallelism)",
        parallelism="model",
    )  # fmt: skip


MODEL_ZOO: dict[str, ModelProfile] = {p.name: p for p in (*_DALLY, *_OTHERS)}
MODEL_ZOO.update({name: large_model_profile(name) for name in LARGE_MODELS})

# Spelling variants seen in traces and papers, after normalisation (lower case, "_" and " "
# turned into "-").
_ALIASES: dict[str, str] = {
    "mobilenet-v3": "mobilenetv3",
    "mobilenet-v3-large": "mobilenetv3",
    "mobilenetv3-large": "mobilenetv3",
    "bertlarge": "bert-large",
    "bert-large-uncased": "bert-large",
    "bert-base": "bert",
    "bert-base-uncased": "bert",
    "inception-v3": "inception3",
    "inceptionv3": "inception3",
    "inception-3": "inception3",
    "inception-v4": "inception4",
    "inceptionv4": "inception4",
    "resnet-18": "resnet18",
    "resnet-50": "resnet50",
    "resnet-101": "resnet101",
    "resnet-152": "resnet152",
    "vgg-11": "vgg11",
    "vgg-16": "vgg16",
    "vgg-19": "vgg19",
    "wideresnet101": "wide-resnet101",
    "wide-resnet101-2": "wide-resnet101",
    "gpt-1": "gpt1",
    "gpt-2": "gpt2",
    "gpt-3": "gpt3",
    "ds2": "deepspeech2",
    "deepspeech": "deepspeech2",
    "neumf": "ncf",
    "yolo-v3": "yolov3",
    "resnet18-cifar10": "cifar10",
    "resnet50-imagenet": "imagenet",
}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def get_model(name: str) -> ModelProfile:
    """Look up a model by name (case-insensitive; ``_``/``-`` and common aliases accepted)."""
    key = _normalise(name)
    key = _ALIASES.get(key, key)
    if key not in MODEL_ZOO:
        squashed = key.replace("-", "")
        key = next((k for k in MODEL_ZOO if k.replace("-", "") == squashed), key)
    try:
        return MODEL_ZOO[key]
    except KeyError:
        if is_large_model(key):
            return large_model_profile(key)
        raise UnknownNameError("model", name, MODEL_ZOO) from None


def model_names() -> list[str]:
    """Sorted canonical names of the zoo."""
    return sorted(MODEL_ZOO)
