"""Gavel for every data-parallel job: its policies' LPs on hand-computed cases, the
round-based mechanism on a hand-computed trace, and the deployable/clairvoyant split."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym import simulate
from dlcluster_gym.baselines.gavel import (
    Gavel,
    GavelFTF,
    GavelLAS,
    fill_one_type,
    finish_time_fairness,
    max_min_fairness,
    max_sum_throughput,
    water_level_share,
)
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import policy_kind as kind_of
from dlcluster_gym.workload.job import Job
from tests.conftest import needs_traces, run_engine, small_scenario


def test_water_level_share_by_hand():
    # 4 GPUs, demands 1, 2, 4: level 1.5 (1 + 1.5 + 1.5 = 4) -> 1-GPU job all the time
    np.testing.assert_allclose(water_level_share(np.array([1, 2, 4]), 4.0), [1.0, 0.75, 0.375])
    np.testing.assert_allclose(water_level_share(np.array([1, 1]), 4.0), [1.0, 1.0])
    assert water_level_share(np.array([], dtype=np.int64), 4.0).size == 0


def test_fill_one_type_water_fills_above_the_floors_by_hand():
    # 4 GPUs, demands 1, 2, 4; floor 0.75 for the 2-GPU job (1.5 GPUs): the level L with
    # 1 + max(1.5, L) + L = 4 is 1.5 -> X = [1, 0.75, 0.375]; floor 1 for it: L = 1
    d = np.array([1, 2, 4])
    np.testing.assert_allclose(fill_one_type(d, np.array([0, 0.75, 0]), 4), [1, 0.75, 0.375])
    np.testing.assert_allclose(fill_one_type(d, np.array([0, 1.0, 0]), 4), [1, 1, 0.25])
    np.testing.assert_allclose(fill_one_type(d, np.zeros(3), 16), [1, 1, 1])


def test_las_equalises_gpu_time_on_one_type():
    # 2 GPUs, a 1-GPU and a 3-GPU job: N X equal at level c, c + c = 2 -> X = [1, 1/3]
    x = max_min_fairness(np.ones((2, 1)), np.array([1, 3]), np.array([2]))
    np.testing.assert_allclose(x[:, 0], [1.0, 1.0 / 3.0], atol=1e-6)


def test_las_gives_each_job_its_fast_type():
    # one GPU of each type; job 0 runs at half speed on type 1, job 1 at full speed on both.
    # X_equal throughputs 0.75 and 1; job 1 cannot exceed 1 (its time), so the level is 1,
    # and the largest GPU throughput at that level puts job 0 on type 0, job 1 on type 1.
    thr = np.array([[1.0, 0.5], [1.0, 1.0]])
    x = max_min_fairness(thr, np.array([1, 1]), np.array([1, 1]))
    np.testing.assert_allclose(x, [[1.0, 0.0], [0.0, 1.0]], atol=1e-6)


def test_ftf_minimises_the_largest_rho_by_hand():
    # types of one GPU each; job 0 does 2 it/s on type 0 and 1 on type 1, job 1 1 it/s on
    # both; 100 iterations left each, just arrived. Isolated share: one GPU each, spread over
    # the types: 1.5 and 1 it/s, so T_iso = 66.7 s and 100 s. Best: job 0 on type 0 (rho
    # 50 / 66.7 = 0.75), job 1 on type 1 (rho 1); swapping them gives job 0 rho 1.5.
    thr = np.array([[2.0, 1.0], [1.0, 1.0]])
    x = finish_time_fairness(
        thr, np.array([1, 1]), np.array([1, 1]), np.zeros(2), np.array([100.0, 100.0])
    )
    np.testing.assert_allclose(x, [[1.0, 0.0], [0.0, 1.0]], atol=1e-5)
    rho = (100.0 / (thr * x).sum(axis=1)) / np.array([100.0 / 1.5, 100.0])
    assert rho.max() == pytest.approx(1.0, rel=1e-5)


def test_ftf_on_one_type_gives_at_least_the_isolated_share():
    # 2 GPUs, a 2-GPU and a 1-GPU job: water level gives 0.5 and 1 of the time (rho 1 each);
    # no allocation lowers both rho, so min max rho = 1 and X is the isolated share.
    x = finish_time_fairness(
        np.ones((2, 1)), np.array([2, 1]), np.array([2]), np.zeros(2), np.array([100.0, 100.0])
    )
    np.testing.assert_allclose(x[:, 0], [0.5, 1.0], atol=1e-5)


def test_ftf_equals_the_water_filling_on_one_type_whatever_the_lengths():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(1, 8))
        d = rng.integers(1, 5, n)
        gpus = np.array([int(rng.integers(1, 12))])
        ftf = finish_time_fairness(
            np.ones((n, 1)), d, gpus, rng.uniform(0, 1e4, n), rng.uniform(1, 1e5, n)
        )
        las = max_min_fairness(np.ones((n, 1)), d, gpus)
        np.testing.assert_allclose(ftf, las, atol=1e-5)


def test_max_sum_throughput_on_one_type_is_the_lp_optimum():
    # 5 GPUs, demands 1, 4, 2, 2 (throughput 1 each): 1, 2, 2 fit (3 jobs), the 4-GPU job
    # gets nothing; the closed form reaches the LP's optimum value
    from dlcluster_gym.baselines.gavel import _base, _matrix, _solve

    thr, d, caps = np.ones((4, 1)), np.array([1, 4, 2, 2]), np.array([5])
    x = max_sum_throughput(thr, d, caps)
    np.testing.assert_allclose(x[:, 0], [1.0, 0.0, 1.0, 1.0])
    parts, b, bounds = _base(thr, d, caps)
    lp = _solve(-thr.reshape(-1), _matrix(parts, b.size, 4), b, bounds)  # HiGHS, same LP
    assert x.sum() == pytest.approx(lp.sum())


def test_max_sum_throughput_fills_the_cluster():
    x = max_sum_throughput(np.ones((3, 1)), np.array([1, 1, 2]), np.array([2]))
    assert (np.array([1, 1, 2]) @ x[:, 0]) == pytest.approx(2.0)
    assert max_sum_throughput(np.zeros((0, 2)), np.zeros(0), np.array([1, 1])).shape == (0, 2)


def _jobs(n: int, iters: float = 2000.0) -> list[Job]:
    return [Job(i, "resnet50", 1, iters, 1.0, 0.0) for i in range(n)]


def test_rounds_time_share_three_jobs_on_two_gpus_by_hand():
    """Three 1-GPU jobs at t=0 on 2 GPUs, LAS, 360 s rounds, no overheads. X = 2/3 each.
    Round 0: every share is 0, ties by job id: jobs 0 and 1 start. Round 360: job 2 (share
    0) and job 0 (tie with job 1 at share 1, by id) run; job 1 is preempted. Round 720:
    shares 1, 1/2, 1/2: jobs 1 and 2 run, job 0 is preempted."""
    sc = small_scenario(
        machines=1, gpus=2, overheads={"checkpoint_s": 0.0, "restore_s": 0.0, "restart_s": 0.0}
    )
    _, res = run_engine(sc, _jobs(3), GavelLAS())
    ev = [(e["t"], e["event"], e["job"]) for e in res.events
          if e["event"] in ("start", "preempt") and e["t"] <= 720]  # fmt: skip
    assert ev == [
        (0.0, "start", 0), (0.0, "start", 1),
        (360.0, "preempt", 1), (360.0, "start", 2),
        (720.0, "preempt", 0), (720.0, "start", 1),
    ]  # fmt: skip
    assert res.summary["jobs_completed"] == 3


def test_jobs_wait_for_the_next_round_and_round_s_sets_it():
    sc = small_scenario(machines=1, gpus=2)
    jobs = [Job(0, "resnet50", 1, 100.0, 1.0, 10.0)]
    _, res = run_engine(sc, jobs, Gavel())
    assert res.jobs["first_start_s"][0] == pytest.approx(360.0)
    _, res = run_engine(sc, jobs, Gavel(round_s=60.0))
    assert res.jobs["first_start_s"][0] == pytest.approx(60.0)


def test_scenario_rounds_are_used_when_round_s_is_not_given():
    sc = small_scenario(machines=1, gpus=2, round_period_s=120.0)
    jobs = [Job(0, "resnet50", 1, 100.0, 1.0, 10.0)]
    _, res = run_engine(sc, jobs, GavelLAS())
    assert res.jobs["first_start_s"][0] == pytest.approx(120.0)


def test_large_gangs_are_placed_consolidated():
    # 2 machines x 4 GPUs, jobs of 4, 2, 2 GPUs: the 4-GPU job gets one machine
    sc = small_scenario(machines=2, gpus=4)
    jobs = [Job(0, "resnet50", 2, 500.0, 1.0, 0.0), Job(1, "resnet50", 2, 500.0, 1.0, 0.0),
            Job(2, "vgg16", 4, 500.0, 1.0, 0.0)]  # fmt: skip
    _, res = run_engine(sc, jobs, GavelLAS())
    first = {e["job"]: e["gpus"] for e in res.events if e["event"] == "start"}
    assert len({g // 4 for g in first[2]}) == 1
    assert res.summary["jobs_completed"] == 3


def test_ftf_kinds_and_the_oracle():
    assert kind_of("gavel-ftf") == "clairvoyant"
    assert kind_of("gavel-ftf-history") == "deployable"
    assert kind_of("gavel-las") == "deployable"
    assert kind_of("gavel") == "deployable"
    with pytest.raises(ConfigError, match="lengths must be one of known, history"):
        GavelFTF(lengths="guess")
    with pytest.raises(ConfigError, match="round_s must be a number of seconds >= 1"):
        GavelLAS(round_s=0.5)


@needs_traces  # tiresias-60job reads tiresias/60_job.csv
@pytest.mark.parametrize("policy", ["gavel", "gavel-las", "gavel-ftf", "gavel-ftf-history"])
def test_every_gavel_policy_runs_ordinary_jobs_deterministically(policy):
    a = simulate("tiresias-60job", policy, seed=3)
    b = simulate("tiresias-60job", policy, seed=3)
    assert a.summary["jobs_completed"] == 60
    assert a.summary == {**b.summary, "wall_s": a.summary["wall_s"]}


def test_ordinary_jobs_on_a_heterogeneous_cluster_keep_their_named_type():
    from tests.test_crius import HETERO, _engine

    jobs = [Job(0, "resnet50", 2, 500.0, 1.0, 0.0, gpu_type="A10"),
            Job(1, "resnet50", 2, 500.0, 1.0, 0.0)]  # fmt: skip
    res = _engine(jobs, GavelLAS()).run()
    assert HETERO["cluster"]["groups"][1]["gpu_type"] == "A10"
    first = {e["job"]: e["gpus"] for e in res.events if e["event"] == "start"}
    assert all(g >= 4 for g in first[0])  # GPUs 4-7 are the A10s
    assert res.summary["jobs_completed"] == 2
