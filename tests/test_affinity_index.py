"""AffinityIndex answers what networkx gives on Cassini's Affinity graph of the same jobs."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from dlcluster_gym.baselines.affinity_index import AffinityIndex
from dlcluster_gym.perf.geometry import JOB, LINK, affinity_graph, has_loop


def _random_job_links(rng: np.random.Generator, n_jobs: int, n_links: int) -> dict:
    out = {}
    for job in rng.permutation(3 * n_jobs)[:n_jobs].tolist():
        k = int(rng.integers(0, min(4, n_links + 1)))
        out[job] = sorted(rng.choice(n_links, size=k, replace=False).tolist())
    return out


def _nx_components(job_links: dict) -> list[tuple[list[int], bool]]:
    """Components in networkx's order, jobs in the graph's insertion order (a subgraph view
    of a small component iterates the component set, whose order follows string hashing)."""
    graph = affinity_graph(job_links)
    comps = []
    for comp in nx.connected_components(graph):
        sub = graph.subgraph(comp)
        jobs = [n[1] for n in graph.nodes if n[0] == JOB and n in comp]
        comps.append((jobs, sub.number_of_edges() >= sub.number_of_nodes()))
    return comps


@pytest.mark.parametrize("seed", range(40))
def test_components_loops_and_attach_match_networkx(seed: int) -> None:
    rng = np.random.default_rng(seed)
    job_links = _random_job_links(rng, int(rng.integers(1, 25)), int(rng.integers(2, 15)))
    index = AffinityIndex(job_links.items())
    graph = affinity_graph(job_links)
    assert index.has_loop == has_loop(graph)
    assert index.components() == _nx_components(job_links)
    assert sorted(index.shared_links()) == sorted(n[1] for n in graph.nodes if n[0] == LINK)
    # A new job: loop and the links whose members change, without mutating the index.
    new_links = sorted(rng.choice(15, size=int(rng.integers(0, 4)), replace=False).tolist())
    loop, joined, fresh = index.attach(new_links)
    trial = {**job_links, -1: new_links}
    new_graph = affinity_graph(trial)
    before = {n[1] for n in graph.nodes if n[0] == LINK}
    after = {n[1] for n in new_graph.nodes if n[0] == LINK}
    assert index.has_loop or loop == has_loop(new_graph)
    assert set(joined) == before & set(new_links)
    assert set(fresh) == after - before
    assert index.components() == _nx_components(job_links)  # attach changed nothing
    index.add(-1, new_links)
    assert index.has_loop == has_loop(new_graph)
    assert index.components() == _nx_components(trial)


def test_two_jobs_on_two_shared_links_form_a_loop() -> None:
    index = AffinityIndex([(0, [5, 9]), (1, [5])])
    assert not index.has_loop
    assert index.attach([9])[0] is False
    assert index.attach([5, 9])[0] is True  # job - link 5 - job 0 - link 9 - job
    index.add(2, [5, 9])
    assert index.has_loop
    assert index.components() == [([0, 1, 2], True)]


@pytest.mark.parametrize("seed", range(40))
def test_partition_matches_components(seed: int) -> None:
    """Roots, jobs per root, shared links per root and loop flags agree with ``components``
    (Cassini's local rescoring of incumbent moves relies on them)."""
    rng = np.random.default_rng(seed)
    job_links = _random_job_links(rng, int(rng.integers(1, 25)), int(rng.integers(2, 15)))
    index = AffinityIndex(job_links.items())
    part = index.partition()
    root_of, jobs_of, link_root, loops = part.root_of, part.jobs_of, part.link_root, part.loops
    assert set(root_of) == set(job_links)
    assert sorted(j for js in jobs_of.values() for j in js) == sorted(job_links)
    assert set(link_root) == set(index.shared_links())
    for jobs, loop in index.components():
        (root,) = {root_of[j] for j in jobs}
        assert set(jobs) <= set(jobs_of[root])
        assert (root in loops) == loop
    assert bool(loops) == index.has_loop


@pytest.mark.parametrize("seed", range(60))
def test_loop_without_matches_networkx(seed: int) -> None:
    """Whether a component keeps a loop once some of its jobs leave (Cassini discards
    incumbent moves that leave a loop in place without rebuilding the graph)."""
    rng = np.random.default_rng(seed)
    job_links = _random_job_links(rng, int(rng.integers(2, 30)), int(rng.integers(2, 10)))
    index = AffinityIndex(job_links.items())
    part = index.partition()
    for root, jobs in part.jobs_of.items():
        for _ in range(4):
            k = int(rng.integers(0, min(3, len(jobs)) + 1))
            removed = rng.choice(jobs, size=k, replace=False).tolist()
            removed.append(10_000)  # a job of no component is ignored
            rest = {j: job_links[j] for j in jobs if j not in removed}
            assert index.loop_without(part, root, removed) == has_loop(affinity_graph(rest))


def test_loop_without_hand_cases() -> None:
    # Jobs 0 and 1 on links 5 and 9: one loop through both; either leaving breaks it.
    index = AffinityIndex([(0, [5, 9]), (1, [5, 9]), (2, [9, 11]), (3, [11])])
    part = index.partition()
    (root,) = part.loops
    assert part.rank[root] == 1
    assert not index.loop_without(part, root, [0])
    assert not index.loop_without(part, root, [1])
    assert index.loop_without(part, root, [2])  # job 2 hangs off the loop
    assert index.loop_without(part, root, [3])
    # A third job on both links: rank 2, one leaving keeps a loop, two leaving do not.
    index.add(4, [5, 9])
    part = index.partition()
    (root,) = part.loops
    assert part.rank[root] == 2
    assert index.loop_without(part, root, [0])
    assert not index.loop_without(part, root, [0, 4])


def _check_against_fresh(index: AffinityIndex, job_links: dict) -> None:
    """An index after adds and removals answers as one built afresh from the jobs left."""
    fresh = AffinityIndex(job_links.items())
    graph = affinity_graph(job_links)
    assert list(index.links_of) == list(job_links)
    assert index.has_loop == fresh.has_loop == has_loop(graph)
    assert index.components() == fresh.components() == _nx_components(job_links)
    assert sorted(index.shared_links()) == sorted(fresh.shared_links())
    assert {k: sorted(v) for k, v in index.members.items()} == {
        k: sorted(v) for k, v in fresh.members.items()
    }
    assert index.degree == fresh.degree
    part, ref = index.partition(), fresh.partition()
    assert sorted(map(sorted, part.jobs_of.values())) == sorted(map(sorted, ref.jobs_of.values()))
    for root, jobs in part.jobs_of.items():
        sub = affinity_graph({j: job_links[j] for j in jobs})
        assert part.rank.get(root, 0) == ref.rank.get(ref.root_of[jobs[0]], 0)
        assert (root in part.loops) == has_loop(sub)
        if root in part.rank:  # cycle rank = edges - nodes + 1 of the component's graph
            assert part.rank[root] == sub.number_of_edges() - sub.number_of_nodes() + 1


@pytest.mark.parametrize("seed", range(40))
def test_remove_matches_a_fresh_index(seed: int) -> None:
    """Cassini takes finished and preempted jobs out of the index instead of rebuilding it."""
    rng = np.random.default_rng(seed)
    n_links = int(rng.integers(2, 12))
    job_links = _random_job_links(rng, int(rng.integers(2, 25)), n_links)
    index = AffinityIndex(job_links.items())
    next_job = 1000
    for _ in range(30):
        if job_links and rng.random() < 0.5:
            job = int(rng.choice(list(job_links)))
            index.remove(job)
            del job_links[job]
        else:
            k = int(rng.integers(0, min(4, n_links + 1)))
            links = sorted(rng.choice(n_links, size=k, replace=False).tolist())
            index.add(next_job, links)
            job_links[next_job] = links
            next_job += 1
        _check_against_fresh(index, job_links)
