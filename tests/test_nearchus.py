"""Nearchus, Optimus, FA-BF (Nearchus IV-V) and nearchus-gpu."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym import simulate
from dlcluster_gym.config import load_scenario
from dlcluster_gym.errors import ConfigError, NotApplicableError
from dlcluster_gym.scheduler import make_policy

PS_POLICIES = ("nearchus", "optimus", "fa-bf")


def single(model: str = "resnet50", cluster: str = "nearchus-eval-a", budget: float = 100.0,
           epochs: float = 30.0):  # fmt: skip
    return load_scenario({
        "name": f"single-{model}",
        "cluster": cluster,
        "workload": {"kind": "ps", "num_jobs": 1, "arrival": "batch", "models": [model],
                     "variants": [[epochs, budget]]},
        "overheads": {"restart_s": 60},
    })  # fmt: skip


@pytest.mark.parametrize("policy", PS_POLICIES)
def test_ps_policies_not_applicable_on_gpu_scenarios(policy: str) -> None:
    with pytest.raises(NotApplicableError, match="parameter-server"):
        simulate("dally-batch-2rack", policy)


@pytest.mark.parametrize(
    "kw", [{"e_thd_job": 0.0}, {"e_thd_opt": 1.5}, {"cv_max": -0.1}, {"psn_util": 2}]
)
def test_nearchus_thresholds_outside_unit_interval(kw) -> None:
    with pytest.raises(ConfigError, match=r"must be in \(0, 1\]"):
        make_policy("nearchus", **kw)


def test_budget_below_minimal_config() -> None:
    with pytest.raises(ConfigError, match=r"smaller than the minimal .1 PS, 2 workers"):
        simulate(single(budget=1.0), "nearchus")
    with pytest.raises(ConfigError, match="smaller than the initial"):
        simulate(single(budget=10.0), "optimus")


def test_nearchus_single_job_search() -> None:
    pol = make_policy("nearchus")
    res = simulate(single(), pol, seed=1)
    kinds = [d[2] for d in pol.decisions]
    assert kinds[0] == "start" and pol.decisions[0][3] == "(1ps, 2wk, 5.0, 10.0)"  # R0 = 15
    assert "scale-up" in kinds and ("add-ps" in kinds or "add-worker" in kinds)
    # Stabilizing takes 5-8 minutes (IV): the first decision after the start.
    assert 300.0 <= pol.decisions[1][0] <= 480.0
    assert res.summary["jobs_completed"] == 1
    assert res.timeseries["alloc_vcpus"].max() <= 100.0 + 1e-9


def test_single_job_speed_and_jct_on_cluster_a() -> None:
    jct = {}
    peak = {}
    for p in PS_POLICIES:
        res = simulate(single(), p, seed=1)
        jct[p] = res.summary["avg_jct_s"]
        peak[p] = res.timeseries["used_vcpus"].max()
    assert jct["fa-bf"] < jct["nearchus"] < jct["optimus"]  # Fig. 7b ordering
    # Profiled over the paper's range (up to 20 nodes on cluster A, V) Optimus's model sees
    # the whole budget and ramps to the same allocation as Nearchus (Fig. 7a's 71 % speed gap
    # is not reproduced, see experiments/results/nearchus/report.md); profiled on the 20
    # smallest configurations (at most 9 nodes) it stops at about half of it.
    assert peak["optimus"] == pytest.approx(peak["nearchus"], rel=0.05)
    small = simulate(single(), make_policy("optimus", profile="smallest"), seed=1)
    assert peak["nearchus"] > 1.5 * small.timeseries["used_vcpus"].max()


@pytest.mark.parametrize(
    ("cluster", "budget", "nodes"), [("nearchus-eval-a", 100.0, 20), ("nearchus-eval-b", 300.0, 60)]
)
def test_optimus_profiles_20_configurations_over_the_papers_node_range(cluster, budget, nodes):
    """Nearchus V: profiling up to 20 (cluster A) and 60 (cluster B) training nodes, 20
    configurations."""
    pol = make_policy("optimus")
    simulate(single(cluster=cluster, budget=budget, epochs=1.0), pol, seed=1)
    cfgs = pol.profiled[0]
    assert len(set(cfgs)) == 20
    assert max(p + w for p, w in cfgs) == nodes and min(p + w for p, w in cfgs) == 2
    assert max(p for p, _ in cfgs) == nodes // 3
    old = make_policy("optimus", profile="smallest")
    simulate(single(cluster=cluster, budget=budget, epochs=1.0), old, seed=1)
    assert max(p + w for p, w in old.profiled[0]) == 9


def test_optimus_bad_profile_mode() -> None:
    with pytest.raises(ConfigError, match="profile must be one of range, smallest, got 'all'"):
        make_policy("optimus", profile="all")


def test_deterministic() -> None:
    a = simulate(single(), "nearchus", seed=3)
    b = simulate(single(), "nearchus", seed=3)
    assert a.summary["avg_jct_s"] == b.summary["avg_jct_s"]
    assert a.timeseries["alloc_vcpus"].tolist() == b.timeseries["alloc_vcpus"].tolist()


def _acceptance(seed: int) -> dict[str, dict]:
    res = {p: simulate("nearchus-multi-a", p, seed=seed).summary for p in PS_POLICIES}
    jct = {p: r["avg_jct_s"] for p, r in res.items()}
    assert jct["nearchus"] < jct["optimus"], jct
    assert jct["nearchus"] < jct["fa-bf"], jct
    return res


def test_acceptance_multi_a_seed1() -> None:
    res = _acceptance(1)
    assert res["fa-bf"]["resizes"] == 0  # fixed allocation: no restarts
    assert res["nearchus"]["avg_queue_s"] < 0.5 * res["fa-bf"]["avg_queue_s"]  # slow start


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4, 5])
def test_acceptance_multi_a_more_seeds(seed: int) -> None:
    _acceptance(seed)


def test_nearchus_gpu_grows_jobs() -> None:
    sc = load_scenario("dally-poisson-2rack", seed=1).model_dump()
    sc["workload"]["max_jobs"] = 40
    res = simulate(sc, "nearchus-gpu", seed=1)
    assert res.summary["jobs_completed"] == 40
    assert res.summary["resizes"] > 0
    with pytest.raises(NotApplicableError):
        simulate("nearchus-multi-a", "nearchus-gpu")


def test_nearchus_gpu_efficiency_is_the_engines() -> None:
    """The efficiency nearchus-gpu predicts for a job on fewer GPUs than its demand is what
    the engine then runs: compute / (compute + communication), the compute x demand / GPUs
    and the same gradient's all-reduce (on every start and resize of a run)."""
    from dlcluster_gym.baselines.nearchus_gpu import NearchusGPU

    seen: list[tuple[float, float, float]] = []

    class Probe(NearchusGPU):
        def schedule(self, view):
            for job in view.running():
                gpus = np.asarray(view.gpus_of(job))
                if gpus.size < view.jobs[job].num_gpus:
                    e = self._efficiency(view, job, gpus)
                    compute = view.jobs[job].compute_s * view.jobs[job].num_gpus / gpus.size
                    comm = view.comm_overhead_for(job, gpus) * view.jobs[job].compute_s
                    seen.append((e, compute, comm))
            return super().schedule(view)

    sc = load_scenario("dally-poisson-2rack", seed=1).model_dump()
    sc["workload"]["max_jobs"] = 20
    simulate(sc, Probe, seed=1)
    assert len(seen) > 10 and any(comm > 0 for _, _, comm in seen)
    for e, compute, comm in seen:
        assert e == pytest.approx(compute / (compute + comm), rel=1e-12)


def _cluster(name: str):
    from dlcluster_gym.cluster.topology import Cluster

    sc = load_scenario(
        {"name": "c", "cluster": name, "workload": {"kind": "synthetic", "num_jobs": 1}}
    )
    return Cluster(sc.cluster)


def test_nearchus_gpu_count_shapes_are_every_placement_shape() -> None:
    """``count_shapes`` lists exactly the count shapes of all placements of k GPUs (brute
    force over every k-subset of a 2-rack x 2-machine x 4-GPU cluster)."""
    from itertools import combinations

    from dlcluster_gym.baselines.nearchus_gpu import count_shapes

    sc = load_scenario({
        "name": "c",
        "cluster": {"racks": 2, "machines_per_rack": 2, "gpus_per_machine": 4},
        "workload": {"kind": "synthetic", "num_jobs": 1},
    })  # fmt: skip
    from dlcluster_gym.cluster.topology import Cluster

    cluster = Cluster(sc.cluster)
    for k in range(1, 7):
        seen = {cluster.placement_shape(g) for g in combinations(range(cluster.num_gpus), k)}
        listed = count_shapes(k, 4, 2, 2)
        assert len(listed) == len(set(listed))
        assert set(listed) == seen, k


@pytest.mark.parametrize("name", ["dally-16rack", "itp-cluster04", "tiresias-n32g4"])
def test_nearchus_gpu_overhead_is_a_function_of_the_count_shape(name: str) -> None:
    """What the growth bound relies on: on these clusters (``counts_determine_overhead``)
    random placements with the same count shape have exactly the same overhead."""
    import numpy as np

    from dlcluster_gym.baselines.nearchus_gpu import counts_determine_overhead
    from dlcluster_gym.perf.network import placement_overhead
    from dlcluster_gym.workload.models import get_model

    cluster = _cluster(name)
    assert counts_determine_overhead(cluster)
    rng = np.random.default_rng(0)
    profile = get_model("vgg11")
    by_shape: dict = {}
    for _ in range(400):
        k = int(rng.integers(2, 9))
        # Few machines, so shapes repeat: pick 3 random machines' GPUs, then k of them.
        machines = rng.choice(
            cluster.num_machines, size=min(3, cluster.num_machines), replace=False
        )
        pool = np.concatenate([cluster.machine_gpus(int(m)) for m in machines])
        gpus = np.sort(rng.choice(pool, size=min(k, pool.size), replace=False))
        o = placement_overhead(cluster, profile, gpus)
        by_shape.setdefault(cluster.placement_shape(gpus), set()).add(o)
    assert all(len(v) == 1 for v in by_shape.values()), by_shape
    assert len(by_shape) > 10


@pytest.mark.parametrize("name", ["h100-rail-spine2", "a100-4nic-tor3", "crius-sim-1280gpu"])
def test_nearchus_gpu_bound_off_where_gpu_ids_matter(name: str) -> None:
    """Rails, several NICs shared by GPUs, or several machine groups: no bound (the search
    runs as written)."""
    from dlcluster_gym.baselines.nearchus_gpu import counts_determine_overhead

    assert not counts_determine_overhead(_cluster(name))
