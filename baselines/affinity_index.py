"""Cassini's Affinity graph kept as link memberships and a union-find (no graph rebuilds).

``perf.geometry.affinity_graph`` builds the bipartite graph of jobs and shared links with
networkx; Cassini (thesis 4.4.2) needs it once per placement candidate and once per decision
for the time shifts, which at trace scale (hundreds of running jobs, thousands of decisions)
is most of a run. This index answers the same questions incrementally:

- ``attach(links)``: would a new job on these links close a loop, and which shared links would
  it join (with which members), without changing the index;
- ``add(job, links)``: add a job (after its placement is chosen);
- ``remove(job)``: take a job out (it finished or was preempted); the other jobs keep their
  insertion order;
- ``components()``: the connected components in the order ``networkx.connected_components``
  gives on ``affinity_graph`` of the same jobs (by their first job in insertion order), each
  with its jobs in insertion order and whether it has a loop.

A connected bipartite graph is loop-free iff it has one edge fewer than nodes (its cycle rank,
edges - nodes + 1, is 0); jobs join components through the links they share, so a new job
closes a loop iff two of the shared links it joins already lie in one component. Each
component's edges and nodes (jobs on a shared link plus its shared links) and each job's
degree (the shared links it crosses) are kept as jobs come and go, so loops and ranks are read
without walking the links. Removing a job re-forms only its own component.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field


@dataclass
class Partition:
    """The components of an ``AffinityIndex`` as they are (``AffinityIndex.partition``)."""

    root_of: dict[int, int]  # root of each job
    jobs_of: dict[int, list[int]]  # jobs of each root, insertion order
    loops: set[int]  # roots of the components with a loop
    rank: dict[int, int]  # cycle rank (edges - nodes + 1) of each component with a shared link
    shared: dict[int, list[int]] = field(repr=False)  # the index's shared links and members
    _link_root: dict[int, int] | None = field(default=None, repr=False)

    @property
    def link_root(self) -> dict[int, int]:
        """Root of each shared link, in the order the links became shared (built once)."""
        if self._link_root is None:
            root_of = self.root_of
            self._link_root = {link: root_of[m[0]] for link, m in self.shared.items()}
        return self._link_root


class AffinityIndex:
    """Jobs (in insertion order), the links each crosses, and the components they form."""

    def __init__(self, job_links: Iterable[tuple[int, Sequence[int]]] = ()) -> None:
        self.links_of: dict[int, Sequence[int]] = {}
        self.members: dict[int, list[int]] = {}
        self._shared: dict[int, list[int]] = {}  # links with two or more members
        self._parent: dict[int, int] = {}
        self.degree: dict[int, int] = {}  # shared links of each job on one (absent: none)
        self._stats: dict[int, list[int]] = {}  # root -> [edges, nodes] of its component
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
        stats = self._stats
        degree = self.degree
        mine: list[int] | None = None  # [edges, nodes] of the job's component (job is root)
        deg = 0
        for link in links:
            m = members.get(link)
            if m is None:
                members[link] = [job]
                continue
            r = self._find(m[0])
            if len(m) == 1:  # the link becomes shared: a node, and an edge to its member
                j0 = m[0]
                d0 = degree.get(j0, 0)
                degree[j0] = d0 + 1
                st = stats.get(r)
                if st is None:
                    st = stats[r] = [0, 0]
                st[0] += 1
                st[1] += 2 if d0 == 0 else 1
                self._shared[link] = m
            if r == job:  # reached through an earlier link of this job: a loop
                self.has_loop = True
            else:
                parent[r] = job  # the job's component absorbs this one
                st = stats.pop(r)
                if mine is None:
                    mine = stats[job] = st
                else:
                    mine[0] += st[0]
                    mine[1] += st[1]
            mine[0] += 1  # type: ignore[index]  # the edge job - link
            deg += 1
            m.append(job)
        if deg:
            mine[1] += 1  # type: ignore[index]  # the job's node
            degree[job] = deg

    def remove(self, job: int) -> None:
        """Take ``job`` out; its component is re-formed from its other jobs (it may split),
        the other components are untouched."""
        links = self.links_of.pop(job)
        if job not in self.degree:  # on no shared link: a component of its own
            for link in links:
                del self.members[link]
            del self._parent[job]
            return
        root = self._find(job)
        comp = [j for j in self.links_of if self._find(j) == root]
        members, shared, parent, degree = self.members, self._shared, self._parent, self.degree
        for link in links:
            m = members[link]
            m.remove(job)
            if not m:
                del members[link]
            elif len(m) == 1:
                del shared[link]
        del parent[job]
        del degree[job]
        del self._stats[root]
        for j in comp:
            parent[j] = j
            degree.pop(j, None)
        # Re-form the component: union the members of each of its remaining shared links.
        seen: set[int] = set()
        edges: dict[int, int] = {}
        nodes: dict[int, int] = {}
        for j in comp:
            for link in self.links_of[j]:
                m = members[link]
                if len(m) < 2 or link in seen:
                    continue
                seen.add(link)
                first = self._find(m[0])
                for k in m:
                    degree[k] = degree.get(k, 0) + 1
                    r = self._find(k)
                    if r != first:
                        parent[r] = first
        for link in seen:
            r = self._find(members[link][0])
            edges[r] = edges.get(r, 0) + len(members[link])
            nodes[r] = nodes.get(r, 0) + 1
        for j in comp:
            if j in degree:
                nodes[self._find(j)] += 1
        for r, e in edges.items():
            self._stats[r] = [e, nodes[r]]
        self.has_loop = any(e >= n for e, n in self._stats.values())

    def partition(self) -> Partition:
        """The components as they are, for scoring variants of the graph that change only
        some of them."""
        find = self._find
        root_of = {job: find(job) for job in self.links_of}
        jobs_of: dict[int, list[int]] = {}
        for job, r in root_of.items():
            jobs_of.setdefault(r, []).append(job)
        rank = {r: e - n + 1 for r, (e, n) in self._stats.items()}
        loops = {r for r, k in rank.items() if k > 0}
        return Partition(root_of, jobs_of, loops, rank, self._shared)

    def loop_without(self, part: Partition, root: int, removed: Collection[int]) -> bool:
        """Whether component ``root`` (of ``part``, this index's partition) still has a loop
        once the ``removed`` jobs and their edges leave it. Removing a job of degree d (the
        shared links it crosses) lowers the cycle rank by at most d - 1, so a rank above the
        sum of those bounds answers without a walk; else a union-find over the component's
        shared links without the removed jobs."""
        mine = [job for job in removed if part.root_of.get(job) == root]
        drop = 0
        for job in mine:
            drop += max(self.degree.get(job, 0) - 1, 0)
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
            for job in self.members[link]:
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

    def shared_links(self) -> list[int]:
        """Links that carry more than one job, in the order they became shared (their scores
        are summed exactly, so callers do not depend on the order)."""
        return list(self._shared)

    def components(self) -> list[tuple[list[int], bool]]:
        """(jobs in insertion order, has a loop) per component with a shared link, ordered by
        their first job."""
        find, degree = self._find, self.degree
        comps: dict[int, list[int]] = {}
        for job in self.links_of:
            if job in degree:
                comps.setdefault(find(job), []).append(job)
        stats = self._stats
        return [(jobs, stats[r][0] >= stats[r][1]) for r, jobs in comps.items()]
