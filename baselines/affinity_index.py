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

from collections.abc import Callable, Iterable, Sequence


class AffinityIndex:
    """Jobs (in insertion order), the links each crosses, and the components they form."""

    def __init__(self, job_links: Iterable[tuple[int, Sequence[int]]] = ()) -> None:
        self.links_of: dict[int, Sequence[int]] = {}
        self.members: dict[int, list[int]] = {}
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

    def partition(self) -> tuple[dict[int, int], dict[int, list[int]], dict[int, int], set[int]]:
        """(root of each job, jobs of each root, root of each shared link, roots of the
        components with a loop): the components as they are, for scoring variants of the
        graph that change only some of them."""
        root_of = {job: self._find(job) for job in self.links_of}
        jobs_of: dict[int, list[int]] = {}
        for job, r in root_of.items():
            jobs_of.setdefault(r, []).append(job)
        link_root, loops, _ = self._shared_graph(root_of.__getitem__)
        return root_of, jobs_of, link_root, loops

    def _shared_graph(
        self, find: Callable[[int], int]
    ) -> tuple[dict[int, int], set[int], set[int]]:
        """(root of each shared link, roots of the components with a loop, jobs on a shared
        link) of the bipartite job-link graph; a component has a loop when its edges are at
        least its nodes (jobs plus shared links)."""
        link_root: dict[int, int] = {}
        edges: dict[int, int] = {}
        nodes: dict[int, int] = {}
        in_graph: set[int] = set()
        for link, m in self.members.items():
            if len(m) > 1:
                r = find(m[0])
                link_root[link] = r
                edges[r] = edges.get(r, 0) + len(m)
                nodes[r] = nodes.get(r, 0) + 1
                in_graph.update(m)
        for job in in_graph:
            nodes[find(job)] += 1
        return link_root, {r for r, e in edges.items() if e >= nodes[r]}, in_graph

    def shared_links(self) -> list[int]:
        """Links that carry more than one job, in order of first appearance."""
        return [link for link, m in self.members.items() if len(m) > 1]

    def components(self) -> list[tuple[list[int], bool]]:
        """(jobs in insertion order, has a loop) per component with a shared link, ordered by
        their first job."""
        _, loops, in_graph = self._shared_graph(self._find)
        comps: dict[int, list[int]] = {}
        for job in self.links_of:
            if job in in_graph:
                comps.setdefault(self._find(job), []).append(job)
        return [(jobs, r in loops) for r, jobs in comps.items()]
