"""Normalized observation features shared by the environments (all in [0, 1]).

Every feature is a ratio or a log-scaled count/time with a fixed reference, so the
observation has the same size and meaning on any cluster: an agent trained on 2 racks runs
on 16.
"""

from __future__ import annotations

import math

import numpy as np

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.sim.view import ClusterView

HOUR = 3600.0
TIME_REF_H = 168.0  # one week: log1p(hours) / log1p(168) maps [0 h, 1 week] onto [0, 1]
COUNT_REF = 1000.0  # jobs: log1p(n) / log1p(1000)

CLUSTER_FEATURES: tuple[str, ...] = (
    "free_gpus",  # free GPUs / GPUs
    "max_free_machine",  # most free GPUs on one machine / GPUs per machine
    "max_free_rack",  # most free GPUs in one rack / GPUs per rack
    "empty_machines",  # fully free machines / machines
    "empty_racks",  # fully free racks / racks
    "fragmentation",  # 1 - free GPUs on fully free machines / free GPUs (0 when none free)
    "waiting_jobs",  # log-scaled count
    "waiting_demand",  # GPUs demanded by waiting jobs / GPUs (capped at 1)
    "running_jobs",  # log-scaled count
    "done_jobs",  # finished jobs / arrived jobs (DONE_OF; "workload": / all jobs, old versions)
)
DONE_OF: tuple[str, ...] = ("arrived", "workload")
"""What ``done_jobs`` divides by: the jobs that have arrived so far (no future information),
or every job of the episode's workload (env versions before the fix: Placement-v0/v1,
DelayTimer-v0, Scheduler-v0/v1; it tells an agent how many arrivals are still to come)."""


def done_share(done: int, waiting: int, running: int, total: int, done_of: str) -> float:
    """The ``done_jobs`` feature: finished jobs over the arrived jobs (finished, waiting and
    running; 0 before any arrival) or, with ``done_of="workload"``, over all ``total`` jobs."""
    if done_of == "workload":
        return done / max(total, 1)
    arrived = done + waiting + running
    return done / arrived if arrived else 0.0


_LOG_T = math.log1p(TIME_REF_H)
_LOG_N = math.log1p(COUNT_REF)


def time_feature(seconds: float) -> float:
    """log1p(hours) / log1p(one week), capped at 1."""
    return min(math.log1p(max(seconds, 0.0) / HOUR) / _LOG_T, 1.0)


def count_feature(n: float) -> float:
    """log1p(n) / log1p(1000), capped at 1."""
    return min(math.log1p(max(n, 0.0)) / _LOG_N, 1.0)


class ClusterFeatures:
    """Computes ``CLUSTER_FEATURES`` from a view (per-run constants cached)."""

    SMALL_MACHINES = 256
    """Up to this many machines the counts are summed on Python lists (faster there)."""

    def __init__(self, view: ClusterView, done_of: str = "arrived") -> None:
        c: Cluster = view.cluster
        self.done_of = done_of
        self.view = view
        self.num_gpus = float(c.num_gpus)
        self.gpm = float(c.max_gpus_per_machine)
        self.gpr = float(c.max_gpus_per_rack)
        self.machine_gpus = c.machine_num_gpus
        self.rack_gpus = c.rack_num_gpus
        self.small = c.num_machines <= self.SMALL_MACHINES
        self._machine_gpus = c.machine_num_gpus.tolist()
        self._rack_gpus = c.rack_num_gpus.tolist()
        # per-run constants over the engine's job list (simulator side); the features read
        # them for arrived jobs only (the waiting queue). num_jobs: done_of="workload" only.
        jobs = view._e.jobs
        self.num_jobs = max(len(jobs), 1)
        self.demand = np.array([j.num_gpus for j in jobs], dtype=np.float64)
        self._demand = [j.num_gpus for j in jobs]  # Python ints for short queues

    def compute(self, out: np.ndarray) -> None:
        """Write the features into ``out`` (length ``len(CLUSTER_FEATURES)``)."""
        v = self.view
        # integer counts and sums (exact in any order): Python lists on small clusters,
        # numpy reductions on large ones
        if self.small:
            fpm, fpr = v.free_per_machine.tolist(), v.free_per_rack.tolist()
            free = float(sum(fpr))
            empty = [g for f, g in zip(fpm, self._machine_gpus, strict=True) if f == g]
            n_empty, empty_gpus = len(empty), float(sum(empty))
            max_m, max_r = max(fpm), max(fpr)
            n_empty_r = sum(1 for f, g in zip(fpr, self._rack_gpus, strict=True) if f == g)
        else:
            fpm, fpr = v.free_per_machine, v.free_per_rack
            free = float(np.add.reduce(fpr))
            empty_m = fpm == self.machine_gpus
            n_empty = int(np.count_nonzero(empty_m))
            empty_gpus = float(np.add.reduce(self.machine_gpus[empty_m])) if n_empty else 0.0
            max_m, max_r = int(np.maximum.reduce(fpm)), int(np.maximum.reduce(fpr))
            n_empty_r = int(np.count_nonzero(fpr == self.rack_gpus))
        n_wait = v.num_waiting
        out[0] = free / self.num_gpus
        out[1] = max_m / self.gpm
        out[2] = max_r / self.gpr
        out[3] = n_empty / len(fpm)
        out[4] = n_empty_r / len(fpr)
        out[5] = 1.0 - empty_gpus / free if free > 0 else 0.0
        out[6] = count_feature(n_wait)
        if 0 < n_wait <= 64:  # a short queue: Python ints (integer counts: exact in any order)
            demand = self._demand
            total = float(sum([demand[j] for j in v.iter_waiting()]))
            out[7] = min(total / self.num_gpus, 1.0)
        elif n_wait:
            waiting = np.fromiter(v.iter_waiting(), dtype=np.int64, count=n_wait)
            out[7] = min(float(np.add.reduce(self.demand[waiting])) / self.num_gpus, 1.0)
        else:
            out[7] = 0.0
        out[8] = count_feature(v.num_running)
        out[9] = done_share(v.num_done, n_wait, v.num_running, self.num_jobs, self.done_of)
