"""Adaptive-parallelism (Crius) jobs on the shared links (issue 15): their plans' traffic as
phases (``perf.parallelism_links``), sharing with other jobs in the engine, the capacity
bound, ``contention: false`` / ``network: ideal`` unchanged, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym import Start, WakeUp
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_scenario
from dlcluster_gym.perf.contention import conserve_capacity, link_stretch
from dlcluster_gym.perf.parallelism import ParallelismSpeeds, stage_bounds
from dlcluster_gym.perf.parallelism_links import AdaptiveTraffic
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.large_models import FP16, parse_large_model
from tests.conftest import Chaos
from tests.test_parallelism_network import _StartAll

NIC = 100e9 / 8.0  # 100 Gb/s NICs, transport efficiency 1


def _scenario(racks: int = 2, machines: int = 2, oversub: float = 2.0, **extra):
    """``racks`` x ``machines`` x 2 A40 (PCIe, one 100 Gb/s NIC each); ToR uplinks
    over-subscribed ``oversub``:1 (2:1 with two machines: an uplink holds one NIC's rate)."""
    group = {"name": "a40", "gpu_type": "A40", "racks": racks, "machines_per_rack": machines,
             "gpus_per_machine": 2, "machine_link": "pcie4", "nic_gbps": 100}  # fmt: skip
    cluster = {
        "groups": [group],
        "tiers": {"machine": "pcie4", "rack": "ib-100", "network": "ib-100"},
        "rack_uplink_oversubscription": oversub,
    }
    data = {"name": "par-links", "cluster": cluster, "workload": {"kind": "synthetic",
            "num_jobs": 1}, **extra}  # fmt: skip
    return load_scenario(data)


def _pair(second: str, **scenario) -> tuple[Engine, dict]:
    """bert-0.76b on GPUs 0, 1 (rack 0) + 4, 5 (rack 1) and ``second`` on 2, 3 + 6, 7: they
    share both ToR uplinks (their NICs are their own)."""
    sc = _scenario(**scenario)
    jobs = [Job(0, "bert-0.76b", 4, 100, 1.0, 0.0), Job(1, second, 4, 100, 1.0, 0.0)]
    policy = _StartAll({0: (0, 1, 4, 5), 1: (2, 3, 6, 7)})
    eng = Engine(sc, Cluster(sc.cluster), jobs, policy, np.random.default_rng(0))
    return eng, eng.run().jobs


# --------------------------------------------------------------------------- phases


def test_data_parallel_plan_puts_its_gradient_all_reduce_on_nics_and_uplinks():
    sc = _scenario()
    cl = Cluster(sc.cluster)
    speeds = ParallelismSpeeds(cl)
    gpus = np.array([0, 1, 4, 5])
    plan = speeds.plan("bert-0.76b", gpus)
    assert plan is not None and plan.label == "P1[D4xT1]"  # one stage, 4 replicas
    phases = AdaptiveTraffic(cl, speeds).phases("bert-0.76b", gpus)
    up = cl.nic_uplink
    assert list(phases) == [0, 2, int(up[0]), int(up[2])]  # NICs of machines 0, 2, 2 uplinks
    # Up = the all-reduce, all of it: each machine's 2 replicas reduce over PCIe, then the
    # machine sends 2 (k-1)/k x the fp16 gradients (k = 2 machines) through its NIC.
    grads = FP16 * parse_large_model("bert-0.76b")[0].params
    for ph in phases.values():
        assert ph.down.tolist() == [1.0] and ph.up.tolist() == [0.0]
        assert ph.length.tolist() == [pytest.approx(1.0)]
        assert ph.rate[0] * plan.comm_s == pytest.approx(grads)  # bytes per iteration
        assert ph.flows.tolist() == [2.0]  # one flow per GPU


def test_plan_inside_one_machine_or_on_one_gpu_crosses_no_shared_link():
    sc = _scenario()
    cl = Cluster(sc.cluster)
    traffic = AdaptiveTraffic(cl, ParallelismSpeeds(cl))
    assert traffic.phases("bert-0.76b", np.array([0, 1])) == {}
    assert traffic.phases("bert-0.76b", np.array([3])) == {}


def test_pipeline_boundary_on_a_machine_boundary_sends_one_micro_batch_each_way():
    sc = _scenario()
    cl = Cluster(sc.cluster)
    speeds = ParallelismSpeeds(cl)
    gpus = np.array([0, 1, 2, 3])  # one rack: NICs only
    plan = speeds.plan("moe-1.3b", gpus)
    assert plan is not None and plan.label == "P2[D2xT1|D2xT1]"
    phases = AdaptiveTraffic(cl, speeds).phases("moe-1.3b", gpus)
    assert list(phases) == [0, 1]
    # one micro-batch's boundary activations forward and their gradients back (B = 4 x 2
    # micro-batches of the global batch) leave machine 0 and enter machine 1
    model, batch = parse_large_model("moe-1.3b")
    vol = model.layers.out_bytes[stage_bounds("moe-1.3b", 2)[1] - 1] * batch / 8
    for ph in phases.values():
        assert ph.rate[0] * ph.length[0] * plan.comm_s == pytest.approx(2 * vol)
        assert 0.99 * NIC < ph.rate[0] < NIC  # the NIC's line rate, less its latency
        assert 0.0 < ph.length[0] < 1.0  # the rest of Up is the in-machine all-reduce


def test_isomorphic_placements_share_one_set_of_phases():
    sc = _scenario(racks=2, machines=4)
    cl = Cluster(sc.cluster)
    traffic = AdaptiveTraffic(cl, ParallelismSpeeds(cl))
    a = traffic.phases("bert-0.76b", np.array([0, 1, 8, 9]))
    b = traffic.phases("bert-0.76b", np.array([12, 13, 4, 5]))
    assert list(a) != list(b)
    assert [id(x) for x in a.values()] == [id(x) for x in b.values()]


# --------------------------------------------------------------------------- sharing


def test_two_aligned_adaptive_jobs_on_a_full_uplink_share_it_by_hand():
    eng, jobs = _pair("bert-0.76b")
    plan = eng.par.plan("bert-0.76b", np.array([0, 1, 4, 5]))
    # Each job's all-reduce moves its gradients V through each uplink (capacity C = one NIC)
    # during its whole Up time U; two aligned identical jobs get C/2 each, so the Up phase
    # takes 2V/C: extra 2V/C - U per iteration.
    grads = FP16 * parse_large_model("bert-0.76b")[0].params
    extra = 2.0 * grads / NIC - plan.comm_s
    assert extra > 0.0
    assert jobs["contention_s"].tolist() == pytest.approx([100 * extra] * 2)
    assert jobs["finish_s"].tolist() == pytest.approx([100 * (plan.iter_time_s + extra)] * 2)


def test_adaptive_and_data_parallel_jobs_slow_each_other_on_a_shared_uplink():
    eng, jobs = _pair("resnet50")
    assert (jobs["contention_s"] > 0.0).all()  # both are slowed
    alone = _pair("resnet50", contention=False)[1]
    assert (jobs["finish_s"] > alone["finish_s"]).all()
    assert (alone["contention_s"] == 0.0).all()
    # the factors are the shared-link model's, from the two jobs' phases on one uplink
    sc = _scenario()
    cl = Cluster(sc.cluster)
    fresh = Engine(sc, cl, eng.jobs, _StartAll({}), np.random.default_rng(0))
    run = fresh.instants()
    run.send(None)  # the first instant: both arrive
    run.send([Start(0, (0, 1, 4, 5)), Start(1, (2, 3, 6, 7)), WakeUp(1.0)])  # both running
    link = int(cl.nic_uplink[0])
    both = np.array([0, 1])
    iteration = fresh.compute_per_iter[both] + fresh.comm_base[both]
    phases = [fresh._job_phases[j][link] for j in (0, 1)]
    f = link_stretch(iteration, fresh._up_s[both], np.zeros(2), phases, NIC)
    carry = np.array([float((ph.length * np.minimum(ph.rate, NIC)).sum()) for ph in phases])
    f = conserve_capacity(f, fresh.compute_per_iter[both], fresh.comm_base[both],
                          fresh._up_s[both], carry, NIC)  # fmt: skip
    assert (f > 1.0).all()
    assert fresh.contention[both].tolist() == pytest.approx(f.tolist())


def test_contention_off_and_network_ideal_keep_the_plan_speed():
    for extra, comm in (({"contention": False}, True), ({"network": "ideal"}, False)):
        eng, jobs = _pair("bert-0.76b", **extra)
        assert eng.links is None
        plan = eng.par.plan("bert-0.76b", np.array([0, 1, 4, 5]))
        assert (plan.comm_s > 0.0) == comm
        assert jobs["finish_s"].tolist() == pytest.approx([100 * plan.iter_time_s] * 2, rel=1e-12)


# --------------------------------------------------------------------------- random runs


MODELS = ("bert-0.76b", "moe-0.69b", "wresnet-0.5b", "moe-1.3b", "resnet50", "vgg11", "gpt1")


def _chaos(seed: int, oversub: float, **extra) -> tuple[Engine, list[float]]:
    """10 random jobs (adaptive and data-parallel) on 2 racks x 3 machines x 2 A40s."""
    sc = _scenario(racks=2, machines=3, oversub=oversub, **extra)
    rng = np.random.default_rng(seed)
    jobs = [
        Job(i, str(rng.choice(MODELS)), int(rng.choice([2, 4, 6])), 30, 1.0,
            float(rng.uniform(0, 60)))
        for i in range(10)
    ]  # fmt: skip
    eng = Engine(
        sc,
        Cluster(sc.cluster),
        jobs,
        Chaos(shift_below=0.05, migrate_below=0.12),
        np.random.default_rng(seed),
    )
    ratios: list[float] = []
    if eng.links is not None:
        flush = eng._net_flush

        def watched(dirty, placed=-1):
            flush(dirty, placed)
            ratios.append(float(eng.link_load_ratio().max()))

        eng._net_flush = watched  # type: ignore[method-assign]
    return eng, ratios


@pytest.mark.parametrize(
    ("extra", "avg_jct"),
    [({"contention": False}, 6145.161625812011), ({"network": "ideal"}, 5965.792645828931)],
)
def test_contention_off_and_network_ideal_random_run_matches_before_sharing(extra, avg_jct):
    """The values of the code before adaptive jobs joined the links (bit for bit)."""
    eng, _ = _chaos(1, 3.0, **extra)
    assert eng.run().summary["avg_jct_s"] == avg_jct


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("oversub", [1.0, 3.0])
def test_links_never_carry_more_than_capacity_with_adaptive_jobs(seed, oversub):
    eng, ratios = _chaos(seed, oversub)
    res = eng.run()
    assert eng._par_traffic is not None
    assert max(ratios) <= 1.0 + 1e-9
    assert np.isfinite(res.jobs["finish_s"]).all()


@pytest.mark.extended  # CI runs it after the default run (docs/testing.md)
def test_adaptive_jobs_are_slowed_in_random_runs_and_runs_are_deterministic():
    slowed = 0.0
    for seed in range(3):
        runs = [_chaos(seed, 3.0)[0].run() for _ in range(2)]
        a, b = (r.jobs for r in runs)
        for col in ("finish_s", "contention_s", "comm_s"):
            assert a[col].tolist() == b[col].tolist()
        adaptive = np.array([m.startswith(("bert", "moe", "wresnet")) for m in a["model"]])
        slowed += float(a["contention_s"][adaptive].sum())
    assert slowed > 0.0


class _Shifted:
    """Starts each job on its GPUs with its time shift."""

    name = "shifted"

    def __init__(self, gpus: dict[int, tuple[int, ...]], shifts: dict[int, float]):
        self.gpus, self.shifts = gpus, shifts

    def schedule(self, view):
        return [Start(j, self.gpus[j], time_shift_s=self.shifts[j]) for j in view.waiting()]


@pytest.mark.parametrize("seed", range(20))
def test_eight_jobs_on_two_8_to_1_uplinks_stay_within_capacity(seed):
    """8 random jobs (mostly adaptive) of 2 + 2 GPUs across 2 racks: every one crosses both
    ToR uplinks, each of one NIC's capacity (8 NICs, 8:1); random arrivals and shifts."""
    rng = np.random.default_rng(seed)
    sc = _scenario(racks=2, machines=8, oversub=8.0)
    pool = ("bert-0.76b", "bert-1.3b", "moe-0.69b", "moe-1.3b", "wresnet-0.5b", "resnet50")
    jobs = [
        Job(i, str(rng.choice(pool)), 4, int(rng.integers(20, 60)), 1.0,
            float(rng.uniform(0, 10)))
        for i in range(8)
    ]  # fmt: skip
    gpus = {i: (2 * i, 2 * i + 1, 16 + 2 * i, 17 + 2 * i) for i in range(8)}
    shifts = {i: float(rng.uniform(0, 1)) for i in range(8)}
    eng = Engine(sc, Cluster(sc.cluster), jobs, _Shifted(gpus, shifts), np.random.default_rng(0))
    ratios: list[float] = []
    flush = eng._net_flush

    def watched(dirty, placed=-1):
        flush(dirty, placed)
        ratios.append(float(eng.link_load_ratio().max()))

    eng._net_flush = watched  # type: ignore[method-assign]
    res = eng.run()
    assert 0.0 < max(ratios) <= 1.0 + 1e-9
    adaptive = np.array([m != "resnet50" for m in res.jobs["model"]])
    assert res.jobs["contention_s"][adaptive].sum() > 0.0
