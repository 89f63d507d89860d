"""Cassini's candidates move incumbents (Cassini thesis 4.4.2 step 1): a hand-made workload in
which the chosen candidate swaps the new job with a running one; ``candidates="new-only"``
keeps the earlier behaviour (only the new job's own placements)."""

from __future__ import annotations

import pytest
from conftest import run_engine, small_scenario

from dlcluster_gym import BaseScheduler, Start
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.workload.job import Job

GPUS = {0: (0, 2), 1: (4, 6), 2: (3,), 3: (5,), 4: (7,), 5: (8,), 6: (10, 11), 7: (1, 9)}


class FixedBase(BaseScheduler):
    """Starts each job on fixed GPUs (machine m holds GPUs 2m, 2m+1): A (0, 2) on machines
    0+1, B (4, 6) on machines 2+3, fillers that cross no NIC, and the new job C on the two
    GPUs left, (1, 9): machines 0 and 4, so it shares machine 0's NIC with A."""

    name = "fixed"

    def schedule(self, view):
        return [Start(j, GPUS[j]) for j in view.waiting() if j in GPUS]


def scenario():
    # 1 rack x 6 machines x 2 GPUs, one 60 Gb/s NIC per machine: two 50 Gb/s flows
    # over-subscribe a NIC.
    return small_scenario(
        racks=1,
        machines=6,
        gpus=2,
        contention=True,
        cluster={
            "racks": 1,
            "machines_per_rack": 6,
            "gpus_per_machine": 2,
            "tiers": {"machine": "nvlink", "rack": "eth-50", "network": "eth-50"},
            "machine_uplink_gbps": 60,
        },
    )


JOBS = [
    Job(0, "alexnet", 2, 20_000, 0.025, 0.0),  # A: communication-heavy (Up ~60 % of it)
    Job(1, "resnet50", 2, 5_000, 0.15, 0.0),  # B: communication-light
    *(Job(j, "resnet50", 1, 2_000, 0.5, 0.0) for j in (2, 3, 4, 5)),  # fillers: no link
    Job(6, "resnet50", 2, 2_000, 0.5, 0.0),  # one machine: no link
    Job(7, "alexnet", 2, 20_000, 0.025, 1.0),  # C: like A, incompatible with it
]


def _events(res, t):
    return [(e["event"], e["job"], e.get("gpus")) for e in res.events
            if e.get("t") == pytest.approx(t) and e["event"] in ("start", "migrate")]  # fmt: skip


def test_a_candidate_that_moves_an_incumbent_is_chosen():
    sc = scenario()
    policy = make_policy("fcfs+cassini", base="test_cassini_candidates:FixedBase")
    _, res = run_engine(sc, JOBS, policy)
    # C's base placement shares machine 0's NIC with the communication-heavy A and no other
    # free GPUs exist; the chosen candidate swaps C with B: B moves onto C's GPUs (beside A,
    # with which it interleaves better) and C takes B's machines, where it shares no link.
    assert policy.incumbents_moved == 1
    ev = _events(res, 1.0)
    assert ("migrate", 1, [1, 9]) in ev
    assert ("start", 7, [4, 6]) in ev
    assert res.jobs["migrations"][1] == 1
    old = make_policy(
        "fcfs+cassini", base="test_cassini_candidates:FixedBase", candidates="new-only"
    )
    _, res_old = run_engine(sc, JOBS, old)
    assert old.incumbents_moved == 0
    assert ("start", 7, [1, 9]) in _events(res_old, 1.0)
    assert res_old.jobs["migrations"].sum() == 0
    # the move pays off: C and A no longer share a NIC
    assert res.jobs["contention_slowdown"][7] < res_old.jobs["contention_slowdown"][7]
    assert res.jobs["finish_s"][7] < res_old.jobs["finish_s"][7]


def test_candidates_parameter_is_checked():
    with pytest.raises(ConfigError, match="candidates must be one of auction, new-only"):
        make_policy("cassini", candidates="everything")
