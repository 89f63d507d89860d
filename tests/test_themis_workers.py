"""Themis with worker counts tuned by finish-time fairness (``workers="tuned"``): hand-computed
auctions on one 8-GPU machine with no communication cost."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_engine, small_scenario, starts

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.workload.job import Job


def _scenario():
    return small_scenario(
        racks=1,
        machines=1,
        gpus=8,
        network="ideal",
        overheads={"checkpoint_s": 10.0, "restore_s": 20.0, "restart_s": 30.0},
    )


def _events(res, job):
    return [(e["event"], round(e["t"], 9), len(e.get("gpus", ()))) for e in res.events
            if e.get("job") == job and e["event"] != "arrival"]  # fmt: skip


def test_a_waiting_job_near_its_end_starts_now_on_fewer_gpus():
    """Job 0 holds 6 of 8 GPUs until its lease ends at 600 s; job 1 (4 GPUs, 100 iterations
    of 1 s) arrives at 10 s. Two jobs share the cluster: fair share 4 GPUs, job 1's T_ideal =
    100 s, its rho now (10 - 10 + 100) / 100 = 1; it is the worse of the two (job 0's is
    (10 + 99,990) / 150,000), so it is the one bidder (fairness knob 0.2: floor(0.8 x 2)).
    On 2 GPUs its iterations take 1 x 4 / 2 = 2 s: rho_after(2) = 1 + 1 x (4/2 - 1) = 2,
    rho_after(1) = 4; without GPUs it waits one lease: rho_before = 1 + 600 / 100 = 7. The
    arbiter takes the largest improvement, 2 GPUs (7 - 2 = 5), and job 1 ends at 10 + 200 s.
    With bids for the demand only it waits for job 0's lease end."""
    jobs = [Job(0, "resnet50", 6, 100_000, 1.0, 0.0), Job(1, "resnet50", 4, 100, 1.0, 10.0)]
    _, res = run_engine(_scenario(), jobs, make_policy("themis"))
    assert _events(res, 1) == [("start", 10.0, 2), ("finish", 210.0, 0)]
    assert res.jobs["compute_s"][1] == pytest.approx(200.0)
    _, fixed = run_engine(_scenario(), jobs, make_policy("themis-demand"))
    assert _events(fixed, 1)[0] == ("start", 600.0, 4)


def test_a_long_job_does_not_shrink_it_waits_for_its_demand():
    """The same with 1,000 iterations: T_ideal = 1,000 s, rho 1, rho_after(2) = 1 + 1 x 1 = 2
    is worse than waiting a lease, rho_before = 1 + 600 / 1,000 = 1.6; no bid improves, so
    job 1 waits for job 0's lease end and then wins its demand, as with fixed counts."""
    jobs = [Job(0, "resnet50", 6, 100_000, 1.0, 0.0), Job(1, "resnet50", 4, 1_000, 1.0, 10.0)]
    _, res = run_engine(_scenario(), jobs, make_policy("themis"))
    assert _events(res, 1)[0] == ("start", 600.0, 4)
    _, fixed = run_engine(_scenario(), jobs, make_policy("themis-demand"))
    assert _events(fixed, 1)[0] == ("start", 600.0, 4)


def test_a_job_on_fewer_gpus_grows_to_its_demand_at_its_lease_end():
    """Job 1 (500 iterations) starts at 10 s on 2 GPUs: rho 1, rho_after(2) = 2, rho_before
    = 1 + 600 / 500 = 2.2. Job 0 (605 iterations) renews at 600 s and ends at 605 s. At
    job 1's lease end (610 s) it has done 300 iterations and is alone: fair share 8, T_ideal
    500 s, rho = (600 + 200 x 2) / 500 = 2; the remaining work at its demand over T_ideal is
    200 / 500 = 0.4, so rho_after(4) = 2 + 0.4 x (1 - 2) = 1.6, rho_after(2) = 2,
    rho_after(1) = 2.8, rho_before = 1.6 + 600 / 500 = 2.8: it wins 4 GPUs. The new worker
    count is a restart from its checkpoint (10 + 20 s): the remaining 200 iterations at 1 s
    end at 610 + 30 + 200 = 840 s."""
    jobs = [Job(0, "resnet50", 6, 605, 1.0, 0.0), Job(1, "resnet50", 4, 500, 1.0, 10.0)]
    policy = make_policy("themis")
    _, res = run_engine(_scenario(), jobs, policy)
    assert _events(res, 0) == [("start", 0.0, 6), ("finish", 605.0, 0)]
    assert _events(res, 1) == [
        ("start", 10.0, 2),
        ("preempt", 610.0, 0),
        ("start", 610.0, 4),
        ("finish", 840.0, 0),
    ]
    assert policy.renewals == 1  # job 0 at 600 s; job 1 changed its count


def test_model_parallel_jobs_bid_for_their_demand_only():
    """A model-parallel job (gpt3: partitions that need its GPUs' memory) bids for its demand
    alone: in the first case it waits for the lease end."""
    jobs = [Job(0, "resnet50", 6, 100_000, 1.0, 0.0), Job(1, "gpt3", 4, 100, 1.0, 10.0)]
    policy = make_policy("themis")
    _, res = run_engine(_scenario(), jobs, policy)
    assert _events(res, 1)[0] == ("start", 600.0, 4)
    assert policy._bid_counts(None, 1) == (4,)
    policy._tunable[5] = True  # a data-parallel job of demand 12 (decided on its first bid)
    policy._demand = [0, 0, 0, 0, 0, 12]
    assert policy._bid_counts(None, 5) == (1, 2, 4, 8, 12)


def test_cassini_over_themis_starts_jobs_on_fewer_gpus():
    """Th+Cassini passes its base's elastic starts to the engine."""
    assert make_policy("cassini").elastic_gpu_jobs
    assert not make_policy("cassini-demand").elastic_gpu_jobs
    jobs = [Job(0, "resnet50", 6, 100_000, 1.0, 0.0), Job(1, "resnet50", 4, 100, 1.0, 10.0)]
    _, res = run_engine(_scenario(), jobs, make_policy("cassini"))
    assert starts(res)[1][0] == 10.0 and len(starts(res)[1][1]) == 2


def test_tuned_workers_are_the_default_and_need_the_auction_arbiter():
    with pytest.raises(ConfigError, match="workers must be one of demand, tuned, got 'all'"):
        make_policy("themis", workers="all")
    with pytest.raises(ConfigError, match="workers='tuned' needs arbiter='auction'"):
        make_policy("themis", workers="tuned", arbiter="greedy")
    assert make_policy("themis").params["workers"] == "tuned"
    assert not make_policy("themis-demand").tuned
    assert not make_policy("themis-demand").elastic_gpu_jobs
    # the greedy arbiter cannot choose among counts: its default is the demand
    assert make_policy("themis", arbiter="greedy").params["workers"] == "demand"
    assert make_policy("themis").params["lengths"] == "known"
    assert make_policy("themis").clairvoyant
    assert not make_policy("themis", lengths="history").clairvoyant


def _bid_tables_both_ways(rng, n: int, free: int, dem=None):
    """(one bidder at a time, array form) of ``_count_bids`` on random bidders."""
    pol = make_policy("themis")
    n_run = int(rng.integers(0, n + 1))
    if dem is None:
        dem = rng.choice([1, 2, 3, 4, 5, 8, 16], size=n)
    dem = np.asarray(dem, dtype=np.int64)
    ids = rng.permutation(50)[:n].astype(np.int64)
    pol._count = np.zeros(50, dtype=np.int64)
    pol._count[ids] = np.maximum(1, dem // rng.choice([1, 2, 4], size=n))
    smallest = np.where(rng.random(n) < 0.8, 1, dem)  # 1: a tunable job
    min_by_job = dict(zip(ids.tolist(), smallest.tolist(), strict=True))
    pol._min_counts = lambda view, jobs: np.array([min_by_job[j] for j in jobs.tolist()])
    rho = rng.uniform(0.5, 3.0, size=n)
    ideal = rng.uniform(600.0, 1e5, size=n)
    share = rng.uniform(0.0, 2.0, size=n)
    group = sorted(rng.permutation(n)[: int(rng.integers(1, n + 1))].tolist())
    args = (None, group, ids, dem, rho, ideal, share, n_run, free)
    scalar = pol._count_bids(*args)  # fast paths: one bidder at a time (up to 16 bidders)
    pol.fast_paths = False  # the array form
    return scalar, pol._count_bids(*args)


@pytest.mark.parametrize("seed", range(40))
def test_bid_tables_one_bidder_at_a_time_equal_the_array_form(seed):
    """``bid_tables_scalar`` (the fast path of rounds of up to 16 bidders) gives
    ``_count_bids``'s array answer bit for bit."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 17))
    scalar, array = _bid_tables_both_ways(rng, n, free=int(rng.integers(1, 20)))
    assert scalar == array


def test_bid_tables_prune_the_same_bids_per_count():
    """Many one-GPU bidders for one free GPU: only the best ``free - 1 + 2`` bids of count 1
    enter, the same ones both ways."""
    scalar, array = _bid_tables_both_ways(np.random.default_rng(7), 12, free=1, dem=[1] * 12)
    assert scalar == array
    assert 0 < len(array[0]) <= 2
