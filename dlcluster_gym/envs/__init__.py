"""Gymnasium environments, registered under the ``DLCluster/`` namespace on import.

- ``DLCluster/Placement-v1``: answer resource offers (wait or a candidate placement); a job
  past the base policy's rack timer may no longer wait while a placement is valid.
  ``Placement-v0`` is the same env with unbounded waiting (``wait_limit="none"``, bounded
  only by the stall retries). It is NOT a frozen copy of earlier releases: issues #15 (the
  network model) and #16 (the base schedulers as their papers wrote them, e.g. Dally's
  preemption) changed the engine and the base policies under both versions without a bump,
  so v0 reproduces the env's rules (no wait limit) on today's engine, not the per-job results
  of a run made before them (those need the code of that time).
- ``DLCluster/DelayTimer-v0``: set Dally's delay timers per GPU-demand class (its only
  version; issues #15 and #16 changed its engine and base Dally in the same way).
- ``DLCluster/Scheduler-v1``: run the whole queue (which job, where; optionally
  preempt/move); an episode that ends with jobs unfinished charges each of them the serial
  bound, and a stall ending is ``terminated``. ``Scheduler-v0`` keeps v0's reward and end flag
  (7 days per unfinished job, stall ending ``truncated``) with the same dynamics and
  observations: it reproduces the shipped ``scheduler.zip`` agent's training env. Use v1 for
  new work.

All run ``dally-poisson-4rack`` with no kwargs; ``DLCluster/<Env>-<scenario>-v<N>`` are the
same envs on other built-in scenarios, and any scenario is ``gymnasium.make(id, scenario=...)``.
"""

from __future__ import annotations

import gymnasium as gym

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
    "a100-4nic-tor3-poisson",  # the network-model presets (issue 15)
    "h100-rail-spine2-poisson",
    "pollux-testbed-poisson",
)
# Versions of each env and the kwargs that give a version its dynamics (the newest is the
# class's defaults). Bump when dynamics or rewards change; old ids keep working.
VERSIONS: dict[str, dict[int, dict]] = {
    "Placement": {0: {"wait_limit": "none"}, 1: {}},
    "DelayTimer": {0: {}},
    "Scheduler": {0: {"unfinished_penalty": "fixed", "stall_end": "truncated"}, 1: {}},
}
VERSION = 0  # the first version of every env


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
