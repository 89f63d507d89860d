"""The paper heuristics as env policies (``predict`` from the observation alone).

Placement-v0: ``dally`` (Algorithm 1: one machine if it fits, else after the machine timer
one rack, else after the rack timer anything, else wait), ``tiresias`` (high-skew jobs take
the fewest machines they could ever use or wait, others pack), ``gandiva`` (first fit),
``random`` (uniform over the valid actions, wait included). DelayTimer-v0: ``dally``
(Algorithm 2's current estimate), ``dally-manual`` (12 h + 12 h), ``random``.

Each reads exact 0/1 flags of the observation (validity, timer expiry, skew), so running one
in Placement-v0 with its own base policy gives exactly the native scheduler's decisions.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from dlcluster_gym import numerics
from dlcluster_gym.envs import delay_timer as dt
from dlcluster_gym.envs import placement as pl
from dlcluster_gym.sim import offers as of

HOUR = 3600.0


class _EnvPolicy:
    """Batch handling: ``predict`` accepts one observation or a batch."""

    base_policy = "dally"

    def __init__(self, env: gym.Env, seed: int = 0) -> None:
        self.action_space = env.action_space
        self.observation_space = env.observation_space
        self.rng = np.random.default_rng(seed)
        self.env = env.unwrapped

    def act(self, obs: np.ndarray) -> Any:
        raise NotImplementedError

    def predict(
        self,
        observation: np.ndarray,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, Any]:
        obs = np.asarray(observation)
        if obs.ndim == len(self.observation_space.shape):
            return np.asarray(self.act(obs)), state
        return np.stack([np.asarray(self.act(o)) for o in obs]), state


_I = pl.OBS_INDEX


class DallyPlacement(_EnvPolicy):
    """Dally's local scheduler (Algorithm 1) answering each offer."""

    base_policy = "dally"

    def act(self, obs: np.ndarray) -> int:
        if obs[_I["machine.valid"]] > 0.5:
            return of.MACHINE
        if obs[_I["job.past_machine_timer"]] > 0.5:
            if obs[_I["rack.valid"]] > 0.5:
                return of.RACK
            if obs[_I["job.past_rack_timer"]] > 0.5 and obs[_I["network.valid"]] > 0.5:
                return of.NETWORK
        return of.WAIT


class TiresiasPlacement(_EnvPolicy):
    """Tiresias's skew-based consolidation."""

    base_policy = "tiresias"

    def act(self, obs: np.ndarray) -> int:
        high = obs[_I["job.high_skew"]] > 0.5
        slot = of.FEWEST_MACHINES if high else of.PACKED
        return slot if obs[_I[f"{of.ACTION_NAMES[slot]}.valid"]] > 0.5 else of.WAIT


class GandivaPlacement(_EnvPolicy):
    """Gandiva's network-agnostic first fit."""

    base_policy = "gandiva"

    def act(self, obs: np.ndarray) -> int:
        return of.FIRST_FIT if obs[_I["first-fit.valid"]] > 0.5 else of.WAIT


class RandomMasked(_EnvPolicy):
    """Uniform over valid actions (Placement-v0, wait included) or random timers."""

    def act(self, obs: np.ndarray) -> Any:
        if isinstance(self.action_space, gym.spaces.Discrete):
            cands = [a for a, v in enumerate(obs[pl.VALID_INDEX].tolist(), 1) if v > 0.5]
            limited = getattr(self.env, "wait_limit", "none") == "rack_timer"
            past = obs[_I["job.past_rack_timer"]] > 0.5 and obs[_I["job.past_machine_timer"]] > 0.5
            no_wait = limited and cands and past
            valid = cands if no_wait else [0, *cands]
            return valid[int(self.rng.integers(len(valid)))]
        return self.rng.uniform(-1.0, 1.0, self.action_space.shape).astype(np.float32)


def _class_timers(obs: np.ndarray, key: str) -> np.ndarray:
    """Invert the log-scaled timer features of every class back to seconds."""
    f = np.array([obs[dt.OBS_INDEX[f"{c}.{key}"]] for c in dt.DEMAND_CLASSES], dtype=np.float64)
    return numerics.expm1(f * math.log1p(168.0)) * HOUR


class DallyAutoTuner(_EnvPolicy):
    """Algorithm 2: set each class's timers to the auto-tuner's current estimate (mean + 2
    standard deviations of recent acceptance waits; 12 h / 24 h while a list is empty). The
    estimate is read from the observation (log-scaled, capped at one week), and refreshed
    only at decision points (natively Dally refreshes it after every acceptance)."""

    def act(self, obs: np.ndarray) -> np.ndarray:
        tm = _class_timers(obs, "tuner_machine")
        tr = np.maximum(_class_timers(obs, "tuner_rack"), tm)
        return dt.timers_to_action(tm, tr - tm, self.env.max_timer_s)


class DallyManualTimers(_EnvPolicy):
    """Dally-manual: 12 h machine timer, then another 12 h (4.3.2)."""

    def __init__(self, env: gym.Env, seed: int = 0, machine_h: float = 12.0,
                 extra_rack_h: float = 12.0) -> None:  # fmt: skip
        super().__init__(env, seed)
        n = dt.NUM_CLASSES
        self._action = dt.timers_to_action(
            np.full(n, machine_h * HOUR), np.full(n, extra_rack_h * HOUR), self.env.max_timer_s
        )

    def act(self, obs: np.ndarray) -> np.ndarray:
        return self._action.copy()
