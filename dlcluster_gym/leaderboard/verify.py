"""Replay leaderboard rows and check that every metric comes out identical."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlcluster_gym.errors import ConfigError, UnknownNameError
from dlcluster_gym.leaderboard.runner import STATUS_OK, read_rows, run_cell
from dlcluster_gym.leaderboard.suite import Cell
from dlcluster_gym.sim.results import SUMMARY_KEYS


@dataclass(frozen=True)
class Check:
    """The outcome of replaying one row: ``ok`` and, when not, what differed."""

    id: str
    ok: bool
    differences: tuple[str, ...]
    note: str = ""


def _same(a: Any, b: Any) -> bool:
    na = a is None or (isinstance(a, float) and math.isnan(a))
    nb = b is None or (isinstance(b, float) and math.isnan(b))
    return (na and nb) or a == b


def verify_row(row: dict[str, Any], traces_dir: str | Path | None = None) -> Check:
    """Re-run the row's cell and compare status, scenario hash and every summary metric."""
    cell = Cell(
        id=row["id"], scenario=row["scenario"], entrant=row["entrant"], policy=row["policy"],
        params=json.loads(row["params"]) if isinstance(row["params"], str) else row["params"],
        seed=int(row["seed"]),
    )  # fmt: skip
    new, _ = run_cell(cell, row.get("suite", ""), traces_dir)
    keys = ["status", "scenario_hash", *(k for k in SUMMARY_KEYS if k in row or k in new)]
    diffs = tuple(
        f"{k}: recorded {row.get(k)!r}, replayed {new.get(k)!r}"
        for k in keys
        if not _same(row.get(k), new.get(k))
    )
    note = ""
    if row.get("version") != new["version"]:
        note = f"recorded with version {row.get('version')}, replayed with {new['version']}"
    return Check(row["id"], not diffs, diffs, note)


def verify(
    results_dir: str | Path, row_id: str | None = None, traces_dir: str | Path | None = None
) -> list[Check]:
    """Replay every row of a leaderboard run (or the one with ``row_id``)."""
    out = Path(results_dir)
    rows = read_rows(out)
    if not rows:
        raise ConfigError(f"{out}: no leaderboard rows found (expected {out}/cells/*.json)")
    if row_id is not None:
        rows = [r for r in rows if r["id"] == row_id]
        if not rows:
            raise UnknownNameError("row", row_id, [r["id"] for r in read_rows(out)])
    return [verify_row(r, traces_dir) for r in rows if r["status"] in (STATUS_OK, "n/a")]
