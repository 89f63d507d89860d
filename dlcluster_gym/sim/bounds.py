"""Analytical bounds that are computed, not scheduled.

``ideal`` (Cassini 4.5.1, "Ideal"): every job runs alone on a dedicated copy of the cluster,
starts at its arrival on the fastest placement, with no queueing and no contention. Its JCT is
therefore the job's isolated run time. It is a lower bound for JCT-like metrics, not a
schedule: GPU utilization is not defined for it (reported as NaN).

The fastest placement is the best of the most consolidated one and the even spreads over
machines and racks (:func:`spread_placements`). Consolidation is fastest on hierarchical
networks; where a machine's GPUs share one NIC in a flat ring (the Pollux testbed), spreading
is faster, and a bound on the consolidated placement alone would not be a bound.
It is defined for GPU jobs; a workload of parameter-server jobs on CPUs is refused
(``NotApplicableError``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import ScenarioConfig
from dlcluster_gym.errors import NotApplicableError
from dlcluster_gym.perf.gpu_speed import type_scales
from dlcluster_gym.perf.network import placement_overhead
from dlcluster_gym.perf.parallelism import is_adaptive_model
from dlcluster_gym.sim import placement
from dlcluster_gym.sim.results import Results, _version, overhead_ratio, summarize, tiers_label
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.profiles import model_profile


def isolated_run(
    cluster: Cluster, job: Job, profile: str = "physics", network: str = "model"
) -> tuple[float, float, int]:
    """(run seconds, exposed comm seconds, tier) of ``job`` alone on an empty cluster, with
    the scenario's model profile source and network (``ideal``: no communication)."""
    free = np.ones(cluster.num_gpus, dtype=bool)
    gpus = placement.consolidated(
        cluster, free, cluster.machine_num_gpus.copy(), cluster.rack_num_gpus.copy(), job.num_gpus
    )
    if gpus is None:
        raise ValueError(f"job {job.job_id} ({job.num_gpus} GPUs) does not fit on {cluster.name}")
    frac = (
        0.0
        if network == "ideal"
        else placement_overhead(cluster, model_profile(job.model, profile), gpus)
    )
    compute = job.iterations * job.compute_s
    return compute * (1.0 + frac), compute * frac, int(cluster.placement_tier(gpus))


def _fastest_type(cluster: Cluster, job: Job, profile: str) -> float:
    """The compute factor of ``job`` on the fastest GPU type with room for it (the type it
    requires, if any): 1 on a homogeneous cluster (``perf.gpu_speed``)."""
    types = cluster.gpu_types
    if len(types) == 1 or is_adaptive_model(job.model):
        return 1.0
    scale = type_scales(model_profile(job.model, profile).family, types)
    ok = cluster.type_num_gpus >= job.num_gpus
    if job.gpu_type is not None:
        ok &= np.array([t == job.gpu_type for t in types])
    return float(scale[ok].min()) if ok.any() else float(scale.max())


def _even(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` counts differing by at most one, larger first."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _distinct_ceils(n: int, hi: int) -> list[int]:
    """The smallest ``m`` in ``1..hi`` for each distinct value of ``ceil(n / m)``."""
    out, last = [], None
    for m in range(1, hi + 1):
        c = -(-n // m)
        if c != last:
            out.append(m)
            last = c
    return out


def spread_placements(cluster: Cluster, n: int) -> list[np.ndarray]:
    """Even spreads of ``n`` GPUs: over ``m`` machines in ``r`` racks, the machines split
    evenly over the racks and the GPUs evenly over the machines, for every machine count
    ``m`` up to ``n`` and rack count ``r`` up to ``m`` that change a rack's or a machine's
    share; racks and machines taken in id order among those with room; in a machine, GPUs
    round robin over its NICs."""
    per_machine = cluster.machine_num_gpus
    first = cluster.machine_first_gpu
    nic = cluster.gpu_nic
    by_rack = [np.flatnonzero(cluster.machine_rack == r) for r in range(cluster.num_racks)]
    local: dict[int, np.ndarray] = {}  # machine -> its GPUs, round robin over its NICs

    def gpus_of(mach: int) -> np.ndarray:
        if mach not in local:
            gpus = np.arange(first[mach], first[mach] + per_machine[mach])
            on = nic[gpus]
            rank = np.zeros(gpus.size, dtype=np.int64)  # each GPU's place on its NIC
            for v in np.unique(on):
                rank[on == v] = np.arange(int((on == v).sum()))
            local[mach] = gpus[np.lexsort((on, rank))]
        return local[mach]

    out: list[np.ndarray] = []
    for m in _distinct_ceils(n, min(n, cluster.num_machines)):
        counts = _even(n, m)
        roomy = [ms[per_machine[ms] >= counts[0]] for ms in by_rack]
        for r in _distinct_ceils(m, min(m, cluster.num_racks)):
            shares = _even(m, r)
            racks = [i for i, ms in enumerate(roomy) if ms.size >= shares[0]][:r]
            if len(racks) < r:
                continue
            machines = np.concatenate(
                [roomy[rack][:k] for rack, k in zip(racks, shares, strict=True)]
            )
            out.append(np.sort(np.concatenate(
                [gpus_of(int(mach))[:k] for mach, k in zip(machines, counts, strict=True)]
            )))  # fmt: skip
    return out


def fastest_isolated_run(
    cluster: Cluster, job: Job, profile: str = "physics", network: str = "model"
) -> tuple[float, float, int]:
    """:func:`isolated_run` on the fastest of the most consolidated placement and the even
    spreads (:func:`spread_placements`): (run seconds, exposed comm seconds, tier)."""
    run, comm, tier = isolated_run(cluster, job, profile, network)
    if network == "ideal" or job.num_gpus <= 1:
        return run, comm, tier
    prof = model_profile(job.model, profile)
    compute = job.iterations * job.compute_s
    for gpus in spread_placements(cluster, job.num_gpus):
        frac = placement_overhead(cluster, prof, gpus)
        if compute * (1.0 + frac) < run:
            run, comm, tier = (
                compute * (1.0 + frac), compute * frac, int(cluster.placement_tier(gpus))
            )  # fmt: skip
    return run, comm, tier


def ideal_results(scenario: ScenarioConfig, cluster: Cluster, jobs: Sequence[Job]) -> Results:
    """Results of the ``ideal`` bound (labelled as a bound)."""
    if any(j.is_ps for j in jobs):
        raise NotApplicableError(
            f"ideal bounds GPU jobs; scenario {scenario.name} has parameter-server jobs on CPUs"
        )
    fits = [j for j in jobs if j.num_gpus <= cluster.num_gpus]
    dropped = len(jobs) - len(fits)
    # The fastest placement's exposed communication per unit of compute, per (model, GPUs).
    shape: dict[tuple[str, int], tuple[float, int]] = {}
    runs = []
    for j in fits:
        key = (j.model, j.num_gpus)
        if key not in shape:
            unit = Job(0, j.model, j.num_gpus, 1.0, 1.0, 0.0)
            _, comm_1, tier = fastest_isolated_run(
                cluster, unit, scenario.profile, scenario.network
            )
            shape[key] = (comm_1, tier)
        frac, tier = shape[key]
        compute = j.iterations * j.compute_s  # on the reference GPU type
        scale = _fastest_type(cluster, j, scenario.profile)  # communication does not scale
        run = compute * (1.0 + frac) if scale == 1.0 else compute * (scale + frac)
        runs.append((run, compute * frac, tier))
    arrival = np.array([j.arrival_s for j in fits], dtype=np.float64)
    run = np.array([r[0] for r in runs])
    comm = np.array([r[1] for r in runs])
    compute = run - comm
    gpus = np.array([j.num_gpus for j in fits], dtype=np.int64)
    finish = arrival + run
    summary = summarize(arrival, finish, run, comm, compute, gpus, cluster.num_gpus)
    summary["gpu_utilization"] = float("nan")
    summary.update(
        jobs_total=len(fits),
        jobs_completed=len(fits),
        jobs_unfinished=0,
        jobs_dropped=dropped,
        preemptions=0,
        migrations=0,
        resizes=0,
        sim_events=0,
        wall_s=0.0,
    )
    zeros = np.zeros(len(fits), dtype=np.int64)
    job_cols = {
        "job_id": np.array([j.job_id for j in fits]),
        "name": np.array([j.name or str(j.job_id) for j in fits]),
        "model": np.array([j.model for j in fits]),
        "num_gpus": gpus,
        "iterations": np.array([j.iterations for j in fits]),
        "arrival_s": arrival,
        "first_start_s": arrival,
        "finish_s": finish,
        "jct_s": run,
        "queue_s": np.zeros(len(fits)),
        "run_s": run,
        "overhead_s": np.zeros(len(fits)),
        "compute_s": compute,
        "comm_s": comm,
        "comm_overhead": overhead_ratio(comm, compute),
        "preemptions": zeros,
        "migrations": zeros,
        "tiers": np.array([tiers_label(1 << r[2]) for r in runs]),
        "status": np.array(["finished"] * len(fits)),
    }
    return Results(
        scenario=scenario.name,
        policy="ideal",
        seed=scenario.seed,
        version=_version(),
        summary=summary,
        jobs=job_cols,
        timeseries={
            "t": np.zeros(0),
            "busy_gpus": np.zeros(0, dtype=np.int64),
            "waiting": np.zeros(0, dtype=np.int64),
            "running": np.zeros(0, dtype=np.int64),
            "remaining": np.zeros(0, dtype=np.int64),
        },
        scenario_config=scenario.model_dump(mode="json"),
        is_bound=True,
    )
