"""Helpers shared by the heterogeneous-cluster schedulers of the Crius evaluation (Crius,
Gavel, ElasticFlow-LS): allocations as (GPU count, GPU type) per job, and turning a target
allocation into engine actions (Crius's FinalizeAlloc, 6.1)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from dlcluster_gym.errors import NotApplicableError
from dlcluster_gym.perf.parallelism import is_adaptive_model
from dlcluster_gym.sim.actions import Action
from dlcluster_gym.sim.boundary import JobTable
from dlcluster_gym.sim.view import ClusterView, Plan

Alloc = tuple[int, int]  # (GPU count, GPU type index into cluster.gpu_types)
Finder = Callable[[Plan, int, int], "np.ndarray | None"]  # (plan, count, type) -> GPUs


def require_adaptive_jobs(view: ClusterView, jobs: JobTable, policy: str) -> None:
    """Admission (``check_workload``): NotApplicableError unless every submitted job is an
    adaptive-parallelism job (a Crius Table 2 model)."""
    other = sorted({j.model for j in jobs if not is_adaptive_model(j.model)})
    if other:
        raise NotApplicableError(
            f"{policy} schedules adaptive-parallelism jobs of the Crius Table 2 models "
            f"(bert-*, moe-*, wresnet-*); scenario {view.scenario.name} has jobs of "
            f"{', '.join(other[:5])}{', ...' if len(other) > 5 else ''}"
        )


def requested_type(view: ClusterView, job: int) -> int:
    """The job's requested GPU type (index), or the first type when it names none."""
    t = view.jobs[job].gpu_type
    return view.cluster.gpu_types.index(t) if t in view.cluster.gpu_types else 0


def current_alloc(view: ClusterView, job: int) -> Alloc | None:
    """(count, type) a running job holds, or None."""
    n, first = view.holding(job)
    if n == 0:
        return None
    return n, int(view.cluster.gpu_type_idx[first])


def _shrink(view: ClusterView, gpus: np.ndarray, n: int) -> np.ndarray:
    """Keep ``n`` of ``gpus``, those on the machines holding most of them."""
    machines = view.cluster.gpu_machine[gpus]
    _, inv, counts = np.unique(machines, return_inverse=True, return_counts=True)
    order = np.lexsort((gpus, -counts[inv]))
    return np.sort(gpus[order[:n]])


def _on_type(plan: Plan, n: int, k: int) -> np.ndarray | None:
    return plan.find_on_type(n, k)


def finalize(
    view: ClusterView, target: Mapping[int, Alloc | None], find: Finder = _on_type
) -> list[Action]:
    """Actions that take the cluster from its current allocation to ``target`` (jobs not in
    ``target`` keep theirs): preemptions, then shrinks in place, then moves to another type,
    then growths in place, then starts (in ``target``'s order). A move or growth that finds
    no GPUs (two jobs swapping types) becomes a preemption and a start. ``find`` places
    ``n`` GPUs of type ``k`` (default: on as few machines of that type as possible)."""
    plan = view.plan()
    moves: list[tuple[int, Alloc]] = []
    grows: list[tuple[int, Alloc]] = []
    starts: list[tuple[int, Alloc]] = []
    for job, want in target.items():
        cur = current_alloc(view, job)
        if cur == want:
            continue
        if want is None:
            if cur is not None:
                plan.preempt(job)
            continue
        if cur is None:
            starts.append((job, want))
        elif cur[1] != want[1]:
            moves.append((job, want))
        elif want[0] < cur[0]:
            plan.resize(job, _shrink(view, view.gpus_of(job), want[0]))
        else:
            grows.append((job, want))
    for job, (n, k) in moves:
        gpus = find(plan, n, k)
        if gpus is None:
            plan.preempt(job)
            starts.append((job, (n, k)))
        elif n == view.gpus_of(job).size:
            plan.migrate(job, gpus)
        else:
            plan.resize(job, gpus)
    for job, (n, k) in grows:
        own = np.asarray(view.gpus_of(job))
        extra = find(plan, n - own.size, k)
        if extra is None:
            plan.preempt(job)
            starts.append((job, (n, k)))
        else:
            plan.resize(job, np.sort(np.concatenate((own, extra))))
    for job, (n, k) in starts:
        gpus = find(plan, n, k)
        if gpus is not None:
            plan.start(job, gpus)
    return plan.actions
