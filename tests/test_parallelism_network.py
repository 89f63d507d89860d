"""Adaptive-parallelism (Crius) jobs and the network: ``network: ideal``, ToR uplinks, spine,
rails (issue 15)."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym.cluster.catalog import interconnect
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_scenario
from dlcluster_gym.perf import parallelism as par
from dlcluster_gym.sim.actions import Start
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.workload.job import Job

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
