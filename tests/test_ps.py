"""Parameter-server jobs: the perf.ps model (Nearchus III), resources and engine support."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlcluster_gym import simulate
from dlcluster_gym.api import prepare
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_scenario
from dlcluster_gym.errors import ConfigError, InvalidActionError, NotApplicableError
from dlcluster_gym.perf.ps import DTConfig, mu_cap, mu_single, steady_state
from dlcluster_gym.sim.actions import Reconfigure, StartPS, WakeUp
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.workload.ps import PS_MODELS, ps_job

RESNET = PS_MODELS["resnet50"]


def _nic(n: int, gbps: float) -> np.ndarray:
    return np.full(n, gbps * 1e9 / 8)


def _cfg(ps, wk, ps_srv, wk_srv) -> DTConfig:
    return DTConfig(tuple(ps), tuple(wk), tuple(ps_srv), tuple(wk_srv))


def test_table_ii_models_and_parameter_counts() -> None:
    counts = {m.name: m.params_m for m in PS_MODELS.values()}
    assert len(counts) == 10
    assert counts["mobilenet"] == 4.2 and counts["nasnetlarge"] == 84.9
    assert counts["gnn-traffic"] == 0.022 and counts["bilstm"] == 2.7


def test_mu_bottleneck_matches_fig3_and_fig4() -> None:
    assert mu_single([20, 32, 64]).tolist() == [16.0, 21.0, 37.0]
    totals = mu_cap(64, np.array([1, 2, 10])) * np.array([1, 2, 10])
    assert totals[0] == pytest.approx(37.0)
    assert totals[1] == pytest.approx(46.0, abs=3.0)  # Fig. 4: 46 vCPUs with 2 workers
    assert totals[2] == pytest.approx(57.0, abs=3.0)  # ... 57 with 10
    # One 30-vCPU worker on a 20-core server uses 16: efficiency drops, bottleneck "mu".
    perf = steady_state(RESNET, _cfg([5], [20], [0], [1]), np.full(2, 20.0), _nic(2, 10))
    assert perf.node_util[1] == pytest.approx(16.0)
    assert perf.bottleneck == "mu"


def test_speed_tracks_utilized_worker_compute() -> None:
    cores, nic = np.full(6, 20.0), _nic(6, 1)
    for cfg in (
        _cfg([5], [5, 5], [0], [1, 2]),
        _cfg([1], [16, 16], [0], [1, 2]),
        _cfg([2, 2], [10, 10, 10], [0, 1], [2, 3, 4]),
    ):
        perf = steady_state(RESNET, cfg, cores, nic)
        assert perf.node_util[cfg.n_ps :].sum() == pytest.approx(perf.speed * RESNET.wk_cpu_s)


def test_psn_bottleneck_1g_vs_10g_and_same_node() -> None:
    cores = np.full(3, 64.0)
    diff = _cfg([5], [30, 30], [0], [1, 2])
    same = _cfg([5], [20, 20], [0], [0, 0])
    dn1 = steady_state(RESNET, diff, cores, _nic(3, 1))
    dn10 = steady_state(RESNET, diff, cores, _nic(3, 10))
    assert dn1.bottleneck == "psn" and dn10.bottleneck != "psn"
    assert dn1.used < 0.6 * dn10.used  # Fig. 5a: ~53% less utilization on 64-core servers
    assert dn1.ps_net[0] > 0.9  # the saturated PS NIC is what Nearchus detects
    sn1 = steady_state(RESNET, same, cores, _nic(3, 1))
    sn10 = steady_state(RESNET, same, cores, _nic(3, 10))
    assert sn1.speed == sn10.speed  # no traffic leaves the server


def test_more_ps_nodes_spread_traffic_fig5b() -> None:
    cores, nic = np.full(22, 20.0), _nic(22, 1)
    speeds = {}
    for n_ps in (1, 10):
        for n_wk in (2, 8, 11):
            cfg = _cfg([3] * n_ps, [3] * n_wk, range(n_ps), range(n_ps, n_ps + n_wk))
            speeds[n_ps, n_wk] = steady_state(RESNET, cfg, cores, nic).speed
    # One PS stagnates (paper: from 8 workers; our calibration: from ~10) ...
    assert speeds[1, 11] < 0.99 * speeds[1, 2] * 11 / 2
    assert speeds[1, 8] == pytest.approx(speeds[1, 2] * 4, rel=1e-6)
    assert speeds[10, 11] == pytest.approx(speeds[10, 2] * 11 / 2, rel=1e-6)  # linear


def test_psc_bottleneck_when_ps_underprovisioned() -> None:
    perf = steady_state(RESNET, _cfg([0.2], [10, 10], [0], [1, 2]), np.full(3, 20.0), _nic(3, 50))
    assert perf.bottleneck == "psc"
    assert perf.node_util[0] == pytest.approx(0.2)


def _ps_scenario(**kw):
    data = {
        "name": "ps-hand-made",
        "cluster": "nearchus-eval-a",
        "workload": {"kind": "ps", "num_jobs": 1},
        "overheads": {"restart_s": 60},
    }
    data.update(kw)
    return load_scenario(data)


class Scripted:
    """Replays a fixed list of (time, actions)."""

    name = "scripted"
    supports_ps_jobs = True

    def __init__(self, script):
        self.script = dict(script)
        self.views = []

    def schedule(self, view):
        acts = list(self.script.pop(view.now, []))
        self.views.append(view)
        if self.script:
            acts.append(WakeUp(min(self.script)))
        return acts


def _engine(policy, jobs, **kw):
    sc = _ps_scenario(**kw)
    return Engine(sc, Cluster(sc.cluster), jobs, policy, np.random.default_rng(0))


def test_start_and_reconfigure_exact_times() -> None:
    job = ps_job(0, "resnet50", 1.0, 100.0, 0.0)
    small = _cfg([5], [5, 5], [0], [1, 2])
    big = _cfg([5], [10, 10], [0], [1, 2])
    e = _engine(Scripted({0.0: [StartPS(0, small)], 600.0: [Reconfigure(0, big)]}), [job])
    res = e.run()
    s1 = steady_state(RESNET, small, e.cluster.machine_cores, e.cluster.machine_nic_Bps).speed
    s2 = steady_state(RESNET, big, e.cluster.machine_cores, e.cluster.machine_nic_Bps).speed
    left = job.iterations - 600.0 * s1
    assert res.jobs["finish_s"][0] == pytest.approx(600.0 + 60.0 + left / s2)
    assert res.summary["resizes"] == 1
    assert res.timeseries["alloc_vcpus"].tolist()[:2] == [15.0, 25.0]


def test_bad_ps_actions_are_clear_errors() -> None:
    job = ps_job(0, "resnet50", 1.0, 20.0, 0.0)
    over = _cfg([5], [10, 10], [0], [1, 2])
    with pytest.raises(InvalidActionError, match="over its budget of 20"):
        _engine(Scripted({0.0: [StartPS(0, over)]}), [job]).run()
    job = ps_job(0, "resnet50", 1.0, 100.0, 0.0)
    full = _cfg([5], [16, 5], [0], [0, 1])
    with pytest.raises(InvalidActionError, match=r"server 0 has 20\.000 free vCPUs"):
        _engine(Scripted({0.0: [StartPS(0, full)]}), [job]).run()
    with pytest.raises(InvalidActionError, match="server 7 does not exist"):
        _engine(Scripted({0.0: [StartPS(0, _cfg([5], [5], [7], [1]))]}), [job]).run()


def test_samples_are_deterministic_and_independent_of_query_order() -> None:
    job = ps_job(0, "resnet50", 1.0, 100.0, 0.0)
    cfg = _cfg([5], [5, 5], [0], [1, 2])

    def sample(queries):
        out = []

        class P(Scripted):
            def schedule(self, view):
                if view.now in queries:
                    out.append(view.ps.samples(0, 60.0).speed.copy())
                return super().schedule(view)

        script = {0.0: [StartPS(0, cfg)]} | {t: [] for t in queries}
        _engine(P(script), [job]).run()
        return out

    a = sample([600.0])
    b = sample([300.0, 600.0])
    assert a[0].size == 10 and np.array_equal(a[0], b[1])
    assert np.array_equal(a[0][:5], b[0])
    cv_early = a[0][:5].std() / a[0][:5].mean()
    cv_late = a[0][5:].std() / a[0][5:].mean()
    assert cv_late < 0.05 < cv_early  # cold-start fluctuation settles (Nearchus IV)


def test_gpu_policy_on_ps_scenario_is_not_applicable() -> None:
    for policy in ("fcfs-consolidated", "random", "dally"):
        with pytest.raises(NotApplicableError, match="parameter-server jobs"):
            simulate(_ps_scenario(), policy)


def test_fcfs_runs_ps_jobs_at_the_initial_config_without_rescaling() -> None:
    res = simulate("nearchus-multi-a", "fcfs", seed=1)
    s = res.summary
    assert s["jobs_completed"] == s["jobs_total"] == 40
    nearchus = simulate("nearchus-multi-a", "nearchus", seed=1).summary
    assert s["avg_jct_s"] > nearchus["avg_jct_s"]  # no scaling: slower than Nearchus
    assert all(r["overhead_s"] == 0 for r in res.job_rows())  # never restarted


def test_cpu_only_cluster_presets_and_budgets() -> None:
    _, cl, jobs, _ = prepare("nearchus-multi-a")
    assert cl.num_gpus == 0 and cl.machine_vcpus.sum() == 100.0
    assert cl.machine_nic_Bps[0] == 1e9 / 8
    _, cl_b, _, _ = prepare("nearchus-multi-b")
    assert cl_b.machine_vcpus.sum() == 300.0 and cl_b.machine_cores[0] == 64.0
    assert len(jobs) == 40 and all(j.is_ps for j in jobs)
    assert len({(j.model, j.iterations, j.vcpu_budget) for j in jobs}) <= 30
    for name, n, cores in (("a", 9, 20), ("b", 9, 64), ("c", 4, 32), ("d", 22, 20)):
        c = Cluster(f"nearchus-cluster-{name}")
        assert c.num_machines == n and c.machine_cores[0] == cores


def test_server_too_small_for_any_node() -> None:
    sc = _ps_scenario(
        cluster={"racks": 1, "machines_per_rack": 2, "gpus_per_machine": 0,
                 "cpus_per_machine": 8, "allocatable_cpus_per_machine": 0.25}
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"server 0 has 0\.25 allocatable vCPUs"):
        simulate(sc, "nearchus")


def test_ps_jobs_on_one_server_share_its_nic() -> None:
    """Issue 15: two jobs whose PS nodes sit on one 3 Gb/s server split its NIC max-min."""
    from dlcluster_gym.perf.ps import share_nics

    cores, nic = np.full(5, 64.0), _nic(5, 3)
    a = _cfg([4], [30, 30], [0], [1, 2])
    b = _cfg([4], [30, 30], [0], [3, 4])
    alone = steady_state(RESNET, a, cores, nic)
    demand = {0: alone.nic_Bps_used, 1: steady_state(RESNET, b, cores, nic).nic_Bps_used}
    shares = share_nics(demand, nic)
    goodput = 0.96 * nic[0]
    assert alone.bottleneck == "none" and demand[0][0] + demand[1][0] > goodput
    assert shares[0][0] == pytest.approx(0.5) and shares[1][0] == pytest.approx(0.5)
    assert (shares[0][1:] == 1.0).all()  # worker servers carry one job each
    both = steady_state(RESNET, a, cores, nic, nic_share=shares[0])
    assert both.speed < alone.speed and both.bottleneck == "psn"
    assert both.nic_Bps_used[0] == pytest.approx(goodput / 2)
    # a light job keeps its demand; the heavy one gets the rest
    light = {0: np.array([0.1 * goodput]), 1: np.array([2.0 * goodput])}
    got = share_nics(light, nic[:1])
    assert got[0][0] == 1.0  # not limited: keeps its demand
    assert got[1][0] * goodput == pytest.approx(0.9 * goodput)


def _servers(nic_gbps: float) -> dict:
    """Five 64-core servers with one ``nic_gbps`` NIC each."""
    return {"racks": 1, "machines_per_rack": 5, "gpus_per_machine": 0,
            "cpus_per_machine": 64, "memory_gb_per_machine": 256, "nic_gbps": nic_gbps}  # fmt: skip


def _two_job_run(nic_gbps: float, iters: tuple[float, float], **kw):
    """Two ResNet-50 PS jobs whose PS nodes share server 0 (64 cores, ``nic_gbps``), workers
    on servers of their own; each alone (same placement) and both together."""
    cluster = _servers(nic_gbps)
    cfgs = (_cfg([4], [30, 30], [0], [1, 2]), _cfg([4], [30, 30], [0], [3, 4]))
    steps = RESNET.steps_per_epoch

    def run(which):
        jobs = [ps_job(i, "resnet50", iters[k] / steps, 100.0, 0.0) for i, k in enumerate(which)]
        script = {0.0: [StartPS(i, cfgs[k]) for i, k in enumerate(which)]}
        return _engine(Scripted(script), jobs, cluster=cluster, **kw).run().jobs["finish_s"]

    return run((0,))[0], run((1,))[0], run((0, 1))


def test_ps_nic_sharing_in_the_engine_matches_the_hand_computed_share() -> None:
    """Issue 15: two PS jobs with their PS nodes on one 3 Gb/s server each get half its NIC
    goodput while both run (1.96 steps/s instead of their worker-bound 2.5), and the one left
    speeds up again when the other finishes."""
    it_a, it_b = 782.0, 1564.0
    alone_a, alone_b, (both_a, both_b) = _two_job_run(3.0, (it_a, it_b))
    alone_speed = 2 * 30 / RESNET.wk_cpu_s  # worker-bound: 2 workers x 30 vCPUs
    shared = 0.96 * 3e9 / 8 / 2 / RESNET.bytes_per_step  # half the NIC, B bytes per step
    assert shared < alone_speed
    assert alone_a == pytest.approx(it_a / alone_speed, rel=1e-12)
    assert alone_b == pytest.approx(it_b / alone_speed, rel=1e-12)
    assert both_a == pytest.approx(it_a / shared, rel=1e-12)
    assert both_b == pytest.approx(both_a + (it_b - it_a) / alone_speed, rel=1e-12)
    assert both_a > alone_a and both_b > alone_b


def test_ps_jobs_honour_network_ideal_and_contention_off() -> None:
    """Issue 15: on a 1 Gb/s server each job alone is NIC-bound (1.30 steps/s); sharing the
    NIC halves that (on), ``contention: false`` keeps each job's own NIC bound (off), and
    ``network: ideal`` removes the NIC bound (worker-bound, 2.5 steps/s)."""
    it = (782.0, 782.0)
    goodput = 0.96 * 1e9 / 8
    finish = {}
    for name, kw in (("on", {}), ("off", {"contention": False}), ("ideal", {"network": "ideal"})):
        finish[name] = _two_job_run(1.0, it, **kw)[2]
    assert finish["on"] == pytest.approx(782.0 / (goodput / 2 / RESNET.bytes_per_step), rel=1e-12)
    assert finish["off"] == pytest.approx(782.0 / (goodput / RESNET.bytes_per_step), rel=1e-12)
    assert finish["ideal"] == pytest.approx(782.0 / (2 * 30 / RESNET.wk_cpu_s), rel=1e-12)
    assert (finish["ideal"] <= finish["off"]).all() and (finish["off"] <= finish["on"]).all()
    assert (finish["off"] < finish["on"]).all()


def test_ps_view_under_network_ideal_sees_no_nic_limit() -> None:
    """``view.ps.predict`` and the NIC load samples follow ``network: ideal`` too."""
    cfg = _cfg([4], [30, 30], [0], [1, 2])
    job = ps_job(0, "resnet50", 1.0, 100.0, 0.0)

    class P(Scripted):
        def schedule(self, view):
            if view.now == 300.0:
                self.seen = view.ps.predict(0, cfg), view.ps.samples(0, 60.0).ps_net
            return super().schedule(view)

    for kw, bottleneck in (({}, "psn"), ({"network": "ideal"}, "none")):
        pol = P({0.0: [StartPS(0, cfg)], 300.0: []})
        _engine(pol, [job], cluster=_servers(1.0), **kw).run()
        perf, net = pol.seen
        assert perf.bottleneck == bottleneck
        assert net.size == 5 and ((net == 0).all() if kw else (net > 0.5).all())


@settings(max_examples=200, deadline=None)
@given(
    demand=st.lists(st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3), min_size=1,
                    max_size=6),
    gbps=st.lists(st.floats(0.5, 10.0), min_size=3, max_size=3),
)  # fmt: skip
def test_share_nics_is_max_min_fair_per_server(demand, gbps) -> None:
    """Per server: the jobs' NIC allocations never exceed its goodput, an over-subscribed NIC
    is used up, the jobs held below their demand get one equal level, and no job that gets its
    demand asks for more than that level."""
    from dlcluster_gym.perf.ps import NIC_EFFICIENCY, share_nics

    nic = np.asarray(gbps) * 1e9 / 8
    cap = NIC_EFFICIENCY * nic
    # each job's demand is its NIC use alone, so at most the goodput (its own PSN bound)
    d = np.asarray(demand) * cap
    shares = share_nics(dict(enumerate(d)), nic)
    frac = np.stack([shares[j] for j in range(len(d))])
    limited = frac < 1.0
    alloc = np.where(limited, frac * cap, d)
    assert (alloc <= d * (1 + 1e-12)).all()
    assert (alloc.sum(axis=0) <= cap * (1 + 1e-9)).all()
    over = d.sum(axis=0) > cap * (1 + 1e-12)
    np.testing.assert_allclose(alloc.sum(axis=0)[over], cap[over], rtol=1e-9)
    assert not limited[:, ~over].any()  # a NIC that fits every demand limits nobody
    for s in np.flatnonzero(over):
        level = alloc[limited[:, s], s]
        assert level.size and np.ptp(level) <= 1e-9 * cap[s]
        assert (d[~limited[:, s], s] <= level[0] * (1 + 1e-9)).all()
