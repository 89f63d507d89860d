"""Exact event traces on small hand-made workloads, overheads, wake-ups and bad actions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import frac, run_engine, small_scenario

from dlcluster_gym import BaseScheduler, Migrate, Preempt, Resize, Start, WakeUp
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.errors import ConfigError, InvalidActionError
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.workload.job import Job


def trace(res) -> list[tuple]:
    return [(e["event"], e.get("job"), round(e["t"], 9)) for e in res.events]


def test_fcfs_exact_trace_with_head_of_line_blocking():
    sc = small_scenario()
    cl = Cluster(sc.cluster)
    jobs = [
        Job(0, "resnet50", 4, 100, 1.0, 0.0),
        Job(1, "resnet50", 8, 10, 1.0, 1.0),  # blocks the queue until both machines free
        Job(2, "vgg11", 1, 20, 1.0, 2.0),  # would fit at t=2 but FCFS blocks it
    ]
    _, res = run_engine(sc, jobs, make_policy("fcfs"))
    f0 = 100 * (1 + frac(cl, "resnet50", [0, 1, 2, 3]))
    f1 = f0 + 10 * (1 + frac(cl, "resnet50", list(range(8))))
    f2 = f1 + 20.0  # one GPU: no communication
    assert trace(res) == [
        ("arrival", 0, 0.0),
        ("start", 0, 0.0),
        ("arrival", 1, 1.0),
        ("arrival", 2, 2.0),
        ("finish", 0, round(f0, 9)),
        ("start", 1, round(f0, 9)),
        ("finish", 1, round(f1, 9)),
        ("start", 2, round(f1, 9)),
        ("finish", 2, round(f2, 9)),
    ]
    s = res.summary
    assert s["makespan_s"] == pytest.approx(f2)
    assert s["avg_jct_s"] == pytest.approx((f0 + (f1 - 1) + (f2 - 2)) / 3)
    assert res.jobs["queue_s"].tolist() == pytest.approx([0.0, f0 - 1, f1 - 2])
    # GPU utilization: integral of busy GPUs over the makespan.
    busy = 4 * f0 + 8 * (f1 - f0) + 1 * (f2 - f1)
    assert s["gpu_utilization"] == pytest.approx(busy / (8 * f2))
    assert res.jobs["tiers"].tolist() == ["machine", "rack", "machine"]
    assert s["avg_comm_overhead"] == pytest.approx(
        (frac(cl, "resnet50", [0, 1, 2, 3]) + frac(cl, "resnet50", list(range(8))) + 0) / 3
    )


def test_first_fit_uses_lowest_free_gpus():
    sc = small_scenario()
    jobs = [Job(0, "resnet50", 3, 10, 1.0, 0.0), Job(1, "resnet50", 3, 10, 1.0, 0.0)]
    _, res = run_engine(sc, jobs, make_policy("fcfs"))
    starts = [e["gpus"] for e in res.events if e["event"] == "start"]
    assert starts == [[0, 1, 2], [3, 4, 5]]


def test_fcfs_consolidated_waits_for_one_machine():
    sc = small_scenario()
    jobs = [
        Job(0, "resnet50", 3, 10, 1.0, 0.0),
        Job(1, "resnet50", 3, 10, 1.0, 0.0),
        Job(2, "resnet50", 4, 10, 1.0, 0.0),
    ]
    _, res = run_engine(sc, jobs, make_policy("fcfs-consolidated"))
    starts = {e["job"]: (e["t"], e["tier"]) for e in res.events if e["event"] == "start"}
    assert all(tier == "machine" for _, tier in starts.values())
    assert starts[2][0] > 0  # had to wait: 1 + 1 GPUs free on two machines at t=0


class Scripted(BaseScheduler):
    """Applies a fixed script of actions at given instants (the test's hand)."""

    name = "scripted"

    def __init__(self, script):
        super().__init__()
        self.script = dict(script)
        self.calls: list[float] = []

    def schedule(self, view):
        self.calls.append(view.now)
        return self.script.pop(round(view.now, 6), ())


def test_preemption_keeps_progress_and_charges_checkpoint_restore():
    sc = small_scenario(overheads={"checkpoint_s": 3.0, "restore_s": 7.0, "restart_s": 0.0})
    jobs = [Job(0, "vgg11", 1, 100, 1.0, 0.0)]
    script = {
        0.0: [Start(0, (0,)), WakeUp(40.0)],
        40.0: [Preempt(0), WakeUp(50.0)],
        50.0: [Start(0, (5,))],
    }
    _, res = run_engine(sc, jobs, Scripted(script))
    # 40 iterations before preemption, 10 s waiting, then 10 s overhead, then 60 iterations.
    assert res.jobs["finish_s"][0] == pytest.approx(50 + 10 + 60)
    assert res.jobs["preemptions"][0] == 1
    assert res.jobs["overhead_s"][0] == pytest.approx(10.0)
    assert res.jobs["queue_s"][0] == pytest.approx(10.0)
    assert res.jobs["compute_s"][0] == pytest.approx(100.0)


def test_a_job_on_fewer_gpus_keeps_its_global_batch_and_gradient():
    """An elastic start on 2 of a 4-GPU demand: compute 1 s x 4 / 2 per iteration, and the
    all-reduce of the same gradient on the 2 GPUs (its overhead x the compute at the demand,
    not x the doubled compute). Th+Cassini's link profile of that placement has the same
    iteration time."""
    from dlcluster_gym.perf.contention import SharedLinks, job_link_profiles
    from dlcluster_gym.workload.models import get_model

    sc = small_scenario(overheads={"checkpoint_s": 0.0, "restore_s": 0.0, "restart_s": 0.0})
    cl = Cluster(sc.cluster)
    jobs = [Job(0, "vgg11", 4, 100, 1.0, 0.0)]
    gpus = (3, 4)  # two machines
    pol = Scripted({0.0: [Start(0, gpus)]})
    pol.elastic_gpu_jobs = True
    _, res = run_engine(sc, jobs, pol)
    overhead = frac(cl, "vgg11", list(gpus))
    assert overhead > 0.05
    assert res.jobs["finish_s"][0] == pytest.approx(100 * (2.0 + overhead * 1.0))
    assert res.jobs["comm_s"][0] == pytest.approx(100 * overhead)
    profiles = job_link_profiles(SharedLinks(cl), get_model("vgg11"), 2.0, gpus, 2 / 4)
    assert profiles
    for p in profiles.values():
        assert p.iteration_time == pytest.approx(2.0 + overhead)


def test_migration_and_resize_overheads():
    sc = small_scenario(overheads={"checkpoint_s": 2.0, "restore_s": 3.0, "restart_s": 4.0})
    cl = Cluster(sc.cluster)
    jobs = [Job(0, "vgg11", 2, 100, 1.0, 0.0)]
    spread = (3, 4)  # machine 0 and machine 1: rack tier
    script = {
        0.0: [Start(0, spread), WakeUp(10.0)],
        10.0: [Migrate(0, (4, 5)), WakeUp(30.0)],
        30.0: [Resize(0, (4, 5, 6, 7))],
    }
    _, res = run_engine(sc, jobs, Scripted(script))
    it_spread = 1 + frac(cl, "vgg11", list(spread))
    it_packed = 1 + frac(cl, "vgg11", [4, 5])
    done = 10 / it_spread + (30 - 15) / it_packed  # 5 s migration overhead
    compute4 = 0.5  # twice the GPUs, same global batch: half the compute per iteration
    # the same gradient all-reduced on 4 GPUs: the fraction of the compute at the demand (1 s)
    it4 = compute4 + 1.0 * frac(cl, "vgg11", [4, 5, 6, 7])
    expected = 30 + 4 + (100 - done) * it4
    assert res.jobs["finish_s"][0] == pytest.approx(expected)
    assert res.jobs["migrations"][0] == 1
    assert res.summary["resizes"] == 1
    assert res.jobs["tiers"][0] == "machine|rack"


def test_wakeups_and_rounds_call_the_policy():
    sc = small_scenario(round_period_s=100.0)
    jobs = [Job(0, "vgg11", 1, 250, 1.0, 0.0)]
    pol = Scripted({0.0: [Start(0, (0,)), WakeUp(33.0)]})
    run_engine(sc, jobs, pol)
    assert pol.calls == [0.0, 33.0, 100.0, 200.0, 250.0]


@pytest.mark.parametrize(
    ("action", "match"),
    [
        (Start(0, (99,)), r"GPU 99 does not exist"),
        (Start(0, (0, 0)), r"GPU 0 listed twice"),
        (Start(0, (0,)), r"demands 2 GPUs, got 1"),
        (Start(7, (0, 1)), r"job 7 does not exist"),
        (Preempt(0), r"job 0 is waiting, expected running"),
        ("go", r"not an action"),
    ],
)
def test_invalid_actions_name_policy_job_and_gpu(action, match):
    sc = small_scenario()
    jobs = [Job(0, "vgg11", 2, 10, 1.0, 0.0)]
    with pytest.raises(InvalidActionError, match=match) as exc:
        run_engine(sc, jobs, Scripted({0.0: [action]}))
    assert "policy 'scripted'" in str(exc.value)


def test_double_booking_and_double_start_are_rejected():
    sc = small_scenario()
    jobs = [Job(0, "vgg11", 2, 10, 1.0, 0.0), Job(1, "vgg11", 2, 10, 1.0, 0.0)]
    with pytest.raises(InvalidActionError, match=r"job 1: GPU 1 is already held by job 0"):
        run_engine(sc, jobs, Scripted({0.0: [Start(0, (0, 1)), Start(1, (1, 2))]}))
    with pytest.raises(InvalidActionError, match=r"job 0 is running, expected waiting"):
        run_engine(sc, jobs, Scripted({0.0: [Start(0, (0, 1)), Start(0, (2, 3))]}))


def test_policy_that_never_places_ends_with_unfinished_jobs():
    sc = small_scenario(round_period_s=60.0)
    jobs = [Job(0, "vgg11", 1, 10, 1.0, 0.0)]
    _, res = run_engine(sc, jobs, Scripted({}))
    assert res.summary["jobs_unfinished"] == 1
    assert res.summary["jobs_completed"] == 0
    assert math.isnan(res.summary["avg_jct_s"])


def test_oversize_jobs_dropped_with_warning_or_rejected():
    jobs = [Job(0, "vgg11", 1, 10, 1.0, 0.0), Job(1, "vgg11", 64, 10, 1.0, 0.0)]
    with pytest.warns(UserWarning, match=r"1 job\(s\) demand more than the cluster's 8 GPUs"):
        _, res = run_engine(small_scenario(), jobs, make_policy("fcfs"))
    assert res.summary["jobs_dropped"] == 1
    assert res.summary["jobs_total"] == 1
    assert res.summary["jobs_completed"] == 1
    with pytest.raises(ConfigError, match=r"job 1 demands 64 GPUs but cluster"):
        run_engine(small_scenario(oversize_jobs="reject"), jobs, make_policy("fcfs"))


def test_random_policy_is_seeded():
    sc = small_scenario(racks=2)
    jobs = [Job(i, "resnet50", 2, 50, 1.0, float(i)) for i in range(12)]
    a = run_engine(sc, jobs, make_policy("random"), seed=3)[1]
    b = run_engine(sc, jobs, make_policy("random"), seed=3)[1]
    c = run_engine(sc, jobs, make_policy("random"), seed=4)[1]
    assert a.events == b.events
    assert a.events != c.events


def test_view_is_read_only():
    seen = {}

    class Peek(BaseScheduler):
        name = "peek"

        def schedule(self, view):
            with pytest.raises(ValueError):
                view.free_mask[0] = False
            seen["free"] = view.num_free
            return ()

    run_engine(small_scenario(), [Job(0, "vgg11", 1, 1, 1.0, 0.0)], Peek())
    assert seen["free"] == 8


def test_progress_fraction_in_view():
    """A job's progress needs its length: readable by a clairvoyant policy only."""
    seen = []

    class Watch(Scripted):
        clairvoyant = True

        def schedule(self, view):
            if view.is_running(0):
                seen.append(round(view.progress(0), 6))
            return super().schedule(view)

    run_engine(
        small_scenario(),
        [Job(0, "vgg11", 1, 100, 1.0, 0.0)],
        Watch({0.0: [Start(0, (0,)), WakeUp(25.0)]}),
    )
    assert seen == [0.25]
    assert np.isclose(seen[0], 0.25)


def test_progress_of_a_running_job_is_an_oracle_error_when_undeclared():
    from dlcluster_gym.errors import OracleError

    class Peek(Scripted):
        def schedule(self, view):
            if view.is_running(0):
                view.progress(0)
            return super().schedule(view)

    with pytest.raises(OracleError, match="clairvoyant = True"):
        run_engine(
            small_scenario(),
            [Job(0, "vgg11", 1, 100, 1.0, 0.0)],
            Peek({0.0: [Start(0, (0,)), WakeUp(25.0)]}),
        )


def test_view_holding_matches_gpus_of():
    """``ClusterView.holding`` (count, first GPU) agrees with ``gpus_of`` as a job starts,
    resizes and is preempted, and is (0, -1) for a job that holds nothing."""
    sc = small_scenario()
    jobs = [Job(0, "vgg11", 2, 100, 1.0, 0.0), Job(1, "vgg11", 1, 10, 1.0, 0.0)]
    seen: list[tuple] = []

    class Watch(Scripted):
        def schedule(self, view):
            g = view.gpus_of(0)
            seen.append((view.now, view.holding(0), (g.size, int(g[0]) if g.size else -1)))
            return super().schedule(view)

    script = {
        0.0: [Start(0, (6, 7)), WakeUp(10.0)],
        10.0: [Resize(0, (2, 3, 4, 5)), WakeUp(20.0)],
        20.0: [Preempt(0), WakeUp(30.0)],
        30.0: [Start(0, (1, 2))],
    }
    run_engine(sc, jobs, Watch(script))
    by_t = {t: h for t, h, _ in seen}
    assert all(h == ref for _, h, ref in seen)
    assert by_t[0.0] == (0, -1) and by_t[10.0] == (2, 6) and by_t[20.0] == (4, 2)
    assert by_t[30.0] == (0, -1)
