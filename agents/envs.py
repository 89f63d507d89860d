"""Training and evaluation envs: a distribution over scenarios as one Gymnasium env."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from dlcluster_gym.config import load_scenario
from dlcluster_gym.envs.base import deep_merge
from dlcluster_gym.errors import ConfigError, TraceError
from dlcluster_gym.workload.traces import ENV_VAR, trace_root, traces_available

from . import AGENT_KINDS
from .config import AgentConfig, ScenarioSpec
from .reference_reward import ReferenceReward


def scenario_mapping(spec: ScenarioSpec) -> dict[str, Any]:
    """The scenario of ``spec`` as a mapping (preset + overrides), named by its label."""
    data = load_scenario(spec.scenario).model_dump()
    if spec.overrides:
        data = deep_merge(data, spec.overrides)
    data["name"] = spec.name
    return data


def available(
    specs: Sequence[ScenarioSpec], traces_dir: str | Path | None = None
) -> tuple[list[ScenarioSpec], list[str]]:
    """The specs usable here, and the labels skipped because the trace root is absent."""
    have_traces = traces_available(traces_dir)
    keep = [s for s in specs if have_traces or not s.requires_traces]
    skipped = [s.name for s in specs if s.requires_traces and not have_traces]
    return keep, skipped


def train_specs(
    cfg: AgentConfig, traces_dir: str | Path | None = None, source: str = ""
) -> list[ScenarioSpec]:
    """The training scenarios of ``cfg``; a one-line ``ConfigError`` naming ``source`` (the
    config file) and the label when one needs the traces and the trace root is absent:
    training without them would silently train another recipe (validation and evaluation
    skip such scenarios instead)."""
    specs, skipped = available(cfg.train.scenarios, traces_dir)
    if skipped:
        try:
            absent = f"the trace root {trace_root(traces_dir)} does not exist"
        except TraceError:
            absent = f"no trace root is configured (${ENV_VAR}=none)"
        raise ConfigError(
            f"{source or 'agent config'}: train.scenarios {skipped[0]!r} needs the traces, but "
            f"{absent}; point at them with --traces-dir or ${ENV_VAR} (default ../shared/traces)"
        )
    return specs


def env_id(cfg: AgentConfig) -> str:
    return f"DLCluster/{AGENT_KINDS[cfg.agent]}-v0"


class ScenarioMixEnv(gym.Env):
    """One DLCluster env kind over several scenarios: each ``reset`` draws a scenario (by
    weight) and an episode seed from ``[seeds[0], seeds[1])`` with its own generator, so a
    vector of these sees a distribution of cluster sizes, arrival patterns and loads."""

    def __init__(
        self,
        kind: str,
        scenarios: Sequence[dict[str, Any]],
        weights: Sequence[float],
        seeds: tuple[int, int],
        env_kwargs: dict[str, Any] | None = None,
        traces_dir: str | Path | None = None,
        wait_limit: str = "none",
        reward_reference: str | None = None,
    ) -> None:
        super().__init__()
        self.kind = kind
        self.reference = ReferenceReward(reward_reference, traces_dir) if reward_reference else None
        self.wait_limit = wait_limit
        self._obs: np.ndarray | None = None
        self.scenarios = list(scenarios)
        w = np.asarray(weights, dtype=np.float64)
        self.weights = w / w.sum()
        self.seeds = seeds
        self.env_kwargs = dict(env_kwargs or {})
        self.traces_dir = traces_dir
        self._envs: dict[int, gym.Env] = {}
        self.env = self._get(0)
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self._rng = np.random.default_rng(0)

    def _get(self, i: int) -> gym.Env:
        if i not in self._envs:
            self._envs[i] = gym.make(
                f"DLCluster/{self.kind}-v0",
                scenario=self.scenarios[i],
                traces_dir=self.traces_dir,
                **self.env_kwargs,
            ).unwrapped
        return self._envs[i]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        i = int(self._rng.choice(len(self.scenarios), p=self.weights))
        ep_seed = int(self._rng.integers(self.seeds[0], self.seeds[1]))
        self.env = self._get(i)
        obs, info = self.env.reset(seed=ep_seed)
        info["scenario"] = self.scenarios[i]["name"]
        if self.reference is not None:
            self.reference.start(self.env, ep_seed)
        self._obs = obs
        return obs, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.reference is not None:
            added = self.reference.term(self.env, terminated or truncated)
            reward += added
            info.setdefault("rewards", {})["reference"] = added
        self._obs = obs
        return obs, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        mask = self.env.action_masks()  # type: ignore[attr-defined]
        if self.wait_limit == "rack_timer" and self._obs is not None:
            from .load import limit_wait

            mask = limit_wait(self._obs, mask)
        return mask


def make_mix_env(cfg: AgentConfig, traces_dir: str | Path | None = None) -> ScenarioMixEnv:
    """The training distribution of ``cfg`` as one env (no SB3 wrapper, no torch)."""
    import dlcluster_gym  # noqa: F401  (registers the envs in subprocess workers)

    specs = train_specs(cfg, traces_dir)
    return ScenarioMixEnv(
        AGENT_KINDS[cfg.agent],
        [scenario_mapping(s) for s in specs],
        [s.weight for s in specs],
        cfg.train.seeds,
        dict(cfg.env_kwargs),
        traces_dir,
        cfg.wait_limit,
        cfg.train.reward_reference,
    )


def make_train_env_fn(cfg: AgentConfig, rank: int, traces_dir: str | Path | None = None) -> Any:
    """A picklable factory of rank ``rank``'s training env (for SB3 vector envs)."""

    def _make() -> gym.Env:
        from stable_baselines3.common.monitor import Monitor

        return Monitor(make_mix_env(cfg, traces_dir))

    return _make
