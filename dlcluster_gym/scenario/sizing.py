"""Durations into iterations for a scenario's cluster and network model.

The one place where a job's duration meets the network model (the rules, per workload kind:
``dlcluster_gym.scenario``). The iteration time of a job at a consolidation tier is

    compute_s x (1 + comm_overhead(profile, shape, links of the cluster's first group))

on the shape of that tier: ``machine`` packs the GPUs (fill machines, then racks), ``rack``
deals them round-robin over the machines of as few racks as possible, ``network`` puts one
GPU in each rack.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

import numpy as np

from dlcluster_gym.cluster.topology import Cluster, Shape
from dlcluster_gym.perf.network import comm_overhead, net_params, packed_shape
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.models import ModelProfile
from dlcluster_gym.workload.profiles import model_profile

DurationTier = Literal["machine", "rack", "network"]
NetworkModel = Literal["model", "ideal"]


def _packed_shape(num_gpus: int, gpus_per_machine: int, machines_per_rack: int) -> Shape:
    """Most consolidated shape: fill machines, then racks (the network model's ``packed_shape``)."""
    return packed_shape(num_gpus, gpus_per_machine, machines_per_rack)


def _spread_shape(num_gpus: int, tier: str, gpus_per_machine: int, machines_per_rack: int) -> Shape:
    """Shape of a placement at ``tier``: machine = packed; rack = GPUs dealt round-robin over
    the machines of as few racks as possible; network = one GPU per rack."""
    if tier == "machine":
        return _packed_shape(num_gpus, gpus_per_machine, machines_per_rack)
    if tier == "network":
        return tuple((1,) for _ in range(num_gpus))
    per_rack = gpus_per_machine * machines_per_rack
    racks = []
    left = num_gpus
    while left > 0:
        n = min(left, per_rack)
        m = min(n, machines_per_rack)
        base, extra = divmod(n, m)
        racks.append(tuple([base + 1] * extra + [base] * (m - extra)))
        left -= n
    return tuple(racks)


def _comm_fraction(profile: ModelProfile, shape: Shape, cluster: Cluster) -> float:
    """The only call into the network model: exposed comm / compute for a shape."""
    return float(comm_overhead(profile, shape, net_params(cluster, 0)))


def iteration_time_s(
    profile: ModelProfile, num_gpus: int, cluster: Cluster, tier: str = "machine"
) -> float:
    """Time of one iteration at the given consolidation (default: packed) on ``cluster``."""
    g = cluster.config.groups[0]
    shape = _spread_shape(int(num_gpus), tier, g.gpus_per_machine, g.machines_per_rack)
    return profile.compute_s * (1.0 + _comm_fraction(profile, shape, cluster))


def iteration_times(
    models: Sequence[str], gpu_demands: Sequence[int], cluster: Cluster, profile: str = "physics"
) -> np.ndarray:
    """Packed iteration times, one row per model and one column per demand: what
    ``workload.generators.synthetic_jobs`` needs for the offered load of jobs it sizes in
    iterations."""
    profiles = [model_profile(m, profile) for m in models]
    return np.array([[iteration_time_s(pr, int(g), cluster) for g in gpu_demands]
                     for pr in profiles])  # fmt: skip


def size_jobs(
    jobs: Sequence[Job],
    cluster: Cluster,
    profile: str = "physics",
    *,
    network: NetworkModel = "model",
    tier: DurationTier = "machine",
) -> list[Job]:
    """``jobs`` with every duration turned into iterations: ``duration / iteration time``,
    the iteration time of the job's model (profile source ``profile``) and GPU demand at
    ``tier`` on ``cluster``, or its ``compute_s`` alone under ``network="ideal"``. Jobs
    that have iterations are returned as they are."""
    cache: dict[tuple[str, int], float] = {}
    out = []
    for job in jobs:
        if job.duration_s is None:
            out.append(job)
            continue
        if network == "ideal":
            t = job.compute_s
        else:
            key = (job.model, job.num_gpus)
            if key not in cache:
                prof = model_profile(job.model, profile)
                cache[key] = iteration_time_s(prof, job.num_gpus, cluster, tier)
            t = cache[key]
        iters = float(job.duration_s) / t
        out.append(dataclasses.replace(job, iterations=iters, duration_s=None))
    return out


def iterations_on_plan(duration_s: float, iter_time_s: float) -> float:
    """Iterations of a job that runs ``duration_s`` at a plan's ``iter_time_s`` (Crius jobs),
    at least one."""
    return max(float(duration_s) / iter_time_s, 1.0)
