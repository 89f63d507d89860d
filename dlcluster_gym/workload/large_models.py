"""The large models of Crius Table 2, layer by layer, for the parallelism model.

Crius (8.1, Table 2) trains Wide-ResNet (0.5-6.8 B parameters, global batch 256/512/1024),
BERT (0.76-6.7 B, batch 128/256/512) and GShard MoE (0.69-27 B, batch 256/512/1024), the
model suites of Alpa. The paper gives only the parameter counts; the architectures below are
our choices, each documented next to its builder, picked so that the computed parameter count
is within 10% of the nominal size (a test checks it):

- **BERT**: the GPT-3 paper's shapes for those sizes (0.76 B: 24 layers x hidden 1536; 1.3 B:
  24 x 2048; 2.6 B: 32 x 2560; 6.7 B: 32 x 4096), sequence length 512, vocabulary 30,522.
- **GShard MoE**: Alpa's MoE suite shapes (hidden 768-2048, 8-16 layers, every second layer an
  MoE layer with top-2 gating); the expert count is chosen to reach the nominal size.
- **Wide-ResNet**: a ResNet-50 layout (bottleneck blocks 3-4-6-3 at 56/28/14/7 px from a
  224 px input) with width factor 2 and the base channel width scaled to the nominal size
  (Alpa's WResNet suite: width 2 up to 4 B, width 16 for 6.8 B; we keep width 2 and widen).

Each model is a sequence of layers (the operators the stage partitioner of Crius 4.2 maps GPUs
to). Per layer and per training sample: forward FLOPs, parameters, activation bytes kept for
the backward pass (fp16), the bytes of its output (what a pipeline boundary after it sends),
and the bytes its tensor-parallel collectives move (Megatron-style all-reduces for dense
layers and convolutions, all-to-all dispatch/combine for MoE expert layers).

Names are ``<family>-<size>`` (``bert-1.3b``, ``moe-27b``, ``wresnet-6.8b``), optionally with a
global batch suffix ``-bs<N>`` (``bert-1.3b-bs512``); without it the middle batch of Table 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import numpy as np

from dlcluster_gym.errors import ConfigError, UnknownNameError

FP16 = 2.0  # bytes per activation / gradient element


@dataclass(frozen=True)
class LayerTable:
    """Per-layer arrays (length L), per training sample unless noted."""

    fwd_flops: np.ndarray  # forward FLOPs per sample
    params: np.ndarray  # parameters (count)
    act_bytes: np.ndarray  # activation bytes kept for backward, per sample
    out_bytes: np.ndarray  # bytes of the layer's output (pipeline boundary after it)
    tp_bytes: np.ndarray  # bytes per tensor-parallel collective, per sample
    tp_calls: np.ndarray  # collectives per layer per micro-batch (forward + backward)
    tp_alltoall: np.ndarray  # bool: the collectives are all-to-all (MoE experts)
    # fraction of the layer's parameters sharded by tensor parallelism (the rest replicated)
    tp_shard: np.ndarray


@dataclass(frozen=True)
class LargeModel:
    """One Crius Table 2 model at one size."""

    name: str  # e.g. "bert-1.3b"
    family: str  # "bert" | "moe" | "wresnet"
    nominal_params_b: float
    batch_sizes: tuple[int, int, int]  # Table 2
    layers: LayerTable
    description: str

    @property
    def params(self) -> float:
        return float(self.layers.params.sum())

    @property
    def default_batch(self) -> int:
        return self.batch_sizes[1]

    @property
    def num_layers(self) -> int:
        return int(self.layers.fwd_flops.size)

    @property
    def fwd_flops_per_sample(self) -> float:
        return float(self.layers.fwd_flops.sum())


def _table(rows: list[tuple[float, float, float, float, float, float, bool, float]]) -> LayerTable:
    a = list(zip(*rows, strict=True))
    return LayerTable(
        fwd_flops=np.asarray(a[0], dtype=np.float64),
        params=np.asarray(a[1], dtype=np.float64),
        act_bytes=np.asarray(a[2], dtype=np.float64),
        out_bytes=np.asarray(a[3], dtype=np.float64),
        tp_bytes=np.asarray(a[4], dtype=np.float64),
        tp_calls=np.asarray(a[5], dtype=np.float64),
        tp_alltoall=np.asarray(a[6], dtype=bool),
        tp_shard=np.asarray(a[7], dtype=np.float64),
    )


BERT_SEQ = 512
BERT_VOCAB = 30522


def _transformer_layer(h: int, s: int, heads: int) -> tuple:
    """One dense transformer layer (Megatron-LM accounting, fp16, no recomputation).

    FLOPs 24 s h^2 + 4 s^2 h; parameters 12 h^2; kept activations s h (34 + 5 heads s / h)
    bytes (Korthikanti et al.'s count); tensor parallelism: 2 all-reduces of s h fp16 values
    forward and 2 backward.
    """
    flops = 24.0 * s * h * h + 4.0 * s * s * h
    params = 12.0 * h * h + 13.0 * h
    act = s * h * (34.0 + 5.0 * heads * s / h)
    out = s * h * FP16
    return (flops, params, act, out, s * h * FP16, 4.0, False, 1.0)


def _embedding(vocab: int, h: int, s: int) -> tuple:
    """Token + position embeddings: little compute, vocab x h parameters (sharded by TP)."""
    return (2.0 * s * h, (vocab + s) * h, s * h * FP16, s * h * FP16, s * h * FP16, 2.0, False, 1.0)


def _lm_head(vocab: int, h: int, s: int) -> tuple:
    """Output projection tied to the embedding (no extra parameters): 2 s h vocab FLOPs."""
    return (2.0 * s * h * vocab, 0.0, s * vocab * FP16, 0.0, s * h * FP16, 2.0, False, 1.0)


def _bert(size: str, layers: int, h: int, heads: int, nominal: float) -> LargeModel:
    rows = [_embedding(BERT_VOCAB, h, BERT_SEQ)]
    rows += [_transformer_layer(h, BERT_SEQ, heads) for _ in range(layers)]
    rows.append(_lm_head(BERT_VOCAB, h, BERT_SEQ))
    return LargeModel(
        f"bert-{size}", "bert", nominal, (128, 256, 512), _table(rows),
        f"BERT {layers} layers x hidden {h}, {heads} heads, sequence {BERT_SEQ} (GPT-3 shapes)",
    )  # fmt: skip


MOE_SEQ = 1024
MOE_VOCAB = 32000
MOE_TOPK = 2


def _moe_layer(h: int, s: int, heads: int, experts: int) -> tuple:
    """One GShard MoE layer: attention (4 h^2) + ``experts`` FFN experts (8 h^2 each).

    Each token goes to its top-2 experts, so the FLOPs are those of a dense layer with a
    2x wider FFN; parameters grow with the expert count. Tensor (expert) parallelism shards
    the experts over the GPUs and exchanges tokens with all-to-all: dispatch and combine,
    forward and backward, of top-2 x s x h fp16 values.
    """
    flops = 8.0 * s * h * h + 4.0 * s * s * h + MOE_TOPK * 16.0 * s * h * h
    params = 4.0 * h * h + experts * 8.0 * h * h + h * experts
    act = s * h * (34.0 + 5.0 * heads * s / h) + MOE_TOPK * 8.0 * s * h * FP16
    out = s * h * FP16
    return (flops, params, act, out, MOE_TOPK * s * h * FP16, 4.0, True, 1.0)


def _moe(size: str, layers: int, h: int, heads: int, experts: int, nominal: float) -> LargeModel:
    rows = [_embedding(MOE_VOCAB, h, MOE_SEQ)]
    for i in range(layers):
        if i % 2:
            rows.append(_moe_layer(h, MOE_SEQ, heads, experts))
        else:
            rows.append(_transformer_layer(h, MOE_SEQ, heads))
    rows.append(_lm_head(MOE_VOCAB, h, MOE_SEQ))
    return LargeModel(
        f"moe-{size}", "moe", nominal, (256, 512, 1024), _table(rows),
        f"GShard MoE {layers} layers (every 2nd MoE, {experts} experts, top-2) x hidden {h}, "
        f"sequence {MOE_SEQ}",
    )  # fmt: skip


WRES_BLOCKS = (3, 4, 6, 3)  # ResNet-50 layout
WRES_PIXELS = (56 * 56, 28 * 28, 14 * 14, 7 * 7)


def _wresnet(size: str, base: int, width: int, nominal: float) -> LargeModel:
    """Wide-ResNet-50: bottleneck blocks with inner width ``width * base * 2^k`` and output
    ``4 * base * 2^k`` channels at stage k. FLOPs = 2 x MACs; kept activations ~ 4 tensors of
    the block's widest shape; tensor (channel) parallelism all-reduces the block output
    forward and backward, so it is expensive at the early, high-resolution stages."""
    rows = []
    stem_out = base
    rows.append(
        (
            2.0 * 147 * 3 * base * 112 * 112,
            147.0 * 3 * base,
            112 * 112 * base * FP16 * 2,
            WRES_PIXELS[0] * base * FP16,
            WRES_PIXELS[0] * base * FP16,
            2.0,
            False,
            1.0,
        )
    )
    c_in = stem_out
    for k, (blocks, px) in enumerate(zip(WRES_BLOCKS, WRES_PIXELS, strict=True)):
        inner = width * base * 2**k
        c_out = 4 * base * 2**k
        for _ in range(blocks):
            macs_per_px = c_in * inner + 9 * inner * inner + inner * c_out
            params = macs_per_px + (c_in * c_out if c_in != c_out else 0)
            flops = 2.0 * params * px
            act = px * (c_in + 2 * inner + c_out) * FP16 * 2.0
            out = px * c_out * FP16
            rows.append((flops, float(params), act, out, out, 4.0, False, 1.0))
            c_in = c_out
    rows.append((2.0 * c_in * 1000, c_in * 1000.0, 1000 * FP16, 1000 * FP16, 1000 * FP16,
                 2.0, False, 1.0))  # fmt: skip
    return LargeModel(
        f"wresnet-{size}", "wresnet", nominal, (256, 512, 1024), _table(rows),
        f"Wide-ResNet-50 (blocks 3-4-6-3), base width {base}, width factor {width}, 224 px",
    )  # fmt: skip


def _build() -> dict[str, LargeModel]:
    models = (
        _wresnet("0.5b", 174, 2, 0.5),
        _wresnet("1b", 247, 2, 1.0),
        _wresnet("2b", 349, 2, 2.0),
        _wresnet("4b", 495, 2, 4.0),
        _wresnet("6.8b", 645, 2, 6.8),
        _bert("0.76b", 24, 1536, 16, 0.76),
        _bert("1.3b", 24, 2048, 16, 1.3),
        _bert("2.6b", 32, 2560, 32, 2.6),
        _bert("6.7b", 32, 4096, 32, 6.7),
        _moe("0.69b", 8, 768, 12, 32, 0.69),
        _moe("1.3b", 16, 768, 12, 32, 1.3),
        _moe("2.4b", 16, 1024, 16, 32, 2.4),
        _moe("10b", 16, 1536, 16, 64, 10.0),
        _moe("27b", 16, 2048, 32, 96, 27.0),
    )
    return {m.name: m for m in models}


LARGE_MODELS: dict[str, LargeModel] = _build()
FAMILIES: tuple[str, ...] = ("wresnet", "bert", "moe")

_NAME = re.compile(r"^(?P<base>[a-z]+-[0-9.]+b)(?:-bs(?P<bs>[0-9]+))?$")


def is_large_model(name: str) -> bool:
    """Whether ``name`` names a Crius Table 2 model (with or without a batch suffix)."""
    m = _NAME.match(name.strip().lower())
    return bool(m) and m.group("base") in LARGE_MODELS


@cache
def parse_large_model(name: str) -> tuple[LargeModel, int]:
    """(model, global batch) for a name like ``bert-1.3b`` or ``bert-1.3b-bs512``.

    The batch must be one of the model's Table 2 batch sizes; unknown names list the known.
    """
    m = _NAME.match(name.strip().lower())
    if not m or m.group("base") not in LARGE_MODELS:
        raise UnknownNameError("large model", name, LARGE_MODELS)
    model = LARGE_MODELS[m.group("base")]
    bs = int(m.group("bs")) if m.group("bs") else model.default_batch
    if bs not in model.batch_sizes:
        raise ConfigError(
            f"model {name!r}: global batch {bs} is not one of {model.name}'s Table 2 batch "
            f"sizes ({', '.join(map(str, model.batch_sizes))})"
        )
    return model, bs


def large_model_name(model: str, batch: int | None = None) -> str:
    """Canonical job model name for ``model`` at global batch ``batch``."""
    base, _ = parse_large_model(model)
    return base.name if batch is None or batch == base.default_batch else f"{base.name}-bs{batch}"
