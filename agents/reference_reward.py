"""A reference run subtracted from the training reward (variance reduction).

Each training episode is one (scenario, seed). The reference policy runs natively on the same
scenario and seed when the episode starts; every step's reward then gets back the job-hours
the reference had in the system over the same stretch of simulated time, and the last step
the reference's remainder. An episode's return becomes minus (the agent's total JCT minus the
reference's), instead of minus the agent's total JCT. The added term depends on the scenario
and seed only, never on the agent's actions, so it changes no policy's ranking; it removes
the spread between heavy and light workloads from the returns, which otherwise dwarfs the few
per cent a policy changes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from dlcluster_gym.api import simulate


class ReferenceRun:
    """The arrival and finish times of a reference run's admitted jobs; a job the run left
    unfinished counts until ``end_s``, where the run stopped (as the env stops its rewards)."""

    def __init__(self, arrival_s: np.ndarray, finish_s: np.ndarray, end_s: float) -> None:
        self.arrival_s = np.asarray(arrival_s, dtype=np.float64)
        finish = np.asarray(finish_s, dtype=np.float64)
        self.finish_s = np.where(np.isfinite(finish), finish, end_s)

    def job_seconds(self, start_s: float, end_s: float) -> float:
        """Job-seconds in the system over ``[start_s, end_s]`` (``end_s`` may be inf)."""
        if not end_s > start_s or self.arrival_s.size == 0:
            return 0.0
        lo = np.maximum(self.arrival_s, start_s)
        hi = np.minimum(self.finish_s, end_s)
        span = hi - lo
        return float(span[span > 0].sum())


def reference_run(env: Any, policy: str, seed: int, traces_dir: str | Path | None) -> ReferenceRun:
    """Run ``policy`` natively on ``env``'s current episode scenario with ``seed``."""
    res = simulate(env.episode_scenario, policy, seed=seed, traces_dir=traces_dir)
    admitted = res.jobs["status"] != "dropped"  # never in the system, as in the env's reward
    t = res.timeseries["t"]
    end = float(t[-1]) if t.size else 0.0  # the last instant the run simulated
    return ReferenceRun(res.jobs["arrival_s"][admitted], res.jobs["finish_s"][admitted], end)


class ReferenceReward:
    """Per-episode state of the reference term for one env (see the module docstring)."""

    def __init__(self, policy: str, traces_dir: str | Path | None = None) -> None:
        self.policy = policy
        self.traces_dir = traces_dir
        self._run: ReferenceRun | None = None
        self._t = 0.0
        self._scale = 0.0

    def start(self, env: Any, seed: int) -> None:
        """A new episode of ``env`` (already reset) with episode seed ``seed``."""
        self._run = reference_run(env, self.policy, seed, self.traces_dir)
        self._t = 0.0
        self._scale = float(env.reward_weights["jct"]) / float(env.reward_scale_s)

    def term(self, env: Any, episode_over: bool) -> float:
        """The reward to add to the step that just ended: the reference's job time since
        the last step (weighted and scaled as the env's ``jct`` reward); on the last step,
        everything the reference had left."""
        if self._run is None:
            return 0.0
        t = env.reward_time_s
        added = self._run.job_seconds(self._t, math.inf if episode_over else t) * self._scale
        self._t = t
        if episode_over:
            self._run = None
        return added
