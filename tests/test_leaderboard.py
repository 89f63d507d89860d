"""Leaderboards: suite validation, the local and Ray runners, resume after a kill, tables,
reports, verification, and the CLI."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from fixtures.code_pin import pinned_code_hash
from fixtures.processes import HAS_PROC, alive, children, descendants

from dlcluster_gym import leaderboard as lb
from dlcluster_gym.cli import main
from dlcluster_gym.errors import ConfigError, UnknownNameError
from dlcluster_gym.leaderboard import fingerprint, tables
from dlcluster_gym.leaderboard.runner import read_rows
from dlcluster_gym.leaderboard.suite import cell_id

REPO = Path(__file__).resolve().parents[1]
NA = "tests.fixtures.leaderboard_policies:NeverApplies"
CRASH = "tests.fixtures.leaderboard_policies:Crashes"


def scenario_file(tmp_path: Path, name: str = "tiny", num_jobs: int = 24) -> str:
    """A small synthetic scenario (2 machines x 4 GPUs, Poisson arrivals) as a YAML file."""
    data = {
        "description": "tiny test scenario",
        "cluster": {"racks": 1, "machines_per_rack": 2, "gpus_per_machine": 4},
        "workload": {
            "kind": "synthetic",
            "num_jobs": num_jobs,
            "models": ["resnet50", "vgg11"],
            "gpu_demands": [1, 2, 4, 8],
            "iterations": [2000, 20000],
        },
    }
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


def suite_file(tmp_path: Path, **kw) -> Path:
    data = {
        "name": "t",
        "seeds": [1, 2],
        "entrants": ["fcfs", "dally"],
        "scenarios": [scenario_file(tmp_path)],
    }
    data.update(kw)
    p = tmp_path / "suite.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def metrics_only(rows: list[dict], drop: tuple[str, ...] = ()) -> list[dict]:
    skip = ("wall_s", "cpu_s", *drop)
    return [{k: v for k, v in r.items() if k not in skip} for r in rows]


@pytest.fixture(scope="module", autouse=True)
def one_code_hash():
    """The code hash captured once for the module, reported by this process and by the local
    workers that its runs start (``fixtures/code_pin.py``): a source file edited while these
    tests run does not make the cells of an earlier run look computed by other code. Processes
    started otherwise (the CLI, Ray) hash the sources themselves, so comparisons with their
    rows leave ``code`` out."""
    with pinned_code_hash() as code:
        yield code


# --------------------------------------------------------------------------- suites


def test_shipped_suites_load():
    suites = lb.list_suites()
    assert {"paper-heuristics", "traces-full"} <= set(suites)
    s = lb.load_suite("paper-heuristics")
    assert s.seeds == (1, 2, 3) and s.reference == "fcfs"
    assert {"dally-batch-8rack", "dally-poisson-8rack", "cassini-testbed-poisson"} <= set(
        s.scenarios
    )
    names = [e.name for e in s.entrants]
    assert names[0] == "fcfs" and {"dally", "tiresias", "gandiva", "cassini"} <= set(names)
    full = lb.load_suite("traces-full")
    assert {"philly-1024gpu", *(f"itp-cluster{i:02d}" for i in range(1, 11))} <= set(full.scenarios)
    agents = lb.load_suite("agents")
    names = {e.name for e in agents.entrants}
    paper = {"dally", "dally-manual", "tiresias", "gandiva", "themis", "cassini"}
    assert paper | {"srw", "ideal"} <= names  # every paper heuristic next to the agents
    blind = [e for e in agents.entrants if e.name == "themis-lengths-history"]
    assert blind and blind[0].policy == "themis" and blind[0].params == {"lengths": "history"}
    ckpts = [e.name.removeprefix("agent:") for e in agents.entrants if e.name.startswith("agent:")]
    assert ckpts and all((REPO / c).is_file() for c in ckpts)
    assert "agents/checkpoints/placement.zip" not in ckpts  # it ties Dally: decides nothing


def test_unknown_policy_lists_valid_ones(tmp_path):
    with pytest.raises(ConfigError) as ei:
        lb.load_suite(suite_file(tmp_path, entrants=["fcfs", "nosuch"]))
    msg = str(ei.value)
    assert "unknown policy 'nosuch'" in msg and "dally" in msg and "suite.yaml" in msg


def test_unknown_scenario_lists_valid_ones(tmp_path):
    with pytest.raises(ConfigError) as ei:
        lb.load_suite(suite_file(tmp_path, scenarios=["nosuch-scenario"]))
    assert "unknown scenario 'nosuch-scenario'" in str(ei.value)
    assert "dally-batch-8rack" in str(ei.value)


def test_optional_entries_are_left_out_with_a_note(tmp_path):
    s = lb.load_suite(
        suite_file(
            tmp_path,
            entrants=["fcfs", {"policy": "future-policy", "optional": True}],
            scenarios=[scenario_file(tmp_path), {"name": "future-scenario", "optional": True}],
        )
    )
    assert [e.name for e in s.entrants] == ["fcfs"]
    assert len(s.scenarios) == 1
    assert s.skipped == (
        "entrant future-policy (not available)",
        "scenario future-scenario (no such preset yet)",
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"reference": "dally-manual"}, "reference 'dally-manual' must be one of the entrants"),
        ({"entrants": ["fcfs", "fcfs"]}, "label 'fcfs' appears twice"),
        ({"metrics": ["avg_jct_s", "speed"]}, "unknown metric 'speed'"),
        ({"seeds": []}, "seeds"),
        ({"entrants": [{"policy": "fcfs", "color": "red"}]}, "color"),
        ({"entrants": ["fcfs", "agent:/no/such/checkpoint.zip"]}, "checkpoint"),
    ],
)
def test_bad_suites(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        lb.load_suite(suite_file(tmp_path, **change))


def test_agent_entrant_without_agent_support(tmp_path, monkeypatch):
    ckpt = tmp_path / "agent.zip"
    ckpt.write_bytes(b"")
    monkeypatch.setattr("dlcluster_gym.leaderboard.suite.agent_support", lambda policy: False)
    with pytest.raises(ConfigError, match="no agent support yet"):
        lb.load_suite(suite_file(tmp_path, entrants=["fcfs", f"agent:{ckpt}"]))
    monkeypatch.setattr("dlcluster_gym.leaderboard.runner.agent_support", lambda policy: False)
    with pytest.raises(ConfigError, match="no agent support yet"):
        lb.resolve_entrant(f"agent:{ckpt}", {})
    assert lb.resolve_entrant("fcfs", {}) == "fcfs"


def test_unknown_suite_name():
    with pytest.raises(UnknownNameError, match=r"valid suites: .*paper-heuristics"):
        lb.load_suite("nosuch")


def test_cells_and_ids(tmp_path):
    s = lb.load_suite(
        suite_file(tmp_path, entrants=["fcfs", {"policy": "cassini", "params": {"base": "fcfs"}}])
    )
    cells = s.cells()
    assert len(cells) == 1 * 2 * 2
    assert [c.id for c in cells] == [
        "tiny.fcfs.s1",
        "tiny.fcfs.s2",
        "tiny.cassini-base=fcfs.s1",
        "tiny.cassini-base=fcfs.s2",
    ]
    assert cells[2].entrant == "cassini[base=fcfs]" and cells[2].params == {"base": "fcfs"}
    assert cell_id("a b", "x y/z", 3) == "a-b.x-y-z.s3"
    assert cell_id("dir/my scenario.yaml", "fcfs", 1) == "my-scenario.fcfs.s1"


# --------------------------------------------------------------------------- running


def _run_and_render(suite, tmp):
    """Run ``suite`` into ``tmp/run`` and render its leaderboard: (suite, out, rows, paths)."""
    out = tmp / "run"
    rows = lb.run_suite(suite, out, workers=2, progress=False)
    return suite, out, rows, lb.render_leaderboard(out)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One local run of a small suite with an n/a entrant and a crashing one."""
    tmp = tmp_path_factory.mktemp("lb")
    suite = lb.load_suite(
        suite_file(
            tmp,
            entrants=[
                "fcfs",
                "dally",
                {"policy": NA, "label": "never"},
                {"policy": CRASH, "label": "crash"},
            ],
        )
    )
    return _run_and_render(suite, tmp)


def test_run_writes_every_cell_and_outputs(finished_run):
    suite, out, rows, paths = finished_run
    assert [r["id"] for r in rows] == [c.id for c in suite.cells()]
    status = {r["entrant"]: r["status"] for r in rows}
    assert status == {"fcfs": "ok", "dally": "ok", "never": "n/a", "crash": "error"}
    crash = next(r for r in rows if r["entrant"] == "crash")
    assert "RuntimeError: boom" in crash["reason"]
    ok = next(r for r in rows if r["status"] == "ok")
    for key in ("id", "scenario", "policy", "params", "seed", "version", "avg_jct_s"):
        assert key in ok
    assert ok["jobs_completed"] == 24 and ok["num_gpus"] == 8
    df = pd.read_parquet(paths["parquet"])
    assert len(df) == len(rows) == len(pd.read_csv(paths["csv"]))
    assert not list((out / "cells").glob("*.tmp"))


def test_leaderboard_markdown_and_html(finished_run):
    _, out, _, paths = finished_run
    md = paths["md"].read_text()
    ranking = md.split("\n## ")[0]
    # fcfs is the reference: score exactly 1 on every metric
    assert "**Ranking over 1 scenario(s): " in ranking
    assert "| 2 | fcfs | 1 | 1 | 1 | 1 | 1 of 1 | 0 | 0 | 0 |" in ranking
    # entrants scored nowhere are listed apart, unranked
    unranked = ranking.split("Not scored on any scenario")[1]
    assert "| never | - | - | - | - | 0 of 1 | 1 | 0 | 0 |" in unranked
    assert "| crash | - | - | - | - | 0 of 1 | 0 | 2 | 0 |" in unranked
    assert "| never | 2 | n/a | n/a |" in md
    assert "## Failed cells" in md and "tiny.crash.s1" in md
    html = paths["html"].read_text()
    assert html.count("data:image/png;base64,") == 1 and "<table>" in html
    assert 'src="plots/' not in html  # self-contained
    assert (out / "plots" / "tiny.png").stat().st_size > 10_000


def test_scores_match_the_rows(finished_run):
    suite, _, rows, _ = finished_run
    ok = [r for r in rows if r["status"] == "ok"]
    mean = {
        e: np.mean([r["avg_jct_s"] for r in ok if r["entrant"] == e]) for e in ("fcfs", "dally")
    }
    score = tables.scores(tables.frame(rows), ["fcfs", "dally"], suite.metrics, "fcfs")
    dally = score.set_index("entrant").loc["dally"]
    assert dally["avg_jct_s"] == pytest.approx(mean["dally"] / mean["fcfs"])


def test_runs_are_deterministic(finished_run, tmp_path):
    suite, _, rows, _ = finished_run
    again = lb.run_suite(suite, tmp_path / "again", workers=1, progress=False)
    strip = [{k: v for k, v in r.items() if k not in ("wall_s", "cpu_s", "reason")} for r in rows]
    assert strip == [
        {k: v for k, v in r.items() if k not in ("wall_s", "cpu_s", "reason")} for r in again
    ]


def test_existing_run_needs_resume(finished_run, tmp_path):
    suite, out, rows, _ = finished_run
    out = _copy_run(out, tmp_path / "copy")  # resuming reruns the failed cells: not in place
    with pytest.raises(ConfigError, match="pass --resume"):
        lb.run_suite(suite, out, progress=False)
    seen = []
    with pytest.warns(UserWarning, match=r"rerunning 2 cell\(s\) that failed.*it failed: "):
        again = lb.run_suite(suite, out, resume=True, progress=False, on_cell=seen.append)
    # ok and n/a cells are reused as they are; the failed ones run again (and fail again)
    assert sorted(r["entrant"] for r in seen) == ["crash", "crash"]
    assert metrics_only(again) == metrics_only(rows)


def test_verify_reproduces_and_catches_tampering(finished_run, tmp_path):
    _, out, _, _ = finished_run
    checks = lb.verify(out)
    # 4 ok rows + 2 n/a rows; the 4 ok cells' per-job data; results.csv, leaderboard.md,
    # results.parquet, the scenario's figure and index.html
    assert len(checks) == 15 and all(c.ok and c.checked for c in checks)
    assert [c.what for c in checks].count("row") == 6
    # tamper with one row in a copy of the run
    copy = tmp_path / "copy"
    (copy / "cells").mkdir(parents=True)
    for p in (out / "cells").glob("*.json"):
        (copy / "cells" / p.name).write_text(p.read_text())
    row = json.loads((copy / "cells" / "tiny.dally.s2.json").read_text())
    row["avg_jct_s"] *= 1.001
    (copy / "cells" / "tiny.dally.s2.json").write_text(json.dumps(row))
    result = CliRunner().invoke(main, ["leaderboard", "--verify", str(copy), "--row", row["id"]])
    assert result.exit_code == 1
    assert "DIFF tiny.dally.s2" in result.output and "avg_jct_s: recorded" in result.output
    result = CliRunner().invoke(main, ["leaderboard", "--verify", str(copy), "--row", "nope"])
    assert result.exit_code == 2 and "unknown row 'nope'" in result.output


def _copy_run(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_verify_checks_the_published_files(finished_run, tmp_path):
    _, out, _, _ = finished_run
    copy = _copy_run(out, tmp_path / "copy")
    csv = (copy / "results.csv").read_text().splitlines()
    # change one published number: the cells (and their replays) are untouched
    head, line = csv[0].split(","), csv[1].split(",")
    col = head.index("avg_jct_s")
    old, line[col] = line[col], str(float(line[col]) * 0.5)
    (copy / "results.csv").write_text("\n".join([csv[0], ",".join(line), *csv[2:]]) + "\n")
    md = (copy / "leaderboard.md").read_text()
    (copy / "leaderboard.md").write_text(md.replace("| 2 | fcfs |", "| 1 | fcfs |", 1))
    (copy / "results.parquet").unlink()
    checks = {c.id: c for c in lb.verify(copy)}
    # the changed field, with both values (not a line cut before it)
    assert checks["results.csv"].differences == (
        f"row 1 ({line[0]}): avg_jct_s: published {line[col]!r}, the cells give {old!r}",
    )
    assert not checks["leaderboard.md"].ok
    assert (
        not checks["results.parquet"].ok and "missing" in checks["results.parquet"].differences[0]
    )
    assert all(c.ok for i, c in checks.items() if i.startswith("tiny."))
    r = CliRunner().invoke(main, ["leaderboard", "--verify", str(copy)])
    assert r.exit_code == 1 and "DIFF results.csv" in r.output


def test_verify_catches_an_edited_parquet(finished_run, tmp_path):
    _, out, _, _ = finished_run
    copy = _copy_run(out, tmp_path / "copy")
    df = pd.read_parquet(copy / "results.parquet")
    df.loc[0, "avg_jct_s"] = 1.0
    df.to_parquet(copy / "results.parquet", index=False)
    checks = {c.id: c for c in lb.verify(copy)}
    assert (
        not checks["results.parquet"].ok and "avg_jct_s" in checks["results.parquet"].differences[0]
    )


@pytest.fixture(scope="module")
def pair_run(tmp_path_factory):
    """Two FCFS entrants on one six-job scenario, one seed: the smallest complete run."""
    tmp = tmp_path_factory.mktemp("pair")
    sc = scenario_file(tmp, num_jobs=6)
    suite = lb.load_suite(
        suite_file(tmp, name="pair", seeds=[1], entrants=["fcfs", "fcfs-consolidated"],
                   scenarios=[sc])
    )  # fmt: skip
    return _run_and_render(suite, tmp)


def _verify_cli(out: Path) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["leaderboard", "--verify", str(out)])
    return r.exit_code, r.output


def test_verify_checks_every_file_a_run_publishes(pair_run):
    _, out, _, _ = pair_run
    checks = lb.verify(out)
    files = {c.id for c in checks if c.what == "file"}
    published = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    # every file but the suite's own record, which every check reads
    assert files == published - {"suite.json"} - {f"cells/{c.id}.json" for c in checks}
    assert all(c.ok and c.checked for c in checks), [c for c in checks if not c.ok]
    rc, output = _verify_cli(out)
    assert rc == 0 and "2 of 2 row(s) reproduced exactly; 7 of 7 file(s) match" in output


def _scaled(p: Path) -> None:
    with np.load(p) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["jct_s"] = arrays["jct_s"] * 2
    np.savez_compressed(p, **arrays)


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda p: p.write_bytes(b"garbage\n"), "not a NumPy .npz archive"),
        (lambda p: p.write_bytes(p.read_bytes()[:200]), "not a NumPy .npz archive (File is not"),
        (lambda p: np.save(p.with_suffix(".npy"), [1.0]) or p.with_suffix(".npy").replace(p),
         "a single NumPy array (.npy)"),
        (_scaled, "jct_s[0]: recorded "),
    ],
    ids=["garbage", "truncated", "one-array", "edited"],
)  # fmt: skip
def test_verify_names_damaged_per_job_data(pair_run, tmp_path, damage, why):
    _, out, _, _ = pair_run
    copy = _copy_run(out, tmp_path / "copy")
    damage(copy / "cells" / "tiny.fcfs.s1.npz")
    rc, output = _verify_cli(copy)
    assert rc == 1 and "DIFF cells/tiny.fcfs.s1.npz\n" in output and why in output, output
    assert "2 of 2 row(s) reproduced exactly" in output  # the rows themselves replay
    if why.startswith("jct_s"):  # the figures drawn from the edited data differ too
        assert "DIFF plots/tiny.png" in output and "DIFF index.html" in output
        return
    assert "ok   plots/tiny.png  (not checked: drawn from per-job data that is missing or" in output
    r = CliRunner().invoke(main, ["report", str(copy)])
    (line,) = r.stderr.splitlines()
    assert r.exit_code == 2 and line.startswith(f"error: {copy}/cells/tiny.fcfs.s1.npz: ")
    assert "rerun the suite with --resume to rewrite it" in line


def test_resume_rewrites_damaged_per_job_data(pair_run, tmp_path):
    suite, out, _, _ = pair_run
    copy = _copy_run(out, tmp_path / "copy")
    (copy / "cells" / "tiny.fcfs.s1.npz").write_bytes(b"garbage")
    seen = []
    with pytest.warns(UserWarning, match=r"rerunning 1 cell.*damaged per-job data tiny.fcfs"):
        lb.run_suite(suite, copy, resume=True, progress=False, on_cell=seen.append, workers=1)
    assert [r["id"] for r in seen] == ["tiny.fcfs.s1"]
    assert (copy / "cells" / "tiny.fcfs.s1.npz").read_bytes() == (
        out / "cells" / "tiny.fcfs.s1.npz"
    ).read_bytes()


def test_verify_names_edited_figures_and_foreign_cells(pair_run, tmp_path):
    _, out, _, _ = pair_run
    copy = _copy_run(out, tmp_path / "copy")
    from PIL import Image

    img = Image.open(copy / "plots" / "tiny.png")
    img.putpixel((3, 3), (255, 0, 0, 255))
    img.save(copy / "plots" / "tiny.png")
    html = (copy / "index.html").read_text()
    (copy / "index.html").write_text(html.replace("Leaderboard: pair", "Leaderboard: best", 1))
    row = json.loads((copy / "cells" / "tiny.fcfs.s1.json").read_text())
    row["id"] = "other.fcfs.s1"
    (copy / "cells" / "other.fcfs.s1.json").write_text(json.dumps(row))
    (copy / "cells" / "stray.npz").write_bytes((copy / "cells" / "tiny.fcfs.s1.npz").read_bytes())
    checks = {c.id: c for c in lb.verify(copy)}
    assert "pixels differ from the figure the cells draw" in checks["plots/tiny.png"].differences[0]
    (diff,) = checks["index.html"].differences
    assert diff.startswith("line 1: published ") and "Leaderboard: best</title>" in diff
    assert "the cells give " in diff and "Leaderboard: pair</title>" in diff
    assert checks["cells/other.fcfs.s1.json"].differences == (
        "not a cell of this run (suite.json of suite 'pair' does not list it)",
    )
    assert checks["cells/stray.npz"].differences == (
        "per-job data without its cell row cells/stray.json",
    )
    assert "other.fcfs.s1" not in checks  # not replayed as a row of this run
    assert all(c.ok for i, c in checks.items() if i.startswith(("tiny.", "cells/tiny.")))


def test_resume_reruns_cells_whose_scenario_changed(tmp_path):
    suite = lb.load_suite(suite_file(tmp_path, seeds=[1], entrants=["fcfs"]))
    out = tmp_path / "run"
    first = lb.run_suite(suite, out, workers=1, progress=False)
    assert first[0]["jobs_total"] == 24
    scenario_file(tmp_path, num_jobs=20)  # edit the scenario YAML in place
    with pytest.warns(UserWarning, match="rerunning 1 cell.*scenario_hash: recorded"):
        again = lb.run_suite(suite, out, resume=True, workers=1, progress=False)
    assert again[0]["jobs_total"] == 20
    assert all(c.ok for c in lb.verify(out) if c.id.startswith("tiny."))


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("version", "0.0.1", "version: recorded '0.0.1'"),
        # other sources or presets, same package version; None: a cell from before code hashes
        ("code", "0123456789abcdef", r"code: computed by other code \(0123456789abcdef"),
        ("code", None, r"code: computed by other code \(not recorded"),
    ],
)
def test_resume_reruns_cells_of_another_version_or_code(tmp_path, key, value, why, one_code_hash):
    suite = lb.load_suite(suite_file(tmp_path, seeds=[1], entrants=["fcfs", "dally"]))
    out = tmp_path / "run"
    lb.run_suite(suite, out, workers=1, progress=False)
    path = out / "cells" / "tiny.fcfs.s1.json"
    row = json.loads(path.read_text())
    assert row["code"] == one_code_hash == fingerprint.code_hash()
    row[key], row["avg_jct_s"] = value, -1.0
    path.write_text(json.dumps({k: v for k, v in row.items() if v is not None}))
    seen = []
    with pytest.warns(UserWarning, match=rf"tiny.fcfs.s1 .{why}"):
        rows = lb.run_suite(suite, out, resume=True, progress=False, on_cell=seen.append)
    assert [r["id"] for r in seen] == ["tiny.fcfs.s1"] and rows[0]["avg_jct_s"] > 0
    (check,) = [c for c in lb.verify(out) if c.id == "tiny.fcfs.s1"]
    assert check.ok and check.note == ""


def test_rerun_reruns_one_entrant_and_keeps_cells_of_other_code(tmp_path, one_code_hash):
    """``rerun``: the named entrant's cells run again; another entrant's cell computed by
    other code is kept as it was (its doctored value included), and the page counts the code
    versions; unknown entrants and a run directory without cells are errors."""
    suite = lb.load_suite(suite_file(tmp_path, seeds=[1], entrants=["fcfs", "dally"]))
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match="holds no finished cell of a run to update"):
        lb.run_suite(suite, out, progress=False, rerun=["dally"])
    lb.run_suite(suite, out, workers=1, progress=False)
    for cell, jct in (("tiny.fcfs.s1", -1.0), ("tiny.dally.s1", -2.0)):
        path = out / "cells" / f"{cell}.json"
        row = json.loads(path.read_text())
        row["code"], row["avg_jct_s"] = "0123456789abcdef", jct
        path.write_text(json.dumps({k: v for k, v in row.items() if v is not None}))
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the requested rerun and the kept cell warn of nothing
        rows = lb.run_suite(suite, out, workers=1, progress=False, on_cell=seen.append,
                            rerun=["dally"])  # fmt: skip
    assert [r["id"] for r in seen] == ["tiny.dally.s1"]
    by = {r["id"]: r for r in rows}
    assert by["tiny.fcfs.s1"]["avg_jct_s"] == -1.0  # kept, though other code computed it
    assert by["tiny.dally.s1"]["avg_jct_s"] > 0 and by["tiny.dally.s1"]["code"] == one_code_hash
    md = Path(lb.render_leaderboard(out)["md"]).read_text()
    assert "computed by 2 versions of the code" in md and "`0123456789abcdef` 1 cells: fcfs" in md
    with pytest.raises(ConfigError, match="rerun: nosuch not an entrant of suite"):
        lb.run_suite(suite, out, progress=False, rerun=["nosuch"])


def test_code_hash_follows_sources_and_presets_not_suites(tmp_path):
    src, cfg = tmp_path / "pkg", tmp_path / "configs"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "m.py").write_text("x = 1\n")
    for d in ("profiles", "suites"):
        (cfg / d).mkdir(parents=True)
        (cfg / d / "a.yaml").write_text("a: 1\n")
    h0 = fingerprint.tree_hash([src], cfg)
    assert h0 == fingerprint.tree_hash([src], cfg) and len(h0) == 16
    (cfg / "suites" / "a.yaml").write_text("a: 2\n")  # which cells exist, not what they compute
    assert fingerprint.tree_hash([src], cfg) == h0
    (cfg / "profiles" / "a.yaml").write_text("a: 2\n")
    h1 = fingerprint.tree_hash([src], cfg)
    assert h1 != h0
    (src / "sub" / "m.py").write_text("x = 2\n")
    assert fingerprint.tree_hash([src], cfg) not in (h0, h1)


def test_agent_cells_record_their_checkpoint(tmp_path):
    ckpt = tmp_path / "a.zip"
    ckpt.write_bytes(b"one")
    one = fingerprint.cell_code(f"agent:{ckpt}")
    ckpt.write_bytes(b"two")
    two = fingerprint.cell_code(f"agent:{ckpt}")
    assert one.startswith(fingerprint.code_hash() + "+") and one != two
    assert fingerprint.cell_code(f"agent:{tmp_path / 'gone.zip'}").endswith("+missing")
    assert fingerprint.cell_code("fcfs") == fingerprint.code_hash()


def test_a_run_directory_belongs_to_one_suite(tmp_path):
    out = tmp_path / "run"
    lb.run_suite(lb.load_suite(suite_file(tmp_path, seeds=[1], entrants=["fcfs"])), out,
                 workers=1, progress=False)  # fmt: skip
    other = lb.load_suite(suite_file(tmp_path, name="other", seeds=[1], entrants=["fcfs"]))
    with pytest.raises(ConfigError, match="holds a run of suite 't', not 'other'"):
        lb.run_suite(other, out, resume=True, progress=False)
    (out / "suite.json").unlink()  # cells alone still tell
    with pytest.raises(ConfigError, match=r"cell\(s\) of another suite"):
        lb.run_suite(other, out, resume=True, progress=False)


def test_entrant_parameters_are_checked_when_the_suite_loads(tmp_path):
    for params, msg in (
        ({"round_s": 60}, "policy 'fcfs' has no parameter 'round_s'; parameters: .none."),
        ({"preemption": "maybe"}, "parameter 'preemption': Input should be a valid boolean"),
    ):
        policy = "fcfs" if "round_s" in params else "tiresias"
        entrants = ["fcfs", {"policy": policy, "params": params}]
        with pytest.raises(ConfigError, match=msg):
            lb.load_suite(suite_file(tmp_path, entrants=entrants))


@pytest.mark.extended  # CI runs it after the default run (docs/testing.md)
def test_kill_then_resume_equals_uninterrupted(tmp_path):
    """Kill a CLI run half way (SIGKILL to its process group), resume, compare."""
    sc = scenario_file(tmp_path, "resume", num_jobs=200)
    suite = suite_file(tmp_path, seeds=[1, 2, 3], entrants=["fcfs", "gandiva"], scenarios=[sc])
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "dlcluster_gym.cli", "leaderboard", "--suite", str(suite)]
    cmd += ["--out", str(out), "--workers", "1", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(list((out / "cells").glob("*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = {p.stem for p in (out / "cells").glob("*.json")}
    assert 2 <= len(done) < 6, "the run finished before it could be killed"
    resumed = subprocess.run([*cmd, "--resume"], cwd=REPO, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    full = lb.run_suite(lb.load_suite(suite), tmp_path / "full", workers=2, progress=False)
    cli_rows = read_rows(out, [r["id"] for r in full])
    assert metrics_only(cli_rows, drop=("code",)) == metrics_only(full, drop=("code",))


@pytest.mark.skipif(not HAS_PROC, reason="needs Linux /proc")
def test_workers_die_with_a_killed_driver(tmp_path):
    """SIGKILL to the driver alone: its workers and the pool's resource tracker end too,
    instead of living on re-parented to init (the cells in flight sleep for 60 s)."""
    sleeper = {"policy": "tests.fixtures.leaderboard_policies:Sleeps",
               "params": {"seconds": 60}, "label": "sleeps"}  # fmt: skip
    suite = suite_file(tmp_path, seeds=[1, 2, 3, 4], entrants=[sleeper], reference="sleeps",
                       scenarios=[scenario_file(tmp_path, num_jobs=4)])  # fmt: skip
    cmd = [sys.executable, "-m", "dlcluster_gym.cli", "leaderboard", "--suite", str(suite)]
    cmd += ["--out", str(tmp_path / "run"), "--workers", "2", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        kids: set[int] = set()
        while len(kids) < 3 and time.monotonic() < deadline:  # two workers and the tracker
            time.sleep(0.1)
            kids = {k for k in descendants(proc.pid) if alive(k)}
        assert len(kids) >= 3, f"the driver started {len(kids)} processes, not 2 workers + 1"
        time.sleep(1.0)  # the workers are past their start, in a cell
        proc.kill()
        proc.wait()
        t = time.monotonic()
        while any(alive(k) for k in kids) and time.monotonic() - t < 10:
            time.sleep(0.1)
        assert not [k for k in kids if alive(k)], "processes outlived the killed driver"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.skipif(not HAS_PROC, reason="needs Linux /proc")
def test_sigterm_stops_the_workers_and_the_run_resumes(tmp_path):
    """SIGTERM to the driver alone (not its process group): the workers stop with it, the
    finished cells stay, and --resume completes the run as if it had never stopped."""
    sc = scenario_file(tmp_path, "term", num_jobs=200)
    suite = suite_file(tmp_path, seeds=[1, 2, 3], entrants=["fcfs", "gandiva"], scenarios=[sc])
    out = tmp_path / "termed"
    cmd = [sys.executable, "-m", "dlcluster_gym.cli", "leaderboard", "--suite", str(suite)]
    cmd += ["--out", str(out), "--workers", "2", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while len(list((out / "cells").glob("*.json"))) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = set()
    while not workers and time.monotonic() < deadline:
        workers = {c for c in children(proc.pid) if alive(c)}
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143 and "terminated by SIGTERM" in err, err
    assert "Traceback" not in err
    t = time.monotonic()
    while any(alive(w) for w in workers) and time.monotonic() - t < 10:
        time.sleep(0.1)
    assert workers and not any(alive(w) for w in workers), "workers outlived the driver"
    done = {p.stem for p in (out / "cells").glob("*.json")}
    assert 1 <= len(done) < 6, "the run finished before it could be stopped"
    resumed = subprocess.run([*cmd, "--resume"], cwd=REPO, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    # kept cells are reused as they are (that resuming equals an uninterrupted run is
    # test_kill_then_resume_equals_uninterrupted)
    rows = read_rows(out)
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)


# --------------------------------------------------------------------------- Ray


def test_ray_unreachable_address_fails_fast(tmp_path):
    pytest.importorskip("ray")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    suite = lb.load_suite(suite_file(tmp_path))
    t = time.monotonic()
    with pytest.raises(ConfigError, match=f"127.0.0.1:{port}' is unreachable"):
        lb.run_suite(
            suite, tmp_path / "r", backend="ray", ray_address=f"127.0.0.1:{port}", progress=False
        )
    assert time.monotonic() - t < 15


def test_ray_local_instance_matches_local_backend(finished_run, tmp_path):
    pytest.importorskip("ray")
    suite, _, rows, _ = finished_run
    ray_rows = lb.run_suite(suite, tmp_path / "ray", backend="ray", workers=2, progress=False)
    drop = ("wall_s", "cpu_s", "reason", "code")  # Ray's workers hash the sources themselves
    strip = [{k: v for k, v in r.items() if k not in drop} for r in rows]
    assert strip == [{k: v for k, v in r.items() if k not in drop} for r in ray_rows]


# --------------------------------------------------------------------------- tables


def test_mean_ci():
    mean, half = tables.mean_ci(np.array([1.0, 3.0]))
    assert mean == 2.0 and half == pytest.approx(12.7062, rel=1e-4)  # t(0.975, 1) x 1
    mean, half = tables.mean_ci(np.array([5.0]))
    assert mean == 5.0 and math.isnan(half)
    assert all(math.isnan(x) for x in tables.mean_ci(np.array([])))


def test_scores_geometric_mean_over_scenarios():
    rows = []
    for sc, ref, x in (("a", 10.0, 20.0), ("b", 10.0, 5.0), ("c", 0.0, 1.0)):
        for e, v in (("fcfs", ref), ("x", x)):
            rows.append({"scenario": sc, "entrant": e, "status": "ok", "m": v})
    rows.append({"scenario": "d", "entrant": "x", "status": "n/a", "m": math.nan})
    table = tables.scores(pd.DataFrame(rows), ["fcfs", "x"], ("m",), "fcfs")
    x = table.set_index("entrant").loc["x"]
    # ratios 2 and 0.5 (scenario c has a zero reference and is left out): gmean 1
    assert x["m"] == pytest.approx(1.0) and x["scenarios"] == 2 and x["n/a"] == 1


def test_ranking_compares_the_same_scenarios():
    """An entrant that ran on one scenario out of three is not ranked against those that ran on
    all of them, however good its one ratio: each ranking compares one scenario set, with the
    reference in each. Cells with unfinished jobs are not scored."""
    rows = []
    for sc in ("a", "b", "c"):
        rows += [{"scenario": sc, "entrant": "fcfs", "status": "ok", "m": 10.0}]
        rows += [{"scenario": sc, "entrant": "good", "status": "ok", "m": 8.0}]
        rows += [{"scenario": sc, "entrant": "lazy", "status": "ok", "m": 1.0,
                  "jobs_unfinished": 5 if sc != "a" else 0}]  # fmt: skip
    rows += [{"scenario": "a", "entrant": "narrow", "status": "ok", "m": 2.0}]
    rows += [{"scenario": sc, "entrant": "narrow", "status": "n/a", "m": math.nan} for sc in "bc"]
    rows += [{"scenario": sc, "entrant": "never", "status": "n/a", "m": math.nan} for sc in "abc"]
    for r in rows:
        r.setdefault("jobs_unfinished", 0)
    names = ["fcfs", "good", "lazy", "narrow", "never"]
    table = tables.scores(pd.DataFrame(rows), names, ("m",), "fcfs")
    t = table.set_index("entrant")
    assert t.loc["narrow", "scenarios"] == 1 and t.loc["narrow", "common"] == 3
    assert t.loc["lazy", "scored"] == ("a",) and t.loc["lazy", "unfinished"] == 2
    assert list(t["ranked"]) == [t.loc[e, "scenarios"] == 3 for e in t.index]
    groups = tables.ranking_groups(table, "fcfs")
    assert [(key, list(g["entrant"])) for key, g in groups] == [
        (("a", "b", "c"), ["good", "fcfs"]),
        (("a",), ["lazy", "narrow", "fcfs"]),  # lazy's 0.1 is over scenario a only
    ]
    assert list(tables.unscored(table)["entrant"]) == ["never"]
    headers, ranked = tables.score_rows(groups[0][1], ("m",))
    assert headers[0] == "rank" and ranked[0][:2] == ["1", "good"] and "3 of 3" in ranked[0]
    _, unranked = tables.score_rows(tables.unscored(table), ("m",), ranked=False)
    assert unranked[0][0] == "never" and "0 of 3" in unranked[0]


def test_ci_whiskers_never_go_below_zero_and_single_runs_have_none():
    from dlcluster_gym.leaderboard.plots import ci_whiskers

    w = ci_whiskers([(1.0, 3.0), (10.0, 2.0), (5.0, math.nan)])
    assert w.tolist() == [[1.0, 2.0, 0.0], [3.0, 2.0, 0.0]]  # mean - lower >= 0 everywhere
    assert ci_whiskers([(1.0, math.nan), (2.0, math.nan)]) is None


# --------------------------------------------------------------------------- CLI


def test_cli_leaderboard_and_report(tmp_path):
    suite = suite_file(tmp_path, seeds=[1], entrants=["fcfs"])
    out = tmp_path / "cli"
    r = CliRunner().invoke(
        main, ["leaderboard", "--suite", str(suite), "--out", str(out), "--workers", "1"]
    )
    assert r.exit_code == 0, r.output
    assert "1 cells (0 failed)" in r.output and (out / "index.html").is_file()
    run = tmp_path / "sim"
    r = CliRunner().invoke(
        main, ["simulate", "--scenario", scenario_file(tmp_path), "--out", str(run)]
    )
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["report", str(run)])
    assert r.exit_code == 0, r.output
    assert (run / "report.png").stat().st_size > 10_000
    assert "data:image/png;base64," in (run / "report.html").read_text()
    assert "| avg_jct_s |" in (run / "report.md").read_text()
    r = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert r.exit_code == 2 and "no results.json" in r.output


def test_cli_leaderboard_errors(tmp_path):
    r = CliRunner().invoke(main, ["leaderboard"])
    assert r.exit_code == 2 and "--suite" in r.output
    r = CliRunner().invoke(main, ["leaderboard", "--suite", "nosuch"])
    assert r.exit_code == 2 and "unknown suite 'nosuch'" in r.output


def test_list_scenarios_has_itp_clusters_with_descriptions():
    r = CliRunner().invoke(main, ["list", "scenarios"])
    lines = {ln.split()[0]: ln for ln in r.output.splitlines()}
    for i in range(1, 11):
        name = f"itp-cluster{i:02d}"
        assert name in lines and "ITP" in lines[name]
    assert all(len(ln.split(None, 1)) == 2 for ln in lines.values())


# --------------------------------------------------------------------------- kinds

KINDS_ENTRANTS = [
    "fcfs",
    "dally",
    "themis",  # reads each job's remaining iterations: clairvoyant
    {"policy": "themis", "params": {"lengths": "history"}, "label": "themis-history"},
    "srw",
    "ideal",
]
EXPECTED_KINDS = {
    "fcfs": "deployable",
    "dally": "deployable",
    "themis": "clairvoyant",
    "themis-history": "deployable",
    "srw": "clairvoyant",
    "ideal": "bound",
}


@pytest.fixture(scope="module")
def kinds_run(tmp_path_factory):
    """A tiny suite mixing deployable entrants, clairvoyant ones and a bound, one seed."""
    tmp = tmp_path_factory.mktemp("kinds")
    sc = scenario_file(tmp, num_jobs=12)
    suite = lb.load_suite(
        suite_file(tmp, name="kinds", seeds=[1], entrants=KINDS_ENTRANTS, scenarios=[sc])
    )
    return _run_and_render(suite, tmp)


def test_rows_record_the_entrant_kind(kinds_run):
    _, _, rows, paths = kinds_run
    assert {r["entrant"]: r["kind"] for r in rows} == EXPECTED_KINDS
    assert all(r["status"] == "ok" for r in rows)
    published = pd.read_csv(paths["csv"])
    assert dict(zip(published["entrant"], published["kind"], strict=True)) == EXPECTED_KINDS


def test_only_deployable_entrants_are_ranked(kinds_run):
    suite, _, rows, _ = kinds_run
    names = [e.name for e in suite.entrants]
    score = tables.scores(tables.frame(rows), names, suite.metrics, suite.reference)
    ranked = {e for e, r in zip(score["entrant"], score["ranked"], strict=True) if r}
    assert ranked == {"fcfs", "dally", "themis-history"}
    (_, group), *more = tables.ranking_groups(score, suite.reference)
    assert not more and sorted(group["entrant"]) == ["dally", "fcfs", "themis-history"]
    assert list(group["score"]) == sorted(group["score"])  # best first
    refs = tables.references(score)
    assert list(refs["kind"]) == ["clairvoyant", "clairvoyant", "bound"]
    assert set(refs["entrant"]) == {"themis", "srw", "ideal"}
    assert tables.unscored(score).empty


def test_report_marks_references_and_explains_the_marks(kinds_run):
    _, out, _, paths = kinds_run
    md = paths["md"].read_text()
    ranking, references = md.split("**References (not ranked)")
    references = references.split("\n## ")[0]
    assert "| 1 | " in ranking and "| 3 | " in ranking and "| 4 | " not in ranking
    for name in ("srw", "ideal", "| themis |", "(clairvoyant)", "(bound)"):
        assert name not in ranking.split("**Ranking over")[1]
    for line in ("| srw (clairvoyant) |", "| themis (clairvoyant) |", "| ideal (bound) |"):
        assert line in references
    assert not any(ln.startswith("| 1 |") for ln in references.splitlines())  # no rank
    legend = "(clairvoyant): reads ground truth a real scheduler does not have"
    assert legend in references and "(bound): an analytical bound" in references
    scenario = md.split("\n## ")[1]  # the per-scenario table
    order = [ln.split(" | ")[0].lstrip("| ") for ln in scenario.splitlines() if ln.startswith("| ")]
    assert order[1:] == [  # deployable first, in suite order, then the references
        "fcfs", "dally", "themis-history", "themis (clairvoyant)", "srw (clairvoyant)",
        "ideal (bound)",
    ]  # fmt: skip
    assert legend in scenario
    html = paths["html"].read_text()
    assert "srw (clairvoyant)" in html and "ideal (bound)" in html and legend in html
    assert (out / "plots" / "tiny.png").stat().st_size > 10_000


def test_figure_draws_references_apart():
    from dlcluster_gym.leaderboard.plots import Series, scenario_figure

    def series(label: str, kind: str, avg: float) -> Series:
        return Series(
            label=label, kind=kind, jct_s=np.array([1.0, 2.0, 3.0]) * 3600,
            avg_jct_s=(avg, 0.1), makespan_s=(avg * 3, 0.2), comm_overhead=(0.1, math.nan),
            t_s=np.array([0.0, 3600.0]), utilization=np.array([0.5, 1.0]),
            remaining=np.array([3.0, 0.0]),
        )  # fmt: skip

    png = scenario_figure("t", [series("fcfs", "deployable", 2.0), series("srw", "clairvoyant",
                                1.0), series("ideal", "bound", 0.5)])  # fmt: skip
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert series("srw", "clairvoyant", 1.0).name == "srw (clairvoyant)"


def test_verify_compares_the_recorded_kind(kinds_run, tmp_path):
    _, out, _, _ = kinds_run
    checks = lb.verify(out)
    # 6 rows, their per-job data, 3 tables, the figure and index.html
    assert len(checks) == 6 + 6 + 3 + 2 and all(c.ok for c in checks), [
        c for c in checks if not c.ok
    ]
    copy = _copy_run(out, tmp_path / "copy")
    path = copy / "cells" / "tiny.srw.s1.json"
    row = json.loads(path.read_text())
    row["kind"] = "deployable"  # a clairvoyant policy passed off as deployable
    path.write_text(json.dumps(row))
    check, data = lb.verify(copy, "tiny.srw.s1")  # the row, then its per-job data
    assert data.ok and data.id == "cells/tiny.srw.s1.npz"
    assert not check.ok and "kind: recorded 'deployable', replayed 'clairvoyant'" in str(
        check.differences
    )


def test_rows_without_a_kind_are_still_read(kinds_run, tmp_path):
    """Cells written before kinds were recorded: the kind comes from policy and parameters
    when read, the report renders, and resuming reuses them as they are."""
    suite, out, rows, _ = kinds_run
    copy = _copy_run(out, tmp_path / "old")
    for p in (copy / "cells").glob("*.json"):
        row = json.loads(p.read_text())
        del row["kind"]
        p.write_text(json.dumps(row))
    back = read_rows(copy)
    assert {r["entrant"]: r["kind"] for r in back} == EXPECTED_KINDS
    assert list(back[0]).index("kind") == list(back[0]).index("params") + 1
    md = lb.render_leaderboard(copy)["md"].read_text()
    assert "| srw (clairvoyant) |" in md.split("**References (not ranked)")[1]
    seen = []
    again = lb.run_suite(suite, copy, resume=True, progress=False, on_cell=seen.append)
    assert not seen and metrics_only(again) == metrics_only(rows)


def test_a_suite_without_deployable_entrants_ranks_nothing(tmp_path):
    sc = scenario_file(tmp_path, num_jobs=8)
    suite = lb.load_suite(
        suite_file(tmp_path, seeds=[1], entrants=["srw", "ideal"], scenarios=[sc],
                   reference="srw")
    )  # fmt: skip
    out = tmp_path / "run"
    lb.run_suite(suite, out, workers=1, progress=False)
    md = lb.render_leaderboard(out)["md"].read_text()
    assert "**Ranking over" not in md
    assert "No entrant of this suite is deployable: nothing is ranked" in md
    assert "The reference `srw` is clairvoyant" in md
    refs = md.split("**References (not ranked)")[1]
    assert "| srw (clairvoyant) | 1 |" in refs and "| ideal (bound) |" in refs


def test_a_clairvoyant_reference_normalises_but_is_not_ranked():
    rows = []
    for sc, ref in (("a", 10.0), ("b", 20.0)):
        for e, kind, factor in (
            ("srw", "clairvoyant", 1.0), ("x", "deployable", 1.5), ("y", "deployable", 1.2),
            ("ideal", "bound", 0.5),
        ):  # fmt: skip
            rows.append({"scenario": sc, "entrant": e, "kind": kind, "status": "ok",
                         "m": ref * factor, "jobs_unfinished": 0})  # fmt: skip
    table = tables.scores(pd.DataFrame(rows), ["srw", "x", "y", "ideal"], ("m",), "srw")
    ((key, group),) = tables.ranking_groups(table, "srw")
    assert key == ("a", "b") and list(group["entrant"]) == ["y", "x"]
    assert list(group["score"]) == pytest.approx([1.2, 1.5])
    refs = tables.references(table)
    assert list(refs["entrant"]) == ["srw", "ideal"] and list(refs["score"]) == [1.0, 0.5]
    headers, body = tables.score_rows(refs, ("m",), ranked=False)
    assert headers[0] == "entrant" and body[0][0] == "srw (clairvoyant)"
    assert tables.legend(["deployable"]) == ""
    # the reference alone among deployable entrants: still a ranking (of one)
    alone = [r for r in rows if r["entrant"] in ("x", "srw")]
    table = tables.scores(pd.DataFrame(alone), ["x", "srw"], ("m",), "x")
    assert [(k, list(g["entrant"])) for k, g in tables.ranking_groups(table, "x")] == [
        (("a", "b"), ["x"])
    ]
    assert list(tables.references(table)["entrant"]) == ["srw"]


# --------------------------------------------------------------------------- agent tables


def _eval_rows() -> list[dict]:
    """Synthetic evaluation rows: an agent, two deployable heuristics, a clairvoyant one and
    a bound, two scenarios x two seeds."""
    jct = {"agent": 9.0, "dally": 10.0, "tiresias": 8.0, "themis": 6.0, "ideal": 3.0}
    kinds = {"agent": "deployable", "dally": "deployable", "tiresias": "deployable",
             "themis": "clairvoyant", "ideal": "bound"}  # fmt: skip
    return [
        {
            "scenario": sc,
            "seed": seed,
            "policy": p,
            "kind": kinds[p],
            "avg_jct_s": v * 3600 * (2 if sc == "b" else 1),
            "p99_jct_s": v * 7200,
            "makespan_s": v * 36000,
            "jobs_unfinished": 0,
        }
        for sc in ("a", "b")
        for seed in (1, 2)
        for p, v in jct.items()
    ]


def test_agent_tables_compare_with_the_best_deployable_heuristic():
    from dlcluster_gym.agents.evaluate import (
        best_heuristics,
        best_rows,
        best_table,
        markdown_table,
        summary_table,
    )

    rows = _eval_rows()
    best = best_heuristics(rows, ["agent"], "dally")
    assert best == {"deployable": "tiresias", "clairvoyant": "themis"}
    out = best_rows(rows, ["agent"], "dally")
    assert [r["scenario"] for r in out] == ["a", "b", "ALL"]
    assert out[0]["kind"] == "deployable" and out[0]["best_deployable"] == "tiresias"
    assert out[0]["vs_best_deployable"] == pytest.approx(9 / 8)
    assert out[0]["vs_best_clairvoyant"] == pytest.approx(9 / 6)
    md = best_table(rows, ["agent"], "dally")
    assert "| a | agent | deployable | 9.00 | tiresias | 1.125 | themis | 1.500 |" in md
    table = summary_table(rows, "dally")
    assert {r["policy"]: r["kind"] for r in table}["themis"] == "clairvoyant"
    text = markdown_table(table, "dally")
    head = text.splitlines()[0]
    assert "| themis (clairvoyant) |" in head and "| ideal (bound) |" in head
    assert "| tiresias |" in head and "(clairvoyant): reads ground truth" in text
    # no deployable heuristic at all: the column says so instead of picking a clairvoyant one
    only = [r for r in rows if r["policy"] in ("agent", "themis")]
    assert best_heuristics(only, ["agent"], "agent")["deployable"] is None
    assert "| (none) | - | themis |" in best_table(only, ["agent"], "agent")


def test_experiment_targets_use_the_best_deployable_heuristic():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "train_agents", REPO / "experiments" / "agents" / "train_agents.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = [dict(r, policy={"agent": "a-agent"}.get(r["policy"], r["policy"]))
            for r in _eval_rows()]  # fmt: skip
    md = mod.targets_table(rows, "a-agent")
    line = next(ln for ln in md.splitlines() if ln.startswith("| a |"))
    assert "1.125 (tiresias)" in line and "1.500 (themis)" in line
    assert "best heuristic, deployable" in md.splitlines()[0]


# --------------------------------------------------------------------------- files by content


def test_the_shipped_agents_suite_loads_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    agents = [c for c in lb.load_suite("agents").cells() if c.policy.startswith("agent:")]
    assert agents and all(Path(c.checkpoint_file).is_file() for c in agents)
    assert all(Path(c.checkpoint_file).parent == REPO / "agents" / "checkpoints" for c in agents)


def test_a_run_verifies_from_any_folder(tmp_path, monkeypatch):
    """Relative paths resolve against the suite file (a scenario beside it) or the project root
    (the shipped checkpoints); rows record them as written and the checkpoint by content."""
    folder = tmp_path / "suites"
    folder.mkdir()
    scenario_file(folder, num_jobs=6)
    ckpt = "agents/checkpoints/delay_timer.zip"
    suite = folder / "s.yaml"
    suite.write_text(
        yaml.safe_dump(
            {"name": "files", "seeds": [1], "reference": f"agent:{ckpt}",
             "entrants": [f"agent:{ckpt}"], "scenarios": ["tiny.yaml"]}
        )
    )  # fmt: skip
    monkeypatch.chdir(REPO)
    out = tmp_path / "run"
    (row,) = lb.run_suite(lb.load_suite(suite), out, workers=1, progress=False)
    assert row["status"] == "ok", row["reason"]
    assert row["policy"] == f"agent:{ckpt}" and row["scenario"] == "tiny.yaml"
    assert row["checkpoint"] == hashlib.sha256((REPO / ckpt).read_bytes()).hexdigest()[:16]
    lb.render_leaderboard(out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    checks = lb.verify(out)
    assert [c.differences for c in checks if not c.ok] == []
    # the row, its per-job data, the three tables, the figure and index.html
    assert len(checks) == 7 and all(c.checked for c in checks)
