"""Themis's auction arbiter (``arbiter="auction"``, the default of ``themis``): the winning bids
maximize the summed finish-time-fairness improvement, the fairness knob filters the bidders,
partial allocation shortens the winners' leases, leftovers go to the filtered-out bidders;
and the greedy arbiter (``themis-greedy``) keeps its pinned results. The hand-computed auctions
bid for each job's demand only (``themis-demand``); tests/test_themis_workers.py has auctions
over bids for several worker counts (the default)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import run_engine, small_scenario, starts

from dlcluster_gym import simulate
from dlcluster_gym.baselines.themis import (
    Themis,
    ThemisGreedy,
    arbitrate,
    bidding_count,
    partial_fractions,
)
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import is_clairvoyant, make_policy
from dlcluster_gym.workload.job import Job

# Three bidders in rank order (worst rho first): (rho_before, [(GPUs, rho_after), ...]).
# Improvements rho_before - rho_after (exact binary fractions): A 1.0 for 4 GPUs; B 0.75 for
# 2; C 0.25 for 1, 0.625 for 2.
THREE = [
    (3.0, [(4, 2.0)]),  # A
    (2.5, [(2, 1.75)]),  # B
    (2.25, [(1, 2.0), (2, 1.625)]),  # C
]


def test_arbiter_maximizes_the_summed_improvement_where_rho_order_does_not():
    """4 free GPUs. Serving the worst rho first gives A all 4 (sum 1.0); the arbiter picks
    B on 2 and C on 2 (0.75 + 0.625 = 1.375), the best of {A} 1.0, {B, C:1} 1.0, {B, C:2}
    1.375, {B} 0.75, {C:2} 0.625."""
    assert arbitrate(THREE, 4) == [0, 2, 2]
    assert arbitrate(THREE, 3) == [0, 2, 1]  # B + C:1 (1.0) over B (0.75), C:2 (0.625)
    assert arbitrate(THREE, 5) == [0, 2, 2]  # B + C:2 (1.375) over A + C:1 (1.25)
    assert arbitrate(THREE, 6) == [4, 2, 0]  # A + B (1.75) over A + C:2 (1.625)
    assert arbitrate(THREE, 8) == [4, 2, 2]  # everyone on its best bid
    assert arbitrate(THREE, 0) == [0, 0, 0]
    assert arbitrate([], 4) == []


def test_arbiter_ties_keep_earlier_bidders_and_smaller_counts():
    same = [(2.0, [(2, 1.0)]), (2.0, [(2, 1.0)])]
    assert arbitrate(same, 2) == [2, 0]  # equal bids: the earlier (worse rho) bidder
    # one bidder's equal improvements for 1 and 3 GPUs: the smaller count
    assert arbitrate([(2.0, [(3, 1.5), (1, 1.5)])], 4) == [1]
    # no positive improvement never wins, even with GPUs to spare
    assert arbitrate([(1.0, [(1, 1.0)]), (1.0, [(1, 1.2)])], 4) == [0, 0]


def _brute_force(bidders, free):
    """The largest summed improvement over every choice of at most one bid per bidder."""
    choices = [[(0, 0.0)] + [(g, b - a) for g, a in t if b - a > 0] for b, t in bidders]
    best = 0.0
    for pick in itertools.product(*choices):
        if sum(g for g, _ in pick) <= free:
            best = max(best, sum(v for _, v in pick))
    return best


@pytest.mark.parametrize("seed", range(8))
def test_arbiter_is_exact_against_enumeration(seed):
    """Random bid tables (one count per bidder, where only the best ``free // count`` of a
    count enter, and several counts per bidder) against every combination."""
    rng = np.random.default_rng(seed)
    for single in (True, False):
        n, free = int(rng.integers(1, 7)), int(rng.integers(1, 10))
        bidders = []
        for _ in range(n):
            counts = (
                [int(rng.integers(1, 6))]
                if single
                else sorted({int(c) for c in rng.integers(1, 6, size=int(rng.integers(1, 4)))})
            )
            before = float(rng.uniform(1.0, 4.0))
            bidders.append((before, [(c, before - float(rng.uniform(-0.2, 1.5))) for c in counts]))
        won = arbitrate(bidders, free)
        assert sum(won) <= free
        got = sum(
            b - next(a for g, a in t if g == w) for (b, t), w in zip(bidders, won, strict=True) if w
        )
        assert got == pytest.approx(_brute_force(bidders, free), abs=1e-12)
        assert won == arbitrate(bidders, free)  # deterministic


def test_partial_allocation_is_the_hidden_payment_on_rho():
    """x = {B: 2, C: 2}. Without B the arbiter gives A its 4 GPUs: c_B = (rho_after_A /
    rho_before_A) x (rho_before_C / rho_after_C(2)) = (2 / 3) x (2.25 / 1.625) = 0.923;
    without C, A again: c_C = (2 / 3) x (2.5 / 1.75) = 0.952. A wins nothing: 1. When every
    bidder that could win wins, nobody pays."""
    won = arbitrate(THREE, 4)
    c = partial_fractions(THREE, 4, won)
    assert c == pytest.approx([1.0, (2 / 3) * (2.25 / 1.625), (2 / 3) * (2.5 / 1.75)])
    assert c[1] == pytest.approx(0.923077, abs=1e-6) and c[2] == pytest.approx(0.952381, abs=1e-6)
    assert partial_fractions(THREE, 8, arbitrate(THREE, 8)) == [1.0, 1.0, 1.0]
    # with 6 GPUs A and B win and C loses; without A, B + C:2 win, without B, A + C:2: each
    # time C would win 2 GPUs, so c_A = c_B = rho_after_C(2) / rho_before_C = 1.625 / 2.25
    assert partial_fractions(THREE, 6, arbitrate(THREE, 6)) == pytest.approx(
        [1.625 / 2.25, 1.625 / 2.25, 1.0]
    )
    # several counts per bidder: both win, but without the first the second would take 2
    # GPUs instead of 1, so the first pays rho_after(2) / rho_after(1) = 2.0 / 2.5
    two = [(3.0, [(2, 2.0)]), (3.0, [(1, 2.5), (2, 2.0)])]
    assert arbitrate(two, 3) == [2, 1]
    assert partial_fractions(two, 3, [2, 1]) == pytest.approx([0.8, 1.0])


@pytest.mark.parametrize(
    ("active", "knob", "want"),
    [(4, 0.2, 3), (5, 0.2, 4), (10, 0.2, 8), (10, 0.8, 2), (1, 0.2, 1), (3, 1.0, 1), (7, 0.0, 7)],
)
def test_fairness_knob_lets_the_worst_one_minus_f_bid(active, knob, want):
    assert bidding_count(active, knob) == want


def _four_jobs():
    """One machine of 4 GPUs. Job 0 (4 GPUs, long) runs from 0; jobs 1 (4 GPUs, 100
    iterations), 2 and 3 (2 GPUs, 300 iterations) arrive at 10, 20, 30 and wait."""
    sc = small_scenario(racks=1, machines=1, gpus=4)
    jobs = [
        Job(0, "resnet50", 4, 100_000, 1.0, 0.0),
        Job(1, "resnet50", 4, 100, 1.0, 10.0),
        Job(2, "resnet50", 2, 300, 1.0, 20.0),
        Job(3, "resnet50", 2, 300, 1.0, 30.0),
    ]
    return sc, jobs


def _started_at(res, t):
    return sorted(e["job"] for e in res.events if e["event"] == "start" and e["t"] == t)


def test_the_auction_and_the_greedy_arbiter_pick_different_winners():
    """At job 0's lease end (600 s) 4 jobs are active and 4 GPUs free; the fair share is one
    GPU, so T_ideal = iterations x demand: job 1 400 s, jobs 2 and 3 600 s. rho_after:
    job 1 (590 + 100) / 400 = 1.725 (the worst), job 2 (580 + 300) / 600 = 1.467, job 3
    (570 + 300) / 600 = 1.45, job 0 about 0.25. Improvements lease / T_ideal: job 1 1.5, jobs
    2 and 3 1.0 each. The knob (0.2) lets floor(0.8 x 4) = 3 bid: jobs 1, 2, 3. The arbiter
    takes jobs 2 + 3 (2.0 > 1.5); the greedy arbiter serves job 1 first."""
    sc, jobs = _four_jobs()
    policy = make_policy("themis-demand")
    _, res = run_engine(sc, jobs, policy)
    assert _started_at(res, 600.0) == [2, 3]
    assert ("preempt", 0) in [(e["event"], e.get("job")) for e in res.events if e["t"] == 600.0]
    # Partial allocation: without job 2, job 1 would win: c_2 = (1.725 / 3.225) x (2.45 /
    # 1.45) = 0.904, c_3 = 0.900; both hold their GPUs for about 540 s, not 600.
    assert policy.partial_leases == 2
    assert res.summary["jobs_completed"] == 4
    _, greedy = run_engine(sc, jobs, make_policy("themis-greedy"))
    assert _started_at(greedy, 600.0) == [1]
    assert starts(greedy)[2][0] == starts(greedy)[3][0] == pytest.approx(greedy.jobs["finish_s"][1])


def test_fairness_knob_filters_the_bidders():
    """The same jobs with ``fairness_knob=0.75``: floor(0.25 x 4) = 1 job may bid in the main
    round, the worst (job 1), and it wins the 4 GPUs: the greedy arbiter's outcome. Jobs 2
    and 3 get the leftovers: none."""
    sc, jobs = _four_jobs()
    _, res = run_engine(sc, jobs, make_policy("themis-demand", fairness_knob=0.75))
    assert _started_at(res, 600.0) == [1]


def test_leftovers_go_to_the_bidders_the_filter_left_out():
    """Job 0 (4 GPUs) runs; job 1 (2 GPUs, 100 iterations) and job 2 (2 GPUs, 2,000) wait.
    At 600 s with ``fairness_knob=0.75`` only job 1 (rho 690 / 150 = 4.6; job 2 0.86, job 0
    0.33) bids in the main round and wins 2 GPUs; the leftover round offers the other 2 to
    the rest (job 2 and the expired job 0, whose 4 do not fit): job 2 starts too."""
    sc = small_scenario(racks=1, machines=1, gpus=4)
    jobs = [
        Job(0, "resnet50", 4, 100_000, 1.0, 0.0),
        Job(1, "resnet50", 2, 100, 1.0, 10.0),
        Job(2, "resnet50", 2, 2_000, 1.0, 20.0),
    ]
    _, res = run_engine(sc, jobs, make_policy("themis-demand", fairness_knob=0.75))
    assert _started_at(res, 600.0) == [1, 2]


def test_partial_allocation_gives_the_withheld_lease_to_the_displaced_job():
    """Job 0 (4 GPUs) runs; job 1 (2 GPUs, 3,000 iterations) and jobs 2 and 3 (2 GPUs, 600)
    wait. At 600 s (fair share one GPU): T_ideal 6,000 s for job 1, 1,200 s for jobs 2 and 3;
    rho_after 3,590 / 6,000, 1,180 / 1,200, 1,170 / 1,200; improvements 0.1, 0.5, 0.5. Jobs 2
    + 3 win (1.0 over 0.6). Without job 2 (or 3) job 1 would win: c = rho_after_1 /
    rho_before_1 = 3,590 / (3,590 + 600), so jobs 2 and 3 hold their GPUs 514 s, then bid
    last: job 1 takes two of the GPUs at 1,114 s, before jobs 2 and 3 finish. Without
    partial allocation job 1 waits for them to finish."""
    sc = small_scenario(racks=1, machines=1, gpus=4)
    jobs = [
        Job(0, "resnet50", 4, 100_000, 1.0, 0.0),
        Job(1, "resnet50", 2, 3_000, 1.0, 10.0),
        Job(2, "resnet50", 2, 600, 1.0, 20.0),
        Job(3, "resnet50", 2, 600, 1.0, 30.0),
    ]
    _, res = run_engine(sc, jobs, make_policy("themis-demand"))
    assert _started_at(res, 600.0) == [2, 3]
    t = 600.0 + 600.0 * 3590.0 / 4190.0
    assert starts(res)[1][0] == pytest.approx(t)
    assert starts(res)[1][0] < min(res.jobs["finish_s"][2], res.jobs["finish_s"][3])
    assert res.jobs["preemptions"][2] + res.jobs["preemptions"][3] == 1  # one paid with GPUs
    _, full = run_engine(sc, jobs, make_policy("themis-demand", partial_allocation=False))
    assert starts(full)[1][0] == pytest.approx(full.jobs["finish_s"][2])


def test_a_lone_bidder_renews_without_partial_allocation():
    """No contention: every lease end is a renewal on the same GPUs, no lease is shortened."""
    sc = small_scenario(racks=1, machines=2, gpus=4)
    jobs = [Job(0, "resnet50", 3, 2_000, 1.0, 0.0), Job(1, "resnet50", 2, 2_000, 1.0, 100.0)]
    policy = make_policy("themis")
    _, res = run_engine(sc, jobs, policy)
    assert res.summary["preemptions"] == 0
    assert policy.renewals >= 4 and policy.partial_leases == 0
    assert policy.auction_times[:4] == pytest.approx([600.0, 700.0, 1200.0, 1300.0])


def _short(name: str, n: int = 60) -> dict:
    from dlcluster_gym import load_scenario

    sc = load_scenario(name).model_dump()
    sc["workload"]["num_jobs"] = n
    return sc


@pytest.mark.parametrize("scenario", ["cassini-testbed-poisson", "cassini-testbed-poisson-mp"])
def test_th_cassini_with_the_auction_arbiter_finishes_and_is_deterministic(scenario):
    sc = _short(scenario)
    a = simulate(sc, "cassini", seed=4)
    b = simulate(sc, "cassini", seed=4)
    assert a.summary["jobs_completed"] == 60
    assert a.jobs["finish_s"].tolist() == b.jobs["finish_s"].tolist()
    t = simulate(sc, "themis", seed=4)
    assert t.summary["jobs_completed"] == 60
    assert t.summary["preemptions"] > 0  # contested auctions on the testbed


def test_greedy_variant_keeps_its_results():
    """``themis-greedy`` (and ``themis`` with ``arbiter="greedy"``): pinned results on seed 1
    of ``cassini-testbed-poisson``, bit for bit, alone and as Cassini's base."""
    a = simulate("cassini-testbed-poisson", "themis-greedy", seed=1)
    assert a.summary["avg_jct_s"] == 821.8391592184751
    assert a.summary["p99_jct_s"] == 7625.517234279543
    assert a.summary["makespan_s"] == 27775.106840329045
    b = simulate("cassini-testbed-poisson", "themis", seed=1, policy_params={"arbiter": "greedy"})
    assert a.jobs["finish_s"].tolist() == b.jobs["finish_s"].tolist()
    c = simulate(
        "cassini-testbed-poisson", "cassini", seed=1, policy_params={"base": "themis-greedy"}
    )
    assert c.summary["avg_jct_s"] == 655.6928615316938


@pytest.mark.parametrize("policy", ["themis-greedy", "themis"])
def test_fast_paths_match_the_general_loop(policy):
    """Both arbiters: the shortcuts (deferred renewals, the greedy's fitting-bidder ranking)
    give the general loop's per-job results."""
    from dlcluster_gym.api import prepare
    from dlcluster_gym.sim.engine import Engine

    out = []
    for fast in (True, False):
        cfg, cluster, jobs, rng = prepare("cassini-testbed-poisson")
        pol = make_policy(policy)
        pol.fast_paths = fast
        out.append(Engine(cfg, cluster, jobs, pol, rng).run())
    for key, col in out[0].jobs.items():
        np.testing.assert_array_equal(col, out[1].jobs[key], err_msg=key)


def test_clairvoyance_is_the_lengths_choice_for_both_arbiters():
    for name in ("themis", "themis-greedy"):
        assert is_clairvoyant(make_policy(name))
        assert not is_clairvoyant(make_policy(name, lengths="history"))
    assert isinstance(make_policy("themis-greedy"), ThemisGreedy)
    assert make_policy("themis-greedy").params == {
        "lease_s": 600.0,
        "auction": "reauction",
        "placement": "penalty",
        "cross_rack_slowdown": 1.5,
        "lengths": "known",
    }


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"arbiter": "best"}, "arbiter must be one of auction, greedy, got 'best'"),
        ({"fairness_knob": 1.5}, r"fairness_knob must be a number in \[0, 1\].*got 1.5"),
        ({"fairness_knob": -0.1}, r"fairness_knob must be a number in \[0, 1\].*got -0.1"),
        ({"fairness_knob": float("nan")}, r"fairness_knob must be a number in \[0, 1\].*nan"),
        (
            {"auction": "renew"},
            "arbiter 'auction' needs auction='reauction'.*arbiter='greedy'",
        ),
    ],
)
def test_bad_arbiter_parameters(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        make_policy("themis", **kwargs)


def test_bad_arbiter_parameter_types_in_the_constructor():
    with pytest.raises(ConfigError, match="partial_allocation must be true or false, got 'yes'"):
        Themis(partial_allocation="yes")
    with pytest.raises(ConfigError, match=r"fairness_knob must be a number in \[0, 1\]"):
        Themis(fairness_knob=True)
    # the renew epochs run with the greedy arbiter
    assert make_policy("themis", auction="renew", arbiter="greedy").arbiter == "greedy"
    assert make_policy("themis-greedy", auction="renew").arbiter == "greedy"
