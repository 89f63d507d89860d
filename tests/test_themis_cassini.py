"""Themis (leases, auctions by finish-time fairness) and Cassini on top of a base policy."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from conftest import run_engine, small_scenario, starts

from dlcluster_gym import BaseScheduler, Start
from dlcluster_gym.errors import ConfigError, DLClusterError
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.sim.estimators import History
from dlcluster_gym.workload.job import Job


def test_themis_auction_at_lease_expiry_preempts_the_fairest_job():
    sc = small_scenario(racks=1, machines=1, gpus=4)
    jobs = [Job(0, "resnet50", 4, 10_000, 1.0, 0.0), Job(1, "resnet50", 4, 100, 1.0, 10.0)]
    _, res = run_engine(sc, jobs, make_policy("themis", lease_s=600.0))
    trace = [(e["event"], e.get("job"), round(e["t"], 6)) for e in res.events]
    # Job 1 waits until the lease expires; its finish-time fairness (waited 590 s for a
    # 100-iteration job) is worse than job 0's, so it wins the auction and job 0 is preempted.
    assert ("preempt", 0, 600.0) in trace
    assert starts(res)[1][0] == pytest.approx(600.0)
    # Between epochs free GPUs go to waiting jobs at once: job 0 resumes when job 1 finishes.
    assert starts(res)[0][0] == pytest.approx(res.jobs["finish_s"][1])
    assert res.summary["jobs_completed"] == 2


def test_themis_rejects_bad_lease():
    with pytest.raises(ConfigError, match="lease_s must be a finite number of seconds > 0"):
        make_policy("themis", lease_s=0)
    with pytest.raises(ConfigError, match="auction must be one of reauction, renew"):
        make_policy("themis", auction="sometimes")
    with pytest.raises(ConfigError, match="placement must be one of penalty, consolidated"):
        make_policy("themis", placement="best")
    with pytest.raises(ConfigError, match="cross_rack_slowdown must be a finite number >= 1"):
        make_policy("themis", cross_rack_slowdown=0.5)
    with pytest.raises(ConfigError, match="lengths must be one of known, attained, history"):
        make_policy("themis", lengths="all")


class _RhoView:
    """The three things ``Themis.rho`` reads from a view."""

    def __init__(self, now: float, done: list[float], num_gpus: int) -> None:
        self.now, self.num_gpus, self._done = now, num_gpus, np.array(done)
        self.history = History(SimpleNamespace(finished_order=[], jobs=[]))  # none finished

    def live(self, jobs):
        return self._done[jobs], None, None


def _rho_policy(lengths: str, iterations: list[float]):
    pol = make_policy("themis", lengths=lengths, lease_s=600.0)
    pol._compute = np.array([1.0, 1.0])
    pol._arrival = np.array([0.0, 0.0])
    pol._demand = np.array([2, 8])
    pol._penalty = np.array([1.0, 1.5])
    pol._count = np.array([2, 8])  # a running job holds its demand
    pol._iters = np.array(iterations)
    return pol


def test_themis_lengths_attained_estimates_remaining_work_from_work_done():
    """``lengths="attained"``: remaining iterations = max(iterations done, one lease of
    compute), the job's length = done + that; hand-computed, and the same whatever the jobs'
    true lengths (``lengths="known"``, the paper's rule, reads them)."""
    view = _RhoView(now=2000.0, done=[0.0, 1000.0], num_gpus=8)  # 2 jobs: fair share 4 GPUs
    jobs, running = np.array([0, 1]), np.array([False, True])
    # Job 0 waits: remaining max(0, 600) = 600 iterations at compute 1 s; T_ideal = 600 s.
    # Job 1 runs (cross-rack penalty 1.5): remaining 1000 at 1.5 s; length 2000; demand 8 over
    # a fair share of 4: T_ideal = 2000 x 2.
    want = [(2000 + 600) / 600, (2000 + 1000 * 1.5) / (2000 * 2)]
    for iterations in ([5.0, 3000.0], [1e9, 1e9]):
        got = _rho_policy("attained", iterations).rho(view, jobs, running)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    known = _rho_policy("known", [5000.0, 3000.0]).rho(view, jobs, running)
    np.testing.assert_allclose(known, [(2000 + 5000) / 5000, (2000 + 2000 * 1.5) / (3000 * 2)])


def test_themis_lengths_history_estimates_remaining_work_from_finished_jobs():
    """``lengths="history"``: remaining work = the mean length of the finished jobs longer
    than the job's work so far, minus that work (``sim.estimators``, hand-computed in
    tests/test_information_boundary.py); a run sees every finish in ``view.history``."""
    sc = small_scenario(racks=1, machines=1, gpus=4)
    run = [Job(0, "resnet50", 4, 2_000, 1.0, 0.0), Job(1, "resnet50", 4, 300, 1.0, 10.0)]
    policy = make_policy("themis", lengths="history")
    assert not policy.clairvoyant
    engine, res = run_engine(sc, run, policy)
    assert res.summary["jobs_completed"] == 2
    assert engine.history.count == 2
    np.testing.assert_allclose(engine.history.work_s()[0], [300.0, 2000.0])


def test_themis_leases_are_per_job_and_a_lone_winner_renews_without_restart():
    """4.5.1: a lease runs lease_s from the job's start; at expiry its servers are
    re-auctioned; the only bidder wins them back and keeps running (no preemption)."""
    sc = small_scenario(racks=1, machines=2, gpus=4)
    jobs = [Job(0, "resnet50", 3, 2_000, 1.0, 0.0), Job(1, "resnet50", 2, 2_000, 1.0, 100.0)]
    policy = make_policy("themis", lease_s=600.0)
    _, res = run_engine(sc, jobs, policy)
    assert res.summary["preemptions"] == 0
    assert policy.renewals >= 4  # both jobs renewed at least twice
    # Leases are not synchronized: auctions at 600 (job 0) and 700 (job 1), 1200, 1300, ...
    assert policy.auction_times[:4] == pytest.approx([600.0, 700.0, 1200.0, 1300.0])
    # Themis sees racks, not machines: job 1 gets the lowest-numbered free GPUs of the rack
    # (GPU 3 on machine 0 and GPU 4 on machine 1), not a machine of its own.
    assert starts(res)[1][1] == [3, 4]
    consolidated = make_policy("themis", placement="consolidated")
    _, res_c = run_engine(sc, jobs, consolidated)
    assert starts(res_c)[1][1] == [4, 5]


def test_themis_reauction_moves_a_cross_rack_job_into_a_freed_rack():
    """At lease expiry a job placed across racks (penalty 1.5) re-bids and the arbiter gives
    it the freed rack; with auction=renew it keeps its cross-rack GPUs."""
    sc = small_scenario(racks=2, machines=1, gpus=4)
    jobs = [
        Job(0, "resnet50", 3, 100, 1.0, 0.0),  # rack 0, ends before the first lease expires
        Job(1, "resnet50", 3, 100_000, 1.0, 0.0),  # rack 1
        Job(2, "resnet50", 2, 100_000, 1.0, 1.0),  # one free GPU per rack: across racks
    ]
    _, res = run_engine(sc, jobs, make_policy("themis", lease_s=600.0))
    first2 = next(e for e in res.events if e["event"] == "start" and e["job"] == 2)
    assert (first2["t"], first2["gpus"], first2["tier"]) == (1.0, [3, 7], "network")
    assert res.jobs["finish_s"][0] < 600.0
    ev = [(e["event"], e["job"]) for e in res.events if e.get("t") == pytest.approx(601.0)]
    assert ("preempt", 2) in ev and ("start", 2) in ev
    t, gpus, tier = starts(res)[2]
    assert (t, gpus, tier) == (pytest.approx(601.0), [0, 1], "machine")
    _, old = run_engine(sc, jobs, make_policy("themis-greedy", auction="renew"))
    assert old.jobs["preemptions"][2] == 0 and starts(old)[2][2] == "network"


class PinnedBase(BaseScheduler):
    """Starts job 0 on machines 0+1 and job 1 on machines 1+2: one shared NIC uplink."""

    name = "pinned"

    def schedule(self, view):
        todo = {0: (0, 2), 1: (3, 4)}
        return [Start(j, todo[j]) for j in view.waiting() if j in todo]


def shared_uplink_scenario():
    # 1 rack x 3 machines x 2 GPUs; 60 Gb/s NICs: two aligned 50 Gb/s Up phases over-subscribe
    # machine 1's uplink, interleaved they fit.
    return small_scenario(
        racks=1,
        machines=3,
        gpus=2,
        contention=True,
        cluster={
            "racks": 1,
            "machines_per_rack": 3,
            "gpus_per_machine": 2,
            "tiers": {"machine": "nvlink", "rack": "eth-50", "network": "eth-50"},
            "machine_uplink_gbps": 60,
        },
    )


def test_cassini_time_shifts_remove_the_slowdown_of_aligned_jobs():
    sc = shared_uplink_scenario()
    jobs = [Job(0, "resnet50", 2, 2000, 0.15, 0.0), Job(1, "resnet50", 2, 2000, 0.15, 0.0)]
    _, plain = run_engine(sc, jobs, PinnedBase())
    assert (plain.jobs["contention_slowdown"] > 1.0).all()  # aligned phases: stretched
    policy = make_policy("fcfs+cassini", base="test_themis_cassini:PinnedBase")
    _, res = run_engine(sc, jobs, policy)
    shifts = [e for e in res.events if e["event"] == "start"]
    assert len(shifts) == 2
    assert res.jobs["contention_slowdown"].tolist() == pytest.approx([1.0, 1.0])
    assert res.summary["avg_jct_s"] < plain.summary["avg_jct_s"]
    assert policy.candidates_scored >= 1


def test_cassini_keeps_base_decisions_when_nothing_is_oversubscribed():
    from dlcluster_gym import simulate

    a = simulate("dally-poisson-2rack", "dally", seed=2)
    b = simulate("dally-poisson-2rack", "dally+cassini", seed=2)
    assert b.summary["avg_jct_s"] == a.summary["avg_jct_s"]
    assert b.summary["makespan_s"] == a.summary["makespan_s"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_candidates": 0}, "max_candidates must be an integer >= 1"),
        ({"base": "no-such-policy"}, "no-such-policy"),
    ],
)
def test_cassini_bad_parameters(kwargs, match):
    with pytest.raises(DLClusterError, match=match):
        make_policy("cassini", **kwargs)


def test_cassini_on_the_testbed_scenario_is_deterministic_and_finishes():
    from dlcluster_gym import load_scenario, simulate

    sc = load_scenario("cassini-testbed-poisson").model_dump()
    sc["workload"]["num_jobs"] = 60
    a = simulate(sc, "cassini", seed=4)
    b = simulate(sc, "cassini", seed=4)
    assert a.summary["jobs_completed"] == 60
    assert a.jobs["finish_s"].tolist() == b.jobs["finish_s"].tolist()
