"""Save any stable-baselines3 / sb3-contrib model as a DLCluster agent checkpoint.

``save_agent`` writes what ``dlcluster train`` writes: the plain SB3 zip (``model.save``) with
one extra member, ``dlcluster_agent.json`` (``agent_meta.META_NAME``): the env kind, the env id
with its version, the observation size, the action space, the env kwargs (always with the
``agent_meta.OBSERVATION_KWARGS``, which decide whether the agent observes ground truth) and
the package versions. The checkpoint then works wherever a trained one does:
``--policy agent:PATH``, ``make_env_policy("agent:PATH", env)``, ``dlcluster evaluate --agent
PATH`` and leaderboard suites.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym

from dlcluster_gym.envs.agent_loader import check_agent_env
from dlcluster_gym.envs.agent_meta import (
    ENV_KINDS,
    META_FORMAT,
    check_agent_meta,
    observation_kwargs,
    read_agent_meta,
    recorded_version,
)
from dlcluster_gym.errors import ConfigError, DLClusterError

from . import AGENT_KINDS
from .config import AgentConfig, load_agent_config
from .load import SB3_ALGORITHMS, save_checkpoint

SCENARIO_KWARGS = ("scenario", "scenarios", "scenario_overrides", "traces_dir", "render_mode")
"""Env kwargs ``save_agent`` does not record: they choose the scenarios an agent was trained
on, not what it observes or does (``dlcluster evaluate`` and leaderboards pick scenarios)."""
_AGENT_OF_KIND = {kind: agent for agent, kind in AGENT_KINDS.items()}
_CORE_KEYS = ("format", "agent", "algorithm", "algorithm_class", "env_id", "env_kind",
              "observation_size", "action_space", "env_kwargs", "config", "versions")  # fmt: skip


def save_agent(
    model: Any,
    path: str | Path,
    env_kwargs: Mapping[str, Any],
    *,
    env_id: str | None = None,
    config: AgentConfig | Mapping[str, Any] | str | Path | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Save ``model`` (any stable-baselines3 or sb3-contrib algorithm) trained on a DLCluster
    env as an agent checkpoint at ``path`` (``.zip`` appended when missing); returns the path.

    ``env_kwargs``: the kwargs the training env was made with (``gymnasium.make(env_id,
    **env_kwargs)``); the scenario ones (``SCENARIO_KWARGS``) are not recorded, and the
    ``OBSERVATION_KWARGS`` are recorded with their values in that env version when not given.
    ``env_id``: the env id with its version (``"DLCluster/Scheduler-v2"``); taken from the
    model's env when it has one (they must agree when both are there). ``config``: an agent
    training config (object, mapping, YAML path or built-in name) to record, whose
    ``evaluation`` set becomes ``dlcluster evaluate``'s default for this agent. ``metadata``:
    more JSON fields to record (e.g. ``{"description": ...}``).

    Checked before anything is written (one-line ``ConfigError``): a flat ``Box``
    observation, no observation normalization (an agent acts on raw observations), and
    ``env_kwargs``/``env_id`` that describe the model's env: the env (the model's own, else
    one made from ``env_id`` and ``env_kwargs``) must accept the checkpoint exactly as
    ``agent:PATH`` will (``agent_loader.check_agent_env``).
    """
    from stable_baselines3.common.base_class import BaseAlgorithm

    if not isinstance(model, BaseAlgorithm):
        raise ConfigError(
            f"save_agent: expected a stable-baselines3 / sb3-contrib model, got "
            f"{type(model).__name__}"
        )
    if not isinstance(env_kwargs, Mapping):
        raise ConfigError(
            f"save_agent: env_kwargs must be a mapping of the env's kwargs, got {env_kwargs!r}"
        )
    local_env, model_id = _model_env(model)
    env_id = _env_id(env_id, model_id)
    kind, version = _kind_version(env_id)
    _check_normalization(model)
    space = model.observation_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise ConfigError(
            f"save_agent: the model's observation space is {space}; an agent checkpoint needs "
            "a flat Box observation (make the env with observation='flat')"
        )
    kwargs = {k: v for k, v in env_kwargs.items() if k not in SCENARIO_KWARGS}
    kwargs = {**kwargs, **observation_kwargs(kind, kwargs, version)}
    cfg = _config(config, kind)
    meta: dict[str, Any] = {
        "agent": cfg.agent if cfg is not None else _AGENT_OF_KIND[kind],
        **_algorithm(model),
        "env_id": env_id,
        "env_kind": kind,
        "observation_size": int(space.shape[0]),
        "action_space": str(model.action_space),
        "env_kwargs": kwargs,
        "normalization": {"observation": None, "reward": _reward_normalization(model)},
        "config": cfg.model_dump(mode="json") if cfg is not None else None,
        "versions": _package_versions(),
        "saved_with": "dlcluster_gym.agents.save_agent",
    }
    for key, value in (metadata or {}).items():
        if key in _CORE_KEYS or key in meta:
            raise ConfigError(f"save_agent: metadata key {key!r} is set by save_agent itself")
        meta[key] = value
    try:
        json.dumps(meta)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"save_agent: env_kwargs and metadata must be JSON data: {exc}") from None
    out = Path(path)
    if out.suffix != ".zip":
        out = out.with_name(out.name + ".zip")
    check_agent_meta({"format": META_FORMAT, **meta}, out)
    env = local_env if local_env is not None else _probe_env(env_id, kwargs)
    try:
        check_agent_env(meta, env, out)
    except ConfigError as err:
        where = "the model's env" if local_env is not None else f"{env_id} made with env_kwargs"
        raise ConfigError(
            f"save_agent: env_id/env_kwargs do not describe the model ({where}): {err}"
        ) from None
    save_checkpoint(model, out, meta)
    read_agent_meta(out)  # what agent:PATH reads back
    return out


def _model_env(model: Any) -> tuple[gym.Env | None, str | None]:
    """The model's DLCluster env where it is in this process (its first env), and its id."""
    venv = model.get_env()
    if venv is None:
        return None, None
    base = venv
    while hasattr(base, "venv"):  # VecNormalize, VecFrameStack, ...
        base = base.venv
    envs = getattr(base, "envs", None)
    if not envs:  # another process (SubprocVecEnv): the id only
        spec = venv.get_attr("spec", indices=[0])[0]
        return None, getattr(spec, "id", None)
    env = envs[0].unwrapped
    if not hasattr(env, "env_name") and isinstance(getattr(env, "env", None), gym.Env):
        env = env.env.unwrapped  # a scenario mix (agents.envs.ScenarioMixEnv): its current env
    if not hasattr(env, "env_name"):
        return None, None
    spec = getattr(env, "spec", None)
    return env, (spec.id if spec is not None else f"DLCluster/{env.env_name}")


_ID = re.compile(r"^DLCluster/(?P<kind>[A-Za-z]+)(?:-[\w.-]+?)?-v(?P<v>\d+)$")


def _canonical(env_id: str) -> str:
    """``DLCluster/<Kind>-v<N>`` of an id (a scenario preset id keeps its kind and version)."""
    m = _ID.match(env_id)
    if m is None or m["kind"] not in ENV_KINDS:
        raise ConfigError(
            f"save_agent: env_id {env_id!r} is not a DLCluster env id; expected "
            f"DLCluster/<kind>-v<N> with kind one of {', '.join(ENV_KINDS)}"
        )
    return f"DLCluster/{m['kind']}-v{m['v']}"


def _env_id(given: str | None, from_model: str | None) -> str:
    if given is None and from_model is None:
        raise ConfigError(
            "save_agent: the model has no DLCluster env to read the env id from; give "
            "env_id='DLCluster/<kind>-v<N>' (the id, with its version, the model was trained on)"
        )
    ids = [_canonical(x) for x in (given, from_model) if x is not None]
    if len(set(ids)) > 1:
        raise ConfigError(
            f"save_agent: env_id {given!r} is not the model's env, {from_model!r}; give the id "
            "the model was trained on"
        )
    return ids[0]


def _kind_version(env_id: str) -> tuple[str, int]:
    kind = env_id.split("/", 1)[1].split("-", 1)[0]
    version = recorded_version({"env_kind": kind, "env_id": env_id}, "save_agent")
    assert version is not None
    return kind, version


def _check_normalization(model: Any) -> None:
    from stable_baselines3.common.vec_env import unwrap_vec_normalize

    venv = model.get_env()
    norm = unwrap_vec_normalize(venv) if venv is not None else None
    if norm is not None and norm.norm_obs:
        raise ConfigError(
            "save_agent: the model was trained with VecNormalize(norm_obs=True), but an agent "
            "acts on the env's raw observations; train with norm_obs=False (the observations "
            "are already in [0, 1]) or wrap the policy's input yourself"
        )


def _reward_normalization(model: Any) -> str | None:
    from stable_baselines3.common.vec_env import unwrap_vec_normalize

    venv = model.get_env()
    norm = unwrap_vec_normalize(venv) if venv is not None else None
    return "VecNormalize (training only)" if norm is not None and norm.norm_reward else None


def _algorithm(model: Any) -> dict[str, str]:
    """``{"algorithm": name}`` for a class in ``load.SB3_ALGORITHMS``; for another algorithm
    class also ``algorithm_class`` (``"module:Class"``, imported when the agent loads)."""
    cls = type(model)
    for name, target in SB3_ALGORITHMS.items():
        module, _, attr = target.partition(":")
        if cls.__name__ == attr and cls.__module__.split(".")[0] == module:
            return {"algorithm": name}
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()
    return {"algorithm": snake, "algorithm_class": f"{cls.__module__}:{cls.__qualname__}"}


def _config(
    config: AgentConfig | Mapping[str, Any] | str | Path | None, kind: str
) -> AgentConfig | None:
    if config is None:
        return None
    if isinstance(config, AgentConfig):
        cfg = config
    elif isinstance(config, Mapping):
        cfg = load_agent_config(dict(config))
    else:
        cfg = load_agent_config(config)
    if AGENT_KINDS[cfg.agent] != kind:
        raise ConfigError(
            f"save_agent: config is a {cfg.agent} agent's ({AGENT_KINDS[cfg.agent]} env), but "
            f"the model acts in a {kind} env"
        )
    return cfg


def _package_versions() -> dict[str, str]:
    from .train import _versions

    return _versions()


def _probe_env(env_id: str, kwargs: Mapping[str, Any]) -> gym.Env:
    """``env_id`` made with ``kwargs`` on its default scenario, to check the model against."""
    import dlcluster_gym  # noqa: F401  (registers the envs)

    try:
        with warnings.catch_warnings():  # an old version warns whoever makes it, not here
            warnings.simplefilter("ignore", DeprecationWarning)
            return gym.make(env_id, **kwargs)
    except DLClusterError as err:
        raise ConfigError(f"save_agent: {env_id} cannot be made with env_kwargs: {err}") from None
