"""Scheduler-v2 (v0 where stated): heuristics reproduce their native runs, its actions, masks,
observation, variants (dict observation, preemption, known durations) and episode end."""

from __future__ import annotations

import math
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest

from dlcluster_gym import simulate
from dlcluster_gym.config import load_scenario
from dlcluster_gym.envs.base import deep_merge
from dlcluster_gym.envs.policies import ENV_POLICIES, make_env_policy, rollout
from dlcluster_gym.envs.queue_obs import NG, NR, NW
from dlcluster_gym.errors import ConfigError, InvalidActionError
from dlcluster_gym.scheduler import _import

ID = "DLCluster/Scheduler-v2"
ID_V0 = "DLCluster/Scheduler-v0"  # v0's reward and end flag (tests/test_scheduler_v1.py)
SCEN = "dally-poisson-2rack"
OVER = {"workload": {"num_jobs": 80}}
VARIANTS = [
    {"observation": "dict"},
    {"preemption": True},
    {"preemption": True, "move_as": "restart", "order": "nw_sens", "running_order": "wide"},
    {"known_durations": True, "order": "srw"},
    {"preemption": True, "requeue": True, "order": "nw_sens", "running_order": "wide"},
]


def _summary(info: dict) -> dict:
    return {k: v for k, v in info["results"].items() if k != "wall_s"}


# The env cannot express gandiva's time-slicing (a suspended job resumes on the GPUs of its
# GPU set, which need not be a candidate): its gandiva is gandiva-placement, which native
# gandiva equals without oversubscription and unpacking
ENV_PARAMS: dict[str, dict] = {}
GANDIVA_AS_PLACEMENT = {"max_share": 1, "unpack_slowdown": math.inf}
# Scheduler-v0's dally-relocate is native dally's relocation variant; dally is the default
NATIVE_PARAMS = {"dally-relocate": {"preemption": "relocate"}, "gandiva": GANDIVA_AS_PLACEMENT}
HEURISTICS = ["fcfs", "dally", "dally-relocate", "tiresias", "gandiva", "srw"]


def _native(scenario: str, over: dict, policy: str, seed: int, **params) -> dict:
    cfg = load_scenario(deep_merge(load_scenario(scenario).model_dump(), over))
    params = params or NATIVE_PARAMS.get(policy, {})
    res = simulate(cfg, policy.split("-")[0], seed=seed, policy_params=params or None)
    return {k: v for k, v in res.summary.items() if k != "wall_s"}


def _in_env(scenario: str, over: dict, policy: str, seed: int, **kw) -> tuple[dict, int]:
    cls = _import(ENV_POLICIES["Scheduler"][policy][0])
    env = gym.make(ID, scenario=scenario, scenario_overrides=over, **{**cls.env_kwargs, **kw})
    pol = make_env_policy(policy, env, **ENV_PARAMS.get(policy, {}))
    info, _, steps = rollout(env, pol, seed=seed)
    return _summary(info), steps


# ---------------------------------------------------------------------------- heuristics
@pytest.mark.parametrize("policy", HEURISTICS)
@pytest.mark.parametrize("seed", [1, 4])
def test_heuristic_in_scheduler_env_matches_native_exactly(policy: str, seed: int) -> None:
    got, steps = _in_env(SCEN, OVER, policy, seed)
    assert got == _native(SCEN, OVER, policy, seed)
    assert got["jobs_completed"] == 80 and steps >= 80


@pytest.mark.slow
@pytest.mark.parametrize("policy", HEURISTICS)
def test_heuristic_matches_native_on_a_full_4rack_run(policy: str) -> None:
    got, _ = _in_env("dally-poisson-4rack", {}, policy, 1)
    assert got == _native("dally-poisson-4rack", {}, policy, 1)


def test_tiresias_in_the_env_sees_the_job_it_starts_on_a_batch_arrival() -> None:
    # 200 jobs at t=0: Tiresias starts by arrival within a queue, beyond 64 slots of LAS order
    over = {"workload": {"num_jobs": 200}}
    got, _ = _in_env("dally-batch-4rack", over, "tiresias", 501)
    assert got == _native("dally-batch-4rack", over, "tiresias", 501)
    assert got["jobs_completed"] == 200


@pytest.mark.parametrize("policy", ["dally", "tiresias", "gandiva"])
def test_without_preemption_heuristics_run_their_no_preemption_variant(policy: str) -> None:
    got, _ = _in_env(SCEN, OVER, policy, 1, preemption=False)
    param = {"dally": "preemption", "tiresias": "preemption", "gandiva": "migration"}[policy]
    cfg = load_scenario(deep_merge(load_scenario(SCEN).model_dump(), OVER))
    extra = GANDIVA_AS_PLACEMENT if policy == "gandiva" else {}
    nat = simulate(cfg, policy, seed=1, policy_params={param: False, **extra})
    nat = nat.summary
    assert got == {k: v for k, v in nat.items() if k != "wall_s"}
    assert got["preemptions"] == 0 if "preemptions" in got else True


def test_heuristics_differ_and_the_clairvoyant_reference_is_best() -> None:
    jct = {p: _in_env(SCEN, {}, p, 1)[0]["avg_jct_s"] for p in ("fcfs", "dally", "srw")}
    assert len(set(jct.values())) == 3
    assert jct["srw"] < jct["dally"] < jct["fcfs"]


def test_a_heuristic_outside_the_windows_is_a_clear_error() -> None:
    env = gym.make(ID, scenario="dally-poisson-4rack", max_waiting=1, max_running=1,
                   preemption=True, move_as="restart", order="las")  # fmt: skip
    with pytest.raises(ConfigError, match=r"in no slot|candidates|masks"):
        rollout(env, make_env_policy("dally", env), seed=1)


def test_requeue_puts_a_preempted_job_back_in_the_slots_at_the_same_instant() -> None:
    env = gym.make(ID, scenario=SCEN, scenario_overrides=OVER, preemption=True,
                   requeue=True).unwrapped  # fmt: skip
    env.reset(seed=1)
    for _ in range(200):  # run until a job runs and GPUs are free
        if env._slots_r.size and env._plan.num_free:
            break
        env.step(int(np.flatnonzero(env.action_masks())[-1]))
    job = int(env._slots_r[0])
    gpus = env.view.gpus_of(job)
    pre = env.encode("preempt", job)
    assert env.action_masks()[pre]  # GPUs are free: preempting is valid even if none waits
    _, _, _, _, info = env.step(pre)
    assert job in info["waiting_slots"] and job not in info["running_slots"]
    assert env.encode("preempt", job) is None  # once per instant
    k = info["waiting_slots"].index(job)
    starts = [c for c in range(1, 7) if env.action_masks()[1 + k * 6 + c - 1]]
    assert starts  # it can start again now, its own GPUs free
    placements = [env.candidate_gpus(len(gpus), c) for c in starts]
    _, _, _, _, info = env.step(1 + k * 6 + starts[0] - 1)
    assert job not in info["waiting_slots"]
    assert env.encode("start", job, starts[0]) is None  # started once per instant
    assert any(p is not None for p in placements)


# ---------------------------------------------------------------------------- contract
@pytest.mark.parametrize("kw", VARIANTS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()))
def test_variants_pass_gymnasium_and_sb3_checkers(kw: dict) -> None:
    from gymnasium.utils.env_checker import check_env

    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", ".*is out of date")  # v3 exists
        check_env(gym.make(ID, render_mode="rgb_array", **kw).unwrapped)
        # the dict observation's sets are (slots, features) arrays on purpose (set and graph
        # policies); SB3 only recommends 1-D entries
        warnings.filterwarnings("ignore", message=".*unconventional shape")
        sb3_checker.check_env(gym.make(ID, **kw).unwrapped, warn=True)


def _masked_trace(env: gym.Env, seed: int, n: int) -> list:
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for _ in range(n):
        a = int(rng.choice(np.flatnonzero(env.unwrapped.action_masks())))
        obs, r, term, trunc, info = env.step(a)
        out.append((obs, r, info["time_s"]))
        if term or trunc:
            break
    return out


@pytest.mark.parametrize("kw", VARIANTS[1:], ids=["preempt", "restart", "known", "requeue"])
def test_variants_are_deterministic_and_pickle_mid_episode(kw: dict) -> None:
    a = _masked_trace(gym.make(ID, scenario=SCEN, **kw), 3, 60)
    b = _masked_trace(gym.make(ID, scenario=SCEN, **kw), 3, 60)
    assert len(a) == len(b)
    for x, y in zip(a[1:], b[1:], strict=True):
        np.testing.assert_array_equal(x[0], y[0])
        assert x[1:] == y[1:]
    env = gym.make(ID, scenario=SCEN, **kw).unwrapped
    rng = np.random.default_rng(0)
    env.reset(seed=5)
    for _ in range(20):
        env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
    copy = pickle.loads(pickle.dumps(env))
    for _ in range(20):
        a = int(rng.choice(np.flatnonzero(env.action_masks())))
        np.testing.assert_array_equal(env.action_masks(), copy.action_masks())
        o1, r1, t1, u1, _ = env.step(a)
        o2, r2, t2, u2, _ = copy.step(a)
        np.testing.assert_array_equal(o1, o2)
        assert (r1, t1, u1) == (r2, t2, u2)


# ---------------------------------------------------------------------------- behaviour
def test_spaces_and_sizes_do_not_depend_on_the_cluster() -> None:
    small = gym.make(ID, scenario="dally-batch-2rack")
    large = gym.make(ID, scenario="dally-batch-16rack")
    assert small.observation_space == large.observation_space
    assert small.observation_space.shape == (16 * NW + 16 * NR + NG,)
    assert small.action_space.n == 1 + 16 * 6
    pre = gym.make(ID, preemption=True, max_waiting=8, max_running=4)
    assert pre.action_space.n == 1 + 8 * 6 + 4 + 4 * 6


def test_every_valid_start_is_a_free_placement_of_the_job() -> None:
    env = gym.make(ID, scenario=SCEN, scenario_overrides=OVER, preemption=True).unwrapped
    rng = np.random.default_rng(1)
    env.reset(seed=2)
    for _ in range(300):
        mask = env.action_masks()
        assert mask[0]
        for a in np.flatnonzero(mask[1:]) + 1:
            kind, job, c = env.decode(int(a))
            if kind == "preempt":
                assert env.engine.status[job] == 2 and env.engine.waiting
                continue
            n = env.engine.jobs[job].num_gpus
            gpus = env.candidate_gpus(n, c)
            assert gpus.size == n and env._plan.free_mask[gpus].all()
            assert (env.engine.status[job] == 1) == (kind == "start")
        _, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if term or trunc:
            break


def test_jobs_are_hidden_durations_unless_known() -> None:
    from dlcluster_gym.envs.queue_obs import RUNNING_FEATURES, WAITING_FEATURES

    def remaining_cols(kw: dict) -> float:
        env = gym.make(ID, scenario=SCEN, observation="dict", **kw)
        obs, _ = env.reset(seed=1)
        total = 0.0
        for _ in range(40):
            w = WAITING_FEATURES.index("remaining_work")
            r = RUNNING_FEATURES.index("remaining_work")
            total += float(obs["waiting"][:, w].sum() + obs["running"][:, r].sum())
            obs, *_ = env.step(int(np.flatnonzero(env.unwrapped.action_masks())[-1]))
        return total

    assert remaining_cols({}) == 0.0
    assert remaining_cols({"known_durations": True}) > 0.0


def test_in_v0_a_policy_that_never_starts_ends_truncated_and_penalised() -> None:
    with warnings.catch_warnings():  # v0 warns that v1 exists
        warnings.simplefilter("ignore", DeprecationWarning)
        env = gym.make(ID_V0, scenario=SCEN, scenario_overrides={"workload": {"num_jobs": 30}})
    env.reset(seed=0)
    total, comps = 0.0, {}
    for steps in range(1, 10_000):  # noqa: B007
        _, r, term, trunc, info = env.step(0)
        total += r
        for k, v in info["rewards"].items():
            comps[k] = comps.get(k, 0.0) + v
        if term or trunc:
            break
    assert trunc and not term
    assert info["results"]["jobs_unfinished"] == 30
    assert comps["unfinished"] == pytest.approx(-30 * 7 * 24)
    assert steps < 30 * 30  # each job is asked about at most ~ (arrivals + 24 retries) times


def test_jct_rewards_sum_to_minus_total_jct() -> None:
    env = gym.make(ID, scenario=SCEN, scenario_overrides=OVER)
    pol = make_env_policy("random", env, seed=1)
    info, total, _ = rollout(env, pol, seed=3)
    res = info["results"]
    assert res["jobs_unfinished"] == 0
    assert total == pytest.approx(-res["avg_jct_s"] * 80 / 3600.0, rel=1e-9)


def test_masked_actions_stop_with_a_penalty_or_raise() -> None:
    env = gym.make(ID, scenario=SCEN)
    env.reset(seed=0)
    bad = int(np.flatnonzero(~env.unwrapped.action_masks())[0])
    _, _, _, _, info = env.step(bad)
    assert info["rewards"]["invalid"] == -1.0
    strict = gym.make(ID, scenario=SCEN, invalid_action="raise")
    strict.reset(seed=0)
    with pytest.raises(InvalidActionError, match="masked"):
        strict.step(bad)
    with pytest.raises(InvalidActionError, match="out of range"):
        strict.step(10_000)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"max_waiting": 0}, "max_waiting"),
        ({"order": "sjf"}, "order must be one of"),
        ({"order": "srw"}, "known_durations"),
        ({"move_as": "teleport"}, "move_as"),
        ({"observation": "graf"}, "observation"),
        ({"bogus": 1}, "unknown argument"),
    ],
)
def test_bad_arguments_are_one_line_errors(kw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        gym.make(ID, **kw)


def test_dict_observation_too_small_for_the_cluster_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="max_racks=4"):  # at construction, before any reset
        gym.make(ID, scenario="dally-batch-16rack", observation="dict", max_racks=4)


@pytest.mark.parametrize(
    ("policy", "extra", "scen"),
    [
        ("srw-slots", {}, SCEN),
        ("random", {}, SCEN),
        ("las-slots", {"preemption": True}, "dally-batch-2rack"),  # preempts there
    ],
)
def test_env_policies_act_natively_with_identical_results(
    policy: str, extra: dict, scen: str
) -> None:
    from dlcluster_gym.envs.native import QueuePolicyScheduler

    kw = {"max_waiting": 8, **extra}
    env = gym.make(ID, scenario=scen, scenario_overrides=OVER, **kw)
    info, _, _ = rollout(env, make_env_policy(policy, env), seed=3)
    sched = QueuePolicyScheduler(lambda e: make_env_policy(policy, e), env_kwargs=kw)
    cfg = load_scenario(deep_merge(load_scenario(scen).model_dump(), OVER))
    native = simulate(cfg, sched, seed=3).summary
    assert _summary(info) == {k: v for k, v in native.items() if k != "wall_s"}
    assert native["preemptions"] > 0 or not extra


# ---------------------------------------------------------------------------- sampling
MIX = [
    {"scenario": "dally-poisson-2rack", "weight": 3.0,
     "ranges": {"racks": [2, 3], "load": [0.7, 1.1], "num_jobs": [20, 40]}},
    {"scenario": "dally-batch-2rack", "overrides": {"workload": {"num_jobs": 25}}},
]  # fmt: skip


@pytest.mark.parametrize("kind", ["Scheduler", "Placement", "DelayTimer"])
def test_scenarios_are_drawn_per_reset_from_the_seed(kind: str) -> None:
    from dlcluster_gym.envs import latest

    env_id = f"DLCluster/{kind}-v{latest(kind)}"
    env = gym.make(env_id, scenarios=MIX)
    names, sizes = [], set()
    for seed in range(12):
        _, info = env.reset(seed=seed)
        names.append(info["scenario"])
        sizes.add(env.unwrapped.cluster.num_gpus)
        if seed == 0:
            jobs0 = [j.arrival_s for j in env.unwrapped.engine.jobs]
    assert len(set(names)) >= 4  # several loads / sizes / job counts / both entries
    assert any("batch" in n for n in names) and any("racks" in n for n in names)
    assert sizes == {128, 192}  # dally racks are 64 GPUs: 2 or 3 racks
    again = gym.make(env_id, scenarios=MIX)
    _, info = again.reset(seed=0)
    assert info["scenario"] == names[0]
    assert [j.arrival_s for j in again.unwrapped.engine.jobs] == jobs0
    n_jobs = len(jobs0)
    assert n_jobs == 25 or 20 <= n_jobs <= 40


def test_sampled_scheduler_env_pickles_mid_episode() -> None:
    env = gym.make(ID, scenarios=MIX).unwrapped
    env.reset(seed=4)
    for _ in range(5):
        env.step(int(np.flatnonzero(env.action_masks())[-1]))
    copy = pickle.loads(pickle.dumps(env))
    assert copy.episode_scenario.name == env.episode_scenario.name
    a = int(np.flatnonzero(env.action_masks())[-1])
    np.testing.assert_array_equal(env.step(a)[0], copy.step(a)[0])


@pytest.mark.parametrize(
    "scenarios, match",
    [
        ("dally-poisson-2rack", "must be a list"),
        ([], "must not be empty"),
        ([{"scenario": "dally-poisson-2rack", "weight": 0}], r"scenarios\[0\].weight"),
        ([{"scenario": "dally-poisson-2rack", "ranges": {"gpus": [1, 2]}}], "unknown range"),
        ([{"scenario": "dally-poisson-2rack", "ranges": {"racks": [3, 2]}}], "lo <= hi"),
        ([{"scenario": "dally-poisson-2rack", "size": 2}], "unknown key 'size'"),
        # issue #17 audit: checked at construction, not at the reset that draws the bad end
        ([{"scenario": "dally-poisson-2rack", "ranges": {"load": [0.5, 12]}}],
         r"^Scheduler-v2: scenarios\[0\]\.ranges\.load \(at load=12\): workload\.dally\.load: "
         r"Input should be less than or equal to 10"),
        ([{"scenario": "dally-poisson-2rack", "ranges": {"racks": [2, 200000]}}],
         r"scenarios\[0\]\.ranges\.racks \(at racks=200000\): cluster: 1,600,000 machines"),
        (["dally-poisson-2rack", {"scenario": "dally-poisson-2rack",
                                  "ranges": {"num_jobs": [1, 5000000]}}],
         r"scenarios\[1\]\.ranges\.num_jobs \(at num_jobs=5000000\):.*2000000"),
        ([{"scenario": "dally-batch-2rack", "ranges": {"load": [0.5, 1.0]}}],
         r"scenarios\[0\]\.ranges\.load: the workload's arrivals are 'batch', where load "
         "changes nothing"),
        ([{"scenario": {**load_scenario("dally-poisson-2rack").model_dump(),
                        "workload": {"kind": "dally", "num_jobs": 20, "arrival": "poisson",
                                     "rate_per_hour": 2.0}},
           "ranges": {"load": [0.5, 1.0]}}], r"ranges\.load: .*rate_per_hour=2\.0"),
        ([{"scenario": "dally-poisson-2rack", "ranges": [1, 2]}],
         r"scenarios\[0\]\.ranges must be a mapping of racks, load, num_jobs"),
        (["dally-poisson-2rack", "nope"],
         r"^Scheduler-v2: scenarios\[1\]\.scenario: unknown scenario 'nope'; valid"),
        ([3], r"scenarios\[0\]\.scenario must be a preset name, a YAML path or a mapping, got 3"),
    ],
)  # fmt: skip
def test_bad_scenario_lists_are_one_line_errors(scenarios: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as ei:
        gym.make(ID, scenarios=scenarios)
    assert "\n" not in str(ei.value)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"scenario_overrides": [1]}, "scenario_overrides must be a mapping"),
        ({"reward_weights": [1]}, "reward_weights must be a mapping of component to weight"),
        ({"reward_weights": {"jct": True}}, "reward weight jct=True must be finite"),
        ({"reward_scale_s": float("inf")}, "reward_scale_s must be a finite number > 0"),
        ({"reward_scale_s": True}, "reward_scale_s must be a finite number > 0"),
        ({"reward_scale_s": 0}, "reward_scale_s must be a finite number > 0"),
    ],
)
@pytest.mark.parametrize("kind", ["Scheduler-v2", "Placement-v2", "DelayTimer-v1"])
def test_bad_common_kwargs_are_one_line_errors(kind: str, kw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as ei:
        gym.make(f"DLCluster/{kind}", scenario="dally-poisson-2rack", **kw)
    assert "\n" not in str(ei.value) and str(ei.value).startswith(kind)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"scenarios": [{"scenario": "dally-poisson-2rack", "ranges": {"racks": [2, 40]}}]},
         r"scenarios\[0\] has up to 320 machines and 40 racks; the graph observation holds "
         r"max_machines=256, max_racks=32"),
        ({"scenarios": ["dally-poisson-2rack", "dally-poisson-16rack"], "max_machines": 64},
         r"scenarios\[1\] has up to 128 machines"),
        ({"scenario": "dally-poisson-16rack", "max_racks": 8}, "'dally-poisson-16rack' has up"),
    ],
)  # fmt: skip
def test_graph_observation_node_limits_are_checked_at_construction(kw: dict, match: str) -> None:
    """Not at the reset that first draws a cluster too large for the padded node arrays."""
    with pytest.raises(ConfigError, match=match):
        gym.make(ID, observation="graph", **kw)


@pytest.mark.parametrize(
    ("kind", "kw", "match"),
    [
        ("Placement-v2", {"wait_retry_s": float("inf")}, "wait_retry_s must be a finite number"),
        ("Placement-v2", {"invalid_penalty": True}, "invalid_penalty must be a finite number"),
        ("DelayTimer-v1", {"decision_period_s": True}, "decision_period_s must be a finite"),
        ("Scheduler-v2", {"wait_retry_s": True}, "wait_retry_s must be a finite number"),
    ],
)
def test_true_is_not_a_number_of_seconds(kind: str, kw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        gym.make(f"DLCluster/{kind}", scenario="dally-poisson-2rack", **kw)


# ---------------------------------------------------------------------------- preempting teachers
BATCH = "dally-batch-2rack"
BATCH_OVER = {"workload": {"num_jobs": 60}}


@pytest.mark.parametrize("policy", ["las-slots", "gittins-slots"])
def test_preempting_teachers_finish_every_job_deterministically(policy: str) -> None:
    from dlcluster_gym.baselines.queue_policies import IndexSlots

    kw = {**IndexSlots.env_kwargs, "invalid_action": "raise"}  # a masked action would raise
    runs = []
    for _ in range(2):
        env = gym.make(ID, scenario=BATCH, scenario_overrides=BATCH_OVER, **kw)
        info, _, _ = rollout(env, make_env_policy(policy, env), seed=5)
        runs.append(_summary(info))
    s = runs[0]
    assert runs[0] == runs[1]
    assert s["jobs_completed"] == 60 and s["jobs_unfinished"] == 0
    assert s["preemptions"] > 0  # it does use the preempt action


def test_las_teacher_preempts_the_most_attained_job_for_a_fresh_one() -> None:
    from dlcluster_gym.baselines.queue_policies import LASSlots

    env = gym.make(ID, scenario=BATCH, scenario_overrides=BATCH_OVER, **LASSlots.env_kwargs)
    pol = make_env_policy("las-slots", env)
    u = env.unwrapped
    obs, _ = env.reset(seed=5)
    seen = 0
    for _ in range(3000):
        a = int(pol.predict(obs)[0])
        kind, job, _ = u.decode(a)
        if kind == "preempt":
            seen += 1
            e = u.engine
            waiting = [j for j in e.waiting if not u._tmask[j]]
            running = np.asarray([j for j in e.running if not u._tmask[j]])
            att = u.view.live(running)[2]
            w_att = u.view.live(np.asarray(waiting))[2]
            # the victim has attained > margin (4 GPU-h) more than some waiting job
            assert att[running == job][0] - w_att.min() > 4 * 3600
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    assert seen > 0


def test_gittins_table_and_bad_rule() -> None:
    from dlcluster_gym.baselines.queue_policies import IndexSlots, gittins_table

    t, g = gittins_table()
    assert t[0] == 0 and np.all(np.diff(t) > 0)
    assert np.all(g[:-1] > 0) and np.isinf(g[-1])  # past the longest duration: infinite
    assert g[np.searchsorted(t, 3 * 86400)] < g[0]  # old jobs rank below fresh ones
    env = gym.make(ID, scenario=BATCH, scenario_overrides=BATCH_OVER, preemption=True)
    with pytest.raises(
        ConfigError, match="rule must be one of gittins, las, qssf, srsf, got 'sjf'"
    ):
        IndexSlots(env, rule="sjf")
