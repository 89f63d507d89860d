"""Link contention (perf/contention.py + engine): links crossed, demand, fair-sharing stretch,
time shifts, what is recomputed when, results columns, and contention off == before."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from conftest import Chaos, frac, run_engine
from hypothesis import given, settings
from hypothesis import strategies as st

from dlcluster_gym import BaseScheduler, Migrate, Preempt, SetTimeShift, Start, WakeUp
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_scenario
from dlcluster_gym.perf import network as nw
from dlcluster_gym.perf.contention import (
    UP_TEMPLATES,
    LinkPhases,
    SharedLinks,
    circle_layout,
    comm_profile,
    link_stretch,
    placement_traffic,
    sharing_can_bind,
    up_phases,
    water_level,
)
from dlcluster_gym.perf.geometry import CommProfile, unified_circle
from dlcluster_gym.perf.network import comm_time_s
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.sim.results import Results
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.models import get_model

GBIT = 1e9 / 8.0
LINE = 100 * GBIT  # rack and network tiers of the hand-made clusters: 100 Gb/s, no latency
FLAT_TIERS = {
    "rack": {"bandwidth_gbps": 100, "latency_us": 0},
    "network": {"bandwidth_gbps": 100, "latency_us": 0},
}


class Scripted(BaseScheduler):
    """Applies a fixed script of actions at given instants."""

    name = "scripted"

    def __init__(self, script):
        super().__init__()
        self.script = dict(script)

    def schedule(self, view):
        return self.script.pop(round(view.now, 6), ())


def scenario(contention: bool = True, overheads: dict | None = None, **cluster):
    spec = {"racks": 1, "machines_per_rack": 2, "gpus_per_machine": 2, "tiers": FLAT_TIERS}
    spec.update(cluster)
    data = {
        "name": "contention-hand-made",
        "cluster": spec,
        "workload": {"kind": "synthetic", "num_jobs": 1},
        "contention": contention,
    }
    if overheads is not None:
        data["overheads"] = overheads
    return load_scenario(data)


def nic_scenario(machines: int = 2, **kw):
    """One rack, 2 GPUs per machine, NIC uplinks of 160 Gb/s: two 100 Gb/s jobs over-subscribe."""
    return scenario(machines_per_rack=machines, machine_uplink_gbps=160, **kw)


# ----------------------------------------------------------------------------- links


def test_links_crossed_and_capacities_with_oversubscription():
    cl = Cluster(
        {
            "racks": 2,
            "machines_per_rack": 2,
            "gpus_per_machine": 4,
            "rack_uplink_oversubscription": 2,
        }
    )
    links = SharedLinks(cl)
    assert links.num_links == 16 + 2  # one NIC per GPU, one ToR uplink per rack
    assert links.links([0, 1, 2]).tolist() == []  # one machine
    assert links.links([0, 4]).tolist() == [0, 4]  # machines 0, 1 of rack 0: their NICs
    both = links.links([0, 8])  # machine 0 (rack 0) and machine 2 (rack 1)
    assert both.tolist() == [0, 8, 16, 17]
    assert links.label(17) == "rack 1 ToR uplink" and links.label(5) == "machine 1 NIC 1"
    nic = 400 * GBIT  # one Quantum IB port per GPU
    assert links.capacity_Bps.tolist() == pytest.approx([nic] * 16 + [8 * nic / 2] * 2)
    g = cl.graph  # the machine uplinks and ToR uplinks of the topology graph add up the same
    for m in range(4):
        cap = g.edges[("machine", m), ("tor", int(cl.machine_rack[m]))]["capacity_Bps"]
        assert links.capacity_Bps[:16][cl.nic_machine == m].sum() == pytest.approx(cap)
    for r in range(2):
        cap = g.edges[("tor", r), ("spine", 0)]["capacity_Bps"]
        assert links.capacity_Bps[16 + r] == pytest.approx(cap)
    small = SharedLinks(
        Cluster(
            {"racks": 1, "machines_per_rack": 2, "gpus_per_machine": 4, "machine_uplink_gbps": 80}
        )
    )
    assert small.capacity_Bps.tolist() == pytest.approx([10e9, 10e9, 20e9])


def test_bytes_per_iteration_follow_the_allreduce_stages():
    cl = Cluster({"racks": 2, "machines_per_rack": 2, "gpus_per_machine": 4, "tiers": FLAT_TIERS})
    prof = get_model("resnet50")
    v = prof.comm.volume_scale * prof.grad_bytes
    # machine 0: 2 GPUs, machine 1: 1 GPU (rack 0, k = 2); machine 2: 1 GPU (rack 1, k = 1)
    gpus = [0, 1, 4, 8]
    tr = placement_traffic(cl, prof, gpus)
    nic0, nic1, nic4, nic8, up0, up1 = 0, 1, 4, 8, 16, 17
    assert sorted(set(tr.links.tolist())) == [nic0, nic1, nic4, nic8, up0, up1]
    by = {}
    for link, b in zip(tr.links.tolist(), tr.bytes_per_iter.tolist(), strict=True):
        by[link] = by.get(link, 0.0) + b
    rack_stage = 2 * (2 - 1) / 2 * v  # per machine of rack 0, split over its GPUs' shards
    net = 2 * (2 - 1) / 2 * v  # per rack, split over its shard holders
    expected = {
        nic0: rack_stage / 2 + net / 4,  # GPU 0 holds 1/2 of its machine's shard of rack 0
        nic1: rack_stage / 2 + net / 4,
        nic4: rack_stage + net / 2,
        nic8: net,
        up0: net,
        up1: net,
    }
    assert by == pytest.approx(expected)
    net_params = nw.net_params(cl, 0)
    assert tr.comm_s == pytest.approx(
        comm_time_s(prof, nw.placement_nic_shape(cl, gpus), net_params)
    )
    # the rack stage's flows move at the port speed; its phase is where the stage runs
    rows = tr.links == nic4
    assert tr.rate[rows].max() == pytest.approx(LINE, rel=1e-6)
    assert (tr.start + tr.length <= 1.0 + 1e-12).all() and (tr.start >= 0).all()
    # single machine: no shared link, no traffic
    assert placement_traffic(cl, prof, [0, 1, 2]).links.size == 0


def test_default_capacities_are_not_oversubscribed_by_data_parallel_jobs():
    """One NIC per GPU and no oversubscription: a job's rate on any link is at most the link's
    capacity, and the uplinks are never the bottleneck of a lone job."""
    cl = Cluster("dally-2rack")
    links = SharedLinks(cl)
    for name in ("mobilenetv3", "resnet18", "vgg11", "bert-large"):
        prof = get_model(name)
        for gpus in ([0, 8], [0, 1, 8, 9, 16, 17], [0, 64], [0, 1, 2, 3, 64, 65, 66, 67]):
            tr = links.traffic(prof, np.asarray(gpus))
            assert (tr.rate <= links.capacity_Bps[tr.links] * (1 + 1e-9)).all()
            assert (tr.rate <= cl.rack_link.bandwidth_Bps * tr.flows * (1 + 1e-9)).all()


# ----------------------------------------------------------------------------- phases


def test_data_parallel_is_down_then_up_and_model_parallel_has_six_phases():
    s, d, _ = up_phases("data", 1.0, 0.3)
    assert s.tolist() == pytest.approx([0.7]) and d.tolist() == pytest.approx([0.3])
    p = comm_profile("model", 1.2, 0.3, rate_Bps=10.0)
    ups = list(p.phases)
    assert len(ups) == 3 and len({ph.demand for ph in ups}) == 3  # three Up levels
    gaps = [b.start - a.end for a, b in itertools.pairwise(ups)]
    assert gaps == pytest.approx([0.3, 0.3])  # Down thirds of the 0.9 s of compute between
    assert ups[0].start == pytest.approx(0.3) and ups[-1].end == pytest.approx(1.2)
    # bytes per iteration are those of a data-parallel job with the same Up time and rate
    q = comm_profile("data", 1.2, 0.3, rate_Bps=10.0)
    assert p.mean_demand * 1.2 == pytest.approx(q.mean_demand * 1.2) == pytest.approx(3.0)
    assert sum(ph.duration for ph in ups) == pytest.approx(0.3)
    capped = comm_profile("model", 1.2, 0.3, rate_Bps=10.0, capacity_Bps=11.0)
    assert capped.peak_demand == 11.0  # 13.75 capped at the link


# ----------------------------------------------------------------------------- stretch


def phases_of(parallelism: str, rate: float, flows: int = 1) -> LinkPhases:
    """One job's phases on a link: Up template at ``rate`` (units of the link)."""
    tpl = UP_TEMPLATES[parallelism]
    k = len(tpl.level)
    return LinkPhases(
        np.asarray(tpl.down), np.asarray(tpl.up), np.asarray(tpl.share),
        np.asarray(tpl.level) * rate, np.full(k, float(flows)),
    )  # fmt: skip


def stretch_factors(iters, ups, parallelism, rates, shifts, cap, flows=None):
    flows = flows or [1] * len(rates)
    phs = [phases_of(p, r, f) for p, r, f in zip(parallelism, rates, flows, strict=True)]
    return link_stretch(iters, ups, shifts, phs, cap)


def test_stretch_aligned_shifted_and_partial_overlap():
    def stretch(ups, shifts, rates=(0.625, 0.625), iters=(1.0, 1.0)):
        return stretch_factors(iters, ups, ["data"] * 2, rates, shifts, 1.0).tolist()

    # two 0.3 s Up phases at 0.625 C each: aligned they need 1.25 C -> each byte 1.25x longer
    assert stretch([0.3, 0.3], [0, 0]) == pytest.approx([1.25, 1.25])
    # shifted by half an iteration, Up <= half: they interleave, no stretch (Cassini Fig. 4.2)
    assert stretch([0.3, 0.3], [0, 0.5]) == [1.0, 1.0]
    assert stretch([0.5, 0.5], [0, 0.5]) == [1.0, 1.0]  # exactly half: touching, no overlap
    # Up 0.6 s, shift 0.5 s: 0.2 s of each Up overlaps -> (0.4 + 0.2 * 1.25) / 0.6
    assert stretch([0.6, 0.6], [0, 0.5]) == pytest.approx([0.65 / 0.6] * 2)
    # a shift of a whole iteration (or a negative one) is the same as none
    assert stretch([0.3, 0.3], [0, 1.0]) == pytest.approx([1.25, 1.25])
    assert stretch([0.3, 0.3], [0, -0.5]) == [1.0, 1.0]
    # under capacity: fast path
    assert stretch([0.9, 1.9], [0, 0], rates=(0.5, 0.5), iters=(1.0, 2.0)) == [1.0, 1.0]
    # 0.1 s and 0.2 s periods, Up 0.05 s each, aligned at 0: the short job's every other Up
    # collides with the long one's -> long job 1.25x, short job half its bytes at 1.25x
    got = stretch([0.05, 0.05], [0, 0], iters=(0.1, 0.2))
    assert got == pytest.approx([1.125, 1.25])


def test_max_min_leaves_a_light_flow_alone_and_counts_every_flow():
    # 0.2 C and 1.0 C aligned: max-min gives the light job its 0.2, the heavy one 0.8
    got = stretch_factors([1.0, 1.0], [0.5, 0.5], ["data"] * 2, [0.2, 1.0], [0, 0], 1.0)
    assert got.tolist() == pytest.approx([1.0, 1.25])
    # a job with 3 flows against a job with 1 flow, both at line rate: 4 flows of 1/4 C each
    got = stretch_factors([1.0, 1.0], [0.5, 0.5], ["data"] * 2, [1.0, 1.0], [0, 0], 1.0, [3, 1])
    assert got.tolist() == pytest.approx([1.0 / 0.75, 4.0])


def test_stretch_of_two_aligned_model_parallel_jobs_by_hand():
    r, cap = 1.0, 1.5
    got = stretch_factors([1.0, 1.0], [0.4, 0.4], ["model"] * 2, [r, r], [0, 0], cap)
    # forward 0.5 r x2 = r <= C; backward 2 r > C: 4/3; all-reduce 1.375 r x2 = 2.75 r: 2.75/1.5.
    # Extra Up time over the phases' shares 0.3, 0.3, 0.4 of the Up time.
    expected = 0.3 * 1.0 + 0.3 * (2.0 / 1.5) + 0.4 * (2.75 / 1.5)
    assert got.tolist() == pytest.approx([expected, expected])


def test_a_job_above_the_link_alone_is_capped_not_an_error():
    assert stretch_factors([1.0], [0.5], ["data"], [3.0], [0.0], 1.0).tolist() == [1.0]
    # capped at C each: two aligned jobs at C -> 2x
    got = stretch_factors([1.0, 1.0], [0.5, 0.5], ["data"] * 2, [3.0, 3.0], [0, 0], 1.0)
    assert got.tolist() == pytest.approx([2.0, 2.0])


def brute_force(iters, ups, rates, shifts, cap, horizon, samples=100_000):
    """Fine time grid over ``horizon`` (a common period): per job, extra Up time over its Up
    time, each instant shared max-min (water-filling) among the active jobs."""
    t = (np.arange(samples) + 0.5) * horizon / samples
    dt = horizon / samples
    dem = []
    for it, up, sh, r in zip(iters, ups, shifts, rates, strict=True):
        phase = np.mod(t - sh, it)
        dem.append((phase >= it - up) * min(r, cap))
    dem = np.array(dem)
    alloc = np.zeros_like(dem)
    for i in range(samples):
        d = dem[:, i]
        on = d > 0
        if d.sum() <= cap:
            alloc[:, i] = d
            continue
        left, rest = cap, list(np.argsort(np.where(on, d, np.inf)))
        rest = [j for j in rest if on[j]]
        while rest:
            share = left / len(rest)
            j = rest[0]
            if d[j] <= share:
                alloc[j, i] = d[j]
                left -= d[j]
                rest.pop(0)
            else:
                for k in rest:
                    alloc[k, i] = share
                break
    out = []
    for j, (it, up) in enumerate(zip(iters, ups, strict=True)):
        on = dem[j] > 0
        extra = float((dem[j][on] / alloc[j][on] - 1.0).sum() * dt)
        out.append(1.0 + extra / (up * horizon / it))
    return out


@settings(max_examples=15, deadline=None)
@given(
    period=st.sampled_from([(0.2, 0.2, 0.2), (0.1, 0.2, 0.4), (0.15, 0.3, 0.3)]),
    duty=st.lists(st.floats(0.05, 0.9), min_size=3, max_size=3),
    rates=st.lists(st.floats(0.2, 1.2), min_size=3, max_size=3),
    shifts=st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3),
)
def test_stretch_matches_a_brute_force_time_grid(period, duty, rates, shifts):
    iters = list(period)
    ups = [d * t for d, t in zip(duty, iters, strict=True)]
    sh = [s * t for s, t in zip(shifts, iters, strict=True)]
    got = stretch_factors(iters, ups, ["data"] * 3, rates, sh, 1.0)
    want = brute_force(iters, ups, rates, sh, 1.0, horizon=max(iters), samples=20_000)
    assert got.tolist() == pytest.approx(want, rel=5e-3)


def test_circle_layout_is_geometrys_unified_circle():
    rng = np.random.default_rng(7)
    for _ in range(200):
        times = rng.uniform(0.02, 2.0, int(rng.integers(1, 7)))
        if rng.random() < 0.3:
            times[:] = times[0]
        prec = float(rng.choice([0.005, 0.001, 0.0123]))
        cap = int(rng.choice([64, 512, 2048]))
        profiles = [CommProfile.data_parallel(t, t / 3, 1.0) for t in times]
        c = unified_circle(profiles, precision_s=prec, max_sectors=cap)
        lay = circle_layout(times, prec, cap)
        assert (lay.sector_s, lay.iteration_sectors, lay.perimeter_sectors) == (
            c.sector_s,
            c.iteration_sectors,
            c.perimeter_sectors,
        )


def test_up_templates_conserve_bytes():
    for tpl in UP_TEMPLATES.values():
        assert sum(s * v for s, v in zip(tpl.share, tpl.level, strict=True)) == pytest.approx(1.0)


# ----------------------------------------------------------------------------- engine


def resnet_pair(iters=(100, 100)):
    return [Job(i, "resnet50", 2, n, 1.0, 0.0) for i, n in enumerate(iters)]


def test_two_aligned_jobs_on_one_nic_slow_down_by_the_fair_share():
    sc = nic_scenario()
    cl = Cluster(sc.cluster)
    e = frac(cl, "resnet50", [0, 2])  # exposed comm per iteration (compute 1 s)
    # each job runs its NIC at line rate (1 GPU per machine, no latency): 100 Gb/s on 160 Gb/s
    factor = 2 * LINE / (160 * GBIT)
    assert factor == pytest.approx(1.25)
    res = run_engine(sc, resnet_pair(), Scripted({0.0: [Start(0, (0, 2)), Start(1, (1, 3))]}))[1]
    t_iter = 1.0 + e * factor
    assert res.jobs["finish_s"].tolist() == pytest.approx([100 * t_iter] * 2)
    assert res.jobs["contention_s"].tolist() == pytest.approx([100 * e * (factor - 1)] * 2)
    slow = (1 + e * factor) / (1 + e)
    assert res.jobs["contention_slowdown"].tolist() == pytest.approx([slow, slow])
    assert res.summary["avg_contention_slowdown"] == pytest.approx(slow)
    # at t = 0 both NIC uplinks carry 2 jobs x line rate x (Up / stretched iteration)
    util = 2 * LINE * e / t_iter / (160 * GBIT)
    ts = res.timeseries
    assert ts["link_util_mean"][0] == pytest.approx(util)
    assert ts["link_util_max"][0] == pytest.approx(util)
    assert ts["links_active"][0] == 2 and ts["links_contended"][0] == 2
    assert ts["links_active"][-1] == 0 and ts["link_util_max"][-1] == 0.0


def test_same_jobs_without_contention_or_with_half_iteration_shift_do_not_slow_down():
    cl = Cluster(nic_scenario().cluster)
    e = frac(cl, "resnet50", [0, 2])
    t_iter = 1.0 + e
    assert e <= t_iter / 2  # Up fits in half an iteration
    off = run_engine(
        nic_scenario(contention=False),
        resnet_pair(),
        Scripted({0.0: [Start(0, (0, 2)), Start(1, (1, 3))]}),
    )[1]
    assert off.jobs["finish_s"].tolist() == pytest.approx([100 * t_iter] * 2)
    shifted = run_engine(
        nic_scenario(),
        resnet_pair(),
        Scripted({0.0: [Start(0, (0, 2)), Start(1, (1, 3), time_shift_s=t_iter / 2)]}),
    )[1]
    assert shifted.jobs["finish_s"].tolist() == pytest.approx([100 * t_iter] * 2)
    assert shifted.jobs["contention_s"].tolist() == [0.0, 0.0]


def test_set_time_shift_mid_run_removes_the_slowdown_from_then_on():
    sc = nic_scenario()
    e = frac(Cluster(sc.cluster), "resnet50", [0, 2])
    slow, fast = 1.0 + 1.25 * e, 1.0 + e
    script = {
        0.0: [Start(0, (0, 2)), Start(1, (1, 3)), WakeUp(10.0)],
        10.0: [SetTimeShift(1, fast / 2)],
    }
    res = run_engine(sc, resnet_pair(), Scripted(script))[1]
    done = 10.0 / slow
    assert res.jobs["finish_s"].tolist() == pytest.approx([10.0 + (100 - done) * fast] * 2)
    # and shifting back to aligned brings it back
    script = {
        0.0: [Start(0, (0, 2)), Start(1, (1, 3), time_shift_s=fast / 2), WakeUp(10.0)],
        10.0: [SetTimeShift(1, 0.0)],
    }
    res = run_engine(sc, resnet_pair(), Scripted(script))[1]
    done = 10.0 / fast
    assert res.jobs["finish_s"].tolist() == pytest.approx([10.0 + (100 - done) * slow] * 2)


def test_a_finishing_job_removes_the_others_slowdown():
    sc = nic_scenario()
    e = frac(Cluster(sc.cluster), "resnet50", [0, 2])
    slow, fast = 1.0 + 1.25 * e, 1.0 + e
    res = run_engine(
        sc, resnet_pair((100, 300)), Scripted({0.0: [Start(0, (0, 2)), Start(1, (1, 3))]})
    )[1]
    t1 = 100 * slow
    assert res.jobs["finish_s"].tolist() == pytest.approx([t1, t1 + 200 * fast])
    assert res.jobs["contention_s"].tolist() == pytest.approx([100 * 0.25 * e] * 2)


def test_preemption_releases_the_link_and_restart_rejoins_it():
    sc = nic_scenario(overheads={"checkpoint_s": 0.0, "restore_s": 0.0, "restart_s": 0.0})
    e = frac(Cluster(sc.cluster), "resnet50", [0, 2])
    slow, fast = 1.0 + 1.25 * e, 1.0 + e
    script = {
        0.0: [Start(0, (0, 2)), Start(1, (1, 3)), WakeUp(10.0)],
        10.0: [Preempt(1), WakeUp(20.0)],
        20.0: [Start(1, (1, 3))],
    }
    res = run_engine(sc, resnet_pair(), Scripted(script))[1]
    d0 = 10.0 / slow + 10.0 / fast  # job 0: shared, then alone
    d1 = 10.0 / slow
    t0 = 20.0 + (100 - d0) * slow  # shared again until job 0 finishes
    t1 = t0 + (d0 - d1) * fast  # job 1 alone for the iterations it is behind
    assert res.jobs["finish_s"].tolist() == pytest.approx([t0, t1])
    assert t1 == pytest.approx(t0 + 10.0)


def test_migration_into_one_machine_speeds_up_the_other_job():
    sc = nic_scenario(machines=3, overheads={"checkpoint_s": 0.0, "restore_s": 0.0})
    cl = Cluster(sc.cluster)
    e = frac(cl, "resnet50", [0, 2])
    slow, fast = 1.0 + 1.25 * e, 1.0 + e
    script = {
        0.0: [Start(0, (0, 2)), Start(1, (1, 3)), WakeUp(10.0)],
        10.0: [Migrate(1, (4, 5))],  # machine 2 alone: job 1 leaves both NICs
    }
    res = run_engine(sc, resnet_pair(), Scripted(script))[1]
    assert res.jobs["finish_s"][0] == pytest.approx(10.0 + (100 - 10.0 / slow) * fast)
    e1 = frac(cl, "resnet50", [4, 5])
    assert res.jobs["finish_s"][1] == pytest.approx(10.0 + (100 - 10.0 / slow) * (1.0 + e1))


def test_jobs_on_disjoint_links_do_not_affect_each_other():
    sc = nic_scenario(machines=4)
    e = frac(Cluster(sc.cluster), "resnet50", [0, 2])
    jobs = [Job(i, "resnet50", 2, 100, 1.0, 0.0) for i in range(3)]
    script = {0.0: [Start(0, (0, 2)), Start(1, (1, 3)), Start(2, (4, 6))]}
    res = run_engine(sc, jobs, Scripted(script))[1]
    assert res.jobs["finish_s"].tolist() == pytest.approx(
        [100 * (1 + 1.25 * e)] * 2 + [100 * (1 + e)]
    )


def test_tor_uplink_contention_across_racks():
    # 2 racks x 1 machine x 2 GPUs; NICs 2 x 100 Gb/s; ToR uplinks 200 / 1.25 = 160 Gb/s
    sc = scenario(racks=2, machines_per_rack=1, rack_uplink_oversubscription=1.25)
    e = frac(Cluster(sc.cluster), "resnet50", [0, 2])
    res = run_engine(sc, resnet_pair(), Scripted({0.0: [Start(0, (0, 2)), Start(1, (1, 3))]}))[1]
    assert res.jobs["finish_s"].tolist() == pytest.approx([100 * (1 + 1.25 * e)] * 2)
    assert res.timeseries["links_contended"][0] == 2  # both ToR uplinks, not the NICs
    assert res.timeseries["links_active"][0] == 6  # 4 NICs (one per GPU) + 2 ToR uplinks


# ----------------------------------------------------------------------------- whole runs


def run(sc, policy="fcfs", seed=0, watch: list | None = None):
    """Run ``policy``; with ``watch`` a list, append the largest unclipped carried load /
    capacity over the links (``Engine.link_load_ratio``) after every change of state."""
    cfg = load_scenario(sc) if not hasattr(sc, "model_dump") else sc
    from dlcluster_gym.api import rngs
    from dlcluster_gym.scenario.build import build_workload

    cluster = Cluster(cfg.cluster)
    wl, pol = rngs(cfg.seed)
    jobs = build_workload(cfg, cluster, wl)
    eng = Engine(cfg, cluster, jobs, make_policy(policy), pol, record_events=True)
    if watch is not None:
        watch_links(eng, watch)
    return eng.run()


def watch_links(eng: Engine, out: list) -> None:
    """Record ``eng.link_load_ratio().max()`` into ``out`` at every decision instant (after
    the instant's events) and after every batch of actions is applied."""
    apply, decide = eng.apply, eng._decide

    def look() -> None:
        out.append(float(eng.link_load_ratio().max()))

    def watched_apply(actions):
        apply(actions)
        look()

    def watched_decide(view):
        look()
        return decide(view)

    eng.apply, eng._decide = watched_apply, watched_decide


def with_(name: str, **kw):
    data = load_scenario(name).model_dump()
    cluster = kw.pop("cluster", {})
    data["cluster"].update(cluster)
    data.update(kw)
    return load_scenario(data)


def test_sharing_is_on_by_default_and_skipped_where_it_cannot_bind():
    a = run(with_("dally-poisson-2rack", contention=False))
    b = run(load_scenario("dally-poisson-2rack"))  # no flag: sharing on
    assert load_scenario("dally-poisson-2rack").contention
    # one NIC per GPU, no oversubscription, no spine link: no link can be over-subscribed,
    # so the engine skips the bookkeeping and the results are bit-identical
    assert not sharing_can_bind(Cluster(load_scenario("dally-poisson-2rack").cluster))
    assert a.events == b.events
    np.testing.assert_array_equal(a.jobs["finish_s"], b.jobs["finish_s"])
    assert set(b.timeseries) == {"t", "busy_gpus", "waiting", "running", "remaining"}
    # the same cluster with its ToR uplinks over-subscribed does model the links
    c = run(with_("dally-poisson-2rack", cluster={"rack_uplink_oversubscription": 2}))
    assert "avg_link_utilization" in c.summary and "links_active" in c.timeseries
    for fields in ({"nics_per_machine": 4}, {"spine_oversubscription": 2}):
        assert sharing_can_bind(Cluster({"racks": 2, "machines_per_rack": 2,
                                         "gpus_per_machine": 8, **fields}))  # fmt: skip


def contended():
    """dally-poisson-2rack (first 150 jobs), ToR uplinks over-subscribed 4:1, contention on."""
    data = load_scenario("dally-poisson-2rack").model_dump()
    data["cluster"]["rack_uplink_oversubscription"] = 4
    data["workload"]["max_jobs"] = 150
    data["contention"] = True
    return load_scenario(data)


@pytest.fixture(scope="module")
def contended_watched():
    ratios: list[float] = []
    return run(contended(), "random", seed=3, watch=ratios), ratios


@pytest.fixture(scope="module")
def contended_run(contended_watched):
    return contended_watched[0]


def test_contention_on_is_deterministic_and_slows_jobs_on_oversubscribed_links(
    contended_watched,
):
    a, ratios = contended_watched
    b = run(contended(), "random", seed=3)
    assert a.events == b.events
    for k in a.jobs:
        np.testing.assert_array_equal(a.jobs[k], b.jobs[k])
    for k in a.timeseries:
        np.testing.assert_array_equal(a.timeseries[k], b.timeseries[k])
    assert a.summary["jobs_completed"] == a.summary["jobs_total"]
    assert a.summary["avg_contention_slowdown"] > 1.0
    assert (a.jobs["contention_s"] >= -1e-9).all()
    assert (a.jobs["contention_slowdown"] >= 1.0 - 1e-12).all()
    slowed = a.jobs["contention_s"] > 0
    assert slowed.any() and set(a.jobs["tiers"][slowed]) <= {
        "network",
        "rack|network",
        "machine|network",
        "machine|rack|network",
    }
    ts = a.timeseries
    assert ((ts["link_util_mean"] >= 0) & (ts["link_util_mean"] <= ts["link_util_max"])).all()
    assert ts["links_contended"].max() > 0 and 0 < a.summary["avg_link_utilization"] <= 1
    # no link carries more than its capacity: the unclipped carried load (the recorded
    # utilization is clipped at 1, so it could not show an overload)
    assert len(ratios) > 100 and max(ratios) <= 1.0 + 1e-9
    assert max(ratios) > 0.5  # the links do carry load: the bound is not vacuous


@pytest.mark.parametrize("preset", ["pollux-testbed-poisson", "cassini-testbed-poisson-mp"])
def test_no_link_carries_more_than_its_capacity_on_shipped_presets(preset):
    """Presets whose links bind (NICs shared by 4 GPUs, the 50 Gb/s testbed link): the
    unclipped carried load stays within capacity at every state (up to 0.96 on Pollux)."""
    ratios: list[float] = []
    res = run(preset, "fcfs", watch=ratios)
    assert res.summary["avg_contention_slowdown"] > 1.0  # sharing binds here
    assert 0.5 < max(ratios) <= 1.0 + 1e-9


def test_contention_results_save_and_load(tmp_path, contended_run):
    res = contended_run
    out = res.save(tmp_path / "r")
    back = Results.load(out)
    for k in ("contention_s", "contention_slowdown"):
        np.testing.assert_allclose(back.jobs[k], res.jobs[k])
    for k in ("link_util_mean", "link_util_max", "links_active", "links_contended"):
        np.testing.assert_allclose(back.timeseries[k], res.timeseries[k])
    assert back.summary["avg_contention_slowdown"] == pytest.approx(
        res.summary["avg_contention_slowdown"]
    )
    assert "contention_s" in (out / "jobs.csv").read_text().splitlines()[0].split(",")
    assert "link_util_mean" in (out / "timeseries.csv").read_text().splitlines()[0].split(",")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(out / "jobs.parquet")
    assert table.column("contention_s").to_pylist() == pytest.approx(res.jobs["contention_s"])


def test_invalid_time_shift_is_rejected():
    from dlcluster_gym.errors import InvalidActionError

    sc = nic_scenario()
    with pytest.raises(InvalidActionError, match="time shift must be finite"):
        run_engine(sc, resnet_pair(), Scripted({0.0: [Start(0, (0, 2), time_shift_s=math.nan)]}))


def chaos_engine(seed: int, oversub: float) -> tuple[Engine, list[float]]:
    """8 random jobs under :class:`Chaos` on 2 racks x 2 machines x 2 GPUs whose ToR uplinks
    are over-subscribed ``oversub``:1; the list receives the links' largest unclipped load."""
    sc = scenario(
        racks=2,
        machines_per_rack=2,
        machine_uplink_gbps=120,
        rack_uplink_oversubscription=oversub,
        overheads={"checkpoint_s": 1.0, "restore_s": 1.0, "restart_s": 1.0},
    )
    rng = np.random.default_rng(seed)
    models = ["resnet50", "vgg11", "gpt1", "dlrm", "bert-large"]
    jobs = [
        Job(
            i,
            str(rng.choice(models)),
            int(rng.choice([1, 2, 3, 4])),
            20,
            1.0,
            float(rng.uniform(0, 100)),
        )
        for i in range(8)
    ]
    eng = Engine(sc, Cluster(sc.cluster), jobs, Chaos(), np.random.default_rng(seed),
                 record_events=True)  # fmt: skip
    ratios: list[float] = []
    watch_links(eng, ratios)
    return eng, ratios


# The one-shot stretch (``perf.contention.link_stretch``) computes each job's slow-down against
# the others' *unstretched* phases, so where a link's summed demand is about twice its
# capacity the stretched iterations alone could carry more bytes than the link holds. Chaos
# runs (this module's random workload, seeds 0-1499) found it before the fix: none at 1:1 ToR
# uplinks (largest 0.877), 4 of 1,500 runs at 2:1 (up to 13.5 %, seed 99: three DLRM jobs and
# a VGG11 on one ToR uplink), 37 of 1,500 at 4:1 (up to 15.8 %, seed 803).
# ``perf.contention.conserve_capacity`` now scales the slowed jobs' extra time until the
# link's time-averaged load fits; these two were the worst reproducers.
@pytest.mark.parametrize(("seed", "oversub"), [(99, 2.0), (803, 4.0)])
def test_heavy_sharing_keeps_every_link_within_capacity(seed, oversub):
    eng, ratios = chaos_engine(seed, oversub)
    eng.run()
    assert max(ratios) <= 1.0 + 1e-9
    assert max(ratios) > 0.99  # the bound binds here: these links are full, not idle


def test_conserve_capacity_by_hand():
    from dlcluster_gym.perf.contention import conserve_capacity

    # two jobs, 1 s compute + 1 s comm each, sending 10 bytes per Up second for 1 s (10 B per
    # iteration) on a 5 B/s link, slowed 1.5x by the one-shot stretch: carried
    # 2 x 10 / 2.5 = 8 B/s > 5, so the common scale k solves 2 x 10 / (2 + 0.5 k) = 5: k = 4
    one = np.ones(2)
    got = conserve_capacity(np.array([1.5, 1.5]), one, one, one, 10 * one, 5.0)
    assert got == pytest.approx([3.0, 3.0])
    # a job the link does not slow keeps 1 and the slowed one absorbs the whole excess:
    # 10 / 2 + 10 / (2 + 0.5 k) = 8, so 10 / (2 + 0.5 k) = 3, k = 8/3, factor 1 + 0.5 k = 7/3
    got = conserve_capacity(np.array([1.0, 1.5]), one, one, one, 10 * one, 8.0)
    assert got[0] == 1.0 and got[1] == pytest.approx(7 / 3)
    # a load that fits is returned unchanged
    same = np.array([1.2, 1.0])
    assert conserve_capacity(same, one, one, one, one, 100.0).tolist() == [1.2, 1.0]


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), oversub=st.sampled_from([1.0, 2.0, 4.0]))
def test_random_starts_preemptions_migrations_and_shifts_keep_the_books(seed, oversub):
    eng, ratios = chaos_engine(seed, oversub)
    jobs = eng.jobs
    res = eng.run()
    assert max(ratios) <= 1.0 + 1e-9  # no link carries more than its capacity
    j = res.jobs
    assert res.summary["jobs_completed"] == len(jobs)
    assert j["compute_s"].tolist() == pytest.approx([20.0] * len(jobs))
    assert (j["contention_s"] >= -1e-9).all() and (j["comm_s"] >= j["contention_s"] - 1e-9).all()
    assert (j["finish_s"] > j["arrival_s"]).all()
    # every job left its links: the link books are empty again
    assert not eng._job_links and not eng._link_stretch
    assert (eng._link_count == 0).all()
    assert np.abs(eng._link_peak).max() == 0.0 and np.abs(eng._link_load).max() == 0.0
    assert all(not members for members in eng._link_jobs)
    ts = res.timeseries
    assert (ts["link_util_max"] >= 0).all()


# ----------------------------------------------------------------------------- max-min level


def progressive_filling(demands: list[float], capacity: float) -> list[float]:
    """Textbook max-min fair shares of single flows (the oracle for ``water_level``): serve
    flows from the smallest demand up, each getting min(demand, what is left / flows left)."""
    out = [0.0] * len(demands)
    left = capacity
    order = sorted(range(len(demands)), key=demands.__getitem__)
    for k, i in enumerate(order):
        out[i] = min(demands[i], left / (len(order) - k))
        left -= out[i]
    return out


@st.composite
def oversubscribed_rows(draw):
    """Rows of jobs on one link, each job with 0-4 flows of one per-flow demand (``inf`` where
    it has none), every row's summed demand 1.01-20x the capacity."""
    n = draw(st.integers(1, 6))
    rows = draw(st.integers(1, 4))
    capacity = draw(st.floats(0.1, 10.0))
    demand = np.array(draw(st.lists(st.lists(st.floats(0.01, 4.0), min_size=n, max_size=n),
                                    min_size=rows, max_size=rows)))  # fmt: skip
    flows = np.array(draw(st.lists(st.lists(st.integers(0, 4), min_size=n, max_size=n),
                                   min_size=rows, max_size=rows)), dtype=float)  # fmt: skip
    flows[:, 0] = np.maximum(flows[:, 0], 1.0)  # every row has a flow
    squeeze = np.array(draw(st.lists(st.floats(1.01, 20.0), min_size=rows, max_size=rows)))
    demand *= (squeeze * capacity / (demand * flows).sum(axis=1))[:, None]
    return np.where(flows > 0, demand, np.inf), flows, capacity


@settings(max_examples=300, deadline=None)
@given(oversubscribed_rows())
def test_water_level_is_max_min_fair_with_several_flows_per_job(case):
    per_flow, flows, capacity = case
    level = water_level(per_flow, flows, capacity)
    has = flows > 0
    alloc = np.where(has, np.minimum(per_flow, level[:, None]), 0.0)  # each flow's share
    carried = (alloc * flows).sum(axis=1)
    # no row allocates more than the capacity, and an over-subscribed row uses all of it
    assert (carried <= capacity * (1 + 1e-9)).all()
    assert carried == pytest.approx(np.full(len(level), capacity), rel=1e-9)
    # max-min: some flow is held below its demand, and it gets the level, which no other
    # flow exceeds, so with the capacity used up it could gain only from flows at or below it
    capped = has & (per_flow > level[:, None] * (1 + 1e-12))
    assert capped.any(axis=1).all()
    assert (alloc <= level[:, None] * (1 + 1e-12)).all()
    # every flow gets min(demand, level): the same shares as progressive filling flow by flow
    for i in range(len(level)):
        single = [float(d) for d, f in zip(per_flow[i], flows[i], strict=True)
                  for _ in range(int(f))]  # fmt: skip
        want = progressive_filling(single, capacity)
        got = [float(min(d, level[i])) for d in single]
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
