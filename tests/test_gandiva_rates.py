"""Gandiva's time-slicing as rates (``timeslice="rates"``; the engine's ``TimeShare`` action,
``sim.timeshare``): the jobs of a GPU set all run, each at its share, and the rates change
only when the set of sharers changes. Hand-computed traces, the engine's side, and agreement
with the quanta form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import needs_traces, run_engine, small_scenario

from dlcluster_gym import (
    BaseScheduler,
    Migrate,
    Preempt,
    Resize,
    Start,
    TimeShare,
    WakeUp,
    load_scenario,
    simulate,
)
from dlcluster_gym.errors import InvalidActionError, NotApplicableError
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.workload.job import Job

OVERHEADS = {"checkpoint_s": 10.0, "restore_s": 20.0, "restart_s": 30.0}
NO_OVERHEADS = {"checkpoint_s": 0.0, "restore_s": 0.0, "restart_s": 0.0}
RATES = {"timeslice": "rates"}


class _Scripted(BaseScheduler):
    """Applies a fixed script of actions at given instants and records what it saw."""

    name = "scripted"

    def __init__(self, script: dict) -> None:
        super().__init__()
        self.script = dict(script)
        self.seen: dict[float, tuple[list[int], tuple[int, ...], list[int]]] = {}

    def schedule(self, view):
        now = round(view.now, 6)
        self.seen[now] = (view.gpu_owner.tolist(), view.shared_set(1), view.running())
        return self.script.pop(now, ())


def _jobs(*lengths: int, gpus: int = 1) -> list[Job]:
    return [Job(i, "resnet50", gpus, n, 1.0, 0.0) for i, n in enumerate(lengths)]


def test_rates_by_hand() -> None:
    """2 GPUs, four 1-GPU jobs at t=0 of 100, 170, 90 and 200 one-second iterations, switches
    free. Jobs 0 and 1 take GPUs 0 and 1; job 2 shares job 0's GPU, job 3 job 1's, each at
    half speed from 0 s. Job 2 finishes at 180 s; job 0 (90 done) then runs alone and finishes
    at 190 s; GPU 0 is free. In the round robin the rates stand for (turns switch at 60 s,
    120 s and 180 s), job 3 has the turn at 190 s and job 1 is next: job 1 is suspended and
    resumed on GPU 0, as the quanta form does. Both then run alone: job 1 (95 done, 75 left)
    finishes at 265 s, job 3 (105 left) at 295 s."""
    sc = small_scenario(racks=1, machines=1, gpus=2, overheads=NO_OVERHEADS)
    pol = make_policy("gandiva", suspend_resume_s=0.0, **RATES)
    _, res = run_engine(sc, _jobs(100, 170, 90, 200), pol)
    assert res.jobs["finish_s"].tolist() == pytest.approx([190.0, 265.0, 180.0, 295.0])
    assert res.jobs["first_start_s"].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert res.jobs["preemptions"].tolist() == [0, 1, 0, 0]
    assert res.jobs["migrations"].tolist() == [0, 0, 0, 0]
    # GPU time held: each job's own iterations (no overhead), half of it while shared
    assert res.jobs["run_s"].tolist() == pytest.approx([100.0, 170.0, 90.0, 200.0])
    assert res.jobs["overhead_s"].tolist() == pytest.approx([0.0, 0.0, 0.0, 0.0])
    shared = [(e["job"], e["host"]) for e in res.events if e["event"] == "timeshare"]
    assert shared == [(2, 0), (3, 1)]
    moved = [(e["t"], e["job"], e.get("gpus")) for e in res.events if e["event"] == "start"]
    assert moved[2:] == [(pytest.approx(190.0), 1, [0])]


def test_the_switch_cost_is_a_rate_per_model_family() -> None:
    """One GPU, a ResNet-50 job (0.1 s per suspend-resume) and a BERT-large job (1 s) of 100
    one-second iterations: while both share it they progress at (1 - 0.1 / 60) / 2 and
    (1 - 1 / 60) / 2; the first finishes at 100 / 0.4991667 s, the other then runs alone."""
    sc = small_scenario(racks=1, machines=1, gpus=1, overheads=OVERHEADS)
    jobs = [Job(0, "resnet50", 1, 100, 1.0, 0.0), Job(1, "bert-large", 1, 100, 1.0, 0.0)]
    _, res = run_engine(sc, jobs, make_policy("gandiva", **RATES))
    r0, r1 = (1 - 0.1 / 60) / 2, (1 - 1 / 60) / 2
    t0 = 100 / r0
    t1 = t0 + (100 - t0 * r1)
    assert res.jobs["finish_s"].tolist() == pytest.approx([t0, t1], rel=1e-12)
    # held half the time while shared; the switch's share of it is overhead
    assert res.jobs["run_s"].tolist() == pytest.approx([t0 / 2, t0 / 2 + (t1 - t0)])
    assert res.jobs["overhead_s"].tolist() == pytest.approx([t0 / 2 - 100, t0 / 2 - t0 * r1])
    assert res.summary["preemptions"] == 0


@pytest.mark.parametrize("switch", ["paper", "overheads", 2.0])
@pytest.mark.parametrize(
    ("machines", "gpus", "sizes", "seed"),
    [(1, 2, (1,), 0), (1, 2, (1,), 1), (1, 4, (1, 2), 2), (2, 4, (1, 2, 4), 3), (1, 8, (2, 4), 4)],
)
def test_rates_and_quanta_agree_on_small_cases(machines, gpus, sizes, seed, switch) -> None:
    """Twelve jobs of 2,000-20,000 s (four models, arrivals over 20,000 s) on one or two
    machines: the two forms give the same average JCT within 0.5 %, with checkpoint +
    restore 30 s and each switch cost."""
    rng = np.random.default_rng(seed)
    models = ["resnet50", "bert-large", "vgg16", "gpt2"]
    arrivals = np.sort(rng.uniform(0, 20_000, 12))
    jobs = [
        Job(i, models[int(rng.integers(4))], int(rng.choice(sizes)),
            int(rng.integers(2_000, 20_000)), 1.0, float(t))
        for i, t in enumerate(arrivals)
    ]  # fmt: skip
    sc = small_scenario(racks=1, machines=machines, gpus=gpus, overheads=OVERHEADS)
    out = {}
    for form in ("quanta", "rates"):
        pol = make_policy("gandiva", timeslice=form, suspend_resume_s=switch)
        _, out[form] = run_engine(sc, jobs, pol)
    quanta, rates = out["quanta"], out["rates"]
    # the quanta form time-sliced; the rates form suspends a job only to give it free GPUs
    assert quanta.summary["preemptions"] > 10 * max(rates.summary["preemptions"], 1)
    assert any(e["event"] == "timeshare" for e in rates.events)  # the rates form shared
    assert rates.summary["jobs_completed"] == quanta.summary["jobs_completed"] == 12
    ratio = rates.summary["avg_jct_s"] / quanta.summary["avg_jct_s"]
    assert abs(ratio - 1.0) < 0.005, ratio


def test_engine_time_share_holder_hand_over_and_set_migration() -> None:
    """The engine's side. 2 GPUs, checkpoint + restore 30 s. Job 1 (50 iterations) shares job
    0's GPU 0 (100) from 0 s: both at half speed. At 20 s job 0 migrates to GPU 1 and job 1
    moves with it; each pays 30 s of its own turns (60 s), so both progress again from 80 s
    (10 done each). Job 1 finishes at 160 s, job 0 (50 done) alone at 210 s."""
    sc = small_scenario(racks=1, machines=1, gpus=2, overheads=OVERHEADS)
    script = {
        0.0: [Start(0, (0,)), TimeShare(1, 0), WakeUp(20.0)],
        20.0: [Migrate(0, (1,))],
    }
    pol = _Scripted(script)
    _, res = run_engine(sc, _jobs(100, 50), pol)
    assert res.jobs["finish_s"].tolist() == pytest.approx([210.0, 160.0])
    assert res.jobs["migrations"].tolist() == [1, 1]
    assert res.jobs["overhead_s"].tolist() == pytest.approx([30.0, 30.0])
    assert res.jobs["run_s"].tolist() == pytest.approx([130.0, 80.0])
    owners, shared, running = pol.seen[0.0]
    assert owners == [-1, -1] and shared == () and running == []  # before the actions
    owners, shared, running = pol.seen[20.0]
    assert owners == [0, -1] and shared == (0, 1) and sorted(running) == [0, 1]


def test_engine_time_share_the_next_job_holds_the_gpus_when_the_holder_leaves() -> None:
    """Job 0 (50) holds GPU 0, job 1 (100) shares it: job 0 finishes at 100 s and job 1 holds
    the GPU, alone (50 left: 150 s); a start on GPU 0 then is refused."""
    sc = small_scenario(racks=1, machines=1, gpus=2, overheads=NO_OVERHEADS)
    pol = _Scripted({0.0: [Start(0, (0,)), TimeShare(1, 0)]})
    _, res = run_engine(sc, _jobs(50, 100), pol)
    assert res.jobs["finish_s"].tolist() == pytest.approx([100.0, 150.0])
    owners, shared, _ = pol.seen[100.0]
    assert owners == [1, -1] and shared == ()
    script = {0.0: [Start(0, (0,)), TimeShare(1, 0)], 100.0: [Start(2, (0,))]}
    with pytest.raises(InvalidActionError, match="GPU 0 is already held by job 1"):
        run_engine(sc, _jobs(50, 100, 10), _Scripted(script))


def test_engine_time_share_a_preempted_sharer_leaves_the_gpus_to_the_others() -> None:
    """Job 1 shares job 0's GPU 0 from 0 s; at 20 s it is preempted (10 done each) and started
    on GPU 1: it pays checkpoint + restore (progress from 50 s: 140 s); job 0 runs alone from
    20 s (90 left: 110 s)."""
    sc = small_scenario(racks=1, machines=1, gpus=2, overheads=OVERHEADS)
    script = {
        0.0: [Start(0, (0,)), TimeShare(1, 0), WakeUp(20.0)],
        20.0: [Preempt(1), Start(1, (1,))],
    }
    _, res = run_engine(sc, _jobs(100, 100), _Scripted(script))
    assert res.jobs["finish_s"].tolist() == pytest.approx([110.0, 140.0])
    assert res.jobs["preemptions"].tolist() == [0, 1]


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        ([TimeShare(1, 0)], "job 0 is waiting, expected running"),
        ([Start(0, (0,)), TimeShare(2, 0)], "job 2 demands 2 GPUs, job 0 holds 1"),
        ([Start(0, (0,)), TimeShare(1, 0, switch_frac=1.0)], "switch_frac must be a number"),
        ([Start(0, (0,)), TimeShare(1, 0, host_switch_frac=math.nan)], "host_switch_frac must"),
        ([Start(0, (0,)), TimeShare(1, 0), Resize(1, (1,))], "it cannot be resized"),
    ],
)
def test_engine_time_share_errors_name_the_problem(actions, message) -> None:
    sc = small_scenario(racks=1, machines=1, gpus=2, overheads=NO_OVERHEADS)
    jobs = [*_jobs(100, 100), Job(2, "resnet50", 2, 100, 1.0, 0.0)]
    with pytest.raises(InvalidActionError, match=message):
        run_engine(sc, jobs, _Scripted({0.0: actions}))


def _contended() -> dict:
    """4 machines of 4 GPUs with one 10 Gb/s NIC each: jobs share links."""
    return {
        "name": "contended",
        "cluster": {
            "racks": 1, "machines_per_rack": 4, "gpus_per_machine": 4, "nic_gbps": 10.0,
        },
        "workload": {"kind": "synthetic", "num_jobs": 30},
    }  # fmt: skip


def test_auto_runs_the_quanta_form_where_jobs_share_links() -> None:
    """``auto`` (the default): rates where the engine shares no links, quanta where it does
    (the rates form does not model which sharer's traffic is on the links); ``rates`` there is
    refused."""
    res = simulate(_contended(), "gandiva", seed=1)
    quanta = simulate(_contended(), "gandiva", seed=1, policy_params={"timeslice": "quanta"})
    assert res.summary == {**quanta.summary, "wall_s": res.summary["wall_s"]}
    with pytest.raises(NotApplicableError, match="timeslice='rates' needs a scenario whose"):
        simulate(_contended(), "gandiva", seed=1, policy_params=RATES)
    sc = small_scenario(racks=1, machines=1, gpus=4, overheads=NO_OVERHEADS)
    jobs = [Job(i, "resnet50", 2, 1000, 1.0, 0.0) for i in range(3)]
    _, auto = run_engine(sc, jobs, make_policy("gandiva"))
    assert any(e["event"] == "timeshare" for e in auto.events)


def test_rates_form_is_deterministic_and_fast_on_a_trace_sized_run() -> None:
    """The same seed gives the same run; the rates form suspends a job only to give it free
    GPUs (at most once per time-sharing), never to switch turns."""
    sc = {**_contended(), "cluster": {"racks": 2, "machines_per_rack": 4, "gpus_per_machine": 8}}
    sc["workload"] = {"kind": "synthetic", "num_jobs": 200}
    a = simulate(sc, "gandiva", seed=2, record_events=True)
    b = simulate(sc, "gandiva", seed=2, record_events=True)
    assert a.events == b.events
    shared = sum(e["event"] == "timeshare" for e in a.events)
    assert shared > 0 and a.summary["preemptions"] <= shared


@pytest.mark.parametrize("scenario", ["dally-poisson-2rack", "dally-batch-2rack"])
def test_rates_form_runs_loaded_presets_to_the_end(scenario: str) -> None:
    """Loaded presets (many sets shared, GPUs freed and taken at the same instants as
    locality migrations): every run finishes its jobs, on several seeds."""
    sc = load_scenario(scenario).model_dump()
    sc["workload"]["num_jobs"] = 150
    for seed in (1, 2, 3):
        res = simulate(sc, "gandiva", seed=seed)
        assert res.summary["jobs_completed"] == 150


@needs_traces
def test_a_job_that_took_free_gpus_is_not_migrated_at_the_same_instant() -> None:
    """ITP cluster02, seed 3: at one instant a job of a shared set takes free GPUs and a
    locality migration follows; the job that moved is not moved again (its GPUs in the
    plan are the new ones), so the run finishes."""
    res = simulate("itp-cluster02", "gandiva", seed=3)
    assert res.summary["jobs_completed"] == res.summary["jobs_total"]
