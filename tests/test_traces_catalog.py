"""The trace catalog and `dlcluster traces list / fetch / check`, offline: fetches come from
folders and ``file://`` URLs built here from small files (and from the real trace root when
there is one), checked file by file against the catalog's sha256."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import TRACES, needs_traces

from dlcluster_gym import traces_catalog as tc
from dlcluster_gym.cli import main
from dlcluster_gym.config import configs_dir
from dlcluster_gym.errors import ConfigError, TraceError, UnknownNameError
from dlcluster_gym.workload import traces as tr

COMMIT = "0123456789abcdef0123456789abcdef01234567"
JOBS = b"job_id,submission_time,duration,num_gpu\na,0,3600,1\nb,60,7200,2\nc,120,1800,4\n"
LICENSE = b"Permission is hereby granted, free of charge.\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _entry(path: str, data: bytes, upstream: str, **kw) -> tc.TraceFile:
    return tc.TraceFile(path=path, upstream=upstream, sha256=_sha(data), size=len(data), **kw)


def small_catalog() -> dict[str, tc.TraceSpec]:
    """Two tiny traces: ``demo`` (a 3-job ITP-format CSV and a LICENSE) and ``extra``, which
    needs ``demo``."""
    demo = tc.TraceSpec(
        name="demo", title="three jobs", formats=("itp-raw",), license="MIT",
        repository="owner/demo", commit=COMMIT,
        files=(_entry("demo/LICENSE", LICENSE, "LICENSE"),
               _entry("demo/raw/jobs.csv", JOBS, "data/jobs.csv")),
    )  # fmt: skip
    extra = tc.TraceSpec(
        name="extra", title="one more file", formats=(), license="MIT",
        repository="owner/demo", commit=COMMIT, needs=("demo",),
        files=(_entry("demo/LICENSE", LICENSE, "LICENSE"),
               _entry("demo/extra.csv", b"x\n1\n", "data/extra.csv")),
    )  # fmt: skip
    return {"demo": demo, "extra": extra}


SMALL_FILES = {"demo/LICENSE": LICENSE, "demo/raw/jobs.csv": JOBS, "demo/extra.csv": b"x\n1\n"}


def mirror(root: Path, files: dict[str, bytes] = SMALL_FILES) -> Path:
    """A folder laid out like a trace root."""
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def scratch_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".part")]


@pytest.fixture
def small(monkeypatch):
    """The small catalog in place of the shipped one (for the CLI)."""
    catalog = small_catalog()
    monkeypatch.setattr(tc, "load_catalog", lambda: catalog)
    return catalog


# --------------------------------------------------------------------------- the catalog


def test_the_catalog_covers_every_trace_file_the_package_reads():
    catalog = tc.load_catalog()
    paths = {f.path for spec in catalog.values() for f in spec.files}
    for const in (tr.PHILLY_CSV, tr.TIRESIAS_60JOB_CSV, tr.ELASTICFLOW_PHILLY_CSV):
        assert const in paths, const
    for folder in (tr.ITP_RAW_DIR, tr.ITP_EXTRACTED_DIR, tr.POLLUX_WORKLOAD_DIR,
                   tr.POLLUX_TRACES_DIR):  # fmt: skip
        assert any(p.startswith(folder + "/") for p in paths), folder
    for preset in sorted((configs_dir() / "scenarios").glob("*.yaml")):
        wl = yaml.safe_load(preset.read_text()).get("workload", {})
        if "path" in wl:
            assert wl["path"] in paths, f"{preset.name}: {wl['path']} is not in the catalog"
    # every loader format of a public trace here has a trace, and every trace a license
    formats = {f for spec in catalog.values() for f in spec.formats}
    assert formats == set(tr.TRACE_FORMATS) - {"helios", "alibaba-pai", "generic"}
    for spec in catalog.values():
        assert any(Path(f.path).name in ("LICENSE", "LICENCE") for f in spec.files), spec.name
        assert spec.url.startswith(f"https://github.com/{spec.repository}/tree/{spec.commit}")


def test_the_catalog_holds_hashes_not_data():
    path = tc.catalog_path()
    assert path.stat().st_size < 64_000  # the traces themselves are about 13 MB
    catalog = tc.read_catalog(path)
    assert sum(spec.size for spec in catalog.values()) > 10_000_000
    assert tc.select(["pollux-workloads"]) == [catalog["pollux-workloads"],
                                               catalog["pollux-measurements"]]  # fmt: skip
    assert tc.select(["all"]) == list(catalog.values())
    with pytest.raises(UnknownNameError, match="unknown trace 'nope'; valid traces: "):
        tc.select(["nope"])


def test_a_bad_catalog_is_a_clear_error(tmp_path):
    bad = tmp_path / "catalog.yaml"
    bad.write_text("traces:\n  x: {title: t, formats: [csv], license: MIT}\n")
    with pytest.raises(ConfigError) as err:
        tc.read_catalog(bad)
    assert str(err.value) == (
        f"{bad}: trace 'x': formats: unknown trace format(s) ['csv']; known: "
        f"{', '.join(tr.TRACE_FORMATS)}; repository: Field required; commit: Field required; "
        "files: Field required"
    )


@pytest.mark.traces
@needs_traces
def test_the_catalog_matches_the_real_trace_root():
    """The recorded hashes and sizes are those of the trace root's files."""
    results = tc.check(TRACES, tc.load_catalog().values())
    assert len(results) > 90
    assert [r.describe() for r in results if not r.ok] == []


# --------------------------------------------------------------------------- fetch


@pytest.mark.parametrize("as_url", [False, True], ids=["folder", "file-url"])
def test_fetch_from_a_copy_checks_and_keeps(tmp_path, as_url):
    src = mirror(tmp_path / "src")
    source = src.as_uri() if as_url else str(src)
    dest = tmp_path / "root"
    catalog = small_catalog()
    done = tc.fetch(tc.select(["extra"], catalog), dest, source)
    assert sorted((d.path, d.action) for d in done) == [
        ("demo/LICENSE", "fetched"), ("demo/extra.csv", "fetched"),
        ("demo/raw/jobs.csv", "fetched"),
    ]  # fmt: skip
    assert all((dest / p).read_bytes() == data for p, data in SMALL_FILES.items())
    assert scratch_files(dest) == []
    jobs = tr.load_trace("itp-raw", "demo/raw/jobs.csv", traces_dir=dest)
    assert list(jobs.num_gpus) == [1, 2, 4]
    # a second fetch keeps what is there; a damaged file is fetched again
    (dest / "demo/raw/jobs.csv").write_bytes(JOBS.replace(b"3600", b"3601"))
    again = {d.path: d.action for d in tc.fetch(catalog.values(), dest, source)}
    assert again == {"demo/LICENSE": "kept", "demo/raw/jobs.csv": "replaced",
                     "demo/extra.csv": "kept"}  # fmt: skip
    assert (dest / "demo/raw/jobs.csv").read_bytes() == JOBS


@pytest.mark.parametrize("as_url", [False, True], ids=["folder", "file-url"])
def test_a_mismatch_names_the_file_and_both_hashes_and_writes_nothing(tmp_path, as_url):
    changed = JOBS.replace(b"7200", b"7300")
    src = mirror(tmp_path / "src", {**SMALL_FILES, "demo/raw/jobs.csv": changed})
    dest = tmp_path / "root"
    (dest / "demo").mkdir(parents=True)
    (dest / "demo/raw").mkdir()
    with pytest.raises(TraceError) as err:
        tc.fetch(tc.select(["demo"], small_catalog()), dest, src.as_uri() if as_url else str(src))
    msg = str(err.value)
    assert msg.startswith("demo/raw/jobs.csv (from ")
    assert f"sha256 mismatch: expected {_sha(JOBS)}, got {_sha(changed)}" in msg
    assert f"nothing was written to {dest / 'demo/raw/jobs.csv'}" in msg
    assert not (dest / "demo/raw/jobs.csv").exists() and scratch_files(tmp_path) == []
    assert (dest / "demo/LICENSE").read_bytes() == LICENSE  # the files before it are kept


def test_a_file_the_source_lacks_is_named(tmp_path):
    src = mirror(tmp_path / "src", {"demo/LICENSE": LICENSE})
    with pytest.raises(TraceError, match=r"src/demo/raw/jobs.csv: not found"):
        tc.fetch(tc.select(["demo"], small_catalog()), tmp_path / "root", str(src))
    with pytest.raises(TraceError, match="not a folder, nor a URL"):
        tc.fetch(small_catalog().values(), tmp_path / "root", str(tmp_path / "nowhere"))
    with pytest.raises(TraceError, match=r"demo/raw/jobs.csv: cannot be read"):
        tc.fetch(small_catalog().values(), tmp_path / "root", src.as_uri())


def _upstream(tmp_path: Path, members: dict[str, bytes]) -> tuple[Path, tc.TraceSpec]:
    """A stand-in for the upstream host: OWNER/REPO/COMMIT/PATH files under a folder, with a
    .tar.gz that holds ``members``, and a trace whose CSV comes from that archive."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = buf.getvalue()
    base = tmp_path / "host"
    repo = base / "owner/demo" / COMMIT
    mirror(repo, {"LICENSE": LICENSE, "data/traces.tar.gz": archive})
    spec = tc.TraceSpec(
        name="demo", title="three jobs", formats=("itp-raw",), license="MIT",
        repository="owner/demo", commit=COMMIT,
        archives={"data/traces.tar.gz": tc.Archive(sha256=_sha(archive), size=len(archive))},
        files=(_entry("demo/LICENSE", LICENSE, "LICENSE"),
               _entry("demo/raw/jobs.csv", JOBS, "jobs.csv", archive="data/traces.tar.gz")),
    )  # fmt: skip
    return base, spec


def test_fetch_from_upstream_reads_files_and_archive_members(tmp_path):
    base, spec = _upstream(tmp_path, {"jobs.csv": JOBS, "other.csv": b"x\n"})
    assert spec.file_url(spec.files[0]) == (
        f"https://raw.githubusercontent.com/owner/demo/{COMMIT}/LICENSE"
    )
    dest = tmp_path / "root"
    done = tc.fetch([spec], dest, upstream_base=base.as_uri())
    assert {d.path: d.action for d in done} == {"demo/LICENSE": "fetched",
                                                "demo/raw/jobs.csv": "fetched"}  # fmt: skip
    assert (dest / "demo/raw/jobs.csv").read_bytes() == JOBS
    assert sorted(p.name for p in dest.rglob("*") if p.is_file()) == ["LICENSE", "jobs.csv"]


def test_an_upstream_archive_that_changed_is_refused(tmp_path):
    base, spec = _upstream(tmp_path, {"jobs.csv": JOBS})
    good = spec.archives["data/traces.tar.gz"].sha256
    other = spec.model_copy(
        update={"archives": {"data/traces.tar.gz": tc.Archive(sha256="0" * 64, size=1)}}
    )
    with pytest.raises(TraceError, match=f"data/traces.tar.gz .*expected {'0' * 64}, got {good}"):
        tc.fetch([other], tmp_path / "root", upstream_base=base.as_uri())
    assert not (tmp_path / "root/demo/raw").exists() and scratch_files(tmp_path) == []


@pytest.mark.traces
@needs_traces
@pytest.mark.parametrize("as_url", [False, True], ids=["folder", "file-url"])
def test_fetch_a_real_trace_from_the_trace_root(tmp_path, as_url):
    """The shipped catalog's hashes against the real files, fetched from a local copy."""
    source = TRACES.resolve().as_uri() if as_url else str(TRACES)
    r = CliRunner().invoke(
        main, ["traces", "fetch", "tiresias", "--to", str(tmp_path), "--from", source, "--quiet"]
    )
    assert r.exit_code == 0, r.output + r.stderr
    assert "tiresias: 3 files under" in r.output and "(3 fetched)" in r.output
    assert (tmp_path / tr.TIRESIAS_60JOB_CSV).read_bytes() == (
        TRACES / tr.TIRESIAS_60JOB_CSV
    ).read_bytes()
    r = CliRunner().invoke(main, ["traces", "check", str(tmp_path)])
    assert r.exit_code == 0 and r.output.startswith("ok   tiresias: 3 files"), r.output


# --------------------------------------------------------------------------- the CLI


def test_traces_list_says_where_each_trace_comes_from():
    r = CliRunner().invoke(main, ["traces", "list"])
    assert r.exit_code == 0, r.output
    for name, spec in tc.load_catalog().items():
        assert f"\n{name}  {spec.title}\n" in "\n" + r.output
        assert spec.url in r.output
    assert "  license    MIT\n" in r.output
    assert "  scenarios  a100-4nic-tor3-itp07, h100-rail-spine2-itp07, itp-cluster01" in r.output
    assert "dlcluster traces fetch NAME --to DIR" in r.output
    rows = json.loads(CliRunner().invoke(main, ["traces", "list", "--format", "json"]).output)
    tiresias = next(row for row in rows if row["name"] == "tiresias")
    assert tiresias["license"] == "Apache-2.0" and tiresias["formats"] == ["tiresias"]
    assert tiresias["bytes"] == sum(f["bytes"] for f in tiresias["files"])
    assert tiresias["files"][1]["url"].endswith("/simulator/60_job.csv")


def test_fetch_and_check_on_the_command_line(tmp_path, small):
    src = mirror(tmp_path / "src")
    dest = tmp_path / "root"
    r = CliRunner().invoke(main, ["traces", "fetch", "demo", "--to", str(dest), "--from", str(src)])
    assert r.exit_code == 0, r.output + r.stderr
    assert f"demo: 2 files under {dest / 'demo'} (2 fetched)" in r.output
    assert f"DLCLUSTER_TRACES={dest}" in r.output
    r = CliRunner().invoke(main, ["traces", "check", str(dest)])
    assert r.exit_code == 0 and r.output.splitlines() == [
        "ok   demo: 2 files, 122 bytes",
        f"-    extra: not here (dlcluster traces fetch extra --to {dest})",
    ], r.output
    (dest / "demo/raw/jobs.csv").write_bytes(JOBS[:-1] + b"8")
    r = CliRunner().invoke(main, ["traces", "check", str(dest), "demo"])
    assert r.exit_code == 1 and r.output.splitlines() == [
        "FAIL demo: 1 of 2 files",
        f"  demo/raw/jobs.csv: sha256 mismatch: expected {_sha(JOBS)}, got "
        f"{_sha(JOBS[:-1] + b'8')}",
    ], r.output


def test_fetch_errors_are_one_line(tmp_path, small):
    src = mirror(tmp_path / "src", {**SMALL_FILES, "demo/LICENSE": b"changed\n"})
    for args, culprit in (
        (["demo", "--to", str(tmp_path / "r"), "--from", str(src)],
         f"demo/LICENSE (from {src}/demo/LICENSE): sha256 mismatch: expected {_sha(LICENSE)}"),
        (["nope", "--to", str(tmp_path / "r")], "unknown trace 'nope'; valid traces: all, demo,"),
        (["demo", "--to", str(src / "demo/LICENSE")], "Invalid value for '--to': Directory"),
    ):  # fmt: skip
        r = CliRunner().invoke(main, ["traces", "fetch", *args])
        lines = r.stderr.splitlines()
        assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
        assert culprit in lines[0], lines[0]
    r = CliRunner().invoke(main, ["traces", "check", str(tmp_path / "r")])
    assert r.exit_code == 2 and "holds no file of the catalog's traces" in r.stderr


def test_traces_alone_prints_its_help():
    r = CliRunner().invoke(main, ["traces"], prog_name="dlcluster")
    assert r.exit_code == 2 and r.stderr.startswith("Usage: dlcluster traces [OPTIONS] COMMAND")
    commands = r.stderr.split("Commands:")[1].split()
    assert {"check", "fetch", "list"} <= set(commands) and "error:" not in r.stderr
