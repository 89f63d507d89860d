"""PyTorch DDP's bucket overlap rule (``workload.models.ddp_exposed_s``) and the
``physics-ddp`` profile source that applies it; hand-computed cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_cluster
from dlcluster_gym.perf.network import placement_overhead
from dlcluster_gym.workload.models import (
    DDP_BACKWARD_FRACTION,
    CommParams,
    ddp_exposed_s,
    get_model,
)
from dlcluster_gym.workload.profiles import model_profile


def test_compute_bound_shows_only_the_last_bucket():
    # 4 buckets of 10 ms each, backward 300 ms: bucket k ready at 75k ms, done long before
    # the next one; the last (ready at 300 ms) ends at 310 ms -> 10 ms exposed.
    assert ddp_exposed_s(0.040, 0.450, 4, 2 / 3) == pytest.approx(0.010)


def test_communication_bound_hides_all_but_the_first_buckets_wait():
    # 4 buckets of 100 ms, backward 200 ms: first ready at 50 ms, the chain ends at
    # 50 + 400 = 450 ms -> 250 ms after the backward pass = 400 - 200 * 3/4.
    assert ddp_exposed_s(0.400, 0.300, 4, 2 / 3) == pytest.approx(0.250)


def test_one_bucket_or_no_comm_means_no_overlap():
    assert ddp_exposed_s(0.123, 1.0, 1, 2 / 3) == pytest.approx(0.123)
    assert ddp_exposed_s(0.0, 1.0, 8, 2 / 3) == 0.0


def test_exposed_is_monotone_in_comm_and_never_above_it():
    comms = np.linspace(0.0, 2.0, 41)
    out = [ddp_exposed_s(float(c), 0.9, 7, DDP_BACKWARD_FRACTION) for c in comms]
    assert all(b >= a for a, b in itertools.pairwise(out))
    assert all(e <= c + 1e-15 for e, c in zip(out, comms, strict=True))


def test_physics_ddp_profile_applies_the_rule_and_physics_does_not_change():
    cluster = Cluster(load_cluster("pollux-testbed"))
    gpus = np.array([0, 4])  # `11`: two nodes, one GPU each
    base = model_profile("bert", "physics")
    ddp = model_profile("bert", "physics-ddp")
    assert base == get_model("bert") and base.comm.backward_fraction == 0.0
    assert ddp.comm.backward_fraction == DDP_BACKWARD_FRACTION
    f_base = placement_overhead(cluster, base, gpus)
    f_ddp = placement_overhead(cluster, ddp, gpus)
    comm = f_base * base.compute_s  # no overlap in physics: exposed == comm
    want = ddp_exposed_s(comm, base.compute_s, base.comm.messages, DDP_BACKWARD_FRACTION)
    assert f_ddp * ddp.compute_s == pytest.approx(want)
    assert f_ddp < f_base
    # model-parallel zoo entries keep physics
    assert model_profile("gpt3", "physics-ddp") == get_model("gpt3")


def test_overlap_and_backward_fraction_are_exclusive():
    with pytest.raises(ValueError, match="not both"):
        CommParams(overlap=0.2, backward_fraction=0.5)
    with pytest.raises(ValueError, match=r"backward_fraction must be in \[0, 1\)"):
        CommParams(backward_fraction=1.0)
