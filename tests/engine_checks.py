"""Invariants of a simulation, checked on the engine's own state at every decision instant.

:func:`checked_run` drives :meth:`Engine.instants` with the engine's policy, as
:meth:`Engine.run` does, and after every batch of events (and the previous instant's actions)
checks :func:`check_state`; at the end :func:`check_end` checks the results. Used by the
scenario x policy matrix and the property tests.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlcluster_gym.perf.network import placement_overhead
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.sim.results import Results
from dlcluster_gym.sim.state import DONE, DROPPED, PENDING, RUNNING, WAITING

RTOL = 1e-9


class Tracker:
    """What the checks carry from one instant to the next."""

    def __init__(self, engine: Engine) -> None:
        n = len(engine.jobs)
        self.now = 0.0
        self.done = np.zeros(n)
        self.max_alloc = np.zeros(n, dtype=np.int64)
        self.min_alloc = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        self.instants = 0


def _alone_iter_s(e: Engine, job: int, gpus: np.ndarray) -> float:
    """A job's iteration time on ``gpus`` with no other job on the cluster, computed here
    from the network model (adaptive-parallelism jobs: their best plan's)."""
    spec = e.jobs[job]
    if e.par is not None and e.par_jobs[job]:
        compute, comm = e._par_speed(job, gpus)
        return compute + (0.0 if e.scenario.network == "ideal" else comm)
    compute = spec.compute_s * spec.num_gpus / gpus.size
    if e.scenario.network == "ideal":
        return compute
    overhead = placement_overhead(e.cluster, e.profile(job), gpus)
    if gpus.size == spec.num_gpus:
        return compute * (1.0 + overhead)
    # another count than its demand: the same global batch, the same gradient all-reduced
    return compute + overhead * spec.compute_s


def check_state(engine: Engine, tr: Tracker) -> None:
    """GPUs and CPUs held once each, no job faster than its placement alone, the job sets
    partition the jobs, work only grows and never exceeds a job's iterations, time never goes
    back."""
    e = engine
    cl = e.cluster
    n = len(e.jobs)
    at = f"t={e.now}"
    assert e.now >= tr.now, f"time went back from {tr.now} to {e.now}"
    tr.now = e.now
    tr.instants += 1
    # GPUs: each running job's GPUs are its own, no GPU in two jobs, the free counts agree.
    # The jobs of a time-shared GPU set (``TimeShare``) run on its holder's GPUs without
    # owning them.
    owner = np.full(cl.num_gpus, -1, dtype=np.int64)
    shares = e.shares
    for job in e.running:
        gpus = np.asarray(e.job_gpus.get(job, ()), dtype=np.int64)
        holder = -1 if shares is None else int(shares.holder[job])
        if holder >= 0 and holder != job:
            assert e.status[holder] == RUNNING, f"{at}: job {job} shares a stopped job's GPUs"
            assert sorted(gpus.tolist()) == sorted(e.job_gpus[holder].tolist()), at
        else:
            assert (owner[gpus] == -1).all(), f"{at}: a GPU of job {job} is held twice"
            owner[gpus] = job
        assert e.alloc_n[job] == len(gpus), f"{at}: job {job} alloc_n {e.alloc_n[job]}"
        tr.max_alloc[job] = max(tr.max_alloc[job], len(gpus))
        if len(gpus):
            tr.min_alloc[job] = min(tr.min_alloc[job], len(gpus))
        # No job runs faster than its placement alone (contention and shifts only slow it).
        if len(gpus) and not e.jobs[job].is_ps:
            alone = _alone_iter_s(e, job, gpus)
            assert e.iter_time[job] >= alone * (1 - RTOL), (
                f"{at}: job {job} iterates in {e.iter_time[job]} s, its placement alone {alone} s"
            )
    assert (owner == e.gpu_owner).all(), f"{at}: gpu_owner disagrees with the jobs' GPUs"
    if shares is not None:  # each shared set: two jobs or more, its time split among them
        for holder, members in shares.sets.items():
            assert len(members) >= 2 and members[0] == holder, f"{at}: shared set {members}"
            share = shares.time_share[members]
            assert abs(share.sum() - 1.0) < 1e-9, f"{at}: time shares {share}"
            assert (shares.progress_rate[members] <= share).all(), f"{at}: rates above shares"
    assert (e.free_mask == (owner < 0)).all(), f"{at}: free_mask disagrees with gpu_owner"
    free = (owner < 0).astype(np.int64)
    per_machine = np.bincount(cl.gpu_machine, weights=free, minlength=cl.num_machines)
    assert (per_machine == e.free_per_machine).all(), f"{at}: free GPUs per machine"
    per_rack = np.bincount(cl.gpu_rack, weights=free, minlength=len(e.free_per_rack))
    assert (per_rack == e.free_per_rack).all(), f"{at}: free GPUs per rack"
    for job in range(n):
        if job not in e.running:
            assert e.alloc_n[job] == 0, f"{at}: job {job} holds GPUs but is not running"
    # CPUs and memory of parameter-server jobs.
    if e.ps is not None:
        used_cpu = np.zeros(cl.num_machines)
        used_mem = np.zeros(cl.num_machines)
        for job, cfg in e.ps.configs.items():
            assert e.status[job] == RUNNING, f"{at}: PS job {job} holds CPUs, not running"
            np.add.at(used_cpu, cfg.servers(), cfg.vcpus())
            np.add.at(used_mem, cfg.servers(), cfg.memory(e.ps.models[job]))
        cap_cpu = cl.machine_vcpus.astype(np.float64)
        assert (used_cpu <= cap_cpu * (1 + RTOL) + 1e-9).all(), f"{at}: vCPUs over capacity"
        assert np.allclose(e.ps.free_vcpus, cap_cpu - used_cpu), f"{at}: free vCPUs"
        cap_mem = cl.machine_memory_gb.astype(np.float64)
        assert (used_mem <= cap_mem * (1 + RTOL) + 1e-9).all(), f"{at}: memory over capacity"
        assert np.allclose(e.ps.free_mem, cap_mem - used_mem), f"{at}: free memory"
    # The job sets partition the jobs.
    status = e.status
    assert set(e.running) == set(np.flatnonzero(status == RUNNING).tolist()), at
    assert set(e.waiting) == set(np.flatnonzero(status == WAITING).tolist()), at
    assert e.n_done == int((status == DONE).sum()), f"{at}: finished count"
    assert np.isin(status, (PENDING, WAITING, RUNNING, DONE, DROPPED)).all(), at
    arrivals = np.array([j.arrival_s for j in e.jobs])
    seen = np.isin(status, (WAITING, RUNNING, DONE))
    assert (arrivals[seen] <= e.now).all(), f"{at}: a job is seen before its arrival"
    # Work: done iterations (brought up to now) only grow and never exceed the job's.
    done = e.done_iters.copy()
    for job in e.running:
        done[job] = e.done_iters_now(job)
    tol = RTOL * np.maximum(e.iterations, 1.0)
    assert (done >= tr.done - tol).all(), f"{at}: work went back"
    assert (done <= e.iterations + tol).all(), f"{at}: more work done than a job has"
    assert (done[status == DONE] >= e.iterations[status == DONE] - tol[status == DONE]).all()
    tr.done = np.maximum(tr.done, done)


def _note_allocations(tr: Tracker, actions) -> None:
    """GPU counts the actions give jobs: a job can start on a count and finish before the next
    instant, where ``check_state`` would see it."""
    for a in actions or ():
        gpus = getattr(a, "gpus", None)
        if gpus is not None and hasattr(a, "job") and len(gpus):
            tr.max_alloc[a.job] = max(tr.max_alloc[a.job], len(gpus))
            tr.min_alloc[a.job] = min(tr.min_alloc[a.job], len(gpus))


def checked_run(engine: Engine) -> tuple[Results, Tracker]:
    """Run ``engine`` to the end under its policy, checking the state at every instant."""
    tr = Tracker(engine)
    steps = engine.instants()
    try:
        view = next(steps)
        while True:
            check_state(engine, tr)
            actions = engine._decide(view)
            _note_allocations(tr, actions)
            view = steps.send(actions)
    except StopIteration as stop:
        res = stop.value
    check_state(engine, tr)
    return res, tr


def check_end(engine: Engine, res: Results, tr: Tracker, ideal: Results | None = None) -> None:
    """Every job accounted for once; finished jobs started after arriving; a job that never
    ran on the GPU count it demanded took at least its isolated run time (``ideal``'s JCT)."""
    s = res.summary
    n = len(engine.jobs)
    assert s["jobs_completed"] + s["jobs_unfinished"] + s["jobs_dropped"] == n, s
    assert s["jobs_completed"] == int((engine.status == DONE).sum())
    jobs = res.jobs
    done = ~np.isnan(np.asarray(jobs["finish_s"], dtype=float))
    arrival = np.asarray(jobs["arrival_s"], dtype=float)
    start = np.asarray(jobs["first_start_s"], dtype=float)
    finish = np.asarray(jobs["finish_s"], dtype=float)
    assert (start[done] >= arrival[done]).all(), "a job started before it arrived"
    assert (finish[done] >= start[done]).all(), "a job finished before it started"
    if ideal is None:
        return
    ideal_jct = dict(zip(ideal.jobs["job_id"].tolist(), ideal.jobs["jct_s"], strict=True))
    ids = np.asarray(jobs["job_id"])
    for job, jct, fin in zip(ids, np.asarray(jobs["jct_s"], dtype=float), done, strict=True):
        spec = engine.jobs[int(job)]
        if not fin or spec.is_ps or engine.par_jobs[int(job)] or int(job) not in ideal_jct:
            continue
        if tr.max_alloc[int(job)] != spec.num_gpus or tr.min_alloc[int(job)] != spec.num_gpus:
            continue  # ran on another GPU count than it demanded: its isolated run is no bound
        bound = ideal_jct[int(job)]
        assert jct >= bound * (1 - 1e-9), f"job {job}: JCT {jct} below its isolated run {bound}"


def results_equal(a: Results, b: Results) -> bool:
    """Same summary (but wall time) and the same per-job columns, NaN equal to NaN."""
    sa = {k: v for k, v in a.summary.items() if k != "wall_s"}
    sb = {k: v for k, v in b.summary.items() if k != "wall_s"}
    if sa.keys() != sb.keys():
        return False
    for k in sa:
        x, y = sa[k], sb[k]
        if not (x == y or (isinstance(x, float) and x != x and y != y)):
            return False
    for col in a.jobs:
        x, y = np.asarray(a.jobs[col]), np.asarray(b.jobs[col])
        if x.dtype.kind == "f":
            if not np.array_equal(x, y, equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def describe(res: Results) -> dict[str, Any]:
    """The summary without wall time (for messages)."""
    return {k: v for k, v in res.summary.items() if k != "wall_s"}
