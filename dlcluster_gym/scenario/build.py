"""Build a scenario's job list from its workload config.

The jobs come from the generators, trace loaders and parameter-server jobs of ``workload`` (or
``scenario.crius``) as they give them; their durations become iterations for the scenario's
cluster and network model in ``scenario.sizing`` (the rules: ``dlcluster_gym.scenario``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import (
    CriusWorkload,
    DallyWorkload,
    PSWorkload,
    ScenarioConfig,
    SyntheticWorkload,
    TraceWorkload,
)
from dlcluster_gym.errors import ConfigError, TraceError, UnknownNameError
from dlcluster_gym.scenario.sizing import iteration_times, size_jobs
from dlcluster_gym.workload.generators import dally_jobs, synthetic_jobs
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.models import DALLY_MODELS, ModelProfile
from dlcluster_gym.workload.profiles import model_profile
from dlcluster_gym.workload.traces import (
    limit_gpus,
    load_trace,
    pollux_models,
    rescale_arrivals,
    resolve_trace,
)


def build_workload(
    scenario: ScenarioConfig,
    cluster: Cluster,
    rng: np.random.Generator,
    traces_dir: str | Path | None = None,
) -> list[Job]:
    """The scenario's jobs, sorted by arrival (ties keep generation/file order).

    ``job_id`` is the position 0..n-1; ``max_jobs`` keeps the first N by arrival. Jobs larger
    than the cluster are kept (the engine applies the scenario's ``oversize_jobs`` policy).
    Trace arrivals are shifted so that the first kept job arrives at t = 0.
    """
    wl = scenario.workload
    if isinstance(wl, DallyWorkload):
        jobs = dally_jobs(
            wl.num_jobs, cluster.num_gpus, rng, wl.arrival, wl.load, wl.rate_per_hour,
            scenario.profile, groups=wl.groups,
        )  # fmt: skip
        # Generated run times are at packed consolidation on the cluster's network, whatever
        # the scenario's network switch (the offered load is defined at that placement too).
        jobs = size_jobs(jobs, cluster, scenario.profile, network="model")
    elif isinstance(wl, SyntheticWorkload):
        its = None
        if wl.log10_duration_min is None:
            its = iteration_times(wl.models, wl.gpu_demands, cluster, scenario.profile)
        jobs = synthetic_jobs(
            wl.num_jobs, cluster.num_gpus, rng, models=wl.models, gpu_demands=wl.gpu_demands,
            gpu_demand_weights=wl.gpu_demand_weights, iterations=wl.iterations,
            arrival=wl.arrival, load=wl.load, rate_per_hour=wl.rate_per_hour,
            profile=scenario.profile, log10_duration_min=wl.log10_duration_min,
            groups=wl.groups, iteration_times=its,
        )  # fmt: skip
        jobs = size_jobs(jobs, cluster, scenario.profile, network="model")
    elif isinstance(wl, TraceWorkload):
        jobs = _trace_jobs(wl, cluster, rng, traces_dir, scenario.profile)
        # A trace duration is what the job ran: under ``network: ideal`` it is all compute.
        jobs = size_jobs(
            jobs, cluster, scenario.profile, network=scenario.network, tier=wl.duration_tier
        )
    elif isinstance(wl, CriusWorkload):
        from dlcluster_gym.scenario.crius import crius_jobs

        jobs = crius_jobs(wl, cluster, rng, traces_dir)
    elif isinstance(wl, PSWorkload):
        from dlcluster_gym.workload.ps import PS_VARIANTS, ps_jobs

        jobs = ps_jobs(
            wl.num_jobs, rng, models=wl.models, variants=wl.variants or PS_VARIANTS,
            arrival=wl.arrival, rate_per_hour=wl.rate_per_hour,
        )  # fmt: skip
    else:  # pragma: no cover - the config union is closed
        raise ConfigError(f"unknown workload kind {getattr(wl, 'kind', wl)!r}")
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].arrival_s)
    if wl.max_jobs is not None:
        order = order[: wl.max_jobs]
    return [_renumber(jobs[i], k) for k, i in enumerate(order)]


def _renumber(job: Job, job_id: int) -> Job:
    if job.job_id == job_id:
        return job
    return dataclasses.replace(job, job_id=job_id)


def _trace_jobs(
    wl: TraceWorkload,
    cluster: Cluster,
    rng: np.random.Generator,
    traces_dir: str | Path | None,
    profile: str = "physics",
) -> list[Job]:
    """Jobs of a trace workload, with the trace's iteration counts (``iterations_from:
    trace``, where it has them) or its durations (``Job.duration_s``)."""
    options: dict = {}
    if wl.columns is not None:
        options["columns"] = wl.columns
    for unit in ("time_unit_s", "arrival_unit_s", "duration_unit_s"):
        if getattr(wl, unit) is not None:
            options[unit] = getattr(wl, unit)
    if wl.task_path is not None:
        options["task_path"] = resolve_trace(wl.task_path, traces_dir)
    trace = load_trace(wl.format, wl.path, traces_dir, wl.time_window_s, wl.on_error, **options)
    if wl.gpu_demand != "keep":
        trace = limit_gpus(trace, cluster.num_gpus, wl.gpu_demand)
    n = len(trace)
    if wl.max_jobs is not None and wl.max_jobs < n:  # already sorted by arrival
        trace = trace.select(np.arange(n) < wl.max_jobs)
        n = len(trace)
    if wl.target_load is not None:
        trace = rescale_arrivals(trace, cluster.num_gpus, wl.target_load)
    names = pollux_models(trace, rng) if wl.models == "pollux" else trace.model_names
    profiles = _trace_models(wl, names, trace.path, trace.lines, rng, n, profile)
    arrivals = trace.arrival_s - trace.arrival_s[0]
    use_trace_iters = wl.iterations_from == "trace" and trace.iterations is not None
    vcs, users, job_names = trace.vcs, trace.users, trace.job_names
    jobs = []
    for i in range(n):
        prof = profiles[i]
        if use_trace_iters:
            iters, duration = float(trace.iterations[i]), None
        else:
            iters, duration = None, float(trace.duration_s[i])
        jobs.append(Job(
            job_id=i, model=prof.name, num_gpus=int(trace.num_gpus[i]), iterations=iters,
            duration_s=duration, compute_s=prof.compute_s,
            arrival_s=float(arrivals[i]), name=trace.job_ids[i],
            vc=vcs[i] if vcs else "", user=users[i] if users else "",
            job_name=job_names[i] if job_names else "",
        ))  # fmt: skip
    return jobs


def _trace_models(
    wl: TraceWorkload,
    names: tuple[str, ...] | None,
    path: Path,
    lines: np.ndarray,
    rng: np.random.Generator,
    n: int,
    profile: str = "physics",
) -> list[ModelProfile]:
    if wl.models in ("trace", "pollux"):
        if names is None:
            raise TraceError(
                f"{path}: format {wl.format!r} has no model_name column; use models: dally or "
                "a list of model names"
            )
        out = []
        known: dict[str, ModelProfile] = {}
        for i, name in enumerate(names):
            if name not in known:
                try:
                    known[name] = model_profile(name, profile)
                except UnknownNameError as exc:
                    raise TraceError(
                        f"{path}: line {int(lines[i])}, column 'model_name': unknown model "
                        f"{name!r}; known models: {', '.join(exc.valid)}"
                    ) from None
            out.append(known[name])
        return out
    pool_names = DALLY_MODELS if wl.models == "dally" else tuple(wl.models)
    if not pool_names:
        raise ConfigError("trace workload: models must not be an empty list")
    try:
        pool = [model_profile(m, profile) for m in pool_names]
    except UnknownNameError as exc:
        raise ConfigError(f"trace workload models: {exc}") from None
    idx = rng.integers(len(pool), size=n)
    return [pool[k] for k in idx]
