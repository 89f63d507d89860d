"""The compiled kernels on empty and degenerate inputs: no GPUs in a placement, one GPU, one
machine (no links), one NIC for many GPUs, one GPU per rack, rail-optimised NICs. Each
compiled path gives what its numpy twin gives. The bounds-checked run
(``test_boundscheck.py``) runs this file again with ``NUMBA_BOUNDSCHECK=1``, so an index
past an array fails there instead of reading memory it does not own."""

from __future__ import annotations

import numpy as np
import pytest
from test_traffic_kernel import assert_grouping_equals_numpy

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import ClusterConfig
from dlcluster_gym.perf import contention
from dlcluster_gym.perf import network as nw
from dlcluster_gym.perf.kernel_cache import HAVE_NUMBA
from dlcluster_gym.perf.layout_kernel import RowTable
from dlcluster_gym.workload.models import get_model

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="the kernels need numba")

CLUSTERS = {
    "one-gpu": {"groups": [{"racks": 1, "machines_per_rack": 1, "gpus_per_machine": 1}]},
    "one-machine-one-nic": {
        "groups": [
            {"racks": 1, "machines_per_rack": 1, "gpus_per_machine": 8, "nics_per_machine": 1}
        ]
    },
    "two-machines-one-gpu": {
        "groups": [{"racks": 1, "machines_per_rack": 2, "gpus_per_machine": 1}]
    },
    "one-gpu-per-rack": {
        "groups": [{"racks": 3, "machines_per_rack": 1, "gpus_per_machine": 1}],
        "rack_uplink_oversubscription": 1000.0,
        "spine_oversubscription": 1000.0,
    },
    "rail-two-nics": {
        "groups": [
            {"racks": 2, "machines_per_rack": 2, "gpus_per_machine": 4, "nics_per_machine": 2}
        ],
        "rail_optimized": True,
        "rack_uplink_oversubscription": 3.0,
    },
    "flat-ring-one-nic": {
        "groups": [
            {"racks": 1, "machines_per_rack": 3, "gpus_per_machine": 2, "nics_per_machine": 1}
        ],
        "collective": "flat-ring",
    },
    "with-cpu-servers": {
        "groups": [
            {"racks": 1, "machines_per_rack": 2, "gpus_per_machine": 2},
            {"name": "cpu", "racks": 1, "machines_per_rack": 1, "gpus_per_machine": 0},
        ]
    },
}


def _cluster(name: str) -> Cluster:
    return Cluster(ClusterConfig.model_validate({"name": name, **CLUSTERS[name]}))


def _placements(cluster: Cluster) -> list[np.ndarray]:
    n = cluster.num_gpus
    every = np.arange(n, dtype=np.int64)
    return [
        np.zeros(0, dtype=np.int64),  # no GPUs
        every[:1],  # one GPU
        every[-1:],  # the last GPU (an index at the end of every array)
        every,  # all of them
        every[::2],
        every[::-1].copy(),  # ids out of order
    ]


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_traffic_signature_and_grouping_equal_numpy(name: str, monkeypatch) -> None:
    cluster = _cluster(name)
    nw.warm_traffic(cluster)
    profile = get_model("bert-large")
    traffics = []
    for gpus in _placements(cluster):
        net = nw.placement_net(cluster, gpus) if gpus.size else None
        if net is not None and net.collective == "hierarchical":
            want = nw._numpy_placement_traffic(cluster, profile, gpus, net)
            got = nw._compiled_placement_traffic(cluster, profile, gpus, net)
            for field in ("links", "start", "length", "rate", "flows", "bytes_per_iter"):
                x, y = getattr(got, field), getattr(want, field)
                assert x.shape == y.shape and x.tobytes() == y.tobytes(), (name, field)
            assert repr(got.comm_s) == repr(want.comm_s)
        if gpus.size:
            traffics.append(nw.placement_traffic(cluster, profile, gpus))
        key, ids, crossed = contention.placement_signature(cluster, gpus)
        with monkeypatch.context() as m:
            m.setattr(contention, "_signature_arrays", None)
            key2, ids2, crossed2 = contention.placement_signature(cluster, gpus)
        assert key == key2 and ids.tobytes() == ids2.tobytes() and crossed == crossed2
    assert_grouping_equals_numpy(traffics, monkeypatch)


def test_link_usage_with_no_links_and_no_busy_links() -> None:
    from dlcluster_gym.perf.links_kernel import usage

    empty = np.zeros(0)
    assert usage(np.zeros(0, dtype=np.int64), empty, empty) == (0.0, 0.0, 0)
    assert usage(np.zeros(3, dtype=np.int64), np.ones(3), np.ones(3)) == (0.0, 0.0, 0)
    assert usage(np.array([0, 0, 1]), np.array([5.0, 5.0, 5.0]), np.array([1.0, 1.0, 10.0])) == (
        0.5,
        0.5,
        1,
    )


@pytest.mark.parametrize("times", [[], [1.0], [1.0, 1.0], [0.5, 3.0, 7.25]])
def test_layout_equals_python_on_few_times(times: list[float]) -> None:
    from dlcluster_gym.perf import layout_kernel as lk

    t = np.asarray(times, dtype=np.float64)
    got_table, want_table = RowTable(64), RowTable(64)
    args = (64, 1e-3, 1)
    got = lk.layout(t, *args, got_table.rows, got_table.slot, got_table.used)
    want = lk.layout.py_func(t, *args, want_table.rows, want_table.slot, want_table.used)
    assert got[0] == want[0] or (got[0] != got[0] and want[0] != want[0])
    assert got[1] == want[1]
    assert np.array_equal(got[2], want[2])


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_shared_links_of_a_degenerate_cluster(name: str) -> None:
    """Building the link-sharing state warms every kernel on the cluster's own arrays."""
    cluster = _cluster(name)
    if not contention.sharing_can_bind(cluster):
        pytest.skip(f"{name}: link sharing cannot bind (the engine builds no shared links)")
    links = contention.SharedLinks(cluster)
    profile = get_model("resnet50")
    for gpus in _placements(cluster)[1:]:
        assert isinstance(links.phases(profile, gpus), dict)


@pytest.mark.parametrize("name", ["a100-4nic-tor3", "h100-rail-spine2", "cassini-testbed"])
def test_isolated_link_profiles_fit_their_links(name: str) -> None:
    """A job alone never demands more than a link carries: its stages meeting on a link by
    rounding (an 8-GPU alexnet over four machines on two racks did) are capped."""
    from dlcluster_gym.config import load_cluster
    from dlcluster_gym.workload.profiles import model_profile

    cluster = Cluster(load_cluster(name))
    links = contention.SharedLinks(cluster)
    rng = np.random.default_rng(5)
    checked = 0
    for model in ("alexnet", "resnet50", "bert-large", "vgg16"):
        profile = model_profile(model, "physics")
        for _ in range(40):
            n = int(rng.choice([2, 4, 8, 16]))
            gpus = np.sort(rng.choice(cluster.num_gpus, size=n, replace=False))
            for link, p in contention.job_link_profiles(
                links, profile, profile.compute_s, gpus
            ).items():
                assert p.peak_demand <= links.capacity_Bps[link] * (1 + 1e-12), (model, gpus)
                checked += 1
    alexnet = model_profile("alexnet", "physics")
    if name == "a100-4nic-tor3":
        gpus = np.array([111, 114, 124, 125, 310, 311, 312, 313])
        got = contention.job_link_profiles(links, alexnet, alexnet.compute_s, gpus)
        assert all(p.peak_demand <= links.capacity_Bps[k] for k, p in got.items())
    assert checked > 0
