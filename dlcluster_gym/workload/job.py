"""The Job type: what a workload hands to the engine."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dlcluster_gym.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Job:
    """One training job as submitted (its runtime state lives in the engine's arrays).

    ``compute_s`` is the compute time of one iteration (forward + backward, no
    communication); the engine adds exposed communication for the job's placement.

    A job's length is ``iterations`` or ``duration_s``, exactly one of them: a trace or a
    generator gives iterations where it has them, else a run time in seconds. A duration
    depends on the network it was measured on, so it stays a duration here; the scenario
    layer turns it into iterations for the scenario's cluster and network model
    (``dlcluster_gym.scenario``). The engine runs jobs with iterations only.

    Submission attributes a real scheduler sees (empty when the trace or generator has none):
    ``vc`` the virtual cluster or queue it was submitted to, ``user`` its owner, and
    ``job_name`` its name as submitted (recurring jobs share it). ``name`` is the job's
    identifier in its trace (unique), not its submitted name.
    """

    job_id: int
    model: str
    num_gpus: int
    iterations: float | None
    compute_s: float
    arrival_s: float
    name: str = ""
    gpu_type: str | None = None  # required GPU type on heterogeneous clusters (None: any)
    # Parameter-server job on CPUs (Nearchus) when set: its vCPU budget R_max. Such a job has
    # num_gpus = 0, iterations = training steps and compute_s = worker vCPU-seconds per step;
    # it runs on a DT-config (``perf.ps``), not on GPUs.
    vcpu_budget: float | None = None
    vc: str = ""
    user: str = ""
    job_name: str = ""
    duration_s: float | None = None  # run time (s) still to be converted to iterations

    def __post_init__(self) -> None:
        where = f"job {self.name or self.job_id}"
        if self.vcpu_budget is not None:
            b = self.vcpu_budget
            if not (isinstance(b, int | float) and math.isfinite(b) and b > 0):
                raise ConfigError(f"{where}: vcpu_budget must be finite and > 0, got {b!r}")
            if self.num_gpus != 0:
                raise ConfigError(
                    f"{where}: a parameter-server job (vcpu_budget set) has num_gpus 0, "
                    f"got {self.num_gpus!r}"
                )
        elif not isinstance(self.num_gpus, int) or self.num_gpus <= 0:
            raise ConfigError(
                f"{where}: num_gpus must be a positive integer, got {self.num_gpus!r}"
            )
        if (self.iterations is None) == (self.duration_s is None):
            raise ConfigError(
                f"{where}: give its length as iterations or as duration_s, exactly one of them "
                f"(got iterations={self.iterations!r}, duration_s={self.duration_s!r})"
            )
        length = "iterations" if self.iterations is not None else "duration_s"
        for field in (length, "compute_s"):
            v = getattr(self, field)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ConfigError(f"{where}: {field} must be finite and > 0, got {v!r}")
        for field in ("vc", "user", "job_name"):
            v = getattr(self, field)
            if not isinstance(v, str):
                raise ConfigError(f"{where}: {field} must be a string, got {v!r}")
        a = self.arrival_s
        if not (isinstance(a, int | float) and math.isfinite(a) and a >= 0):
            raise ConfigError(f"{where}: arrival_s must be finite and >= 0, got {a!r}")

    @property
    def ideal_run_s(self) -> float:
        """Run time with no communication overhead (Dally's T_total-ideal-run, 4.3.1)."""
        return self.sized_iterations * self.compute_s

    @property
    def sized_iterations(self) -> float:
        """``iterations``; a clear error for a job whose length is still a duration."""
        if self.iterations is None:
            raise ConfigError(
                f"job {self.name or self.job_id}: its length is a duration "
                f"({self.duration_s!r} s) not yet converted to iterations; build jobs with "
                "dlcluster_gym.scenario.build.build_workload, or convert them with "
                "dlcluster_gym.scenario.sizing.size_jobs"
            )
        return self.iterations

    @property
    def is_ps(self) -> bool:
        """A parameter-server job on CPUs (``vcpu_budget`` set)."""
        return self.vcpu_budget is not None
