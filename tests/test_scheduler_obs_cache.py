"""Scheduler observations are unchanged by the observer's cache of history estimates: the
observations, masks and rewards of seeded masked-random episodes hash the same with the
cache on and off, in Scheduler-v4 (per-job actions, preemption) and in a slot-action
version with history features."""

from __future__ import annotations

import hashlib

import gymnasium as gym
import numpy as np
import pytest

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.envs.queue_obs import QueueObserver

CASES = [
    ("DLCluster/Scheduler-v4", {"scenario": "dally-groups-4rack-load12"}),
    (
        "DLCluster/Scheduler-v2",
        {"scenario": "dally-groups-4rack-load12", "history_features": True, "preemption": True},
    ),
]


def _digest(env_id: str, kwargs: dict, steps: int) -> tuple[str, int, int]:
    env = gym.make(env_id, **kwargs)
    rng = np.random.default_rng(0)
    h = hashlib.sha256()
    n = finished = 0
    for seed in (1, 2):
        obs, _ = env.reset(seed=seed)
        done = False
        while not done and n < steps:
            mask = np.asarray(env.unwrapped.action_masks())
            h.update(obs.tobytes())
            h.update(mask.tobytes())
            if env.action_space.shape:  # MultiDiscrete: one valid value per head
                heads = np.split(mask, np.cumsum(env.action_space.nvec)[:-1])
                action = np.array([rng.choice(np.flatnonzero(m)) for m in heads])
            else:
                action = int(rng.choice(np.flatnonzero(mask)))
            obs, reward, term, trunc, _ = env.step(action)
            h.update(np.float64(reward).tobytes())
            done = term or trunc
            n += 1
        finished += env.unwrapped.view.history.count
    env.close()
    return h.hexdigest(), n, finished


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(("env_id", "kwargs"), CASES, ids=["v4", "v2-history"])
def test_history_cache_keeps_observations_identical(
    env_id: str, kwargs: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached, n, finished = _digest(env_id, kwargs, 1500)
    assert n == 1500
    assert finished > 20  # the history changed many times during the episodes
    monkeypatch.setattr(QueueObserver, "cache_history", False)
    uncached, m, _ = _digest(env_id, kwargs, 1500)
    assert m == n
    assert cached == uncached
