"""Tiresias as its paper describes it: two queues (MLFQ demotion only), thresholds from the
cluster's history (one queue before any job finishes), PROMOTEKNOB counting every wait since
the last promotion, the skew rule on every (re)start."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_engine, small_scenario, starts

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.workload.job import Job

LONG = 10**6


def _events(res) -> list[tuple[str, int | None, float]]:
    return [(e["event"], e.get("job"), round(e["t"], 6)) for e in res.events]


def test_defaults_are_two_queues_history_thresholds_and_knob_2():
    p = make_policy("tiresias")
    assert p.threshold_rule == "history" and p.num_queues == 2
    assert p.promote_knob == 2.0 and p.promote_wait == "total" and not p.clairvoyant
    assert p.thresholds.size == 0  # no history yet: one queue


def test_history_has_one_queue_until_the_first_job_finishes():
    """Before any job finishes nobody is demoted, so nobody is preempted; the first finish
    sets the threshold to 3250 GPU-s x its ideal service / 243 GPU-s."""
    sc = small_scenario(racks=1, machines=1, gpus=4)
    jobs = [
        Job(0, "resnet50", 4, 5000, 1.0, 0.0),  # 20,000 GPU-s ideal: fixed 3250 would demote it
        Job(1, "resnet50", 4, 100, 1.0, 10.0),
        Job(2, "resnet50", 1, 30, 1.0, 20.0),
    ]
    policy = make_policy("tiresias", promote_knob=0)
    _, res = run_engine(sc, jobs, policy)
    assert res.summary["preemptions"] == 0
    # FIFO: job 1 waits for job 0, job 2 for job 1 (no free GPU while job 0 runs).
    assert starts(res)[1][0] == pytest.approx(res.jobs["finish_s"][0])
    # After every job finished: the median ideal service (30, 400, 20,000 -> 400) sets it.
    assert policy.thresholds.tolist() == pytest.approx([3250.0 * 400 / 243])
    # The same jobs with the authors' fixed limit: job 0 is demoted and preempted by job 1.
    _, fixed = run_engine(sc, jobs, make_policy("tiresias", thresholds="fixed", promote_knob=0))
    assert ("preempt", 0, round(3250.0 / 4, 6)) in _events(fixed)


def test_two_queues_preempt_each_job_at_most_once_on_a_batch():
    """Three 4-GPU jobs at t=0 on one 4-GPU machine, threshold 400 GPU-s (100 s each): job 0
    is demoted at 100 s and preempted by job 1, job 1 at 200 s by job 2; job 2, demoted at
    300 s, has nobody above it, and jobs of one queue do not preempt each other. A third
    queue (800 GPU-s) demotes and preempts again."""
    sc = small_scenario(racks=1, machines=1, gpus=4)
    jobs = [Job(i, "resnet50", 4, 1000, 1.0, 0.0) for i in range(3)]
    _, two = run_engine(sc, jobs, make_policy("tiresias", thresholds=[400.0], promote_knob=0))
    assert two.jobs["preemptions"].tolist() == [1, 1, 0]
    trace = _events(two)
    assert ("preempt", 0, 100.0) in trace and ("preempt", 1, 200.0) in trace
    _, three = run_engine(
        sc, jobs, make_policy("tiresias", thresholds=[400.0, 800.0], promote_knob=0)
    )
    assert three.jobs["preemptions"].max() == 2
    assert three.summary["preemptions"] > two.summary["preemptions"]


def test_a_demoted_job_stays_demoted_when_the_learnt_thresholds_rise():
    """MLFQ: with ``history`` a job's queue only goes down (until a promotion); ``online``
    recomputes queues from the current thresholds, so a demoted job climbs back when they
    rise. Two GPUs, no overheads: job 0 (10 GPU-s) finishes at 10 s and sets the threshold
    to 3250 x 10 / 243 = 133.7 GPU-s; job 1 crosses it and is preempted by job 3 at 140 s;
    job 2 (200 GPU-s) finishes at 210 s and raises it to 3250 x 105 / 243 = 1,404 GPU-s; job
    1 (140 GPU-s) resumes. Job 4 arrives at 300 s: job 1 is still in the low queue under
    ``history`` and is preempted; under ``online`` it is back in the top queue and keeps its
    GPU."""
    sc = small_scenario(
        racks=1, machines=1, gpus=2, overheads={"checkpoint_s": 0.0, "restore_s": 0.0}
    )
    jobs = [
        Job(0, "vgg11", 1, 10, 1.0, 0.0),
        Job(1, "vgg11", 1, 1000, 1.0, 0.0),
        Job(2, "vgg11", 1, 200, 1.0, 5.0),
        Job(3, "vgg11", 1, 1000, 1.0, 140.0),
        Job(4, "vgg11", 1, 100, 1.0, 300.0),
    ]
    _, hist = run_engine(sc, jobs, make_policy("tiresias", promote_knob=0))
    assert ("preempt", 1, 140.0) in _events(hist) and ("preempt", 1, 300.0) in _events(hist)
    online = make_policy("tiresias", thresholds="online", promote_knob=0)
    _, onl = run_engine(sc, jobs, online)
    assert ("preempt", 1, 140.0) in _events(onl)
    assert ("preempt", 1, 300.0) not in _events(onl)


@pytest.mark.parametrize(("wait", "promoted_at"), [("total", 400.0), ("last", 490.0)])
def test_promote_knob_counts_every_wait_since_the_last_promotion(wait, promoted_at):
    """One GPU, threshold 100 GPU-s, knob 1.5. Job A runs 0-100 s, is demoted and preempted by
    B (arrived at 50 s), waits 100-190 s (90 s < 1.5 x 100 s), runs again 190-250 s (160 s
    executed), and is preempted by C, which is demoted at 350 s. The paper's rule promotes A
    when all its waiting (90 s + the current wait) reaches 1.5 x 160 = 240 s, at 400 s; the
    current wait alone reaches it at 490 s. Promoted, A preempts C."""
    sc = small_scenario(
        racks=1, machines=1, gpus=1, overheads={"checkpoint_s": 0.0, "restore_s": 0.0}
    )
    jobs = [
        Job(0, "vgg11", 1, 200, 1.0, 0.0),  # A: 160 iterations done by 250 s
        Job(1, "vgg11", 1, 90, 1.0, 50.0),  # B
        Job(2, "vgg11", 1, 300, 1.0, 250.0),  # C
    ]
    policy = make_policy("tiresias", thresholds=[100.0], promote_knob=1.5, promote_wait=wait)
    _, res = run_engine(sc, jobs, policy)
    trace = _events(res)
    assert ("preempt", 0, 100.0) in trace and ("preempt", 0, 250.0) in trace
    assert ("preempt", 2, promoted_at) in trace
    assert policy.promotions == 1


def _resume_case(model_a: str):
    """A (4 GPUs, ``model_a``) runs on machine 0 and is preempted at 150 s by B (2 GPUs),
    which B packs onto machine 0; E (2 GPUs on machine 1) finishes at about 180 s, leaving 2
    free GPUs on each machine while B still runs."""
    sc = small_scenario(racks=1, machines=2, gpus=4)
    jobs = [
        Job(0, model_a, 4, LONG, 1.0, 0.0),
        Job(1, "resnet50", 2, 3 * LONG, 1.0, 0.0),  # D: machine 1, whole run
        Job(2, "resnet50", 2, 170, 1.0, 0.0),  # E: machine 1, finishes first
        Job(3, "resnet50", 2, 100, 1.0, 150.0),  # B: preempts A (queue 1 since 100 s)
    ]
    return run_engine(sc, jobs, make_policy("tiresias", thresholds=[400.0], promote_knob=0))[1]


def test_a_preempted_high_skew_job_resumes_consolidated():
    """The placement rule holds when a job resumes (Tiresias 3.1): preempted high-skew A waits
    for a whole machine (B's finish) rather than take the 2 + 2 free GPUs at E's finish; a
    low-skew job in its place resumes at once on them."""
    res = _resume_case("vgg11")
    assert ("preempt", 0, 150.0) in _events(res)
    t, gpus, tier = starts(res)[0]
    assert t == pytest.approx(res.jobs["finish_s"][3]) and tier == "machine"
    assert len({g // 4 for g in gpus}) == 1
    low = _resume_case("resnet18")
    t, gpus, tier = starts(low)[0]
    assert t == pytest.approx(low.jobs["finish_s"][2]) and tier == "rack"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"promote_wait": "since"}, "promote_wait must be one of total, last, got 'since'"),
        ({"num_queues": 5}, r"num_queues must be at most 4 with thresholds='history'"),
        ({"num_queues": 5, "thresholds": "fixed"}, r"at most 4 with thresholds='fixed'"),
        ({"thresholds": "nosuch"}, "thresholds must be one of history, online, fixed, scaled"),
    ],
)
def test_bad_parameters_name_the_parameter_value_and_what_is_allowed(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        make_policy("tiresias", **kwargs)


def test_num_queues_selects_the_authors_limits_and_quantiles_allow_more():
    assert make_policy("tiresias", thresholds="fixed").thresholds.tolist() == [3250.0]
    assert make_policy("tiresias", thresholds="fixed", num_queues=4).thresholds.tolist() == [
        3250.0,
        7200.0,
        18000.0,
    ]
    assert make_policy("tiresias", thresholds="quantiles", num_queues=10).num_queues == 10
    assert make_policy("tiresias", thresholds=[1.0, 2.0, 3.0]).num_queues == 4


def test_batch_preset_preempts_at_most_1_5_times_per_job_and_is_deterministic():
    from dlcluster_gym import load_scenario, simulate

    sc = load_scenario("dally-batch-2rack").model_dump()
    sc["workload"]["num_jobs"] = 150
    a = simulate(sc, "tiresias", seed=7).summary
    b = simulate(sc, "tiresias", seed=7).summary
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b
    assert a["jobs_unfinished"] == 0
    assert a["preemptions"] / a["jobs_total"] <= 1.5
    old = simulate(
        sc,
        "tiresias",
        seed=7,
        policy_params={"thresholds": "online", "num_queues": 3, "promote_wait": "last"},
    ).summary
    assert old["preemptions"] > a["preemptions"]


def test_previous_rule_stays_reachable():
    """``thresholds="online", num_queues=3, promote_wait="last"``: the authors' two limits
    before the first finish, queues recomputed from the current thresholds."""
    p = make_policy("tiresias", thresholds="online", num_queues=3, promote_wait="last")
    assert p.thresholds.tolist() == [3250.0, 7200.0]
    assert np.array_equal(p.queues(np.array([0.0, 3250.0, 8000.0])), [0, 1, 2])
