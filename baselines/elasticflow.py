"""ElasticFlow with loosened deadlines (``elasticflow-ls``), as the Crius evaluation uses it
(Crius 8.1, 8.3: "the primary ElasticFlow policy with loosened job deadline").

The ElasticFlow paper is not in ../shared/papers; Crius describes it as an adaptivity-aware
scheduler with elastic scaling of data-parallel jobs in a homogeneous cluster, with a
deadline-aware and a throughput-oriented policy, which scales down small jobs under high
load to admit more jobs and which, deciding from data-parallel profiles, overestimates the
minimum share of large models (8.3). Our choices:

- **Pools**: ElasticFlow is homogeneous, so each job stays on its requested GPU type.
- **Minimum share**: with loosened deadlines any share meets the deadline, so a job's
  minimum satisfactory share is the fewest GPUs (power of two) on which its data-parallel
  plan fits in memory (``perf.parallelism.data_parallel_plan``); when it fits on none up to
  the pool size, the requested count.
- **Admission** (earliest deadline first = arrival order under loosened deadlines): jobs are
  admitted in arrival order while the minimum shares of the admitted jobs fit in their pool;
  none is dropped.
- **Elastic scaling**: the pool's remaining GPUs go, one doubling at a time, to the admitted
  job with the highest marginal data-parallel throughput gain per added GPU (throughput
  normalised by the job's throughput at its minimum share), up to twice the requested count.
- Decisions on every arrival and departure (and round), applied by resizing running jobs.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from dlcluster_gym.perf.parallelism import cluster_hardware, data_parallel_plan
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action
from dlcluster_gym.sim.boundary import JobTable
from dlcluster_gym.sim.view import ClusterView

from .heterogeneous import Alloc, finalize, requested_type, require_adaptive_jobs


class ElasticFlowLS(BaseScheduler):
    """Elastic scaling from data-parallel profiles, loosened deadlines, per-type pools."""

    name = "elasticflow-ls"

    def check_workload(self, view: ClusterView, jobs: JobTable) -> None:
        require_adaptive_jobs(view, jobs, "elasticflow-ls")

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.hw = cluster_hardware(view.cluster)
        self.caps = view.cluster.type_num_gpus.astype(np.int64)
        self.pool = view.per_job(lambda j: requested_type(view, j.job_id), np.int64)
        self._curve: dict[int, tuple[list[int], list[float]]] = {}

    def curve(self, view: ClusterView, job: int) -> tuple[list[int], list[float]]:
        """Counts (powers of two from the minimum share) and normalised DP throughputs."""
        if job in self._curve:
            return self._curve[job]
        spec = view.jobs[job]
        k = int(self.pool[job])
        cap = int(self.caps[k])
        hi = min(2 * spec.num_gpus, cap)
        counts, thr = [], []
        c = 1
        while c <= hi:
            p = data_parallel_plan(spec.model, self.hw[k], c)
            if p is not None:
                counts.append(c)
                thr.append(1.0 / p.iter_time_s)
            c *= 2
        if not counts:  # the DP profile fits nowhere: the user's request, no scaling
            counts, thr = [min(spec.num_gpus, cap)], [1.0]
        base = thr[0]
        out = (counts, [t / base for t in thr])
        self._curve[job] = out
        return out

    def _gain(self, job: int, i: int) -> float:
        """Marginal normalised throughput per added GPU of the step i -> i + 1."""
        counts, thr = self._curve[job]
        return (thr[i + 1] - thr[i]) / (counts[i + 1] - counts[i])

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        trig = view.triggers
        if not any(t.kind in ("arrival", "finish", "round") for t in trig):
            return ()
        active = sorted(
            {*view.running(), *view.iter_waiting()}, key=lambda j: (view.jobs[j].arrival_s, j)
        )
        free = self.caps.copy()
        level: dict[int, int] = {}  # job -> index into its curve
        for j in active:  # admission in arrival order (EDF with loosened deadlines)
            counts, _ = self.curve(view, j)
            k = int(self.pool[j])
            if counts[0] <= free[k]:
                level[j] = 0
                free[k] -= counts[0]
        # Elastic scale-up: repeatedly the doubling with the highest marginal gain per GPU
        # (a heap of each admitted job's next step; free GPUs only shrink, so a step that
        # does not fit now never will in this decision).
        heap = [(-self._gain(j, 0), j) for j in level if len(self._curve[j][0]) > 1]
        heapq.heapify(heap)
        while heap:
            neg, j = heapq.heappop(heap)
            i = level[j]
            counts, _ = self._curve[j]
            extra = counts[i + 1] - counts[i]
            k = int(self.pool[j])
            if extra > free[k] or neg >= 0:
                continue
            free[k] -= extra
            level[j] = i + 1
            if i + 2 < len(counts):
                heapq.heappush(heap, (-self._gain(j, i + 1), j))
        target: dict[int, Alloc | None] = {j: None for j in active}
        for j, i in level.items():
            target[j] = (self._curve[j][0][i], int(self.pool[j]))
        return finalize(view, target)
