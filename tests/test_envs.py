"""Contract tests over every registered env id, plus the envs' own behaviour."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest

import dlcluster_gym
from dlcluster_gym.envs import env_ids, latest
from dlcluster_gym.envs.policies import make_env_policy, rollout
from dlcluster_gym.sim.offers import ACTION_NAMES

IDS = env_ids()
SMALL = {"workload": {"num_jobs": 30}}
LEAK_WARNING = r"DLCluster/\S+ observes ground truth a real scheduler does not have"


def _random_actions(env: gym.Env, seed: int, n: int) -> list:
    """Masked random actions for Placement, random timers for DelayTimer (fixed in advance)."""
    rng = np.random.default_rng(seed)
    if isinstance(env.action_space, gym.spaces.Discrete):
        return [int(rng.integers(0, env.action_space.n)) for _ in range(n)]
    if isinstance(env.action_space, gym.spaces.MultiDiscrete):  # Scheduler-v3: (act, candidate)
        return [rng.integers(0, env.action_space.nvec) for _ in range(n)]
    return [rng.uniform(-1, 1, env.action_space.shape).astype(np.float32) for _ in range(n)]


def _trace(env: gym.Env, seed: int, actions: list) -> list:
    obs, info = env.reset(seed=seed)
    out = [(obs.copy(), None, _plain(info))]
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        out.append((obs.copy(), r, _plain(info)))
        if term or trunc:
            break
    return out


def _plain(info: dict) -> dict:
    """Comparable info: arrays as lists, the results' wall-clock time left out."""
    out = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in info.items()}
    if "results" in out:
        out["results"] = {k: v for k, v in out["results"].items() if k != "wall_s"}
    return out


def _same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for (oa, ra, ia), (ob, rb, ib) in zip(a, b, strict=True):
        np.testing.assert_array_equal(oa, ob)
        assert ra == rb
        assert ia == ib


# ---------------------------------------------------------------------------- contract
@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_check_env_with_warnings_as_errors(env_id: str) -> None:
    from gymnasium.utils.env_checker import check_env

    env = gym.make(env_id, render_mode="rgb_array").unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if env.clairvoyant:  # an old version: check_env makes it again, which warns again
            warnings.filterwarnings("ignore", LEAK_WARNING, DeprecationWarning)
        check_env(env)


@pytest.mark.parametrize("env_id", IDS)
def test_sb3_check_env(env_id: str) -> None:
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    env = gym.make(env_id).unwrapped  # (v0 ids warn that a newer version exists)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_checker.check_env(env, warn=True)


@pytest.mark.parametrize("env_id", IDS)
def test_seeded_rollouts_are_identical(env_id: str) -> None:
    env = gym.make(env_id)
    actions = _random_actions(env, 0, 40)
    _same(_trace(env, 7, actions), _trace(gym.make(env_id), 7, actions))


@pytest.mark.parametrize("env_id", IDS)
def test_pickle_round_trip_mid_episode(env_id: str) -> None:
    env = gym.make(env_id).unwrapped
    actions = _random_actions(env, 1, 30)
    env.reset(seed=3)
    n = 0  # steps before the episode's end (a light Scheduler-v3 run may need few)
    for a in actions:
        n += 1
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    cut = min(5, n - 1)
    assert cut == 5 or env.__dict__.get("per_job"), "the episode ended within 5 steps"
    env.reset(seed=3)
    for a in actions[:cut]:
        _, _, term, trunc, _ = env.step(a)
        assert not (term or trunc)
    copy = pickle.loads(pickle.dumps(env))
    for a in actions[cut:]:
        o1, r1, t1, u1, _ = env.step(a)
        o2, r2, t2, u2, _ = copy.step(a)
        np.testing.assert_array_equal(o1, o2)
        assert (r1, t1, u1) == (r2, t2, u2)
        if t1 or u1:
            break


@pytest.mark.parametrize("env_id", IDS)
def test_episode_terminates_at_the_last_job(env_id: str) -> None:
    env = gym.make(env_id, scenario_overrides=SMALL)
    policy = make_env_policy("random", env, seed=0)
    info, _, steps = rollout(env, policy, seed=2)
    res = info["results"]
    assert res["jobs_completed"] == 30 and res["jobs_unfinished"] == 0
    assert steps >= 1


@pytest.mark.parametrize("env_id", IDS)
def test_no_truncation_after_one_step(env_id: str) -> None:
    env = gym.make(env_id)
    _, info = env.reset(seed=0)
    _, _, term, trunc, last = env.step(_random_actions(env, 0, 1)[0])
    if env.unwrapped.__dict__.get("per_job"):
        # Scheduler-v3 auto-starts jobs whose best placement is free: a light run may need
        # one decision or none, and then ends at this step, every job finished
        assert not trunc and (not term or last["results"]["jobs_unfinished"] == 0)
    else:
        assert "results" not in info and not term and not trunc


@pytest.mark.parametrize("kind", ["Placement", "DelayTimer", "Scheduler"])
@pytest.mark.parametrize("vec", ["sync", "async"])
def test_gymnasium_vector_envs(kind: str, vec: str) -> None:
    cls = gym.vector.SyncVectorEnv if vec == "sync" else gym.vector.AsyncVectorEnv
    env_id = f"dlcluster_gym:DLCluster/{kind}-dally-poisson-2rack-v{latest(kind)}"
    envs = cls([lambda: gym.make(env_id)] * 2)
    try:
        obs, _ = envs.reset(seed=[1, 2])
        assert obs.shape[0] == 2
        for _ in range(5):
            obs, r, _term, _trunc, _ = envs.step(envs.action_space.sample())
        assert obs.shape == (2, *envs.single_observation_space.shape)
        assert np.isfinite(r).all()
    finally:
        envs.close()


@pytest.mark.parametrize("kind", ["Placement", "DelayTimer", "Scheduler"])
def test_sb3_subproc_vec_env(kind: str) -> None:
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    env_id = f"dlcluster_gym:DLCluster/{kind}-dally-poisson-2rack-v{latest(kind)}"
    envs = vec_env.SubprocVecEnv([lambda: gym.make(env_id)] * 2)
    try:
        envs.seed(3)
        envs.action_space.seed(3)
        obs = envs.reset()
        for _ in range(5):
            obs, r, _done, _ = envs.step(np.stack([envs.action_space.sample() for _ in range(2)]))
        assert obs.shape[0] == 2 and np.isfinite(r).all()
        if kind == "Placement":  # v1 may mask "wait" past the rack timer: some action is valid
            masks = np.stack(envs.env_method("action_masks"))
            assert masks.shape == (2, 7) and masks.any(axis=1).all()
    finally:
        envs.close()


# ---------------------------------------------------------------------------- behaviour
SCEN = "dally-poisson-2rack"
OVER = {"workload": {"num_jobs": 80}}


def _native(policy: str, seed: int) -> dict:
    from dlcluster_gym import simulate
    from dlcluster_gym.config import load_scenario
    from dlcluster_gym.envs.base import deep_merge

    cfg = load_scenario(deep_merge(load_scenario(SCEN).model_dump(), OVER))
    s = simulate(cfg, policy, seed=seed).summary
    return {k: v for k, v in s.items() if k != "wall_s"}


@pytest.mark.parametrize("policy", ["dally", "tiresias", "gandiva"])
@pytest.mark.parametrize("seed", [1, 4])
def test_placement_heuristic_with_its_base_matches_native_exactly(policy: str, seed: int) -> None:
    env = gym.make(
        "DLCluster/Placement-v0", scenario=SCEN, scenario_overrides=OVER, base_policy=policy
    )
    pol = make_env_policy(policy, env)
    assert pol.base_policy == policy
    info, _, _ = rollout(env, pol, seed=seed)
    got = {k: v for k, v in info["results"].items() if k != "wall_s"}
    assert got == _native(policy, seed)


def test_placement_heuristics_differ_and_tiresias_preempts_through_offers() -> None:
    over = {"workload": {"num_jobs": 150, "load": 1.5}}
    out = {}
    for policy in ("dally", "tiresias", "gandiva"):
        env = gym.make(
            "DLCluster/Placement-v0", scenario=SCEN, scenario_overrides=over, base_policy=policy
        )
        info, _, steps = rollout(env, make_env_policy(policy, env), seed=2)
        out[policy] = (info["results"]["avg_jct_s"], info["results"]["preemptions"], steps)
    assert len({v[0] for v in out.values()}) == 3
    assert out["tiresias"][1] > 0
    assert out["tiresias"][2] > 150  # re-offers and preemption offers, not one per job


def test_delay_timer_manual_matches_native_dally_manual() -> None:
    for seed in (1, 4):
        env = gym.make("DLCluster/DelayTimer-v0", scenario=SCEN, scenario_overrides=OVER)
        info, _, _ = rollout(env, make_env_policy("dally-manual", env), seed=seed)
        got = {k: v for k, v in info["results"].items() if k != "wall_s"}
        assert got == _native("dally-manual", seed)


def test_delay_timer_autotuner_policy_close_to_native_dally() -> None:
    over = {"workload": {"num_jobs": 200, "load": 1.2}}
    env = gym.make("DLCluster/DelayTimer-v0", scenario=SCEN, scenario_overrides=over)
    info, _, _ = rollout(env, make_env_policy("dally", env), seed=1)
    from dlcluster_gym import simulate
    from dlcluster_gym.config import load_scenario
    from dlcluster_gym.envs.base import deep_merge

    cfg = load_scenario(deep_merge(load_scenario(SCEN).model_dump(), over))
    native = simulate(cfg, "dally", seed=1).summary["avg_jct_s"]
    assert info["results"]["avg_jct_s"] == pytest.approx(native, rel=0.15)


def test_timers_change_the_outcome() -> None:
    over = {"workload": {"num_jobs": 200, "load": 1.2}}
    jct = []
    for a in (-1.0, 1.0):  # all timers 0 (take anything) vs 48 h
        env = gym.make("DLCluster/DelayTimer-v0", scenario=SCEN, scenario_overrides=over)
        env.reset(seed=1)
        while True:
            _, _, term, trunc, info = env.step(np.full(14, a, dtype=np.float32))
            if term or trunc:
                break
        jct.append(info["results"]["avg_jct_s"])
    assert jct[0] != jct[1]


@pytest.mark.parametrize("kind", ["Placement", "DelayTimer"])
def test_jct_rewards_sum_to_minus_total_jct(kind: str) -> None:
    env = gym.make(f"DLCluster/{kind}-v0", scenario=SCEN, scenario_overrides=OVER)
    info, total, _ = rollout(env, make_env_policy("random", env, seed=1), seed=5)
    res = info["results"]
    total_jct_h = res["avg_jct_s"] * res["jobs_completed"] / 3600.0
    assert total == pytest.approx(-total_jct_h, rel=1e-9)


def test_reward_components_are_named_and_weighted() -> None:
    env = gym.make(
        "DLCluster/Placement-v0",
        scenario=SCEN,
        scenario_overrides=OVER,
        reward_weights={"jct": 0.0, "makespan": 1.0},
    )
    env.reset(seed=0)
    total = 0.0
    while True:
        _, r, term, trunc, info = env.step(int(np.flatnonzero(env.unwrapped.action_masks())[-1]))
        assert set(info["rewards"]) == {"jct", "makespan", "comm", "invalid", "unfinished",
                                        "shaping"}  # fmt: skip
        assert r == pytest.approx(info["rewards"]["makespan"])
        total += r
        if term or trunc:
            break
    assert total == pytest.approx(-info["time_s"] / 3600.0)


def test_observation_size_does_not_depend_on_the_cluster() -> None:
    for kind in ("Placement", "DelayTimer"):
        small = gym.make(f"DLCluster/{kind}-dally-batch-2rack-v0")
        large = gym.make(f"DLCluster/{kind}-dally-batch-16rack-v0")
        assert small.observation_space == large.observation_space
        assert small.action_space == large.action_space


def test_masked_action_is_wait_with_penalty_by_default_and_an_error_on_request() -> None:
    env = gym.make("DLCluster/Placement-v0", scenario=SCEN)
    env.reset(seed=0)
    for _ in range(200):  # find an offer with a masked candidate
        mask = env.unwrapped.action_masks()
        if not mask.all():
            break
        env.step(int(np.flatnonzero(mask)[1]))
    bad = int(np.flatnonzero(~mask)[0])
    job = env.unwrapped._offer.job
    _, _r, _, _, info = env.step(bad)
    assert info["rewards"]["invalid"] == -1.0
    assert job in env.unwrapped.engine.waiting or info.get("job") == job
    strict = gym.make("DLCluster/Placement-v0", scenario=SCEN, invalid_action="raise")
    strict.reset(seed=0)
    for _ in range(200):
        mask = strict.unwrapped.action_masks()
        if not mask.all():
            break
        strict.step(int(np.flatnonzero(mask)[1]))
    with pytest.raises(dlcluster_gym.errors.InvalidActionError, match=r"masked.*mask \["):
        strict.step(int(np.flatnonzero(~mask)[0]))


def test_bad_actions_are_clear_errors() -> None:
    from dlcluster_gym.errors import InvalidActionError

    env = gym.make("DLCluster/Placement-v0", scenario=SCEN)
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match="out of range"):
        env.step(9)
    with pytest.raises(InvalidActionError, match="not an integer"):
        env.step(float("nan"))
    dt = gym.make("DLCluster/DelayTimer-v0", scenario=SCEN)
    dt.reset(seed=0)
    a = np.zeros(14, dtype=np.float32)
    a[3] = np.nan
    with pytest.raises(InvalidActionError, match=r"action\[3\].*class 8.*\[-1, 1\]"):
        dt.step(a)
    with pytest.raises(InvalidActionError, match="14 values"):
        dt.step(np.zeros(3))
    a[3] = 1.5
    with pytest.raises(InvalidActionError, match=r"1\.5"):
        dt.step(a)


def test_unknown_kwargs_and_scenarios_list_the_valid_ones() -> None:
    from dlcluster_gym.errors import ConfigError, UnknownNameError

    with pytest.raises(ConfigError, match=r"valid arguments: .*base_policy"):
        gym.make("DLCluster/Placement-v0", scenarioo="x")
    with pytest.raises(UnknownNameError, match="dally-poisson-4rack"):
        gym.make("DLCluster/DelayTimer-v0", scenario="nope")
    with pytest.raises(ConfigError, match="components: jct"):
        gym.make("DLCluster/Placement-v0", reward_weights={"speed": 1.0})
    with pytest.raises(ConfigError, match="offers"):
        gym.make("DLCluster/Placement-v0", base_policy="fcfs")


def test_renders() -> None:
    env = gym.make("DLCluster/Placement-dally-poisson-2rack-v0", render_mode="ansi")
    env.reset(seed=0)
    env.step(1)
    text = env.render()
    assert "rack 0" in text and "rack 1" in text and "busy" in text
    rgb = gym.make("DLCluster/Placement-dally-poisson-2rack-v0", render_mode="rgb_array")
    rgb.reset(seed=0)
    img = rgb.render()
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    busy = (img != np.array([40, 40, 40], dtype=np.uint8)).any(axis=2)
    assert busy.any()


def test_heuristics_act_on_batches() -> None:
    env = gym.make("DLCluster/Placement-v0", scenario=SCEN)
    obs, _ = env.reset(seed=0)
    pol = make_env_policy("dally", env)
    a, _ = pol.predict(np.stack([obs, obs]))
    assert a.shape == (2,) and a[0] == a[1] == pol.predict(obs)[0]


def test_importing_the_package_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, dlcluster_gym, gymnasium as gym; gym.make('DLCluster/Placement-v0'); "
    code += "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------------- native runs
def test_env_policies_act_natively_with_identical_results() -> None:
    from dlcluster_gym import simulate
    from dlcluster_gym.config import load_scenario
    from dlcluster_gym.envs.base import deep_merge
    from dlcluster_gym.envs.native import OfferPolicyScheduler, TimerPolicyScheduler

    cfg = load_scenario(deep_merge(load_scenario(SCEN).model_dump(), OVER))

    def strip(s: dict) -> dict:
        return {k: v for k, v in s.items() if k != "wall_s"}

    dally = OfferPolicyScheduler(lambda env: make_env_policy("dally", env))
    assert strip(simulate(cfg, dally, seed=2).summary) == strip(simulate(cfg, "dally", 2).summary)
    manual = TimerPolicyScheduler(lambda env: make_env_policy("dally-manual", env))
    native = strip(simulate(cfg, "dally-manual", seed=2).summary)
    assert strip(simulate(cfg, manual, seed=2).summary) == native
    # a random policy: the native run equals the env rollout with the same seeds
    rnd = OfferPolicyScheduler(lambda env: make_env_policy("random", env, seed=5))
    env = gym.make("DLCluster/Placement-v0", scenario=SCEN, scenario_overrides=OVER)
    info, _, _ = rollout(env, make_env_policy("random", env, seed=5), seed=2)
    assert strip(simulate(cfg, rnd, seed=2).summary) == strip(info["results"])


@pytest.mark.parametrize("base", ["dally", "tiresias", "gandiva"])
def test_every_valid_candidate_is_a_free_placement_of_the_right_size(base: str) -> None:
    env = gym.make(
        "DLCluster/Placement-v0",
        scenario="dally-poisson-2rack",
        scenario_overrides={"workload": {"num_jobs": 60, "load": 1.5}},
        base_policy=base,
    ).unwrapped
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    checked = 0
    while True:
        offer = env._offer
        plan_free = offer.plan.free_mask
        for a in np.flatnonzero(offer.mask[1:]) + 1:
            gpus = offer.placement(int(a))
            assert gpus.size == offer.demand == len(set(gpus.tolist()))
            assert plan_free[gpus].all()
            cand = env.candidates()
            assert any(c["action"] == a and c["gpus"] == gpus.tolist() for c in cand)
            checked += 1
        for a in np.flatnonzero(~offer.mask):
            assert offer.placement(int(a)) is None
        _, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(offer.mask))))
        if term or trunc:
            break
    assert checked > 100


def test_candidate_features_match_the_engine() -> None:
    from dlcluster_gym.envs.placement import CANDIDATE_FEATURES, OBS_INDEX

    env = gym.make("DLCluster/Placement-v0", scenario=SCEN).unwrapped
    obs, _ = env.reset(seed=1)
    e, c = env.engine, env.cluster
    for _ in range(30):
        offer = env._offer
        for a in np.flatnonzero(offer.mask[1:]) + 1:
            name = f"{ACTION_NAMES[a]}"
            gpus = offer.placement(int(a))
            tier = int(c.placement_tier(gpus))
            assert obs[OBS_INDEX[f"{name}.tier_{('machine', 'rack', 'network')[tier]}"]] == 1.0
            f = e.comm_fraction(offer.job, gpus)
            assert obs[OBS_INDEX[f"{name}.comm"]] == pytest.approx(f / (1 + f), rel=1e-6)
        assert len(CANDIDATE_FEATURES) == 6
        obs, _, term, _, _ = env.step(int(np.flatnonzero(offer.mask)[-1]))
        if term:
            break


@pytest.mark.parametrize("policy", ["dally", "gandiva"])
def test_placement_v1_wait_limit_keeps_dally_and_gandiva_exact(policy: str) -> None:
    env = gym.make(
        "DLCluster/Placement-v1", scenario=SCEN, scenario_overrides=OVER, base_policy=policy
    )
    info, _, _ = rollout(env, make_env_policy(policy, env), seed=1)
    got = {k: v for k, v in info["results"].items() if k != "wall_s"}
    assert got == _native(policy, 1)


def test_placement_v1_an_always_waiting_agent_still_finishes_every_job() -> None:
    env = gym.make("DLCluster/Placement-v1", scenario=SCEN, scenario_overrides=SMALL)
    assert env.unwrapped.wait_limit == "rack_timer" and env.spec.id.endswith("-v1")
    env.reset(seed=0)
    masked_waits = 0
    for steps in range(1, 10_000):  # noqa: B007
        masked_waits += not env.unwrapped.action_masks()[0]
        _, _, term, trunc, info = env.step(0)
        if term or trunc:
            break
    assert term and not trunc
    assert info["results"]["jobs_completed"] == 30
    assert masked_waits > 0  # the limit, not luck, ended the waiting


def test_placement_v0_id_keeps_unbounded_waiting() -> None:
    env = gym.make("DLCluster/Placement-v0")
    assert env.unwrapped.wait_limit == "none" and env.unwrapped.env_name == "Placement-v0"
    with pytest.raises(dlcluster_gym.errors.ConfigError, match="wait_limit must be one of"):
        gym.make("DLCluster/Placement-v1", wait_limit="forever")


def test_an_always_waiting_agent_ends_truncated_after_bounded_retries() -> None:
    env = gym.make("DLCluster/Placement-v0", scenario=SCEN, scenario_overrides=SMALL)
    env.reset(seed=0)
    for steps in range(1, 10_000):  # noqa: B007
        _, _, term, trunc, info = env.step(0)
        if term or trunc:
            break
    assert trunc and not term
    assert info["results"]["jobs_unfinished"] == 30
    assert steps < 30 * 100  # each job re-offered at most ~ (arrivals + 24 retries) times
