"""What a scheduler may know: the observable description of jobs, and the oracle.

A real cluster scheduler sees a job when it is submitted (its model, GPU demand, GPU type,
per-iteration compute profile, submission time, and the virtual cluster, user and job name it
was submitted with) and then what the job has done (attained
iterations and service, running and waiting time, preemptions). It does not see how long a
job will run, nor jobs that have not been submitted yet. The engine knows both; this module
is the line between the two:

- :class:`JobTable` (``ClusterView.jobs``) hands out :class:`JobInfo` records of *arrived*
  jobs. A job that has not arrived is an :class:`OracleError`, and so is a job's
  ``iterations`` (its length) until it has finished (then its length is history).
- :class:`Oracle` (``ClusterView.oracle``) is the ground truth: every job's length and
  remaining iterations, future arrivals included. Only a view made for a policy that declares
  ``clairvoyant = True`` opens it; any other read is an :class:`OracleError` naming the fix.
- :class:`PerJob`: a per-job table of values computed from a job's observable description
  the first time it is read after the job arrived (the lazy replacement of tables a policy
  would otherwise build over every job of the run at reset).

``len(view.jobs)`` is the size of the job-id space (per-job arrays are indexed by id, as a
real scheduler indexes them by a job-id allocator). It is there to size arrays; a policy's
decisions must not depend on it, which the counterfactual test checks by adding late jobs.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dlcluster_gym.errors import ConfigError, OracleError
from dlcluster_gym.sim.state import DONE, DROPPED, PENDING, EngineState
from dlcluster_gym.workload.job import Job

FIX = (
    "declare `clairvoyant = True` on the policy (a clairvoyant reference, ranked apart from "
    "deployable policies) or estimate it from observable facts (dlcluster_gym.sim.estimators)"
)


def is_clairvoyant(policy: Any) -> bool:
    """Whether ``policy`` declares that it reads ground truth (``clairvoyant = True``)."""
    flag = getattr(policy, "clairvoyant", False)
    if not isinstance(flag, bool | np.bool_):
        raise ConfigError(
            f"policy {getattr(policy, 'name', type(policy).__name__)!r}: `clairvoyant` must be "
            f"True or False, got {flag!r}"
        )
    return bool(flag)


class JobInfo:
    """A job as a real scheduler sees it once it has been submitted.

    ``iterations`` and ``ideal_run_s`` (its length) are readable once the job has finished,
    or always through a clairvoyant view; otherwise they raise :class:`OracleError`."""

    __slots__ = (
        "_job",
        "_table",
        "arrival_s",
        "compute_s",
        "gpu_type",
        "job_id",
        "job_name",
        "model",
        "name",
        "num_gpus",
        "user",
        "vc",
        "vcpu_budget",
    )

    def __init__(self, job: Job, table: JobTable) -> None:
        self._job, self._table = job, table
        self.job_id: int = job.job_id
        self.name: str = job.name
        self.model: str = job.model
        self.num_gpus: int = job.num_gpus
        self.compute_s: float = job.compute_s  # per iteration, profiled (no communication)
        self.arrival_s: float = job.arrival_s
        self.gpu_type: str | None = job.gpu_type
        self.vcpu_budget: float | None = job.vcpu_budget
        # submission attributes (virtual cluster or queue, owner, submitted name; "" if none)
        self.vc: str = job.vc
        self.user: str = job.user
        self.job_name: str = job.job_name

    @property
    def is_ps(self) -> bool:
        """A parameter-server job on CPUs."""
        return self.vcpu_budget is not None

    @property
    def finished(self) -> bool:
        return int(self._table._e.status[self.job_id]) == DONE

    @property
    def iterations(self) -> float:
        """The job's total iterations: history once it has finished, an oracle before."""
        if self._table.clairvoyant or self.finished:
            return self._job.iterations
        raise OracleError(
            f"policy {self._table.policy!r} read the total iterations of job {self.job_id}, "
            f"which is still running or waiting: a job's length is ground truth; {FIX}"
        )

    @property
    def ideal_run_s(self) -> float:
        """Iterations x compute per iteration (see ``iterations`` for when it is readable)."""
        return self.iterations * self.compute_s

    def __repr__(self) -> str:
        return (
            f"JobInfo(job_id={self.job_id}, model={self.model!r}, num_gpus={self.num_gpus}, "
            f"arrival_s={self.arrival_s})"
        )


class JobTable:
    """``view.jobs``: :class:`JobInfo` by job id, for jobs that have arrived.

    ``len()`` is the size of the id space (to size per-job arrays); iterating yields the
    arrived jobs in arrival order."""

    __slots__ = ("_e", "_infos", "clairvoyant", "policy", "submitted")

    def __init__(
        self, engine: EngineState, *, clairvoyant: bool, policy: str, submitted: bool = False
    ) -> None:
        self._e = engine
        self._infos: list[JobInfo | None] = [None] * len(engine.jobs)
        self.clairvoyant = clairvoyant
        self.policy = policy
        # Admission check (``check_workload``): every job's description, lengths still closed.
        self.submitted = submitted

    def __len__(self) -> int:
        return len(self._infos)

    def __getitem__(self, job: int) -> JobInfo:
        info = self._infos[job]
        if info is None:
            j = operator.index(job)
            if j < 0:
                j += len(self._infos)
            if not (self.clairvoyant or self.submitted) and not self.arrived(j):
                raise OracleError(
                    f"policy {self.policy!r} read job {j}, which has not arrived yet (t="
                    f"{self._e.now:.0f}s): future arrivals are ground truth; {FIX}"
                )
            info = self._infos[job] = JobInfo(self._e.jobs[j], self)
        return info

    def arrived(self, job: int) -> bool:
        """Whether ``job`` has been submitted by now."""
        st = int(self._e.status[job])
        if st == PENDING:
            return False
        return st != DROPPED or self._e.jobs[job].arrival_s <= self._e.now

    def __iter__(self) -> Iterator[JobInfo]:
        ids = range(len(self)) if self.submitted else list(self._e.arrived)
        return (self[j] for j in ids)

    def __repr__(self) -> str:
        return f"JobTable({len(self._e.arrived)} arrived of an id space of {len(self)})"


def check_workload(policy: Any, view: Any) -> None:
    """Call ``policy.check_workload(view, jobs)`` when it has one: admission control before
    the run, with every submitted job's description (``jobs``, a :class:`JobTable` that
    lists future arrivals, lengths still closed), so that a policy that cannot schedule the
    workload says so at once (``NotApplicableError``, ``ConfigError``). It must not keep what
    it reads: decisions use arrived jobs only (the counterfactual test checks that)."""
    check = getattr(policy, "check_workload", None)
    if check is not None:
        e = view._e
        check(view, JobTable(e, clairvoyant=view.clairvoyant, policy=view.jobs.policy,
                             submitted=True))  # fmt: skip


class Oracle:
    """Ground truth for clairvoyant policies: lengths, remaining work, future arrivals."""

    __slots__ = ("_e",)

    def __init__(self, engine: EngineState) -> None:
        self._e = engine

    @property
    def jobs(self) -> tuple[Job, ...]:
        """Every job of the run as submitted, future arrivals included."""
        return tuple(self._e.jobs)

    @property
    def num_jobs(self) -> int:
        return len(self._e.jobs)

    @property
    def total_iterations(self) -> np.ndarray:
        """Each job's total iterations (read-only, indexed by job id)."""
        a = self._e.iterations.view()
        a.flags.writeable = False
        return a

    def remaining_iterations(self, jobs: np.ndarray | list[int]) -> np.ndarray:
        """Iterations each of ``jobs`` has left as of now."""
        jobs = np.asarray(jobs, dtype=np.int64)
        done = self._e.live_done(jobs)
        return self._e.iterations[jobs] - done

    def progress(self, job: int) -> float:
        """Fraction of the job's iterations completed."""
        return float(self._e.done_iters_now(job) / self._e.jobs[job].iterations)


class PerJob:
    """Per-job values (indexed by job id) computed by ``fn(JobInfo)`` when first read after
    the job arrived. ``table[ids]`` reads like a numpy array; ids must have arrived."""

    __slots__ = ("_arr", "_done", "_e", "_fn", "_jobs")

    def __init__(
        self, jobs: JobTable, fn: Callable[[JobInfo], Any], dtype: Any, fill: Any = 0
    ) -> None:
        self._jobs, self._e, self._fn = jobs, jobs._e, fn
        self._arr = np.full(len(jobs), fill, dtype=dtype)
        self._done = 0  # arrivals already computed (engine.arrived is in arrival order)

    def _sync(self) -> np.ndarray:
        arrived = self._e.arrived
        if self._done < len(arrived):
            for j in arrived[self._done :]:
                self._arr[j] = self._fn(self._jobs[j])
            self._done = len(arrived)
        return self._arr

    def __getitem__(self, idx: Any) -> Any:
        return self._sync()[idx]

    @property
    def values(self) -> np.ndarray:
        """The whole table (entries of jobs that have not arrived hold the fill value)."""
        return self._sync()
