"""The ``done_jobs`` observation feature carries no future information: from Placement-v2,
DelayTimer-v1 and Scheduler-v2 on it is finished jobs over the jobs that have arrived so far;
the older versions keep finished jobs over all jobs of the workload
(``done_jobs_of="workload"``), which the checkpoints trained on them expect."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.envs import VERSIONS, latest, version_name
from dlcluster_gym.envs.agent_loader import check_agent_env
from dlcluster_gym.envs.delay_timer import OBS_INDEX as TIMER_INDEX
from dlcluster_gym.envs.features import CLUSTER_FEATURES, done_share
from dlcluster_gym.envs.placement import OBS_INDEX as PLACEMENT_INDEX
from dlcluster_gym.errors import ConfigError

SCEN = "dally-poisson-2rack"
SMALL = {"workload": {"num_jobs": 40}}
DONE = CLUSTER_FEATURES.index("done_jobs")


def test_done_share_by_hand() -> None:
    assert done_share(3, 2, 1, 100, "arrived") == 0.5
    assert done_share(3, 2, 1, 100, "workload") == 0.03
    assert done_share(0, 0, 0, 100, "arrived") == 0.0
    assert done_share(0, 0, 0, 0, "workload") == 0.0


def _episode(env_id: str, read, steps: int = 400, **kw) -> list[tuple[float, int, int, int]]:
    """(feature, done, waiting, running) after every step of a random masked rollout."""
    with warnings.catch_warnings():  # old versions warn that they observe ground truth
        warnings.simplefilter("ignore", DeprecationWarning)
        env = gym.make(env_id, scenario=SCEN, scenario_overrides=SMALL, **kw)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=3)
    out = []
    inner = env.unwrapped
    for _ in range(steps):
        e = inner.engine
        out.append((float(read(obs)), e.n_done, len(e.waiting), len(e.running)))
        if getattr(inner, "per_job", False):  # Scheduler-v3: (act, candidate), each head masked
            m = inner.action_masks()
            a = np.array([rng.choice(np.flatnonzero(m[:2])), rng.choice(np.flatnonzero(m[2:]))])
        elif hasattr(inner, "action_masks"):
            a = int(rng.choice(np.flatnonzero(inner.action_masks())))
        else:
            a = env.action_space.sample()
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    return out


READERS = {
    "Placement": lambda o: o[PLACEMENT_INDEX["cluster.done_jobs"]],
    "DelayTimer": lambda o: o[TIMER_INDEX["cluster.done_jobs"]],
    "Scheduler": lambda o: o["globals"][DONE],
}
EXTRA = {"Scheduler": {"observation": "dict"}}


@pytest.mark.parametrize("kind", sorted(READERS))
def test_newest_version_divides_by_arrived_jobs(kind: str) -> None:
    # Scheduler-v3 asks about every waiting job (no auto-start), so that decision points come
    # while jobs are still arriving
    newest = {"auto_start": False} if kind == "Scheduler" else {}
    rows = _episode(f"DLCluster/{kind}-v{latest(kind)}", READERS[kind], **EXTRA.get(kind, {}),
                    **newest)  # fmt: skip
    assert any(d > 0 for _, d, _, _ in rows), "no job finished: the test checks nothing"
    assert any(d + w + r < 40 for _, d, w, r in rows), "every job arrived from the start"
    for feat, d, w, r in rows:
        want = d / (d + w + r) if d + w + r else 0.0
        assert feat == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("kind", sorted(READERS))
def test_older_versions_keep_the_workload_share(kind: str) -> None:
    old = max(v for v, kw in VERSIONS[kind].items() if kw.get("done_jobs_of") == "workload")
    rows = _episode(f"DLCluster/{kind}-v{old}", READERS[kind], **EXTRA.get(kind, {}))
    assert any(d > 0 for _, d, _, _ in rows)
    for feat, d, _, _ in rows:
        assert feat == pytest.approx(d / 40, abs=1e-6)


def test_version_names_follow_the_kwargs() -> None:
    known = {"known_durations": True}
    assert version_name(
        "Placement", {"wait_limit": "none", "done_jobs_of": "workload", **known}
    ) == ("Placement-v0")
    assert version_name(
        "Placement", {"wait_limit": "rack_timer", "done_jobs_of": "workload", **known}
    ) == ("Placement-v1")
    assert version_name(
        "Placement", {"wait_limit": "rack_timer", "done_jobs_of": "arrived", **known}
    ) == ("Placement-v2")
    assert version_name(
        "Placement", {"wait_limit": "rack_timer", "done_jobs_of": "arrived",
                      "known_durations": False}
    ) == ("Placement-v3")  # fmt: skip
    assert version_name("Scheduler", {"done_jobs_of": "arrived"}) == "Scheduler-v2"
    for kind in READERS:
        for v in VERSIONS[kind]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                env = gym.make(f"DLCluster/{kind}-v{v}")
            assert env.unwrapped.env_name == f"{kind}-v{v}"


def test_bad_done_jobs_of_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError, match=r"^Scheduler-v2: done_jobs_of must be one of arrived, "
                       r"workload, got 'all'$"):  # fmt: skip
        gym.make("DLCluster/Scheduler-v2", done_jobs_of="all")


def test_a_checkpoint_must_record_done_jobs_of() -> None:
    """A checkpoint that does not record ``done_jobs_of`` is refused with the fix named (no
    default is assumed); one that records ``"workload"`` runs only where the env has it."""
    env = gym.make("DLCluster/Scheduler-v2")
    meta = {
        "env_kind": "Scheduler",
        "env_id": "DLCluster/Scheduler-v0",
        "observation_size": int(env.observation_space.shape[0]),
        "env_kwargs": {"known_durations": False},
    }
    with pytest.raises(ConfigError, match=r"'old.zip' does not record done_jobs_of .*retrain"):
        check_agent_env(meta, env, "old.zip")
    old = {**meta, "env_kwargs": {"done_jobs_of": "workload", "known_durations": False}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        check_agent_env(old, gym.make("DLCluster/Scheduler-v1"), "old.zip")
    with pytest.raises(ConfigError, match="done_jobs_of='workload', but the env has "
                       "done_jobs_of='arrived'"):  # fmt: skip
        check_agent_env(old, env, "old.zip")
    new = {**meta, "env_kwargs": {"done_jobs_of": "arrived", "known_durations": False}}
    check_agent_env(new, env, "new.zip")
