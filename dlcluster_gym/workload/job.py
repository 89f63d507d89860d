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

    Submission attributes a real scheduler sees (empty when the trace or generator has none):
    ``vc`` the virtual cluster or queue it was submitted to, ``user`` its owner, and
    ``job_name`` its name as submitted (recurring jobs share it). ``name`` is the job's
    identifier in its trace (unique), not its submitted name.
    """

    job_id: int
    model: str
    num_gpus: int
    iterations: float
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
        for field in ("iterations", "compute_s"):
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
        return self.iterations * self.compute_s

    @property
    def is_ps(self) -> bool:
        """A parameter-server job on CPUs (``vcpu_budget`` set)."""
        return self.vcpu_budget is not None
