"""Exceptions with messages that name what was wrong and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable


class DLClusterError(Exception):
    """Base class of every error the package raises on purpose."""


class UnknownNameError(DLClusterError, KeyError):
    """A name (scenario, policy, model, GPU type, ...) that is not registered."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.valid = sorted(valid)
        plural = kind[:-1] + "ies" if kind.endswith("y") else kind + "s"
        super().__init__(f"unknown {kind} {name!r}; valid {plural}: {', '.join(self.valid)}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.args[0]


class ConfigError(DLClusterError, ValueError):
    """A malformed or inconsistent configuration (names the file, field and value)."""


class TraceError(DLClusterError, ValueError):
    """A trace file that is missing or malformed (names the file, line and column)."""


class InvalidActionError(DLClusterError, ValueError):
    """A scheduler returned an action the engine cannot apply (names policy, job and GPU)."""


class NotApplicableError(DLClusterError, ValueError):
    """A policy does not apply to a scenario (e.g. a parameter-server scheduler on a GPU-only
    trace). Raised by a policy's ``reset``; leaderboards show such cells as n/a."""


class PolicyError(DLClusterError, RuntimeError):
    """A policy's ``schedule`` raised or returned something that is not a list of actions
    (names the policy, the simulated time and what triggered the decision)."""


class OracleError(DLClusterError, PermissionError):
    """A policy or env read ground truth a real scheduler does not have (a job's total or
    remaining iterations, a job that has not arrived yet) without declaring itself
    clairvoyant (``clairvoyant = True`` on the policy, ``known_durations=True`` on an env)."""


class TimeLimitError(DLClusterError, TimeoutError):
    """A run went past its wall-clock time limit (``simulate(time_limit_s=...)``,
    ``dlcluster simulate --time-limit``, a leaderboard's per-cell ``time_limit_s``)."""

    def __init__(self, message: str = "ran past its wall-clock time limit") -> None:
        super().__init__(message)

    def __str__(self) -> str:  # TimeoutError would format (errno, strerror)
        return str(self.args[0]) if self.args else "ran past its wall-clock time limit"
