"""Gandiva: time-slicing by suspend-resume in 60 s quanta, oversubscription of GPU sets by jobs
of the same size, introspective unpacking on observed progress, and ``gandiva-placement`` (the
placement-and-migration behaviour alone). Hand-computed traces on small clusters."""

from __future__ import annotations

import math

import pytest
from conftest import run_engine, small_scenario, starts

from dlcluster_gym import load_scenario, simulate
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.workload.job import Job

OVERHEADS = {"checkpoint_s": 10.0, "restore_s": 20.0, "restart_s": 30.0}  # a switch: 30 s
NO_OVERHEADS = {"checkpoint_s": 0.0, "restore_s": 0.0, "restart_s": 0.0}
PLACEMENT_ONLY = {"max_share": 1, "unpack_slowdown": math.inf}


def _trace(res) -> list[tuple[float, str, int, list[int] | None]]:
    return [
        (round(e["t"], 6), e["event"], e["job"], e.get("gpus"))
        for e in res.events
        if e["event"] in ("start", "preempt", "finish", "migrate")
    ]


def _four_jobs_on_two_gpus(overheads: dict):
    """2 GPUs, four 1-GPU jobs at t=0 of 100, 170, 90 and 200 one-second iterations (one GPU:
    no communication, so an iteration takes its compute time, 1 s)."""
    sc = small_scenario(racks=1, machines=1, gpus=2, overheads=overheads)
    lengths = (100, 170, 90, 200)
    jobs = [Job(i, "resnet50", 1, n, 1.0, 0.0) for i, n in enumerate(lengths)]
    return run_engine(sc, jobs, make_policy("gandiva"))[1]


def test_round_robin_time_slicing_by_hand() -> None:
    """Jobs 0 and 1 take GPUs 0 and 1; jobs 2 and 3 time-share them (oversubscription, two jobs
    per GPU). Every 60 s quantum boundary the running job whose quantum is over yields to the
    other one. At 160 s job 0 finishes (60 + 40 s) and job 2 resumes on GPU 0; at 180 s job 1
    (120 done) yields to job 3; at 190 s job 2 finishes (60 + 30 s), GPU 0 is free and job 1,
    waiting its turn, takes it (50 s left: 240 s); job 3 runs alone from 180 s (140 s left)."""
    res = _four_jobs_on_two_gpus(NO_OVERHEADS)
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


def test_every_switch_pays_checkpoint_and_restore() -> None:
    """The same jobs with checkpoint 10 s + restore 20 s: a suspended job resumes 30 s before
    it progresses, and its quantum of progress (60 s) follows, so it yields at the first
    boundary after: resumed at 120 s, jobs 0 and 1 progress from 150 s; job 0 finishes at
    190 s (40 s left); job 2 resumes (progress from 220 s, 30 s left: 250 s); at 240 s job 1
    (60 + 90 = 150 done) yields to job 3 (progress from 270 s, 140 s left: 410 s); at 250 s
    job 1 takes the freed GPU 0 (progress from 280 s, 20 s left: 300 s). Five switches, each
    30 s of overhead: job 1 pays twice."""
    res = _four_jobs_on_two_gpus(OVERHEADS)
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
    _, res = run_engine(sc, [Job(0, "resnet50", 1, 10_000, 1.0, 0.0)], make_policy("gandiva"))
    assert res.summary["preemptions"] == 0
    assert res.jobs["finish_s"].tolist() == [10_000.0]
    # jobs that all fit never share either
    jobs = [Job(i, "resnet50", 1, 1000 * (i + 1), 1.0, 0.0) for i in range(2)]
    _, res = run_engine(sc, jobs, make_policy("gandiva"))
    assert res.summary["preemptions"] == 0
    assert res.jobs["finish_s"].tolist() == [1000.0, 2000.0]


def test_a_newcomer_gets_its_turn_at_the_next_quantum_boundary() -> None:
    """Job 0 has run alone since 0 s; job 1 arrives at 100 s and shares its GPU. Job 0's
    quantum ended at 60 s, so job 1 starts at the next boundary, 120 s, and they alternate."""
    sc = small_scenario(racks=1, machines=1, gpus=1, overheads=NO_OVERHEADS)
    jobs = [Job(0, "resnet50", 1, 1000, 1.0, 0.0), Job(1, "resnet50", 1, 90, 1.0, 100.0)]
    _, res = run_engine(sc, jobs, make_policy("gandiva"))
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
    120 s (done at 170 s), then job 0 (40 s left: 210 s), then job 1 (40 s left: 250 s)."""
    sc = small_scenario(racks=1, machines=1, gpus=1, overheads=NO_OVERHEADS)
    jobs = [Job(i, "resnet50", 1, n, 1.0, 0.0) for i, n in enumerate((100, 100, 50))]
    _, res = run_engine(sc, jobs, make_policy("gandiva", max_share=max_share))
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
    _, res = run_engine(sc, jobs, make_policy("gandiva"))
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
    _, res = run_engine(sc, jobs, make_policy("gandiva"))
    moves = [(t, j, g) for t, ev, j, g in _trace(res) if ev == "migrate"]
    # job 1 moves to the two free machines at a round after job 4 slowed it (once the
    # saving over its estimated remaining work pays the move); it was at its tightest tier,
    # so locality migration would not have moved it
    t, job, gpus = moves[0]
    assert job == 1 and gpus == list(range(12, 20)) and 20.0 < t < 1000.0
    assert t % 25.0 == 0.0  # a round: no completion triggered it
    _, off = run_engine(sc, jobs, make_policy("gandiva", unpack_slowdown=math.inf))
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
    a = simulate(sc, "gandiva", seed=2, record_events=True)
    b = simulate(sc, "gandiva", seed=2, record_events=True)
    assert _summary(a) == _summary(b)
    assert a.events == b.events
    assert a.summary["preemptions"] > 0 and a.summary["jobs_completed"] == 60
    assert make_policy("gandiva").params == {
        "migration": True, "remaining": "history", "quantum_s": 60.0, "max_share": 2,
        "unpack_slowdown": 1.2,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"quantum_s": 0.0}, "quantum_s must be a finite number of seconds > 0, got 0.0"),
        ({"quantum_s": math.inf}, "quantum_s must be a finite number of seconds > 0"),
        ({"max_share": 0}, "max_share must be an integer >= 1, got 0"),
        ({"unpack_slowdown": 0.5}, "unpack_slowdown must be a number >= 1"),
        ({"unpack_slowdown": math.nan}, "unpack_slowdown must be a number >= 1"),
    ],
)
def test_bad_parameters_are_clear_errors(params: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        make_policy("gandiva", **params)
