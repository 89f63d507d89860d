"""Replay leaderboard rows and check that every metric comes out identical, and that the
published files (results.csv, results.parquet, leaderboard.md) are what the cells give."""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dlcluster_gym.config import configs_dir
from dlcluster_gym.errors import ConfigError, UnknownNameError
from dlcluster_gym.leaderboard.runner import STATUS_OK, SUITE_FILE, read_rows, run_cell
from dlcluster_gym.leaderboard.suite import Cell, load_bases
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


def verify_bases(results_dir: str | Path | None) -> list[Path]:
    """Where the relative paths of a run's rows are looked for, in order: the suite file's
    folder recorded in ``suite.json`` (when it still exists), the shipped suites' folder, the
    project root, the current folder. Files are matched by content where the row records it,
    so the answer is the same from any folder and on any machine with the same files."""
    recorded = None
    if results_dir is not None:
        try:
            recorded = json.loads((Path(results_dir) / SUITE_FILE).read_text()).get("base")
        except (OSError, ValueError, AttributeError):
            recorded = None
    first = [Path(recorded)] if isinstance(recorded, str) and Path(recorded).is_dir() else []
    return [*first, configs_dir() / "suites", *load_bases(None)]


def verify_row(
    row: dict[str, Any],
    traces_dir: str | Path | None = None,
    bases: list[Path] | None = None,
) -> Check:
    """Re-run the row's cell and compare status, scenario hash, the agent checkpoint's content,
    the entrant's kind (a row that labels a clairvoyant policy deployable does not verify) and
    every summary metric. Relative paths are looked for under ``bases`` (default:
    :func:`verify_bases` without a run directory)."""
    cell = Cell(
        id=row["id"], scenario=row["scenario"], entrant=row["entrant"], policy=row["policy"],
        params=json.loads(row["params"]) if isinstance(row["params"], str) else row["params"],
        seed=int(row["seed"]),
    )  # fmt: skip
    cell = cell.located(verify_bases(None) if bases is None else bases, row.get("checkpoint"))
    new, _ = run_cell(cell, row.get("suite", ""), traces_dir)
    keys = ["status", "scenario_hash", "kind", *(k for k in SUMMARY_KEYS if k in row or k in new)]
    if row.get("checkpoint") is not None:  # rows written before checkpoints were recorded lack it
        keys.insert(2, "checkpoint")
    diffs = tuple(
        f"{k}: recorded {row.get(k)!r}, replayed {new.get(k)!r}"
        for k in keys
        if not _same(row.get(k), new.get(k))
    )
    note = ""
    if row.get("version") != new["version"]:
        note = f"recorded with version {row.get('version')}, replayed with {new['version']}"
    elif row.get("code") != new["code"]:
        old = row.get("code") or "(not recorded)"
        note = f"recorded with code {old}, replayed with {new['code']}"
    return Check(row["id"], not diffs, diffs, note)


def _first_diff(published: str, expected: str) -> str:
    a, b = published.splitlines(), expected.splitlines()
    for n, (x, y) in enumerate(zip(a, b, strict=False), 1):
        if x != y:
            return f"line {n}: published {x[:80]!r}, the cells give {y[:80]!r}"
    return f"published {len(a)} lines, the cells give {len(b)}"


def verify_published(results_dir: str | Path) -> list[Check]:
    """Check ``results.csv``, ``results.parquet`` and ``leaderboard.md`` against what the
    cells give (the cells themselves are checked by replaying them): a published file that
    was edited, is stale or is missing is a difference."""
    from dlcluster_gym.leaderboard.report import build_leaderboard

    out = Path(results_dir)
    doc = build_leaderboard(out, draw=False)
    checks = []
    for name, expected in (("results.csv", doc.csv), ("leaderboard.md", doc.md)):
        p = out / name
        if not p.is_file():
            checks.append(Check(name, False, (f"{p} is missing (run `dlcluster report {out}`)",)))
            continue
        text = p.read_text()
        diff = () if text == expected else (_first_diff(text, expected),)
        checks.append(Check(name, not diff, diff))
    p = out / "results.parquet"
    if not p.is_file():
        checks.append(Check(p.name, False, (f"{p} is missing (run `dlcluster report {out}`)",)))
    else:
        try:
            published = pd.read_parquet(p)
        except Exception as exc:
            checks.append(Check(p.name, False, (f"unreadable: {exc}",)))
        else:
            expected = pd.read_parquet(io.BytesIO(doc.parquet))
            same = published.shape == expected.shape and published.equals(expected)
            diff = () if same else (_frame_diff(published, expected),)
            checks.append(Check(p.name, same, diff))
    return checks


def _frame_diff(published: pd.DataFrame, expected: pd.DataFrame) -> str:
    if published.shape != expected.shape or list(published.columns) != list(expected.columns):
        return f"shape/columns differ: published {published.shape}, the cells give {expected.shape}"
    for col in expected.columns:
        a, b = published[col].tolist(), expected[col].tolist()
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if not _same(x, y):
                return f"row {i} {col}: published {x!r}, the cells give {y!r}"
    return "contents differ"


def verify(
    results_dir: str | Path, row_id: str | None = None, traces_dir: str | Path | None = None
) -> list[Check]:
    """Replay every row of a leaderboard run (or the one with ``row_id``); without
    ``row_id``, also check the published files against the cells (:func:`verify_published`)."""
    out = Path(results_dir)
    rows = read_rows(out)
    if not rows:
        raise ConfigError(f"{out}: no leaderboard rows found (expected {out}/cells/*.json)")
    if row_id is not None:
        rows = [r for r in rows if r["id"] == row_id]
        if not rows:
            raise UnknownNameError("row", row_id, [r["id"] for r in read_rows(out)])
    bases = verify_bases(out)
    checks = [verify_row(r, traces_dir, bases) for r in rows if r["status"] in (STATUS_OK, "n/a")]
    if row_id is None:
        checks += verify_published(out)
    return checks
