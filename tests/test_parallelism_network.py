"""Adaptive-parallelism (Crius) jobs and the network: ``network: ideal``, ToR uplinks, spine,
rails (issue 15)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dlcluster_gym.cluster.catalog import interconnect
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_scenario
from dlcluster_gym.perf import parallelism as par
from dlcluster_gym.sim.actions import Start
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.large_models import parse_large_model

A40 = par.Hardware.of("A40", 2, interconnect("pcie4"), interconnect("ib-100"))
A100 = par.Hardware.of("A100", 4, interconnect("nvlink"), interconnect("ib-100"))
MODELS = ("bert-1.3b", "moe-1.3b", "wresnet-1b")


def _scenario(racks: int = 2, machines: int = 4, oversub: float = 1.0, **extra):
    group = {"name": "a40", "gpu_type": "A40", "racks": racks, "machines_per_rack": machines,
             "gpus_per_machine": 2, "machine_link": "pcie4", "nic_gbps": 100}  # fmt: skip
    group.update(extra.pop("group", {}))
    cluster = {
        "groups": [group],
        "tiers": {"machine": "pcie4", "rack": "ib-100", "network": "ib-100"},
        "rack_uplink_oversubscription": oversub,
        **extra.pop("cluster", {}),
    }
    return load_scenario(
        {"name": "par-net", "cluster": cluster, "workload": {"kind": "synthetic", "num_jobs": 1},
         "overheads": {"checkpoint_s": 0.0, "restore_s": 0.0, "restart_s": 0.0}, **extra}
    )  # fmt: skip


class _StartAll:
    """Starts every arriving job on the GPUs the script names for it."""

    name = "start-all"

    def __init__(self, gpus: dict[int, tuple[int, ...]]):
        self.gpus = gpus

    def schedule(self, view):
        return [Start(j, self.gpus[j]) for j in view.waiting() if j in self.gpus]


def _run(jobs, gpus, **scenario):
    sc = _scenario(**scenario)
    return Engine(sc, Cluster(sc.cluster), jobs, _StartAll(gpus), np.random.default_rng(0)).run()


# --------------------------------------------------------------------------- network: ideal


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_ideal_hardware_plans_pay_no_communication_and_are_never_slower(model, n):
    for hw in (A40, A100):
        real = par.best_plan(model, hw, n)
        free = par.best_plan(model, par.ideal_hardware(hw), n)
        assert (real is None) == (free is None)  # memory does not depend on the network
        if real is None:
            continue
        assert free.comm_s == pytest.approx(0.0, abs=1e-12 * free.iter_time_s)
        assert free.iter_time_s <= real.iter_time_s * (1 + 1e-12)
        assert free.iter_time_s <= real.compute_s * (1 + 1e-12)  # best compute-only plan


def test_network_ideal_removes_adaptive_jobs_communication_in_the_engine():
    jobs = [Job(0, "bert-1.3b", 8, 200.0, 1.0, 0.0), Job(1, "moe-1.3b", 4, 300.0, 1.0, 5.0)]
    gpus = {0: tuple(range(8)), 1: (8, 9, 10, 11)}  # job 0 spans four machines
    normal = _run(jobs, gpus)
    ideal = _run(jobs, gpus, network="ideal")
    assert (normal.jobs["comm_s"] > 0).all()
    assert (ideal.jobs["comm_s"] == 0).all()
    assert ideal.summary["avg_comm_overhead"] == 0.0
    assert (ideal.jobs["finish_s"] < normal.jobs["finish_s"]).all()
    assert ideal.summary["avg_jct_s"] <= normal.summary["avg_jct_s"]


# --------------------------------------------------------------------------- uplinks, spine, rails


def _plan_time(model: str, gpus, **scenario) -> float:
    c = Cluster(_scenario(**scenario).cluster)
    p = par.ParallelismSpeeds(c).plan(model, np.asarray(gpus, dtype=np.int64))
    assert p is not None
    return p.iter_time_s


CROSS = (0, 1, 2, 3, 8, 9, 10, 11)  # 2 machines in each of two racks (4 x 2 GPUs per rack)
FULL = tuple(range(16))  # both racks full
ONE_RACK = tuple(range(8))


def test_cross_rack_share_hand_computed():
    """2 racks x 4 machines, one 100 Gb/s NIC each, 8:1 ToR: an uplink is 4 x 100 / 8 = 50
    Gb/s, shared max-min by the job's machines below it that send across racks."""
    c = Cluster(_scenario(oversub=8.0).cluster)
    assert par.cross_rack_share(c, np.array(ONE_RACK)) == 1.0
    assert par.cross_rack_share(c, np.array(FULL)) == pytest.approx(50 / 4 / 100)
    assert par.cross_rack_share(c, np.array([0, 8])) == pytest.approx(0.5)
    assert par.cross_rack_share(c, np.array([0, 2, 8])) == pytest.approx(0.25)  # 2 share rack 0
    c1 = Cluster(_scenario(oversub=1.0).cluster)
    assert par.cross_rack_share(c1, np.array(FULL)) == 1.0


def test_plan_terms_crossing_a_rack_break_use_the_cross_rack_share():
    """Hand check on the stage table: the send/recv into a stage that starts a new rack and
    the data-parallel all-reduce of a stage spanning racks run at ``wide``; the rest at the
    NIC."""
    slow = interconnect("ib-100").bandwidth_Bps / 4
    wide = par.Interconnect("wide", slow, interconnect("ib-100").latency_s, "test")
    hw = par.Hardware(A40.gpu, 2, A40.intra, A40.nic, wide, (8,))
    base = par._stage_table("bert-1.3b", A40, 16, 2)
    cut = par._stage_table("bert-1.3b", hw, 16, 2)
    lat = A40.nic.latency_s
    vol_over_bw = base.xfer[1] / 2 - lat  # boundary at GPU 8: 4 machines x NIC in parallel
    assert cut.xfer[1] == pytest.approx(2 * (4 * vol_over_bw + lat))
    np.testing.assert_array_equal(cut.ar, base.ar)  # each 8-GPU stage sits in one rack
    np.testing.assert_array_equal(cut.comp, base.comp)
    one = par._stage_table("bert-1.3b", hw, 16, 1)  # one stage over both racks
    one_base = par._stage_table("bert-1.3b", A40, 16, 1)
    grads = np.array(par.FP16 * parse_large_model("bert-1.3b")[0].params)
    expect = par._allreduce(grads, np.array(1.0), 16, 2, 1, A40, wide)
    assert one.ar[0, 0] == pytest.approx(float(expect))
    assert one.ar[0, 0] > one_base.ar[0, 0]


@pytest.mark.parametrize("model", MODELS)
def test_lone_job_is_never_faster_with_less_nic_bandwidth(model):
    for gpus in (CROSS, FULL, ONE_RACK):
        times = [
            _plan_time(model, gpus, oversub=4.0, group={"nic_gbps": bw})
            for bw in (400, 200, 100, 50, 25)
        ]
        assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(times))
        assert times[-1] > times[0]


@pytest.mark.parametrize("model", MODELS)
def test_lone_job_is_never_faster_with_more_tor_oversubscription(model):
    for gpus in (CROSS, FULL):
        times = [_plan_time(model, gpus, oversub=o) for o in (1.0, 1.5, 2.0, 4.0, 8.0, 16.0)]
        assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(times))
        assert times[-2] > times[0]  # 8:1 slower than 1:1 when it spans racks
    inside = [_plan_time(model, ONE_RACK, oversub=o) for o in (1.0, 8.0)]
    assert inside[0] == inside[1]  # no cross-rack traffic, no uplink


def test_spine_oversubscription_slows_a_cross_rack_job_only():
    t = {s: _plan_time("bert-1.3b", FULL, cluster={"spine_oversubscription": s}) for s in (1, 4)}
    assert t[4] > t[1]
    inside = {
        s: _plan_time("bert-1.3b", ONE_RACK, cluster={"spine_oversubscription": s}) for s in (1, 4)
    }
    assert inside[4] == inside[1]


def test_rails_each_rail_uplink_carries_its_nics():
    """Rail-optimized, 2 NICs per 2-GPU machine: NIC k of every machine on rail k's uplink;
    a rail uplink at 8:1 is 4 x 100 / 8 Gb/s, shared by the job's NICs on that rail."""
    kw = {"group": {"nics_per_machine": 2}, "cluster": {"rail_optimized": True}}
    c = Cluster(_scenario(oversub=8.0, **kw).cluster)
    assert c.num_rails == 2
    assert par.cross_rack_share(c, np.array(FULL)) == pytest.approx(50 / 4 / 100)
    # one GPU per machine on NIC 0: the 4 machines of a rack share rail 0's uplink
    assert par.cross_rack_share(c, np.array([0, 2, 4, 6, 8])) == pytest.approx(50 / 4 / 100)
    t = {o: _plan_time("moe-1.3b", FULL, oversub=o, **kw) for o in (1.0, 8.0)}
    assert t[8.0] > t[1.0]


def test_one_to_one_clusters_keep_the_shared_hardware_objects():
    """No oversubscription and no spine: placements see ``cluster_hardware`` itself, so the
    plans (and results) of the Crius presets are those of before."""
    for name in ("crius-sim-1280gpu", "crius-testbed-64gpu"):
        c = Cluster(name)
        hw = par.cluster_hardware(c)
        spread = np.arange(0, c.num_gpus, c.num_gpus // 16)  # over every rack
        assert np.unique(c.machine_rack[c.gpu_machine[spread]]).size > 1
        assert par.placement_hardware(c, spread, hw) is hw
        speeds = par.ParallelismSpeeds(c)
        assert speeds.hardware_of(spread) is speeds.hardware


def test_engine_lone_job_across_racks_is_slower_at_8_to_1():
    jobs = [Job(0, "bert-1.3b", 16, 100.0, 1.0, 0.0)]
    res = {o: _run(jobs, {0: FULL}, oversub=o) for o in (1.0, 8.0)}
    assert res[8.0].jobs["finish_s"][0] > res[1.0].jobs["finish_s"][0]
    assert res[8.0].jobs["comm_s"][0] > res[1.0].jobs["comm_s"][0]
