"""What the bad-input tables share (``tests/test_bad_inputs*.py``): small valid inputs to
break one thing at a time, and the check every case goes through.

A case is (command line, files to create, text the one-line error must contain). ``{d}`` in
an argument, a file name, a file's contents or the expected text is the test's temporary
folder. A file's contents are text, bytes (written as they are), or a function of the folder
returning either (to copy and damage a real file); the files may also be a function that
gives them all (made only when the case runs: a run directory to damage, say).
"""

from __future__ import annotations

import importlib.util
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Union

import pytest
from click.testing import CliRunner

from dlcluster_gym.cli import main

FileText = Union[str, bytes, Callable[[Path], Union[str, bytes]]]  # noqa: UP007
Files = Union[dict[str, FileText], Callable[[], dict[str, FileText]]]  # noqa: UP007
Case = tuple[list[str], Files, str]

REPO = Path(__file__).resolve().parents[1]
CHECKPOINTS = REPO / "agents" / "checkpoints"

CLUSTER = "cluster: {racks: 1, machines_per_rack: 2, gpus_per_machine: 4}\n"
SYNTH = "workload: {kind: synthetic, num_jobs: 4}\n"
OK_SCENARIO = CLUSTER + SYNTH
SIM = ["simulate", "--quiet", "--scenario"]
SUITE = "seeds: [1]\nentrants: [fcfs]\nscenarios: ['{d}/s.yaml']\n"
CSV_HEAD = "id,submit,gpus,runtime\n"
HAS_AGENTS = all(importlib.util.find_spec(m) for m in ("torch", "stable_baselines3"))
# Eleven lines under unknown keys, each nine aliases of the line before: 9**11 values expanded.
ALIAS_BOMB = 'l0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]\n' + "".join(
    f"l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 11)
)
ALIAS_REFUSED = (
    "line 2, column 10: YAML aliases (the first is here) expand this file to more than 100,000 "
    "values, the limit of a config file"
)
# A config file past the size limit (1 MiB): a long comment after a valid config.
TOO_BIG = "# " + "x" * 1_048_576 + "\n"
TOO_BIG_REFUSED = "more than 1,048,576 bytes (1 MiB), the limit of a config file"


def scenario(**over: str) -> str:
    """A small valid scenario YAML with some top-level entries replaced."""
    parts = {"cluster": CLUSTER, "workload": SYNTH}
    parts.update({k: f"{k}: {v}\n" for k, v in over.items()})
    return "".join(parts.values())


def generic_trace(csv_name: str = "t.csv", **extra: str) -> str:
    """A scenario over a generic CSV trace ``{d}/csv_name``."""
    opts = "".join(f", {k}: {v}" for k, v in extra.items())
    cols = "{arrival: submit, num_gpus: gpus, duration: runtime, job_id: id}"
    return CLUSTER + (
        f"workload: {{kind: trace, format: generic, path: '{{d}}/{csv_name}', columns: {cols}"
        f"{opts}}}\n"
    )


def trace_scenario(fmt: str, csv_name: str = "t.csv", **extra: str) -> str:
    """A scenario over a trace of format ``fmt`` at ``{d}/csv_name``."""
    opts = "".join(f", {k}: {v}" for k, v in extra.items())
    return CLUSTER + f"workload: {{kind: trace, format: {fmt}, path: '{{d}}/{csv_name}'{opts}}}\n"


def damaged_checkpoint(
    *,
    member: str | None = None,
    data: bytes = b"",
    drop: str | None = None,
    source: str = "placement.zip",
) -> Callable[[Path], bytes]:
    """A copy of a shipped checkpoint with ``member`` replaced by ``data`` or ``drop``
    left out (made in the test's folder)."""  # fmt: skip

    def make(d: Path) -> bytes:
        src = CHECKPOINTS / source
        out = d / f"_src_{source}"
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
            for info in zin.infolist():
                if info.filename == drop:
                    continue
                body = data if info.filename == member else zin.read(info.filename)
                zout.writestr(info.filename, body)
        return out.read_bytes()

    return make


def copied(path: Path, edit: Callable[[bytes], bytes] = lambda b: b) -> Callable[[Path], bytes]:
    """The bytes of ``path``, changed by ``edit``."""
    return lambda d: edit(path.read_bytes())


def params(cases: Mapping[str, Case], marks: Iterable[Any] = ()) -> list[Any]:
    """The cases as pytest parameters, one id each."""
    return [pytest.param(*case, id=name, marks=list(marks)) for name, case in cases.items()]


def write_files(tmp_path: Path, files: Files) -> None:
    """Write a case's files (``files`` may be a function giving them: made when needed)."""
    d = str(tmp_path)
    if callable(files):
        files = files()
    for name, text in files.items():
        path = tmp_path / name.replace("{d}", d)
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(text):
            text = text(tmp_path)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text.replace("{d}", d))


def check_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], files: Files, culprit: str
) -> None:
    """Exit code 2, exactly one line on stderr starting ``error: ``, containing ``culprit``,
    and no traceback anywhere."""
    d = str(tmp_path)
    write_files(tmp_path, files)
    monkeypatch.chdir(tmp_path)  # user policies are imported from the current directory
    result = CliRunner().invoke(main, [a.replace("{d}", d) for a in args])
    lines = result.stderr.splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output, result.stderr)
    assert "Traceback" not in result.output + result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert culprit.replace("{d}", d) in lines[0], lines[0]


_CACHE: dict[str, dict[str, bytes]] = {}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def run_dir_files(prefix: str = "run") -> dict[str, bytes]:
    """The files of a small ``dlcluster simulate --out`` run, under ``prefix/`` (made once)."""
    if "run" not in _CACHE:
        import tempfile

        from dlcluster_gym.api import simulate
        from dlcluster_gym.config import safe_load

        with tempfile.TemporaryDirectory() as tmp:
            simulate(safe_load(OK_SCENARIO)).save(Path(tmp))
            _CACHE["run"] = _snapshot(Path(tmp))
    return {f"{prefix}/{k}": v for k, v in _CACHE["run"].items()}


def leaderboard_dir_files(prefix: str = "lb") -> dict[str, bytes]:
    """The files of a one-cell leaderboard run (fcfs on a small scenario), under ``prefix/``
    (made once, in this process)."""
    if "lb" not in _CACHE:
        import tempfile

        from dlcluster_gym import leaderboard as lb
        from dlcluster_gym.config import safe_load
        from dlcluster_gym.leaderboard.runner import run_cell, save_suite, write_cell

        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "s.yaml").write_text(OK_SCENARIO)
            suite = lb.load_suite(safe_load(SUITE.replace("{d}", tmp)) | {"name": "bad"})
            out = Path(tmp) / "out"
            save_suite(out, suite)
            for cell in suite.cells():
                write_cell(out, *run_cell(cell, suite.name))
            lb.render_leaderboard(out)
            _CACHE["lb"] = _snapshot(out)
    return {f"{prefix}/{k}": v for k, v in _CACHE["lb"].items()}


LB_CELL = "cells/s.fcfs.s1.json"  # the one cell of leaderboard_dir_files()


def edited_json(files: dict[str, bytes], name: str, edit: Callable[[Any], Any]) -> dict:
    """``files`` with the JSON file ``name`` changed in place by ``edit``."""
    import json

    data = json.loads(files[name])
    edit(data)
    return {**files, name: json.dumps(data).encode()}
