"""Placement observations are unchanged by the observer's (tier, exposed comm) cache (issue
#15 speed): observations, masks and rewards of seeded masked-random episodes hash the same
with the cache on and off, on a Dally preset and on preset (a) with link sharing on."""

from __future__ import annotations

import hashlib

import gymnasium as gym
import numpy as np
import pytest

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.envs import latest
from dlcluster_gym.envs.placement import PlacementObserver


def _digest(scenario: str, steps: int) -> tuple[str, int]:
    env = gym.make(f"DLCluster/Placement-v{latest('Placement')}", scenario=scenario)
    rng = np.random.default_rng(0)
    h = hashlib.sha256()
    n = 0
    for seed in (1, 2):
        obs, _ = env.reset(seed=seed)
        done = False
        while not done and n < steps:
            mask = env.unwrapped.action_masks()
            h.update(obs.tobytes())
            h.update(np.asarray(mask).tobytes())
            obs, reward, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
            h.update(np.float64(reward).tobytes())
            done = term or trunc
            n += 1
    env.close()
    return h.hexdigest(), n


@pytest.mark.parametrize("scenario", ["dally-poisson-4rack", "a100-4nic-tor3-poisson"])
def test_tier_cache_keeps_observations_identical(
    scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached, n = _digest(scenario, 800)
    monkeypatch.setattr(PlacementObserver, "cache_tiers", False)
    uncached, m = _digest(scenario, 800)
    assert n == m == 800
    assert cached == uncached
