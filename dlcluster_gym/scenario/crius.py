"""Large-model workloads as in Crius 8.1: trace arrivals and durations, random models and
resources.

Crius takes job ids, submission times and durations from the Philly trace, then draws each
job's GPU amount and GPU type at random; the models are Table 2's (Fig. 15 shows the size mix,
which the text does not give). Our choices, per job, all from the scenario's seeded generator:

- **model**: a Table 2 family (Wide-ResNet, BERT, MoE) uniformly, then a size with weights
  that fall with size (``workload.crius.DEFAULT_SIZE_WEIGHTS``: small models dominate, as in
  a production mix), then a Table 2 global batch uniformly; or uniform over ``models`` /
  ``model_weights``.
- **GPU amount**: drawn from ``gpu_demands`` (default 1-16, uniform), then raised to the
  smallest power of two on which the model fits on *every* GPU type that can hold it at
  all, so any policy may place the request on any type (heterogeneity-unaware baselines
  included).
- **GPU type**: uniform over the cluster's types that can hold the request.
- **iterations**: the (scaled) trace duration divided by the iteration time of the best plan
  on the requested GPUs (``scenario.sizing.iterations_on_plan``; Crius scales Philly
  durations by global batch; we use the job's own speed so that a job given exactly its
  request runs for its trace duration).
- **durations** are capped at ``max_duration_s``, then scaled by one factor so the offered
  load (GPU-seconds at the request / cluster GPU-seconds over the arrival window) equals
  ``target_load``: a Philly window with random large-model requests offers far more work than
  these clusters hold (documented in docs/crius.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import CriusWorkload
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.perf.parallelism import best_plan, cluster_hardware, min_feasible_gpus
from dlcluster_gym.scenario.sizing import iterations_on_plan
from dlcluster_gym.workload.crius import choice_probs, model_mix, next_pow2
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.large_models import large_model_name, parse_large_model
from dlcluster_gym.workload.traces import load_trace


def crius_jobs(
    wl: CriusWorkload,
    cluster: Cluster,
    rng: np.random.Generator,
    traces_dir: str | Path | None = None,
) -> list[Job]:
    """The jobs of a Crius workload (see the module docstring for every random choice)."""
    trace = load_trace(wl.format, wl.path, traces_dir, wl.time_window_s)
    n = len(trace)
    if wl.max_jobs is not None and wl.max_jobs < n:
        trace = trace.select(np.arange(n) < wl.max_jobs)
        n = len(trace)
    if n == 0:
        raise ConfigError(f"crius workload: no jobs in {wl.path} within {wl.time_window_s}")
    hardware = cluster_hardware(cluster)
    caps = cluster.type_num_gpus
    names, probs = model_mix(wl.models, wl.model_weights)
    fit: dict[str, dict[int, int]] = {}  # model -> type -> smallest feasible power of two
    for name in names:
        fit[name] = {}
        for k, hw in enumerate(hardware):
            m = min_feasible_gpus(name, hw, int(caps[k])) if caps[k] else None
            if m is not None:
                fit[name][k] = m
        if not fit[name]:
            model, _ = parse_large_model(name)
            types = ", ".join(
                f"{hw.name} ({hw.gpu.memory_gb:g} GB x {int(c)})"
                for hw, c in zip(hardware, caps, strict=True)
            )
            raise ConfigError(
                f"crius workload: model {name} ({model.params / 1e9:.2f} B parameters) fits on "
                f"no GPU type of cluster {cluster.name} (types: {types}); remove it from "
                "`models` or use a cluster with more or larger GPUs"
            )
    model_idx = rng.choice(len(names), size=n, p=probs)
    batch_pick = rng.integers(3, size=n)
    demands = np.asarray(wl.gpu_demands)
    demand = demands[
        rng.choice(len(demands), size=n, p=choice_probs(wl.gpu_demands, wl.gpu_demand_weights,
                                                        "gpu_demand_weights"))
    ]  # fmt: skip
    type_pick = rng.random(n)
    models, gpus, types = [], np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    for i in range(n):
        base = names[int(model_idx[i])]
        model, _ = parse_large_model(base)
        name = large_model_name(base, model.batch_sizes[int(batch_pick[i])])
        if name not in fit:
            fit[name] = {
                k: m for k, hw in enumerate(hardware)
                if caps[k] and (m := min_feasible_gpus(name, hw, int(caps[k]))) is not None
            }  # fmt: skip
            if not fit[name]:  # a larger batch that fits nowhere: keep the listed batch
                name = base
        need = max(fit[name].values())
        g = max(next_pow2(int(demand[i])), need)
        ok = [k for k in fit[name] if caps[k] >= g]
        if not ok:  # the request is larger than every type that holds the model
            g = max(fit[name].values())
            ok = [k for k in fit[name] if caps[k] >= g] or list(fit[name])
            g = min(g, int(max(caps[k] for k in ok)))
        models.append(name)
        gpus[i] = g
        types[i] = ok[int(type_pick[i] * len(ok))]
    dur = trace.duration_s.astype(np.float64).copy()
    if wl.max_duration_s is not None:
        dur = np.minimum(dur, wl.max_duration_s)
    arrivals = trace.arrival_s - trace.arrival_s[0]
    if wl.target_load is not None:
        if wl.time_window_s is not None:
            span = wl.time_window_s[1] - wl.time_window_s[0]
        else:
            span = float(arrivals[-1])
        span = max(span, 1.0)
        dur *= wl.target_load * cluster.num_gpus * span / float((dur * gpus).sum())
    jobs = []
    for i in range(n):
        plan = best_plan(models[i], hardware[int(types[i])], int(gpus[i]))
        assert plan is not None
        jobs.append(Job(
            job_id=i, model=models[i], num_gpus=int(gpus[i]),
            iterations=iterations_on_plan(dur[i], plan.iter_time_s), compute_s=plan.compute_s,
            arrival_s=float(arrivals[i]), name=trace.job_ids[i],
            gpu_type=cluster.gpu_types[int(types[i])],
        ))  # fmt: skip
    return jobs
