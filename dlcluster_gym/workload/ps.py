"""Parameter-server (PS) training jobs on CPUs: the model zoo of Nearchus Table II and a job
generator for the multi-job experiments of Nearchus V-B.

A PS job is a :class:`~dlcluster_gym.workload.job.Job` with ``num_gpus = 0`` and a vCPU budget
(``vcpu_budget``, R_max in Nearchus IV). Its ``iterations`` are training steps and its
``compute_s`` is the worker compute of one step in vCPU-seconds (:attr:`PSModel.wk_cpu_s`).
How fast it runs on a DT-config is ``perf.ps``.

Per-model constants. Parameter counts are Table II's. The paper gives no per-step costs, so the
vCPU-seconds per step are our calibration (documented in docs/nearchus.md):

- ``wk_cpu_s``: worker vCPU-seconds per training step (one CIFAR-10-sized batch of 64 for the
  CNNs), scaled by the models' relative forward cost; ResNet-50 = 24 vCPU-s is set so that on
  1 Gb/s one PS node saturates at ~32 utilized worker vCPUs (Nearchus III-B, DN-1G: two 16-vCPU
  workers).
- ``ps_cpu_s``: PS vCPU-seconds per step (gradient aggregation and update), 0.05 s fixed plus
  0.03 s per million parameters: parameter servers use far less CPU than workers (IV).
- traffic per step and direction: 4 bytes per parameter (fp32 gradients pushed, weights pulled).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dlcluster_gym.errors import ConfigError, UnknownNameError
from dlcluster_gym.workload.job import Job

BYTES_PER_PARAM = 4.0
# The smallest DT-config is (1 PS, 2 workers) (Nearchus IV) and a node needs at least this.
MIN_NODE_VCPUS = 0.5
MIN_CONFIG_NODES = 3


@dataclass(frozen=True, slots=True)
class PSModel:
    """One model trained with the parameter-server strategy on CPUs."""

    name: str
    params_m: float  # millions of parameters (Nearchus Table II)
    network: str  # architecture family (Table II)
    domain: str  # application domain (Table II)
    wk_cpu_s: float  # worker vCPU-seconds per step
    steps_per_epoch: int
    wk_mem_gb: float = 4.0
    ps_mem_gb: float = 2.0

    @property
    def ps_cpu_s(self) -> float:
        """PS vCPU-seconds per step, summed over the PS nodes."""
        return 0.05 + 0.03 * self.params_m

    @property
    def bytes_per_step(self) -> float:
        """Bytes each direction (push gradients, pull weights) per step."""
        return BYTES_PER_PARAM * self.params_m * 1e6


_CIFAR_STEPS = 782  # 50,000 CIFAR-10 images / batch 64

PS_MODELS: dict[str, PSModel] = {
    m.name: m
    for m in (
        PSModel("mobilenet", 4.2, "CNN", "image classification", 6.0, _CIFAR_STEPS),
        PSModel("densenet201", 20.0, "CNN", "image classification", 40.0, _CIFAR_STEPS),
        PSModel("nasnetlarge", 84.9, "CNN", "image classification", 95.0, _CIFAR_STEPS, 8.0, 4.0),
        PSModel("resnet50", 23.0, "CNN", "image classification", 24.0, _CIFAR_STEPS),
        PSModel("inception-v3", 24.0, "CNN", "image classification", 30.0, _CIFAR_STEPS),
        PSModel("cyclegan", 28.0, "Transformer", "image generation", 45.0, 500),
        PSModel("gnn-traffic", 0.022, "GNN", "time series forecast", 2.0, 500),
        PSModel("gpt-kerasnlp", 3.3, "Transformer", "text generation", 8.0, 500),
        PSModel("vit", 21.7, "Transformer", "image classification", 26.0, 500),
        PSModel("bilstm", 2.7, "RNN", "sentiment classification", 5.0, 500),
    )
}
PS_CNNS: tuple[str, ...] = ("mobilenet", "densenet201", "nasnetlarge", "resnet50", "inception-v3")

# The multi-job pool of Nearchus V-B: 6 variants of each CNN, (epochs, vCPU budget). The paper
# gives no values; ours keep the offered load of a 1 job/hour trace below the 100 vCPUs of
# Cluster A while jobs still queue behind large budgets (see docs/nearchus.md).
PS_VARIANTS: tuple[tuple[float, float], ...] = (
    (4.0, 30.0),
    (6.0, 40.0),
    (8.0, 50.0),
    (10.0, 60.0),
    (12.0, 80.0),
    (14.0, 100.0),
)


def get_ps_model(name: str) -> PSModel:
    """Look up a PS model (Nearchus Table II); unknown names list the known ones."""
    try:
        return PS_MODELS[name]
    except KeyError:
        raise UnknownNameError("PS model", name, PS_MODELS) from None


def ps_job(
    job_id: int, model: str, epochs: float, budget_vcpus: float, arrival_s: float, name: str = ""
) -> Job:
    """One PS job: ``epochs`` of ``model`` with a vCPU budget."""
    prof = get_ps_model(model)
    if not (np.isfinite(epochs) and epochs > 0):
        raise ConfigError(f"PS job {name or job_id}: epochs must be > 0, got {epochs!r}")
    return Job(
        job_id=job_id,
        model=prof.name,
        num_gpus=0,
        iterations=float(epochs) * prof.steps_per_epoch,
        compute_s=prof.wk_cpu_s,
        arrival_s=float(arrival_s),
        name=name,
        vcpu_budget=float(budget_vcpus),
    )


def ps_jobs(
    n: int,
    rng: np.random.Generator,
    *,
    models: tuple[str, ...] = PS_CNNS,
    variants: tuple[tuple[float, float], ...] = PS_VARIANTS,
    arrival: str = "poisson",
    rate_per_hour: float = 1.0,
) -> list[Job]:
    """``n`` jobs drawn uniformly from the pool models x variants (Nearchus V-B: 30 variants,
    Poisson arrivals at ``rate_per_hour``; the first job arrives at t = 0)."""
    from dlcluster_gym.workload.generators import poisson_arrivals

    if not models or not variants:
        raise ConfigError("PS workload: models and variants must not be empty")
    for m in models:
        get_ps_model(m)
    pool = [(m, e, b) for m in models for e, b in variants]
    if arrival == "batch":
        t = np.zeros(n)
    else:
        t = poisson_arrivals(n, rate_per_hour, rng)
        t = t - t[0]
    picks = rng.integers(len(pool), size=n)
    jobs = []
    for i in range(n):
        m, e, b = pool[int(picks[i])]
        jobs.append(ps_job(i, m, e, b, float(t[i]), name=f"{m}-e{e:g}-b{b:g}-{i}"))
    return jobs
