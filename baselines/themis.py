"""Themis: finish-time fairness with leases and auction epochs, the base scheduler of the
Cassini evaluation (Cassini thesis 4.4.2, 4.5.1).

The Themis paper (Mahajan et al., NSDI'20) is not in ../shared/papers; this follows the
thesis's description and documents what it fills in:

- **Finish-time fairness** rho = T_shared / T_ideal. T_shared = time since arrival + remaining
  iterations x the job's current iteration time (its uncontended compute time when waiting);
  T_ideal = the job's run time alone on its fair share of the cluster, 1/N of the GPUs with N
  active jobs: iterations x compute time x max(1, demand / (GPUs / N)). A larger rho is further
  from fair.
- **Leases and re-auction** (4.5.1, ``auction="reauction"``, default): "An assignment of GPU
  servers is valid until the period of lease time. When the lease time expires, the job gives
  up the server, and a new auction is conducted for all the released servers." Each job's
  lease runs ``lease_s`` (10 min, the thesis's bidding period) from its start or renewal, so
  leases are not synchronized (4.5.2). When leases expire the policy wakes up, the expired
  jobs give up their GPUs, and the released GPUs plus the free ones are auctioned to the
  expired and the waiting jobs by the arbiter (below), each winner on the placement with the
  smallest slowdown penalty. A job that wins its own GPUs back keeps running (renewal, no
  restart); one placed elsewhere moves (checkpoint + restore); one that wins nothing is
  preempted and waits. Running jobs whose lease has not expired are never preempted.
  Between lease ends, free GPUs are auctioned the same way to the waiting jobs (work
  conservation). ``auction="renew"`` is our variant (greedy arbiter only): synchronized
  epochs at multiples of ``lease_s``, at which waiting jobs preempt running jobs of lower rho
  and winners renew on the same GPUs.
- **Arbiter** (``arbiter="auction"``, default; 4.4.2: "Themis's central arbiter determines
  the global winning bids to maximize the aggregate improvement in the finish-time fair
  metrics across all bidding jobs"; 4.5.1: "Jobs participate in an auction where they send
  bid values for different GPU allocations"). The facts of the Themis paper used here (it is
  not in ../shared/papers): a fairness knob f lets only the 1 - f fraction of jobs with the
  worst rho bid; a job bids its rho for each GPU allocation it could get; the arbiter's
  partial allocation withholds part of each winner's allocation, and leftover resources go to
  the jobs that did not take part. At each auction:

  1. *Filter*: the active jobs (running, expired included, and waiting) are ranked by rho,
     worst first (ties: lower job id); the worst ``max(1, floor((1 - f) x N))`` of the N active
     jobs are eligible, and the eligible expired and waiting jobs bid in the main round.
     ``fairness_knob`` f = 0.2: the default of the public YARN prototype of Themis
     (configuration key ``themis.fairness.knob``, floor((1 - f) x N) bidders, at least one);
     the paper's own default was not confirmed.
  2. *Bids*: a bidder bids for each GPU count it may run on ("Worker counts", below; with
     ``workers="demand"`` its demand only, {0, demand}). For its demand: rho_after = its rho
     if it runs from now on (a waiting job at compute x 1, an expired one at compute x the
     penalty of its placement), rho_before = rho_after + ``lease_s`` / T_ideal (it waits one
     lease before it runs); the bid's value is the improvement rho_before - rho_after. The
     fair share of T_ideal counts the N active jobs.
  3. *Winners*: at most one bid per bidder, GPU counts summing to at most the free GPUs, and
     the largest sum of improvements: a multiple-choice knapsack solved exactly by dynamic
     programming over GPU counts (``arbitrate``). Bidders enter in rank order and a bid
     replaces what is there only when strictly better, so among equal sums the bids of the
     worse-rho bidders win, and among one bidder's equal bids the smaller GPU count.
  4. *Partial allocation* (``partial_allocation=True``): winner i keeps a fraction
     c_i = min(1, prod over the other bidders j of rho_j(x_-i) / rho_j(x)) of its allocation,
     with x the winning bids, x_-i the arbiter's winning bids without i, rho_j(x) = rho_after
     if j wins in x, else rho_before (the paper's hidden payment with the valuation 1 / rho;
     the min because x maximizes a sum, not a product). A job's GPU count cannot be cut here,
     so the fraction applies to time (our reading for gang-scheduled jobs): the winner holds
     its GPUs for c_i x ``lease_s``; then its lease ends and, until its full lease would have
     ended, it bids only in a last round after every other bidder, so the withheld share of
     its allocation goes to the others, and back to it only when none of them can use it.
     When every bidder that could win wins, c_i = 1.
  5. *Leftover allocation*: the GPUs the main round leaves free are auctioned the same way
     (steps 2-4) to the bidders the filter left out; then those still free to the bidders
     paying a partial allocation.

  Winners are placed once every round is decided, in rank order, the expired ones first (so
  that renewals keep their GPUs). ``arbiter="greedy"`` (the registered ``themis-greedy``) is
  the greedy arbiter: every bidder bids, served in decreasing rho, the first that fits wins
  ("help jobs that are farthest in terms of their fairness metric", 4.4.2);
  ``fairness_knob`` and ``partial_allocation`` do not apply to it.
- **Worker counts** (4.5.1: "the number of workers is automatically tuned based on Themis's
  finish-time-fairness metric"). ``workers="tuned"`` (default with the auction arbiter; the
  registered ``themis``): a
  data-parallel job bids for each count in {powers of two below its demand} and its demand
  (our choice: counts that split a global batch evenly); a model-parallel job (its model's
  ``parallelism``) or an adaptive-parallelism job bids for its demand alone (its partitions
  need its GPUs' memory). Its rho on k GPUs counts the remaining iterations at compute x
  demand / k (x its penalty): rho_after(k) = rho + w x (demand / k - demand / held), w =
  remaining iterations x compute x penalty / T_ideal, held = the GPUs it holds (its demand
  while waiting); rho_before = rho_after(demand) + ``lease_s`` / T_ideal as above. So a job
  takes fewer GPUs now only when that beats waiting one lease for its demand: half its
  demand, for instance, only when its remaining run at the demand is shorter than one lease.
  A job that wins a count other than the GPUs it holds is restarted on the new count
  (checkpoint + restore; the estimate leaves that cost out, as it does a move), and at each
  lease end it bids again for every count, its demand included. The engine runs a job on k
  GPUs with compute x demand / k per iteration (a fixed global batch) and the all-reduce of
  the same gradient on its k GPUs (docs/concepts.md, the engine); no batch size or
  hyper-parameter changes with the count. More GPUs than the demand are never bid: the
  demand is the job's largest allocation, as in Themis, where a job's demand is its maximum
  parallelism. ``workers="demand"`` (our variant, the registered ``themis-demand``; the
  default with the greedy arbiter, which cannot choose among counts): bids are for the job's
  demand or nothing, so the tuning is only whether a job runs.
- **Placement penalty** (4.4.2, ``placement="penalty"``, default): "Themis uses a slowdown
  penalty based on whether the workers are under the same rack or across racks." Themis
  sees racks, not machines: a placement inside one rack has penalty 1, one across racks
  ``cross_rack_slowdown`` (1.5; the thesis gives no value, our choice). A job gets the
  best-fit rack that holds it (fewest free GPUs, then lowest index) and the lowest-numbered
  free GPUs there, whatever machines they are on; a job that fits in no rack gets the
  lowest-numbered free GPUs anywhere (every cross-rack placement has the same penalty). The
  penalty also enters rho: T_shared counts the remaining iterations at compute time x the
  penalty of the job's placement (Themis's own estimate, not the engine's measured speed).
  ``placement="consolidated"`` is the earlier behaviour (our variant): the most consolidated
  placement (one machine, else one rack, else the fewest racks) and the measured speed.
- **Job lengths** (``lengths="known"``, default): rho reads each job's remaining iterations and
  its total, as the thesis's finish-time fairness needs (Themis's apps report their estimates;
  the engine's are exact). That is the oracle, so the default declares ``clairvoyant`` and is
  ranked apart from deployable policies. Two non-clairvoyant variants of ours estimate the
  remaining iterations with the shared estimators (``sim.estimators``):
  ``lengths="attained"``: the iterations done, and at least one lease of compute
  (``lease_s / compute``) so that a new job's estimate is not zero; ``lengths="history"``:
  the expected remaining work under the empirical distribution of the finished jobs'
  lengths (the "attained" estimate until a finished job is longer). A job's length is then
  done + that estimate. Everything else is unchanged.

Implementation at trace scale (``fast_paths``; per-job results bit-identical to
waking up for every expiry, checked in ``tests/test_speed_paths.py``): while no job waits, a
lease expiry in which only one-rack jobs bid is a renewal of each on its own GPUs (no
placement has a smaller penalty and the bidders' own GPUs are free), so it changes nothing
the engine sees. The policy then asks to be woken only for the first cross-rack lease end
(that auction may move the job into one rack) and, at its next call (an arrival, a finish,
or that wake-up), replays the skipped expiries at the instants it would have woken up at, so
every lease end and renewal count is the same. Cassini is not affected: it acts only when its
base starts or moves a job, and a renewal does neither (4.5.2: "Placement changes are
triggered by job arrivals, job departures, and when the lease time of any of the servers
expires"; a renewal is an expiry whose auction changes no placement). Engine events and
time-series points are fewer (``sim_events`` changes; time averages over the series agree to
rounding). This holds for both arbiters: with nobody waiting the auction arbiter's bidders are
the expired jobs, whose demands fit the GPUs they released, every bid's improvement is
positive, so all of them win (in the main or the leftover round) and pay no partial
allocation. While jobs wait, a lease expiry of one-rack jobs is still a renewal of each when no
waiting job has a winnable bid on the free GPUs plus the released ones (its demand does not fit
and, for a tunable job, no smaller count has a positive improvement, which does not depend on
the fair share: ``_bid_floor``). Then the arbiter is skipped and, since nothing changes for the
waiting jobs before an arrival or a finish, the policy wakes up only at the first lease end that
may release enough GPUs or spans racks, at most one lease later (``_defer_waiting``). On ITP
cluster04 (seed 1) 79 % of the auctions are such renewals; on ITP cluster03 few are (most are
contested). The greedy auction itself (``_auction`` with ``fast_paths``, same winners as
without): the expired jobs release their GPUs before it and it only takes GPUs, so the free
count only falls; a bidder whose demand exceeds it wins nothing, so only the bidders that fit
the free GPUs at the start are ranked (rho per job, the fair share still over all bidders) and
the loop stops once the free GPUs are below every ranked demand; an expired one-rack job whose
GPUs are still free renews without a placement search (no placement has a smaller penalty; both
arbiters).
Per-call costs (the same floats and decisions, checked in
``tests/test_speed_paths.py``): the bidders' rho reads ``done_iters`` and the running jobs'
(the greedy arbiter's few expired bidders) ``iterations_done`` instead of ``view.live`` over
every job, with iterations x compute taken once per job at reset; the penalty placement scans
one rack's GPU list, not every GPU's rack; the expired jobs and the next wake-up come from
one gather of the running jobs' lease ends; deferred renewals that recur before the next call
are replayed on a heap (one operation per renewal, not a pass over every running job per
instant). The auction arbiter's knapsack enters, of the bidders that bid for one count, only
the best ``free // count`` of each count (``arbitrate``). An auction is uncontested when the
expired jobs hold their demands inside one rack, at most one waiting job can bid and every
bidder's demand fits the GPUs on offer at once: each bidder then wins its demand (its largest
improvement) and pays no partial allocation, so no job is ranked (``_uncontested``; on Philly
most auctions are a finish or an arrival and one waiting job). The arbiter's rounds run
compiled (``baselines/themis_kernel.py``: the bid tables, the knapsack and the partial
allocation, the same floats and tie orders as ``bid_tables_scalar``, ``arbitrate`` and
``partial_fractions``). On ITP cluster08 (64 GPUs, offered
load 1.03) nearly every lease end is contested: with the greedy arbiter, 218,404 preemptions
for 13,047 jobs are auction losses to waiting jobs of larger rho, not no-ops (none is
restarted at the instant it was preempted; 1.4 % restart later on the same GPUs)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence

import numpy as np

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.perf.parallelism import is_adaptive_model
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim import placement
from dlcluster_gym.sim.actions import Action, Preempt, Start, WakeUp
from dlcluster_gym.sim.estimators import remaining_iterations
from dlcluster_gym.sim.view import ClusterView, Plan

from .consolidation import make_room
from .themis_kernel import contested

AUCTIONS = ("reauction", "renew")
PLACEMENTS = ("penalty", "consolidated")
LENGTHS = ("known", "attained", "history")
ARBITERS = ("auction", "greedy")
WORKERS = ("demand", "tuned")
EPS = 1e-9
_NEAR_S = 1e-6  # one-rack lease ends this close before a cross-rack one are woken up for
_FLOOR_EPS = 1e-9  # floor((1 - f) x N) robust to the binary representation of f
# Up to this many jobs a per-job Python loop beats the array operations (a running job's
# iterations done; the bid tables of an auction round).
_SCALAR_MAX = 16
_NO_FLOATS = np.zeros(0)  # the lengths a non-clairvoyant Themis does not have

# One bidder of an auction: (rho_before, [(GPUs, rho_after), ...]): its finish-time fairness
# if it gets nothing now, and for each GPU count it bids for, its fairness with that many.
Bidder = tuple[float, Sequence[tuple[int, float]]]


def bidding_count(active: int, fairness_knob: float) -> int:
    """How many of ``active`` jobs (the worst rho first) may bid in the main round:
    max(1, floor((1 - f) x N)), the floor robust to the binary representation of f."""
    return max(1, math.floor((1.0 - fairness_knob) * active + _FLOOR_EPS))


def _options(bidder: Bidder, free: int) -> list[tuple[int, float]]:
    """The bids of ``bidder`` that can win with ``free`` GPUs: (GPUs, improvement) with
    1 <= GPUs <= free and improvement rho_before - rho_after > 0, by increasing GPU count
    (the first of equal counts)."""
    before, table = bidder
    out: dict[int, float] = {}
    for gpus, after in table:
        g = int(gpus)
        gain = before - after
        if 1 <= g <= free and gain > 0 and g not in out:
            out[g] = gain
    return sorted(out.items())


def arbitrate(bidders: Sequence[Bidder], free: int) -> list[int]:
    """The winning bids of one auction: the GPU count each bidder wins (0: none).

    At most one bid per bidder, counts summing to at most ``free``, and the largest sum of
    improvements rho_before - rho_after (Cassini thesis 4.4.2: the arbiter maximizes "the
    aggregate improvement in the finish-time fair metrics across all bidding jobs"). Exact: a
    multiple-choice knapsack solved by dynamic programming over GPU counts, bidders taken in
    the given order (rank order: worst rho first). A bid replaces the best so far only when
    strictly better, so among equal sums the earlier bidders' bids win, and among one
    bidder's equal bids the smaller count. Bids with no positive improvement never win.
    Where every bidder bids for one count, only the best ``free // count`` bidders of each
    count (larger improvement, then earlier) can be in an optimum and only they enter."""
    n = len(bidders)
    won = [0] * n
    if free <= 0 or not n:
        return won
    opts = [_options(b, free) for b in bidders]
    use = [k for k in range(n) if opts[k]]
    if not use:
        return won
    if all(len(opts[k]) == 1 for k in use):
        if sum(opts[k][0][0] for k in use) <= free:  # every bid fits: all of them win
            for k in use:
                won[k] = opts[k][0][0]
            return won
        by_count: dict[int, list[int]] = {}
        for k in use:
            by_count.setdefault(opts[k][0][0], []).append(k)
        keep: list[int] = []
        for g, ks in by_count.items():
            ks.sort(key=lambda k: (-opts[k][0][1], k))
            keep += ks[: free // g]
        use = sorted(keep)
    best = np.zeros(free + 1)  # best[c]: largest sum with at most c GPUs
    choice = np.zeros((len(use), free + 1), dtype=np.int32)  # 1 + the bid taken, 0: none
    for r, k in enumerate(use):
        new = best.copy()
        for idx, (g, gain) in enumerate(opts[k], 1):
            cand = best[: free + 1 - g] + gain
            tail = new[g:]
            better = cand > tail
            if better.any():
                tail[better] = cand[better]
                choice[r, g:][better] = idx
        best = new
    c = free
    for r in range(len(use) - 1, -1, -1):
        idx = int(choice[r, c])
        if idx:
            k = use[r]
            g = opts[k][idx - 1][0]
            won[k] = g
            c -= g
    return won


def partial_fractions(bidders: Sequence[Bidder], free: int, won: Sequence[int]) -> list[float]:
    """The partial allocation of the winning bids ``won`` (``arbitrate``'s answer): the
    fraction c_i of its allocation each winner keeps (1.0 for the others).

    c_i = min(1, prod over the other bidders j of rho_j(x_-i) / rho_j(x)), x = ``won``, x_-i
    the arbiter's winning bids when i does not bid, rho_j(y) = j's rho_after for the count it
    wins in y, else its rho_before: the Themis paper's hidden payment with the valuation
    1 / rho, capped at 1 because x maximizes a sum rather than a product. When every bidder
    bids for one count and every one that can win wins, removing one changes nobody else's
    outcome: c = 1."""
    n = len(bidders)
    out = [1.0] * n
    opts = [_options(b, free) for b in bidders]
    if all(len(o) <= 1 and (won[k] or not o) for k, o in enumerate(opts)):
        return out

    def rho_of(k: int, gpus: int) -> float:
        before, table = bidders[k]
        if not gpus:
            return float(before)
        return float(next(after for g, after in table if int(g) == gpus))

    for i in range(n):
        if not won[i]:
            continue
        without = [b if k != i else (b[0], ()) for k, b in enumerate(bidders)]
        alt = arbitrate(without, free)
        ratio = 1.0
        for j in range(n):
            if j != i and alt[j] != won[j]:
                ratio *= rho_of(j, alt[j]) / rho_of(j, won[j])
        out[i] = min(1.0, ratio)
    return out


def bid_tables_scalar(
    columns: Iterable[tuple[int, int, int, int, float, float, float]],
    n_run: int,
    free: int,
    lease_s: float,
) -> tuple[list[int], list[Bidder]]:
    """``Themis._count_bids`` one bidder at a time on Python floats (the same operations in
    the same order, so the same tables). ``columns``: per bidder (position in the auction's
    ids, demand, GPUs held, smallest count it bids for, rho, work share, T_ideal); the first
    ``n_run`` positions run."""
    tables: list[tuple[int, float, list[tuple[int, float]]]] = []
    by_count: dict[int, list[tuple[float, int, int]]] = {}  # g -> (-gain, bidder, column)
    for i, (k, d, count, smallest, r, w, t_ideal) in enumerate(columns):
        held = count if k < n_run else d
        base = d / held
        before = r + w * (1.0 - base) + lease_s / t_ideal
        if smallest == 1:  # tunable: the powers of two below the demand, then the demand
            counts = [1 << b for b in range((d - 1).bit_length()) if 1 << b < d]
            counts.append(d)
        else:
            counts = [d]
        bids: list[tuple[int, float]] = []
        for g in counts:
            if g > free:
                break  # increasing counts
            after = r + w * (d / g - base)
            gain = before - after
            if gain > 0:
                by_count.setdefault(g, []).append((-gain, i, len(bids)))
                bids.append((g, after))
        tables.append((k, before, bids))
    drop: set[tuple[int, int]] = set()
    for g, at in by_count.items():
        limit = free - g + 2
        if len(at) > limit:  # only the best bids of count g can be in an optimum
            at.sort()
            drop.update((i, c) for _, i, c in at[limit:])
    out_group: list[int] = []
    bidders: list[Bidder] = []
    for i, (k, before, bids) in enumerate(tables):
        kept = [bid for c, bid in enumerate(bids) if (i, c) not in drop]
        if kept:
            out_group.append(k)
            bidders.append((before, kept))
    return out_group, bidders


class Themis(BaseScheduler):
    """Finish-time fair allocation with per-job leases and re-auctions of released GPUs."""

    name = "themis"
    # Shortcuts that give the same decisions as the general loop; False runs the
    # general loop everywhere (tests compare the two).
    fast_paths: bool = True

    def __init__(
        self,
        *,
        lease_s: float = 600.0,
        auction: str = "reauction",
        placement: str = "penalty",
        cross_rack_slowdown: float = 1.5,
        lengths: str = "known",
        arbiter: str = "auction",
        fairness_knob: float = 0.2,
        partial_allocation: bool = True,
        workers: str | None = None,
    ) -> None:
        if workers is None:  # the thesis's tuning needs the auction arbiter's bids per count
            workers = "tuned" if arbiter == "auction" else "demand"
        if not isinstance(lease_s, int | float) or not (math.isfinite(lease_s) and lease_s > 0):
            raise ConfigError(f"lease_s must be a finite number of seconds > 0, got {lease_s!r}")
        if auction not in AUCTIONS:
            raise ConfigError(f"auction must be one of {', '.join(AUCTIONS)}, got {auction!r}")
        if placement not in PLACEMENTS:
            raise ConfigError(
                f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}"
            )
        if not isinstance(cross_rack_slowdown, int | float) or not (
            math.isfinite(cross_rack_slowdown) and cross_rack_slowdown >= 1
        ):
            raise ConfigError(
                f"cross_rack_slowdown must be a finite number >= 1, got {cross_rack_slowdown!r}"
            )
        if lengths not in LENGTHS:
            raise ConfigError(f"lengths must be one of {', '.join(LENGTHS)}, got {lengths!r}")
        if arbiter not in ARBITERS:
            raise ConfigError(f"arbiter must be one of {', '.join(ARBITERS)}, got {arbiter!r}")
        if (
            isinstance(fairness_knob, bool)
            or not isinstance(fairness_knob, int | float)
            or not (0.0 <= fairness_knob <= 1.0)
        ):
            raise ConfigError(
                f"fairness_knob must be a number in [0, 1] (the fraction of jobs, those with "
                f"the best finish-time fairness, left out of each auction), got {fairness_knob!r}"
            )
        if not isinstance(partial_allocation, bool):
            raise ConfigError(
                f"partial_allocation must be true or false, got {partial_allocation!r}"
            )
        if workers not in WORKERS:
            raise ConfigError(f"workers must be one of {', '.join(WORKERS)}, got {workers!r}")
        if workers == "tuned" and arbiter != "auction":
            raise ConfigError(
                "workers='tuned' needs arbiter='auction' (the arbiter chooses among each "
                f"job's bids for several GPU counts), got arbiter={arbiter!r}"
            )
        if arbiter == "auction" and auction == "renew":
            raise ConfigError(
                "arbiter 'auction' needs auction='reauction' (it auctions the GPUs of expired "
                "per-job leases); auction='renew' (synchronized epochs) runs with "
                "arbiter='greedy', got auction='renew' with arbiter='auction'"
            )
        # "known": the apps report their lengths (the thesis's information model); in a
        # simulator that is the oracle, so this variant is clairvoyant.
        self.clairvoyant = lengths == "known"
        super().__init__(
            lease_s=lease_s,
            auction=auction,
            placement=placement,
            cross_rack_slowdown=cross_rack_slowdown,
            lengths=lengths,
            arbiter=arbiter,
            fairness_knob=fairness_knob,
            partial_allocation=partial_allocation,
            workers=workers,
        )
        self.tuned = workers == "tuned"
        # The engine starts a job on fewer GPUs than its demand only for a policy that says so.
        self.elastic_gpu_jobs = self.tuned
        self.lengths = lengths
        self.arbiter = arbiter
        self.fairness_knob = float(fairness_knob)
        self.partial_allocation = partial_allocation
        self.lease_s = float(lease_s)
        self.auction = auction
        self.placement = placement
        self.cross_rack_slowdown = float(cross_rack_slowdown)

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        n = view.num_job_ids
        self._demand = view.demand
        self._compute = view.compute_s
        self._arrival = view.arrival_s
        if self.lengths == "known":  # the apps' reported lengths: the oracle
            jobs = view.oracle.jobs
            self._iters = np.array([j.iterations for j in jobs], dtype=np.float64)
            # the first product of T_ideal, per job
            self._ic = self._iters * np.array([j.compute_s for j in jobs], dtype=np.float64)
        rack = view.cluster.gpu_rack
        self._rack_gpus = [np.flatnonzero(rack == r) for r in range(view.free_per_rack.size)]
        self._next_epoch = self.lease_s
        self._lease_end = np.full(n, np.inf)  # per job, while it runs (re-auction)
        self._penalty = np.ones(n)  # Themis's slowdown estimate of the job's placement
        # GPUs each running job holds (``workers="tuned"`` may run a job on fewer than its
        # demand; set at every start), and per job whether its worker count may be tuned
        # (decided on its first bid).
        self._count = np.zeros(n, dtype=np.int64)
        self._tunable: dict[int, bool] = {}
        self._min_count = np.zeros(n, dtype=np.int64)  # 0: not known yet
        # Until when a winner pays a partial allocation (its full lease's end): it bids in
        # the auction arbiter's last round only.
        self._paid_until = np.full(n, -np.inf)
        self._cross = np.zeros(n, dtype=bool)  # the job's placement spans racks
        # Running jobs (after the last decision's actions) whose one-rack lease renewals are
        # deferred to the next call (fast paths; see ``_defer``), or None.
        self._deferred: np.ndarray | None = None
        self.renewals = 0
        self.auction_times: list[float] = []  # instants at which leases expired
        self.partial_leases = 0  # winners of the auction arbiter that hold a shortened lease
        self._lease_min = math.inf  # the earliest lease end granted in the current call

    def rho(
        self,
        view: ClusterView,
        jobs: np.ndarray,
        running: np.ndarray,
        bidders: int | None = None,
    ) -> np.ndarray:
        """Finish-time fairness of ``jobs`` (``running`` flags which of them run) when
        ``bidders`` jobs (default: ``jobs.size``) share the cluster."""
        done, _, _ = view.live(jobs)
        if self.placement == "penalty":
            it = self._compute[jobs] * np.where(running, self._penalty[jobs], 1.0)
            if self.tuned:  # fewer GPUs than the demand: compute x demand / GPUs
                run = jobs[running]
                scale = np.ones(jobs.size)
                scale[running] = self._demand[run] / self._count[run]
                it = it * scale
        else:
            it = np.where(running, np.asarray(view.iter_time_s)[jobs], self._compute[jobs])
            it = np.where(np.isfinite(it), it, self._compute[jobs])
        fair_share = view.num_gpus / max(jobs.size if bidders is None else bidders, 1)
        if self.lengths != "known":
            return self._rho_estimated(view, jobs, done, it, self._demand[jobs] / fair_share)
        shared = (view.now - self._arrival[jobs]) + (self._iters[jobs] - done) * it
        ideal = (
            self._iters[jobs]
            * self._compute[jobs]
            * np.maximum(1.0, self._demand[jobs] / fair_share)
        )
        return shared / ideal

    def _rho_estimated(
        self,
        view: ClusterView,
        jobs: np.ndarray,
        done: np.ndarray,
        it: np.ndarray,
        over_share: np.ndarray,
        remaining: np.ndarray | None = None,
    ) -> np.ndarray:
        """rho with each job's remaining iterations estimated (``lengths`` "attained" or
        "history", our non-clairvoyant variants), its length as done + that estimate; ``it``
        is the estimated iteration time, ``over_share`` demand / fair share; ``remaining``
        the estimate when already computed."""
        if remaining is None:
            remaining = remaining_iterations(
                view.history,
                self._compute[jobs],
                done,
                method=self.lengths,
                floor_s=self.lease_s,
            )
        shared = (view.now - self._arrival[jobs]) + remaining * it
        ideal = (done + remaining) * self._compute[jobs] * np.maximum(1.0, over_share)
        return shared / ideal

    def place(self, plan: Plan, job: int, n: int | None = None) -> np.ndarray | None:
        """The job's placement on ``n`` GPUs (default its demand), or None if they are not
        free."""
        n = int(self._demand[job]) if n is None else n
        if plan.num_free < n:
            return None
        if self.placement == "consolidated":
            return plan.find(n)
        return self._place_penalty(plan, n)[0]

    def _place_penalty(self, plan: Plan, n: int) -> tuple[np.ndarray, bool]:
        """``placement="penalty"`` for ``n <= plan.num_free`` GPUs: (GPUs, spans racks).
        The best-fit rack that holds ``n`` (fewest free GPUs, then the lowest index) and its
        lowest-numbered free GPUs, else the lowest-numbered free GPUs anywhere."""
        r = placement.best_fit(plan.free_per_rack, n)  # ties: the lowest rack
        if r >= 0:
            rg = self._rack_gpus[r]
            return rg[plan.free_mask[rg]][:n], False
        return np.flatnonzero(plan.free_mask)[:n], True  # no rack holds n: they span racks

    def _start(
        self,
        plan: Plan,
        job: int,
        gpus: np.ndarray,
        now: float,
        cross: bool | None = None,
        lease_s: float | None = None,
    ) -> None:
        """Start ``job`` on ``gpus`` in ``plan`` with a new lease (``lease_s`` long, default
        the policy's); ``cross``: whether they span racks, when the caller knows."""
        plan.start(job, gpus)
        self._count[job] = gpus.size
        end = now + (self.lease_s if lease_s is None else lease_s)
        self._lease_end[job] = end
        self._lease_min = min(self._lease_min, end)
        if cross is None:
            racks = plan.cluster.gpu_rack[gpus]
            cross = bool(gpus.size and racks.min() != racks.max())
        self._cross[job] = cross
        self._penalty[job] = self.cross_rack_slowdown if cross else 1.0

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        if self.auction == "renew":
            return self._schedule_epochs(view)
        return self._schedule_reauction(view)

    def _schedule_reauction(self, view: ClusterView) -> Sequence[Action]:
        """Per-job leases; at expiry the released GPUs are re-auctioned (4.5.1)."""
        now = view.now
        fast = self.fast_paths
        self._lease_min = math.inf
        if self._deferred is not None:
            self._catch_up(now)
        waiting = np.fromiter(view.iter_waiting(), dtype=np.int64, count=view.num_waiting)
        running = np.asarray(view.running(), dtype=np.int64)
        ends = self._lease_end[running]
        is_exp = ends <= now + EPS
        expired = running[is_exp]
        nofit = waiting.size and view.num_free < self._smallest_bid(view, waiting)
        if fast and not expired.size and nofit:
            waiting = waiting[:0]  # no lease expired and no waiting job fits: no auction
        # A job running on fewer GPUs than its demand may grow at its lease end: the
        # shortcuts for lease ends with nobody waiting (renewals only) do not hold.
        short = self.tuned and bool((self._count[running] < self._demand[running]).any())
        fast_renew = fast and not short
        if fast_renew and expired.size and self._all_one_rack(view, expired):
            if not waiting.size:
                self._renew_all(expired, now)
                return self._defer(running)  # nobody waits (``waiting`` is not cut down here)
            # Jobs wait, but when none has a bid that can win on the free and released GPUs,
            # the expired one-rack jobs are the only bidders and each renews on its own GPUs,
            # as with nobody waiting.
            offer = view.num_free + int(self._held(expired).sum())
            if offer < int(self._demand[waiting].min()):
                floor = self._bid_floor(view, waiting, now + self.lease_s)
                if offer < floor:
                    self._renew_all(expired, now)
                    return self._defer_waiting(running, floor - view.num_free)
        plan = view.plan()
        won = False
        if waiting.size or expired.size:
            own = {j: view.gpus_of(j) for j in expired.tolist()}
            for j in own:
                plan.preempt(j)  # gives up its servers; kept if it wins them back
            self._lease_end[expired] = np.inf  # not running unless it wins again
            if self.arbiter == "greedy":
                kept = self._auction(view, plan, waiting, expired, own, now)
            else:
                kept = self._arbitrate(view, plan, waiting, running, is_exp, own, now)
            won = bool(kept)
            if kept:  # renewals: the job keeps its GPUs, no preemption and no restart
                plan.actions = [a for a in plan.actions if getattr(a, "job", None) not in kept]
                self.renewals += len(kept)
            if expired.size:
                self.auction_times.append(now)
        if fast:
            started, preempted = self._started_preempted(plan)
            still = view.num_waiting - len(started - preempted) + len(preempted - started)
            after = self._running_after(running, plan)
            if still == 0 and not (self.tuned and (self._count[after] < self._demand[after]).any()):
                return plan.actions + self._defer(after)
            # The earliest lease end once the actions are applied: a job whose lease had not
            # expired keeps it; a winner (started or renewed) holds one until now + lease_s.
            if expired.size:
                ends = ends[~is_exp]
            wake = float(ends.min()) if ends.size else math.inf
            if won or started:  # the earliest new lease (now + lease_s unless shortened)
                wake = min(wake, self._lease_min)
            if math.isfinite(wake):
                plan.wake_up(wake)
            return plan.actions
        after = self._running_after(running, plan)
        if after.size:
            plan.wake_up(float(self._lease_end[after].min()))
        return plan.actions

    def _auction(
        self,
        view: ClusterView,
        plan: Plan,
        waiting: np.ndarray,
        expired: np.ndarray,
        own: dict[int, np.ndarray],
        now: float,
    ) -> set[int]:
        """The auction of the released and free GPUs (4.4.2, 4.5.1): bidders (the waiting and
        the expired jobs) in decreasing rho, each on its smallest-penalty placement, an
        expired job on its own GPUs when they are free and nothing is better. Returns the
        expired jobs that won their own GPUs back (renewals).

        With ``fast_paths`` (same winners) only the bidders that can win are visited. The
        auction only takes GPUs (the expired jobs released theirs before it), so the free
        count only falls: a bidder whose demand exceeds it gets nothing (no placement exists,
        and its own GPUs, as many as its demand, cannot all be free), and once it is below
        every remaining demand nobody else wins. So only the bidders whose demand fits the
        free GPUs at the start are ranked (rho is per job; the fair share still counts every
        bidder), in the same order, and the loop stops once the free count is below the
        smallest ranked demand (the bidders left would each be skipped)."""
        kept: set[int] = set()
        if not self.fast_paths:
            ids = np.concatenate((waiting, expired))
            is_exp = np.zeros(ids.size, dtype=bool)
            is_exp[waiting.size :] = True
            rho = self.rho(view, ids, is_exp)
            for k in np.lexsort((ids, -rho)).tolist():
                self._bid(plan, int(ids[k]), own, now, kept)
            return kept
        # The expired jobs first: the order of ``ids`` does not matter (ties in rho are
        # broken by job id, not by position).
        n_exp = expired.size
        ids = np.concatenate((expired, waiting)) if n_exp else waiting
        dem = self._demand[ids]
        can = dem <= plan.num_free
        n_can = int(np.count_nonzero(can))
        if not n_can:
            return kept
        n_bidders = ids.size
        if n_can < n_bidders:
            ids, dem = ids[can], dem[can]
            n_exp = int(np.count_nonzero(can[:n_exp]))
        if n_can > 1:  # one bidder needs no ranking
            if self.placement == "penalty":
                rho = self._rho_bidders(view, ids, dem, n_exp, n_bidders)
            else:
                is_exp = np.zeros(ids.size, dtype=bool)
                is_exp[:n_exp] = True
                rho = self.rho(view, ids, is_exp, bidders=n_bidders)
            order = np.lexsort((ids, -rho))
            ids, dem = ids[order], dem[order]
        d_min = int(dem.min())
        penalty = self.placement == "penalty"
        for job, d in zip(ids.tolist(), dem.tolist(), strict=True):
            nf = plan.num_free
            if nf < d_min:
                break  # nobody else fits (the rest would be skipped one by one)
            if d <= nf:
                if penalty and job not in own:  # a waiting bidder: its best placement
                    gpus, cross = self._place_penalty(plan, d)
                    self._start(plan, job, gpus, now, cross)
                else:
                    self._bid(plan, job, own, now, kept)
        return kept

    def _arbitrate(
        self,
        view: ClusterView,
        plan: Plan,
        waiting: np.ndarray,
        running: np.ndarray,
        is_exp: np.ndarray,
        own: dict[int, np.ndarray],
        now: float,
    ) -> set[int]:
        """The auction arbiter (``arbiter="auction"``; module docstring, steps 1-5) over the
        released and free GPUs: the fairness filter over the active jobs (``running``, of which
        ``is_exp`` flags the expired ones, then ``waiting``), a main round for the eligible
        bidders, a leftover round for the others, and a last round for the winners still
        paying a partial allocation. Returns the expired jobs that won their own GPUs back
        (renewals)."""
        if self.fast_paths and self.placement == "penalty":
            kept = self._uncontested(view, plan, waiting, running[is_exp], own, now)
            if kept is not None:
                return kept
        if self.fast_paths and self.placement == "penalty" and contested is not None:
            wins = self._contested(view, plan, waiting, running, is_exp, now)
        else:
            wins = self._ranked_rounds(view, plan, waiting, running, is_exp, now)
        # Placed once every round is decided: the expired winners first (their own GPUs when
        # no placement is better), then the waiting ones on their smallest-penalty placement.
        kept: set[int] = set()
        wins.sort(key=lambda w: w[0] not in own)  # stable: rank order kept
        for job, gpus_won, lease in wins:
            if job in own:
                self._bid(plan, job, own, now, kept, lease, gpus_won)
                continue
            if self.placement == "penalty":
                gpus, cross = self._place_penalty(plan, gpus_won)
            else:
                got = plan.find(gpus_won)
                gpus = got if got is not None else np.flatnonzero(plan.free_mask)[:gpus_won]
                cross = None
            self._start(plan, job, gpus, now, cross, lease)
        return kept

    def _contested(
        self,
        view: ClusterView,
        plan: Plan,
        waiting: np.ndarray,
        running: np.ndarray,
        is_exp: np.ndarray,
        now: float,
    ) -> list[tuple[int, int, float]]:
        """``_ranked_rounds`` for ``placement="penalty"`` with ``fast_paths``: the ranking,
        the filter and the rounds in one compiled call (``themis_kernel.contested``: the same
        float operations, ties and winners); the estimates stay here (they read the view)."""
        ids = np.concatenate((running, waiting))
        n_run, n = running.size, ids.size
        done, remaining = self._estimates(view, ids, n_run)
        known = self.lengths == "known"
        if self.tuned:
            self._min_counts(view, ids)  # known for every bidder from here on
        pos, gpus, frac = contested(
            ids, done, remaining, self._demand, self._compute, self._penalty, self._count,
            self._arrival, self._iters if known else _NO_FLOATS,
            self._ic if known else _NO_FLOATS, self._paid_until,
            self._min_count if self.tuned else self._demand, is_exp, n_run, view.now,
            view.num_gpus / max(n, 1), self.lease_s, bidding_count(n, self.fairness_knob),
            plan.num_free, self.tuned, known, self.partial_allocation, now + EPS,
        )  # fmt: skip
        wins: list[tuple[int, int, float]] = []
        for k, g, f in zip(ids[pos].tolist(), gpus.tolist(), frac.tolist(), strict=True):
            self._win(wins, k, g, f, now)
        return wins

    def _win(self, wins: list[tuple[int, int, float]], job: int, gpus: int, frac: float,
             now: float) -> None:  # fmt: skip
        """Append ``job``'s win of ``gpus`` to ``wins`` with its lease: ``frac`` of a full one
        when it pays a partial allocation (the hidden payment: the GPUs return to the auction
        early, and it bids in the last round until its full lease would have ended)."""
        lease = self.lease_s
        if frac < 1.0:
            lease = frac * self.lease_s
            self._paid_until[job] = now + self.lease_s
            self.partial_leases += 1
        wins.append((job, gpus, lease))

    def _ranked_rounds(
        self,
        view: ClusterView,
        plan: Plan,
        waiting: np.ndarray,
        running: np.ndarray,
        is_exp: np.ndarray,
        now: float,
    ) -> list[tuple[int, int, float]]:
        """The arbiter's ranking, fairness filter and rounds (``_arbitrate``): the winners as
        (job, GPUs, lease) in rank order per round."""
        ids = np.concatenate((running, waiting))
        n_run, n = running.size, ids.size
        dem = self._demand[ids]
        est = self._estimates(view, ids, n_run)
        if self.fast_paths and self.placement == "penalty":
            rho = self._rho_bidders(view, ids, dem, n_run, n, est)
        else:
            rho = self.rho(view, ids, np.arange(n) < n_run, bidders=n)
        ideal = self._ideal(view, ids, dem, n_run, n, est)
        order = np.lexsort((ids, -rho))  # worst rho first; ties: lower job id
        n_elig = bidding_count(n, self.fairness_knob)
        bids = np.ones(n, dtype=bool)
        bids[:n_run] = is_exp
        # a bidder whose smallest bid is for more GPUs than are free cannot win
        smallest = self._min_counts(view, ids) if self.tuned else dem
        bids &= smallest <= plan.num_free
        paying = self._paid_until[ids] > now + EPS
        ranked_bids, ranked_paying = bids[order], paying[order]
        main = order[:n_elig][ranked_bids[:n_elig] & ~ranked_paying[:n_elig]].tolist()
        rest = order[n_elig:][ranked_bids[n_elig:] & ~ranked_paying[n_elig:]].tolist()
        last = order[ranked_bids & ranked_paying].tolist()
        free = plan.num_free
        # Bid tables per count only when some bidder can run on fewer GPUs than its demand:
        # with one count each they are the demand bids (improvement lease_s / T_ideal > 0;
        # the arbiter leaves out the same bids), so the same winners and leases.
        tables = self.tuned and (not self.fast_paths or bool((smallest < dem).any()))
        share = self._work_share(view, ids, n_run, ideal, est) if tables else None
        wins: list[tuple[int, int, float]] = []  # (job, GPUs, lease) in rank order per round
        for group in (main, rest, last):
            if group and free:
                free -= self._round(
                    group, ids, dem, rho, ideal, free, now, wins, view, n_run, share
                )
        return wins

    def _uncontested(
        self,
        view: ClusterView,
        plan: Plan,
        waiting: np.ndarray,
        expired: np.ndarray,
        own: dict[int, np.ndarray],
        now: float,
    ) -> set[int] | None:
        """``_arbitrate``'s answer, without ranking anyone, when the auction is uncontested:
        the ``expired`` jobs each hold their demand inside one rack, at most one waiting job
        can bid (its smallest count fits the ``plan``'s free GPUs), and the demands of all
        the bidders fit the free GPUs at once; None otherwise.

        Then every bidder wins its demand in whichever round it bids: a bid on the demand
        has the bidder's largest improvement (``lease_s`` / T_ideal, the other counts less by
        remaining x compute x (demand / k - 1) / T_ideal), and all of them fit. Nobody pays a
        partial allocation (leaving one bidder out changes no other's bid). The expired jobs
        renew on their own GPUs (free, one rack: ``_bid``), whatever their order, and the
        waiting job is placed after them, as the general loop places winners."""
        free = plan.num_free
        job = need = 0
        if waiting.size:
            smallest = self._min_counts(view, waiting) if self.tuned else self._demand[waiting]
            can = np.flatnonzero(smallest <= free)
            if can.size > 1:
                return None
            if can.size:
                job = int(waiting[can[0]])
                need = int(self._demand[job])
        if expired.size:
            dem = self._demand[expired]
            if need + int(dem.sum()) > free:
                return None
            if self.tuned and (self._count[expired] < dem).any():
                return None  # a short job may grow
            if not self._all_one_rack(view, expired):
                return None  # its auction may move it
        elif need > free:
            return None
        kept: set[int] = set()
        for j in expired.tolist():
            self._bid(plan, j, own, now, kept, self.lease_s, int(self._demand[j]))
        if need:
            gpus, cross = self._place_penalty(plan, need)
            self._start(plan, job, gpus, now, cross, self.lease_s)
        return kept

    def _round(
        self,
        group: list[int],
        ids: np.ndarray,
        dem: np.ndarray,
        rho: np.ndarray,
        ideal: np.ndarray,
        free: int,
        now: float,
        wins: list[tuple[int, int, float]],
        view: ClusterView | None = None,
        n_run: int = 0,
        share: np.ndarray | None = None,
    ) -> int:
        """One round of the auction arbiter over ``free`` GPUs: the bidders at positions
        ``group`` of ``ids`` (rank order; the first ``n_run`` of ``ids`` run) bid for their
        demand (``rho_before = rho + lease_s / T_ideal``, ``rho_after = rho``), or with
        ``share`` (``workers="tuned"``) for each count of ``_bid_counts`` (``_count_bids``);
        ``arbitrate`` picks the winners and ``partial_fractions`` their leases; appends (job,
        GPUs, lease) to ``wins`` and returns the GPUs won. The Python form: with
        ``fast_paths`` and numba a contested auction runs compiled instead (``_contested``)."""
        if share is None:
            group = [k for k in group if dem[k] <= free]
            if not group:
                return 0
            bidders: list[Bidder] = [
                (float(rho[k] + self.lease_s / ideal[k]), ((int(dem[k]), float(rho[k])),))
                for k in group
            ]
        else:
            assert view is not None
            group, bidders = self._count_bids(view, group, ids, dem, rho, ideal, share, n_run, free)
            if not group:
                return 0
        won = arbitrate(bidders, free)
        if self.partial_allocation:
            frac = partial_fractions(bidders, free, won)
        else:
            frac = [1.0] * len(group)
        for i, k in enumerate(group):
            if not won[i]:
                continue
            self._win(wins, int(ids[k]), won[i], frac[i], now)
        return sum(won)

    def _bid_counts(self, view: ClusterView, job: int) -> tuple[int, ...]:
        """The GPU counts ``job`` bids for under ``workers="tuned"``, increasing: the powers of
        two below its demand and the demand itself for a data-parallel job (our choice: worker
        counts that split a batch evenly, plus the demand); the demand alone for a
        model-parallel or adaptive-parallelism job (its partitions need its GPUs' memory).
        ``_count_bids`` builds the same counts for many jobs at once from ``_min_counts``."""
        d = int(self._demand[job])
        tunable = self._tunable.get(job)
        if tunable is None:
            spec = view.jobs[job]
            tunable = not is_adaptive_model(spec.model) and (
                view.model_profile(job).parallelism == "data"
            )
            self._tunable[job] = tunable
        if not tunable or d <= 1:
            return (d,)
        return (*(1 << i for i in range((d - 1).bit_length()) if 1 << i < d), d)

    def _min_counts(self, view: ClusterView, jobs: np.ndarray) -> np.ndarray:
        """The smallest GPU count each of ``jobs`` bids for (kept per job once known)."""
        got = self._min_count[jobs]
        if not got.all():
            for j in jobs[got == 0].tolist():
                self._min_count[j] = self._bid_counts(view, j)[0]
            got = self._min_count[jobs]
        return got

    def _smallest_bid(self, view: ClusterView, jobs: np.ndarray) -> int:
        """The smallest GPU count any of ``jobs`` (non-empty) bids for."""
        if not self.tuned:
            return int(self._demand[jobs].min())
        return int(self._min_counts(view, jobs).min())

    def _estimates(
        self, view: ClusterView, ids: np.ndarray, n_run: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(iterations done, remaining iterations) of ``ids`` (the first ``n_run`` running):
        the remaining ones known or estimated (``lengths``); computed once per auction. A
        running job's iterations done are ``iterations_done`` (the scalar form of
        ``view.live``, the same operations) or ``view.iterations_done_of`` (``live``'s first
        column) when they are many."""
        done = view.done_iters[ids]
        if n_run > _SCALAR_MAX:
            done[:n_run] = view.iterations_done_of(ids[:n_run])
        else:
            for k, j in enumerate(ids[:n_run].tolist()):
                done[k] = view.iterations_done(j)
        if self.lengths == "known":
            return done, self._iters[ids] - done
        remaining = remaining_iterations(
            view.history, self._compute[ids], done, method=self.lengths, floor_s=self.lease_s
        )
        return done, remaining

    def _work_share(
        self,
        view: ClusterView,
        ids: np.ndarray,
        n_run: int,
        ideal: np.ndarray,
        est: tuple[np.ndarray, np.ndarray],
    ) -> np.ndarray:
        """Per job of ``ids`` (the first ``n_run`` running; ``est`` from ``_estimates``), its
        remaining iterations x compute x its penalty estimate (1 while waiting), over T_ideal:
        the part of rho that scales with demand / GPUs when the job runs on fewer GPUs than its
        demand."""
        compute = self._compute[ids]
        remaining = est[1]
        penalty = np.ones(ids.size)
        if self.placement == "penalty" and n_run:
            penalty[:n_run] = self._penalty[ids[:n_run]]
        return remaining * compute * penalty / ideal

    def _count_bids(
        self,
        view: ClusterView,
        group: list[int],
        ids: np.ndarray,
        dem: np.ndarray,
        rho: np.ndarray,
        ideal: np.ndarray,
        share: np.ndarray,
        n_run: int,
        free: int,
    ) -> tuple[list[int], list[Bidder]]:
        """The bid tables of the bidders at positions ``group`` of ``ids`` (rank order; the
        first ``n_run`` of ``ids`` run) under ``workers="tuned"``, with ``free`` GPUs on offer:
        (the positions that bid, their tables in the same order).

        ``rho`` is a job's fairness now (on the GPUs it holds while running); ``share``
        (``_work_share``) gives its fairness on k GPUs, rho_after(k) = rho + share x
        (demand / k - demand / held). rho_before = rho_after(demand) + ``lease_s`` / T_ideal:
        it waits one lease, then runs on its demand, as for a bid on the demand alone.
        Changing the count costs a restart (checkpoint + restore), which the estimate leaves
        out, as it leaves out a move.

        Only bids that can be in the arbiter's answer enter: bids with a positive
        improvement, and per count g the best ``free - g + 2`` of them (larger improvement,
        then rank). A bid at count g outside that set can be swapped for one inside it that
        does not win (the winners hold at most ``free`` GPUs, at least one each) without
        lowering the sum, so an optimum exists without it; the one extra per count keeps that
        true when one bidder is left out (``partial_fractions``).

        With ``fast_paths``, up to ``_SCALAR_MAX`` bidders (most auctions) take
        ``bid_tables_scalar``: the same float operations in the same order on Python floats,
        without the array overhead."""
        if self.fast_paths and len(group) <= _SCALAR_MAX:
            jobs = ids[group]
            columns = zip(
                group,
                dem[group].tolist(),
                self._count[jobs].tolist(),
                self._min_counts(view, jobs).tolist(),
                rho[group].tolist(),
                share[group].tolist(),
                ideal[group].tolist(),
                strict=True,
            )
            return bid_tables_scalar(columns, n_run, free, self.lease_s)
        pos = np.asarray(group, dtype=np.int64)
        jobs = ids[pos]
        d = dem[pos].astype(np.int64)
        held = np.where(pos < n_run, self._count[jobs], d)
        base = d / held
        r, w = rho[pos], share[pos]
        before = r + w * (1.0 - base) + self.lease_s / ideal[pos]
        # The counts each bids for (``_bid_counts``): a tunable job (smallest count 1) the
        # powers of two below its demand, then its demand; any other its demand alone. One
        # column per power of two, the last column the demand.
        tunable = self._min_counts(view, jobs) == 1
        powers = 1 << np.arange(max(int(d.max()) - 1, 1).bit_length(), dtype=np.int64)
        counts = np.concatenate((np.broadcast_to(powers, (d.size, powers.size)), d[:, None]), 1)
        valid = counts <= free
        valid[:, :-1] &= tunable[:, None] & (powers[None, :] < d[:, None])
        after = r[:, None] + w[:, None] * (d[:, None] / counts - base[:, None])
        gain = before[:, None] - after
        valid &= gain > 0
        k_all, col = np.nonzero(valid)  # by bidder, then increasing count
        g_all = counts[k_all, col]
        keep = np.ones(k_all.size, dtype=bool)
        for g in np.unique(g_all).tolist():
            at = np.flatnonzero(g_all == g)
            limit = free - g + 2
            if at.size > limit:  # only the best bids of count g can be in an optimum
                ranked = at[np.lexsort((k_all[at], -gain[k_all[at], col[at]]))]
                keep[ranked[limit:]] = False
        out_group: list[int] = []
        bidders: list[Bidder] = []
        last = -1
        for k, c in zip(k_all[keep].tolist(), col[keep].tolist(), strict=True):
            if k != last:
                out_group.append(group[k])
                bidders.append((float(before[k]), []))
                last = k
            bidders[-1][1].append((int(counts[k, c]), float(after[k, c])))
        return out_group, bidders

    def _ideal(
        self,
        view: ClusterView,
        ids: np.ndarray,
        dem: np.ndarray,
        n_run: int,
        n: int,
        est: tuple[np.ndarray, np.ndarray],
    ) -> np.ndarray:
        """T_ideal of ``ids`` (the first ``n_run`` running; ``est`` from ``_estimates``) with
        ``n`` active jobs sharing the cluster: length x compute x max(1, demand / fair share),
        the length known or done + the estimated remaining iterations (``lengths``)."""
        over = np.maximum(1.0, dem / (view.num_gpus / max(n, 1)))
        if self.lengths == "known":
            return self._ic[ids] * over
        done, remaining = est
        return (done + remaining) * self._compute[ids] * over

    def _rho_bidders(
        self,
        view: ClusterView,
        ids: np.ndarray,
        dem: np.ndarray,
        n_exp: int,
        bidders: int,
        est: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """``rho(view, ids, running, bidders)`` for ``placement="penalty"`` in the auction,
        where the first ``n_exp`` jobs (the expired bidders for the greedy arbiter, every
        running job for the auction arbiter) are exactly the running ones and ``dem`` is
        ``ids``'s demands: the same float operations in the same order, without computing
        ``view.live`` for every bidder (a waiting job's iterations done are ``done_iters``; a
        running one's are ``iterations_done``, the scalar form of ``live``, or ``live`` over
        the running jobs only when they are many), and with ``iterations x compute`` taken
        once per job; ``est`` (``_estimates``), when given, holds the iterations done and
        remaining."""
        if est is None:
            est = self._estimates(view, ids, n_exp)
        done = est[0]
        it = self._compute[ids]
        # compute x penalty; x 1.0 for waiting jobs
        it[:n_exp] = it[:n_exp] * self._penalty[ids[:n_exp]]
        if self.tuned and n_exp:  # fewer GPUs than the demand: compute x demand / GPUs
            run = ids[:n_exp]
            it[:n_exp] = it[:n_exp] * (self._demand[run] / self._count[run])
        fair_share = view.num_gpus / max(bidders, 1)
        if self.lengths != "known":
            return self._rho_estimated(view, ids, done, it, dem / fair_share, est[1])
        shared = (view.now - self._arrival[ids]) + (self._iters[ids] - done) * it
        return shared / (self._ic[ids] * np.maximum(1.0, dem / fair_share))

    def _bid(
        self,
        plan: Plan,
        job: int,
        own: dict[int, np.ndarray],
        now: float,
        kept: set[int],
        lease_s: float | None = None,
        n: int | None = None,
    ) -> None:
        """One bidder's turn in the auction: its smallest-penalty placement on ``n`` GPUs
        (default its demand), or its own GPUs (an expired job holding ``n``) when they are
        free and no placement has a smaller penalty; a lease of ``lease_s`` (default the
        policy's)."""
        mine = own.get(job)
        if mine is not None and n is not None and n != mine.size:
            mine = None  # a new worker count: placed afresh (its GPUs were released)
        if self.fast_paths and mine is not None and plan.free_mask[mine].all():
            racks = plan.cluster.gpu_rack[mine]
            if racks.min() == racks.max():  # one rack: no placement has a smaller penalty
                kept.add(job)
                self._start(plan, job, mine, now, cross=False, lease_s=lease_s)
                return
        gpus = self.place(plan, job, n)
        if (
            mine is not None
            and plan.free_mask[mine].all()
            and (gpus is None or self._no_better(plan, mine, gpus))
        ):
            gpus = mine
        if gpus is None:
            return
        if mine is not None and np.array_equal(np.sort(gpus), np.sort(mine)):
            kept.add(job)
        self._start(plan, job, gpus, now, lease_s=lease_s)

    def _held(self, jobs: np.ndarray) -> np.ndarray:
        """GPUs each of the running ``jobs`` holds."""
        return self._count[jobs] if self.tuned else self._demand[jobs]

    def _bid_floor(self, view: ClusterView, waiting: np.ndarray, until: float) -> float:
        """The fewest GPUs on offer (free plus released) with which some of the ``waiting``
        jobs may have a winnable bid, at any instant up to ``until``; inf when none waits.
        With fewer, an auction's only bidders are the expired jobs.

        A bid on the demand has improvement ``lease_s`` / T_ideal > 0, so a job may bid once
        its demand is on offer. A smaller count g of a tunable job (``_bid_counts``; waiting,
        it holds its demand d) has improvement (``lease_s`` - remaining x compute x (d / g -
        1)) / T_ideal, whatever the fair share, so it may bid from its smallest count with a
        positive one. Conservative: a margin of 1e-6 x ``lease_s`` covers the rounding of the
        arbiter's float operations, and a job whose time scale by ``until`` dwarfs that margin
        may bid on one GPU. While it waits, none of this changes before a finish."""
        if not waiting.size:
            return math.inf
        dem = self._demand[waiting]
        floor = int(dem.min())
        if not self.tuned or floor <= 1:
            return floor
        jobs = waiting[self._min_counts(view, waiting) == 1]  # tunable
        if not jobs.size:
            return floor
        done = view.done_iters[jobs]
        compute = self._compute[jobs]
        if self.lengths == "known":
            remaining = self._iters[jobs] - done
        else:
            remaining = remaining_iterations(
                view.history, compute, done, method=self.lengths, floor_s=self.lease_s
            )
        work = remaining * compute
        d = self._demand[jobs]
        # the smallest count g with remaining x compute x (d / g - 1) <= lease_s, widened
        need = d * work / (work + self.lease_s * (1.0 + 2e-6))
        g = np.exp2(np.ceil(np.log2(np.maximum(need, 1.0))))
        g[(until - self._arrival[jobs]) + work * d > 1e11] = 1.0
        return min(floor, int(g[g < d].min())) if (g < d).any() else floor

    @staticmethod
    def _all_one_rack(view: ClusterView, jobs: np.ndarray) -> bool:
        """Whether each of ``jobs`` runs inside one rack."""
        rack = view.cluster.gpu_rack
        for j in jobs.tolist():
            r = rack[view.gpus_of(j)]
            if r.min() != r.max():
                return False
        return True

    def _renew_all(self, expired: np.ndarray, now: float) -> None:
        """The auction (4.5.1) when only jobs whose leases expired bid and each holds one
        rack: each bidder finds its own GPUs free (the bidders before it kept theirs) and no
        placement with a smaller penalty exists, so every bidder renews on its own GPUs,
        exactly as the general loop decides, without placing or ordering anything."""
        self._lease_end[expired] = now + self.lease_s
        self._penalty[expired] = 1.0
        self.renewals += int(expired.size)
        self.auction_times.append(now)

    @staticmethod
    def _started_preempted(plan: Plan) -> tuple[set[int], set[int]]:
        """The jobs ``plan`` starts and the jobs it preempts."""
        started: set[int] = set()
        preempted: set[int] = set()
        for a in plan.actions:
            if isinstance(a, Start):
                started.add(a.job)
            elif isinstance(a, Preempt):
                preempted.add(a.job)
        return started, preempted

    def _defer(self, after: np.ndarray) -> list[Action]:
        """The wake-up to ask for when no job waits, with ``after`` the jobs that run once
        this decision's actions are applied.

        With nobody waiting, a lease expiry in which only one-rack jobs bid is a renewal of
        each on its own GPUs (``_renew_all``): it changes no placement, so the policy need not
        wake up for it. It wakes up for the first cross-rack lease end instead (that auction
        may move the job into one rack), or for any earlier event (an arrival, a finish).
        ``_catch_up`` then replays the skipped expiries in order, at the instants the policy
        would have woken up at, so every lease end is what waking up for each would give.
        One-rack leases ending within ``_NEAR_S`` before the first cross-rack one are woken
        up for (an expiry within ``EPS`` of another is decided with it).
        """
        self._deferred = after
        if not after.size:
            return []
        ends = self._lease_end[after]
        cross = self._cross[after]
        if not cross.any():
            return []
        first = float(ends[cross].min())
        near = ends[~cross & (ends >= first - _NEAR_S)]
        return [WakeUp(min(first, float(near.min())) if near.size else first)]

    def _defer_waiting(self, after: np.ndarray, need: float) -> list[Action]:
        """``_defer`` while jobs wait, with ``after`` the running jobs and ``need`` the fewest
        released GPUs with which a waiting job may bid (``_bid_floor`` less the free GPUs).

        Until an arrival or a finish nothing changes for the waiting jobs, so a lease expiry
        of one-rack jobs that release fewer than ``need`` GPUs has the expired jobs as its only
        bidders: each renews on its own GPUs. The policy wakes up at the first lease end that
        may be more, or one lease after the first lease end (so that ``_catch_up`` renews each
        lease at most once): the earliest end of a run of lease ends less than ``EPS`` apart
        (a run holds the expiries decided together and perhaps more) that spans racks or
        releases ``need`` GPUs or more. Waking up at such an end is waking up where the
        general loop does; if its auction is again only renewals, the policy defers again."""
        self._deferred = after
        ends = self._lease_end[after]
        order = np.argsort(ends, kind="stable")
        se = ends[order]
        cap = float(se[0]) + self.lease_s
        starts = np.flatnonzero(np.concatenate(([True], np.diff(se) > EPS)))
        held = self._held(after)[order]
        released = np.add.reduceat(held, starts)
        cross = np.add.reduceat(self._cross[after][order].astype(np.int64), starts)
        hit = np.flatnonzero((cross > 0) | (released >= need))
        wake = min(cap, float(se[starts[hit[0]]])) if hit.size else cap
        return [WakeUp(wake)]

    def _catch_up(self, now: float) -> None:
        """Replay the one-rack renewals skipped since the last call (``_defer``): at each
        instant the policy would have woken up at (the earliest lease end of the jobs then
        running), strictly before ``now``, every lease ending within ``EPS`` renews from that
        instant, as ``_renew_all`` does. Nothing else changed in between: no job waited, and
        the jobs running were those of the last decision (a finish or an arrival is a call)."""
        jobs, self._deferred = self._deferred, None
        if jobs is None or not jobs.size:
            return
        ends = self._lease_end[jobs]
        first = float(ends.min())
        if first >= now:
            return  # no lease ended since the last call
        if first + self.lease_s >= now:
            # No renewal ends before ``now``: each lease renews at most once, at the first
            # wake-up instant that covers it, so the instants are the sorted lease ends
            # grouped ``EPS`` apart (what the general replay below gives, in one pass).
            # Only the ends up to now + EPS can be in a group that starts before ``now``: they
            # are a prefix of the stable sort of every end, so sorting them alone gives the
            # same groups (most calls find one or two among hundreds of running jobs).
            pos = np.flatnonzero(ends <= now + EPS)
            pos = pos[np.argsort(ends[pos], kind="stable")]
            se = ends[pos].tolist()
            out: list[float] = []
            i, n = 0, len(se)
            while i < n and se[i] < now:
                w = se[i]
                lim, new = w + EPS, w + self.lease_s
                j = i + 1
                while j < n and se[j] <= lim:
                    j += 1
                out += [new] * (j - i)
                self.renewals += j - i
                self.auction_times.append(w)
                i = j
            if i:
                renewed = jobs[pos[:i]]
                if self._cross[renewed].any():  # _defer wakes up before this can happen
                    raise RuntimeError("themis: deferred renewal of a cross-rack lease")
                self._lease_end[renewed] = out
            return
        cross = self._cross[jobs]
        # Leases renew more than once before ``now``: replay instant by instant on a heap of
        # (lease end, position), each instant the smallest end w, every end <= w + EPS
        # renewing to w + lease_s (one heap operation per renewal, not a pass over every
        # job per instant).
        heap = list(zip(ends.tolist(), range(ends.size), strict=True))
        heapq.heapify(heap)
        lease_s, renewed = self.lease_s, 0
        w = heap[0][0]
        while w < now:
            lim, new = w + EPS, w + lease_s
            group = []
            while heap and heap[0][0] <= lim:
                group.append(heapq.heappop(heap)[1])
            if cross[group].any():  # _defer wakes up before this can happen
                raise RuntimeError(f"themis: deferred renewal of a cross-rack lease at t={w}")
            for k in group:
                heapq.heappush(heap, (new, k))
            renewed += len(group)
            self.auction_times.append(w)
            w = heap[0][0]
        self.renewals += renewed
        for end, k in heap:
            ends[k] = end
        self._lease_end[jobs] = ends

    def _no_better(self, plan: Plan, mine: np.ndarray, other: np.ndarray) -> bool:
        """Whether ``other`` has no smaller penalty than the job's own GPUs ``mine``."""
        rm, ro = plan.cluster.gpu_rack[mine], plan.cluster.gpu_rack[other]
        return bool(rm.min() == rm.max() or ro.min() != ro.max())

    @staticmethod
    def _running_after(running: np.ndarray, plan: Plan) -> np.ndarray:
        """Jobs that run once ``plan``'s actions are applied."""
        gone = {a.job for a in plan.actions if isinstance(a, Preempt)}
        new = [a.job for a in plan.actions if isinstance(a, Start)]
        if not gone and not new:
            return np.sort(running)
        # Sorted; unique, since a plan starts a job at most once and only when not running.
        jobs = [j for j in running.tolist() if j not in gone] if gone else running.tolist()
        out = np.array(jobs + new, dtype=np.int64)
        out.sort()
        return out

    def _schedule_epochs(self, view: ClusterView) -> Sequence[Action]:
        """``auction="renew"``: synchronized epochs; winners renew on the same GPUs."""
        now = view.now
        epoch = now >= self._next_epoch
        waiting = np.fromiter(view.iter_waiting(), dtype=np.int64, count=view.num_waiting)
        running = np.asarray(view.running(), dtype=np.int64)
        plan = view.plan()
        if epoch:
            self._next_epoch = (math.floor(now / self.lease_s) + 1) * self.lease_s
        if waiting.size and (plan.num_free or (epoch and running.size)):
            ids = np.concatenate((waiting, running))
            is_run = np.zeros(ids.size, dtype=bool)
            is_run[waiting.size :] = True
            rho = self.rho(view, ids, is_run)
            rho_w, rho_r = rho[: waiting.size], rho[waiting.size :]
            vorder = np.lexsort((running, rho_r))  # lowest rho first: the first to lose
            victims, victim_rho = running[vorder], rho_r[vorder]
            victim_open = np.ones(victims.size, dtype=bool)
            for k in np.lexsort((waiting, -rho_w)).tolist():
                job = int(waiting[k])
                gpus = self.place(plan, job)
                if gpus is None and epoch:
                    lower = victim_open & (victim_rho < rho_w[k])
                    plan, gpus = make_room(
                        plan,
                        lambda p, j=job: self.place(p, j),
                        int(self._demand[job]),
                        victims,
                        self._demand[victims],
                        lower,
                    )
                    victim_open &= ~(victim_rho < rho_w[k]) | lower
                if gpus is not None:
                    self._start(plan, job, gpus, now)
        if running.size or plan.actions:  # leases to renew; nothing to renew once idle
            plan.wake_up(self._next_epoch)
        return plan.actions


class ThemisGreedy(Themis):
    """Themis with the greedy arbiter: bidders served in decreasing rho, the first that fits
    wins (``arbiter="greedy"``; module docstring, "Arbiter")."""

    name = "themis-greedy"

    def __init__(
        self,
        *,
        lease_s: float = 600.0,
        auction: str = "reauction",
        placement: str = "penalty",
        cross_rack_slowdown: float = 1.5,
        lengths: str = "known",
    ) -> None:
        super().__init__(
            lease_s=lease_s,
            auction=auction,
            placement=placement,
            cross_rack_slowdown=cross_rack_slowdown,
            lengths=lengths,
            arbiter="greedy",
        )
        self.params = {
            "lease_s": lease_s,
            "auction": auction,
            "placement": placement,
            "cross_rack_slowdown": cross_rack_slowdown,
            "lengths": lengths,
        }


class ThemisDemand(Themis):
    """Themis whose jobs bid for their demand only (``workers="demand"``; module docstring,
    "Worker counts"): the worker count is never tuned, only whether a job runs."""

    name = "themis-demand"

    def __init__(
        self,
        *,
        lease_s: float = 600.0,
        placement: str = "penalty",
        cross_rack_slowdown: float = 1.5,
        lengths: str = "known",
        fairness_knob: float = 0.2,
        partial_allocation: bool = True,
    ) -> None:
        super().__init__(
            lease_s=lease_s,
            placement=placement,
            cross_rack_slowdown=cross_rack_slowdown,
            lengths=lengths,
            fairness_knob=fairness_knob,
            partial_allocation=partial_allocation,
            workers="demand",
        )
        self.params = {
            "lease_s": lease_s,
            "placement": placement,
            "cross_rack_slowdown": cross_rack_slowdown,
            "lengths": lengths,
            "fairness_knob": fairness_knob,
            "partial_allocation": partial_allocation,
        }
