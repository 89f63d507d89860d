"""``nearchus-gpu``: Nearchus's scaling rule on GPU jobs with elastic worker counts.

**Our extension**, not in the paper: Nearchus VI argues its bottleneck-driven scaling applies to
any compute resource. Here a GPU job's demand ``num_gpus`` is its budget R_max and its worker
count is elastic (the engine's ``Resize`` keeps the global batch and pays ``restart_s``):

- FCFS start with ``ceil(r0_frac x num_gpus)`` GPUs on the most consolidated free placement
  (the analogue of R0 = 15 of 100 vCPUs), head-of-line blocking;
- every ``check_interval_s`` (the stability window: the GPU engine's speeds carry no noise),
  efficiency ``e_job = compute / (compute + exposed communication)`` of the current placement;
  if ``e_job >= e_thd_job`` the job grows multiplicatively by ``r_up`` (capped by its demand
  and the free GPUs) onto a placement whose predicted efficiency still passes the threshold;
  otherwise (a network bottleneck: the GPU analogue of PSN/MU) it stops growing;
- running jobs do not grow while jobs wait.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action, Resize
from dlcluster_gym.sim.view import ClusterView

from .ps_common import check_positive, check_unit

_EFF_CACHE_MAX = 200_000  # cached placement efficiencies (cleared when exceeded)


class NearchusGPU(BaseScheduler):
    """Multiplicative scale-up of GPU workers while communication stays efficient."""

    name = "nearchus-gpu"
    # Skip a growth attempt that failed on the same held and free GPUs (the same inputs give
    # the same answer; issue 19). False re-tries it at every decision (tests compare).
    fast_paths: bool = True
    elastic_gpu_jobs = True  # the engine accepts Start on fewer GPUs than the demand

    def __init__(
        self,
        r0_frac: float = 0.25,
        r_up: float = 0.5,
        e_thd_job: float = 0.95,
        check_interval_s: float = 600.0,
    ) -> None:
        super().__init__(
            r0_frac=r0_frac, r_up=r_up, e_thd_job=e_thd_job, check_interval_s=check_interval_s
        )
        self.r0_frac = check_unit("r0_frac", r0_frac)
        self.r_up = check_positive("r_up", r_up)
        self.e_thd_job = check_unit("e_thd_job", e_thd_job)
        self.interval = check_positive("check_interval_s", check_interval_s)
        self.done: set[int] = set()
        self._wake = -1.0

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.done = set()
        self._wake = -1.0
        self._failed: dict[int, tuple[bytes, bytes]] = {}  # job -> (held, free) of a failure
        self.skipped_attempts = 0
        # Efficiency of a placement: a pure function of (model, GPUs), kept across decisions.
        self._eff: dict[tuple[str, bytes], float] = {}

    def _efficiency(self, view: ClusterView, job: int, gpus: np.ndarray) -> float:
        """``compute / (compute + exposed communication)`` of ``job`` on ``gpus`` (cached per
        model and GPU ids when ``fast_paths``: the same inputs give the same number)."""
        if not self.fast_paths:
            return 1.0 / (1.0 + view.comm_overhead_for(job, gpus))
        key = (view.jobs[job].model, gpus.tobytes())
        e = self._eff.get(key)
        if e is None:
            if len(self._eff) > _EFF_CACHE_MAX:
                self._eff.clear()
            e = self._eff[key] = 1.0 / (1.0 + view.comm_overhead_for(job, gpus))
        return e

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        plan = view.plan()
        for job in view.waiting():
            n = max(1, math.ceil(self.r0_frac * view.jobs[job].num_gpus))
            gpus = plan.find(n)
            if gpus is None:
                break
            plan.start(job, gpus)
        growing = False
        if not view.waiting() or len(plan.actions) == view.num_waiting:
            for job in view.running():
                if job in self.done:
                    continue
                held = view.gpus_of(job)
                demand = view.jobs[job].num_gpus
                if held.size >= demand:
                    self.done.add(job)
                    continue
                if view.now - view.last_start_s[job] < self.interval - 1e-6:
                    growing = True
                    continue
                key = (held.tobytes(), plan.free_mask.tobytes())
                if self.fast_paths and self._failed.get(job) == key:
                    growing = True  # it failed on these very GPUs: it would fail again
                    self.skipped_attempts += 1
                    continue
                e = self._efficiency(view, job, held)
                if e < self.e_thd_job:
                    self.done.add(job)
                    continue
                n = min(demand, math.ceil(held.size * (1 + self.r_up)))
                if self.fast_paths:  # no placement of more GPUs than its own + the free ones
                    n = min(n, held.size + plan.num_free)
                if n > held.size:
                    trial = plan.copy()
                    trial.preempt(job)
                while n > held.size:
                    gpus = trial.find(n)
                    if gpus is not None:
                        e_new = self._efficiency(view, job, gpus)
                        if e_new >= self.e_thd_job:
                            plan.migrate(job, gpus)
                            plan.actions[-1] = Resize(job, tuple(gpus.tolist()))
                            self._failed.pop(job, None)
                            break
                    n -= 1
                else:
                    self._failed[job] = key
                growing = True
        if growing and self._wake <= view.now:  # one pending wake-up at a time
            self._wake = view.now + self.interval
            plan.wake_up(self._wake)
        return plan.actions
