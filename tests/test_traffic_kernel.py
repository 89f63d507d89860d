"""Issue 15 Speed: the compiled ``placement_traffic`` (``perf.traffic_kernel``) gives the
numpy path's arrays bit for bit, on random placements (scattered and rack-local, GPU ids in
random order) of multi-NIC, rail-optimised, spine and heterogeneous clusters, for every
profile source's models (tier scales, flow caps, latencies)."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_cluster
from dlcluster_gym.perf import network as nw
from dlcluster_gym.perf.traffic_kernel import HAVE_NUMBA
from dlcluster_gym.workload.models import get_model
from dlcluster_gym.workload.profiles import model_profile

CLUSTERS = ("a100-4nic-tor3", "h100-rail-spine2", "crius-sim-1280gpu", "cassini-testbed")
FIELDS = ("links", "start", "length", "rate", "flows", "bytes_per_iter")

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="the kernel needs numba")


def _placements(cluster: Cluster, rng: np.random.Generator, n: int) -> list[np.ndarray]:
    racks = np.unique(cluster.gpu_rack)
    out = []
    for _ in range(n):
        size = int(rng.choice([1, 2, 3, 4, 8, 16, 40]))
        if rng.random() < 0.5:
            pool = np.arange(cluster.num_gpus)
        else:
            pool = np.flatnonzero(cluster.gpu_rack == rng.choice(racks))
        out.append(rng.choice(pool, size=min(size, pool.size), replace=False).astype(np.int64))
    return out


def _same(a: nw.PlacementTraffic, b: nw.PlacementTraffic) -> None:
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape and x.tobytes() == y.tobytes(), name
    assert repr(a.comm_s) == repr(b.comm_s)


@pytest.mark.parametrize("name", CLUSTERS)
def test_compiled_traffic_equals_numpy(name):
    cluster = Cluster(load_cluster(name))
    rng = np.random.default_rng(3)
    profiles = [get_model(m) for m in ("resnet50", "bert-large", "gpt2-medium", "vgg16")]
    profiles.append(model_profile("resnet50", "dally-table1"))
    compared = 0
    for gpus in _placements(cluster, rng, 80):
        net = nw.placement_net(cluster, gpus)
        if net.collective != "hierarchical":
            continue
        for profile in profiles:
            want = nw._numpy_placement_traffic(cluster, profile, gpus, net)
            got = nw._compiled_placement_traffic(cluster, profile, gpus, net)
            _same(got, want)
            compared += want.links.size
    assert compared > 0


def test_placement_traffic_dispatches_by_collective():
    cluster = Cluster(load_cluster("a100-4nic-tor3"))
    gpus = np.array([0, 9, 17, 70], dtype=np.int64)
    profile = get_model("bert-large")
    want = nw._numpy_placement_traffic(cluster, profile, gpus, nw.placement_net(cluster, gpus))
    _same(nw.placement_traffic(cluster, profile, gpus), want)
    assert nw.placement_traffic(cluster, profile, gpus[:1]).links.size == 0


@pytest.mark.parametrize("name", CLUSTERS[:2])
def test_compiled_link_grouping_equals_numpy(name, monkeypatch):
    """``link_phases`` of data-parallel traffic: the compiled grouping gives the numpy
    path's phases (rows, order, peaks) on every link."""

    cluster = Cluster(load_cluster(name))
    rng = np.random.default_rng(9)
    profile = get_model("bert-large")
    traffics = [nw.placement_traffic(cluster, profile, g) for g in _placements(cluster, rng, 60)]
    assert_grouping_equals_numpy(traffics, monkeypatch)


def assert_grouping_equals_numpy(traffics: list, monkeypatch) -> None:
    """``link_phases`` of each traffic: the compiled grouping against the numpy path."""
    from dlcluster_gym.perf import contention

    got = [contention.link_phases(t, "data") for t in traffics]
    with monkeypatch.context() as m:
        m.setattr(contention, "_group_by_link", None)
        want = [contention.link_phases(t, "data") for t in traffics]
    for g, w in zip(got, want, strict=True):
        assert list(g) == list(w)
        for link in w:
            assert g[link].packed.tobytes() == w[link].packed.tobytes()
            assert g[link].packed.shape == w[link].packed.shape
            assert repr(g[link].peak) == repr(w[link].peak)


def test_warm_skips_a_cluster_without_gpus(monkeypatch):
    """A CPU-only cluster (parameter-server jobs) has no GPU 0: warming must not run the
    kernel on it (without bounds checks that read is undefined behaviour)."""
    from dlcluster_gym.perf import traffic_kernel as tk

    def boom(*args):
        raise AssertionError("kernel called on a cluster without GPUs")

    monkeypatch.setattr(tk, "traffic", boom)
    monkeypatch.setattr(tk, "_warmed", set())
    empty = np.zeros(0, dtype=np.int64)
    tk.warm(empty, empty, empty, np.zeros(1, dtype=np.int64), np.ones(1))
