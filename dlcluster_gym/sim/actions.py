"""Actions a scheduler returns; the engine validates and applies them in order."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dlcluster_gym.perf.ps import DTConfig


@dataclass(frozen=True, slots=True)
class Start:
    """Start (or resume) a waiting job on exactly ``gpus`` (one per GPU of its demand)."""

    job: int
    gpus: tuple[int, ...]
    time_shift_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Preempt:
    """Stop a running job, release its GPUs and put it back in the wait queue.

    By default the job pays the scenario's checkpoint + restore when it next starts. With
    ``resume_in_place_s`` the job is suspended with its state kept beside its GPUs (a
    suspend-resume such as Gandiva's time-slicing, OSDI'18 4.1): started again on exactly the
    same GPUs, it pays ``resume_in_place_s`` seconds instead; started anywhere else, it pays
    checkpoint + restore."""

    job: int
    resume_in_place_s: float | None = None


def same_gpus(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are the same GPUs in any order: the test of a resume in place
    (``Preempt.resume_in_place_s``)."""
    if a.size != b.size:
        return False
    return sorted(a.tolist()) == sorted(b.tolist())  # small sets: faster than array sorts


@dataclass(frozen=True, slots=True)
class Migrate:
    """Move a running job to other GPUs (same count); pays checkpoint + restore."""

    job: int
    gpus: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Resize:
    """Give a running job a different set (and count) of GPUs; pays a restart."""

    job: int
    gpus: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SetTimeShift:
    """Rotate a running job's communication phases by ``shift_s`` (Cassini 4.3)."""

    job: int
    shift_s: float


@dataclass(frozen=True, slots=True)
class WakeUp:
    """Ask to be called again at simulated time ``at_s`` (a delay timer expiring)."""

    at_s: float


@dataclass(frozen=True, slots=True)
class StartPS:
    """Start a waiting parameter-server job on a DT-config (``perf.ps.DTConfig``): its PS and
    worker nodes with their vCPUs and servers (Nearchus IV)."""

    job: int
    config: DTConfig


@dataclass(frozen=True, slots=True)
class Reconfigure:
    """Give a running parameter-server job a new DT-config; the job restarts and pays the
    scenario's ``restart_s`` (Nearchus V-C: every reconfiguration is a restart)."""

    job: int
    config: DTConfig


@dataclass(frozen=True, slots=True)
class TimeShare:
    """Start a waiting job on the GPUs of running job ``host`` without taking them: the time
    sharing of Gandiva (OSDI'18 4.1) as rates. The ``k`` jobs of one GPU set hold it 1 / ``k``
    of the time each, and while ``k`` >= 2 each progresses at 1 / ``k`` x (1 - its switch
    fraction): a round robin whose every turn loses that fraction to a suspend-resume. The
    engine changes the rates only when the set of sharers changes (a job joins, finishes,
    is preempted or moves away); a ``Migrate`` of the host moves every sharer with it.
    ``switch_frac`` is ``job``'s fraction, ``host_switch_frac`` the host's (each in [0, 1))."""

    job: int
    host: int
    switch_frac: float = 0.0
    host_switch_frac: float = 0.0


Action = (
    Start | Preempt | Migrate | Resize | SetTimeShift | WakeUp | StartPS | Reconfigure | TimeShare
)
