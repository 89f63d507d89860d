"""Issue 19: the policies' shortcuts (fast paths) give exactly the general loop's results.

Each test runs a policy twice on the same scenario and seed, once with its fast paths and
once with them turned off, and compares every per-job column and the summary bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_traces

from dlcluster_gym.api import prepare
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.sim.engine import Engine


def _run(scenario: str, policy: str, fast: bool, jobs: int = 0, **params):
    return _run_with_policy(scenario, policy, fast, jobs, **params)[0]


def _run_with_policy(scenario: str, policy: str, fast: bool, jobs: int = 0, **params):
    cfg, cluster, job_list, rng = prepare(scenario)
    if jobs:
        job_list = job_list[:jobs]
    pol = make_policy(policy, **params)
    pol.fast_paths = fast
    if hasattr(pol, "base"):  # Cassini: its base policy's shortcuts too
        pol.base.fast_paths = fast
    return Engine(cfg, cluster, job_list, pol, rng).run(), pol


# Not compared: wall time, and the number of engine events (Themis's fast path does not wake
# up for lease renewals that change nothing, so it has fewer events and time-series points).
_UNCOMPARED = ("wall_s", "sim_events")
# Time averages over the time series: the same integrals summed over fewer points, so equal
# up to rounding.
_TIME_AVERAGED = ("gpu_utilization", "avg_link_utilization")


def _assert_same(a, b) -> None:
    for key, col in a.jobs.items():
        np.testing.assert_array_equal(col, b.jobs[key], err_msg=key)
    skip = _UNCOMPARED + _TIME_AVERAGED
    sa = {k: v for k, v in a.summary.items() if k not in skip}
    sb = {k: v for k, v in b.summary.items() if k not in skip}
    assert sa == sb
    for k in _TIME_AVERAGED:
        assert (k in a.summary) == (k in b.summary)
        if k in a.summary:
            assert a.summary[k] == pytest.approx(b.summary[k], rel=1e-12, nan_ok=True), k


@pytest.mark.parametrize(
    ("scenario", "policy", "params"),
    [
        ("dally-batch-8rack", "dally", {}),
        ("dally-batch-8rack", "dally", {"preemption": "relocate"}),
        ("dally-poisson-8rack", "dally", {}),
        ("dally-batch-8rack", "dally-manual", {}),
    ],
)
def test_dally_fast_paths_match_general_loop(scenario, policy, params):
    fast = _run(scenario, policy, True, **params)
    slow = _run(scenario, policy, False, **params)
    _assert_same(fast, slow)
    assert fast.summary["jobs_completed"] > 0


@needs_traces
@pytest.mark.parametrize(
    "scenario",
    [
        "philly-1024gpu",
        "itp-cluster04",
        pytest.param("crius-philly-1280gpu", marks=pytest.mark.slow),  # long queues
    ],
)
def test_dally_fast_paths_match_general_loop_on_trace_prefix(scenario):
    _assert_same(
        _run(scenario, "dally", True, jobs=2000), _run(scenario, "dally", False, jobs=2000)
    )


@pytest.mark.parametrize(
    ("scenario", "policy", "params"),
    [
        ("cassini-testbed-poisson", "themis", {}),
        ("cassini-testbed-poisson", "themis", {"lengths": "attained"}),
        ("cassini-testbed-poisson", "themis", {"lengths": "history"}),
        ("cassini-testbed-poisson", "cassini", {}),
        ("cassini-testbed-poisson", "themis-demand", {}),
        ("cassini-testbed-poisson", "themis-demand", {"lengths": "history"}),
        ("cassini-testbed-poisson", "cassini-demand", {}),
        ("cassini-testbed-poisson", "themis-greedy", {}),
        ("cassini-testbed-poisson", "themis-greedy", {"lengths": "history"}),
        pytest.param("dally-poisson-8rack", "themis", {}, marks=pytest.mark.slow),
    ],
)
def test_themis_fast_paths_match_general_loop(scenario, policy, params):
    fast = _run(scenario, policy, True, **params)
    slow = _run(scenario, policy, False, **params)
    _assert_same(fast, slow)
    assert fast.summary["preemptions"] > 0  # auctions moved or preempted jobs


@needs_traces
@pytest.mark.extended  # CI runs it after the default run (docs/testing.md)
def test_themis_fast_paths_match_general_loop_on_trace_prefix():
    _assert_same(
        _run("itp-cluster04", "themis", True, jobs=800),
        _run("itp-cluster04", "themis", False, jobs=800),
    )


@needs_traces
@pytest.mark.parametrize(
    ("scenario", "policy", "jobs"),
    [
        pytest.param("philly-1024gpu", "themis", 1500, marks=pytest.mark.slow),
        ("itp-cluster04", "themis", 400),
        pytest.param("philly-1024gpu", "cassini", 600, marks=pytest.mark.slow),
        pytest.param("itp-cluster04", "cassini", 300, marks=pytest.mark.slow),
    ],
)
def test_deferred_lease_renewals_match_waking_up_for_each(scenario, policy, jobs):
    """With nobody waiting, one-rack lease renewals are replayed at the next call instead of
    woken up for: same per-job results and the same renewals at the same instants, in far
    fewer engine events."""
    fast, pf = _run_with_policy(scenario, policy, True, jobs)
    slow, ps = _run_with_policy(scenario, policy, False, jobs)
    _assert_same(fast, slow)
    tf, ts = getattr(pf, "base", pf), getattr(ps, "base", ps)
    assert tf.renewals == ts.renewals > 0
    assert tf.auction_times == ts.auction_times
    assert fast.summary["sim_events"] < slow.summary["sim_events"]


def test_nearchus_gpu_skipping_failed_growth_matches_retrying_it():
    fast, pol = _run_with_policy("dally-poisson-4rack", "nearchus-gpu", True)
    slow = _run("dally-poisson-4rack", "nearchus-gpu", False)
    _assert_same(fast, slow)
    assert fast.summary["resizes"] > 0  # jobs grew, so growth attempts were made
    assert pol.skipped_attempts > 0  # the failure memo was used
    assert pol.bounded_skips > 0  # and so was the bound (no efficient placement of any size)
    assert pol.size_skips > 0  # and the search's shape from the free counts


@needs_traces
@pytest.mark.slow
@pytest.mark.parametrize(("scenario", "jobs"), [("philly-1024gpu", 3000), ("itp-cluster04", 1500)])
def test_nearchus_gpu_fast_paths_match_general_loop_on_trace_prefix(scenario, jobs):
    """Issue 19: the growth bound and the failure memo change no decision on trace prefixes
    (on Philly the bound skips most attempts: jobs whose next size is never efficient)."""
    fast, pol = _run_with_policy(scenario, "nearchus-gpu", True, jobs)
    _assert_same(fast, _run(scenario, "nearchus-gpu", False, jobs))
    assert fast.summary["resizes"] > 0 and pol.skipped_attempts > 0 and pol.bounded_skips > 0
    assert pol.size_skips > 0


@needs_traces
@pytest.mark.slow
def test_cassini_local_rescoring_of_incumbent_moves_matches_rebuilding():
    fast, pol = _run_with_policy("itp-cluster04", "cassini", True, 1200)
    _assert_same(fast, _run("itp-cluster04", "cassini", False, 1200))
    assert pol.incumbents_moved > 0  # candidates that move incumbents were chosen


@needs_traces
@pytest.mark.parametrize(
    ("policy", "jobs"),
    [
        ("fcfs+cassini", 400),
        pytest.param("cassini", 1000, marks=pytest.mark.slow),
        pytest.param("dally+cassini", 1000, marks=pytest.mark.slow),
    ],
)
def test_cassini_fast_paths_match_direct_form_on_crius(policy, jobs):
    """On the heterogeneous 1,280-GPU Crius cluster the fast paths give the direct form's
    results. Every job there is an adaptive-parallelism one, profiled from the engine's plan
    phases per exact GPU ids in both forms (``Cassini._plan_profiles``, issue #15 item 2):
    neither the signature cache nor the data-parallel exact-ids cache is consulted."""
    fast, pol = _run_with_policy("crius-philly-1280gpu", policy, True, jobs)
    _assert_same(fast, _run("crius-philly-1280gpu", policy, False, jobs))
    assert pol._plan_cache  # the plans' profiles answered
    assert not pol._profile_cache and not pol.links._signatures


@needs_traces
@pytest.mark.parametrize(
    ("policy", "params"),
    [
        ("themis", {}),
        ("themis", {"lengths": "history"}),
        pytest.param("cassini", {}, marks=pytest.mark.slow),
    ],
)
def test_renewals_while_jobs_wait_that_cannot_bid_match_waking_up_for_each(
    policy, params, monkeypatch
):
    """Jobs wait, but none has a winnable bid on the GPUs that one-rack lease ends release:
    those auctions are renewals only, decided without the arbiter and replayed at the next
    call instead of woken up for (``Themis._defer_waiting``); the same per-job results and
    the same renewals at the same instants as waking up for every lease end."""
    from dlcluster_gym.baselines.themis import Themis

    calls: list[int] = []
    orig = Themis._defer_waiting

    def counted(self, *args):
        calls.append(1)
        return orig(self, *args)

    monkeypatch.setattr(Themis, "_defer_waiting", counted)
    fast, pf = _run_with_policy("itp-cluster04", policy, True, 400, **params)
    assert len(calls) > 100  # the path is taken
    slow, ps = _run_with_policy("itp-cluster04", policy, False, 400, **params)
    _assert_same(fast, slow)
    tf, ts = getattr(pf, "base", pf), getattr(ps, "base", ps)
    assert tf.renewals == ts.renewals > 0
    assert tf.auction_times == ts.auction_times
    assert fast.summary["sim_events"] < slow.summary["sim_events"]


@needs_traces
@pytest.mark.extended  # CI runs it after the default run (docs/testing.md)
def test_themis_auction_of_fitting_bidders_matches_full_auction():
    """The auction that ranks only the bidders whose demand fits the free GPUs (and stops
    once nobody else fits) picks the same winners as ranking every bidder: on ITP-08 every
    lease end is a contested auction (over 10 preemptions per job)."""
    fast = _run("itp-cluster08", "themis", True, jobs=300)
    _assert_same(fast, _run("itp-cluster08", "themis", False, jobs=300))
    assert fast.summary["preemptions"] > 600


@needs_traces
@pytest.mark.slow
def test_cassini_loop_pruning_matches_scoring_every_candidate():
    """Candidates that must keep a loop of the Affinity graph are discarded without being
    profiled or scored, and the search ends when two components have loops or the base
    scores 1: same decisions as scoring every candidate."""
    fast, pol = _run_with_policy("itp-cluster04", "cassini", True, 250)
    slow, ref = _run_with_policy("itp-cluster04", "cassini", False, 250)
    _assert_same(fast, slow)
    assert pol.searches_skipped > 0  # the shortcut was taken
    assert pol.candidates_scored < ref.candidates_scored
    assert pol.incumbents_moved == ref.incumbents_moved


def _rack_scan_placement(plan, n: int) -> np.ndarray:
    """Themis's penalty placement as first written (issue 19 reference): a scan of every
    GPU's rack for the best-fit rack."""
    fpr = plan.free_per_rack
    racks = np.flatnonzero(fpr >= n)
    if racks.size:
        r = int(racks[np.argmin(fpr[racks])])
        return np.flatnonzero(plan.free_mask & (plan.cluster.gpu_rack == r))[:n]
    return np.flatnonzero(plan.free_mask)[:n]


@pytest.mark.parametrize(
    ("scenario", "jobs", "cross", "lengths"),
    [
        ("cassini-testbed-poisson", 0, True, "known"),
        ("cassini-testbed-poisson", 0, True, "attained"),
        ("cassini-testbed-poisson", 0, True, "history"),
        pytest.param("dally-poisson-8rack", 300, True, "known", marks=pytest.mark.slow),
        pytest.param("itp-cluster08", 200, False, "known", marks=needs_traces),  # one rack
        pytest.param(
            "crius-philly-1280gpu", 800, True, "known", marks=[needs_traces, pytest.mark.slow]
        ),
    ],
)
def test_themis_auction_helpers_match_their_general_forms(
    scenario, jobs, cross, lengths, monkeypatch
):
    """At every auction of a run: the bidders' rho from ``_rho_bidders`` (no ``view.live``,
    iterations x compute taken once, the iterations done and remaining from ``_estimates``
    shared with T_ideal and the bid tables) equals ``rho`` bit for bit, and the penalty placement
    from per-rack GPU lists (``_place_penalty``) equals the scan of every GPU's rack, with the
    right spans-racks flag. The compiled contested auction is off here, so that the Python
    form's helpers run (``tests/test_themis_kernel.py`` compares the compiled auction with
    that form)."""
    from dlcluster_gym.baselines import themis as themis_mod
    from dlcluster_gym.baselines.themis import Themis

    monkeypatch.setattr(themis_mod, "contested", None)
    calls = {"rho": 0, "place": 0, "cross": 0}
    rho_bidders, place_penalty = Themis._rho_bidders, Themis._place_penalty

    def check_rho(self, view, ids, dem, n_exp, bidders, est=None):
        got = rho_bidders(self, view, ids, dem, n_exp, bidders, est)
        running = np.arange(ids.size) < n_exp
        np.testing.assert_array_equal(got, self.rho(view, ids, running, bidders=bidders))
        np.testing.assert_array_equal(dem, self._demand[ids])
        calls["rho"] += 1
        return got

    def check_place(self, plan, n):
        gpus, cross = place_penalty(self, plan, n)
        np.testing.assert_array_equal(gpus, _rack_scan_placement(plan, n))
        racks = plan.cluster.gpu_rack[gpus]
        assert cross == bool(racks.min() != racks.max())
        calls["place"] += 1
        calls["cross"] += cross
        return gpus, cross

    monkeypatch.setattr(Themis, "_rho_bidders", check_rho)
    monkeypatch.setattr(Themis, "_place_penalty", check_place)
    res = _run(scenario, "themis", True, jobs=jobs, lengths=lengths)
    assert res.summary["jobs_completed"] > 0
    assert calls["rho"] > 0 and calls["place"] > 0
    assert (calls["cross"] > 0) == cross  # cross-rack placements were checked where they occur


def _replay_pass_per_instant(ends: np.ndarray, cross: np.ndarray, now: float, lease_s: float):
    """The deferred renewals replayed as first written (issue 19 reference): one pass over
    every job per wake-up instant."""
    from dlcluster_gym.baselines.themis import EPS

    ends, times, renewals = ends.copy(), [], 0
    w = float(ends.min())
    while w < now:
        hit = ends <= w + EPS
        assert not (hit & cross).any()
        ends[hit] = w + lease_s
        renewals += int(hit.sum())
        times.append(w)
        w = float(ends.min())
    return ends, times, renewals


@pytest.mark.parametrize("seed", range(6))
def test_themis_deferred_renewal_replay_matches_a_pass_per_instant(seed):
    """``_catch_up`` (sorted single pass, or a heap when leases renew several times before
    the call) renews the same leases at the same instants as a pass over every job per
    instant, equal ends and ends within ``EPS`` of another included."""
    from dlcluster_gym.baselines.themis import EPS, Themis

    rng = np.random.default_rng(seed)
    pol = Themis()
    n, lease = 40, pol.lease_s
    ends = 1e6 + rng.uniform(0.0, lease, n)
    ends[:6] = ends[6]  # a group that renews together
    ends[7] = ends[8] + 0.5 * EPS  # within EPS of another end
    ends[9] = np.nextafter(ends[10], np.inf)
    cross = np.zeros(n, dtype=bool)
    for now in (1e6 + 0.5 * lease, 1e6 + 1.7 * lease, 1e6 + 25.3 * lease):
        jobs = rng.permutation(3 * n)[:n]
        pol._lease_end = np.full(3 * n, np.inf)
        pol._lease_end[jobs] = ends
        pol._cross = np.zeros(3 * n, dtype=bool)
        pol._deferred, pol.renewals, pol.auction_times = jobs, 0, []
        pol._catch_up(now)
        want_ends, want_times, want_renewals = _replay_pass_per_instant(ends, cross, now, lease)
        np.testing.assert_array_equal(pol._lease_end[jobs], want_ends)
        assert pol.auction_times == want_times
        assert pol.renewals == want_renewals > 0


@pytest.mark.parametrize(
    ("scenario", "jobs"),
    [
        ("cassini-testbed-poisson", None),
        pytest.param("philly-1024gpu", 1500, marks=needs_traces),
        pytest.param("itp-cluster04", 400, marks=needs_traces),
    ],
)
def test_themis_uncontested_auctions_and_compiled_rounds_match_general_loop(
    scenario, jobs, monkeypatch
):
    """An auction whose bidders all fit at once (``Themis._uncontested``: no ranking, every
    bidder wins its demand) and the other auctions run compiled (``themis_kernel.contested``)
    give the general loop's per-job results, renewals and auction instants."""
    from dlcluster_gym.baselines import themis as themis_mod

    taken = {"uncontested": 0, "compiled": 0}
    unc, kernel = themis_mod.Themis._uncontested, themis_mod.contested

    def counted_unc(self, *args):
        out = unc(self, *args)
        taken["uncontested"] += out is not None
        return out

    def counted_kernel(*args):
        taken["compiled"] += 1
        return kernel(*args)

    monkeypatch.setattr(themis_mod.Themis, "_uncontested", counted_unc)
    if kernel is not None:
        monkeypatch.setattr(themis_mod, "contested", counted_kernel)
    kw = {"jobs": jobs} if jobs else {}
    fast, pf = _run_with_policy(scenario, "themis", True, **kw)
    assert taken["uncontested"] > 20  # the paths are taken
    assert taken["compiled"] > 20 or kernel is None
    slow, ps = _run_with_policy(scenario, "themis", False, **kw)
    _assert_same(fast, slow)
    assert pf.renewals == ps.renewals
    assert pf.auction_times == ps.auction_times
