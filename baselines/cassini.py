"""Cassini (Cassini thesis 4.4.2, Algorithm 2) as a module that augments any base policy.

The base policy decides who runs and at which consolidation tier (Themis for ``cassini``,
Dally for ``dally+cassini``, FCFS for ``fcfs+cassini``; the last two combinations are new).
For each job the base starts, Cassini:

1. **Candidates** (step 1: "alternative auction outcomes ... all achieve the same finish-time
   fairness, but their worker placements are different", including "selecting which workers
   ... should be reassigned"): the base's own placement first, then, alternating, (i) other
   placements of the new job of the same size at the same tier on the GPUs free at that
   point (``sim.placement.candidates``) and (ii) with ``candidates="auction"`` (default)
   outcomes in which a running job's workers move too: a swap (the new job takes a running
   job's GPUs, that job takes the new job's base GPUs; same size and tier) or a relocation
   (a running job that shares a link with the new job's base placement moves to other free
   GPUs of its own tier). Every job keeps its worker count and its tier (Themis's rack /
   cross-rack penalty), hence the same finish-time fairness in Themis's estimate. Up to
   ``max_candidates`` in all (10 in 4.5.1). A chosen move is a ``Migrate`` of the running
   job (the engine charges checkpoint + restore), emitted before the new job's ``Start``.
   Jobs the base acts on in the same decision are not moved. ``candidates="new-only"`` is
   the earlier behaviour (our variant): only the new job's own placements.
2. **Affinity graph and scores** (step 2, Algorithm 2 lines 2-23): per candidate, the
   bipartite graph of all running jobs plus the new one over the shared links they cross
   (``perf.contention``: NIC and ToR uplinks); candidates whose graph has a loop are
   discarded (lines 13-15); every shared link is scored with the Table 4.1 optimisation
   (``perf.geometry.link_compatibility``, precision 5 ms), and the candidate's score is the
   mean over its links (footnote of 4.4.2: mean).
3. **Top candidate** (lines 24-25): the highest score; ties keep the earlier candidate, so the
   base's own choice wins unless another one is strictly more compatible (and an incumbent
   moves only for a strictly better score; migration costs do not enter the score, as in
   Algorithm 2). Candidates that move incumbents are scored on an Affinity graph built
   afresh with the moved jobs' new links.
4. **Time shifts** (line 26, Algorithm 1): after all starts of the instant, each loop-free
   connected component of the final Affinity graph gets unique time shifts; new jobs start
   with theirs (``Start(time_shift_s=...)``) and running jobs whose shift changed get
   ``SetTimeShift`` (4.4.2 step 3: the agent delays the next iteration; no cost modelled).

Choices: links whose jobs' summed peak demand fits the capacity score 1 without a search
(any rotation is compatible); when every candidate has a loop the base's placement is kept
and that component's shifts are left as they were; jobs' demand profiles are their
uncontended Up/Down patterns on the placement (``perf.contention.job_link_profiles``), as
Cassini profiles jobs in isolation. Migrations and other actions of the base pass through.

Adaptive-parallelism (Crius) jobs are profiled from the traffic the engine simulates for them
(one model for the engine and Cassini's profiles): their plan's phases per
shared link (``perf.parallelism_links.AdaptiveTraffic``, Crius 5.1's tensor-parallel,
send/recv and data-parallel terms, through ``ClusterView.plan_traffic``: the engine's own
object and cache) on an iteration of the plan's compute + communication seconds with Up =
the plan's communication (no overlap, as the engine), laid on the circle as Cassini 4.1-4.3
lays any job's Up phases, by the converter data-parallel jobs use
(``perf.contention._profiles_on_links``). They cross exactly the links those phases name (a
plan whose cross-rack traffic is nil leaves the uplinks alone). Where a plan's operators
overlap on a link beyond its capacity (back-to-back boundaries at line rate, rounded; or
operators that start together), the summed demand is capped at the capacity
(``perf.contention.cap_overlaps``; our choice, as each phase is capped alone); so are a
data-parallel job's stages that meet on a link by rounding.

Implementation at trace scale (the decisions are those of the direct form, checked
bit for bit on Philly and ITP prefixes): the running jobs that cross shared links are kept
across decisions in start order (the Affinity graph's node order) with their link profiles;
the graph is a ``baselines.affinity_index.AffinityIndex`` (link memberships + union-find), so
scoring a candidate touches only the links it joins (the mean over the other links is carried
as a sum, ``math.fsum``); per-link solutions are cached by the members' placements across
decisions; Algorithm 1 runs per component, on that component's own graph in insertion order,
and is reused while the component is unchanged. (The direct form took the BFS root from a
networkx subgraph view, whose node order for a small component follows the iteration order of
a set of ``("job", id)`` tuples, i.e. Python's string hashing; here it is always the
component's first job in start order, as ``assign_time_shifts`` documents.) A candidate
that moves incumbents is scored on an index built afresh (linear in the running jobs on shared
links); the per-link solutions are still cached by the members' placements. Link profiles
are cached by placement signature (``perf.contention.SharedLinks.profiles``): a job placed on
other GPUs of the same structure (per-NIC GPU counts, machine/rack grouping, NIC and uplink
capacities, machine group) reuses the profiles on its own link ids, the same floats; each
profile is built only when a link score or Algorithm 1 reads it.

Search pruning (``fast_paths``; same choice as scoring every candidate, checked in
``tests/test_speed_paths.py``): scores are at most 1 and a candidate replaces the best only
when strictly better, so a base that scores 1 ends the search; a loop of the Affinity graph
survives in every candidate that leaves all the jobs of its component in place, so with a
loop, candidates that move nobody (or a job of another component) are discarded without
their link profiles, and loops in two components end the search (a candidate moves at most
one incumbent); only the incumbent-moving candidates that can enter the first
``max_candidates`` are generated. A loop also survives a move of one of its own jobs unless
the job lies on every cycle of its component (``AffinityIndex.loop_without``: removing a job
that crosses d shared links lowers the cycle rank by at most d - 1, else a union-find without
it): such candidates are discarded without building their graph, and when no job of the looped
component can break it, the search ends (every candidate would keep the loop). Jobs that
finish or are preempted leave the index (``AffinityIndex.remove``) instead of a rebuild.
``candidates_scored`` then counts fewer candidates (``searches_skipped`` counts the searches
ended early).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from dlcluster_gym.cluster.topology import Tier
from dlcluster_gym.errors import ConfigError, DLClusterError
from dlcluster_gym.perf.contention import SharedLinks, _profiles_on_links, job_link_profiles
from dlcluster_gym.perf.geometry import (
    JOB,
    LINK,
    CommProfile,
    affinity_graph,
    assign_time_shifts,
    link_compatibility,
)
from dlcluster_gym.perf.parallelism import is_adaptive_model
from dlcluster_gym.scheduler import BaseScheduler, is_clairvoyant, make_policy, resolve_policy
from dlcluster_gym.sim import placement
from dlcluster_gym.sim.actions import Action, Migrate, Preempt, Resize, SetTimeShift, Start
from dlcluster_gym.sim.view import ClusterView

from .affinity_index import AffinityIndex

_SHIFT_TOL = 1e-9  # seconds: shifts closer than this are the same shift
_LINK_CACHE_MAX = 200_000  # per-link solutions kept across calls (cleared when exceeded)
_PROFILE_CACHE_MAX = 20_000  # profiles per (model, compute, GPUs) without fast paths
_Entry = tuple[bytes, Mapping[int, CommProfile], list[int]]  # GPUs as bytes, profiles, links
_Moves = tuple[tuple[int, np.ndarray], ...]  # incumbents a candidate moves: (job, new GPUs)
CANDIDATES = ("auction", "new-only")


class _ByModel(dict):
    """A value per model, computed from the first arrived job of that model asked about."""

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self._fn = fn

    def of(self, job: Any) -> Any:
        got = self.get(job.model)
        if got is None:
            got = self[job.model] = self._fn(job.job_id)
        return got


class Cassini(BaseScheduler):
    """Cassini's placement-candidate selection and time shifts on top of a base policy."""

    name = "cassini"
    default_base = "themis"
    # Shortcuts that give the same decisions as the direct form; False scores
    # every incumbent-moving candidate on a graph built afresh (tests compare the two).
    fast_paths: bool = True

    def __init__(
        self,
        *,
        base: str | None = None,
        base_params: dict[str, Any] | None = None,
        max_candidates: int = 10,
        candidates: str = "auction",
    ) -> None:
        if candidates not in CANDIDATES:
            raise ConfigError(
                f"candidates must be one of {', '.join(CANDIDATES)}, got {candidates!r}"
            )
        if isinstance(max_candidates, bool) or not isinstance(max_candidates, int):
            raise ConfigError(f"max_candidates must be an integer >= 1, got {max_candidates!r}")
        if max_candidates < 1:
            raise ConfigError(f"max_candidates must be an integer >= 1, got {max_candidates!r}")
        base = base or self.default_base
        try:
            factory = resolve_policy(base)[0]
        except DLClusterError as exc:
            raise ConfigError(f"policy {self.name!r}: parameter 'base': {exc}") from None
        if isinstance(factory, type) and issubclass(factory, Cassini):
            raise ConfigError(
                f"policy {self.name!r}: base {base!r} is itself a Cassini policy; Cassini "
                "augments a base that decides who runs (e.g. themis, dally, fcfs, tiresias), "
                "not another Cassini"
            )
        super().__init__(
            base=base,
            base_params=dict(base_params or {}),
            max_candidates=max_candidates,
            candidates=candidates,
        )
        self.base = make_policy(base, **(base_params or {}))
        self.clairvoyant = is_clairvoyant(self.base)  # Cassini itself reads no lengths
        # The engine sees this policy: a base that runs jobs on fewer GPUs than their demand
        # (themis with workers="tuned") needs the engine to accept such starts.
        self.elastic_gpu_jobs = bool(getattr(self.base, "elastic_gpu_jobs", False))
        self.max_candidates = max_candidates
        self.candidates = candidates

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.base.reset(view, rng)
        self.links = SharedLinks(view.cluster)
        # Per model of the jobs that arrived: its profile, whether it is adaptive.
        self._models = _ByModel(lambda job: view.model_profile(job))
        self._adaptive = _ByModel(lambda job: is_adaptive_model(view.jobs[job].model))
        self._plan_cache: dict[tuple[str, bytes], tuple[Mapping[int, CommProfile], list[int]]]
        self._plan_cache = {}  # adaptive jobs' profiles per (model, GPU ids)
        self._shift = np.zeros(view.num_job_ids)  # shifts this policy assigned
        # Per job: (its GPUs as bytes, link profiles, links) of its current placement, and the
        # per-link solutions keyed by the members' placements; both are pure functions of
        # their keys, so reusing them across calls changes no decision.
        self._placed: dict[int, _Entry] = {}
        self._linked: dict[int, _Entry] = {}  # running jobs on shared links, start order
        self._index: AffinityIndex | None = AffinityIndex()  # their Affinity graph
        self._start_seq: dict[int, int] = {}
        self._seq = itertools.count()
        self._link_cache: dict[tuple, tuple[float, dict[int, float]]] = {}
        self._profile_cache: dict[tuple, tuple[Mapping[int, CommProfile], list[int]]] = {}
        self._comp_cache: dict[tuple, dict[int, float]] = {}  # component -> Algorithm 1 shifts
        self.candidates_scored = 0
        self.loops_discarded = 0
        self.incumbents_moved = 0
        self.searches_skipped = 0  # searches ended early: base scored 1, or loops in two parts

    # ---------------------------------------------------------------- profiles
    def _profiles(
        self, view: ClusterView, job: int, gpus: np.ndarray
    ) -> tuple[Mapping[int, CommProfile], list[int]]:
        """The job's link profiles on ``gpus`` and the links it crosses: a pure function of
        (model, compute seconds, placement), cached across jobs and decisions. With
        ``fast_paths`` the cache is keyed by the placement's structure
        (``SharedLinks.profiles``: a job on other GPUs of the same shape, NIC speeds and link
        classes reuses the profiles on its own link ids; on the 1,280-GPU heterogeneous
        Crius cluster exact GPU ids rarely repeat); without, by the exact GPU ids (the direct
        form, for the tests). Callers must not mutate the result."""
        spec = view.jobs[job]
        if self._adaptive.of(spec):
            return self._plan_profiles(view, job, gpus)
        compute = spec.compute_s * spec.num_gpus / gpus.size
        # on another count than its demand the job's gradient keeps its size (engine model)
        scale = 1.0 if gpus.size == spec.num_gpus else gpus.size / spec.num_gpus
        if self.fast_paths:
            return self.links.profiles(self._models.of(spec), compute, gpus, scale)
        key = (spec.model, compute, gpus.tobytes(), scale)
        hit = self._profile_cache.get(key)
        if hit is None:
            if len(self._profile_cache) > _PROFILE_CACHE_MAX:
                self._profile_cache.clear()
            hit = (
                job_link_profiles(self.links, self._models.of(spec), compute, gpus, scale),
                self.links.links(gpus).tolist(),
            )
            self._profile_cache[key] = hit
        return hit

    def _plan_profiles(
        self, view: ClusterView, job: int, gpus: np.ndarray
    ) -> tuple[Mapping[int, CommProfile], list[int]]:
        """:meth:`_profiles` of an adaptive-parallelism job (module docstring): its plan's
        phases on each link (``ClusterView.plan_traffic``) as profiles on an iteration of the
        plan's compute + communication, and those links; cached per (model, GPU ids)."""
        spec = view.jobs[job]
        gpus = np.asarray(gpus, dtype=np.int64)
        key = (spec.model, gpus.tobytes())
        hit = self._plan_cache.get(key)
        if hit is None:
            if len(self._plan_cache) > _PROFILE_CACHE_MAX:
                self._plan_cache.clear()
            hit = self._plan_cache[key] = self._plan_links(view, job, gpus)
        return hit

    def _plan_links(
        self, view: ClusterView, job: int, gpus: np.ndarray
    ) -> tuple[dict[int, CommProfile], list[int]]:
        """Uncached :meth:`_plan_profiles`: the engine's iteration (compute + exposed
        communication, Up = communication, ``sim.engine``) and phases, converted as
        ``perf.contention.job_link_profiles`` converts a data-parallel job's."""
        got = view.plan_traffic(job, gpus)
        if got is None:
            return {}, []
        compute, comm, phases = got
        if comm <= 0.0 or not phases:
            return {}, []
        profile = self._models.of(view.jobs[job])
        if profile.comm.overlap:  # the engine exposes all of a plan's communication
            profile = replace(profile, comm=replace(profile.comm, overlap=0.0))
        caps = self.links.capacity_Bps[np.fromiter(phases, dtype=np.int64)].tolist()
        made = _profiles_on_links(
            profile, compute, comm / compute, list(zip(caps, phases.values(), strict=True))
        )
        return dict(zip(phases, made, strict=True)), list(phases)

    def _crossed(self, view: ClusterView, job: int, gpus: np.ndarray) -> list[int]:
        """The shared links ``job`` crosses on ``gpus`` (its profiles' links)."""
        if self._adaptive.of(view.jobs[job]):
            return self._plan_profiles(view, job, gpus)[1]
        return self.links.links(gpus).tolist()

    def _placement(self, view: ClusterView, job: int, gpus: np.ndarray) -> _Entry:
        """(GPUs as bytes, link profiles, links) of ``job`` on ``gpus`` (the last one asked
        for is cached per job, for the candidate chosen after scoring)."""
        key = gpus.tobytes()
        hit = self._placed.get(job)
        if hit is None or hit[0] != key:
            hit = (key, *self._profiles(view, job, gpus))
            self._placed[job] = hit
        return hit

    def _link_result(
        self,
        link: int,
        members: list[int],
        entries: dict[int, _Entry],
        cache: dict[tuple, tuple[float, dict[int, float]]],
    ) -> tuple[float, dict[int, float]]:
        """Score and per-job shifts of ``members`` on ``link``, cached per member placements."""
        key = (link, tuple((j, entries[j][0]) for j in members))
        if key not in cache:
            ps = [entries[j][1][link] for j in members]
            cache[key] = self._solve_link(link, ps, members)
        return cache[key]

    def _solve_link(
        self, link: int, ps: list[CommProfile], members: list[int]
    ) -> tuple[float, dict[int, float]]:
        cap = float(self.links.capacity_Bps[link])
        if sum(p.peak_demand for p in ps) <= cap:
            return 1.0, dict.fromkeys(members, 0.0)
        res = link_compatibility(ps, cap)
        return res.score, dict(zip(members, res.time_shifts, strict=True))

    # ---------------------------------------------------------------- scoring
    def _link_score(self, link: int, members: list[int], entries, cache) -> float:
        return self._link_result(link, sorted(members), entries, cache)[0]

    def _score(
        self,
        index: AffinityIndex,
        job: int,
        links: list[int],
        base_sum: float,
        base_count: int,
        scores: dict[int, float],
        entries: dict[int, _Entry],
        cache: dict[tuple, tuple[float, dict[int, float]]],
    ) -> float | None:
        """Mean link score of the Affinity graph with ``job`` added on ``links`` (None when
        the graph has a loop). Only the links the job joins change their score; the others
        keep theirs (``base_sum`` over ``base_count`` shared links before the job)."""
        if index.has_loop:
            return None
        loop, joined, fresh = index.attach(links)
        if loop:
            return None
        count = base_count + len(fresh)
        if count == 0:
            return 1.0
        terms = [base_sum]
        for link in joined:
            terms.append(-scores[link])
        for link in joined + fresh:
            terms.append(self._link_score(link, [*index.members[link], job], entries, cache))
        return math.fsum(terms) / count

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        actions = list(self.base.schedule(view))
        if not any(isinstance(a, Start | Migrate | Resize) for a in actions):
            return actions
        free = np.asarray(view.free_mask).copy()
        # Running jobs that cross shared links, in start order (the order of the Affinity
        # graph's nodes): kept from the last decision, less the jobs that finished since.
        linked = {j: e for j, e in self._linked.items() if view.is_running(j)}
        moved: dict[int, np.ndarray] = {}  # GPUs of jobs this decision moves
        if len(self._link_cache) > _LINK_CACHE_MAX:
            self._link_cache.clear()
        cache = self._link_cache
        # The index of ``linked``: the last decision's, less the jobs that left (fast paths),
        # else built when first needed.
        index = self._index
        if len(linked) != len(self._linked):
            if self.fast_paths and index is not None:
                for j in self._linked.keys() - linked.keys():
                    index.remove(j)
            else:
                index = None
        out: list[Action] = []
        started: list[int] = []
        # GPUs the base's later actions take stay out of earlier jobs' candidates.
        reserved = np.zeros(free.size, dtype=bool)
        busy = set()  # jobs the base acts on in this decision: Cassini does not move them
        for a in actions:
            if isinstance(a, Start | Migrate | Resize):
                reserved[list(a.gpus)] = True
            if isinstance(a, Preempt | Migrate | Resize):
                busy.add(a.job)
        for a in actions:
            if isinstance(a, Start | Migrate | Resize):
                reserved[list(a.gpus)] = False
            if isinstance(a, Preempt):
                free[moved.pop(a.job, None) if a.job in moved else view.gpus_of(a.job)] = True
                if linked.pop(a.job, None) is not None:  # it left the Affinity graph
                    if self.fast_paths and index is not None:
                        index.remove(a.job)
                    else:
                        index = None
                elif not self.fast_paths:
                    index = None
            elif isinstance(a, Migrate | Resize):
                free[moved[a.job] if a.job in moved else view.gpus_of(a.job)] = True
                g = np.asarray(a.gpus, dtype=np.int64)
                free[g] = False
                moved[a.job] = g
                self._link(linked, a.job, self._placement(view, a.job, g))
                index = None
            elif isinstance(a, Start):
                if index is None:
                    index = AffinityIndex((j, e[2]) for j, e in linked.items())
                self._start_seq[a.job] = next(self._seq)
                g, moves = self._choose(view, a.job, np.asarray(a.gpus, dtype=np.int64),
                                        free & ~reserved, index, linked, cache,
                                        busy | set(moved))  # fmt: skip
                for k, gk in moves:  # incumbents first: the new job may take their GPUs
                    free[moved[k] if k in moved else view.gpus_of(k)] = True
                    free[gk] = False
                    moved[k] = gk
                    self._link(linked, k, self._placement(view, k, gk))
                    out.append(Migrate(k, tuple(gk.tolist())))
                    self.incumbents_moved += 1
                free[g] = False
                moved[a.job] = g
                self._link(linked, a.job, self._placement(view, a.job, g))
                if moves:  # incumbents changed links: the index is rebuilt
                    index = AffinityIndex((j, e[2]) for j, e in linked.items())
                elif a.job in linked:
                    index.add(a.job, linked[a.job][2])
                started.append(a.job)
                a = Start(a.job, tuple(g.tolist()), a.time_shift_s)
            out.append(a)
        if index is None:
            index = AffinityIndex((j, e[2]) for j, e in linked.items())
        self._linked, self._index = linked, index
        return self._with_shifts(out, index, linked, cache, set(started))

    def _link(self, linked: dict[int, _Entry], job: int, entry: _Entry) -> None:
        """Record ``job``'s placement in ``linked`` (kept in start order) when it crosses
        shared links, else drop it from there."""
        self._placed.pop(job, None)
        if not entry[2]:
            linked.pop(job, None)
            return
        fresh = job not in linked
        linked[job] = entry
        if fresh and len(linked) > 1:
            it = reversed(linked)
            next(it)
            if self._start_seq[next(it)] > self._start_seq[job]:  # a move gave it links
                items = sorted(linked.items(), key=lambda kv: self._start_seq[kv[0]])
                linked.clear()
                linked.update(items)

    def _choose(
        self, view, job, base_gpus, free, index, entries, cache, fixed
    ) -> tuple[np.ndarray, _Moves]:
        """The most compatible candidate (the base's own first) and the incumbents it moves.
        Leaves the last candidate's entry under ``entries[job]``; the caller replaces it with
        the chosen one's. ``fixed``: running jobs that must not move in this decision."""
        cluster = view.cluster
        tier = cluster.placement_tier(base_gpus)
        if tier == Tier.MACHINE:  # one machine crosses no shared link: nothing to choose
            return base_gpus, ()
        base = np.sort(base_gpus)
        scores: dict[int, float] = {}
        if not index.has_loop:
            for link in index.shared_links():
                scores[link] = self._link_score(link, index.members[link], entries, cache)
        base_sum, base_count = math.fsum(scores.values()), len(scores)
        # The base's own placement first: no candidate scores above 1 (Table 4.1: one minus
        # a non-negative excess; the mean of such scores), and only a strictly better one
        # (by 1e-12) replaces it, so a base that scores 1 ends the search (fast paths).
        self.candidates_scored += 1
        entries[job] = self._placement(view, job, base)
        got = self._score(index, job, entries[job][2], base_sum, base_count, scores, entries, cache)
        if got is None:
            self.loops_discarded += 1
        best, best_score = (base, ()), (-np.inf if got is None else got)
        fast = self.fast_paths
        if fast and best_score + 1e-12 >= 1.0:
            self.searches_skipped += 1
            return best
        # Loops (fast paths): a candidate's graph keeps every loop of the index whose jobs
        # all stay where they are (the same jobs on the same links are in it), and a
        # candidate moves at most one incumbent. So with a loop in the index, a candidate
        # that moves nobody has a loop, one that moves a job outside a looped component has
        # a loop, and with loops in two components every candidate has one: the base stays.
        local = fast and len(index.links_of) == len(entries) - (job in entries)
        parts = index.partition() if local and index.has_loop else None
        loops = parts.loops if parts is not None else set()
        if len(loops) > 1:
            self.searches_skipped += 1
            return best
        if loops:  # only moving a job every loop passes through can give a loop-free graph
            (root,) = loops
            if all(
                k == job or k in fixed or index.loop_without(parts, root, (k,))
                for k in parts.jobs_of[root]
            ):
                self.searches_skipped += 1
                return best
        scratch = free.copy()
        fpm = np.bincount(cluster.gpu_machine[scratch], minlength=cluster.num_machines)
        fpr = np.bincount(cluster.gpu_rack[scratch], minlength=cluster.num_racks)
        own: list[tuple[np.ndarray, _Moves]] = []
        for c in placement.candidates(
            cluster, scratch, fpm, fpr, base_gpus.size, tier, self.max_candidates
        ):
            if not np.array_equal(c, base):
                own.append((c, ()))
        # Only the first ``need`` candidates after the base's are scored, alternating own
        # and incumbent-moving ones (own first): at most this many of the latter are used.
        need = self.max_candidates - 1
        limit = need - min(len(own), (need + 1) // 2) if fast else self.max_candidates
        others = (
            self._incumbent_moves(view, job, base, free, entries, fixed, limit)
            if self.candidates == "auction" and limit > 0
            else []
        )
        cands: list[tuple[np.ndarray, _Moves]] = [(base, ())]
        for pair in itertools.zip_longest(own, others):  # alternate the two kinds
            cands.extend(c for c in pair if c is not None)
        cands = cands[: self.max_candidates]
        for c, moves in cands[1:]:
            self.candidates_scored += 1
            if moves and local:
                if parts is None:
                    parts = index.partition()
                ks = [k for k, _ in moves]
                if loops and not loops <= {parts.root_of.get(k) for k in ks}:
                    got = None  # a looped component keeps all its jobs: still a loop
                elif any(index.loop_without(parts, r, ks) for r in loops):
                    got = None  # a loop that does not pass through the moved jobs stays
                else:
                    got = self._moved_score_local(
                        view, job, c, moves, entries, cache, index, scores, parts
                    )
            elif moves:
                got = self._moved_score(view, job, c, moves, entries, cache)
            elif fast and index.has_loop:
                got = None  # what ``_score`` says, without the candidate's link profiles
            else:
                entries[job] = self._placement(view, job, c)
                got = self._score(
                    index, job, entries[job][2], base_sum, base_count, scores, entries, cache
                )
            if got is None:
                self.loops_discarded += 1
                continue
            if got > best_score + 1e-12:
                best, best_score = (c, moves), got
        return best

    def _incumbent_moves(self, view, job, base, free, entries, fixed, limit) -> list:
        """Candidates in which running jobs' workers move too (4.4.2 step 1), over the running
        jobs on shared links in start order: (a) swap: the new job takes an incumbent's GPUs
        and the incumbent takes the new job's base GPUs (same size and tier); (b) relocation:
        an incumbent that shares a link with the new job's base placement moves to other free
        GPUs of its own tier, the new job keeps its base placement. Every job keeps its worker
        count and its placement tier (Themis's rack / cross-rack slowdown penalty), so all
        candidates have the same finish-time fairness in Themis's own estimate, as the thesis
        requires of its candidates. Stops once it has ``limit`` (the list is a prefix of a
        longer one's)."""
        cluster = view.cluster
        tier = cluster.placement_tier(base)
        mine = set(self._crossed(view, job, base))
        out: list[tuple[np.ndarray, _Moves]] = []
        for k, entry in entries.items():
            if k == job or k in fixed:
                continue
            gk = np.sort(np.asarray(view.gpus_of(k), dtype=np.int64))
            tier_k = cluster.placement_tier(gk)
            if gk.size == base.size and tier_k == tier:
                out.append((gk, ((k, base),)))
            if mine.intersection(entry[2]):
                scratch = free.copy()
                scratch[base] = False
                scratch[gk] = True  # the incumbent may keep some of its own GPUs
                fpm = np.bincount(cluster.gpu_machine[scratch], minlength=cluster.num_machines)
                fpr = np.bincount(cluster.gpu_rack[scratch], minlength=cluster.num_racks)
                for c in placement.candidates(cluster, scratch, fpm, fpr, gk.size, tier_k, 2):
                    if not np.array_equal(c, gk):
                        out.append((base, ((k, c),)))
                        break
            if len(out) >= limit:
                break
        return out

    def _moved_score(self, view, job, gpus, moves, entries, cache) -> float | None:
        """Mean link score of the Affinity graph in which ``moves`` re-place incumbents and
        ``job`` runs on ``gpus`` (None when it has a loop); the graph is built afresh."""
        trial = dict(entries)
        for k, gk in moves:
            e = self._placement(view, k, gk)
            if e[2]:
                trial[k] = e
            else:
                trial.pop(k, None)
        e = self._placement(view, job, gpus)
        if e[2]:
            trial[job] = e
        else:
            trial.pop(job, None)
        index = AffinityIndex((j, x[2]) for j, x in trial.items())
        if index.has_loop:
            return None
        shared = index.shared_links()
        if not shared:
            return 1.0
        return math.fsum(
            self._link_score(link, index.members[link], trial, cache) for link in shared
        ) / len(shared)

    def _moved_score_local(
        self, view, job, gpus, moves, entries, cache, index, scores, parts
    ) -> float | None:
        """``_moved_score`` rebuilding only the components the moves touch: the components
        of the moved incumbents and of the links their new placements and the new job's
        cross. The others keep their jobs, links, loop flags and link scores. Same value:
        loops are a property of each component, and the mean is an exact sum (``fsum``)
        over the same link scores (each a function of the link's members)."""
        root_of, jobs_of, link_root, loops = (
            parts.root_of,
            parts.jobs_of,
            parts.link_root,
            parts.loops,
        )
        placed = {k: self._placement(view, k, gk) for k, gk in moves}
        placed[job] = self._placement(view, job, gpus)
        touched = {root_of[k] for k in placed if k in root_of}
        members = index.members
        for e in placed.values():
            for link in e[2]:
                m = members.get(link)
                if m:
                    touched.add(root_of[m[0]])
        if any(r not in touched for r in loops):
            return None
        trial = dict(entries)
        local: dict[int, list[int]] = {}
        for r in touched:
            for j in jobs_of[r]:
                if j not in placed:
                    local[j] = entries[j][2]
        for k, e in placed.items():
            if e[2]:
                trial[k] = e
                local[k] = e[2]
            else:
                trial.pop(k, None)
        sub = AffinityIndex(local.items())
        if sub.has_loop:
            return None
        terms = [
            scores[link]
            if link in scores
            else self._link_score(link, members[link], entries, cache)
            for link, r in link_root.items()
            if r not in touched
        ]
        shared = sub.shared_links()
        terms += [self._link_score(link, sub.members[link], trial, cache) for link in shared]
        if not terms:
            return 1.0
        return math.fsum(terms) / len(terms)

    def _with_shifts(self, actions, index, entries, cache, started) -> list[Action]:
        shifts: dict[int, float] = {}
        for jobs, loop in index.components():
            if loop:
                continue
            key = tuple((j, entries[j][0]) for j in jobs)
            got = self._comp_cache.get(key)
            if got is None:
                got = self._component_shifts(jobs, index, entries, cache)
                self._comp_cache[key] = got
            shifts.update(got)
        if len(self._comp_cache) > _LINK_CACHE_MAX:
            self._comp_cache.clear()
        out: list[Action] = []
        for a in actions:
            if isinstance(a, Start) and a.job in shifts:
                a = Start(a.job, a.gpus, float(shifts[a.job]))
                self._shift[a.job] = a.time_shift_s
            out.append(a)
        for job, t in shifts.items():
            if job not in started and abs(t - self._shift[job]) > _SHIFT_TOL:
                self._shift[job] = t
                out.append(SetTimeShift(job, float(t)))
        return out

    def _component_shifts(self, jobs, index, entries, cache) -> dict[int, float]:
        """Algorithm 1 on one loop-free component (its Affinity subgraph, same node order)."""
        sub = affinity_graph({j: index.links_of[j] for j in jobs})
        link_shifts = {}
        for node in sub.nodes:
            if node[0] == LINK:
                members = sorted(k[1] for k in sub[node])
                link_shifts[node[1]] = self._link_result(node[1], members, entries, cache)[1]
        periods = {
            n[1]: next(iter(entries[n[1]][1].values())).iteration_time
            for n in sub.nodes
            if n[0] == JOB
        }
        return assign_time_shifts(sub, link_shifts, periods)


class DallyCassini(Cassini):
    """Dally's decisions with Cassini's placement candidates and time shifts (new)."""

    name = "dally+cassini"
    default_base = "dally"


class FCFSCassini(Cassini):
    """FCFS with Cassini's placement candidates and time shifts (new)."""

    name = "fcfs+cassini"
    default_base = "fcfs"


class CassiniDemand(Cassini):
    """Th+Cassini over ``themis-demand``: Themis's jobs bid for their demand only (the
    worker count is not tuned)."""

    name = "cassini-demand"
    default_base = "themis-demand"
