"""Gandiva: time-slicing by suspend-resume in 60 s quanta at the paper's measured switch cost,
oversubscription of GPU sets by jobs of the same size, introspective unpacking on observed
progress, and ``gandiva-placement`` (the placement-and-migration behaviour alone).
Hand-computed traces on small clusters."""

from __future__ import annotations

import math
import re

import pytest
from conftest import run_engine, small_scenario, starts

from dlcluster_gym import (
    BaseScheduler,
    Migrate,
    Preempt,
    Start,
    WakeUp,
    load_scenario,
    simulate,
)
from dlcluster_gym.errors import ConfigError, InvalidActionError
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.workload.job import Job

OVERHEADS = {"checkpoint_s": 10.0, "restore_s": 20.0, "restart_s": 30.0}  # checkpoint+restore 30 s
NO_OVERHEADS = {"checkpoint_s": 0.0, "restore_s": 0.0, "restart_s": 0.0}
PLACEMENT_ONLY = {"max_share": 1, "unpack_slowdown": math.inf}
FREE_SWITCH = {"suspend_resume_s": 0.0}  # rotations by hand without a switch cost
QUANTA = {"timeslice": "quanta"}  # the discrete form (tests/test_gandiva_rates.py: the rates)


def _trace(res) -> list[tuple[float, str, int, list[int] | None]]:
    return [
        (round(e["t"], 6), e["event"], e["job"], e.get("gpus"))
        for e in res.events
        if e["event"] in ("start", "preempt", "finish", "migrate")
    ]


def _four_jobs_on_two_gpus(overheads: dict, **params):
    """2 GPUs, four 1-GPU jobs at t=0 of 100, 170, 90 and 200 one-second iterations (one GPU:
    no communication, so an iteration takes its compute time, 1 s)."""
    sc = small_scenario(racks=1, machines=1, gpus=2, overheads=overheads)
    lengths = (100, 170, 90, 200)
    jobs = [Job(i, "resnet50", 1, n, 1.0, 0.0) for i, n in enumerate(lengths)]
    return run_engine(sc, jobs, make_policy("gandiva", **QUANTA, **params))[1]


def test_round_robin_time_slicing_by_hand() -> None:
    """Jobs 0 and 1 take GPUs 0 and 1; jobs 2 and 3 time-share them (oversubscription, two jobs
    per GPU). Every 60 s quantum boundary the running job whose quantum is over yields to the
    other one. At 160 s job 0 finishes (60 + 40 s) and job 2 resumes on GPU 0; at 180 s job 1
    (120 done) yields to job 3; at 190 s job 2 finishes (60 + 30 s), GPU 0 is free and job 1,
    waiting its turn, takes it (50 s left: 240 s); job 3 runs alone from 180 s (140 s left).
    Switches cost nothing here."""
    res = _four_jobs_on_two_gpus(NO_OVERHEADS, **FREE_SWITCH)
    assert _trace(res) == [
        (0.0, "start", 0, [0]),
        (0.0, "start", 1, [1]),
        (60.0, "preempt", 0, None),
        (60.0, "start", 2, [0]),
        (60.0, "preempt", 1, None),
        (60.0, "start", 3, [1]),
        (120.0, "preempt", 2, None),
        (120.0, "start", 0, [0]),
        (120.0, "preempt", 3, None),
        (120.0, "start", 1, [1]),
        (160.0, "finish", 0, None),
        (160.0, "start", 2, [0]),
        (180.0, "preempt", 1, None),
        (180.0, "start", 3, [1]),
        (190.0, "finish", 2, None),
        (190.0, "start", 1, [0]),
        (240.0, "finish", 1, None),
        (320.0, "finish", 3, None),
    ]
    assert res.jobs["finish_s"].tolist() == [160.0, 240.0, 190.0, 320.0]
    # all four made progress before the first finish
    assert max(res.jobs["first_start_s"].tolist()) == 60.0 < min(res.jobs["finish_s"].tolist())
    assert res.jobs["preemptions"].tolist() == [1, 2, 1, 1]
    assert res.jobs["overhead_s"].tolist() == [0.0, 0.0, 0.0, 0.0]


def test_a_switch_costs_the_papers_suspend_resume_by_hand() -> None:
    """The same jobs with checkpoint 10 s + restore 20 s and the default switch cost: a ResNet-50
    job (image classification) resumed in place pays 0.1 s, within its 60 s slice. At 120 s
    jobs 0 and 1 resume (progress from 120.1 s); job 0 (40 s left) finishes at 160.1 s and job
    2 resumes in place (progress from 160.2 s, 30 s left: 190.2 s). At 180 s job 1 (119.9 s
    done) yields to job 3 (progress from 180.1 s, 140 s left: 320.1 s). At 190.2 s job 1 takes
    the freed GPU 0: not the GPU it left, so it pays checkpoint + restore, 30 s (progress from
    220.2 s, 50.1 s left: 270.3 s)."""
    res = _four_jobs_on_two_gpus(OVERHEADS)
    trace = _trace(res)
    assert [(t, ev, j) for t, ev, j, _ in trace] == [
        (0.0, "start", 0),
        (0.0, "start", 1),
        (60.0, "preempt", 0),
        (60.0, "start", 2),
        (60.0, "preempt", 1),
        (60.0, "start", 3),
        (120.0, "preempt", 2),
        (120.0, "start", 0),
        (120.0, "preempt", 3),
        (120.0, "start", 1),
        (160.1, "finish", 0),
        (160.1, "start", 2),
        (180.0, "preempt", 1),
        (180.0, "start", 3),
        (190.2, "finish", 2),
        (190.2, "start", 1),
        (270.3, "finish", 1),
        (320.1, "finish", 3),
    ]
    assert trace[-3][3] == [0]  # job 1 resumes on GPU 0, it left GPU 1
    assert res.jobs["finish_s"].tolist() == pytest.approx([160.1, 270.3, 190.2, 320.1])
    assert res.jobs["overhead_s"].tolist() == pytest.approx([0.1, 30.1, 0.1, 0.1])
    assert res.jobs["preemptions"].tolist() == [1, 2, 1, 1]
    assert {e.get("resume_in_place_s") for e in res.events if e["event"] == "preempt"} == {0.1}


def test_the_switch_cost_follows_the_model_family() -> None:
    """One GPU: a ResNet-50 job (image classification: 0.1 s) and a BERT-large job (a
    language model: 1 s) of 100 one-second iterations alternate. Job 0 resumes at 120 s
    (progress from 120.1 s, 40 s left: 160.1 s); job 1 resumes then (progress from 161.1 s,
    40 s left: 201.1 s). A number sets every job's cost: with 2 s, 162 s and 204 s."""
    sc = small_scenario(racks=1, machines=1, gpus=1, overheads=OVERHEADS)
    jobs = [Job(0, "resnet50", 1, 100, 1.0, 0.0), Job(1, "bert-large", 1, 100, 1.0, 0.0)]
    _, res = run_engine(sc, jobs, make_policy("gandiva", **QUANTA))
    assert res.jobs["finish_s"].tolist() == pytest.approx([160.1, 201.1])
    assert res.jobs["overhead_s"].tolist() == pytest.approx([0.1, 1.0])
    _, res = run_engine(sc, jobs, make_policy("gandiva", **QUANTA, suspend_resume_s=2))
    assert res.jobs["finish_s"].tolist() == pytest.approx([162.0, 204.0])
    assert res.jobs["overhead_s"].tolist() == pytest.approx([2.0, 2.0])


class _Scripted(BaseScheduler):
    """Applies a fixed script of actions at given instants."""

    name = "scripted"

    def __init__(self, script: dict) -> None:
        super().__init__()
        self.script = dict(script)

    def schedule(self, view):
        return self.script.pop(round(view.now, 6), ())


def test_a_suspend_in_place_is_cheap_only_on_the_same_gpus() -> None:
    """The engine's side of Gandiva's switch (``Preempt.resume_in_place_s``), with checkpoint
    10 s + restore 20 s. Jobs 0 and 1 (100 one-second iterations) run on GPUs 0 and 1 and are
    suspended in place at 10 s with a 2 s resume. At 20 s job 0 resumes on GPU 0 (2 s: progress
    from 22 s) and job 1 on GPU 2, not the GPU it left (30 s: progress from 50 s). At 40 s job
    0 migrates to GPU 1 and pays checkpoint + restore (28 done, progress from 70 s: 142 s). At
    60 s job 1 is preempted plainly and restarted on GPU 2 at once: checkpoint + restore again
    (20 done, progress from 90 s: 170 s)."""
    sc = small_scenario(racks=1, machines=1, gpus=3, overheads=OVERHEADS)
    jobs = [Job(i, "resnet50", 1, 100, 1.0, 0.0) for i in range(2)]
    script = {
        0.0: [Start(0, (0,)), Start(1, (1,)), WakeUp(10.0)],
        10.0: [Preempt(0, 2.0), Preempt(1, 2.0), WakeUp(20.0)],
        20.0: [Start(0, (0,)), Start(1, (2,)), WakeUp(40.0)],
        40.0: [Migrate(0, (1,)), WakeUp(60.0)],
        60.0: [Preempt(1), Start(1, (2,))],
    }
    _, res = run_engine(sc, jobs, _Scripted(script))
    assert res.jobs["finish_s"].tolist() == pytest.approx([142.0, 170.0])
    assert res.jobs["overhead_s"].tolist() == pytest.approx([32.0, 60.0])
    assert res.jobs["preemptions"].tolist() == [1, 2]
    assert res.jobs["migrations"].tolist() == [1, 0]
    for bad in (-1.0, math.nan, math.inf, "1"):
        script = {0.0: [Start(0, (0,)), WakeUp(5.0)], 5.0: [Preempt(0, bad)]}
        with pytest.raises(InvalidActionError, match="resume_in_place_s must be None or a finite"):
            run_engine(sc, jobs[:1], _Scripted(script))


def test_overheads_mode_pays_checkpoint_and_restore_per_switch() -> None:
    """``suspend_resume_s="overheads"`` (every switch priced as a migration):
    a suspended job resumes 30 s before it progresses, and its quantum of progress (60 s)
    follows, so it yields at the first boundary after: resumed at 120 s, jobs 0 and 1 progress
    from 150 s; job 0 finishes at 190 s (40 s left); job 2 resumes (progress from 220 s, 30 s
    left: 250 s); at 240 s job 1 (60 + 90 = 150 done) yields to job 3 (progress from 270 s,
    140 s left: 410 s); at 250 s job 1 takes the freed GPU 0 (progress from 280 s, 20 s left:
    300 s). Five switches, each 30 s of overhead: job 1 pays twice."""
    res = _four_jobs_on_two_gpus(OVERHEADS, suspend_resume_s="overheads")
    assert [(t, ev, j) for t, ev, j, _ in _trace(res)] == [
        (0.0, "start", 0),
        (0.0, "start", 1),
        (60.0, "preempt", 0),
        (60.0, "start", 2),
        (60.0, "preempt", 1),
        (60.0, "start", 3),
        (120.0, "preempt", 2),
        (120.0, "start", 0),
        (120.0, "preempt", 3),
        (120.0, "start", 1),
        (190.0, "finish", 0),
        (190.0, "start", 2),
        (240.0, "preempt", 1),
        (240.0, "start", 3),
        (250.0, "finish", 2),
        (250.0, "start", 1),
        (300.0, "finish", 1),
        (410.0, "finish", 3),
    ]
    assert res.jobs["finish_s"].tolist() == [190.0, 300.0, 250.0, 410.0]
    assert res.jobs["overhead_s"].tolist() == [30.0, 60.0, 30.0, 30.0]
    assert res.jobs["preemptions"].tolist() == [1, 2, 1, 1]
    # GPU time held = progress + overheads (job 1: 60 + 120 + 50 s)
    assert res.jobs["run_s"].tolist() == [130.0, 230.0, 120.0, 230.0]


def test_a_job_alone_is_never_suspended() -> None:
    sc = small_scenario(racks=1, machines=1, gpus=2, overheads=OVERHEADS)
    _, res = run_engine(
        sc, [Job(0, "resnet50", 1, 10_000, 1.0, 0.0)], make_policy("gandiva", **QUANTA)
    )
    assert res.summary["preemptions"] == 0
    assert res.jobs["finish_s"].tolist() == [10_000.0]
    # jobs that all fit never share either
    jobs = [Job(i, "resnet50", 1, 1000 * (i + 1), 1.0, 0.0) for i in range(2)]
    _, res = run_engine(sc, jobs, make_policy("gandiva", **QUANTA))
    assert res.summary["preemptions"] == 0
    assert res.jobs["finish_s"].tolist() == [1000.0, 2000.0]


def test_a_newcomer_gets_its_turn_at_the_next_quantum_boundary() -> None:
    """Job 0 has run alone since 0 s; job 1 arrives at 100 s and shares its GPU. Job 0's
    quantum ended at 60 s, so job 1 starts at the next boundary, 120 s, and they alternate
    (switches cost nothing here)."""
    sc = small_scenario(racks=1, machines=1, gpus=1, overheads=NO_OVERHEADS)
    jobs = [Job(0, "resnet50", 1, 1000, 1.0, 0.0), Job(1, "resnet50", 1, 90, 1.0, 100.0)]
    _, res = run_engine(sc, jobs, make_policy("gandiva", **QUANTA, **FREE_SWITCH))
    assert _trace(res)[:6] == [
        (0.0, "start", 0, [0]),
        (120.0, "preempt", 0, None),
        (120.0, "start", 1, [0]),
        (180.0, "preempt", 1, None),
        (180.0, "start", 0, [0]),
        (240.0, "preempt", 0, None),
    ]
    assert res.jobs["finish_s"].tolist() == [1090.0, 270.0]  # job 1: 60 + 30 s


@pytest.mark.parametrize(
    ("max_share", "finish", "start_2"),
    [(2, [160.0, 200.0, 250.0], 200.0), (3, [210.0, 250.0, 170.0], 120.0)],
)
def test_oversubscription_cap(max_share: int, finish: list[float], start_2: float) -> None:
    """One GPU, three jobs at 0 s (100, 100, 50 s). With two jobs per GPU set, job 2 waits in
    the queue: jobs 0 and 1 alternate, job 0 finishes at 160 s, job 2 joins job 1's set and
    gets the GPU when job 1 finishes (200 s). With three, the three alternate: job 2 runs from
    120 s (done at 170 s), then job 0 (40 s left: 210 s), then job 1 (40 s left: 250 s).
    Switches cost nothing here."""
    sc = small_scenario(racks=1, machines=1, gpus=1, overheads=NO_OVERHEADS)
    jobs = [Job(i, "resnet50", 1, n, 1.0, 0.0) for i, n in enumerate((100, 100, 50))]
    _, res = run_engine(
        sc, jobs, make_policy("gandiva", **QUANTA, max_share=max_share, **FREE_SWITCH)
    )
    assert res.jobs["finish_s"].tolist() == finish
    assert starts(res)[2][0] == start_2


def test_only_jobs_of_the_same_size_share_and_a_set_rotates_as_a_gang() -> None:
    """4 GPUs: two 2-GPU jobs hold them; a third 2-GPU job time-shares the first one's GPUs
    (it starts on exactly those GPUs), a 1-GPU job shares with nobody and waits for free
    GPUs."""
    sc = small_scenario(racks=1, machines=1, gpus=4, overheads=NO_OVERHEADS)
    jobs = [
        Job(0, "resnet50", 2, 10_000, 1.0, 0.0),
        Job(1, "resnet50", 2, 500, 1.0, 0.0),
        Job(2, "resnet50", 2, 300, 1.0, 0.0),
        Job(3, "resnet50", 1, 100, 1.0, 0.0),
    ]
    _, res = run_engine(sc, jobs, make_policy("gandiva", **QUANTA))
    trace = _trace(res)
    assert trace[:4] == [
        (0.0, "start", 0, [0, 1]),
        (0.0, "start", 1, [2, 3]),
        (60.0, "preempt", 0, None),
        (60.0, "start", 2, [0, 1]),
    ]
    # job 3 (1 GPU) starts only once a job has left and GPUs are free
    first_finish = min(res.jobs["finish_s"].tolist())
    assert starts(res)[3][0] >= first_finish
    assert res.jobs["preemptions"][3] == 0


def _contended_scenario():
    """5 machines x 4 GPUs with one 10 Gb/s NIC each, rounds every 25 s. Job 1 (8 GPUs, more
    than a machine: its tightest tier is the rack) spans machines 0-2 (GPUs 2-9); job 4
    arrives at 20 s and takes GPUs 0, 1 and 11, crossing the NICs of machines 0 and 2, which
    slows job 1 (its observed iteration time rises by half); machines 3 and 4 are free."""
    sc = load_scenario(
        {
            "name": "hand-made",
            "cluster": {
                "racks": 1, "machines_per_rack": 5, "gpus_per_machine": 4,
                "nics_per_machine": 1, "nic_gbps": 10,
            },
            "workload": {"kind": "synthetic", "num_jobs": 1},
            "round_period_s": 25.0,
        }
    )  # fmt: skip
    long = 10**5
    jobs = [
        Job(0, "vgg16", 2, 10, 1.0, 0.0),  # GPUs 0, 1 until about 10 s
        Job(1, "vgg16", 8, long, 1.0, 0.0),  # GPUs 2-9
        Job(2, "vgg16", 1, long, 1.0, 0.0),  # GPU 10
        Job(3, "vgg16", 1, 10, 1.0, 0.0),  # GPU 11 until 10 s
        Job(4, "vgg16", 3, long, 1.0, 20.0),  # GPUs 0, 1, 11
    ]
    return sc, jobs


def test_introspective_unpacking_moves_a_job_whose_observed_progress_dropped() -> None:
    sc, jobs = _contended_scenario()
    _, res = run_engine(sc, jobs, make_policy("gandiva", **QUANTA))
    moves = [(t, j, g) for t, ev, j, g in _trace(res) if ev == "migrate"]
    # job 1 moves to the two free machines at a round after job 4 slowed it (once the
    # saving over its estimated remaining work pays the move); it was at its tightest tier,
    # so locality migration would not have moved it
    t, job, gpus = moves[0]
    assert job == 1 and gpus == list(range(12, 20)) and 20.0 < t < 1000.0
    assert t % 25.0 == 0.0  # a round: no completion triggered it
    _, off = run_engine(sc, jobs, make_policy("gandiva", **QUANTA, unpack_slowdown=math.inf))
    assert all(j != 1 for _, ev, j, _ in _trace(off) if ev == "migrate")
    assert res.jobs["finish_s"][1] < off.jobs["finish_s"][1]


# gandiva-placement on dally-poisson-2rack seed 1 (recorded from its implementation)
PLACEMENT_SUMMARY = {
    "makespan_s": 4796294.586427137,
    "avg_jct_s": 190293.75882739387,
    "median_jct_s": 132024.32345536829,
    "p95_jct_s": 560065.797565179,
    "p99_jct_s": 1075881.0524231626,
    "avg_queue_s": 87866.84789695562,
    "p95_queue_s": 300207.12270354567,
    "p99_queue_s": 358498.1721883768,
    "avg_comm_s": 26099.62527250988,
    "avg_comm_overhead": 0.9051526020468716,
    "gpu_utilization": 0.6793642065017543,
    "throughput_jobs_per_h": 0.3002317672636299,
    "avg_contention_slowdown": 1.0,
    "jobs_total": 400,
    "jobs_completed": 400,
    "jobs_unfinished": 0,
    "jobs_dropped": 0,
    "preemptions": 0,
    "migrations": 96,
    "resizes": 0,
    "sim_events": 800,
}


def _summary(res) -> dict:
    return {k: v for k, v in res.summary.items() if k != "wall_s"}


def test_gandiva_placement_reproduces_its_recorded_run() -> None:
    got = _summary(simulate("dally-poisson-2rack", "gandiva-placement", seed=1))
    assert got.keys() == PLACEMENT_SUMMARY.keys()
    for key, want in PLACEMENT_SUMMARY.items():
        assert got[key] == pytest.approx(want, rel=1e-12), key
    # gandiva without oversubscription and unpacking makes the same decisions
    same = simulate("dally-poisson-2rack", "gandiva", seed=1, policy_params=PLACEMENT_ONLY)
    assert _summary(same) == got


def test_gandiva_placement_runs_jobs_to_completion() -> None:
    sc = small_scenario(racks=1, machines=1, gpus=2, overheads=NO_OVERHEADS)
    jobs = [Job(i, "resnet50", 1, n, 1.0, 0.0) for i, n in enumerate((100, 170, 90, 200))]
    _, res = run_engine(sc, jobs, make_policy("gandiva-placement"))
    assert res.summary["preemptions"] == 0
    assert res.jobs["finish_s"].tolist() == [100.0, 170.0, 190.0, 370.0]


def test_gandiva_is_deterministic_and_time_slices() -> None:
    sc = load_scenario("dally-batch-2rack").model_dump()
    sc["workload"]["num_jobs"] = 60
    a = simulate(sc, "gandiva", seed=2, record_events=True, policy_params=QUANTA)
    b = simulate(sc, "gandiva", seed=2, record_events=True, policy_params=QUANTA)
    assert _summary(a) == _summary(b)
    assert a.events == b.events
    assert a.summary["preemptions"] > 0 and a.summary["jobs_completed"] == 60
    assert make_policy("gandiva").params == {
        "migration": True, "remaining": "history", "quantum_s": 60.0, "max_share": 2,
        "unpack_slowdown": 1.2, "suspend_resume_s": "paper", "timeslice": "auto",
    }  # fmt: skip
    # the paper's switch is cheaper than checkpoint + restore: same jobs, less time
    old = simulate(sc, "gandiva", seed=2, policy_params={**QUANTA, "suspend_resume_s": "overheads"})
    assert old.summary["avg_jct_s"] > a.summary["avg_jct_s"]
    assert old.summary["jobs_completed"] == 60


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"quantum_s": 0.0}, "quantum_s must be a finite number of seconds > 0, got 0.0"),
        ({"quantum_s": math.inf}, "quantum_s must be a finite number of seconds > 0"),
        ({"max_share": 0}, "max_share must be an integer >= 1, got 0"),
        ({"unpack_slowdown": 0.5}, "unpack_slowdown must be a number >= 1"),
        ({"unpack_slowdown": math.nan}, "unpack_slowdown must be a number >= 1"),
        (
            {"suspend_resume_s": "cheap"},
            "'suspend_resume_s': Input should be a valid number, unable to parse string as a "
            "number, or Input should be 'paper' or 'overheads' (got 'cheap')",
        ),
        ({"suspend_resume_s": -0.5}, "or a finite number of seconds >= 0, got -0.5"),
        ({"suspend_resume_s": math.nan}, "or a finite number of seconds >= 0, got nan"),
        ({"suspend_resume_s": math.inf}, "or a finite number of seconds >= 0, got inf"),
        (
            {"suspend_resume_s": 60},
            "suspend_resume_s (60.0: up to 60 s per switch) must be shorter than quantum_s "
            "(60.0 s), else a time slice holds no progress",
        ),
        (
            {"quantum_s": 1.0},
            "suspend_resume_s ('paper': up to 1 s per switch) must be shorter than quantum_s",
        ),
    ],
)
def test_bad_parameters_are_clear_errors(params: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_policy("gandiva", **QUANTA, **params)


def test_the_class_checks_suspend_resume_itself() -> None:
    """Built directly (no parameter declaration in between), the class names what it allows."""
    from dlcluster_gym.baselines.gandiva import Gandiva

    want = (
        "suspend_resume_s must be 'paper' (the paper's measured suspend-resume per model "
        "family), 'overheads' (the scenario's checkpoint + restore) or a finite number of "
        "seconds >= 0, got 'cheap'"
    )
    with pytest.raises(ConfigError, match=re.escape(want)):
        Gandiva(suspend_resume_s="cheap")  # type: ignore[arg-type]
    assert Gandiva(suspend_resume_s=0).suspend_resume_s == 0.0
