"""Env versions: the kwargs that give each version its dynamics (the newest is the class's
defaults, except Scheduler-v3's ``actions="per-job"``: the class keeps ``actions="slots"`` so
that checkpoints recorded without the key keep their action design). Bump when dynamics,
rewards or observations change; old ids keep working.

Versions whose defaults observe ground truth a real scheduler does not have (``LEAKS``) stay
registered for the checkpoints trained on them; making one warns (``warn_leaks``) and names
the version to use instead."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping
from typing import Any

_WORKLOAD = {"done_jobs_of": "workload"}  # the done_jobs feature before it stopped leaking
_KNOWN = {"known_durations": True}  # Placement's progress/remaining_work before estimates
VERSIONS: dict[str, dict[int, dict]] = {
    "Placement": {
        0: {"wait_limit": "none", **_WORKLOAD, **_KNOWN},
        1: {**_WORKLOAD, **_KNOWN},
        2: dict(_KNOWN),
        3: {},
    },
    "DelayTimer": {0: dict(_WORKLOAD), 1: {}},
    "Scheduler": {
        0: {"unfinished_penalty": "fixed", "stall_end": "truncated", **_WORKLOAD},
        1: dict(_WORKLOAD),
        2: {},
        3: {"actions": "per-job"},
        4: {
            "actions": "per-job",
            "history_features": True,
            "preemption": True,
            "default_scenario": "dally-groups-4rack-load12",
        },
    },
}

_DONE_LEAK = (
    "done_jobs divides by the episode's job count, which tells how many arrivals are still "
    "to come (done_jobs_of='workload')"
)
LEAKS: dict[str, dict[str, tuple[Any, str]]] = {
    "Placement": {
        "known_durations": (
            True,
            "job.progress and job.remaining_work are the true values from each job's length "
            "(known_durations=True)",
        ),
        "done_jobs_of": ("workload", _DONE_LEAK),
    },
    "DelayTimer": {"done_jobs_of": ("workload", _DONE_LEAK)},
    "Scheduler": {"done_jobs_of": ("workload", _DONE_LEAK)},
}
"""Per env kind, the kwarg values that are an old version's default and put ground truth in
the observation (Scheduler's ``known_durations=True`` is an explicit oracle option of every
version, not a deprecated default: it makes the env clairvoyant without a warning)."""


DEFAULTS_ONLY = frozenset({"preemption", "default_scenario"})
"""Version kwargs that are only a version's defaults, not what defines it: Scheduler-v4 with
``preemption=False`` is still v4 (its observation is v4's)."""


def defining(kind: str, version: int) -> dict[str, Any]:
    """The kwargs that define ``version`` of env ``kind`` (``VERSIONS`` less
    ``DEFAULTS_ONLY``)."""
    return {k: v for k, v in VERSIONS[kind][version].items() if k not in DEFAULTS_ONLY}


def version_name(kind: str, kwargs: Mapping[str, Any]) -> str:
    """``"<kind>-v<N>"`` for the version whose defining kwargs ``kwargs`` match (the one with
    the most defining kwargs, then the newest; ``DEFAULTS_ONLY`` kwargs do not decide): names
    an env in its error messages."""
    best = max(
        (len(kw), v)
        for v, kw in ((v, defining(kind, v)) for v in VERSIONS[kind])
        if all(kwargs.get(k) == value for k, value in kw.items())
    )
    return f"{kind}-v{best[1]}"


def leaks(kind: str, kwargs: Mapping[str, Any]) -> list[str]:
    """What an env of ``kind`` made with ``kwargs`` observes that a real scheduler does not
    (``LEAKS``), one phrase each; empty for a leak-free env."""
    return [why for key, (value, why) in LEAKS[kind].items() if kwargs.get(key) == value]


def warn_leaks(kind: str, env_name: str, kwargs: Mapping[str, Any]) -> None:
    """A ``DeprecationWarning`` naming the ground truth an env made with ``kwargs`` observes
    and the version to use instead (nothing for a leak-free env)."""
    found = leaks(kind, kwargs)
    if found:
        warnings.warn(
            f"DLCluster/{env_name} observes ground truth a real scheduler does not have: "
            f"{'; '.join(found)}. It is kept for checkpoints trained on it (an agent trained "
            f"on it is clairvoyant); use DLCluster/{kind}-v{max(VERSIONS[kind])}, whose "
            "observations hold observable facts and estimates only",
            DeprecationWarning,
            stacklevel=_outside_level(),
        )


def _outside_level() -> int:
    """The ``stacklevel`` of the first caller outside this package and gymnasium (the line
    that made the env, e.g. a ``gym.make`` in a user's script, where Python shows
    ``DeprecationWarning``s by default)."""
    frame, level = sys._getframe(2), 2  # the caller of warn_leaks
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_INSIDE):
        frame, level = frame.f_back, level + 1
    return level


_INSIDE = ("dlcluster_gym.", "gymnasium.")
