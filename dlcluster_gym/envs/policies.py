"""Policies that act in the environments, with stable-baselines3's ``predict`` shape.

``predict(observation, state=None, episode_start=None, deterministic=True) -> (action,
state)`` takes one observation or a batch (first axis) and returns one action or a batch, so
a heuristic, a random policy and a trained SB3 model are used the same way. Heuristics decide
from the observation alone (the features they need are exact flags), so they also work in
vector envs. Each names the env base policy it belongs with (``base_policy``): running a
heuristic in the env with its own base reproduces the native scheduler's metrics exactly.

Names are resolved lazily (``"module:attribute"``), as for schedulers.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from dlcluster_gym.envs.agent_meta import env_kind
from dlcluster_gym.errors import UnknownNameError
from dlcluster_gym.scheduler import _import, check_policy_params


@runtime_checkable
class EnvPolicy(Protocol):
    """What acts in an env (SB3's ``predict`` signature)."""

    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, Any]: ...


ENV_POLICIES: dict[str, dict[str, tuple[str, str]]] = {
    "Placement": {
        "dally": (
            "dlcluster_gym.baselines.env_policies:DallyPlacement",
            "Algorithm 1 on each offer",
        ),
        "tiresias": (
            "dlcluster_gym.baselines.env_policies:TiresiasPlacement",
            "skew-based consolidation: fewest machines for high skew, packed otherwise",
        ),
        "gandiva": ("dlcluster_gym.baselines.env_policies:GandivaPlacement", "first fit, any tier"),
        "random": (
            "dlcluster_gym.baselines.env_policies:RandomMasked",
            "uniform over valid actions",
        ),
    },
    "DelayTimer": {
        "dally": (
            "dlcluster_gym.baselines.env_policies:DallyAutoTuner",
            "Algorithm 2's current estimate at each decision point",
        ),
        "dally-manual": (
            "dlcluster_gym.baselines.env_policies:DallyManualTimers",
            "fixed timers: 12 h machine + another 12 h rack",
        ),
        "random": ("dlcluster_gym.baselines.env_policies:RandomMasked", "uniform random timers"),
    },
    "Scheduler": {
        "fcfs": (
            "dlcluster_gym.baselines.queue_policies:FCFSInScheduler",
            "native fcfs through the env",
        ),
        "dally": (
            "dlcluster_gym.baselines.queue_policies:DallyInScheduler",
            "native dally (paper preemption: requeue) through the env",
        ),
        "dally-relocate": (
            "dlcluster_gym.baselines.queue_policies:DallyRelocateInScheduler",
            "native dally with preemption=relocate through the env",
        ),
        "tiresias": (
            "dlcluster_gym.baselines.queue_policies:TiresiasInScheduler",
            "native tiresias through the env",
        ),
        "gandiva": (
            "dlcluster_gym.baselines.queue_policies:GandivaInScheduler",
            "native gandiva through the env",
        ),
        "srw": (
            "dlcluster_gym.baselines.queue_policies:SRWInScheduler",
            "clairvoyant shortest remaining work (needs known_durations=True)",
        ),
        "srw-slots": (
            "dlcluster_gym.baselines.queue_policies:ClairvoyantSlots",
            "teacher: clairvoyant shortest remaining work among the slots, best tier",
        ),
        "gittins-slots": (
            "dlcluster_gym.baselines.queue_policies:GittinsSlots",
            "teacher: Gittins index of run time / GPUs, target set, preempts (non-clairvoyant)",
        ),
        "las-slots": (
            "dlcluster_gym.baselines.queue_policies:LASSlots",
            "teacher: least attained GPU-service, target set, preempts (non-clairvoyant)",
        ),
        "qssf-slots": (
            "dlcluster_gym.baselines.queue_policies:QSSFSlots",
            "least estimated remaining GPU-service (history by user/job name, VC/GPUs), "
            "preempts (non-clairvoyant)",
        ),
        "srsf-slots": (
            "dlcluster_gym.baselines.queue_policies:SRSFSlots",
            "clairvoyant: least true remaining GPU-service, target set, preempts",
        ),
        "random": (
            "dlcluster_gym.baselines.queue_policies:RandomScheduler",
            "uniform over action_masks()",
        ),
    },
}


PER_JOB_POLICIES: dict[str, tuple[str, str]] = {
    "random": (
        "dlcluster_gym.baselines.per_job_policies:PerJobRandom",
        "each head uniform over its valid values",
    ),
    "greedy": (
        "dlcluster_gym.baselines.per_job_policies:PerJobGreedy",
        "start the focus job on its best tier if free, else defer; never preempt",
    ),
    "las": (
        "dlcluster_gym.baselines.per_job_policies:PerJobLAS",
        "greedy, and preempt a job that attained 4 GPU-hours more than the job it makes room for",
    ),
}
"""The policies of Scheduler-v3 (``actions="per-job"``), whose actions are
``(act, candidate)`` pairs; ``ENV_POLICIES["Scheduler"]`` act in v0-v2 (``actions="slots"``)."""


def _table(kind: str, env: gym.Env | None = None) -> dict[str, tuple[str, str]]:
    if kind == "Scheduler" and env is not None and getattr(env.unwrapped, "per_job", False):
        return PER_JOB_POLICIES
    return ENV_POLICIES[kind]


def check_env_policy_name(kind: str, name: str, env: gym.Env | None = None) -> None:
    """An unknown env policy name for an env of ``kind`` (``env``: the env it will act in,
    whose action design picks the table) is an error listing the valid ones (``agent:PATH``
    names a checkpoint and passes)."""
    if name.startswith("agent:"):
        return
    if env is None and kind == "Scheduler":
        valid = {**ENV_POLICIES[kind], **PER_JOB_POLICIES}
    else:
        valid = _table(kind, env)
    if name not in valid:
        raise UnknownNameError(f"{kind} env policy", name, valid)


def make_env_policy(name: str, env: gym.Env, **params: Any) -> EnvPolicy:
    """A policy by name for ``env`` (``agent:PATH`` loads a trained checkpoint)."""
    kind = env_kind(env)
    check_env_policy_name(kind, name, env)
    if name.startswith("agent:"):
        from dlcluster_gym.envs.agent_loader import load_agent_policy

        return load_agent_policy(name[len("agent:") :], env)
    table = _table(kind, env)
    factory = _import(table[name][0])
    params = check_policy_params(f"{kind} env policy {name}", params, factory, bound=("env",))
    return factory(env, **params)


def rollout(
    env: gym.Env, policy: EnvPolicy, seed: int | None = None, deterministic: bool = True
) -> tuple[dict[str, Any], float, int]:
    """Run one episode; returns (final info, total reward, steps)."""
    obs, info = env.reset(seed=seed)
    total, steps = 0.0, 0
    masks = getattr(env.unwrapped, "action_masks", None)
    while True:
        if masks is not None and getattr(policy, "uses_masks", False):
            action, _ = policy.predict(obs, deterministic=deterministic, action_masks=masks())
        else:
            action, _ = policy.predict(obs, deterministic=deterministic)
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        steps += 1
        if terminated or truncated:
            return info, total, steps
