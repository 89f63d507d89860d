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

# Share of an iteration's compute bound by arithmetic, per model family (our choice, see
# docs/concepts.md: "GPU types"): dense convolutions and large matrix products are mostly
# math-bound; speech (recurrent) and detection models less so; recommendation models are
# dominated by embedding lookups, which are memory-bound.
MATH_SHARE: dict[str, float] = {
    "cnn": 0.7,
    "nlp": 0.6,
    "detection": 0.5,
    "speech": 0.4,
    "recommendation": 0.2,
}
DEFAULT_MATH_SHARE = 0.5  # a family not listed above


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
