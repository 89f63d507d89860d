"""Compute speed of a job with a fixed plan on each GPU type of a heterogeneous cluster.

A job's ``compute_s`` (and a trace's durations, which the workload turns into iterations)
is its compute per iteration on the cluster's **reference GPU type**: the type of the
cluster's first machine group (``Cluster.gpu_types[0]``). On a homogeneous cluster nothing
scales. On another type the compute of one iteration takes ``compute_s x scale``, with a
two-term roofline (our model; the source papers profile per type and publish no model):

    scale(type) = m x peak(ref) / peak(type) + (1 - m) x bandwidth(ref) / bandwidth(type)

``peak`` the dense fp16 throughput and ``bandwidth`` the memory bandwidth of the data sheets
(``cluster.catalog``), ``m`` the share of an iteration's compute bound by arithmetic on the
reference GPU, per model family (:data:`MATH_SHARE`): the rest is bound by memory traffic
(element-wise layers, normalisation, optimizer updates, embedding lookups). So speed-ups
between types differ by model, as measured ones do: a convolutional network gains more from
a GPU with more arithmetic than an embedding-bound recommendation model.

A data-parallel job spread over GPUs of several types runs at the pace of its slowest GPU
(synchronous training waits for the slowest worker): ``scale`` is the largest over the types
it holds. Communication does not scale with the GPU type. Jobs with adaptive parallelism
(``perf.parallelism``) price each type themselves, and parameter-server jobs run on CPUs;
neither is scaled here.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from dlcluster_gym.cluster.catalog import gpu_type

# Share of an iteration's compute bound by arithmetic at the fp16 peak, per model family,
# fitted to measured single-GPU throughputs (Gavel's public measurements on V100, P100 and
# K80, every batch size of each model; least squares on the log of the V100 / P100 and
# V100 / K80 speed ratios): convolutional networks (ResNet-18, ResNet-50, CycleGAN) 0.075,
# language models (Transformer, LSTM LM) 0.0. Detection takes the convolutional value,
# speech (recurrent) the language-model one. Recommendation models measured as fast on a K80
# as on a V100, which no share reproduces (they are bound by something this model lacks,
# such as the input pipeline): they get 0, memory-bound.
MATH_SHARE: dict[str, float] = {
    "cnn": 0.075,
    "detection": 0.075,
    "nlp": 0.0,
    "speech": 0.0,
    "recommendation": 0.0,
}
DEFAULT_MATH_SHARE = 0.0  # a family not listed above: memory-bound


def math_share(family: str) -> float:
    """The arithmetic-bound share of ``family``'s compute (:data:`MATH_SHARE`)."""
    return MATH_SHARE.get(family, DEFAULT_MATH_SHARE)


@cache
def compute_scale(family: str, gpu: str, reference: str) -> float:
    """Compute time of one iteration on ``gpu`` over its time on ``reference``."""
    if gpu == reference:
        return 1.0
    g, r = gpu_type(gpu), gpu_type(reference)
    m = math_share(family)
    return m * r.fp16_tflops / g.fp16_tflops + (1.0 - m) * r.memory_gbs / g.memory_gbs


def type_scales(family: str, gpu_types: tuple[str, ...]) -> np.ndarray:
    """``compute_scale`` of ``family`` on each of a cluster's GPU types, relative to its
    first (the reference type)."""
    return np.array([compute_scale(family, t, gpu_types[0]) for t in gpu_types])
