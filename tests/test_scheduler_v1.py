"""Scheduler-v1 (issue #17's audit): the unfinished-job charge is the serial bound, so stalling
never pays; a stall ending is ``terminated``; v0 is kept unchanged; bad inputs are one-line
errors; action masks through vector envs equal the single env's."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

from dlcluster_gym import simulate
from dlcluster_gym.config import load_scenario
from dlcluster_gym.envs import VERSIONS, env_ids, latest
from dlcluster_gym.envs.base import serial_remaining_s
from dlcluster_gym.envs.policies import make_env_policy, rollout
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.sim.bounds import isolated_run

V0, V1 = "DLCluster/Scheduler-v0", "DLCluster/Scheduler-v1"
SMALL = {"workload": {"num_jobs": 30}}


def _make(env_id: str, **kw):
    with warnings.catch_warnings():  # v0 ids warn that v1 exists
        warnings.simplefilter("ignore", DeprecationWarning)
        return gym.make(env_id, **kw)


def _always_stop(env: gym.Env, seed: int) -> tuple[float, dict, bool, bool, dict]:
    env.reset(seed=seed)
    total, comps = 0.0, {}
    while True:
        _, r, term, trunc, info = env.step(0)
        total += r
        for k, v in info["rewards"].items():
            comps[k] = comps.get(k, 0.0) + v
        if term or trunc:
            return total, comps, term, trunc, info


def _fcfs_return(scenario: str, seed: int) -> float:
    """fcfs's env return: in Scheduler-v1 it equals its native run (tests/
    test_scheduler_env.py), and a finished episode returns minus the total JCT in hours."""
    res = simulate(load_scenario(scenario), "fcfs", seed=seed)
    assert res.summary["jobs_unfinished"] == 0
    return -res.summary["avg_jct_s"] * res.summary["jobs_total"] / 3600.0


# ---------------------------------------------------------------------------- item 1
@pytest.mark.parametrize(
    "scenario",
    [
        "dally-batch-2rack",
        "dally-batch-4rack",
        "dally-batch-8rack",
        "dally-batch-16rack",
        "dally-poisson-4rack",
    ],
)
def test_never_starting_scores_below_fcfs_and_random(scenario: str) -> None:
    seed = 3
    env = gym.make(V1, scenario=scenario)
    stop, _, term, trunc, info = _always_stop(env, seed)
    assert term and not trunc and info["results"]["jobs_unfinished"] > 0
    _, random_return, _ = rollout(env, make_env_policy("random", env, seed=0), seed=seed)
    assert stop < _fcfs_return(scenario, seed)
    assert stop < random_return
    # v0's fixed 7 days per job is the defect: there never starting beats fcfs on heavy batches
    if scenario == "dally-batch-2rack":
        v0_stop = _always_stop(_make(V0, scenario=scenario), seed)[0]
        assert v0_stop > _fcfs_return(scenario, seed)


def test_stopping_midway_scores_below_finishing_the_same_schedule() -> None:
    """A policy that plays random for a while and then never starts anything again scores
    below the same random policy played to the end (the prefix is identical)."""
    env = gym.make(
        V1, scenario="dally-batch-2rack", scenario_overrides={"workload": {"num_jobs": 120}}
    )
    _, full, steps = rollout(env, make_env_policy("random", env, seed=1), seed=2)
    for cut in (steps // 4, steps // 2, (9 * steps) // 10):
        pol = make_env_policy("random", env, seed=1)
        obs, _ = env.reset(seed=2)
        total, n, end = 0.0, 0, None
        while end is None:
            a = int(pol.predict(obs)[0]) if n < cut else 0
            obs, r, term, trunc, info = env.step(a)
            total, n = total + r, n + 1
            if term or trunc:
                end = (term, trunc, info["results"]["jobs_unfinished"])
        assert end[0] and not end[1] and end[2] > 0  # it stalled: terminated, jobs left
        assert total < full


def test_serial_charge_is_the_summed_isolated_remaining_time_per_unfinished_job() -> None:
    env = gym.make(V1, scenario="dally-poisson-2rack", scenario_overrides=SMALL).unwrapped
    _, comps, *_ = _always_stop(env, 0)
    rem = serial_remaining_s(env.engine)
    assert rem.size == 30 and (rem > 0).all()
    assert comps["unfinished"] == pytest.approx(-30 * rem.sum() / 3600.0, rel=1e-12)
    # nothing ran: each job's remaining time is its run time alone on its most consolidated
    # placement of the empty cluster
    e = env.engine
    alone = [isolated_run(e.cluster, j, e.scenario.profile, e.scenario.network)[0] for j in e.jobs]
    np.testing.assert_allclose(np.sort(rem), np.sort(alone), rtol=1e-12)


# ---------------------------------------------------------------------------- item 2
def test_stall_ending_is_terminated_in_v1_and_truncated_in_v0() -> None:
    t1 = _always_stop(gym.make(V1, scenario="dally-poisson-2rack", scenario_overrides=SMALL), 0)
    t0 = _always_stop(_make(V0, scenario="dally-poisson-2rack", scenario_overrides=SMALL), 0)
    assert (t1[2], t1[3]) == (True, False)
    assert (t0[2], t0[3]) == (False, True)
    assert t0[1]["unfinished"] == pytest.approx(-30 * 7 * 24)  # v0 unchanged
    assert t0[1]["jct"] == t1[1]["jct"]  # the same run, only the charge differs


@pytest.mark.parametrize(("env_id", "bootstrapped"), [(V1, False), (V0, True)])
def test_sb3_bootstraps_a_stall_ending_only_in_v0(env_id: str, bootstrapped: bool) -> None:
    """SB3 adds gamma * V(last obs) to the return only where ``TimeLimit.truncated``."""
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    envs = vec_env.DummyVecEnv(
        [lambda: _make(env_id, scenario="dally-poisson-2rack", scenario_overrides=SMALL)]
    )
    envs.seed(0)
    envs.reset()
    for _ in range(10_000):
        _, _, dones, infos = envs.step(np.zeros(1, dtype=np.int64))
        if dones[0]:
            break
    assert dones[0] and infos[0]["results"]["jobs_unfinished"] == 30
    assert infos[0]["TimeLimit.truncated"] is bootstrapped


def test_horizon_ending_stays_truncated_and_charged() -> None:
    over = {**SMALL, "max_sim_time_s": 3 * 3600.0}
    env = gym.make(V1, scenario="dally-poisson-2rack", scenario_overrides=over)
    pol = make_env_policy("random", env, seed=0)
    obs, _ = env.reset(seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the engine warns that it stopped at the horizon
        while True:
            obs, _, term, trunc, info = env.step(pol.predict(obs)[0])
            if term or trunc:
                break
    assert info["results"]["jobs_unfinished"] > 0
    assert trunc and not term  # a time limit, not the env's own end
    assert info["rewards"]["unfinished"] < 0


# ---------------------------------------------------------------------------- item 3
def test_v0_and_v1_are_registered_and_v4_is_the_newest() -> None:
    """v2 changes only the ``done_jobs`` feature (tests/test_done_jobs_feature.py); v3 the
    action design (tests/test_scheduler_v3.py); v4 the history features and defaults
    (tests/test_keyed_history.py)."""
    ids = env_ids()
    assert latest("Scheduler") == 4 and set(VERSIONS["Scheduler"]) == {0, 1, 2, 3, 4}
    for v in (0, 1):
        assert f"DLCluster/Scheduler-v{v}" in ids
        assert f"DLCluster/Scheduler-dally-batch-2rack-v{v}" in ids
    assert gym.make(V1).unwrapped.env_name == "Scheduler-v1"
    assert _make(V0).unwrapped.env_name == "Scheduler-v0"


@pytest.mark.parametrize("kw", [{}, {"preemption": True, "requeue": True}])
def test_v0_and_v1_have_identical_dynamics_observations_and_masks(kw: dict) -> None:
    """Everything but the final charge and flag is the same, so an agent trained on v0 (the
    shipped ``scheduler.zip``) acts identically in v1."""
    a = _make(V0, scenario="dally-poisson-2rack", scenario_overrides=SMALL, **kw).unwrapped
    b = gym.make(V1, scenario="dally-poisson-2rack", scenario_overrides=SMALL, **kw).unwrapped
    oa, _ = a.reset(seed=4)
    ob, _ = b.reset(seed=4)
    rng = np.random.default_rng(0)
    while True:
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(a.action_masks(), b.action_masks())
        act = int(rng.choice(np.flatnonzero(a.action_masks())))
        oa, ra, ta, ua, ia = a.step(act)
        ob, rb, tb, ub, ib = b.step(act)
        assert ra == rb and (ta, ua) == (tb, ub)
        if ta or ua:
            break
    assert {k: v for k, v in ia["results"].items() if k != "wall_s"} == {
        k: v for k, v in ib["results"].items() if k != "wall_s"
    }


def test_the_shipped_v0_agent_acts_identically_in_v1() -> None:
    pytest.importorskip("sb3_contrib")
    from pathlib import Path

    from dlcluster_gym.envs.agent_meta import read_agent_meta

    path = Path(__file__).resolve().parents[1] / "agents" / "checkpoints" / "scheduler.zip"
    meta = read_agent_meta(path)
    assert meta["env_id"] == V0
    runs = []
    for env_id in (V0, V1):
        env = _make(env_id, scenario="dally-batch-2rack", scenario_overrides=SMALL,
                    **meta["env_kwargs"])  # fmt: skip
        pol = make_env_policy(f"agent:{path}", env)
        obs, _ = env.reset(seed=7)
        actions = []
        while True:
            a, _ = pol.predict(obs, deterministic=True, action_masks=env.unwrapped.action_masks())
            actions.append(int(a))
            obs, _, term, trunc, info = env.step(a)
            if term or trunc:
                break
        runs.append((actions, {k: v for k, v in info["results"].items() if k != "wall_s"}))
    assert runs[0] == runs[1]
    assert runs[0][1]["jobs_unfinished"] == 0


# ---------------------------------------------------------------------------- item 4
@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"preemption": "no"}, "preemption must be True or False, got 'no'"),
        ({"known_durations": "yes"}, "known_durations must be True or False"),
        ({"requeue": 1}, "requeue must be True or False"),
        ({"skip_trivial": None}, "skip_trivial must be True or False"),
        ({"scenario": "dally-batch-2rack", "scenarios": ["dally-batch-4rack"]}, "not both"),
        (
            {"scenarios": ["dally-batch-4rack"], "scenario_overrides": SMALL},
            "scenario_overrides applies to scenario= only",
        ),
        (
            {
                "scenarios": [
                    "dally-batch-4rack",
                    {"scenario": "dally-batch-2rack", "overrides": {"workload": {"num_jobz": 3}}},
                ]
            },
            r"scenarios\[1\]\.overrides: workload\.dally\.num_jobz",
        ),
        ({"scenario_overrides": {"workload": {"num_jobz": 3}}}, "scenario_overrides: workload"),
        ({"unfinished_penalty": "none"}, "unfinished_penalty must be one of serial, fixed"),
        ({"stall_end": "never"}, "stall_end must be one of terminated, truncated"),
        ({"unfinished_penalty_s": 3600}, "applies only with unfinished_penalty='fixed'"),
    ],
)
def test_bad_inputs_are_one_line_errors(kw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as err:
        gym.make(V1, **kw)
    assert "\n" not in str(err.value)


def test_a_preset_id_with_scenarios_is_an_error() -> None:
    with pytest.raises(ConfigError, match="not both"):
        gym.make("DLCluster/Scheduler-dally-batch-2rack-v1", scenarios=["dally-batch-4rack"])


def test_reset_options_are_rejected_unless_empty() -> None:
    env = gym.make(V1, scenario_overrides=SMALL)
    with pytest.raises(ConfigError, match="reset\\(\\) takes no options, got 'scenario'"):
        env.reset(seed=0, options={"scenario": "dally-batch-2rack"})
    a, _ = env.reset(seed=0, options={})
    b, _ = env.reset(seed=0, options=None)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("env_id", ["DLCluster/Placement-v1", "DLCluster/DelayTimer-v0"])
def test_other_envs_reject_reset_options_too(env_id: str) -> None:
    env = gym.make(env_id)
    with pytest.raises(ConfigError, match="takes no options, got 'seed'"):
        env.reset(options={"seed": 1})
    env.reset(seed=0, options={})


@pytest.mark.parametrize("teacher", ["las-slots", "gittins-slots"])
def test_preempting_teachers_need_an_env_with_preemption(teacher: str) -> None:
    with pytest.raises(ConfigError, match=f"{teacher} preempts: make the env with preemption"):
        make_env_policy(teacher, gym.make(V1))
    make_env_policy(teacher, gym.make(V1, preemption=True))  # fine with it


# ---------------------------------------------------------------------------- item 5
def _masked_random(mask: np.ndarray, rng: np.random.Generator) -> int:
    return int(rng.choice(np.flatnonzero(mask)))


def test_sb3_vector_env_action_masks_match_the_single_env() -> None:
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    maskable = pytest.importorskip("sb3_contrib.common.maskable.utils")
    make_id = "dlcluster_gym:DLCluster/Scheduler-dally-poisson-2rack-v1"
    kw = {"preemption": True}
    envs = vec_env.SubprocVecEnv([lambda: gym.make(make_id, **kw)] * 2)
    singles = [gym.make(make_id, **kw).unwrapped for _ in range(2)]
    try:
        envs.seed(10)  # env i is reset with seed 10 + i
        envs.reset()
        for i, s in enumerate(singles):
            s.reset(seed=10 + i)
        rng = np.random.default_rng(0)
        for _ in range(40):
            masks = maskable.get_action_masks(envs)
            assert masks.shape == (2, singles[0].action_space.n)
            np.testing.assert_array_equal(masks, np.stack([s.action_masks() for s in singles]))
            acts = np.array([_masked_random(m, rng) for m in masks])
            _, _, dones, _ = envs.step(acts)
            for s, a in zip(singles, acts, strict=True):
                s.step(int(a))
            assert not dones.any()
    finally:
        envs.close()


def test_gymnasium_vector_env_action_masks_match_the_single_env() -> None:
    make_id = "DLCluster/Scheduler-dally-batch-2rack-v1"
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(make_id)] * 2)
    singles = [gym.make(make_id).unwrapped for _ in range(2)]
    try:
        envs.reset(seed=[5, 6])
        for s, seed in zip(singles, (5, 6), strict=True):
            s.reset(seed=seed)
        rng = np.random.default_rng(1)
        for _ in range(40):
            masks = np.stack(envs.call("action_masks"))
            np.testing.assert_array_equal(masks, np.stack([s.action_masks() for s in singles]))
            acts = np.array([_masked_random(m, rng) for m in masks])
            _, _, term, trunc, _ = envs.step(acts)
            for s, a in zip(singles, acts, strict=True):
                s.step(int(a))
            assert not (term | trunc).any()
    finally:
        envs.close()
