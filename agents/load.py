"""Checkpoints: save with metadata inside the SB3 zip, load as an env policy."""

from __future__ import annotations

import importlib
import inspect
import json
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from dlcluster_gym.envs.agent_meta import META_FORMAT, META_NAME, read_agent_meta
from dlcluster_gym.errors import ConfigError

ALGORITHMS = ("maskable_ppo", "ppo")  # what `dlcluster train` trains
SB3_ALGORITHMS: dict[str, str] = {
    "maskable_ppo": "sb3_contrib:MaskablePPO",
    "ppo": "stable_baselines3:PPO",
    "a2c": "stable_baselines3:A2C",
    "dqn": "stable_baselines3:DQN",
    "sac": "stable_baselines3:SAC",
    "td3": "stable_baselines3:TD3",
    "ddpg": "stable_baselines3:DDPG",
    "ars": "sb3_contrib:ARS",
    "crossq": "sb3_contrib:CrossQ",
    "qrdqn": "sb3_contrib:QRDQN",
    "recurrent_ppo": "sb3_contrib:RecurrentPPO",
    "tqc": "sb3_contrib:TQC",
    "trpo": "sb3_contrib:TRPO",
}
"""Algorithm names a checkpoint may record, and their classes (``save_agent`` records one of
these, or the class itself as ``algorithm_class`` for another ``BaseAlgorithm``)."""


def algorithm_class(name: str, target: str | None = None) -> Any:
    """The SB3 class of an algorithm name (``SB3_ALGORITHMS``), or of ``target``
    (``"module:Class"``, a checkpoint's ``algorithm_class``) when given."""
    from dlcluster_gym.scheduler import _import

    if target:
        return _import(target)
    if name not in SB3_ALGORITHMS:
        raise ConfigError(f"unknown algorithm {name!r}; algorithms: {', '.join(SB3_ALGORITHMS)}")
    module, _, cls = SB3_ALGORITHMS[name].partition(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"algorithm {name!r} needs {module}.{cls}: {exc}") from None


def save_checkpoint(model: Any, path: str | Path, meta: dict[str, Any]) -> Path:
    """``model.save(path)`` plus ``META_NAME`` inside the zip (SB3 ignores the extra member)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    model.save(p)
    with zipfile.ZipFile(p, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(META_NAME, json.dumps({"format": META_FORMAT, **meta}, indent=1))
    return p


def limit_wait(observation: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``mask`` with wait removed where the job is past its rack timer and a placement is
    valid (the ``wait_limit: rack_timer`` rule); works on one observation or a batch."""
    from dlcluster_gym.envs.placement import OBS_INDEX

    obs = np.asarray(observation)
    m = np.array(mask, dtype=bool, copy=True)
    past = obs[..., OBS_INDEX["job.past_rack_timer"]] > 0.5
    m[..., 0] &= ~(past & m[..., 1:].any(axis=-1))
    return m


class AgentPolicy:
    """A trained SB3 model with the env-policy interface (``uses_masks`` for placement)."""

    def __init__(self, model: Any, meta: dict[str, Any]) -> None:
        self.model = model
        self.meta = meta
        takes_masks = "action_masks" in inspect.signature(model.predict).parameters
        self.uses_masks = meta["env_kind"] in ("Placement", "Scheduler") and takes_masks
        self.base_policy = meta.get("env_kwargs", {}).get("base_policy", "dally")
        self.wait_limit = (meta.get("config") or {}).get("wait_limit", "none")

    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        if self.uses_masks:
            if action_masks is not None and self.wait_limit == "rack_timer":
                action_masks = limit_wait(observation, action_masks)
            return self.model.predict(
                observation, state, episode_start, deterministic, action_masks=action_masks
            )
        return self.model.predict(observation, state, episode_start, deterministic)


@lru_cache(maxsize=16)
def _load_model(path: str, mtime: float, algorithm: str, target: str | None) -> Any:
    from .threads import use_one_thread

    use_one_thread()
    return algorithm_class(algorithm, target).load(path, device="cpu")


def load_policy(path: str | Path, meta: dict[str, Any] | None = None) -> AgentPolicy:
    """The checkpoint at ``path`` as an ``AgentPolicy`` (models are cached per file)."""
    meta = meta or read_agent_meta(path)
    p = Path(path).resolve()
    algorithm, target = meta["algorithm"], meta.get("algorithm_class")
    algorithm_class(algorithm, target)  # an unknown algorithm is its own clear error
    try:
        model = _load_model(str(p), p.stat().st_mtime, algorithm, target)
    except Exception as exc:  # a damaged or foreign model inside a valid zip
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ConfigError(
            f"agent checkpoint {str(path)!r}: its {algorithm} model does not load "
            f"({type(exc).__name__}: {first}); the file is damaged or was not written by "
            "`dlcluster train` / save_agent: train or copy it again"
        ) from None
    return AgentPolicy(model, meta)
