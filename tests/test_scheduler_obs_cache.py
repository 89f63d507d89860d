"""Scheduler observations are unchanged by the observer's shortcuts: its cache of history
estimates, its reuse of slot rows within a decision instant, the compiled keyed estimates
(``perf.estimate_kernel``), the compiled slot rows and globals (``perf.slot_kernel``) and the
compiled terms of the shaping potential (``perf.potential_kernel``), and the slot-action env's
running order kept for a decision instant (``SchedulerEnv.cache_running_order``). The
observations, masks and rewards of seeded masked-random episodes hash the same with each
shortcut on and off, in Scheduler-v4 (per-job actions, preemption; with the oracle's known
durations too), in a slot-action version with history features and preemption, and in one
that requeues preempted jobs at the same instant."""

from __future__ import annotations

import hashlib

import gymnasium as gym
import numpy as np
import pytest

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.envs.base import ClusterEnv
from dlcluster_gym.envs.queue_obs import RUNNING_FEATURES, WAITING_FEATURES, QueueObserver
from dlcluster_gym.envs.scheduler_env import SchedulerEnv
from dlcluster_gym.sim import estimators

CASES = [
    ("DLCluster/Scheduler-v4", {"scenario": "dally-groups-4rack-load12"}),
    (
        "DLCluster/Scheduler-v2",
        {"scenario": "dally-groups-4rack-load12", "history_features": True, "preemption": True},
    ),
    (
        "DLCluster/Scheduler-v2",
        {
            "scenario": "dally-groups-4rack-load12",
            "history_features": True,
            "preemption": True,
            "requeue": True,
        },
    ),
    ("DLCluster/Scheduler-v4", {"scenario": "dally-groups-4rack-load12", "known_durations": True}),
]
SWITCHES = {
    "history-cache": (QueueObserver, "cache_history"),
    "row-cache": (QueueObserver, "cache_rows"),
    "compiled-estimates": (estimators, "use_kernel"),
    "compiled-rows": (QueueObserver, "compiled_rows"),
    "compiled-potential": (ClusterEnv, "compiled_potential"),
    "running-order": (SchedulerEnv, "cache_running_order"),
}


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
@pytest.mark.parametrize("switch", list(SWITCHES))
@pytest.mark.parametrize(
    ("env_id", "kwargs"), CASES, ids=["v4", "v2-history", "v2-requeue", "v4-known"]
)
def test_observer_shortcuts_keep_observations_identical(
    env_id: str, kwargs: dict, switch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, n, finished = _digest(env_id, kwargs, 1500)
    assert n == 1500
    assert finished > 20  # the history changed many times during the episodes
    owner, name = SWITCHES[switch]
    monkeypatch.setattr(owner, name, False)
    slow, m, _ = _digest(env_id, kwargs, 1500)
    assert m == n
    assert fast == slow


def test_the_compiled_rows_columns_follow_the_feature_lists() -> None:
    """``perf.slot_kernel`` writes ``preemptions`` and ``remaining_time`` one column past
    ``nw_sens`` and ``remaining_work``."""
    for features in (WAITING_FEATURES, RUNNING_FEATURES):
        assert features[features.index("nw_sens") + 1] == "preemptions"
        assert features[features.index("remaining_work") + 1] == "remaining_time"
