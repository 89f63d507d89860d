"""The placement envs' ``sens_*`` job features price a job the way the engine does: with the
network of the machines it can run on, and 0 under ``network: ideal`` (issue 15 audit)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.envs.placement import OBS_INDEX, network_sensitivity
from dlcluster_gym.perf.network import placement_overhead
from dlcluster_gym.sim.offers import ACTION_NAMES
from dlcluster_gym.workload.models import get_model

SENS = [OBS_INDEX[f"job.sens_{t}"] for t in ("machine", "rack", "network")]
TIERS = ("machine", "rack", "network")


def _engine_sens(cluster: Cluster, model: str, gpus: list[int]) -> float:
    """``f / (1 + f)`` of the engine's exposed comm / compute on concrete GPUs."""
    f = placement_overhead(cluster, get_model(model), np.asarray(gpus, dtype=np.int64))
    return f / (1.0 + f)


def test_placement_features_are_zero_under_network_ideal() -> None:
    """With ``network: ideal`` the engine charges no communication: every candidate's comm
    and every job's sensitivity are 0 (they were 0.022 for sens_rack before)."""
    over = {"workload": {"num_jobs": 30}, "network": "ideal"}
    env = gym.make("DLCluster/Placement-v0", scenario="dally-poisson-2rack",
                   scenario_overrides=over).unwrapped  # fmt: skip
    obs, _ = env.reset(seed=1)
    multi = 0
    for _ in range(40):
        offer = env._offer
        multi += offer.demand > 1
        assert (obs[SENS] == 0.0).all()
        for a in np.flatnonzero(offer.mask[1:]) + 1:
            assert obs[OBS_INDEX[f"{ACTION_NAMES[a]}.comm"]] == 0.0
        obs, _, term, _, _ = env.step(int(np.flatnonzero(offer.mask)[-1]))
        if term:
            break
    assert multi > 0  # multi-GPU jobs were offered (their sensitivity is not trivially 0)


def test_sensitivity_uses_the_network_of_the_jobs_machine_group() -> None:
    """Crius's testbed: A40 servers behind 100 Gb/s NICs (group 0), A10 servers behind
    200 Gb/s (group 1). A 4-GPU job's spread-over-a-rack value is the engine's on 2 servers
    of its own group (two GPUs share each NIC), not group 0's."""
    c = Cluster("crius-testbed-64gpu")
    model = "resnet50"
    a40 = [0, 1, 2, 3]  # two A40 servers (group 0, rack 0)
    a10 = [32, 33, 34, 35]  # two A10 servers (group 1, rack 1)
    assert c.machine_group[c.gpu_machine[a10]].tolist() == [1] * 4
    on_a40 = _engine_sens(c, model, a40)
    on_a10 = _engine_sens(c, model, a10)
    assert on_a10 < on_a40  # faster NICs: less exposed communication
    prof = get_model(model)
    s40 = network_sensitivity(c, prof, 4, "A40", ideal=False)
    s10 = network_sensitivity(c, prof, 4, "A10", ideal=False)
    assert s40[0] == s40[1]  # 4 GPUs never fit one 2-GPU server: the rack value
    assert s40[1] == pytest.approx(on_a40, rel=1e-12)
    assert s10[1] == pytest.approx(on_a10, rel=1e-12)
    assert s40[2] == s40[1]  # the A40s are one rack: an A40 job never spans two racks
    # no type: the GPU-weighted mean over the groups it may land in (equal sizes here)
    anyt = network_sensitivity(c, prof, 4, None, ideal=False)
    assert anyt[:2] == pytest.approx(((s40[0] + s10[0]) / 2, (s40[1] + s10[1]) / 2), rel=1e-12)
    assert anyt[2] > anyt[1]  # it may span the two racks (one per type)
    assert network_sensitivity(c, prof, 4, "A10", ideal=True) == (0.0, 0.0, 0.0)


def test_one_group_clusters_keep_their_values() -> None:
    """Homogeneous clusters (every Dally preset): the machine/rack/two-rack canonical
    placements priced by the engine (the recorded Placement digests pin the rest)."""
    c = Cluster("dally-2rack")
    prof = get_model("resnet50")
    gpm = c.max_gpus_per_machine
    got = network_sensitivity(c, prof, 2 * gpm, None, ideal=False)
    rack = [*range(gpm), *range(gpm, 2 * gpm)]  # two full machines of rack 0
    first = int(c.rack_first_machine[1])
    other = int(c.machine_first_gpu[first])
    two_racks = [*range(gpm), *range(other, other + gpm)]  # one machine in each rack
    assert got[0] == pytest.approx(got[1], rel=1e-12)  # too big for one machine: rack value
    assert got[1] == pytest.approx(_engine_sens(c, "resnet50", rack), rel=1e-12)
    assert got[2] == pytest.approx(_engine_sens(c, "resnet50", two_racks), rel=1e-12)
