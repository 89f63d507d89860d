"""Themis's compiled arbiter round (``baselines.themis_kernel``) against the Python form:
the bid tables (``bid_tables_scalar``, or the demand bids), ``arbitrate`` and
``partial_fractions``, on random rounds drawn from few distinct values, so that
improvements tie often. Winners and lease fractions must be the same bits."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym.baselines.themis import arbitrate, bid_tables_scalar, partial_fractions
from dlcluster_gym.baselines.themis_kernel import HAVE_NUMBA, auction_round

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="the kernel needs numba")

LEASE_S = 600.0


def _python_round(d, held, tunable, rho, share, ideal, free, tuned, partial):
    """``Themis._round``'s Python form: (GPUs won, lease fraction) per bidder position."""
    n = d.size
    if tuned:
        columns = [
            (k, int(d[k]), int(held[k]), 1 if tunable[k] else int(d[k]), float(rho[k]),
             float(share[k]), float(ideal[k]))
            for k in range(n)
        ]  # fmt: skip
        # every position "runs" with the GPUs it holds (held == demand for a waiting one)
        group, bidders = bid_tables_scalar(columns, n, free, LEASE_S)
    else:
        group = [k for k in range(n) if d[k] <= free]
        bidders = [
            (float(rho[k] + LEASE_S / ideal[k]), ((int(d[k]), float(rho[k])),)) for k in group
        ]
    won_py = np.zeros(n, dtype=np.int64)
    frac_py = np.ones(n)
    if not group:
        return won_py, frac_py
    won = arbitrate(bidders, free)
    frac = partial_fractions(bidders, free, won) if partial else [1.0] * len(group)
    for i, k in enumerate(group):
        won_py[k] = won[i]
        frac_py[k] = frac[i]
    return won_py, frac_py


def _draw(rng: np.random.Generator, n: int, tuned: bool):
    d = rng.choice([1, 2, 3, 4, 6, 8, 16], size=n).astype(np.int64)
    held = d.copy()
    if tuned:  # some hold fewer GPUs than they demand (a power of two below it)
        short = rng.random(n) < 0.3
        for k in np.flatnonzero(short & (d > 1)):
            held[k] = 1 << int(rng.integers(0, (int(d[k]) - 1).bit_length()))
    tunable = rng.random(n) < (0.7 if tuned else 0.0)
    share = rng.choice([0.0, 0.001, 0.01, 0.05, 0.25], size=n) if tuned else np.zeros(n)
    # rho = the waiting part + the remaining run on the GPUs held (share x demand / held)
    rho = rng.choice([0.5, 1.0, 1.25, 2.0, 3.0], size=n) + share * (d / held)
    ideal = rng.choice([600.0, 1200.0, 3000.0, 1e5], size=n)
    return d, held, tunable, rho, share, ideal


@pytest.mark.parametrize("tuned", [True, False])
@pytest.mark.parametrize("partial", [True, False])
def test_compiled_round_matches_python_form(tuned: bool, partial: bool) -> None:
    rng = np.random.default_rng(20261130 + 2 * tuned + partial)
    partial_paid = contested = 0
    for _ in range(600):
        n = int(rng.integers(1, 14))
        d, held, tunable, rho, share, ideal = _draw(rng, n, tuned)
        free = int(rng.integers(1, 40))
        want = _python_round(d, held, tunable, rho, share, ideal, free, tuned, partial)
        got = auction_round(d, held, tunable & tuned, rho, share, ideal, free, LEASE_S,
                            tuned, partial)  # fmt: skip
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1].tobytes() == want[1].tobytes(), (got[1], want[1])
        assert int(got[0].sum()) <= free
        partial_paid += int((want[1] < 1.0).any())
        contested += int(d[want[0] == 0].size > 0)
    # the draws reach the interesting cases: losers, and winners paying a partial allocation
    assert contested > 100
    if partial:
        assert partial_paid > 10


def test_compiled_round_many_bidders_and_pruned_counts() -> None:
    """More bidders of one count than can win (the per-count pruning of the bid tables and
    of the single-bid knapsack), on a cluster-sized offer."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        n = int(rng.integers(30, 120))
        d, held, tunable, rho, share, ideal = _draw(rng, n, True)
        free = int(rng.integers(1, 200))
        for tuned in (True, False):
            t = tunable & tuned
            s = share if tuned else np.zeros(n)
            want = _python_round(d, held if tuned else d, t, rho, s, ideal, free, tuned, True)
            got = auction_round(d, held if tuned else d, t, rho, s, ideal, free, LEASE_S,
                                tuned, True)  # fmt: skip
            np.testing.assert_array_equal(got[0], want[0])
            assert got[1].tobytes() == want[1].tobytes()


def test_compiled_round_degenerate_inputs() -> None:
    empty_i = np.zeros(0, dtype=np.int64)
    empty_f = np.zeros(0)
    won, frac = auction_round(empty_i, empty_i, np.zeros(0, dtype=bool), empty_f, empty_f,
                              empty_f, 8, LEASE_S, True, True)  # fmt: skip
    assert won.size == 0 and frac.size == 0
    one = np.array([4], dtype=np.int64)
    args = (one, one, np.array([True]), np.array([1.0]), np.array([0.1]), np.array([600.0]))
    won, frac = auction_round(*args, 0, LEASE_S, True, True)  # nothing on offer
    assert won.tolist() == [0] and frac.tolist() == [1.0]
    won, frac = auction_round(*args, 3, LEASE_S, True, True)  # its demand does not fit
    want = _python_round(*args, 3, True, True)
    assert won.tolist() == want[0].tolist() == [2]
    assert frac.tolist() == want[1].tolist() == [1.0]


@pytest.mark.parametrize(
    ("scenario", "policy", "params"),
    [
        ("cassini-testbed-poisson", "themis", {}),
        ("cassini-testbed-poisson", "themis", {"lengths": "history"}),
        ("cassini-testbed-poisson", "themis-demand", {}),
        ("dally-poisson-4rack", "themis", {}),
        ("dally-poisson-4rack", "themis", {"partial_allocation": False, "fairness_knob": 0.5}),
    ],
)
def test_compiled_contested_auction_matches_python_rounds(
    monkeypatch: pytest.MonkeyPatch, scenario: str, policy: str, params: dict
) -> None:
    """Every contested auction of a run is decided twice: by the compiled arbiter
    (``Themis._contested``: ranking, filter and rounds in one call) and by the Python form
    (``Themis._ranked_rounds``) on the same state; the winners, their GPUs, their leases and
    the partial payments must be the same bits."""
    from dlcluster_gym.api import simulate
    from dlcluster_gym.baselines.themis import Themis

    seen = {"calls": 0, "wins": 0, "partial": 0, "last_round": 0}
    compiled_form = Themis._contested

    def both(self, view, plan, waiting, running, is_exp, now):
        paid, partial = self._paid_until.copy(), self.partial_leases
        paying = int((self._paid_until > now + 1e-9).sum())
        want = self._ranked_rounds(view, plan, waiting, running, is_exp, now)
        want_paid, want_partial = self._paid_until.copy(), self.partial_leases
        self._paid_until[:] = paid
        self.partial_leases = partial
        got = compiled_form(self, view, plan, waiting, running, is_exp, now)
        assert got == want
        np.testing.assert_array_equal(self._paid_until, want_paid)
        assert self.partial_leases == want_partial
        seen["calls"] += 1
        seen["wins"] += len(got)
        seen["partial"] += sum(lease < self.lease_s for _, _, lease in got)
        seen["last_round"] += paying > 0
        return got

    monkeypatch.setattr(Themis, "_contested", both)
    simulate(scenario, policy, seed=1, policy_params=params)
    assert seen["calls"] >= 50 and seen["wins"] >= 50, seen
    if params.get("partial_allocation", True) and policy == "themis":
        assert seen["partial"] > 0 and seen["last_round"] > 0, seen
