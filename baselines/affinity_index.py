"""Cassini's Affinity graph kept as link memberships and a union-find (no graph rebuilds).

``perf.geometry.affinity_graph`` builds the bipartite graph of jobs and shared links with
networkx; Cassini (thesis 4.4.2) needs it once per placement candidate and once per decision
for the time shifts, which at trace scale (hundreds of running jobs, thousands of decisions)
is most of a run. This index answers the same questions incrementally:

- ``attach(links)``: would a new job on these links close a loop, and which shared links would
  it join (with which members), without changing the index;
- ``add(job, links)``: add a job (after its placement is chosen);
- ``components()``: the connected components in the order ``networkx.connected_components``
  gives on ``affinity_graph`` of the same jobs (by their first job in insertion order), each
  with its jobs in insertion order and whether it has a loop.

A connected bipartite graph is loop-free iff it has one edge fewer than nodes; jobs join
components through the links they share, so a new job closes a loop iff two of the shared
links it joins already lie in one component. Removing a job is not supported: build a new
index (Cassini does, when the base policy preempts or migrates in a decision).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import NamedTuple


class Partition(NamedTuple):
    """The components of an ``AffinityIndex`` as they are (``AffinityIndex.partition``)."""

    root_of: dict[int, int]  # root of each job
    jobs_of: dict[int, list[int]]  # jobs of each root, insertion order
    link_root: dict[int, int]  # root of each shared link, in the order they became shared
    loops: set[int]  # roots of the components with a loop
    rank: dict[int, int]  # cycle rank (edges - nodes + 1) of each component with a shared link


class AffinityIndex:
    """Jobs (in insertion order), the links each crosses, and the components they form."""

    def __init__(self, job_links: Iterable[tuple[int, Sequence[int]]] = ()) -> None:
        self.links_of: dict[int, Sequence[int]] = {}
        self.members: dict[int, list[int]] = {}
        self._shared: dict[int, list[int]] = {}  # links with two or more members
        self._parent: dict[int, int] = {}
        self.has_loop = False
        for job, links in job_links:
            self.add(job, links)

    def _find(self, job: int) -> int:
        parent = self._parent
        root = job
        while parent[root] != root:
            root = parent[root]
        while parent[job] != root:
            parent[job], job = root, parent[job]
        return root

    def attach(self, links: Sequence[int]) -> tuple[bool, list[int], list[int]]:
        """For a new job on ``links``: (closes a loop, shared links it joins, links it makes
        shared). Joined and newly shared links together are the links whose members change."""
        roots: list[int] = []
        joined: list[int] = []
        fresh: list[int] = []
        for link in links:
            m = self.members.get(link)
            if not m:
                continue
            roots.append(self._find(m[0]))
            (joined if len(m) > 1 else fresh).append(link)
        return len(roots) != len(set(roots)), joined, fresh

    def add(self, job: int, links: Sequence[int]) -> None:
        """Add ``job`` crossing ``links`` (unique link ids); updates the loop flag: the job
        closes a loop iff two of the shared links it joins already lie in one component."""
        parent = self._parent
        parent[job] = job
        self.links_of[job] = links
        members = self.members
        for link in links:
            m = members.get(link)
            if m is None:
                members[link] = [job]
                continue
            r = self._find(m[0])
            if r == job:  # reached through an earlier link of this job: a loop
                self.has_loop = True
            else:
                parent[r] = job  # the job's component absorbs this one
            m.append(job)
            if len(m) == 2:
                self._shared[link] = m

    def partition(self) -> Partition:
        """The components as they are, for scoring variants of the graph that change only
        some of them."""
        root_of = {job: self._find(job) for job in self.links_of}
        jobs_of: dict[int, list[int]] = {}
        for job, r in root_of.items():
            jobs_of.setdefault(r, []).append(job)
        link_root, loops, _, rank = self._shared_graph(root_of.__getitem__)
        return Partition(root_of, jobs_of, link_root, loops, rank)

    def loop_without(self, part: Partition, root: int, removed: Collection[int]) -> bool:
        """Whether component ``root`` (of ``part``, this index's partition) still has a loop
        once the ``removed`` jobs and their edges leave it. Removing a job of degree d (the
        shared links it crosses) lowers the cycle rank by at most d - 1, so a rank above the
        sum of those bounds answers without a walk; else a union-find over the component's
        shared links without the removed jobs."""
        members = self.members
        mine = [job for job in removed if part.root_of.get(job) == root]
        drop = 0
        for job in mine:
            drop += max(sum(1 for link in self.links_of[job] if len(members[link]) > 1) - 1, 0)
        if part.rank.get(root, 0) > drop:
            return True
        gone = set(mine)
        parent: dict[int, int] = {}

        def find(x: int) -> int:
            while parent.get(x, x) != x:
                x = parent[x]
            return x

        for link, r in part.link_root.items():
            if r != root:
                continue
            first: int | None = None
            for job in members[link]:
                if job in gone:
                    continue
                if first is None:
                    first = find(job)
                    continue
                other = find(job)
                if other == first:
                    return True
                parent[other] = first
        return False

    def _shared_graph(
        self, find: Callable[[int], int]
    ) -> tuple[dict[int, int], set[int], set[int], dict[int, int]]:
        """(root of each shared link, roots of the components with a loop, jobs on a shared
        link, cycle rank of each component) of the bipartite job-link graph; a component has a
        loop when its edges are at least its nodes (jobs plus shared links)."""
        link_root: dict[int, int] = {}  # order: as ``shared_links``
        edges: dict[int, int] = {}
        nodes: dict[int, int] = {}
        in_graph: set[int] = set()
        for link, m in self._shared.items():
            r = find(m[0])
            link_root[link] = r
            edges[r] = edges.get(r, 0) + len(m)
            nodes[r] = nodes.get(r, 0) + 1
            in_graph.update(m)
        for job in in_graph:
            nodes[find(job)] += 1
        rank = {r: e - nodes[r] + 1 for r, e in edges.items()}
        return link_root, {r for r, k in rank.items() if k > 0}, in_graph, rank

    def shared_links(self) -> list[int]:
        """Links that carry more than one job, in the order they became shared (their scores
        are summed exactly, so callers do not depend on the order)."""
        return list(self._shared)

    def components(self) -> list[tuple[list[int], bool]]:
        """(jobs in insertion order, has a loop) per component with a shared link, ordered by
        their first job."""
        _, loops, in_graph, _ = self._shared_graph(self._find)
        comps: dict[int, list[int]] = {}
        for job in self.links_of:
            if job in in_graph:
                comps.setdefault(self._find(job), []).append(job)
        return [(jobs, r in loops) for r, jobs in comps.items()]
