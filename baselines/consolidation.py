"""Consolidation helpers shared by the network-aware baselines (Dally, Gandiva, FCFS variants).

- ``best_possible_tier``: the tightest tier a job of some size can ever have on a cluster.
- ``best_tiers``: that tier for every job of a run, as a per-job table (filled as jobs arrive).
- ``worth_moving``: whether moving a running job to other GPUs pays back its overhead, with
  the job's remaining iterations estimated (``sim.estimators``) or, for the clairvoyant
  variant ``remaining="known"``, read from the oracle.
- ``make_room``: the fewest preemptions (in a priority order) that let a job be placed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dlcluster_gym.cluster.topology import Cluster, Tier
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.sim.boundary import PerJob
from dlcluster_gym.sim.estimators import METHODS, remaining_iterations_of
from dlcluster_gym.sim.view import ClusterView, Plan

# How a move decision learns a running job's remaining iterations: an estimate from observable
# facts (sim.estimators; "history" by default) or "known" (the oracle: a clairvoyant variant).
REMAINING: tuple[str, ...] = (*METHODS, "known")


def check_remaining(value: str) -> str:
    """A valid ``remaining`` parameter (one of :data:`REMAINING`)."""
    if value not in REMAINING:
        raise ConfigError(f"remaining must be one of {', '.join(REMAINING)}, got {value!r}")
    return value


def best_possible_tier(cluster: Cluster, num_gpus: int) -> Tier:
    """The tightest tier a job of ``num_gpus`` could ever be placed at on ``cluster``."""
    if num_gpus <= cluster.max_gpus_per_machine:
        return Tier.MACHINE
    if num_gpus <= cluster.max_gpus_per_rack:
        return Tier.RACK
    return Tier.NETWORK


def best_tiers(view: ClusterView) -> PerJob:
    """``best_possible_tier`` of each job (int8, indexed by job id, filled as jobs arrive)."""
    cluster = view.cluster
    return view.per_job(lambda j: best_possible_tier(cluster, j.num_gpus), np.int8, -1)


def worth_moving(view: ClusterView, job: int, gpus: np.ndarray, remaining: str = "history") -> bool:
    """True when moving running ``job`` to ``gpus`` saves more time than it costs.

    Saving = remaining iterations x (current iteration time - iteration time on ``gpus``);
    cost = checkpoint + restore (the engine's overhead for a preemption followed by a start,
    or a migration). Both schedulers that move jobs for consolidation use this guard so a job
    about to finish is not moved for nothing. ``remaining``: how the remaining iterations are
    learnt (:data:`REMAINING`; "known" needs a clairvoyant view).
    """
    spec = view.jobs[job]
    done = view.iterations_done(job)
    if remaining == "known":
        left = float(view.oracle.total_iterations[job]) - done
    else:
        left = remaining_iterations_of(
            view.history, spec.compute_s, done, method=remaining, model=spec.model, job=job
        )
    new_iter = spec.compute_s * (1.0 + view.comm_overhead_for(job, gpus))
    saving = left * (float(view.iter_time_s[job]) - new_iter)
    ov = view.scenario.overheads
    return saving > ov.checkpoint_s + ov.restore_s


def make_room(
    plan: Plan,
    place: Callable[[Plan], np.ndarray | None],
    need: int,
    victims: np.ndarray,
    victim_gpus: np.ndarray,
    open_: np.ndarray,
) -> tuple[Plan, np.ndarray | None]:
    """Preempt the fewest ``victims`` (in order, those still ``open_``) until ``place`` finds
    GPUs. Returns the plan with the preemptions and the GPUs, or the untouched plan and None
    when even all of them are not enough. Taken victims are marked closed in ``open_``."""
    eligible = np.flatnonzero(open_)
    if eligible.size == 0 or plan.num_free + int(victim_gpus[eligible].sum()) < need:
        return plan, None
    trial = plan.copy()
    taken: list[int] = []
    for i in eligible.tolist():
        trial.preempt(int(victims[i]))
        taken.append(i)
        if trial.num_free < need:
            continue
        gpus = place(trial)
        if gpus is not None:
            open_[taken] = False
            return trial, gpus
    return plan, None


def wake_at_earliest(plan: Plan, times: np.ndarray, now: float, pending: float) -> float:
    """Ask for a wake-up at the earliest of ``times`` after ``now``, unless one at least as
    early is already pending. Returns the new pending wake-up time (keep it for next call)."""
    future = times[times > now]
    if future.size == 0:
        return pending
    t = float(future.min())
    if t < pending or pending <= now:
        plan.wake_up(t)
        return t
    return pending
