"""Gymnasium environments, registered under the ``DLCluster/`` namespace on import.

The newest version of each env observes only what a real cluster scheduler could observe
(arrivals, demands, models, placements, attained service, the finished jobs' history, the
cluster's state) or estimates from it. Older versions whose defaults observe ground truth
(job lengths, the episode's job count) stay registered for the checkpoints trained on them;
making one emits a ``DeprecationWarning`` naming the leak, and ``env.unwrapped.clairvoyant``
is True for them (and for any env made with an oracle option or a clairvoyant base policy).

- ``DLCluster/Placement-v3``: answer resource offers (wait or a candidate placement); a job
  past the base policy's rack timer may no longer wait while a placement is valid. The job's
  ``progress`` and ``remaining_work`` are estimates from the finished jobs' lengths
  (``known_durations=False``). ``Placement-v2`` is v3 with the true values
  (``known_durations=True``). ``Placement-v1`` is v2 with the ``done_jobs`` feature over all
  jobs of the workload (``done_jobs_of="workload"``: it tells an agent how many arrivals are
  still to come; v2 divides by the jobs arrived so far). ``Placement-v0`` is v1 with
  unbounded waiting (``wait_limit="none"``, bounded only by the stall retries).
- ``DLCluster/DelayTimer-v1``: set Dally's delay timers per GPU-demand class; ``v0`` is v1
  with ``done_jobs_of="workload"``.
- ``DLCluster/Scheduler-v4``: Scheduler-v3 with preemption on and history features: each
  slot also observes the job's keyed history estimate (finished jobs of its user and job
  name, else its virtual cluster and GPU count) and its virtual cluster's GPU shares. Use it
  for new work.
- ``DLCluster/Scheduler-v3``: run the whole queue one job at a time (``envs.per_job``): wait
  or start a job whose best placement is taken (on which candidate), preempt a job that
  would make room for a blocked one; ``MultiDiscrete([2, 6])`` actions, auto-start on a free
  best placement, per-job preemption cap, a step limit and the ``shaping`` reward
  (preemption off by default); v0-v2 keep the slot actions below.
- ``DLCluster/Scheduler-v2``: run the whole queue (which job, where; optionally
  preempt/move); an episode that ends with jobs unfinished charges each of them the serial
  bound, and a stall ending is ``terminated``. ``Scheduler-v1`` is v2 with
  ``done_jobs_of="workload"``. ``Scheduler-v0`` is v1 with v0's reward and end flag (7 days
  per unfinished job, stall ending ``truncated``) with the same dynamics. The shipped
  ``scheduler.zip`` trains on v0's reward with ``done_jobs_of="arrived"`` (its config's env
  kwargs). ``known_durations=True`` adds the true remaining work (an oracle option of every
  version).

Old versions are not frozen copies of earlier releases: later changes to the engine (the
network model) and to the base policies (as their papers wrote them; the information
boundary: Dally's and Gandiva's move tests on estimates, Tiresias's online thresholds) apply
under every version without a bump, so an old version reproduces the env's rules and
observation, not the per-job results of a run made before those changes.

All run ``dally-poisson-4rack`` with no kwargs; ``DLCluster/<Env>-<scenario>-v<N>`` are the
same envs on other built-in scenarios, and any scenario is ``gymnasium.make(id, scenario=...)``.
"""

from __future__ import annotations

import gymnasium as gym

from dlcluster_gym.envs.versions import VERSIONS, version_name

NAMESPACE = "DLCluster"
ENVS: dict[str, str] = {
    "Placement": "dlcluster_gym.envs.placement:PlacementEnv",
    "DelayTimer": "dlcluster_gym.envs.delay_timer:DelayTimerEnv",
    "Scheduler": "dlcluster_gym.envs.scheduler_env:SchedulerEnv",
}
PRESET_SCENARIOS: tuple[str, ...] = (
    "dally-batch-2rack",
    "dally-batch-4rack",
    "dally-batch-8rack",
    "dally-batch-16rack",
    "dally-poisson-2rack",
    "dally-poisson-8rack",
    "dally-poisson-16rack",
    "cassini-testbed-poisson",
    "a100-4nic-tor3-poisson",  # the network-model presets
    "h100-rail-spine2-poisson",
    "pollux-testbed-poisson",
)
VERSION = 0  # the first version of every env


__all__ = ["ENVS", "NAMESPACE", "PRESET_SCENARIOS", "VERSIONS", "env_ids", "latest",
           "register_envs", "version_name"]  # fmt: skip


def latest(name: str) -> int:
    """The newest version of env ``name``."""
    return max(VERSIONS[name])


def env_ids() -> list[str]:
    """Every id this package registers."""
    ids = []
    for name in ENVS:
        for v in VERSIONS[name]:
            ids.append(f"{NAMESPACE}/{name}-v{v}")
            ids.extend(f"{NAMESPACE}/{name}-{s}-v{v}" for s in PRESET_SCENARIOS)
    return ids


def register_envs() -> None:
    """Register every env id (idempotent)."""
    for name, entry in ENVS.items():
        for v, kw in VERSIONS[name].items():
            _register(f"{NAMESPACE}/{name}-v{v}", entry, dict(kw))
            for s in PRESET_SCENARIOS:
                _register(f"{NAMESPACE}/{name}-{s}-v{v}", entry, {**kw, "scenario": s})


def _register(env_id: str, entry: str, kwargs: dict) -> None:
    if env_id in gym.registry:
        return
    gym.register(id=env_id, entry_point=entry, kwargs=kwargs, disable_env_checker=False)
