"""Network-tier model: Dally Table 1, monotonicity, shapes, cache, Pollux traces."""

from __future__ import annotations

import itertools
import os
from dataclasses import replace
from pathlib import Path

import pytest

from dlcluster_gym.cluster.catalog import interconnect
from dlcluster_gym.cluster.topology import Tier
from dlcluster_gym.perf import network as nw
from dlcluster_gym.workload.models import DALLY_MODELS, MODEL_ZOO, get_model

TRACES = Path(os.environ.get("DLCLUSTER_TRACES", Path(__file__).parents[2] / "shared" / "traces"))


@pytest.mark.parametrize("model", DALLY_MODELS)
def test_table1_within_10_percent(model: str) -> None:
    ours = nw.table1_overheads()[model]
    for tier, paper in nw.DALLY_TABLE1[model].items():
        assert ours[tier] == pytest.approx(paper, rel=0.10), (model, tier, ours[tier], paper)


def test_table1_keys() -> None:
    table = nw.table1_overheads(nw.DALLY_LINKS)
    assert list(table) == list(DALLY_MODELS)
    assert all(list(row) == ["machine", "rack", "network"] for row in table.values())


def test_reference_shapes() -> None:
    assert nw.reference_shape(Tier.MACHINE) == ((8,),)
    assert nw.reference_shape(Tier.RACK) == ((1,) * 8,)
    assert nw.reference_shape(Tier.NETWORK) == ((1,),) * 8
    assert nw.reference_shape(Tier.RACK, 2) == ((1, 1),)


@pytest.mark.parametrize("name", sorted(MODEL_ZOO))
def test_monotone_across_tiers(name: str) -> None:
    p = MODEL_ZOO[name]
    m, r, n = (nw.comm_overhead(p, nw.reference_shape(t), nw.DALLY_LINKS) for t in Tier)
    assert 0.0 <= m <= r * (1 + 1e-4) and r <= n * (1 + 1e-4)  # Table 1 ResNet50: 12 = 12


@pytest.mark.parametrize("name", sorted(MODEL_ZOO))
def test_single_gpu_is_free(name: str) -> None:
    assert nw.comm_overhead(MODEL_ZOO[name], ((1,),), nw.DALLY_LINKS) == 0.0
    assert nw.exposed_comm_s(MODEL_ZOO[name], ((1,),), nw.DALLY_LINKS, 3.0) == 0.0


def test_bandwidth_term_grows_with_gpu_count_within_a_tier() -> None:
    links = nw.DALLY_LINKS
    machine = [nw.allreduce_terms(((g,),), links)[0] for g in range(2, 9)]
    rack = [nw.allreduce_terms(((1,) * k,), links)[0] for k in range(2, 9)]
    net = [nw.allreduce_terms(((1,),) * r, links)[0] for r in range(2, 9)]
    for series in (machine, rack, net):
        assert all(a < b for a, b in itertools.pairwise(series))
    # and the exposed fraction of a physics-parameter model does not shrink either
    p = replace(get_model("vgg16"), comm=replace(get_model("vgg16").comm, overlap=0.0))
    fr = [nw.comm_overhead(p, ((1,) * k,), links) for k in range(2, 9)]
    assert all(a < b for a, b in itertools.pairwise(fr))


def test_unbalanced_rule_smallest_machine_carries_largest_shard() -> None:
    links = nw.DALLY_LINKS
    b_44, _ = nw.allreduce_terms(((4, 4),), links)
    b_71, _ = nw.allreduce_terms(((7, 1),), links)
    assert b_71 > b_44  # the 1-GPU machine ships the whole gradient across the rack


def test_exposed_comm_s_scales_compute() -> None:
    p = get_model("resnet50")
    shape = nw.reference_shape(Tier.NETWORK)
    frac = nw.comm_overhead(p, shape, nw.DALLY_LINKS)
    assert nw.exposed_comm_s(p, shape, nw.DALLY_LINKS, 2.0) == pytest.approx(2.0 * frac)


@pytest.mark.parametrize(
    ("args", "shape"),
    [
        ((1, 8, 8), ((1,),)),
        ((8, 8, 8), ((8,),)),
        ((12, 8, 8), ((8, 4),)),
        ((16, 4, 2), ((4, 4), (4, 4))),
        ((70, 8, 8), ((8,) * 8, (6,))),
        ((10, 4, 2), ((4, 4), (2,))),
        ((3, 1, 2), ((1, 1), (1,))),
    ],
)
def test_packed_shape(args: tuple[int, int, int], shape: tuple) -> None:
    assert nw.packed_shape(*args) == shape


def test_packed_shape_rejects_nonpositive() -> None:
    with pytest.raises(ValueError, match="num_gpus=0"):
        nw.packed_shape(0, 8, 8)


def test_cache_returns_identical_values() -> None:
    p = get_model("bert-large")
    shape = ((4, 2), (1,))
    first = nw.comm_overhead(p, shape, nw.DALLY_LINKS)
    hits = nw.comm_overhead.cache_info().hits
    again = nw.comm_overhead(replace(p), shape, tuple(nw.DALLY_LINKS))
    assert again == first
    assert nw.comm_overhead.cache_info().hits == hits + 1


def test_links_change_the_answer() -> None:
    p = get_model("resnet18")
    slow = (interconnect("pcie"), interconnect("eth-10"), interconnect("eth-1"))
    shape = nw.reference_shape(Tier.RACK)
    assert nw.comm_overhead(p, shape, slow) > nw.comm_overhead(p, shape, nw.DALLY_LINKS)


@pytest.mark.traces
@pytest.mark.skipif(
    not (TRACES / "pollux_adaptdl" / "traces").is_dir(),
    reason=f"Pollux traces not found at {TRACES} (set DLCLUSTER_TRACES)",
)
def test_pollux_spread_is_slower_than_packed_in_model_and_trace() -> None:
    import csv

    links = (interconnect("pcie"), interconnect("eth-50"), interconnect("eth-50"))
    path = TRACES / "pollux_adaptdl" / "traces" / "bert" / "placements.csv"
    rows = {(r["placement"], r["local_bsz"]): float(r["step_time"])
            for r in csv.DictReader(path.open())}  # fmt: skip
    assert rows[("1111", "12")] > rows[("4", "12")]
    p = get_model("bert")
    assert nw.comm_overhead(p, ((1, 1, 1, 1),), links) > nw.comm_overhead(p, ((4,),), links)


def test_calibration_literals_match_closed_form() -> None:
    for name, factors in nw.calibrate().items():
        assert get_model(name).comm.tier_scale == pytest.approx(factors, rel=1e-5)


@pytest.mark.parametrize("name", DALLY_MODELS)
def test_every_multi_gpu_placement_pays_some_communication(name: str) -> None:
    p = get_model(name)
    for shape in (((2,),), ((1, 1),), ((1,), (1,)), ((4, 4),), ((8,), (8,))):
        assert nw.comm_overhead(p, shape, nw.DALLY_LINKS) > 0.0
