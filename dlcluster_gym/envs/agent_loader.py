"""Trained agents as env policies and as native schedulers (``agent:PATH``).

A checkpoint is a stable-baselines3 zip with one extra member, ``dlcluster_agent.json``: the
env it was trained on (kind, id, observation size, env kwargs such as the base policy), the
config and the command that produced it. This module reads and checks that metadata with the
standard library only; the model itself is loaded by ``agents.load``, which imports torch,
and only when an agent is actually used.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection
from pathlib import Path
from typing import Any

import gymnasium as gym

from dlcluster_gym.envs.agent_meta import (
    FREE_ENV_KWARGS,
    check_agent_meta,
    env_kind,
    read_agent_meta,
    recorded_version,
    trained_env_kwargs,
    trained_version,
    version_kwargs,
)
from dlcluster_gym.envs.versions import VERSIONS
from dlcluster_gym.errors import ConfigError

AGENT_PARAMS: dict[str, tuple[str, ...]] = {
    "Placement": ("base_policy", "base_params"),
    "DelayTimer": ("decision_period_s", "max_timer_s", "dally_params"),
    "Scheduler": (),
}


# Env kwargs that change what an agent sees or what its actions do: a checkpoint runs only in an
# env whose values equal the recorded ones (the class defaults where none was recorded; the
# OBSERVATION_KWARGS must be recorded, see agent_meta.check_agent_meta).
AGENT_ENV_KWARGS: dict[str, tuple[str, ...]] = {
    "Placement": ("base_policy", "base_params", "wait_retry_s", "done_jobs_of", "known_durations"),
    "DelayTimer": (
        "decision_period_s",
        "max_timer_s",
        "dally_params",
        "wait_retry_s",
        "done_jobs_of",
    ),
    "Scheduler": (
        "max_waiting",
        "max_running",
        "preemption",
        "requeue",
        "move_as",
        "order",
        "running_order",
        "known_durations",
        "observation",
        "wait_retry_s",
        "done_jobs_of",
        "auto_start",
        "max_preemptions_per_h",
    ),
}


def agent_env_kwargs(meta: dict[str, Any], path: str | Path = "<metadata>") -> dict[str, Any]:
    """The env kwargs an agent was trained with, as recorded (an error names ``path`` and the
    fix when the ``OBSERVATION_KWARGS`` of its kind are not all recorded)."""
    check_agent_meta(meta, path)
    return dict(meta.get("env_kwargs") or {})


def _norm(key: str, value: Any) -> Any:
    return {} if key.endswith("_params") and value is None else value


def _init_params(cls: type) -> dict[str, inspect.Parameter]:
    """The named ``__init__`` parameters of ``cls`` and its bases (a subclass passes the
    common ones on as ``**kwargs``)."""
    out: dict[str, inspect.Parameter] = {}
    for klass in reversed(cls.__mro__):
        init = klass.__dict__.get("__init__")
        if init is not None and klass is not object:
            for name, p in inspect.signature(init).parameters.items():
                if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name != "self":
                    out[name] = p
    return out


def compared_kwargs(kind: str) -> tuple[str, ...]:
    """The env kwargs a checkpoint of ``kind`` and an env must agree on: ``AGENT_ENV_KWARGS``
    and every kwarg that defines a version (``VERSIONS``) except the ``FREE_ENV_KWARGS``."""
    defining = (k for v in VERSIONS[kind].values() for k in v if k not in FREE_ENV_KWARGS)
    return tuple(dict.fromkeys((*AGENT_ENV_KWARGS.get(kind, ()), *defining)))


def _kwarg_mismatches(
    meta: dict[str, Any], env: gym.Env, allow: Collection[str], path: str | Path
) -> list[tuple[str, Any, Any]]:
    """``(key, trained, env's)`` for every ``compared_kwargs`` key (not in ``allow``) whose
    value in ``env`` differs from the one the checkpoint was trained with
    (``agent_meta.trained_env_kwargs``; the class default where neither names it)."""
    inner = env.unwrapped
    given: dict[str, Any] = getattr(inner, "_init_kwargs", {})
    params = _init_params(type(inner))
    agent_env_kwargs(meta, path)  # the OBSERVATION_KWARGS are recorded
    recorded = trained_env_kwargs(meta, path)
    out = []
    for key in compared_kwargs(meta["env_kind"]):
        if key in allow or key not in given or key not in params:
            continue
        want = _norm(key, recorded.get(key, params[key].default))
        have = _norm(key, given[key])
        if key == "requeue":  # no effect without preemption
            want = bool(want) and bool(recorded.get("preemption", params["preemption"].default))
            have = bool(getattr(inner, "requeue", have))
        if want != have:
            out.append((key, want, have))
    return out


def check_agent_env(
    meta: dict[str, Any], env: gym.Env, path: str | Path, allow: Collection[str] = ()
) -> None:
    """The checkpoint must match the env kind, a flat ``Box`` observation of the same size, the
    action space and the env kwargs that change what the agent sees or does (the error names
    both sides, and both env versions where they differ).

    Versions: the checkpoint's version is the one its training env was
    (``agent_meta.trained_version``: its recorded env id's registered kwargs overridden by its
    recorded env kwargs; the shipped checkpoints record ``-v0`` ids with kwargs that make a
    newer version). A checkpoint runs in an env of another version when the two agree on
    every kwarg that defines a version other than the ``FREE_ENV_KWARGS`` (rewards and the
    end flag; e.g. a Scheduler-v0 checkpoint acts in Scheduler-v1), and is refused, naming
    both versions, otherwise.

    Compared kwargs (``compared_kwargs``: ``AGENT_ENV_KWARGS`` and the version-defining ones;
    a key the checkpoint did not record has its version's value, else the env class's
    default, except the ``OBSERVATION_KWARGS``, which every checkpoint must record:
    ``done_jobs_of`` of all three kinds, ``known_durations`` of Placement and Scheduler; see
    ``agent_meta.check_agent_meta``): Placement ``base_policy``, ``base_params`` (who makes
    the offers), ``wait_retry_s``, ``known_durations``; DelayTimer ``decision_period_s``,
    ``max_timer_s`` (the action's scale), ``dally_params``, ``wait_retry_s``; Scheduler
    ``max_waiting``, ``max_running``, ``preemption``, ``requeue`` (only with preemption),
    ``move_as``, ``order``, ``running_order``, ``known_durations``, ``observation``,
    ``wait_retry_s``, ``auto_start`` and ``max_preemptions_per_h`` (Scheduler-v3: which
    questions the agent is asked; compared as given, None meaning the version's default);
    all three ``done_jobs_of``.
    Free (``FREE_ENV_KWARGS``: they change neither the observation nor what an action does):
    the scenario (``scenario``, ``scenario_overrides``, ``scenarios``, ``traces_dir``), the
    rewards (``reward_weights``, ``reward_scale_s``, ``invalid_penalty``,
    ``unfinished_penalty``, ``unfinished_penalty_s``), ``stall_end``, ``max_steps``,
    ``invalid_action`` (masked agents take no invalid action), ``render_mode``; Scheduler
    ``max_machines``/``max_racks`` (dict and graph observations only) and ``skip_trivial``
    (adds instants where only "stop" is valid); Placement ``wait_limit`` (v1 masks wait past
    the rack timer; the observation is the same).
    ``allow``: keys deliberately overridden (``agent:PATH`` parameters).
    """
    kind = env_kind(env)
    want_kind, want_size = meta["env_kind"], int(meta["observation_size"])
    env_name = getattr(env.unwrapped, "env_name", kind)
    if kind != want_kind:
        raise ConfigError(
            f"agent checkpoint {str(path)!r} was trained on {meta.get('env_id', want_kind)} "
            f"with observation size {want_size}, but the env is {env_name} with observation "
            f"size {_size(env.observation_space)}"
        )
    trained = f"{want_kind}-v{trained_version(meta, path)}"
    versions = "" if trained == env_name else f"; trained on {trained}, the env is {env_name}"
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        shape = f" of shape {space.shape}" if space.shape else ""
        raise ConfigError(
            f"agent checkpoint {str(path)!r} was trained on DLCluster/{trained} with a flat "
            f"Box observation of size {want_size}, but the env {env_name} has a "
            f"{type(space).__name__} observation space{shape}; make the env "
            "with observation='flat'"
        )
    size = int(space.shape[0])
    if size != want_size:
        raise ConfigError(
            f"agent checkpoint {str(path)!r} was trained on DLCluster/{trained} with observation "
            f"size {want_size}, but the env is {env_name} with observation size {size}; make "
            f"the env as DLCluster/{trained} with the checkpoint's env kwargs "
            f"{meta.get('env_kwargs', {})}"
        )
    want_space, action_space = meta.get("action_space"), str(env.action_space)
    if want_space is not None and want_space != action_space:
        raise ConfigError(
            f"agent checkpoint {str(path)!r} was trained with action space {want_space} "
            f"(env kwargs {meta.get('env_kwargs', {})}), but the env has {action_space}"
            f"{versions}; make the env with the checkpoint's env kwargs"
        )
    bad = _kwarg_mismatches(meta, env, allow, path)
    if bad:
        trained_kw = ", ".join(f"{k}={w!r}" for k, w, _ in bad)
        has = ", ".join(f"{k}={h!r}" for k, _, h in bad)
        raise ConfigError(
            f"agent checkpoint {str(path)!r} was trained with {trained_kw}, but the env has "
            f"{has} (these change what the agent sees or does{versions}); make the env as "
            f"DLCluster/{trained} with the checkpoint's env kwargs {meta.get('env_kwargs', {})}"
        )


def _size(space: gym.Space) -> str:
    """An observation space's size for messages (its shape when it is not flat)."""
    shape = getattr(space, "shape", None)
    if shape is not None and len(shape) == 1:
        return str(int(shape[0]))
    return f"{type(space).__name__}{'' if shape is None else f' {shape}'}"


def load_agent_policy(path: str | Path, env: gym.Env, allow: Collection[str] = ()) -> Any:
    """The trained agent at ``path`` as an env policy for ``env`` (SB3 ``predict``); ``env``
    must match the checkpoint (``check_agent_env``; ``allow``: kwargs deliberately
    overridden)."""
    meta = read_agent_meta(path)
    check_agent_env(meta, env, path, allow)
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
    kw = {**agent_env_kwargs(meta, name), **params}
    if meta["env_kind"] == "Placement":
        return OfferPolicyScheduler(
            factory,
            base_policy=kw.get("base_policy", "dally"),
            base_params=kw.get("base_params") or {},
            name=name,
            done_jobs_of=kw["done_jobs_of"],
            known_durations=kw["known_durations"],
        )
    if meta["env_kind"] == "DelayTimer":
        extra = {k: kw[k] for k in ("decision_period_s", "max_timer_s", "done_jobs_of") if k in kw}
        return TimerPolicyScheduler(
            factory, dally_params=kw.get("dally_params") or {}, name=name, **extra
        )
    if meta["env_kind"] == "Scheduler":
        # the env is made as the recorded env id was (its version's defining kwargs)
        version = recorded_version(meta, name)
        kw = {**(version_kwargs("Scheduler", version) if version is not None else {}), **kw}
        return QueuePolicyScheduler(factory, env_kwargs=kw, name=name)
    raise ConfigError(f"agent {name!r}: unknown env kind {meta['env_kind']!r}")


def agent_scheduler(path: str, **params: Any) -> Any:
    """The native scheduler of ``--policy agent:PATH`` (see ``scheduler_for``)."""
    meta = read_agent_meta(path)

    def factory(env: gym.Env) -> Any:
        return load_agent_policy(path, env, allow=tuple(params))

    return scheduler_for(meta, factory, f"agent:{path}", **params)
