"""Cassini's link profiles of adaptive-parallelism (Crius) jobs come from the phases the engine
shares for them (issue #15 item 2, ``perf.parallelism_links``); data-parallel jobs keep theirs;
Cassini on a small Crius workload is deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.perf import contention
from dlcluster_gym.perf.contention import (
    SharedLinks,
    _profiles_on_links,
    cap_overlaps,
    job_link_profiles,
)
from dlcluster_gym.perf.geometry import CommProfile
from dlcluster_gym.perf.parallelism import ParallelismSpeeds
from dlcluster_gym.perf.parallelism_links import AdaptiveTraffic
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.sim.view import ClusterView
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.large_models import FP16, parse_large_model
from tests.test_parallelism_links import _scenario
from tests.test_parallelism_network import _StartAll

JOBS = [Job(0, "bert-0.76b", 4, 100, 1.0, 0.0), Job(1, "resnet50", 4, 100, 0.2, 0.0)]


def _cassini(jobs=JOBS, **scenario):
    """(engine, its view, a reset ``cassini``) on 2 racks x 2 machines x 2 A40."""
    sc = _scenario(**scenario)
    eng = Engine(sc, Cluster(sc.cluster), jobs, _StartAll({}), np.random.default_rng(0))
    policy = make_policy("cassini")
    view = ClusterView(eng).for_policy(policy)  # its Themis base reads lengths: clairvoyant
    policy.reset(view, np.random.default_rng(0))
    return eng, view, policy


def _bytes(profile) -> float:
    return sum(p.duration * p.demand for p in profile.phases)


def test_adaptive_profiles_are_the_engines_phases_on_a_two_rack_placement():
    eng, view, policy = _cassini()
    gpus = np.array([0, 1, 4, 5])  # machines 0 (rack 0) and 2 (rack 1)
    phases = eng._traffic_phases(0, gpus)
    profiles, links = policy._profiles(view, 0, gpus)
    up = eng.cluster.nic_uplink
    assert list(phases) == [0, 2, int(up[0]), int(up[2])]
    assert list(profiles) == list(phases) == links
    compute, comm = eng.par.speed("bert-0.76b", gpus)
    for link, ph in phases.items():
        p = profiles[link]
        assert p.iteration_time == compute + comm
        assert _bytes(p) == pytest.approx(float((ph.length * ph.rate).sum()) * comm, rel=1e-12)
    # by hand: plan D4 (one stage), each machine's NIC and uplink carry 2 (k-1)/k = 1 x the
    # fp16 gradients per iteration, in one Up phase of the plan's communication seconds at the
    # end of the iteration (not the 3-phase model-parallel template of data-parallel profiles)
    grads = FP16 * parse_large_model("bert-0.76b")[0].params
    p = profiles[0]
    assert len(p.phases) == 1
    assert p.phases[0].start == pytest.approx(compute)
    assert p.phases[0].duration == pytest.approx(comm)
    assert _bytes(p) == pytest.approx(grads)


def test_adaptive_profiles_use_the_engines_own_traffic_cache():
    eng, view, _ = _cassini()
    gpus = np.array([0, 2, 4, 6])
    got = view.plan_traffic(0, gpus)
    assert got is not None
    assert got[2] is eng._par_traffic.phases("bert-0.76b", gpus)  # same object, same cache
    assert view.plan_traffic(1, gpus) is None  # a data-parallel job


def test_without_link_sharing_the_view_builds_equal_phases():
    eng, view, _ = _cassini(contention=False)
    assert eng._par_traffic is None
    gpus = np.array([0, 1, 4, 5])
    _, _, phases = view.plan_traffic(0, gpus)
    ref = AdaptiveTraffic(eng.cluster, ParallelismSpeeds(eng.cluster)).phases("bert-0.76b", gpus)
    assert list(phases) == list(ref)
    for link, ph in phases.items():
        assert np.array_equal(ph.packed, ref[link].packed)


def test_adaptive_job_inside_one_machine_has_no_profiles():
    _, view, policy = _cassini()
    assert policy._profiles(view, 0, np.array([0, 1])) == ({}, [])


@pytest.mark.parametrize("fast", [True, False])
def test_data_parallel_profiles_are_unchanged(fast):
    eng, view, policy = _cassini()
    policy.fast_paths = fast
    gpus = np.array([0, 1, 4, 5])
    profiles, links = policy._profiles(view, 1, gpus)
    shared = SharedLinks(eng.cluster)
    ref = job_link_profiles(shared, view.model_profile(1), 0.2, gpus)
    assert links == shared.links(gpus).tolist()
    assert list(profiles) == list(ref)
    for link, p in ref.items():
        assert profiles[link].iteration_time == p.iteration_time
        assert profiles[link].phases == p.phases


def _run_crius():
    jobs = [
        Job(0, "bert-0.76b", 4, 300, 1.0, 0.0),
        Job(1, "moe-1.3b", 4, 300, 1.0, 0.0),
        Job(2, "resnet50", 4, 2_000, 0.1, 0.0),
        Job(3, "bert-0.76b", 4, 200, 1.0, 50.0),
        Job(4, "moe-1.3b", 8, 200, 1.0, 100.0),
    ]
    sc = _scenario(racks=2, machines=4)
    policy = make_policy("cassini")
    eng = Engine(sc, Cluster(sc.cluster), jobs, policy, np.random.default_rng(0))
    return eng.run(), policy


def test_cassini_on_adaptive_jobs_is_deterministic():
    (a, pa), (b, pb) = _run_crius(), _run_crius()
    assert pa.candidates_scored == pb.candidates_scored > 0
    for key, col in a.jobs.items():
        assert np.array_equal(np.asarray(col), np.asarray(b.jobs[key])), key
    assert np.isfinite(np.asarray(a.jobs["finish_s"], dtype=float)).all()


def test_touching_operators_are_capped_at_the_link_capacity(monkeypatch):
    # wresnet-0.5b on 16 GPUs (8 machines) runs 8 stages; machine 2's NIC carries two
    # pipeline boundaries back to back, each at the NIC's line rate: on the circle the first
    # one's end, rounded, passes the second's start, and the two would add up to ~2x the NIC
    eng, view, policy = _cassini([Job(0, "wresnet-0.5b", 16, 100, 1.0, 0.0)], racks=2, machines=4)
    gpus = np.arange(16)
    phases = eng._traffic_phases(0, gpus)
    profiles, links = policy._profiles(view, 0, gpus)
    assert list(profiles) == list(phases) == links
    compute, comm = eng.par.speed("wresnet-0.5b", gpus)
    cap = float(eng.cluster.link_capacity_Bps[2])
    with monkeypatch.context() as m:  # the profile as laid out, before the cap
        m.setattr(contention, "cap_overlaps", lambda profile, capacity: profile)
        raw = _profiles_on_links(view.model_profile(0), compute, comm / compute, [(cap, phases[2])])
    assert raw[0].peak_demand > 1.9 * cap
    for link, p in profiles.items():
        assert p.peak_demand <= float(eng.cluster.link_capacity_Bps[link])
    assert _bytes(profiles[2]) == pytest.approx(_bytes(raw[0]), rel=1e-9)  # a sliver only


def test_cap_overlaps_splits_at_phase_boundaries():
    p = CommProfile.multi_phase(4.0, [(0.0, 2.0, 6.0), (1.0, 2.0, 6.0)])
    got = cap_overlaps(p, 10.0)
    assert [(q.start, q.duration, q.demand) for q in got.phases] == [
        (0.0, 1.0, 6.0),
        (1.0, 1.0, 10.0),
        (2.0, 1.0, 6.0),
    ]
    assert cap_overlaps(p, 12.0) is p
