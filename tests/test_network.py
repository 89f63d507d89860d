"""Network model: Dally Table 1, NICs and uplinks, max-min sharing, monotonicity, shapes."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from conftest import NO_TRACES, TRACES
from hypothesis import given, settings
from hypothesis import strategies as st

from dlcluster_gym.cluster.catalog import interconnect
from dlcluster_gym.cluster.topology import Cluster, Tier
from dlcluster_gym.perf import network as nw
from dlcluster_gym.perf.contention import SharedLinks
from dlcluster_gym.workload.models import DALLY_MODELS, MODEL_ZOO, get_model
from dlcluster_gym.workload.profiles import model_profile


@pytest.mark.parametrize("model", DALLY_MODELS)
def test_table1_exact(model: str) -> None:
    ours = nw.table1_overheads()[model]
    for tier, paper in nw.DALLY_TABLE1[model].items():
        assert ours[tier] == pytest.approx(paper, rel=1e-5), (model, tier, ours[tier], paper)


def test_table1_keys() -> None:
    table = nw.table1_overheads(nw.DALLY_NET)
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
    m, r, n = (nw.comm_overhead(p, nw.reference_shape(t), nw.DALLY_NET) for t in Tier)
    assert 0.0 <= m <= r * (1 + 1e-4) and r <= n * (1 + 1e-4)  # Table 1 ResNet50: 12 = 12


@pytest.mark.parametrize("name", sorted(MODEL_ZOO))
def test_single_gpu_is_free(name: str) -> None:
    assert nw.comm_overhead(MODEL_ZOO[name], ((1,),), nw.DALLY_NET) == 0.0
    assert nw.exposed_comm_s(MODEL_ZOO[name], ((1,),), nw.DALLY_NET, 3.0) == 0.0


def test_bandwidth_term_grows_with_gpu_count_within_a_tier() -> None:
    links = nw.DALLY_NET
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
    links = nw.DALLY_NET
    b_44, _ = nw.allreduce_terms(((4, 4),), links)
    b_71, _ = nw.allreduce_terms(((7, 1),), links)
    assert b_71 > b_44  # the 1-GPU machine ships the whole gradient across the rack


def test_exposed_comm_s_scales_compute() -> None:
    p = get_model("resnet50")
    shape = nw.reference_shape(Tier.NETWORK)
    frac = nw.comm_overhead(p, shape, nw.DALLY_NET)
    assert nw.exposed_comm_s(p, shape, nw.DALLY_NET, 2.0) == pytest.approx(2.0 * frac)


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
    first = nw.comm_overhead(p, shape, nw.DALLY_NET)
    hits = nw.comm_overhead.cache_info().hits
    again = nw.comm_overhead(replace(p), shape, replace(nw.DALLY_NET))
    assert again == first
    assert nw.comm_overhead.cache_info().hits == hits + 1


def test_links_change_the_answer() -> None:
    p = get_model("resnet18")
    slow = nw.NetParams.simple(interconnect("pcie"), interconnect("eth-10"), interconnect("eth-1"))
    shape = nw.reference_shape(Tier.RACK)
    assert nw.comm_overhead(p, shape, slow) > nw.comm_overhead(p, shape, nw.DALLY_NET)


@pytest.mark.traces
@pytest.mark.skipif(
    TRACES is None or not (TRACES / "pollux_adaptdl" / "traces").is_dir(),
    reason=f"Pollux traces not found at {TRACES} (set DLCLUSTER_TRACES)" if TRACES else NO_TRACES,
)
def test_pollux_spread_is_slower_than_packed_in_model_and_trace() -> None:
    import csv

    links = nw.NetParams.simple(
        interconnect("pcie"), interconnect("eth-50"), interconnect("eth-50"), 4, 4, 1
    )
    path = TRACES / "pollux_adaptdl" / "traces" / "bert" / "placements.csv"
    rows = {(r["placement"], r["local_bsz"]): float(r["step_time"])
            for r in csv.DictReader(path.open())}  # fmt: skip
    assert rows[("1111", "12")] > rows[("4", "12")]
    p = get_model("bert")
    assert nw.comm_overhead(p, ((1, 1, 1, 1),), links) > nw.comm_overhead(p, ((4,),), links)


def test_calibration_literals_match_closed_form() -> None:
    for name, factors in nw.calibrate().items():
        assert model_profile(name, "dally-table1").comm.tier_scale == pytest.approx(
            factors, rel=1e-5
        )
        assert get_model(name).comm.tier_scale == (1.0, 1.0, 1.0)  # physics: no factor


@pytest.mark.parametrize("name", DALLY_MODELS)
def test_every_multi_gpu_placement_pays_some_communication(name: str) -> None:
    p = get_model(name)
    for shape in (((2,),), ((1, 1),), ((1,), (1,)), ((4, 4),), ((8,), (8,))):
        assert nw.comm_overhead(p, shape, nw.DALLY_NET) > 0.0


# ----------------------------------------------------------------------------- NICs and links

GBIT = 1e9 / 8.0


def cluster(**kw) -> Cluster:
    spec = {"racks": 2, "machines_per_rack": 4, "gpus_per_machine": 8, "tiers": {
        "machine": "nvswitch", "rack": {"bandwidth_gbps": 400, "latency_us": 0},
        "network": {"bandwidth_gbps": 400, "latency_us": 0}}}  # fmt: skip
    spec.update(kw)
    return Cluster(spec)


def lone_comm(cl: Cluster, gpus, model: str = "resnet50") -> float:
    return nw.placement_overhead(cl, get_model(model), np.asarray(gpus, dtype=np.int64))


def test_a_lone_job_feels_its_nic_speed_and_count() -> None:
    job = list(range(32))  # 4 whole machines of one rack
    fast = lone_comm(cluster(), job)  # one 400 Gb/s NIC per GPU (the Dally layout)
    four = lone_comm(cluster(nics_per_machine=4, nic_gbps=200), job)
    one = lone_comm(cluster(nic_gbps=100), job)
    assert fast < four < one
    # hand-computed: rack stage of 4 machines, each GPU's shard V/8 over its NIC
    v = get_model("resnet50").grad_bytes
    calls = get_model("resnet50").comm.messages  # each pays 14 NVSwitch ring steps of 1 us
    m_stage = 2 * 7 / 8 * v / (900 * GBIT) + calls * 14e-6
    rack = 2 * 3 / 4 * v / 8
    compute = get_model("resnet50").compute_s
    assert fast * compute == pytest.approx(m_stage + rack / (400 * GBIT), rel=1e-9)
    assert four * compute == pytest.approx(m_stage + rack / (100 * GBIT), rel=1e-9)  # 2 GPUs/NIC
    assert one * compute == pytest.approx(m_stage + rack / (12.5 * GBIT), rel=1e-9)  # 8 on 100


def test_a_lone_job_feels_tor_and_spine_oversubscription() -> None:
    job = list(range(32)) + list(range(32, 64))  # two whole racks
    base = lone_comm(cluster(), job)
    tor = [lone_comm(cluster(rack_uplink_oversubscription=r), job) for r in (1, 2, 4, 8)]
    assert tor[0] == base and all(a < b for a, b in itertools.pairwise(tor))
    spine = [lone_comm(cluster(spine_oversubscription=r), job) for r in (1, 2, 4)]
    assert spine[0] == base and spine[1] < spine[2]
    # 8:1: the 32 GPUs of a rack share 32 x 400 / 8 Gb/s on the network stage: 50 Gb/s each
    v = get_model("resnet50").grad_bytes
    net = 2 * 1 / 2 * v / (8 * 4)
    compute = get_model("resnet50").compute_s
    calls = get_model("resnet50").comm.messages
    expect = (
        2 * 7 / 8 * v / (900 * GBIT) + calls * 14e-6
        + 2 * 3 / 4 * v / 8 / (400 * GBIT) + net / (50 * GBIT)
    )  # fmt: skip
    assert tor[3] * compute == pytest.approx(expect, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    gbps=st.lists(st.sampled_from([25, 50, 100, 200, 400, 800]), min_size=2, max_size=2),
    nics=st.sampled_from([1, 2, 4, 8]),
    oversub=st.sampled_from([1.0, 2.0, 3.0]),
    n_gpus=st.sampled_from([2, 6, 8, 12, 16, 40, 64]),
    model=st.sampled_from(["resnet50", "bert-large", "vgg16", "gpt2-medium"]),
)
def test_a_lone_job_is_never_faster_with_less_bandwidth(gbps, nics, oversub, n_gpus, model):
    lo, hi = sorted(gbps)
    job = np.arange(n_gpus) * 1  # packed from GPU 0
    slow = lone_comm(
        cluster(nics_per_machine=nics, nic_gbps=lo, rack_uplink_oversubscription=oversub),
        job,
        model,
    )
    fast = lone_comm(
        cluster(nics_per_machine=nics, nic_gbps=hi, rack_uplink_oversubscription=oversub),
        job,
        model,
    )
    more = lone_comm(
        cluster(nics_per_machine=nics, nic_gbps=lo, rack_uplink_oversubscription=oversub * 2),
        job,
        model,
    )
    assert slow >= fast * (1 - 1e-12)
    assert more >= slow * (1 - 1e-12)


@settings(max_examples=80, deadline=None)
@given(
    n_links=st.integers(1, 6),
    flows=st.lists(
        st.tuples(
            st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True),
            st.floats(0.1, 5.0),
            st.integers(1, 4),
        ),
        min_size=1,
        max_size=8,
    ),
    caps=st.lists(st.floats(0.5, 10.0), min_size=6, max_size=6),
)
def test_maxmin_invariants(n_links, flows, caps):
    """Progressive filling: no link above capacity; no flow above its ceiling; every flow is
    bottlenecked (at its ceiling, or on a saturated link where it has the largest rate)."""
    links = [np.array([x % n_links for x in f[0]]) for f in flows]
    links = [np.unique(x) for x in links]
    ceil = np.array([f[1] for f in flows])
    weight = np.array([float(f[2]) for f in flows])
    cap = np.array(caps[:n_links])
    rates = nw.maxmin_rates(links, cap, ceil, weight)
    load = np.zeros(n_links)
    for ls, r, w in zip(links, rates, weight, strict=True):
        load[ls] += r * w
    assert (load <= cap * (1 + 1e-9)).all()
    assert (rates <= ceil * (1 + 1e-9)).all() and (rates > 0).all()
    for i, ls in enumerate(links):
        if rates[i] >= ceil[i] * (1 - 1e-9):
            continue
        assert any(
            load[link] >= cap[link] * (1 - 1e-9)
            and all(rates[j] <= rates[i] * (1 + 1e-9) for j, lj in enumerate(links) if link in lj)
            for link in ls
        ), (i, rates, load)


def test_maxmin_by_hand() -> None:
    # two flows on a 10-unit link, one capped at 2: 2 and 8
    two = [np.array([0]), np.array([0])]
    got = nw.maxmin_rates(two, np.array([10.0]), np.array([2.0, np.inf]))
    assert got.tolist() == pytest.approx([2.0, 8.0])
    # a flow of weight 3 and one of weight 1 share 8: 2 each per flow
    got = nw.maxmin_rates([np.array([0]), np.array([0])], np.array([8.0]), None, np.array([3, 1]))
    assert got.tolist() == pytest.approx([2.0, 2.0])
    # the classic line: A on links 0 and 1, B on 0, C on 1; capacities 1 and 2: A=B=0.5, C=1.5
    got = nw.maxmin_rates([np.array([0, 1]), np.array([0]), np.array([1])], np.array([1.0, 2.0]))
    assert got.tolist() == pytest.approx([0.5, 0.5, 1.5])


def test_gpus_sharing_a_nic_are_one_job_sharing_with_itself() -> None:
    cl = cluster(gpus_per_machine=4, nics_per_machine=1, nic_gbps=100,
                 tiers={"machine": "pcie", "rack": {"bandwidth_gbps": 100, "latency_us": 0},
                        "network": {"bandwidth_gbps": 100, "latency_us": 0}})  # fmt: skip
    # 2 machines x 2 GPUs: the 2 GPUs of a machine share its NIC (2 flows of V/2 at 50 each)
    two_two = lone_comm(cl, [0, 1, 4, 5])
    v = get_model("resnet50").grad_bytes
    compute = get_model("resnet50").compute_s
    ring = 2 * 1 / 2 * v / (128 * GBIT) + get_model("resnet50").comm.messages * 2 * 5e-6
    assert two_two * compute == pytest.approx(ring + (v / 2) / (50 * GBIT), rel=1e-9)


def test_flat_ring_puts_every_gpu_on_its_nic() -> None:
    """Pollux's testbed (one container per GPU over TCP): 22 is slower than 1111, 44 than 2222."""
    cl = cluster(racks=1, machines_per_rack=4, gpus_per_machine=4, nics_per_machine=1,
                 nic_gbps=50, collective="flat-ring",
                 tiers={"machine": "pcie", "rack": "eth-50", "network": "eth-50"})  # fmt: skip
    f = {p: lone_comm(cl, g, "bert") for p, g in {
        "22": [0, 1, 4, 5], "1111": [0, 4, 8, 12], "44": list(range(8)),
        "2222": [0, 1, 4, 5, 8, 9, 12, 13]}.items()}  # fmt: skip
    assert f["22"] > f["1111"] and f["44"] > f["2222"]


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"nics_per_machine": 9}, "more than gpus_per_machine"),
        ({"nic_gbps": 0}, "greater than 0"),
        ({"nic_gbps": -10}, "greater than 0"),
        ({"nics_per_machine": 2, "nic_gpus": [[0, 1, 2, 3], [4, 5, 6]]}, "exactly once"),
        ({"rack_uplink_oversubscription": 0.5}, "greater than or equal to 1"),
        ({"spine_oversubscription": 0}, "greater than or equal to 1"),
        ({"transport_efficiency": 1.5}, "less than or equal to 1"),
        ({"collective": "tree"}, "hierarchical"),
    ],
)
def test_impossible_layouts_are_clear_errors(fields, match) -> None:
    from dlcluster_gym.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        cluster(**fields)


def test_rail_layout_needs_equal_nic_counts(tmp_path) -> None:
    from dlcluster_gym.config import load_cluster
    from dlcluster_gym.errors import ConfigError

    path = tmp_path / "rails.yaml"
    path.write_text(
        "rail_optimized: true\ngroups:\n"
        "  - {name: a, racks: 1, machines_per_rack: 2, gpus_per_machine: 8, nics_per_machine: 8}\n"
        "  - {name: b, racks: 1, machines_per_rack: 2, gpus_per_machine: 8, nics_per_machine: 4}\n"
    )
    with pytest.raises(ConfigError, match=r"(?s)rails.yaml.*same number of NICs.*a: 8, b: 4"):
        load_cluster(path)


def test_rails_give_each_rail_its_own_uplink() -> None:
    cl = cluster(rail_optimized=True, rack_uplink_oversubscription=2)
    assert cl.num_rails == 8 and cl.num_links == 64 + 2 * 8
    assert cl.link_label(64 + 8 + 3) == "rack 1 rail 3 uplink"
    # rail k of a rack carries NIC k of its 4 machines: 4 x 400 / 2
    assert cl.link_capacity_Bps[64] == pytest.approx(4 * 400 * GBIT / 2)
    job = list(range(64))
    assert lone_comm(cl, job) == pytest.approx(
        lone_comm(cluster(rack_uplink_oversubscription=2), job)
    )


def test_rail_local_traffic_inside_a_rack_is_a_recorded_choice() -> None:
    """Inside a rack, a rail-optimized cluster's flows stay on their own NIC and rail switch
    even between GPUs on different rails (README, network model: as if PXN relayed them over
    NVLink, uncharged): GPUs 0-3 of machine 0 with GPUs 4-7 of machine 1 cost what GPUs 0-3
    of both machines cost, and cross no uplink. Across racks, each NIC's rail uplink."""
    cl = cluster(rail_optimized=True, rack_uplink_oversubscription=2)
    links = SharedLinks(cl)
    same, crossed = [0, 1, 2, 3, 8, 9, 10, 11], [0, 1, 2, 3, 12, 13, 14, 15]
    assert lone_comm(cl, crossed) == lone_comm(cl, same)
    assert (links.links(crossed) < cl.num_nics).all()  # NICs only: no rail uplink, no spine
    wide = links.links([0, 1, 2, 3, 32 + 4, 32 + 5, 32 + 6, 32 + 7])  # machine 4: rack 1
    assert sorted(set(wide.tolist()) - set(range(cl.num_nics))) == [
        64 + r for r in (0, 1, 2, 3)
    ] + [64 + 8 + r for r in (4, 5, 6, 7)]


@pytest.mark.parametrize(
    "fields", [{}, {"nic_gbps": 100}, {"nics_per_machine": 4}, {"rail_optimized": True}]
)
def test_nic_shape_fast_paths_equal_the_general_rule(fields) -> None:
    cl = cluster(**fields)
    rng = np.random.default_rng(3)
    for _ in range(200):
        gpus = rng.choice(cl.num_gpus, size=int(rng.integers(1, 40)), replace=False)
        fast = nw.placement_nic_shape(cl, gpus)
        cl.__dict__["_nic_layout"] = "other"  # force the general rule
        assert nw.placement_nic_shape(cl, gpus) == fast
        del cl.__dict__["_nic_layout"]
