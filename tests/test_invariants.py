"""Invariants on random workloads: checked by replaying the engine's event log."""

from __future__ import annotations

import numpy as np
from conftest import run_engine, small_scenario
from hypothesis import given, settings
from hypothesis import strategies as st

from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.models import DALLY_MODELS

job_st = st.tuples(
    st.sampled_from(DALLY_MODELS),
    st.sampled_from([1, 2, 3, 4, 8, 16]),
    st.integers(1, 500),  # iterations
    st.floats(0.01, 2.0),  # compute per iteration
    st.floats(0.0, 300.0),  # arrival
)


def make_jobs(specs) -> list[Job]:
    specs = sorted(specs, key=lambda s: s[4])
    return [Job(i, m, g, float(it), c, a) for i, (m, g, it, c, a) in enumerate(specs)]


def check_invariants(res, jobs: list[Job], num_gpus: int) -> None:
    owner: dict[int, int] = {}
    held: dict[int, list[int]] = {}
    finished: list[int] = []
    arrived: set[int] = set()
    for e in res.events:
        j = e.get("job")
        if e["event"] == "arrival":
            assert e["t"] == jobs[j].arrival_s
            arrived.add(j)
        elif e["event"] in ("start", "migrate", "resize"):
            assert j in arrived and e["t"] >= jobs[j].arrival_s  # no start before arrival
            for g in held.pop(j, []):
                del owner[g]
            for g in e["gpus"]:
                assert g not in owner, f"GPU {g} held by {owner.get(g)} and {j}"
                owner[g] = j
            held[j] = e["gpus"]
            assert len(owner) <= num_gpus
        elif e["event"] in ("finish", "preempt"):
            for g in held.pop(j):
                del owner[g]
            if e["event"] == "finish":
                finished.append(j)
    assert sorted(finished) == list(range(len(jobs)))  # each job finishes exactly once
    assert not owner
    ts = res.timeseries
    assert (ts["busy_gpus"] <= num_gpus).all() and (ts["busy_gpus"] >= 0).all()
    assert (np.diff(ts["t"]) > 0).all()
    assert (res.jobs["first_start_s"] >= res.jobs["arrival_s"]).all()
    assert (res.jobs["finish_s"] > res.jobs["first_start_s"]).all()
    assert (res.jobs["queue_s"] >= -1e-6).all()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(job_st, min_size=1, max_size=25),
    st.sampled_from(["fcfs", "random", "fcfs-consolidated"]),
    st.integers(0, 2**16),
)
def test_invariants_hold_on_random_workloads(specs, policy, seed):
    sc = small_scenario(racks=2, machines=2, gpus=4)
    jobs = make_jobs(specs)
    _, res = run_engine(sc, jobs, make_policy(policy), seed=seed)
    check_invariants(res, jobs, 16)
    _, again = run_engine(sc, jobs, make_policy(policy), seed=seed)
    assert again.events == res.events
    a, b = dict(res.summary), dict(again.summary)
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b or all(
        (x == y) or (x != x and y != y) for x, y in zip(a.values(), b.values(), strict=True)
    )


def test_remaining_jobs_series_counts_down_to_zero():
    sc = small_scenario()
    jobs = make_jobs([("vgg11", 2, 50, 1.0, 10.0 * i) for i in range(6)])
    _, res = run_engine(sc, jobs, make_policy("fcfs"))
    left = res.timeseries["remaining"]
    assert left[0] == 6 and left[-1] == 0 and (np.diff(left) <= 0).all()
