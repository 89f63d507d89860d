"""Property-based tests: random small clusters (no GPUs, one GPU, one or many NICs, uplinks
over-subscribed at their bounds, either collective) and random workloads, for every policy
that schedules data-parallel GPU jobs, with the engine's invariants checked at every decision
instant (``engine_checks``) and the run repeated for determinism."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from engine_checks import Tracker, check_end, checked_run, results_equal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_scenario
from dlcluster_gym.errors import ConfigError, NotApplicableError
from dlcluster_gym.scheduler import make_policy, policies
from dlcluster_gym.sim.bounds import ideal_results
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.models import DALLY_MODELS

# Policies of parameter-server jobs and of adaptive-parallelism jobs refuse these workloads
# (NotApplicableError, checked by the scenario x policy matrix); the others all run here.
# Examples per policy: 40 in the default run, 100 in the bounds-checked run that CI makes
# (test_boundscheck.py); DLCLUSTER_PROPERTY_EXAMPLES sets another count.
EXAMPLES = int(os.environ.get("DLCLUSTER_PROPERTY_EXAMPLES", "40"))
ONLY_OTHER_JOBS = {"nearchus", "optimus", "fa-bf", "crius", "elasticflow-ls"}
POLICIES = sorted(
    name for name, spec in policies().items() if not spec.bound and name not in ONLY_OTHER_JOBS
)


@st.composite
def clusters(draw: st.DrawFn) -> dict:
    gpm = draw(st.sampled_from([0, 1, 2, 4, 8]))
    group: dict = {
        "racks": draw(st.integers(1, 3)),
        "machines_per_rack": draw(st.integers(1, 3)),
        "gpus_per_machine": gpm,
    }
    rail, nics = False, None
    if gpm > 0:
        nics = draw(st.sampled_from(sorted({1, gpm, max(1, gpm // 2)})))
        group["nics_per_machine"] = nics
        rail = nics > 1 and draw(st.booleans())
    groups = [group]
    if draw(st.booleans()):  # CPU-only servers beside the GPU machines
        cpu = {"name": "cpu", "racks": 1, "machines_per_rack": 1, "gpus_per_machine": 0}
        groups.append({**cpu, "nics_per_machine": nics} if rail else cpu)
    return {
        "groups": groups,
        "rack_uplink_oversubscription": draw(st.sampled_from([1.0, 3.0, 1000.0])),
        "spine_oversubscription": draw(st.sampled_from([1.0, 2.0, 1000.0])),
        "rail_optimized": rail,
        "collective": draw(st.sampled_from(["hierarchical", "flat-ring"])),
    }


job_st = st.tuples(
    st.sampled_from(DALLY_MODELS),
    st.sampled_from([1, 2, 3, 4, 8, 16]),
    st.integers(1, 400),  # iterations
    st.floats(0.01, 2.0),  # compute per iteration (s)
    st.floats(0.0, 600.0),  # arrival (s)
)


def _jobs(specs: list) -> list[Job]:
    specs = sorted(specs, key=lambda s: s[4])
    return [Job(i, m, g, float(it), c, a) for i, (m, g, it, c, a) in enumerate(specs)]


def _run(cfg, cluster: Cluster, jobs: list[Job], policy: str, seed: int):
    engine = Engine(
        cfg, cluster, jobs, make_policy(policy), np.random.default_rng(seed), record_events=True
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dropped jobs, the horizon
        res, tr = checked_run(engine)
    return engine, res, tr


@pytest.mark.filterwarnings("ignore:.*were dropped")
@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster_cfg=clusters(),
    specs=st.lists(job_st, min_size=0, max_size=16),
    contention=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_invariants_on_random_clusters(policy, cluster_cfg, specs, contention, seed) -> None:
    data = {
        "name": "random-cluster",
        "cluster": cluster_cfg,
        "workload": {"kind": "synthetic", "num_jobs": 1},
        "contention": contention,
        "oversize_jobs": "drop",
        "max_sim_time_s": 30 * 86400.0,
    }
    if not any(g["gpus_per_machine"] for g in cluster_cfg["groups"]):
        with pytest.raises(ConfigError, match="runs on GPUs but cluster"):
            load_scenario(data)  # GPU jobs on a cluster without GPUs: a clear error
        return
    cfg = load_scenario(data)
    cluster = Cluster(cfg.cluster)
    jobs = _jobs(specs)
    try:
        engine, res, tr = _run(cfg, cluster, jobs, policy, seed)
    except NotApplicableError:
        pytest.fail(f"{policy} refused a workload of data-parallel GPU jobs")
    assert isinstance(tr, Tracker) and tr.instants >= 1
    fits = [j for j in jobs if j.num_gpus <= cluster.num_gpus]
    assert res.summary["jobs_dropped"] == len(jobs) - len(fits)
    check_end(engine, res, tr, ideal_results(cfg, cluster, jobs) if fits else None)
    _, again, _ = _run(cfg, cluster, jobs, policy, seed)
    assert again.events == res.events
    assert results_equal(again, res)
