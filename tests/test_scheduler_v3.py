"""Scheduler-v3: one job at a time (``actions="per-job"``, ``envs/per_job.py``)."""

from __future__ import annotations

import copy
import warnings

import gymnasium as gym
import numpy as np
import pytest

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.api import simulate
from dlcluster_gym.config import load_scenario
from dlcluster_gym.envs.base import deep_merge
from dlcluster_gym.envs.native import QueuePolicyScheduler
from dlcluster_gym.envs.per_job import HOUR_S, PREEMPT_OFFERS, PREFERENCE
from dlcluster_gym.envs.policies import make_env_policy, rollout
from dlcluster_gym.errors import ConfigError, InvalidActionError

ID = "DLCluster/Scheduler-v3"
SCEN = "dally-batch-2rack"
SMALL = {"workload": {"num_jobs": 60}}


def _make(**kw):
    kw = {"scenario": SCEN, "scenario_overrides": SMALL, **kw}
    return gym.make(ID, **kw)


def _episode(env, choose, seed: int = 3) -> tuple[list[dict], dict]:
    """Run ``choose(env, info) -> action``; the info of every step and the last one."""
    _, info = env.reset(seed=seed)
    infos = [info]
    while True:
        _, _, term, trunc, info = env.step(choose(env.unwrapped, info))
        infos.append(info)
        if term or trunc:
            return infos, info


def test_v3_is_registered_with_the_two_headed_action_and_phase_features() -> None:
    env = gym.make(ID)
    u = env.unwrapped
    assert u.env_name == "Scheduler-v3" and u.per_job and not u.clairvoyant
    assert env.action_space == gym.spaces.MultiDiscrete([2, 6])
    v2 = gym.make("DLCluster/Scheduler-v2")
    assert env.observation_space.shape[0] == v2.observation_space.shape[0] + 2
    assert u.max_steps == 100_000 and u.max_preemptions_per_h == 2


def test_preference_order_puts_the_most_consolidated_tier_first() -> None:
    for best, order in PREFERENCE.items():
        assert order[0] == best and sorted(order.tolist()) == list(range(6))


def test_the_focus_is_the_first_slot_and_every_answer_is_about_it() -> None:
    env = _make(preemption=True)
    seen = {"waiting": 0, "running": 0}

    def choose(u, info):
        kind, job = info["focus"]
        seen[kind] += 1
        if kind == "waiting":
            assert job == info["waiting_slots"][0]
            assert job in u.engine.waiting
            assert u.obs_state.demand[job] <= u._plan.num_free
        else:
            assert job == info["running_slots"][0] and job in u.engine.running
            w = np.array([j for j in u.engine.waiting if not u._tmask[j]])
            d = u.obs_state.demand[w]
            need = int(d[d > u._plan.num_free].min()) - u._plan.num_free
            assert u.obs_state.demand[job] >= need > 0
        return np.array([1, 0]) if kind == "running" else make_env_policy("las", env).act()

    _, last = _episode(env, choose)
    assert seen["waiting"] and seen["running"], seen
    assert last["results"]["jobs_unfinished"] == 0


def test_greedy_starts_on_the_best_tier() -> None:
    env = _make(auto_start=False)
    tiers = []

    def choose(u, info):
        a = make_env_policy("greedy", env).act()
        if a[0]:
            job = info["focus"][1]
            kind, j, c = u.decode(a)
            assert (kind, j) == ("start", job)
            tiers.append((int(u.obs_state.best[job]), c - 1))
        return a

    _episode(env, choose)
    assert tiers and all(best == c for best, c in tiers)


def test_auto_start_asks_only_about_jobs_whose_best_tier_is_taken() -> None:
    env = _make()
    asked = 0

    def choose(u, info):
        nonlocal asked
        if info["focus"][0] == "waiting":
            asked += 1
            job = info["focus"][1]
            assert not u._cand[0, int(u.obs_state.best[job])]  # its best tier is not free
            assert not u.action_masks()[2]
        return u._pj.default()

    _, last = _episode(env, choose)
    assert asked > 0 and last["results"]["jobs_unfinished"] == 0


def test_a_run_that_needs_no_decision_has_one_step() -> None:
    env = _make(scenario_overrides={"workload": {"num_jobs": 2}})
    _, info = env.reset(seed=1)
    assert "results" in info and info["results"]["jobs_completed"] == 2
    _, reward, term, trunc, info = env.step(np.array([0, 0]))
    assert term and not trunc and reward < 0 and info["rewards"]["jct"] < 0
    with pytest.raises(gym.error.ResetNeeded):
        env.step(np.array([0, 0]))


def test_always_defer_cannot_stall_the_run() -> None:
    """Defer is masked where it would leave the cluster idle."""
    env = _make(scenario_overrides={"workload": {"num_jobs": 20}}, auto_start=False)
    _, last = _episode(env, lambda u, info: np.array([0, 0]))
    res = last["results"]
    assert res["jobs_unfinished"] == 0 and res["jobs_completed"] == 20
    assert not any(v for k, v in last.get("rewards", {}).items() if k == "unfinished")


def test_deferrals_per_instant_are_capped() -> None:
    env = _make(max_waiting=4)
    per_instant: dict[int, int] = {}

    def choose(u, info):
        if info["focus"][0] == "waiting" and u.action_masks()[0]:
            per_instant[u.instant_index] = per_instant.get(u.instant_index, 0) + 1
            return np.array([0, 0])
        return np.array([1, 0])

    _episode(env, choose)
    assert per_instant and max(per_instant.values()) <= 4


def test_preemptions_are_capped_per_job_and_hour() -> None:
    """A churning policy (preempt whenever offered) preempts a job at most twice an hour."""
    env = _make(preemption=True)
    times: dict[int, list[float]] = {}
    offers: dict[int, int] = {}

    def choose(u, info):
        kind, job = info["focus"]
        if kind == "running":
            times.setdefault(job, []).append(u.engine.now)
            offers[u.instant_index] = offers.get(u.instant_index, 0) + 1
            return np.array([1, 0])
        return np.array([1, 0]) if u.action_masks()[2] else u._pj.default()

    _, last = _episode(env, choose)
    assert sum(map(len, times.values())) > 10, "too few preemptions: the test checks nothing"
    for ts in times.values():
        for t in ts:
            assert sum(1 for s in ts if t - HOUR_S < s <= t) <= 2
    assert max(offers.values()) <= PREEMPT_OFFERS
    assert last["results"]["jobs_unfinished"] == 0


def test_step_limit_truncates_and_charges_the_unfinished_jobs() -> None:
    env = _make(max_steps=15)
    infos, last = _episode(env, lambda u, info: np.array([1, 0]))
    assert len(infos) == 16
    res = last["results"]
    assert res["jobs_unfinished"] > 0
    assert last["rewards"]["unfinished"] < 0
    env.step  # noqa: B018
    with pytest.raises(gym.error.ResetNeeded):
        env.unwrapped.step(np.array([0, 0]))


def test_step_limit_episode_is_flagged_truncated() -> None:
    env = _make(max_steps=5)
    env.reset(seed=1)
    flags = []
    for _ in range(5):
        _, _, term, trunc, _ = env.step(np.array([1, 0]))
        flags.append((term, trunc))
    assert flags[-1] == (False, True) and all(f == (False, False) for f in flags[:-1])


def test_invalid_actions_are_replaced_or_raise() -> None:
    env = _make(invalid_action="raise")
    env.reset(seed=2)
    m = env.unwrapped.action_masks()
    bad = int(np.flatnonzero(~m[2:])[0]) if (~m[2:]).any() else None
    for action in ([2, 0], [0, 6], [0], "x", [0.5, 0]):
        with pytest.raises(InvalidActionError):
            env.step(np.asarray(action) if action != "x" else action)
    if bad is not None:
        with pytest.raises(InvalidActionError, match="is masked"):
            env.step(np.array([1, bad]))
    env = _make()
    env.reset(seed=2)
    m = env.unwrapped.action_masks()
    if (~m[2:]).any():
        _, _, _, _, info = env.step(np.array([1, int(np.flatnonzero(~m[2:])[0])]))
        assert info["rewards"]["invalid"] == -1.0


def test_seeded_runs_and_pickled_copies_are_identical() -> None:
    env = _make(preemption=True)
    pol = make_env_policy("random", env, seed=4)
    obs, _ = env.reset(seed=9)
    actions = []
    for _ in range(30):
        a = pol.act()
        actions.append(a)
        obs, *_ = env.step(a)
    twin = copy.deepcopy(env.unwrapped)
    np.testing.assert_array_equal(twin._observe(), obs)
    for _ in range(30):
        a = pol.act()
        o1, r1, *_ = env.step(a)
        o2, r2, *_ = twin.step(a)
        np.testing.assert_array_equal(o1, o2)
        assert r1 == r2


@pytest.mark.parametrize("policy", ["greedy", "las", "random"])
def test_a_native_run_equals_the_env_rollout(policy: str) -> None:
    kw = {"actions": "per-job", "preemption": True}
    env = _make(**{k: v for k, v in kw.items() if k != "actions"})
    info, _, _ = rollout(env, make_env_policy(policy, env), seed=5)
    cfg = deep_merge(load_scenario(SCEN).model_dump(), SMALL)
    native = QueuePolicyScheduler(lambda e: make_env_policy(policy, e), env_kwargs=kw)
    res = simulate(cfg, native, 5)
    assert res.summary["avg_jct_s"] == info["results"]["avg_jct_s"]


def test_las_declares_the_preemption_it_needs() -> None:
    from dlcluster_gym.baselines.per_job_policies import PerJobLAS

    kw = {k: v for k, v in PerJobLAS.env_kwargs.items() if k != "actions"}
    got = {}
    for policy in ("greedy", "las"):
        env = _make(**kw)
        info, _, _ = rollout(env, make_env_policy(policy, env), seed=5)
        got[policy] = info["results"]
    assert got["greedy"]["preemptions"] == 0 < got["las"]["preemptions"]


def test_info_carries_scenario_seed_and_policy() -> None:
    env = _make()
    _, info = env.reset(seed=11)
    assert info["scenario"] == SCEN and info["seed"] == 11 and isinstance(info["policy"], str)
    env.reset()
    assert 0 <= env.unwrapped._episode_seed < 2**31


def test_episode_seeds_keep_training_draws_in_range() -> None:
    env = _make(episode_seeds=[1000, 1003])
    env.reset(seed=0)
    seen = set()
    for _ in range(20):
        _, info = env.reset()
        seen.add(info["seed"])
    assert seen <= {1000, 1001, 1002} and len(seen) > 1
    for bad in ([5, 5], [-1, 3], [1, 2, 3], "10", [1.5, 3]):
        with pytest.raises(ConfigError, match="episode_seeds"):
            _make(episode_seeds=bad)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"requeue": True, "preemption": True}, "requeue=False"),
        ({"skip_trivial": False}, "skip_trivial=True"),
        ({"max_steps": 0}, "max_steps"),
        ({"max_preemptions_per_h": True}, "max_preemptions_per_h"),
    ],
)
def test_bad_kwargs_are_clear_errors(kw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _make(**kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ConfigError, match="max_preemptions_per_h applies"):
            gym.make("DLCluster/Scheduler-v2", max_preemptions_per_h=1)


def test_v2_is_unchanged_by_the_new_kwargs() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make("DLCluster/Scheduler-v2")
    assert isinstance(env.action_space, gym.spaces.Discrete)
    assert env.unwrapped.max_steps is None and not env.unwrapped.per_job


def _components(env, policy: str, seed: int = 1) -> dict[str, float]:
    pol = make_env_policy(policy, env)
    env.reset(seed=seed)
    total: dict[str, float] = {}
    while True:
        _, _, term, trunc, info = env.step(pol.act())
        for k, v in info["rewards"].items():
            total[k] = total.get(k, 0.0) + v
        if term or trunc:
            return total


def test_shaping_is_on_in_v3_and_sums_to_the_same_constant_for_every_policy() -> None:
    """Potential-based: it pays for work done, but a finished episode's sum does not depend
    on the policy, so it cannot change which policy is best."""
    env = _make(preemption=True)
    assert env.unwrapped.reward_weights["shaping"] == 1.0
    sums = {p: _components(env, p) for p in ("greedy", "las", "random")}
    assert sums["greedy"]["jct"] != sums["random"]["jct"]
    first = sums["greedy"]["shaping"]
    assert first > 0
    for s in sums.values():
        assert s["shaping"] == pytest.approx(first, rel=1e-9)
    off = _make(reward_weights={"shaping": 0.0})
    assert off.unwrapped.reward_weights["shaping"] == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert gym.make("DLCluster/Scheduler-v2").unwrapped.reward_weights["shaping"] == 0.0


def test_a_v3_agent_refuses_an_env_that_changes_its_questions(tmp_path) -> None:
    """``auto_start`` and the preemption cap change what the agent is asked: a checkpoint
    runs only with its recorded values."""
    sb3 = pytest.importorskip("sb3_contrib")
    from dlcluster_gym.agents import save_agent
    from dlcluster_gym.envs.agent_loader import load_agent_policy

    env = _make(preemption=True)
    path = save_agent(sb3.MaskablePPO("MlpPolicy", env, seed=0), tmp_path / "a.zip",
                      {"preemption": True})  # fmt: skip
    load_agent_policy(str(path), _make(preemption=True))  # the same questions: loads
    for kw, key in (({"auto_start": False}, "auto_start"),
                    ({"max_preemptions_per_h": 5}, "max_preemptions_per_h")):  # fmt: skip
        with pytest.raises(ConfigError, match=key):
            load_agent_policy(str(path), _make(preemption=True, **kw))
