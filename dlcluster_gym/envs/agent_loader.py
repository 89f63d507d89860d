"""Trained agents as env policies and as native schedulers (``agent:PATH``).

A checkpoint is a stable-baselines3 zip with one extra member, ``dlcluster_agent.json``: the
env it was trained on (kind, id, observation size, env kwargs such as the base policy), the
config and the command that produced it. This module reads and checks that metadata with the
standard library only; the model itself is loaded by ``agents.load``, which imports torch,
and only when an agent is actually used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from dlcluster_gym.envs.agent_meta import env_kind, read_agent_meta
from dlcluster_gym.errors import ConfigError

AGENT_PARAMS: dict[str, tuple[str, ...]] = {
    "Placement": ("base_policy", "base_params"),
    "DelayTimer": ("decision_period_s", "max_timer_s", "dally_params"),
    "Scheduler": (),
}


def check_agent_env(meta: dict[str, Any], env: gym.Env, path: str | Path) -> None:
    """The checkpoint must match the env kind, observation size and action space (the error
    names both)."""
    kind = env_kind(env)
    size = int(env.observation_space.shape[0])  # type: ignore[index]
    want_kind, want_size = meta["env_kind"], int(meta["observation_size"])
    if kind != want_kind or size != want_size:
        raise ConfigError(
            f"agent checkpoint {str(path)!r} was trained on {meta.get('env_id', want_kind)} "
            f"with observation size {want_size}, but the env is "
            f"{getattr(env.unwrapped, 'env_name', kind)} with observation size {size}"
        )
    want_space, space = meta.get("action_space"), str(env.action_space)
    if want_space is not None and want_space != space:
        raise ConfigError(
            f"agent checkpoint {str(path)!r} was trained with action space {want_space} "
            f"(env kwargs {meta.get('env_kwargs', {})}), but the env has {space}; make the env "
            "with the checkpoint's env kwargs"
        )


def load_agent_policy(path: str | Path, env: gym.Env) -> Any:
    """The trained agent at ``path`` as an env policy for ``env`` (SB3 ``predict``)."""
    meta = read_agent_meta(path)
    check_agent_env(meta, env, path)
    from dlcluster_gym.agents.load import load_policy

    return load_policy(path, meta)


def scheduler_for(meta: dict[str, Any], factory: Any, name: str, **params: Any) -> Any:
    """A native scheduler around ``factory(env) -> env policy`` for an agent with ``meta``:
    a placement agent answers the offers of the base policy recorded in ``meta``; a
    delay-timer agent sets Dally's timers. ``params`` override the recorded env kwargs."""
    from dlcluster_gym.envs.native import (
        OfferPolicyScheduler,
        QueuePolicyScheduler,
        TimerPolicyScheduler,
    )

    allowed = AGENT_PARAMS.get(meta["env_kind"], ())
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ConfigError(
            f"agent {name!r} has no parameter {unknown[0]!r}; parameters: {', '.join(allowed)}"
        )
    kw = {**meta.get("env_kwargs", {}), **params}
    if meta["env_kind"] == "Placement":
        return OfferPolicyScheduler(
            factory,
            base_policy=kw.get("base_policy", "dally"),
            base_params=kw.get("base_params") or {},
            name=name,
        )
    if meta["env_kind"] == "DelayTimer":
        extra = {k: kw[k] for k in ("decision_period_s", "max_timer_s") if k in kw}
        return TimerPolicyScheduler(
            factory, dally_params=kw.get("dally_params") or {}, name=name, **extra
        )
    if meta["env_kind"] == "Scheduler":
        return QueuePolicyScheduler(factory, env_kwargs=kw, name=name)
    raise ConfigError(f"agent {name!r}: unknown env kind {meta['env_kind']!r}")


def agent_scheduler(path: str, **params: Any) -> Any:
    """The native scheduler of ``--policy agent:PATH`` (see ``scheduler_for``)."""
    meta = read_agent_meta(path)

    def factory(env: gym.Env) -> Any:
        return load_agent_policy(path, env)

    return scheduler_for(meta, factory, f"agent:{path}", **params)
