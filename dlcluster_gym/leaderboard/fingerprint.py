"""What code computed a leaderboard cell: a hash of the simulator's sources and presets, and of
an agent entrant's checkpoint.

``--resume`` reuses a finished cell only when its recorded ``code`` equals the current one, so
a run resumed after a code change (same package version) reruns every cell instead of mixing
results of two versions of the code into one table.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from dlcluster_gym.config import configs_dir
from dlcluster_gym.leaderboard.suite import AGENT_PREFIX, file_hash

# Preset folders a cell reads by name at run time (suites and agent configs decide which cells
# exist, not what a cell computes, so editing them does not make finished cells stale).
PRESET_DIRS = ("clusters", "scenarios", "workloads", "profiles")


def tree_hash(sources: Iterable[Path], presets: Path | None) -> str:
    """sha256 (first 16 hex digits) over the relative path and bytes of every ``*.py`` file
    under ``sources`` and every ``*.yaml`` file under ``presets``'s :data:`PRESET_DIRS`."""
    h = hashlib.sha256()
    for root in sources:
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" not in path.parts:
                h.update(f"{root.name}/{path.relative_to(root).as_posix()}\0".encode())
                h.update(path.read_bytes())
    if presets is not None:
        for sub in PRESET_DIRS:
            for path in sorted((presets / sub).glob("*.yaml")):
                h.update(f"configs/{sub}/{path.name}\0".encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _source_roots() -> list[Path]:
    """The package and its policy and agent folders (inside it when installed, beside it in a
    checkout), each once."""
    package = Path(__file__).resolve().parent.parent
    roots = [package]
    for name in ("dlcluster_gym.baselines", "dlcluster_gym.agents"):
        spec = importlib.util.find_spec(name)
        for loc in (spec.submodule_search_locations or []) if spec else []:
            p = Path(loc).resolve()
            if p != package and package not in p.parents and p not in roots:
                roots.append(p)
    return roots


@cache
def code_hash() -> str:
    """The hash of this installation's simulator sources and presets (computed once)."""
    return tree_hash(_source_roots(), configs_dir())


def cell_code(policy: str) -> str:
    """What a cell of ``policy`` (an ``agent:PATH`` entrant with the checkpoint's path as found:
    ``Cell.run_policy``) records as ``code``: :func:`code_hash`, plus the checkpoint's own hash
    (:func:`~dlcluster_gym.leaderboard.suite.file_hash`) for an agent (``+missing`` when the file
    is absent)."""
    if not policy.startswith(AGENT_PREFIX):
        return code_hash()
    return f"{code_hash()}+{file_hash(policy[len(AGENT_PREFIX) :]) or 'missing'}"
