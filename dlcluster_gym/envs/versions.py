"""Env versions: the kwargs that give each version its dynamics (the newest is the class's
defaults). Bump when dynamics, rewards or observations change; old ids keep working."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_WORKLOAD = {"done_jobs_of": "workload"}  # the done_jobs feature before it stopped leaking
VERSIONS: dict[str, dict[int, dict]] = {
    "Placement": {0: {"wait_limit": "none", **_WORKLOAD}, 1: dict(_WORKLOAD), 2: {}},
    "DelayTimer": {0: dict(_WORKLOAD), 1: {}},
    "Scheduler": {
        0: {"unfinished_penalty": "fixed", "stall_end": "truncated", **_WORKLOAD},
        1: dict(_WORKLOAD),
        2: {},
    },
}


def version_name(kind: str, kwargs: Mapping[str, Any]) -> str:
    """``"<kind>-v<N>"`` for the version whose defining kwargs ``kwargs`` match (the one with
    the most defining kwargs, then the newest): names an env in its error messages."""
    best = max(
        (len(kw), v)
        for v, kw in VERSIONS[kind].items()
        if all(kwargs.get(k) == value for k, value in kw.items())
    )
    return f"{kind}-v{best[1]}"
