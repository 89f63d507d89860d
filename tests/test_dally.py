"""Dally: Algorithm 1 decisions and timings, the auto-tuner's lists, preemption modes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import frac, overhead_scenario, run_engine, small_scenario, starts

from dlcluster_gym.baselines.dally import Dally, WaitHistory
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.sim.view import ClusterView
from dlcluster_gym.workload.job import Job

LONG = 10**6  # iterations: a job that outlives the test


def fragmented(extra: list[Job]) -> list[Job]:
    """2 racks x 2 machines x 4 GPUs with one free GPU per machine (four long 3-GPU jobs)."""
    return [Job(i, "resnet50", 3, LONG, 1.0, 0.0) for i in range(4)] + extra


def test_machine_timer_then_rack_placement_exactly_at_expiry():
    sc = small_scenario(racks=2, machines=2, gpus=4)
    jobs = fragmented([Job(4, "resnet18", 2, 10, 1.0, 1.0)])
    policy = make_policy("dally-manual", machine_timer_s=100.0, rack_timer_s=300.0)
    _, res = run_engine(sc, jobs, policy)
    st = starts(res)
    assert [st[i][2] for i in range(4)] == ["machine"] * 4
    t, gpus, tier = st[4]
    assert (t, tier) == (pytest.approx(101.0), "rack")  # rejected until T_Mc expired
    assert {g // 4 for g in gpus} == {0, 1}  # one free GPU on each machine of rack 0


def test_rack_timer_then_network_placement():
    sc = small_scenario(racks=2, machines=2, gpus=4)
    jobs = fragmented([Job(4, "resnet18", 3, 10, 1.0, 1.0)])
    policy = make_policy("dally-manual", machine_timer_s=100.0, rack_timer_s=300.0)
    _, res = run_engine(sc, jobs, policy)
    t, _, tier = starts(res)[4]
    # No rack holds 3 free GPUs: rejected at t=101 too, accepted when T_Rk expires.
    assert (t, tier) == (pytest.approx(301.0), "network")


def test_timers_are_zero_for_jobs_that_cannot_fit_on_a_machine():
    sc = small_scenario(racks=2, machines=2, gpus=4)
    jobs = [Job(0, "resnet50", 1, LONG, 1.0, 0.0), Job(1, "resnet18", 6, 10, 1.0, 1.0)]
    policy = make_policy("dally-manual", machine_timer_s=1e6, rack_timer_s=2e6)
    _, res = run_engine(sc, jobs, policy)
    t, _, tier = starts(res)[1]
    assert (t, tier) == (pytest.approx(1.0), "rack")  # T_Mc = 0: takes the rack at once
    jobs = [Job(0, "resnet50", 1, LONG, 1.0, 0.0), Job(1, "resnet18", 12, 10, 1.0, 1.0)]
    _, res = run_engine(sc, jobs, make_policy("dally-manual", machine_timer_s=1e6))
    t, _, tier = starts(res)[1]
    assert (t, tier) == (pytest.approx(1.0), "network")  # larger than a rack: both timers 0


def test_relocation_preempts_suffering_job_and_keeps_its_progress():
    sc = overhead_scenario()
    cl = Cluster(sc.cluster)
    jobs = [
        Job(0, "resnet50", 3, 100, 1.0, 0.0),  # short, on machine 0
        Job(1, "resnet50", 3, LONG, 1.0, 0.0),  # long, on machine 1
        Job(2, "resnet18", 2, 20_000, 1.0, 1.0),  # only a rack placement at t=1
    ]
    # the clairvoyant move test (true remaining iterations): the mechanism itself
    policy = make_policy("dally-manual", machine_timer_s=0.0, remaining="known")
    _, res = run_engine(sc, jobs, policy)
    events = [(e["event"], e.get("job")) for e in res.events]
    assert ("preempt", 2) in events
    st = starts(res)
    t_reloc, gpus, tier = st[2]
    t_free = 100 * (1 + frac(cl, "resnet50", [0, 1, 2]))  # job 0 finishes, machine 0 frees
    assert t_reloc == pytest.approx(t_free)
    assert tier == "machine" and {g // 4 for g in gpus} == {0}
    it_rack = 1 + frac(cl, "resnet18", [3, 7])
    it_machine = 1 + frac(cl, "resnet18", gpus)
    done = (t_free - 1.0) / it_rack  # progress kept across the preemption
    expected = t_free + 30.0 + (20_000 - done) * it_machine  # checkpoint + restore once
    assert res.jobs["finish_s"][2] == pytest.approx(expected)
    assert res.jobs["preemptions"][2] == 1
    assert res.jobs["overhead_s"][2] == pytest.approx(30.0)
    assert res.jobs["tiers"][2] == "machine|rack"


def test_no_relocation_when_the_saving_does_not_pay_the_overhead():
    sc = small_scenario(racks=1, machines=2, gpus=4)
    jobs = [
        Job(0, "resnet50", 3, 100, 1.0, 0.0),
        Job(1, "resnet50", 3, LONG, 1.0, 0.0),
        Job(2, "resnet18", 2, 100, 1.0, 1.0),  # almost done when machine 0 frees
    ]
    cl = Cluster(sc.cluster)
    t_free = 100 * (1 + frac(cl, "resnet50", [0, 1, 2]))
    left = 100 - (t_free - 1.0) / (1 + frac(cl, "resnet18", [3, 7]))
    saving = left * (frac(cl, "resnet18", [3, 7]) - frac(cl, "resnet18", [0, 1]))
    assert 0 < saving < 30.0  # checkpoint + restore = 30 s by default
    policy = make_policy("dally-manual", machine_timer_s=0.0, remaining="known")
    _, res = run_engine(sc, jobs, policy)
    assert res.jobs["preemptions"][2] == 0
    assert res.jobs["tiers"][2] == "rack"


def test_nw_sens_is_ideal_compute_over_time_held():
    sc = small_scenario(racks=1, machines=2, gpus=4)
    cl = Cluster(sc.cluster)
    policy = Dally()
    jobs = [Job(0, "resnet18", 8, 10, 1.0, 0.0), Job(1, "resnet18", 1, 10, 1.0, 0.0)]
    engine, _ = run_engine(sc, jobs, policy)
    view = ClusterView(engine)
    nws = policy.nw_sens(view, np.array([0, 1]))
    assert nws[0] == pytest.approx(1 / (1 + frac(cl, "resnet18", list(range(8)))))
    assert nws[1] == pytest.approx(1.0)  # one GPU: no communication
    # A job that has not run yet: 0/0 is taken as 1.0 (no slowdown observed).
    fresh = ClusterView(Engine(sc, cl, jobs, Dally(), np.random.default_rng(0)))
    other = Dally()
    other.reset(fresh, np.random.default_rng(0))
    assert other.nw_sens(fresh, np.array([0, 1])).tolist() == [1.0, 1.0]


def test_wait_history_mean_plus_two_sample_std_and_window():
    h = WaitHistory(limit_s=100.0, mode="window")
    assert h.timer(0, 4, now=0.0) is None
    h.add(0, 4, now=0.0, starvation_s=10.0)
    assert h.timer(0, 4, now=0.0) == pytest.approx(10.0)  # one sample: no deviation
    h.add(0, 4, now=50.0, starvation_s=20.0)
    h.add(0, 4, now=60.0, starvation_s=30.0)
    vals = [10.0, 20.0, 30.0]
    expect = np.mean(vals) + 2 * np.std(vals, ddof=1)
    assert h.timer(0, 4, now=60.0) == pytest.approx(expect)
    # The first sample (recorded at t=0) leaves the 100 s window after t=100.
    vals = [20.0, 30.0]
    assert h.timer(0, 4, now=120.0) == pytest.approx(np.mean(vals) + 2 * np.std(vals, ddof=1))
    assert h.timer(0, 8, now=120.0) is None  # lists are per (level, demand)
    assert h.timer(1, 4, now=120.0) is None


def test_wait_history_value_mode_drops_large_values():
    h = WaitHistory(limit_s=25.0, mode="value")
    for v in (10.0, 20.0, 30.0):
        h.add(1, 2, now=0.0, starvation_s=v)
    assert h.samples(1, 2, now=1e9) == [10.0, 20.0]  # old samples stay, large ones go


H = 3600.0
# (recorded at, starvation) in hours: one machine-level list and one rack-level list for
# 4-GPU jobs, HISTORY_TIME_LIMIT = 10 h, timers read at t = 26 h.
MACHINE_WAITS_H = [(0.0, 0.0), (18.0, 4.0), (20.0, 8.0), (25.0, 30.0)]
RACK_WAITS_H = [(1.0, 1.0), (2.0, 5.0), (3.0, 9.0), (4.0, 12.0)]


def tuned_dally(mode: str | None) -> Dally:
    """A ``dally`` whose lists hold MACHINE_WAITS_H and RACK_WAITS_H (limit 10 h)."""
    kwargs = {} if mode is None else {"history_mode": mode}
    policy = Dally(history_limit_s=10 * H, **kwargs)
    run_engine(small_scenario(racks=2, machines=2, gpus=4), [], policy)  # reset on a cluster
    for level, waits in ((0, MACHINE_WAITS_H), (1, RACK_WAITS_H)):
        for t, wait in waits:
            policy.record(level, 4, now=t * H, starvation_s=wait * H)
    return policy


def test_algorithm2_as_written_is_the_default_and_drops_values_above_the_limit():
    policy = tuned_dally(None)
    assert policy.history_mode == "value" and policy.params["history_mode"] == "value"
    # Algorithm 2 lines 3-4 / 9-10: 30 h and 12 h exceed the 10 h limit and are removed.
    assert policy.history.samples(0, 4, now=26 * H) == [0.0, 4 * H, 8 * H]
    assert policy.history.samples(1, 4, now=26 * H) == [1 * H, 5 * H, 9 * H]
    # Line 13: machine [0, 4, 8] h: mean 4, sample std sqrt((16 + 0 + 16) / 2) = 4 -> 4 + 2 x 4
    # = 12 h; rack [1, 5, 9] h: mean 5, sample std 4 -> 13 h. Old values are never forgotten.
    for now in (26 * H, 1000 * H):
        assert policy.timers(4, now=now) == (pytest.approx(12 * H), pytest.approx(13 * H))


def test_window_variant_keeps_recent_values_whatever_their_size():
    policy = tuned_dally("window")
    # At 26 h the window holds what was recorded after 16 h: machine [4, 8, 30] h (30 h kept),
    # mean 14, sample std sqrt((100 + 36 + 256) / 2) = 14 -> 14 + 2 x 14 = 42 h; the rack list
    # (recorded at 1-4 h) has expired, so T_Rk falls back to the manual 24 h.
    assert policy.history.samples(0, 4, now=26 * H) == [4 * H, 8 * H, 30 * H]
    assert policy.timers(4, now=26 * H) == (pytest.approx(42 * H), 24 * H)
    # At 11 h the rack window (recorded at 1 h or later) holds all of [1, 5, 9, 12] h, 12 h
    # included: mean 6.75, sample variance (5.75^2 + 1.75^2 + 2.25^2 + 5.25^2) / 3 = 68.75 / 3.
    fresh = tuned_dally("window")
    rack = 6.75 + 2 * math.sqrt(68.75 / 3)  # 16.32 h (the value cut-off gives 13 h)
    assert fresh.history.timer(1, 4, now=11 * H) == pytest.approx(rack * H)


def test_paper_mode_does_not_record_a_wait_above_the_limit():
    """Jobs 0-3 accept machines at t=0 after 0 s; job 4 (empty lists: the manual 12 h machine
    timer) accepts a rack after waiting 12 h, more than the 1000 s limit."""
    sc = small_scenario(racks=2, machines=2, gpus=4)
    expect = {  # mode -> (rack list of 2-GPU jobs, machine list of 3-GPU jobs) at job 4's start
        "value": ([], [0.0] * 4),  # 12 h > limit: removed; the 0 s waits stay however old
        "window": ([pytest.approx(12 * H)], []),  # kept; the t=0 waits left the 1000 s window
    }
    for mode, (rack, machine) in expect.items():
        policy = Dally(history_limit_s=1000.0, history_mode=mode)
        _, res = run_engine(sc, fragmented([Job(4, "resnet18", 2, 10, 1.0, 1.0)]), policy)
        t, _, tier = starts(res)[4]
        assert (t, tier) == (pytest.approx(1.0 + 12 * H), "rack")
        assert policy.history.samples(1, 2, now=t) == rack
        assert policy.history.samples(0, 3, now=t) == machine


def test_auto_tuner_records_acceptances_and_falls_back_to_manual_defaults():
    sc = small_scenario(racks=2, machines=2, gpus=4)
    jobs = fragmented([Job(4, "resnet18", 2, 10, 1.0, 1.0)])
    policy = Dally(history_limit_s=1e9)
    _, res = run_engine(sc, jobs, policy)
    # Jobs 0-3 accepted machines after 0 s: the machine list for 3 GPUs holds four zeros.
    assert policy.history.samples(0, 3, now=res.summary["makespan_s"]) == [0.0] * 4
    # Demands with empty lists get the manual defaults; job 4 (2 GPUs) had such lists.
    assert policy.timers(1, now=0.0) == (12 * 3600.0, 24 * 3600.0)
    t, _, tier = starts(res)[4]
    assert (t, tier) == (pytest.approx(1.0 + 12 * 3600.0), "rack")
    assert policy.history.samples(1, 2, now=t) == [pytest.approx(12 * 3600.0)]


def test_default_history_limit_scales_inversely_with_cluster_size():
    for racks, hours in ((2, 192), (8, 48), (16, 24)):
        policy = Dally()
        sc = small_scenario(racks=racks, machines=8, gpus=8)
        run_engine(sc, [Job(0, "resnet50", 1, 1, 1.0, 0.0)], policy)
        assert policy.history.limit_s == pytest.approx(hours * 3600.0)


@pytest.mark.parametrize(
    ("name", "kwargs", "match"),
    [
        ("dally-manual", {"machine_timer_s": -1.0}, "machine_timer_s must be a finite"),
        ("dally-manual", {"rack_timer_s": math.inf}, "rack_timer_s must be a finite"),
        ("dally", {"history_limit_s": math.nan}, "history_limit_s must be a finite"),
        ("dally", {"history_mode": "sliding"}, "history_mode must be 'window' or 'value'"),
        ("dally", {"timer": 3}, "has no parameter 'timer'"),
    ],
)
def test_bad_parameters_are_clear_errors(name, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        make_policy(name, **kwargs)


def test_dally_manual_timers_do_not_learn():
    sc = small_scenario(racks=2, machines=2, gpus=4)
    policy = make_policy("dally-manual", machine_timer_s=5.0, rack_timer_s=7.0)
    run_engine(sc, fragmented([Job(4, "resnet18", 2, 10, 1.0, 1.0)]), policy)
    assert policy.timers(3, now=1e6) == (5.0, 7.0)
    assert policy.params == {
        "machine_timer_s": 5.0, "rack_timer_s": 7.0, "preemption": "requeue",
        "remaining": "history",
    }  # fmt: skip


def test_a_job_that_can_never_be_placed_is_reported_not_retried():
    sc = small_scenario(racks=1, machines=2, gpus=4)
    jobs = [Job(0, "resnet50", 2, 10, 1.0, 0.0), Job(1, "resnet50", 9, 10, 1.0, 0.0)]
    with pytest.warns(UserWarning, match="1 job\\(s\\) demand more than the cluster's 8 GPUs"):
        engine, res = run_engine(sc, jobs, make_policy("dally"))
    assert res.summary["jobs_dropped"] == 1 and res.summary["jobs_completed"] == 1
    assert engine.sim_events < 10  # the run ended instead of waking up forever


def two_victims(preemption: str) -> tuple[list[Job], object]:
    """1 rack x 5 machines x 4 GPUs. Jobs 0 and 1 share machine 0 (job 0 ends first, job 1
    a little later); four long 3-GPU jobs leave one free GPU on machines 1-4. Jobs 6 (ResNet18,
    the more network-sensitive) and 7 (ResNet50) take rack placements after the 50 s machine
    timer; job 8 arrives 10 s before job 0 ends and waits for a machine."""
    sc = small_scenario(racks=1, machines=5, gpus=4)
    t_free = 100 * (1 + frac(Cluster(sc.cluster), "resnet50", [0, 1]))
    jobs = [Job(0, "resnet50", 2, 100, 1.0, 0.0), Job(1, "resnet50", 2, 120, 1.0, 0.0)]
    jobs += [Job(i, "resnet50", 3, LONG, 1.0, 0.0) for i in range(2, 6)]
    jobs += [Job(6, "resnet18", 2, LONG, 1.0, 1.0), Job(7, "resnet50", 2, LONG, 1.0, 1.0)]
    jobs += [Job(8, "resnet50", 2, LONG, 1.0, t_free - 10.0)]
    policy = make_policy(
        "dally-manual", machine_timer_s=50.0, rack_timer_s=1000.0, preemption=preemption,
        remaining="known",  # the move test with true lengths: these tests check the mechanism
    )  # fmt: skip
    return run_engine(sc, jobs, policy)[1], t_free


def test_requeue_preempted_job_waits_and_is_offered_again_in_nw_sens_order():
    res, t_free = two_victims("requeue")
    ev = [(e["t"], e["event"], e["job"]) for e in res.events if e["event"] != "arrival"]
    t_job1 = next(t for t, kind, j in ev if kind == "finish" and j == 1)
    # Machine 0 frees 2 GPUs: both rack-placed jobs are preempted back to the wait queue (4.3).
    at_free = [(kind, j) for t, kind, j in ev if t == pytest.approx(t_free)]
    assert at_free == [("finish", 0), ("preempt", 6), ("preempt", 7), ("start", 6)]
    st = starts(res)
    # Job 6 (lower Nw_sens: ResNet18 suffers more on a rack) is offered first and takes it.
    assert st[6][0] == pytest.approx(t_free) and st[6][2] == "machine"
    # Job 7 waits in the queue (its machine timer restarted at the preemption) and gets the
    # next machine before job 8, which has waited longer but has Nw_sens 1 (never ran).
    assert st[7][0] == pytest.approx(t_job1) and st[7][2] == "machine"
    assert t_job1 < t_free + 50.0
    first8 = next(e for e in res.events if e["event"] == "start" and e["job"] == 8)
    assert (first8["t"], first8["tier"]) == (pytest.approx(t_free - 10.0 + 50.0), "rack")
    assert res.jobs["queue_s"][7] == pytest.approx(50.0 + (t_job1 - t_free))


def test_relocate_variant_moves_each_suffering_job_at_once():
    res, t_free = two_victims("relocate")
    ev = [(e["t"], e["event"], e["job"]) for e in res.events if e["event"] != "arrival"]
    t_job1 = next(t for t, kind, j in ev if kind == "finish" and j == 1)
    at_free = [(kind, j) for t, kind, j in ev if t == pytest.approx(t_free)]
    assert at_free == [("finish", 0), ("preempt", 6), ("start", 6)]  # job 7 keeps running
    at_job1 = [(kind, j) for t, kind, j in ev if t == pytest.approx(t_job1)]
    assert at_job1 == [("finish", 1), ("preempt", 7), ("start", 7)]


def test_no_preemption_mode_and_bad_mode():
    res, _ = two_victims("none")
    assert res.jobs["preemptions"].sum() == 0
    assert make_policy("dally", preemption=True).preemption == "requeue"
    assert make_policy("dally", preemption=False).preemption == "none"
    with pytest.raises(ConfigError, match="preemption must be one of requeue, relocate, none"):
        make_policy("dally-manual", preemption="sometimes")
