"""Issue 19: ``SharedLinks.profiles`` (link profiles cached by the placement's signature, with
the link ids relabelled) gives exactly ``job_link_profiles`` of the placement itself.

Placements are drawn at random (scattered and rack-local, GPU ids in random order) on the
heterogeneous Crius cluster, multi-NIC, rail-optimised and spine layouts, for data- and
model-parallel models; every profile is compared bit for bit with the direct computation.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_cluster
from dlcluster_gym.perf.contention import SharedLinks, job_link_profiles, placement_signature
from dlcluster_gym.workload.models import get_model

CLUSTERS = (
    "crius-sim-1280gpu",  # four GPU types, 100 and 200 Gb/s NICs, one NIC per machine
    "h100-rail-spine2",  # eight NICs per machine on rails, over-subscribed spine
    "a100-4nic-tor3",  # four NICs per machine, 3:1 ToR uplinks
    "cassini-testbed",  # one GPU per server, spine
    "itp-cluster04",
)
MODELS = ("resnet50", "bert-large", "gpt2-medium", "vgg16")


def _placements(cluster: Cluster, rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Scattered placements, placements inside one rack, and each one moved to another rack
    of the same machine group (isomorphic: these must hit the cache)."""
    out = []
    racks = np.unique(cluster.gpu_rack)
    for _ in range(n):
        size = int(rng.choice([2, 3, 4, 8, 16]))
        if rng.random() < 0.5:
            g = rng.choice(cluster.num_gpus, size=min(size, cluster.num_gpus), replace=False)
        else:
            pool = np.flatnonzero(cluster.gpu_rack == rng.choice(racks))
            g = rng.choice(pool, size=min(size, pool.size), replace=False)
        out.append(g.astype(np.int64))
        shift = int(cluster.machine_first_gpu[1]) * int(rng.integers(1, 4))
        moved = g + shift
        same_group = (
            moved.max() < cluster.num_gpus
            and (
                cluster.machine_group[cluster.gpu_machine[moved]]
                == cluster.machine_group[cluster.gpu_machine[g]]
            ).all()
        )
        if same_group:
            out.append(moved)
    return out


@pytest.mark.parametrize("name", CLUSTERS)
def test_signature_profiles_equal_direct(name):
    cluster = Cluster(load_cluster(name))
    rng = np.random.default_rng(7)
    cached = SharedLinks(cluster)
    compared = 0
    for gpus in _placements(cluster, rng, 60):
        for model in MODELS:
            profile = get_model(model)
            compute = float(rng.choice([0.05, 0.2, 1.3]))
            got, crossed = cached.profiles(profile, compute, gpus)
            want = job_link_profiles(SharedLinks(cluster), profile, compute, gpus)
            assert list(got) == list(want)  # same links, same order
            assert dict(got) == want  # CommProfile equality: every float equal
            assert crossed == SharedLinks(cluster).links(gpus).tolist()
            compared += len(want)
    assert compared > 0
    # Isomorphic placements shared their compute-independent part.
    assert len(cached._shapes) < len(cached._signatures) * len(MODELS)


def test_signature_relabels_isomorphic_placements_only():
    cluster = Cluster(load_cluster("crius-sim-1280gpu"))
    per_rack = int(np.flatnonzero(cluster.gpu_rack == 1)[0])
    a = np.array([0, 1, 4, 5])  # two A100 machines of rack 0
    b = a + per_rack  # the same in rack 1
    ka, la, _ = placement_signature(cluster, a)
    kb, lb, _ = placement_signature(cluster, b)
    assert ka == kb and not np.array_equal(la, lb)
    c = np.array([0, 1, 4, per_rack])  # three machines over two racks: another shape
    assert placement_signature(cluster, c)[0] != ka
    # Same shape on another machine group (other GPUs, NIC speeds): another key.
    group = cluster.machine_group[cluster.gpu_machine]
    first_a10 = int(np.flatnonzero(group == 2)[0])  # A10 machines: 200 Gb/s NICs, 2 GPUs
    d = first_a10 + np.array([0, 1, 2, 3])
    e = np.flatnonzero(group == 1)[:4]  # A40 machines: 100 Gb/s NICs, 2 GPUs
    assert placement_signature(cluster, d)[0] != placement_signature(cluster, e)[0]


@pytest.mark.parametrize("name", CLUSTERS)
def test_compiled_signature_equals_python(name, monkeypatch):
    """``placement_signature``'s compiled arrays (``perf.traffic_kernel.signature``) give the
    key, link ids and crossed links of its numpy path."""
    from dlcluster_gym.perf import contention

    if contention._signature_arrays is None:
        pytest.skip("numba is not installed")
    cluster = Cluster(load_cluster(name))
    got = [
        placement_signature(cluster, g) for g in _placements(cluster, np.random.default_rng(4), 150)
    ]
    monkeypatch.setattr(contention, "_signature_arrays", None)
    rng = np.random.default_rng(4)
    for (key, ids, crossed), g in zip(got, _placements(cluster, rng, 150), strict=True):
        want_key, want_ids, want_crossed = placement_signature(cluster, g)
        assert key == want_key and crossed == want_crossed
        assert ids.dtype == want_ids.dtype and ids.tolist() == want_ids.tolist()
