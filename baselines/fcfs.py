"""First-come first-served baselines.

``fcfs``: strict arrival order with head-of-line blocking and gang scheduling; each job takes
the first free GPUs over machines in index order (first fit); no preemption. On heterogeneous
clusters a job that names a GPU type gets GPUs of that type, packed (Crius 8.1's FCFS).

``fcfs-consolidated``: the same order, but a job only starts on the most consolidated placement
it could ever have on this cluster (one machine if it fits on one, else one rack, else any),
so it waits for that placement (Tiresias-style strict consolidation, Dally 3.2).

On parameter-server scenarios (Nearchus, CPU jobs), ``fcfs`` starts each job in arrival order
at Nearchus's initial DT-config (1 PS + 2 workers of ``ps_node_vcpus`` = 5 vCPUs, i.e.
R0 = 15 vCPUs, Nearchus V-A) and never rescales it: Nearchus without its scaling rules. This
is our choice (the Nearchus paper has no FCFS baseline); it makes ``fcfs`` the reference on
every scenario, as leaderboard scores need.

Subclasses change only ``place`` (where a job goes); the order and blocking stay FCFS.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action
from dlcluster_gym.sim.view import ClusterView, Plan

from .consolidation import best_possible_tier
from .ps_common import Resources, start_in_order


class FCFS(BaseScheduler):
    """Strict FCFS, first fit, head-of-line blocking."""

    name = "fcfs"
    supports_ps_jobs = True
    ps_node_vcpus = 5.0

    def place(self, view: ClusterView, plan: Plan, job: int) -> np.ndarray | None:
        """GPUs for ``job`` on the plan's free GPUs, or None to block the queue.

        On a heterogeneous cluster a job that names a GPU type (``Job.gpu_type``, e.g. the
        Crius workloads) gets GPUs of that type only, on as few machines as possible
        (heterogeneity-aware placement, Crius 8.1's FCFS baseline); otherwise first fit."""
        spec = view.jobs[job]
        if spec.gpu_type is not None and view.cluster.heterogeneous:
            return plan.find_on_type(spec.num_gpus, view.cluster.gpu_types.index(spec.gpu_type))
        return plan.first_fit(spec.num_gpus)

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        if view.ps is not None:
            return self._schedule_ps(view)
        if view.num_waiting == 0 or view.num_free == 0:
            return ()
        plan = view.plan()
        for job in view.iter_waiting():
            gpus = self.place(view, plan, job)
            if gpus is None:
                break
            plan.start(job, gpus)
        return plan.actions

    def _schedule_ps(self, view: ClusterView) -> Sequence[Action]:
        """Parameter-server jobs: arrival order, head-of-line blocking, fixed (1 PS, 2 workers)."""
        assert view.ps is not None
        return start_in_order(view, Resources(view.ps), self.ps_node_vcpus)


class FCFSConsolidated(FCFS):
    """Strict FCFS that waits for the most consolidated placement (no relaxation)."""

    name = "fcfs-consolidated"
    supports_ps_jobs = False

    def place(self, view: ClusterView, plan: Plan, job: int) -> np.ndarray | None:
        n = view.jobs[job].num_gpus
        return plan.find(n, max_tier=best_possible_tier(view.cluster, n))
