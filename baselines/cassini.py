"""Cassini (Cassini thesis 4.4.2, Algorithm 2) as a module that augments any base policy.

The base policy decides who runs and at which consolidation tier (Themis for ``cassini``,
Dally for ``dally+cassini``, FCFS for ``fcfs+cassini``; the last two combinations are new).
For each job the base starts, Cassini:

1. **Candidates** (step 1): the base's own placement plus other placements of the same size
   at the same tier on the GPUs free at that point (other machines / racks), up to
   ``max_candidates`` in all (10 in 4.5.1), from ``sim.placement.candidates``.
2. **Affinity graph and scores** (step 2, Algorithm 2 lines 2-23): per candidate, the
   bipartite graph of all running jobs plus the new one over the shared links they cross
   (``perf.contention``: NIC and ToR uplinks); candidates whose graph has a loop are
   discarded (lines 13-15); every shared link is scored with the Table 4.1 optimisation
   (``perf.geometry.link_compatibility``, precision 5 ms), and the candidate's score is the
   mean over its links (footnote of 4.4.2: mean).
3. **Top candidate** (lines 24-25): the highest score; ties keep the earlier candidate, so the
   base's own choice wins unless another one is strictly more compatible.
4. **Time shifts** (line 26, Algorithm 1): after all starts of the instant, each loop-free
   connected component of the final Affinity graph gets unique time shifts; new jobs start
   with theirs (``Start(time_shift_s=...)``) and running jobs whose shift changed get
   ``SetTimeShift`` (4.4.2 step 3: the agent delays the next iteration; no cost modelled).

Choices: links whose jobs' summed peak demand fits the capacity score 1 without a search
(any rotation is compatible); when every candidate has a loop the base's placement is kept
and that component's shifts are left as they were; jobs' demand profiles are their
uncontended Up/Down patterns on the placement (``perf.contention.job_link_profiles``), as
Cassini profiles jobs in isolation. Migrations and other actions of the base pass through.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import networkx as nx
import numpy as np

from dlcluster_gym.cluster.topology import Tier
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.perf.contention import SharedLinks, job_link_profiles
from dlcluster_gym.perf.geometry import (
    JOB,
    LINK,
    CommProfile,
    affinity_graph,
    assign_time_shifts,
    has_loop,
    link_compatibility,
)
from dlcluster_gym.scheduler import BaseScheduler, make_policy
from dlcluster_gym.sim import placement
from dlcluster_gym.sim.actions import Action, Migrate, Preempt, Resize, SetTimeShift, Start
from dlcluster_gym.sim.view import ClusterView

_SHIFT_TOL = 1e-9  # seconds: shifts closer than this are the same shift


class Cassini(BaseScheduler):
    """Cassini's placement-candidate selection and time shifts on top of a base policy."""

    name = "cassini"
    default_base = "themis"

    def __init__(
        self,
        *,
        base: str | None = None,
        base_params: dict[str, Any] | None = None,
        max_candidates: int = 10,
    ) -> None:
        if isinstance(max_candidates, bool) or not isinstance(max_candidates, int):
            raise ConfigError(f"max_candidates must be an integer >= 1, got {max_candidates!r}")
        if max_candidates < 1:
            raise ConfigError(f"max_candidates must be an integer >= 1, got {max_candidates!r}")
        base = base or self.default_base
        super().__init__(
            base=base, base_params=dict(base_params or {}), max_candidates=max_candidates
        )
        self.base = make_policy(base, **(base_params or {}))
        self.max_candidates = max_candidates

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.base.reset(view, rng)
        self.links = SharedLinks(view.cluster)
        self._models = {j.model: view.model_profile(j.job_id) for j in view.jobs}
        self._shift = np.zeros(len(view.jobs))  # shifts this policy assigned
        self.candidates_scored = 0
        self.loops_discarded = 0

    # ---------------------------------------------------------------- profiles
    def _profiles(self, view: ClusterView, job: int, gpus: np.ndarray) -> dict[int, CommProfile]:
        spec = view.jobs[job]
        compute = spec.compute_s * spec.num_gpus / gpus.size
        return job_link_profiles(self.links, self._models[spec.model], compute, gpus)

    def _link_result(
        self,
        link: int,
        members: list[int],
        profs: dict[int, dict[int, CommProfile]],
        tokens: dict[int, Hashable],
        cache: dict[tuple, tuple[float, dict[int, float]]],
    ) -> tuple[float, dict[int, float]]:
        """Score and per-job shifts of ``members`` on ``link``, cached per member profiles."""
        key = (link, tuple((j, tokens[j]) for j in members))
        if key not in cache:
            cache[key] = self._solve_link(link, [profs[j][link] for j in members], members)
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
    def _score(
        self,
        job_links: dict[int, np.ndarray],
        profs: dict[int, dict[int, CommProfile]],
        tokens: dict[int, Hashable],
        cache: dict[tuple, tuple[float, dict[int, float]]],
    ) -> tuple[float, nx.Graph] | None:
        graph = affinity_graph({j: ls.tolist() for j, ls in job_links.items()})
        if has_loop(graph):
            return None
        scores = []
        for node in graph.nodes:
            if node[0] != LINK:
                continue
            members = sorted(k[1] for k in graph[node])
            scores.append(self._link_result(node[1], members, profs, tokens, cache)[0])
        return (float(np.mean(scores)) if scores else 1.0), graph

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        actions = list(self.base.schedule(view))
        if not any(isinstance(a, Start | Migrate | Resize) for a in actions):
            return actions
        free = np.asarray(view.free_mask).copy()
        placed: dict[int, np.ndarray] = {j: np.asarray(view.gpus_of(j)) for j in view.running()}
        profs = {j: self._profiles(view, j, g) for j, g in placed.items()}
        tokens: dict[int, Hashable] = dict.fromkeys(placed, "running")
        job_links = {j: self.links.links(g) for j, g in placed.items()}
        cache: dict[tuple, tuple[float, dict[int, float]]] = {}
        out: list[Action] = []
        started: list[int] = []
        # GPUs the base's later actions take stay out of earlier jobs' candidates.
        reserved = np.zeros(free.size, dtype=bool)
        for a in actions:
            if isinstance(a, Start | Migrate | Resize):
                reserved[list(a.gpus)] = True
        for a in actions:
            if isinstance(a, Start | Migrate | Resize):
                reserved[list(a.gpus)] = False
            if isinstance(a, Preempt):
                free[placed.pop(a.job)] = True
                profs.pop(a.job, None)
                tokens.pop(a.job, None)
                job_links.pop(a.job, None)
            elif isinstance(a, Migrate | Resize):
                free[placed[a.job]] = True
                g = np.asarray(a.gpus, dtype=np.int64)
                free[g] = False
                placed[a.job] = g
                profs[a.job] = self._profiles(view, a.job, g)
                tokens[a.job] = ("moved", g.tobytes())
                job_links[a.job] = self.links.links(g)
            elif isinstance(a, Start):
                g, prof = self._choose(
                    view,
                    a.job,
                    np.asarray(a.gpus, dtype=np.int64),
                    free & ~reserved,
                    job_links,
                    profs,
                    tokens,
                    cache,
                )
                free[g] = False
                placed[a.job] = g
                profs[a.job] = prof
                tokens[a.job] = ("placed", g.tobytes())
                job_links[a.job] = self.links.links(g)
                started.append(a.job)
                a = Start(a.job, tuple(g.tolist()), a.time_shift_s)
            out.append(a)
        return self._with_shifts(out, job_links, profs, tokens, cache, set(started))

    def _choose(
        self, view, job, base_gpus, free, job_links, profs, tokens, cache
    ) -> tuple[np.ndarray, dict[int, CommProfile]]:
        """The most compatible candidate (the base's own first) and its link profiles."""
        cluster = view.cluster
        tier = cluster.placement_tier(base_gpus)
        if tier == Tier.MACHINE:  # one machine crosses no shared link: nothing to choose
            return base_gpus, self._profiles(view, job, base_gpus)
        scratch = free.copy()
        fpm = np.bincount(cluster.gpu_machine[scratch], minlength=cluster.num_machines)
        fpr = np.bincount(cluster.gpu_rack[scratch], minlength=cluster.num_racks)
        cands = [np.sort(base_gpus)]
        for c in placement.candidates(
            cluster, scratch, fpm, fpr, base_gpus.size, tier, self.max_candidates
        ):
            if len(cands) >= self.max_candidates:
                break
            if not np.array_equal(c, cands[0]):
                cands.append(c)
        best, best_prof, best_score = cands[0], None, -np.inf
        for c in cands:
            prof = self._profiles(view, job, c)
            trial_links = {**job_links, job: self.links.links(c)}
            self.candidates_scored += 1
            got = self._score(
                trial_links, {**profs, job: prof}, {**tokens, job: ("placed", c.tobytes())}, cache
            )
            if got is None:
                self.loops_discarded += 1
                continue
            if got[0] > best_score + 1e-12:
                best, best_prof, best_score = c, prof, got[0]
        if best_prof is None:
            best_prof = self._profiles(view, job, best)
        return best, best_prof

    def _with_shifts(self, actions, job_links, profs, tokens, cache, started) -> list[Action]:
        graph = affinity_graph({j: ls.tolist() for j, ls in job_links.items()})
        shifts: dict[int, float] = {}
        for comp in nx.connected_components(graph):
            sub = graph.subgraph(comp)
            if has_loop(sub):
                continue
            link_shifts = {}
            for node in sub.nodes:
                if node[0] == LINK:
                    members = sorted(k[1] for k in sub[node])
                    link_shifts[node[1]] = self._link_result(
                        node[1], members, profs, tokens, cache
                    )[1]
            periods = {
                n[1]: next(iter(profs[n[1]].values())).iteration_time
                for n in sub.nodes
                if n[0] == JOB
            }
            shifts.update(assign_time_shifts(sub, link_shifts, periods))
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


class DallyCassini(Cassini):
    """Dally's decisions with Cassini's placement candidates and time shifts (new)."""

    name = "dally+cassini"
    default_base = "dally"


class FCFSCassini(Cassini):
    """FCFS with Cassini's placement candidates and time shifts (new)."""

    name = "fcfs+cassini"
    default_base = "fcfs"
