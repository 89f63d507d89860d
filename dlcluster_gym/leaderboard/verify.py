"""Replay leaderboard rows and check that every metric and every cell's per-job data
(``cells/<id>.npz``) comes out identical, and that every published file (results.csv,
results.parquet, leaderboard.md, plots/*.png, index.html) is what the cells give.

A file that is corrupted, truncated, edited or taken from another run is a difference that
names it. Two files a published folder may leave out (they are large and ``dlcluster report``
writes them again): a cell's per-job data and ``index.html``; when absent they are noted as
not checked, and so are the figures drawn from per-job data the folder lacks."""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlcluster_gym.config import configs_dir
from dlcluster_gym.errors import ConfigError, UnknownNameError
from dlcluster_gym.leaderboard.runner import (
    CELLS_DIR,
    STATUS_NA,
    STATUS_OK,
    SUITE_FILE,
    BadArrays,
    load_arrays,
    read_rows,
    run_cell,
)
from dlcluster_gym.leaderboard.suite import Cell, load_bases
from dlcluster_gym.sim.results import SUMMARY_KEYS

MAX_SHOWN = 5  # differing fields shown per difference line


@dataclass(frozen=True)
class Check:
    """The outcome of replaying one row (``what`` "row") or of checking one published file
    (``what`` "file", ``id`` its path in the run directory): ``ok`` and, when not, what
    differed; ``note`` says what was not checked, or with which version a row was recorded."""

    id: str
    ok: bool
    differences: tuple[str, ...]
    note: str = ""
    what: str = "row"
    checked: bool = True  # False: a file left out of the folder, or not comparable (``note``)


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
    return _replay(row, traces_dir, bases)[0]


def _replay(
    row: dict[str, Any], traces_dir: str | Path | None, bases: list[Path] | None
) -> tuple[Check, dict[str, np.ndarray]]:
    """:func:`verify_row`'s check, and the per-job arrays the replay gives."""
    cell = Cell(
        id=row["id"], scenario=row["scenario"], entrant=row["entrant"], policy=row["policy"],
        params=json.loads(row["params"]) if isinstance(row["params"], str) else row["params"],
        seed=int(row["seed"]),
    )  # fmt: skip
    cell = cell.located(verify_bases(None) if bases is None else bases, row.get("checkpoint"))
    new, arrays = run_cell(cell, row.get("suite", ""), traces_dir)
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
    return Check(row["id"], not diffs, diffs, note), arrays


def verify_arrays(out: Path, row: dict[str, Any], replayed: dict[str, np.ndarray]) -> Check | None:
    """Check the cell's ``cells/<id>.npz`` against the arrays its replay gave (None: a cell
    without per-job data, and no such file)."""
    name = f"{CELLS_DIR}/{row['id']}.npz"
    p = out / name
    if row["status"] != STATUS_OK:
        if not p.is_file():
            return None
        return Check(
            name, False, (f"a cell of status {row['status']} has no per-job data",), "", "file"
        )
    if not p.is_file():
        note = "not in the folder: the cell's per-job data is not checked"
        return Check(name, True, (), note, "file", checked=False)
    try:
        recorded = load_arrays(p)
    except BadArrays as err:
        return Check(name, False, (str(err),), "", "file")
    diffs = []
    for key in sorted(set(recorded) | set(replayed)):
        a, b = recorded.get(key), replayed.get(key)
        if a is None or b is None or a.shape != b.shape:
            diffs.append(f"{key}: recorded {_count(a)}, replayed {_count(b)}")
        elif not np.array_equal(a, b, equal_nan=True):
            bad = np.flatnonzero(~((a == b) | (np.isnan(a) & np.isnan(b))))
            i = int(bad[0])
            diffs.append(
                f"{key}[{i}]: recorded {float(a[i])!r}, replayed {float(b[i])!r} "
                f"({bad.size} of {a.size} values differ)"
            )
    return Check(name, not diffs, tuple(diffs), "", "file")


def _count(a: np.ndarray | None) -> str:
    return "(absent)" if a is None else f"{a.size} value(s)"


def _snippet(x: str, y: str, context: int = 24, width: int = 100) -> tuple[str, str]:
    """The parts of two different strings that differ, with ``context`` characters before."""
    p = 0
    while p < min(len(x), len(y)) and x[p] == y[p]:
        p += 1
    q = 0
    while q < min(len(x), len(y)) - p and x[-1 - q] == y[-1 - q]:
        q += 1
    start = max(0, p - context)

    def cut(t: str) -> str:
        part = t[start : len(t) - q + context if q > context else len(t)]
        part = part if len(part) <= width else part[:width] + "..."
        return ("..." if start else "") + part + ("..." if q > context else "")

    return cut(x), cut(y)


def _first_diff(published: str, expected: str) -> str:
    """The first line that differs, cut to the part that differs (both versions shown)."""
    a, b = published.splitlines(), expected.splitlines()
    for n, (x, y) in enumerate(zip(a, b, strict=False), 1):
        if x != y:
            px, py = _snippet(x, y)
            return f"line {n}: published {px!r}, the cells give {py!r}"
    return f"published {len(a)} lines, the cells give {len(b)}"


def _csv_diff(published: str, expected: str) -> str:
    """The first row of a CSV that differs: its id and each changed field with both values."""
    try:
        a = list(csv.reader(io.StringIO(published)))
    except csv.Error as exc:
        return f"not a readable CSV file ({exc})"
    b = list(csv.reader(io.StringIO(expected)))
    if not a or a[0] != b[0]:
        return _first_diff(published, expected)
    head = b[0]
    for n, (x, y) in enumerate(zip(a[1:], b[1:], strict=False), 1):
        if x == y:
            continue
        if len(x) != len(y):
            return f"row {n}: published {len(x)} fields, the cells give {len(y)}"
        fields = [
            f"{head[i]}: published {u!r}, the cells give {v!r}"
            for i, (u, v) in enumerate(zip(x, y, strict=True))
            if u != v
        ]
        more = f"; and {len(fields) - MAX_SHOWN} more" if len(fields) > MAX_SHOWN else ""
        return f"row {n} ({y[0]}): " + "; ".join(fields[:MAX_SHOWN]) + more
    return f"published {len(a) - 1} rows, the cells give {len(b) - 1}"


def verify_published(results_dir: str | Path) -> list[Check]:
    """Check ``results.csv``, ``results.parquet``, ``leaderboard.md``, the figures under
    ``plots/`` and ``index.html`` against what the cells give (the cells themselves are
    checked by replaying them): a published file that was edited, is stale, is damaged or is
    missing is a difference. Figures are compared by their pixels, and ``index.html`` by its
    text and the figures it embeds."""
    from dlcluster_gym.leaderboard.report import build_leaderboard, read_suite

    out = Path(results_dir)
    ids = read_suite(out)["cells"]
    # the figures are drawn from the cells' per-job data: all of it must be there and readable
    lacking = None
    for row in read_rows(out, ids):
        npz = out / CELLS_DIR / f"{row['id']}.npz"
        if row["status"] == STATUS_OK and not _readable(npz):
            lacking = f"{CELLS_DIR}/{npz.name}"
            break
    doc = build_leaderboard(out, draw=lacking is None)
    checks = []
    for name, expected in (("results.csv", doc.csv), ("leaderboard.md", doc.md)):
        p = out / name
        if not p.is_file():
            checks.append(_missing(out, name))
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            checks.append(Check(name, False, (f"unreadable: {exc}",), what="file"))
            continue
        if text == expected:
            checks.append(Check(name, True, (), what="file"))
        else:
            diff = (
                _csv_diff(text, expected) if name.endswith(".csv") else _first_diff(text, expected)
            )
            checks.append(Check(name, False, (diff,), what="file"))
    p = out / "results.parquet"
    if not p.is_file():
        checks.append(_missing(out, p.name))
    else:
        try:
            published = pd.read_parquet(p)
        except Exception as exc:
            checks.append(Check(p.name, False, (f"unreadable: {exc!s:.160}",), what="file"))
        else:
            expected = pd.read_parquet(io.BytesIO(doc.parquet))
            same = published.shape == expected.shape and published.equals(expected)
            diff = () if same else (_frame_diff(published, expected),)
            checks.append(Check(p.name, same, diff, what="file"))
    checks += _check_figures(out, doc, lacking)
    return checks


def _readable(npz: Path) -> bool:
    try:
        load_arrays(npz)
    except (BadArrays, OSError):
        return False
    return True


def _missing(out: Path, name: str) -> Check:
    return Check(
        name, False, (f"{out / name} is missing (run `dlcluster report {out}`)",), "", "file"
    )


_PLOT_LINK = re.compile(r"\]\((plots/[^)]+\.png)\)")
_IMG = re.compile(r'<img alt="([^"]*)" src="data:image/png;base64,([^"]*)">')


def _check_figures(out: Path, doc: Any, lacking: str | None) -> list[Check]:
    """plots/*.png (each figure leaderboard.md links) and index.html."""
    checks = []
    not_drawn = f"not checked: drawn from per-job data that is missing or damaged ({lacking})"
    for name in dict.fromkeys(_PLOT_LINK.findall(doc.md)):
        p = out / name
        if not p.is_file():
            checks.append(_missing(out, name))
            continue
        if lacking is not None:
            checks.append(Check(name, True, (), not_drawn, "file", checked=False))
            continue
        why = _png_diff(p.read_bytes(), doc.plots[Path(name).name])
        checks.append(Check(name, why is None, () if why is None else (why,), "", "file"))
    p = out / "index.html"
    if not p.is_file():
        note = f"not in the folder: not checked (`dlcluster report {out}` writes it)"
        return [*checks, Check(p.name, True, (), note, "file", checked=False)]
    if lacking is not None:
        return [*checks, Check(p.name, True, (), not_drawn, "file", checked=False)]
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [*checks, Check(p.name, False, (f"unreadable: {exc}",), "", "file")]
    if text == doc.html:
        return [*checks, Check(p.name, True, (), "", "file")]
    stripped = [_IMG.sub(r'<img alt="\1" src="(figure)">', t) for t in (text, doc.html)]
    if stripped[0] != stripped[1]:
        return [*checks, Check(p.name, False, (_first_diff(*stripped),), "", "file")]
    diffs = []
    for (alt, data), name in zip(_IMG.findall(text), doc.plots, strict=True):
        try:
            png = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            diffs.append(f"the figure of {alt} is not valid base64")
            continue
        why = _png_diff(png, doc.plots[name])
        if why is not None:
            diffs.append(f"the figure of {alt}: {why}")
    return [*checks, Check(p.name, not diffs, tuple(diffs), "", "file")]


def _png_diff(published: bytes, expected: bytes) -> str | None:
    """Why a published figure is not the one the cells draw (None: the same pixels)."""
    if published == expected:
        return None
    from PIL import Image

    try:
        img = Image.open(io.BytesIO(published))
        img.load()
    except Exception:
        return "not a readable PNG image"
    want = Image.open(io.BytesIO(expected))
    if img.size != want.size:
        return f"a {img.size[0]}x{img.size[1]} image; the cells draw {want.size[0]}x{want.size[1]}"
    a, b = np.asarray(img.convert("RGBA")), np.asarray(want.convert("RGBA"))
    n = int((a != b).any(axis=-1).sum())
    if n == 0:
        return None
    why = f"{n:,} of {a.shape[0] * a.shape[1]:,} pixels differ from the figure the cells draw"
    made, now = img.info.get("Software"), want.info.get("Software")
    if made != now:
        why += f" (drawn with {made or 'unknown software'}, redrawn with {now})"
    return why


def _frame_diff(published: pd.DataFrame, expected: pd.DataFrame) -> str:
    """The first row that differs: its id and each changed field with both values."""
    if published.shape != expected.shape or list(published.columns) != list(expected.columns):
        return f"shape/columns differ: published {published.shape}, the cells give {expected.shape}"
    for i in range(len(expected)):
        a, b = published.iloc[i].tolist(), expected.iloc[i].tolist()
        fields = [
            f"{col}: published {x!r}, the cells give {y!r}"
            for col, x, y in zip(expected.columns, a, b, strict=True)
            if not _same(x, y)
        ]
        if fields:
            more = f"; and {len(fields) - MAX_SHOWN} more" if len(fields) > MAX_SHOWN else ""
            return f"row {i} ({b[0]}): " + "; ".join(fields[:MAX_SHOWN]) + more
    return "contents differ"


def _foreign_cells(out: Path, rows: list[dict[str, Any]]) -> list[Check]:
    """Cell files that are not this run's: a row its suite.json does not list or that records
    another suite, and per-job data without a row."""
    from dlcluster_gym.leaderboard.report import read_suite

    suite = read_suite(out)
    listed, name = set(suite["cells"]), suite["name"]
    checks = []
    for r in rows:
        where = f"{CELLS_DIR}/{r['id']}.json"
        if r["id"] not in listed:
            why = f"not a cell of this run ({SUITE_FILE} of suite {name!r} does not list it)"
            checks.append(Check(where, False, (why,), "", "file"))
        elif r.get("suite") not in (None, "", name):
            why = f"a cell of suite {r.get('suite')!r}, not of this run's suite {name!r}"
            checks.append(Check(where, False, (why,), "", "file"))
    have = {r["id"] for r in rows}
    for npz in sorted((out / CELLS_DIR).glob("*.npz")):
        if npz.stem not in have:
            why = f"per-job data without its cell row {CELLS_DIR}/{npz.stem}.json"
            checks.append(Check(f"{CELLS_DIR}/{npz.name}", False, (why,), "", "file"))
    return checks


def verify(
    results_dir: str | Path, row_id: str | None = None, traces_dir: str | Path | None = None
) -> list[Check]:
    """Replay every row of a leaderboard run (or the one with ``row_id``) and check each
    cell's per-job data against its replay (:func:`verify_arrays`); without ``row_id``, also
    check that every cell file belongs to the run and the published files against the cells
    (:func:`verify_published`)."""
    out = Path(results_dir)
    rows = read_rows(out)
    if not rows:
        raise ConfigError(f"{out}: no leaderboard rows found (expected {out}/cells/*.json)")
    checks: list[Check] = []
    if row_id is not None:
        rows = [r for r in rows if r["id"] == row_id]
        if not rows:
            raise UnknownNameError("row", row_id, [r["id"] for r in read_rows(out)])
    else:
        checks += _foreign_cells(out, rows)
        foreign = {c.id for c in checks}
        rows = [r for r in rows if f"{CELLS_DIR}/{r['id']}.json" not in foreign]
    bases = verify_bases(out)
    for r in rows:
        if r["status"] in (STATUS_OK, STATUS_NA):
            check, arrays = _replay(r, traces_dir, bases)
            checks.append(check)
        else:
            arrays = {}
        data = verify_arrays(out, r, arrays)
        if data is not None:
            checks.append(data)
    if row_id is None:
        checks += verify_published(out)
    return checks
