"""Analytical bounds that are computed, not scheduled.

``ideal`` (Cassini 4.5.1, "Ideal"): every job runs alone on a dedicated copy of the cluster,
starts at its arrival on the most consolidated placement the cluster allows, with no queueing
and no contention. Its JCT is therefore the job's isolated run time. It is a lower bound for
JCT-like metrics, not a schedule: GPU utilization is not defined for it (reported as NaN).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import ScenarioConfig
from dlcluster_gym.perf.network import placement_overhead
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


def ideal_results(scenario: ScenarioConfig, cluster: Cluster, jobs: Sequence[Job]) -> Results:
    """Results of the ``ideal`` bound (labelled as a bound)."""
    fits = [j for j in jobs if j.num_gpus <= cluster.num_gpus]
    dropped = len(jobs) - len(fits)
    runs = [isolated_run(cluster, j, scenario.profile, scenario.network) for j in fits]
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
