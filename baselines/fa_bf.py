"""FA-BF, the fixed-allocation brute-force baseline of Nearchus V.

The best ``(n_ps, n_wk)`` at ``node_vcpus`` (5) vCPUs per node within the job's budget, found by
an offline exhaustive search (every pair with ``n_ps + n_wk <= budget / node_vcpus``), evaluated
noise-free with the performance model on a spread placement over the empty cluster. The job is
launched with that whole configuration (gang scheduling: it waits until every node fits) and
keeps it to the end, so it never restarts. Waiting jobs start in FCFS order with head-of-line
blocking. "The best achievable performance by Optimus" (V).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlcluster_gym.perf.ps import DTConfig
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action, StartPS
from dlcluster_gym.sim.boundary import JobTable
from dlcluster_gym.sim.psjobs import PSView
from dlcluster_gym.sim.view import ClusterView

from .ps_common import (
    Resources,
    check_positive,
    check_ps_workload,
    fit,
)


def best_fixed(ps: PSView, job: int, node_vcpus: float) -> tuple[int, int, float]:
    """(n_ps, n_wk, predicted speed) of the fastest fixed configuration (exhaustive search)."""
    model = ps.model(job)
    empty = Resources(ps)
    empty.vcpus = ps.server_vcpus.astype(np.float64).copy()
    empty.mem = ps.server_memory_gb.astype(np.float64).copy()
    n_max = int(ps.budget(job) // node_vcpus + 1e-9)
    best = (0, 0, -1.0)
    for n_ps in range(1, n_max):
        for n_wk in range(1, n_max - n_ps + 1):
            cfg = fit(empty, model, [node_vcpus] * n_ps, [node_vcpus] * n_wk)
            if cfg is None:
                continue
            speed = ps.predict(job, cfg).speed
            if speed > best[2] * (1 + 1e-9):
                best = (n_ps, n_wk, speed)
    return best


class FABF(BaseScheduler):
    """Best fixed (n_ps, n_wk) at 5 vCPUs per node, whole budget from the start."""

    name = "fa-bf"
    supports_ps_jobs = True

    def __init__(self, node_vcpus: float = 5.0) -> None:
        super().__init__(node_vcpus=node_vcpus)
        self.node_vcpus = check_positive("node_vcpus", node_vcpus)
        self.choice: dict[int, tuple[int, int, float]] = {}

    def check_workload(self, view: ClusterView, jobs: JobTable) -> None:
        """Admission: PS jobs, nodes that fit a server, budgets that hold (1 PS, 1 worker)."""
        check_ps_workload(
            view, jobs, self.name, self.node_vcpus, 2 * self.node_vcpus,
            f"the (1 PS, 1 worker) configuration of 2 x {self.node_vcpus:g}-vCPU nodes",
        )  # fmt: skip

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.choice = {}

    def config_for(self, ps: PSView, job: int, res: Resources) -> DTConfig | None:
        if job not in self.choice:
            self.choice[job] = best_fixed(ps, job, self.node_vcpus)
        n_ps, n_wk, _ = self.choice[job]
        v = self.node_vcpus
        return fit(res, ps.model(job), [v] * n_ps, [v] * n_wk)

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        ps = view.ps
        assert ps is not None
        res = Resources(ps)
        actions: list[Action] = []
        for job in view.waiting():
            cfg = self.config_for(ps, job, res)
            if cfg is None:
                break  # FCFS, gang: wait for the whole configuration
            res.take(cfg, ps.model(job))
            actions.append(StartPS(job, cfg))
        return actions
