"""Render a finished (or partial) suite run, or one ``simulate --out`` run.

A suite run directory holds ``suite.json`` and ``cells/``; :func:`render_leaderboard` adds
``results.csv``, ``results.parquet``, ``leaderboard.md``, ``plots/<scenario>.png`` and
``index.html`` (self-contained: images embedded as base64).
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.leaderboard import tables
from dlcluster_gym.leaderboard.plots import Series, scenario_figure
from dlcluster_gym.leaderboard.runner import (
    STATUS_OK,
    SUITE_FILE,
    read_arrays,
    read_rows,
    save_suite,
)
from dlcluster_gym.leaderboard.suite import entrant_kind
from dlcluster_gym.sim.results import read_json_object

__all__ = [
    "SUITE_FILE",
    "build_leaderboard",
    "read_suite",
    "render_leaderboard",
    "report_run",
    "save_suite",
]


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_suite(out: Path) -> dict[str, Any]:
    """The ``suite.json`` of a run directory."""
    p = Path(out) / SUITE_FILE
    if not p.is_file():
        raise ConfigError(f"{out}: not a leaderboard run directory (no {SUITE_FILE})")
    fix = "a damaged run directory: rerun the suite with --resume to rewrite it"
    data = read_json_object(p, "the resolved suite of a leaderboard run", fix)
    for key, kind, what in _SUITE_FIELDS:
        value = data.get(key)
        ok = isinstance(value, kind) and not isinstance(value, bool)
        if ok and isinstance(value, list):
            item = dict if key == "entrants" else (int if key == "seeds" else str)
            ok = all(isinstance(v, item) and not isinstance(v, bool) for v in value)
        if not ok:
            raise ConfigError(f"{p}: {key} must be {what}, got {value!r:.60} ({fix})")
    for e in data["entrants"]:
        try:
            _label(e)
        except ValueError as err:
            raise ConfigError(f"{p}: entrants: {_one_line(err)} ({fix})") from None
    return data


_SUITE_FIELDS: tuple[tuple[str, Any, str], ...] = (
    ("name", str, "a name"),
    ("description", str, "text"),
    ("seeds", list, "a list of integers"),
    ("reference", str, "an entrant's label"),
    ("metrics", list, "a list of metric names"),
    ("entrants", list, "a list of entrant objects"),
    ("scenarios", list, "a list of scenario names"),
    ("cells", list, "a list of cell ids"),
)


def _legend(md: list[str], body: list[str], kinds: Any) -> None:
    """The legend line under a table whose entrants carry marks (none when none do)."""
    line = tables.legend(kinds)
    if line:
        md.extend([line, ""])
        body.append(f"<p><small>{html.escape(line)}</small></p>")


def _series(label: str, ok: pd.DataFrame, arrays: list[dict[str, np.ndarray]], kind: str) -> Series:
    jct = [a["jct_s"] for a in arrays if "jct_s" in a]
    first = arrays[0] if arrays else {}
    num_gpus = float(ok["num_gpus"].iloc[0]) if len(ok) and "num_gpus" in ok else math.nan
    return Series(
        label=label,
        kind=kind,
        jct_s=np.concatenate(jct) if jct else np.array([]),
        avg_jct_s=tables.mean_ci(ok["avg_jct_s"].to_numpy(dtype=float)),
        makespan_s=tables.mean_ci(ok["makespan_s"].to_numpy(dtype=float)),
        comm_overhead=tables.mean_ci(ok["avg_comm_overhead"].to_numpy(dtype=float)),
        t_s=first.get("ts_t", np.array([])),
        utilization=(
            first.get("ts_busy_gpus", np.array([])) / num_gpus
            if num_gpus > 0  # a CPU-only cluster (parameter-server jobs) has no GPU utilization
            else np.full(len(first.get("ts_busy_gpus", [])), math.nan)
        ),
        remaining=first.get("ts_remaining", np.array([])),
    )


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _html_table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = (
    "body{font-family:sans-serif;max-width:1400px;margin:2em auto}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
    "text-align:right}td:first-child,th:first-child{text-align:left}img{max-width:100%}"
)


def _page(title: str, body: list[str]) -> str:
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body>" + "\n".join(body) + "</body></html>"
    )


def render_leaderboard(out: str | Path) -> dict[str, Path]:
    """Write the tables, plots, Markdown and HTML of the run in ``out``; return their paths."""
    out = Path(out)
    doc = build_leaderboard(out, draw=True)
    paths = {"csv": out / "results.csv", "parquet": out / "results.parquet"}
    _atomic_text(paths["csv"], doc.csv)
    _atomic_bytes(paths["parquet"], doc.parquet)
    plots = out / "plots"
    plots.mkdir(exist_ok=True)
    for name, png in doc.plots.items():
        _atomic_bytes(plots / name, png)
    paths["md"] = out / "leaderboard.md"
    _atomic_text(paths["md"], doc.md)
    paths["html"] = out / "index.html"
    _atomic_text(paths["html"], doc.html)
    return paths


@dataclass
class Document:
    """Everything ``render_leaderboard`` publishes, computed from the cells alone."""

    frame: pd.DataFrame
    csv: str
    parquet: bytes
    md: str
    html: str
    plots: dict[str, bytes]


def build_leaderboard(out: str | Path, *, draw: bool = True) -> Document:
    """The published files of the run in ``out`` as they follow from its cells (``draw=False``
    skips the figures: the Markdown and tables come out the same)."""
    out = Path(out)
    suite = read_suite(out)
    rows = read_rows(out, suite["cells"])
    if not rows:
        raise ConfigError(f"{out}: no finished cells to report")
    df = tables.frame(rows)
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)

    entrants = [e["label"] or _label(e) for e in suite["entrants"]]
    kinds = tables.entrant_kinds(df, entrants)
    reference = suite["reference"]
    metrics = tuple(suite["metrics"])
    missing = len(suite["cells"]) - len(rows)
    score = tables.scores(df, entrants, metrics, reference)
    groups = tables.ranking_groups(score, reference)
    title = f"Leaderboard: {suite['name']}"
    version = ", ".join(sorted(set(df["version"].astype(str))))
    n_common = int(score["common"].iloc[0]) if len(score) else 0
    intro = [
        f"{suite['description']}".strip(),
        f"Seeds {', '.join(map(str, suite['seeds']))}; package version {version}; "
        f"{len(rows)} of {len(suite['cells'])} cells finished"
        + (f" ({missing} missing: rerun with --resume)" if missing else "")
        + "."
        + _run_time(df)
        + _code_versions(df),
        f"Score: geometric mean over scenarios of each metric's ratio to `{reference}` "
        f"(mean over seeds), then geometric mean over the metrics ({', '.join(metrics)}); "
        "lower is better, the reference scores 1. Each ranking compares entrants scored on the "
        "same set of scenarios (of the "
        f"{n_common} the reference completed), so no rank mixes scores over different "
        "scenarios; `scenarios` says how many each score covers. A cell with unfinished jobs is "
        "not scored (its JCTs would cover the finished jobs only). n/a: the policy does not "
        "apply to a scenario. Per-scenario cells: mean ± 95% CI half-width (Student t) over "
        "seeds.",
        "Rankings compare deployable entrants only (policies that use what a real scheduler "
        "observes). Clairvoyant entrants (they read job lengths or future arrivals) and bounds "
        "are marked in every table and figure and listed under References with their scores, "
        "unranked.",
    ]
    if kinds.get(reference, tables.DEPLOYABLE) != tables.DEPLOYABLE:
        intro.append(
            f"The reference `{reference}` is {kinds[reference]}: scores are ratios to it, but "
            "it is not ranked (see References)."
        )
    if tables.DEPLOYABLE not in kinds.values():
        intro.append(
            "No entrant of this suite is deployable: nothing is ranked, every entrant is a "
            "reference."
        )
    ref_ok = set(df[(df["entrant"] == reference) & (df["status"] == STATUS_OK)]["scenario"])
    unscored = [sc for sc in suite["scenarios"] if sc in set(df["scenario"]) and sc not in ref_ok]
    if unscored:
        intro.append(
            f"The reference `{reference}` did not run on {', '.join(unscored)}; "
            "no entrant is scored there."
        )
    if suite.get("skipped"):
        intro.append("Left out (not available yet): " + "; ".join(suite["skipped"]) + ".")
    md = [f"# {title}", "", *(line + "\n" for line in intro if line)]
    body = [f"<h1>{html.escape(title)}</h1>"]
    body += [f"<p>{html.escape(line)}</p>" for line in intro if line]

    def block(head: str, part: pd.DataFrame, ranked: bool) -> None:
        h, r = tables.score_rows(part, metrics, ranked=ranked)
        md.extend([f"**{head}**", "", tables.markdown(h, r), ""])
        body.extend([f"<p><b>{html.escape(head)}</b></p>", _html_table(h, r)])
        _legend(md, body, part["kind"])

    for key, group in groups:
        block(f"Ranking over {len(key)} scenario(s): {', '.join(key)}", group, True)
    refs = tables.references(score)
    if len(refs):
        block("References (not ranked): clairvoyant entrants and bounds", refs, False)
    none = tables.unscored(score)
    if len(none):
        head = "Not scored on any scenario (n/a, failed, or jobs left unfinished everywhere)"
        block(head, none, False)
    plots: dict[str, bytes] = {}
    errors = df[df["status"] == "error"]
    for sc in suite["scenarios"]:
        table = tables.scenario_table(df, sc, entrants)
        if table.empty:
            continue
        th, tr = tables.scenario_rows(table)
        md += [f"## {sc}", "", tables.markdown(th, tr), ""]
        body += [f"<h2>{html.escape(sc)}</h2>", _html_table(th, tr)]
        _legend(md, body, table["kind"])
        ok_sc = df[(df["scenario"] == sc) & (df["status"] == STATUS_OK)]
        if not len(ok_sc):
            continue
        name = f"{Path(sc).stem}.png"
        md += [f"![{sc}](plots/{name})", ""]
        if draw:
            series = []
            for e in tables.by_kind(entrants, kinds):
                ok = ok_sc[ok_sc["entrant"] == e]
                if len(ok):
                    arrays = [read_arrays(out, i) for i in ok["id"]]
                    series.append(_series(e, ok, arrays, kinds[e]))
            plots[name] = scenario_figure(sc, series)
            body.append(_img(plots[name], sc))
    if len(errors):
        md += ["## Failed cells", ""]
        body.append("<h2>Failed cells</h2>")
        er = [[r["id"], str(r["reason"]).splitlines()[0]] for r in errors.to_dict("records")]
        md += [tables.markdown(["cell", "error"], er), ""]
        body.append(_html_table(["cell", "error"], er))
    return Document(
        frame=df,
        csv=df.to_csv(index=False),
        parquet=buf.getvalue(),
        md="\n".join(md),
        html=_page(title, body),
        plots=plots,
    )


def _label(entrant: dict[str, Any]) -> str:
    from dlcluster_gym.leaderboard.suite import EntrantSpec

    return EntrantSpec.model_validate(entrant).name


def _atomic_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def report_run(run_dir: str | Path, out: str | Path | None = None) -> dict[str, Path]:
    """Plots, Markdown and HTML for one ``dlcluster simulate --out`` run directory."""
    from dlcluster_gym.sim.results import SUMMARY_KEYS, Results

    run_dir = Path(run_dir)
    if not (run_dir / "results.json").is_file():
        raise ConfigError(
            f"{run_dir}: no results.json; pass a directory written by `dlcluster simulate --out`"
        )
    if (run_dir / "metrics.json").is_file():  # written with results.json: both or neither
        read_json_object(run_dir / "metrics.json", "the metrics.json of `dlcluster simulate --out`")
    res = Results.load(run_dir)
    from dlcluster_gym.config import load_cluster

    where = run_dir / "results.json"
    cluster = res.scenario_config.get("cluster") if isinstance(res.scenario_config, dict) else None
    if not isinstance(cluster, dict):
        raise ConfigError(f"{where}: scenario_config.cluster is missing; cannot size the cluster")
    try:
        num_gpus = load_cluster(cluster).num_gpus
    except ConfigError as err:
        raise ConfigError(f"{where}: scenario_config.cluster: {_one_line(err)}") from None
    try:
        jct = np.asarray(res.jobs.get("jct_s", []), dtype=float)
        ts = {k: np.asarray(v, dtype=float) for k, v in res.timeseries.items()}
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: jobs.jct_s and the time series must be numbers") from None
    out = Path(out) if out is not None else run_dir
    out.mkdir(parents=True, exist_ok=True)
    kind = run_kind(res)
    s = res.summary
    series = Series(
        label=res.policy,
        kind=kind,
        jct_s=jct[np.isfinite(jct)],
        avg_jct_s=(float(s.get("avg_jct_s", math.nan)), math.nan),
        makespan_s=(float(s.get("makespan_s", math.nan)), math.nan),
        comm_overhead=(float(s.get("avg_comm_overhead", math.nan)), math.nan),
        t_s=np.asarray(ts.get("t", []), dtype=float),
        utilization=np.asarray(ts.get("busy_gpus", []), dtype=float) / (num_gpus or math.nan),
        remaining=np.asarray(ts.get("remaining", []), dtype=float),
    )
    title = (
        f"{tables.marked(res.policy, kind)} on {res.scenario}, seed {res.seed} "
        f"(version {res.version})"
    )
    png = scenario_figure(title, [series])
    paths = {"png": out / "report.png", "md": out / "report.md", "html": out / "report.html"}
    _atomic_bytes(paths["png"], png)
    rows = [["kind", kind]] + [[k, tables.fmt(s[k])] for k in SUMMARY_KEYS if k in s]
    note = tables.legend([kind], ranking=False)
    _atomic_text(
        paths["md"],
        f"# {title}\n\n{tables.markdown(['metric', 'value'], rows)}\n\n"
        + (f"{note}\n\n" if note else "")
        + "![plots](report.png)\n",
    )
    body = [f"<h1>{html.escape(title)}</h1>", _html_table(["metric", "value"], rows)]
    if note:
        body.append(f"<p><small>{html.escape(note)}</small></p>")
    _atomic_text(paths["html"], _page(title, [*body, _img(png, title)]))
    return paths


def _one_line(err: Exception) -> str:
    return " ".join(line.strip() for line in str(err).splitlines() if line.strip())


def run_kind(res: Any) -> str:
    """The kind a ``Results`` records; for results saved before kinds were recorded, the kind
    of its policy with its parameters (a bound when it says so)."""
    if res.kind:
        return str(res.kind)
    if res.is_bound:
        return "bound"
    return entrant_kind(res.policy, res.policy_params)


def _code_versions(df: pd.DataFrame) -> str:
    """Where the cells were computed by more than one version of the code (``--rerun`` kept
    the others): how many cells each version computed, naming the entrants of the smaller
    ones; "" when one version computed them all."""
    if "code" not in df:
        return ""
    codes = df["code"].astype(str)
    counts = codes.value_counts()
    if len(counts) < 2:
        return ""
    parts = []
    for code, n in counts.items():
        names = list(dict.fromkeys(df.loc[codes == code, "entrant"].astype(str)))
        who = f": {', '.join(names)}" if len(names) <= 5 else ""
        parts.append(f"`{code}` {n:,} cells{who}")
    return (
        f" The cells were computed by {len(counts)} versions of the code (`code` in "
        f"results.csv): {'; '.join(parts)}. `dlcluster leaderboard --verify` replays each cell "
        "on the installed code."
    )


def _run_time(df: pd.DataFrame) -> str:
    """ " Cells ran N s in all, the slowest M s." from the cells' recorded run times."""
    if "wall_s" not in df or not df["wall_s"].notna().any():
        return ""
    w = df["wall_s"].astype(float)
    return f" Cells ran {w.sum():,.0f} s in all (the slowest {w.max():,.0f} s; wall time per cell)."
