"""The ``dlcluster`` command."""

from __future__ import annotations

import functools
import json
import math
import os
import shlex
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, NoReturn

import click

from dlcluster_gym.config import MAX_SEED
from dlcluster_gym.errors import DLClusterError
from dlcluster_gym.sim.results import SUMMARY_KEYS
from dlcluster_gym.workload.profiles import PROFILE_SOURCES

SUMMARY_ORDER = (*SUMMARY_KEYS, "wall_s")


def _one_line(msg: str) -> str:
    """A multi-line message (a validation error listing fields) as one line."""
    lines = [ln.strip() for ln in str(msg).splitlines() if ln.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else ""
    return f"{lines[0]} {'; '.join(lines[1:])}"


def _fail(msg: str) -> NoReturn:
    click.echo(f"error: {_one_line(msg)}", err=True)
    sys.exit(2)


def _warn_to_stderr(
    message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    click.echo(f"warning: {_one_line(str(message))}", err=True)


class ExplainedError(click.ClickException):
    """An error that takes several lines to explain: what failed first, then each thing found
    wrong and what to do, printed as they are (not joined into one line)."""


# click >= 8.2 raises this for a group called without a command (older clicks print the help
# themselves); its message is the whole help, not an error to squash into one line.
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class _Group(click.Group):
    """Every error a user can cause is one line on stderr and exit code 2, never a traceback:
    the package's own errors, click's usage errors, and a policy's crash (named by the
    engine); an :class:`ExplainedError` (several problems found at once) keeps one line per
    problem, and ``dlcluster``, ``dlcluster list`` or ``dlcluster traces`` alone shows its
    help. SIGTERM/Ctrl-C exit 143/130 with one line. Anything else is a bug: one line and exit
    3 (``DLCLUSTER_DEBUG=1`` shows the traceback)."""

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except NO_ARGS_IS_HELP as exc:  # `dlcluster` alone: the help, where and as click shows it
            text = exc.ctx.get_help() if exc.ctx is not None else exc.format_message()
            click.echo(text, err=True)
            sys.exit(exc.exit_code)
        except ExplainedError as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(2)
        except click.UsageError as exc:
            where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
            _fail(f"{where}{exc.format_message()} (see --help)")
        except click.ClickException as exc:
            _fail(exc.format_message())
        except (click.exceptions.Abort, KeyboardInterrupt) as exc:
            from dlcluster_gym.leaderboard.runner import Terminated

            # click turns KeyboardInterrupt (and our SIGTERM's Terminated) into Abort
            term = isinstance(exc, Terminated) or isinstance(exc.__cause__, Terminated)
            click.echo(
                f"error: {'terminated by SIGTERM' if term else 'interrupted'}; finished work "
                "is kept (a leaderboard run resumes with --resume)",
                err=True,
            )
            sys.exit(143 if term else 130)
        except DLClusterError as exc:
            _fail(str(exc))
        except OSError as exc:  # a path we could not read or write
            _fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))
        except Exception as exc:
            if os.environ.get("DLCLUSTER_DEBUG"):
                raise
            click.echo(
                f"error: internal error {type(exc).__name__}: {_one_line(str(exc))} (a bug; "
                "please report it; DLCLUSTER_DEBUG=1 shows the traceback)",
                err=True,
            )
            sys.exit(3)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_Group)
@click.version_option(package_name="dlcluster-gym")
def main() -> None:
    """Simulate deep-learning cluster schedulers; list presets; inspect the model zoo."""
    warnings.showwarning = _warn_to_stderr


def _fmt(key: str, v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        if key.endswith("_s"):
            return f"{v:,.1f} s ({v / 3600:,.2f} h)" if v >= 3600 else f"{v:,.3f} s"
        return f"{v:.4f}"
    return str(v)


def _progress_bar(enabled: bool, total_hint: str) -> tuple[Any, Any]:
    if not enabled:
        return None, None
    from tqdm import tqdm

    bar = tqdm(
        total=None,
        unit="job",
        desc=total_hint,
        file=sys.stderr,
        mininterval=0.5,
        dynamic_ncols=True,
    )
    state = {"done": -1}

    def update(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
        if done != state["done"]:
            bar.update(done - max(state["done"], 0))
            state["done"] = done

    return bar, update


def check_writable(path: Path, option: str, *, directory: bool) -> None:
    """Fail before a run, not after it, when ``path`` cannot be written: the nearest existing
    ancestor must be a writable directory, and ``path`` itself not the wrong kind of thing."""
    if directory and path.exists() and not path.is_dir():
        _fail(f"{option} {path}: exists and is not a directory")
    if not directory and path.is_dir():
        _fail(f"{option} {path}: is a directory; give a file path")
    parent = path if directory and path.exists() else path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        _fail(f"{option} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        _fail(f"{option} {path}: not writable (no write permission in {parent})")


def prepare_out_file(path: Path, option: str) -> None:
    """``check_writable``, then create ``path``'s folder and a scratch file in it: some places
    pass the permission check and still refuse files (``/proc``, read-only mounts)."""
    check_writable(path, option, directory=False)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}."):
            pass
    except OSError as err:
        _fail(f"{option} {path}: cannot write there ({err.strerror or err})")


# What `simulate --out` and `report` write into a run folder (what --overwrite deletes).
RUN_FILES = (
    "metrics.json", "results.json", "jobs.csv", "jobs.parquet", "timeseries.csv",
    "events.jsonl", "report.png", "report.md", "report.html",
)  # fmt: skip


def _check_time_limit(value: float | None, option: str) -> None:
    """An option in seconds: a finite number > 0 (None: not given)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        _fail(f"{option} {value:g}: give a finite number of seconds > 0")


def _check_run_folder(out: Path, events: Path | None, overwrite: bool) -> None:
    """``--out``: not the --events file, and empty unless ``--overwrite`` (so that one folder
    never mixes the files of two runs)."""
    if events is not None:
        if events.resolve() == out.resolve():
            _fail(f"--events {events}: is the --out folder; give the event log its own file name")
        if events.resolve().parent == out.resolve() and events.name in RUN_FILES[:5]:
            _fail(f"--events {events}: --out writes {events.name} there itself; give the event "
                  "log another name (e.g. events.jsonl)")  # fmt: skip
    if overwrite or not out.is_dir():
        return
    held = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    if held:
        _fail(
            f"--out {out}: not empty (holds {len(held)} file(s), e.g. {held[0]}); its files "
            "would mix with this run's: give a new or empty folder, or --overwrite to replace "
            "an earlier run's files"
        )


def _clear_run_files(out: Path) -> None:
    """``--overwrite``: delete what an earlier run or report wrote into ``out``."""
    for name in RUN_FILES:
        (out / name).unlink(missing_ok=True)


BIG_RUN_JOBS = 100_000  # from here on, say up front that a run will take a while
JOBS_PER_S = 14_000  # fcfs, philly-1024gpu (README "Speed" table); dally ~6,000, tiresias far less


def _estimate(scenario: str, seed: int | None) -> None:
    """A note on stderr before a big synthetic run: its size and a rough duration."""
    from dlcluster_gym.config import load_scenario

    cfg = load_scenario(scenario, seed=seed)
    n = getattr(cfg.workload, "num_jobs", None)
    if cfg.workload.max_jobs is not None and n is not None:
        n = min(n, cfg.workload.max_jobs)
    if n is not None and n >= BIG_RUN_JOBS:
        click.echo(
            f"note: a big run: {n:,} jobs on {cfg.cluster.num_gpus:,} GPUs; at about "
            f"{JOBS_PER_S:,} jobs/s (fcfs; most policies are slower) it takes "
            f"{n / JOBS_PER_S / 60:,.0f} min or more",
            err=True,
        )


def _note_unused_traces_dir(scenario: str, seed: int | None, traces_dir: Path | None) -> None:
    """A note on stderr when --traces-dir cannot matter: the scenario reads no trace file, or
    only by absolute paths (the trace root applies to relative ones)."""
    if traces_dir is None:
        return
    from dlcluster_gym.config import load_scenario

    w = load_scenario(scenario, seed=seed).workload
    paths = [p for p in (getattr(w, "path", None), getattr(w, "task_path", None)) if p]
    if any(not Path(p).expanduser().is_absolute() for p in paths):
        return
    why = "reads no trace file" if not paths else "reads its trace by an absolute path"
    missing = "" if traces_dir.is_dir() else f"; {traces_dir} does not exist either"
    click.echo(
        f"note: --traces-dir {traces_dir} is not used: scenario {scenario!r} {why}{missing}",
        err=True,
    )


@main.command()
@click.option("--scenario", required=True, help="Preset name (dlcluster list scenarios) or YAML.")
@click.option(
    "--policy",
    default="fcfs",
    show_default=True,
    help="Registered name (dlcluster list policies) or package.module:Class.",
)
@click.option(
    "--policy-arg",
    "policy_args",
    multiple=True,
    metavar="KEY=VALUE",
    help="Policy parameter (repeatable).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=MAX_SEED),
    default=None,
    help="Overrides the scenario's seed.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for metrics.json, results.json, jobs.csv, jobs.parquet, timeseries.csv "
    "(and events.jsonl with --events); a new or empty one (see --overwrite).",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Let --out be a folder that is not empty: the files an earlier run or report wrote "
    "there are deleted first, other files are left alone.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--events",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the event log here (one JSON object per line).",
)
@click.option(
    "--traces-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Trace root (default: $DLCLUSTER_TRACES, else ../shared/traces).",
)
@click.option(
    "--time-limit",
    "time_limit_s",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Stop with an error once the run has taken this many seconds of wall-clock time "
    "(loading included), even inside a policy's schedule() that never returns. Default: no "
    "limit.",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def simulate(
    scenario: str,
    policy: str,
    policy_args: tuple[str, ...],
    seed: int | None,
    out: Path | None,
    overwrite: bool,
    fmt: str,
    events: Path | None,
    traces_dir: Path | None,
    time_limit_s: float | None,
    quiet: bool,
) -> None:
    """Run one policy on one scenario and print its summary.

    --time-limit SECONDS bounds the run's wall-clock time: past it the run stops with a
    one-line error naming the policy, the simulated time and what it was deciding (on POSIX
    a timer signal interrupts even a schedule() that never returns)."""
    from dlcluster_gym.api import simulate as run
    from dlcluster_gym.scheduler import parse_policy_args
    from dlcluster_gym.sim.results import _jsonable, write_events

    params = parse_policy_args(policy_args)
    _check_time_limit(time_limit_s, "--time-limit")
    if out is not None:
        check_writable(out, "--out", directory=True)
    if events is not None:
        check_writable(events, "--events", directory=False)
    if out is not None:
        _check_run_folder(out, events, overwrite)
    _estimate(scenario, seed)
    _note_unused_traces_dir(scenario, seed, traces_dir)
    bar, update = _progress_bar(not quiet and sys.stderr.isatty(), f"{policy} on {scenario}")
    try:
        res = run(
            scenario,
            policy,
            seed,
            policy_params=params,
            traces_dir=traces_dir,
            record_events=events is not None,
            progress=update,
            time_limit_s=time_limit_s,
        )
    finally:
        if bar is not None:
            bar.close()
    if out is not None:
        if overwrite:
            _clear_run_files(out)
        res.save(out)
    if events is not None:
        write_events(events, res.events or [])
    metrics = res.metrics()
    unfinished = int(metrics.get("jobs_unfinished", 0) or 0)
    if unfinished:
        total = int(metrics.get("jobs_total", 0) or 0)
        click.echo(
            f"warning: {unfinished} of {total} job(s) did not finish under policy "
            f"{res.policy!r}"
            + (" (it never started a job)" if unfinished == total else "")
            + "; JCT metrics cover the finished jobs only",
            err=True,
        )
    if fmt == "json":
        click.echo(json.dumps(_jsonable(metrics)))
        return
    from rich.console import Console
    from rich.table import Table

    label = {"bound": " (BOUND, not a schedule)", "clairvoyant": " (CLAIRVOYANT: not deployable)"}
    title = f"{res.policy}{label.get(res.kind, '')} on {res.scenario}"
    if unfinished:
        title += f" - {unfinished} JOB(S) UNFINISHED"
    table = Table(title=f"{title}, seed {res.seed}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k in SUMMARY_ORDER:
        if k in metrics:
            bad = k == "jobs_unfinished" and unfinished
            table.add_row(k, _fmt(k, metrics[k]), style="bold red" if bad else None)
    Console().print(table)
    if out is not None:
        click.echo(f"results written to {out}")


# `dlcluster list` alone shows its help (what can be listed), as `dlcluster` alone does; 88
# columns keep the usage line, with every kind, on one line
@main.command(name="list", no_args_is_help=True, context_settings={"terminal_width": 88})
@click.argument(
    "what",
    type=click.Choice(["policies", "scenarios", "models", "clusters", "suites", "splits"]),
)
def list_cmd(what: str) -> None:
    """List policies, scenarios, models, clusters, suites or splits, one per line with a
    description.

    Policies also show their kind with default parameters: deployable (uses what a real
    scheduler observes), clairvoyant (reads job lengths or future arrivals) or bound.
    Scenarios, clusters, suites and splits (named train/validation/test sets of scenarios
    and seeds: `dlcluster evaluate --split`, `dlcluster train --split`) are the YAML presets
    of the configs folder: $DLCLUSTER_CONFIGS when set, else the presets that ship with the
    package."""
    rows: list[tuple[str, str]]
    if what == "policies":
        from dlcluster_gym.leaderboard.suite import entrant_kind
        from dlcluster_gym.scheduler import KINDS, policies

        kind_width = max(len(k) for k in KINDS)
        rows = [
            (n, f"{entrant_kind(n):<{kind_width}}  {s.description}") for n, s in policies().items()
        ]
    elif what == "models":
        from dlcluster_gym.workload.models import MODEL_ZOO

        rows = [
            (
                n,
                f"{p.family}, {p.params_m:g}M params, {p.skew} skew, {p.parallelism} "
                f"parallel, {p.compute_s * 1e3:g} ms/iter compute",
            )
            for n, p in sorted(MODEL_ZOO.items())
        ]
    else:
        from dlcluster_gym.config import list_presets

        _check_preset_folder(what)
        rows = list(list_presets(what).items())
    width = max((len(n) for n, _ in rows), default=0)
    for name, desc in rows:
        click.echo(f"{name:<{width}}  {desc}")


def _check_preset_folder(kind: str) -> None:
    """Raise :class:`ExplainedError` when the ``kind`` preset folder is missing or holds a
    preset file that cannot be read or is not a mapping, naming every such file."""
    from dlcluster_gym.config import configs_dir, load_yaml_file

    root = configs_dir()
    folder = root / kind
    ctx = click.get_current_context(silent=True)
    cmd = f"{ctx.command_path} {kind}" if ctx is not None else f"list {kind}"
    if os.environ.get("DLCLUSTER_CONFIGS"):
        where = f"Presets are read from {root} (set by DLCLUSTER_CONFIGS)"
    else:
        where = f"Presets are read from {root} (shipped with the package)"
    if not folder.is_dir():
        fix = (
            "point DLCLUSTER_CONFIGS at a folder that holds clusters/, scenarios/ and suites/, "
            "or unset it to use the presets shipped with the package"
            if os.environ.get("DLCLUSTER_CONFIGS")
            else "the installation is damaged: reinstall the package"
        )
        raise ExplainedError(f"{cmd}: no {kind} folder at {folder}\n{where}: {fix}.")
    problems: list[str] = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            data = load_yaml_file(path)
        except DLClusterError as exc:  # names the file, the line and the problem
            problems.append(str(exc))
            continue
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
            continue
        if not isinstance(data, dict):
            held = "nothing" if data is None else f"a {type(data).__name__}"
            problems.append(f"{path}: holds {held}, not a mapping (description: ... and the rest)")
    if problems:
        many = len(problems) > 1
        head = f"{cmd}: {len(problems)} preset file{'s' if many else ''} cannot be read:"
        tail = f"{where}: fix or remove {'these files' if many else 'it'}."
        raise ExplainedError("\n".join([head, *(f"  {p}" for p in problems), tail]))


@main.group(name="traces")
def traces_cmd() -> None:
    """The public traces that trace scenarios read: list them, fetch them into a trace root,
    check a folder of them (every file by size and sha256)."""


@traces_cmd.command(name="list")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def traces_list(fmt: str) -> None:
    """Each trace: what it holds, the trace formats that read it, its files and size, its
    license and upstream source, and the scenario presets that read it."""
    from rich.filesize import decimal

    from dlcluster_gym import traces_catalog as tc

    catalog = tc.load_catalog()
    readers = tc.scenario_readers(catalog)
    if fmt == "json":
        out = [
            {
                **spec.model_dump(mode="json", exclude={"files", "archives"}),
                "url": spec.url,
                "folder": spec.folder,
                "bytes": spec.size,
                "scenarios": readers[name],
                "archives": {a: spec.archive_url(a) for a in spec.archives},
                "files": [
                    {"path": f.path, "sha256": f.sha256, "bytes": f.size, "url": spec.file_url(f)}
                    for f in spec.files
                ],
            }
            for name, spec in catalog.items()
        ]
        click.echo(json.dumps(out, indent=2))
        return
    for i, (name, spec) in enumerate(catalog.items()):
        rows = [
            ("formats", ", ".join(spec.formats) or "none (measurements, not jobs)"),
            ("files", f"{len(spec.files)}, {decimal(spec.size)}, under {spec.folder}/"),
            ("license", spec.license + (f"; {spec.note}" if spec.note else "")),
            ("upstream", spec.url + (f" ({', '.join(spec.archives)})" if spec.archives else "")),
            *([("needs", ", ".join(spec.needs))] if spec.needs else []),
            ("scenarios", ", ".join(readers[name]) or "none (read by code and tests)"),
        ]
        click.echo(("\n" if i else "") + f"{name}  {spec.title}")
        for key, value in rows:
            click.echo(f"  {key:<10} {value}")
    click.echo(
        "\nGet one with `dlcluster traces fetch NAME --to DIR`, then point the package at DIR: "
        "DLCLUSTER_TRACES=DIR or --traces-dir DIR."
    )


@traces_cmd.command(name="fetch")
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@click.option(
    "--to",
    "dest",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The trace root to put the files in (created if needed).",
)
@click.option(
    "--from",
    "source",
    default=None,
    metavar="URL_OR_DIR",
    help="A folder or URL (file://, https://) laid out like a trace root, instead of the "
    "upstream repositories.",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def traces_fetch(names: tuple[str, ...], dest: Path, source: str | None, quiet: bool) -> None:
    """Download traces into the trace root --to and check every file's sha256. NAME is a name
    of `dlcluster traces list` (or `all`); the traces it needs come with it. Files already
    there with the right hash are kept; a download that does not match is not written."""
    from dlcluster_gym import traces_catalog as tc

    specs = tc.select(names)
    check_writable(dest, "--to", directory=True)
    done = tc.fetch(specs, dest, source, progress=not quiet)
    action = {d.path: d.action for d in done}  # a file two traces share is fetched once
    for spec in specs:
        mine = [action[f.path] for f in spec.files]
        counts = ", ".join(
            f"{mine.count(a)} {a}" for a in ("fetched", "replaced", "kept") if a in mine
        )
        click.echo(f"{spec.name}: {len(mine)} files under {dest / spec.folder} ({counts})")
    click.echo(f"Point the package at it: DLCLUSTER_TRACES={dest} or --traces-dir {dest}")


@traces_cmd.command(name="check")
@click.argument("root", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("names", nargs=-1, metavar="[NAME]...")
def traces_check(root: Path, names: tuple[str, ...]) -> None:
    """Check a trace root against the catalog, every file by size and sha256: the traces NAME,
    or every trace that ROOT holds files of. Exit code 1 when a file is missing or differs."""
    from rich.filesize import decimal

    from dlcluster_gym import traces_catalog as tc

    specs = tc.select(names) if names else tc.present(root)
    if not specs:
        raise DLClusterError(
            f"{root} holds no file of the catalog's traces (dlcluster traces list); get one with "
            f"dlcluster traces fetch NAME --to {root}"
        )
    results = tc.check(root, specs)
    failed = False
    for spec in specs:
        mine = [r for r in results if r.trace == spec.name]
        wrong = [r for r in mine if not r.ok]
        failed = failed or bool(wrong)
        if wrong:
            click.echo(f"FAIL {spec.name}: {len(wrong)} of {len(mine)} files")
            for r in wrong:
                click.echo(f"  {r.describe()}")
        else:
            click.echo(f"ok   {spec.name}: {len(mine)} files, {decimal(spec.size)}")
    if not names:
        shown = {s.name for s in specs}
        for name in tc.load_catalog():
            if name not in shown:
                click.echo(f"-    {name}: not here (dlcluster traces fetch {name} --to {root})")
    if failed:
        sys.exit(1)


@main.command()
@click.option(
    "--overheads",
    is_flag=True,
    help="Communication overhead (% of compute) at Dally's reference placements.",
)
@click.option(
    "--profile",
    "source",
    type=click.Choice(sorted(PROFILE_SOURCES)),
    default=None,
    help="Model profile source (default: physics; dally-table1 with --overheads; "
    "cassini-testbed shows the testbed profiles on the cassini-testbed cluster).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def models(overheads: bool, source: str | None, fmt: str) -> None:
    """The model zoo; with --overheads, the communication overhead of every model at Dally's
    three reference placements (8 GPUs in a machine / a rack / across racks on the Dally
    cluster) under a profile source; dally-table1 is Dally Table 1."""
    from dlcluster_gym.perf.network import DALLY_TABLE1, overhead_table
    from dlcluster_gym.workload.profiles import model_profile

    if not overheads:  # each model as the profile source gives it
        from dlcluster_gym.workload.models import MODEL_ZOO

        profiles = {n: model_profile(n, source or "physics") for n in sorted(MODEL_ZOO)}
        data: Any = {
            n: {
                "params_m": p.params_m,
                "skew": p.skew,
                "parallelism": p.parallelism,
                "compute_s": p.compute_s,
                "tier_scale": list(p.comm.tier_scale),
                "source": p.source,
            }
            for n, p in profiles.items()
        }
        if fmt == "json":
            click.echo(json.dumps(data))
        else:
            for n, d in data.items():
                scale = d["tier_scale"]
                scaled = (
                    "" if scale == [1.0, 1.0, 1.0] else " x" + "/".join(f"{x:g}" for x in scale)
                )
                click.echo(
                    f"{n:<16} {d['params_m']:>9g}M  {d['skew']:<4} {d['parallelism']:<5} "
                    f"{d['compute_s'] * 1e3:8.1f} ms{scaled}  {d['source']}"
                )
        return
    source = source or "dally-table1"
    if source == "cassini-testbed":
        _testbed_overheads(fmt)
        return
    table = overhead_table(source)
    if fmt == "json":
        click.echo(json.dumps(table))
        return
    from rich.console import Console
    from rich.table import Table

    paper = source == "dally-table1"
    title = f"Communication overhead, % of compute, profile {source}" + (
        " (ours / Dally Table 1)" if paper else ""
    )
    t = Table(title=title)
    t.add_column("model")
    for tier in ("machine", "rack", "network"):
        t.add_column(tier, justify="right")
    for model, row in table.items():
        cells = []
        for k in ("machine", "rack", "network"):
            ref = DALLY_TABLE1.get(model, {}).get(k) if paper else None
            cells.append(f"{row[k]:.1f}" + (f" / {ref:g}" if ref is not None else ""))
        t.add_row(model, *cells)
    Console().print(t)


def _testbed_overheads(fmt: str) -> None:
    """``models --overheads --profile cassini-testbed``: the testbed profiles as the engine
    runs them, on the ``cassini-testbed`` cluster."""
    from dlcluster_gym.perf.testbed import TESTBED_PLACEMENTS, testbed_overheads

    table = testbed_overheads()
    if fmt == "json":
        click.echo(json.dumps(table))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(
        title="Testbed profiles (configs/profiles/cassini-testbed.yaml) as the engine runs them "
        "on cluster cassini-testbed: exposed comm. % of compute, job alone, on 2 servers in "
        "1 rack (rack-2), 2 racks (net-2), 12 servers in 6 racks (net-12)"
    )
    for col in ("model", "batch", "iter ms", "Up ms", "Gb/iter", "compute ms"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for label in TESTBED_PLACEMENTS:
        t.add_column(label, justify="right")
    for model, r in table.items():
        t.add_row(
            model,
            f"{r['ref_batch']:.0f}",
            f"{r['iteration_ms']:.1f}",
            f"{r['up_ms']:.1f}",
            f"{r['gbit']:.2f}",
            f"{r['compute_ms']:.1f}",
            *(f"{r[label]:.1f}" for label in TESTBED_PLACEMENTS),
        )
    Console().print(t)


@main.command()
@click.option(
    "--jobs",
    "jobs_spec",
    required=True,
    metavar="MODEL:BATCH[,MODEL:BATCH...]",
    help="Jobs sharing the link, batch size per GPU (a bare MODEL uses its reference batch).",
)
@click.option(
    "--link-gbps",
    type=float,
    default=50.0,
    show_default=True,
    help="Capacity of the shared link in Gb/s (the Cassini testbed's NICs: 50).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def compat(jobs_spec: str, link_gbps: float, fmt: str) -> None:
    """Cassini compatibility score and time shifts of jobs sharing one link.

    Jobs are Cassini Table 4.2 models profiled on its testbed (perf/testbed.py). JSON output:
    {"score": float, "shifts_ms": {"<model>:<batch>": ms}, "perimeter_ms": float}; the first
    job is the reference (0 ms) and a repeated MODEL:BATCH gets the suffix #2, #3, ...
    """
    from dlcluster_gym.perf.testbed import (
        get_profiled_model,
        job_keys,
        link_report,
        parse_job_specs,
    )

    specs = parse_job_specs(jobs_spec)
    report = link_report(specs, link_gbps)
    if fmt == "json":
        click.echo(json.dumps(report))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"Jobs sharing one {link_gbps:g} Gb/s link")
    for col in ("job", "iteration ms", "Up ms", "peak Gb/s", "time shift ms"):
        t.add_column(col, justify="left" if col == "job" else "right")
    for spec, key in zip(specs, job_keys(specs), strict=True):
        m = get_profiled_model(spec.model)
        t.add_row(
            key,
            f"{m.iteration_ms(spec.batch):.1f}",
            f"{m.up_ms:.1f}",
            f"{m.peak_gbps:g}",
            f"{report['shifts_ms'][key]:g}",
        )
    Console().print(t)
    click.echo(
        f"compatibility score {report['score']:.3f} (1 = fully compatible); "
        f"unified circle {report['perimeter_ms']:g} ms"
    )


@main.command()
@click.option("--suite", default=None, help="Suite preset (dlcluster list suites) or YAML file.")
@click.option("--backend", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes (default: all cores; more than the cores is capped, with a warning).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Run directory (default: leaderboards/SUITE).",
)
@click.option("--resume", is_flag=True, help="Skip cells already finished in --out.")
@click.option("--ray-address", default=None, help="Ray cluster address (default: local Ray).")
@click.option(
    "--ray-timeout", type=float, default=30.0, show_default=True, help="Seconds to connect."
)
@click.option(
    "--time-limit",
    "time_limit_s",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Wall-clock seconds one cell may take (default: the suite's time_limit_s, else no "
    "limit); a cell past it is a failed cell and the run goes on.",
)
@click.option(
    "--verify",
    "verify_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Re-run the rows of this leaderboard run and check the metrics are identical.",
)
@click.option("--row", "row_id", default=None, help="With --verify: only this row id.")
@click.option(
    "--traces-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Trace root (default: $DLCLUSTER_TRACES, else ../shared/traces).",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def leaderboard(
    suite: str | None,
    backend: str,
    workers: int | None,
    out: Path | None,
    resume: bool,
    ray_address: str | None,
    ray_timeout: float,
    time_limit_s: float | None,
    verify_dir: Path | None,
    row_id: str | None,
    traces_dir: Path | None,
    quiet: bool,
) -> None:
    """Run a suite of policies x scenarios x seeds and render the leaderboard, or --verify one.

    --time-limit SECONDS (or the suite's time_limit_s) bounds each cell's wall-clock time: a
    cell past it fails with a one-line reason and the other cells go on."""
    from dlcluster_gym import leaderboard as lb

    _check_time_limit(ray_timeout, "--ray-timeout")
    _check_time_limit(time_limit_s, "--time-limit")
    if verify_dir is not None and suite is not None:
        _fail(f"give --suite {suite} (run a suite) or --verify {verify_dir} (replay a run), not "
              "both")  # fmt: skip
    if row_id is not None and verify_dir is None:
        _fail(f"--row {row_id}: replays one row of a run; it needs --verify RESULTS_DIR")
    if verify_dir is not None:
        checks = lb.verify(verify_dir, row_id, traces_dir)
        bad = [c for c in checks if not c.ok]
        for c in checks:
            click.echo(f"{'ok  ' if c.ok else 'DIFF'} {c.id}" + (f"  ({c.note})" if c.note else ""))
            for d in c.differences:
                click.echo(f"       {d}")
        rows = [c for c in checks if c.what == "row"]
        files = [c for c in checks if c.what == "file"]
        summary = f"{sum(c.ok for c in rows)} of {len(rows)} row(s) reproduced exactly"
        if files:
            same = sum(c.ok and c.checked for c in files)
            skipped = sum(not c.checked for c in files)
            summary += f"; {same} of {len(files)} file(s) match the cells" + (
                f" ({skipped} not checked)" if skipped else ""
            )
        click.echo(summary)
        sys.exit(1 if bad else 0)
    if suite is None:
        _fail("give --suite NAME|FILE (or --verify RESULTS_DIR)")
    s = lb.load_suite(suite)
    for note in s.skipped:
        click.echo(f"note: left out {note}", err=True)
    out = out or Path("leaderboards") / s.name
    check_writable(out, "--out", directory=True)
    from dlcluster_gym.leaderboard.runner import CELLS_DIR, SUITE_FILE

    if out.is_dir() and not (out / SUITE_FILE).exists() and not (out / CELLS_DIR).exists():
        held = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
        if held:
            _fail(
                f"--out {out}: not empty and not a leaderboard run (holds {held[0]}); give a "
                "new or empty folder, or the folder of a run of this suite with --resume"
            )
    t0 = time.perf_counter()
    rows = lb.run_suite(
        s,
        out,
        backend=backend,
        workers=workers,
        resume=resume,
        traces_dir=traces_dir,
        ray_address=ray_address,
        ray_timeout_s=ray_timeout,
        progress=not quiet,
        time_limit_s=time_limit_s,
    )
    paths = lb.render_leaderboard(out)
    errors = [r for r in rows if r["status"] == "error"]
    click.echo(
        f"{len(rows)} cells ({len(errors)} failed) in {time.perf_counter() - t0:.1f} s; "
        f"leaderboard: {paths['md']}, {paths['html']}"
    )
    for r in errors:
        click.echo(f"error: {r['id']}: {str(r['reason']).splitlines()[0]}", err=True)
    sys.exit(1 if errors else 0)


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to write report.png/.md/.html (default: RUN_DIR).",
)
def report(run_dir: Path, out: Path | None) -> None:
    """Plots and tables for one `dlcluster simulate --out` run (or a leaderboard run)."""
    from dlcluster_gym import leaderboard as lb

    if (run_dir / "suite.json").is_file():
        paths = lb.render_leaderboard(run_dir)
        click.echo(f"leaderboard: {paths['md']}, {paths['html']}")
        return
    paths = lb.report_run(run_dir, out)
    click.echo(f"report: {paths['md']}, {paths['html']}, {paths['png']}")


@main.command()
@click.option(
    "--agent",
    "agent",
    type=click.Choice(["placement", "delay-timer", "scheduler"]),
    required=True,
    help="Which agent to train.",
)
@click.option(
    "--config",
    "config_file",
    default=None,
    help="Agent config YAML (default: configs/agents/<agent>.yaml).",
)
@click.option(
    "--split",
    default=None,
    metavar="NAME",
    help="Train on this named split's train part and validate on its validation part "
    "(dlcluster list splits), instead of the config's train and validation scenarios and "
    "seeds; its test part becomes the config's evaluation set.",
)
@click.option("--timesteps", type=click.IntRange(min=1), default=None, help="Total env steps.")
@click.option("--n-envs", type=click.IntRange(min=1), default=None, help="Parallel envs.")
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=2**32 - 1),
    default=None,
    help="Training seed (default: the config's).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Output directory (default: runs/agents/<agent>).",
)
@click.option(
    "--resume",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Continue training from this checkpoint (e.g. OUT/last.zip) up to --timesteps.",
)
@click.option(
    "--traces-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Trace root (default: $DLCLUSTER_TRACES, else ../shared/traces).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def train(
    agent: str,
    config_file: str | None,
    split: str | None,
    timesteps: int | None,
    n_envs: int | None,
    seed: int | None,
    out: Path | None,
    resume: Path | None,
    traces_dir: Path | None,
    quiet: bool,
) -> None:
    """Train a learned agent (needs the `agents` extra: torch, stable-baselines3).

    --split NAME replaces the config's training scenarios and seeds by the split's train
    part (its seeds, together one range lo-hi, become train.seeds [lo, hi + 1)), its
    validation scenarios and seeds by the validation part, and its evaluation set by the test
    part; the run records the split's name (config.yaml, command.txt)."""
    agents_train = _import_agents("dlcluster_gym.agents.train")
    from dlcluster_gym.agents.config import DEFAULT_CONFIGS, load_agent_config

    cfg = load_agent_config(config_file or DEFAULT_CONFIGS[agent], split=split)
    if cfg.agent != agent:
        _fail(f"config {config_file} is for the {cfg.agent} agent, not {agent}")
    rollout = int(getattr(cfg.ppo, "n_steps", 1)) * int(n_envs or cfg.train.n_envs)
    if timesteps is not None and timesteps % rollout:
        _fail(
            f"--timesteps {timesteps}: {cfg.algorithm} trains whole rollouts of n_steps "
            f"{cfg.ppo.n_steps} x {n_envs or cfg.train.n_envs} env(s) = {rollout:,} steps, so it "
            f"would train {-(-timesteps // rollout) * rollout:,}; give a multiple of {rollout:,}"
            " (or change ppo.n_steps in the config, or --n-envs)"
        )
    if timesteps is None and cfg.train.timesteps % rollout:
        click.echo(
            f"note: train.timesteps {cfg.train.timesteps:,} is not a multiple of one rollout "
            f"({rollout:,} steps): {cfg.algorithm} trains "
            f"{-(-cfg.train.timesteps // rollout) * rollout:,} steps",
            err=True,
        )
    _check_train_traces(cfg, config_file or DEFAULT_CONFIGS[agent], traces_dir)
    out = out or Path("runs") / "agents" / agent
    command = f"dlcluster train --agent {agent}" + "".join(
        f" --{k.replace('_', '-')} {v}"
        for k, v in (
            ("config", config_file),
            ("split", split),
            ("timesteps", timesteps),
            ("n_envs", n_envs),
            ("seed", seed),
            ("out", out),
            ("resume", resume),
        )
        if v is not None
    )
    res = agents_train.train(
        cfg,
        out,
        timesteps=timesteps,
        n_envs=n_envs,
        seed=seed,
        resume=resume,
        progress_bar=not quiet and sys.stderr.isatty(),
        command=command,
        config_source=str(config_file or f"configs/agents/{DEFAULT_CONFIGS[agent]}.yaml"),
        traces_dir=traces_dir,
    )
    click.echo(
        f"{res.timesteps} steps in {res.wall_s:.0f} s; best validation score "
        f"{res.best_score:.4f} x {cfg.validation.reference} (avg JCT ratio); "
        f"best: {res.best}, last: {res.last}, curve: {res.out / 'curve.png'}, "
        f"TensorBoard: {res.out / 'tb'}"
    )


def _check_train_traces(cfg: Any, source: str, traces_dir: Path | None) -> None:
    """Stop when a training scenario needs the absent traces (``train_specs``); a note for
    each validation scenario skipped for the same reason."""
    from dlcluster_gym.agents.envs import available, train_specs

    train_specs(cfg, traces_dir, source)
    for s in available(cfg.validation.scenarios, traces_dir)[1]:
        click.echo(f"note: validation skips {s} (needs traces; trace root not found)", err=True)


def _import_agents(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        _fail(f"{exc}; install the agents extra: pip install -e '.[agents]'")


MAX_EVAL_SEEDS = 100_000  # a range past this is a typo (0-99999999999), not an evaluation


def _seed_list(text: str) -> list[int]:
    """``--seeds``: comma-separated integers >= 0 or ranges ``lo-hi`` (inclusive), at least
    one; repeated seeds count once."""
    import re

    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        _fail(f"--seeds {text!r}: give at least one seed (comma-separated integers >= 0)")
    seeds: list[int] = []
    for part in filter(None, parts):
        m = re.fullmatch(r"(\d+)\s*-\s*(\d+)", part)
        if m is not None:
            lo, hi = int(m[1]), int(m[2])
            if lo > hi:
                _fail(f"--seeds {text!r}: range {part!r} runs backwards; write {hi}-{lo}")
            if hi > MAX_SEED:
                _fail(f"--seeds {text!r}: seeds must be <= {MAX_SEED} (2**63 - 1), got {hi}")
            if hi - lo + 1 + len(seeds) > MAX_EVAL_SEEDS:
                _fail(f"--seeds {text!r}: {hi - lo + 1:,} seeds in {part!r}; at most "
                      f"{MAX_EVAL_SEEDS:,} seeds in all")  # fmt: skip
            seeds += range(lo, hi + 1)
            continue
        try:
            seed = int(part)
        except ValueError:
            _fail(
                f"--seeds {text!r}: expected comma-separated integers >= 0 or ranges lo-hi "
                f"(e.g. 101-110), got {part!r}"
            )
        if seed < 0:
            _fail(f"--seeds {text!r}: seeds must be >= 0, got {seed}")
        if seed > MAX_SEED:
            _fail(f"--seeds {text!r}: seeds must be <= {MAX_SEED} (2**63 - 1), got {seed}")
        seeds.append(seed)
    return list(dict.fromkeys(seeds))


def _agent_options(values: tuple[str, ...]) -> list[tuple[str | None, Path, str]]:
    """``--agent`` values as (label or None, path, the value as given): ``LABEL=PATH`` names
    the agent, unless a file is called exactly as the value."""
    out = []
    for value in values:
        label, sep, path = value.partition("=")
        if sep and label.strip() and path and not Path(value).exists():
            out.append((label.strip(), Path(path), value))
        else:
            out.append((None, Path(value), value))
    return out


def _agent_labels(agents: list[tuple[str | None, Path, str]], metas: list[dict]) -> list[str]:
    """One label per agent: its own (``LABEL=PATH``); else ``<agent>-agent`` for a lone
    agent; else the file stem, with its folder where stems repeat."""
    given = [a[0] for a in agents]
    if len(agents) == 1 and given[0] is None:
        return [f"{metas[0]['agent']}-agent"]
    stems = [p.stem for _, p, _ in agents]
    labels = []
    for (label, path, _), stem in zip(agents, stems, strict=True):
        if label is None:
            label = stem if stems.count(stem) == 1 else f"{path.parent.name}/{stem}"
        labels.append(label)
    for (_, _, value), label in zip(agents, labels, strict=True):
        if labels.count(label) > 1:
            _fail(f"--agent {value}: label {label!r} is taken by another agent; "
                  "name each one with --agent LABEL=PATH")  # fmt: skip
    return labels


@main.command()
@click.option(
    "--agent",
    "agents",
    multiple=True,
    required=True,
    help="Agent checkpoint (.zip from `dlcluster train` or `save_agent`), repeatable; "
    "LABEL=PATH names it (default: the file stem, or <agent>-agent for a lone agent).",
)
@click.option(
    "--scenario",
    "scenarios",
    multiple=True,
    help="Scenario preset or YAML (repeatable; default: the agents' configs' held-out sets).",
)
@click.option(
    "--seeds",
    default=None,
    help="Seeds for every scenario: integers and ranges, e.g. 101-110 or 101,102 (default: "
    "each config's evaluation seeds, per scenario where it names them).",
)
@click.option(
    "--split",
    default=None,
    metavar="NAME[:PART]",
    help="Evaluate on a part of a named split (dlcluster list splits; PART: train, "
    "validation or test, default test): its scenarios, each with its own seeds. Replaces "
    "--scenario and --seeds.",
)
@click.option(
    "--baselines",
    default=None,
    help="Comma-separated policies to compare with ('' for none). Default: "
    "dally,dally-manual,tiresias,gandiva,themis,cassini,qssf,qssf-preemptive,srsf,srw,ideal "
    "plus the heuristics of each agent kind (fcfs and las-slots for scheduler agents). Tables "
    "mark clairvoyant policies and bounds; the best heuristic is the best deployable one "
    "(dlcluster list policies).",
)
@click.option(
    "--entrant",
    "entrants",
    multiple=True,
    metavar="YAML",
    help="A policy with parameters, written as a leaderboard suite's entrant (repeatable), "
    "e.g. '{policy: dally-manual, params: {machine_timer_s: 172800}, label: manual-48h}'; "
    "its label (default: the policy name) names its column.",
)
@click.option(
    "--reference",
    default=None,
    help="Policy (or agent label) the ratios are to (default: dally when it runs, else the "
    "first agent).",
)
@click.option(
    "--tie-rtol",
    type=click.FloatRange(min=0.0),
    default=1e-3,
    show_default=True,
    help="A scenario where every non-bound policy's average JCT is equal within this relative "
    "tolerance on every seed is reported as 'no decision' and left out of the aggregate.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="A folder for eval.json (every run), eval.md (the tables) and eval.png (ratios with "
    "95% CIs); a path ending in .json writes that one JSON file only.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--traces-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Trace root (default: $DLCLUSTER_TRACES, else ../shared/traces).",
)
@click.option("--quiet", is_flag=True, help="No progress bar or progress lines.")
def evaluate(
    agents: tuple[str, ...],
    scenarios: tuple[str, ...],
    seeds: str | None,
    split: str | None,
    baselines: str | None,
    entrants: tuple[str, ...],
    reference: str | None,
    tie_rtol: float,
    out: Path | None,
    fmt: str,
    traces_dir: Path | None,
    quiet: bool,
) -> None:
    """Evaluate agent checkpoints next to heuristics on held-out scenarios and seeds.

    Per scenario and policy: mean average and P99 JCT over seeds with 95% Student-t
    confidence intervals, and the per-seed ratio to the reference with its CI. Scenarios
    where every policy ties are 'no decision' and left out of the aggregate (the geometric
    mean of the per-scenario ratios). Each agent is also compared with the best deployable
    heuristic (the best clairvoyant one beside it), and its fraction of the room closed is
    shown: from the best deployable reference policy (0) to the best clairvoyant one (1), per
    seed, 'no room' where the clairvoyant one is less than 5% below."""
    from dlcluster_gym.envs.agent_loader import read_agent_meta
    from dlcluster_gym.scheduler import make_policy

    if not math.isfinite(tie_rtol):
        _fail(f"--tie-rtol {tie_rtol}: give a finite relative tolerance >= 0")
    parsed = _agent_options(agents)
    metas = []
    for _, path, value in parsed:
        try:
            metas.append(read_agent_meta(path))
        except DLClusterError as err:
            _fail(f"--agent {value}: {err}")
    _import_agents("dlcluster_gym.agents.load")
    from dlcluster_gym.agents import evaluate as ev
    from dlcluster_gym.agents.config import (
        DEFAULT_EVAL_SEEDS,
        MIN_CI_SEEDS,
        AgentConfig,
        ScenarioSpec,
    )
    from dlcluster_gym.agents.envs import available, scenario_mapping

    labels = _agent_labels(parsed, metas)
    policies: dict[str, Any] = {
        label: f"agent:{path}" for label, (_, path, _) in zip(labels, parsed, strict=True)
    }
    names = (
        ev.default_baselines([m["agent"] for m in metas])
        if baselines is None
        else [x.strip() for x in baselines.split(",") if x.strip()]
    )
    for b in names:
        if b in policies:
            _fail(f"--baselines {b!r}: that is an agent's label")
        policies[b] = b
    # everything is resolved before the first simulation: a typo must not cost a run
    for label, (_, _, value) in zip(labels, parsed, strict=True):
        try:
            make_policy(policies[label])
        except DLClusterError as err:
            _fail(f"--agent {value}: {err}")
    for name in dict.fromkeys(names):
        try:
            make_policy(name)
        except DLClusterError as err:
            _fail(f"--baselines {name!r}: {err}")
    for value in entrants:
        label, maker = _entrant_option(value)
        if label in policies:
            _fail(f"--entrant {value!r}: label {label!r} is taken; give the entrant a label")
        policies[label] = maker
    ref = reference or ("dally" if "dally" in policies else labels[0])
    if ref not in policies:
        _fail(f"--reference {ref!r}: not among the evaluated policies ({', '.join(policies)})")
    if split is not None and (scenarios or seeds is not None):
        given = " and ".join(o for o, v in (("--scenario", scenarios), ("--seeds", seeds)) if v)
        _fail(f"--split {split}: a split gives the scenarios and their seeds; leave out {given}")
    seed_list = _seed_list(seeds) if seeds is not None else None
    configs = []
    for meta, (_, _, value) in zip(metas, parsed, strict=True):
        if meta.get("config") is not None:
            try:
                configs.append(AgentConfig.model_validate(meta["config"]).evaluation)
            except ValueError as err:
                _fail(f"--agent {value}: its recorded config does not validate: {err}")
    split_part = None
    if split is not None:
        split_part, specs = _split_specs(split, ScenarioSpec)
    elif scenarios:
        default = seed_list or (list(configs[0].seeds) if configs else list(DEFAULT_EVAL_SEEDS))
        specs = [ScenarioSpec(scenario=s, seeds=tuple(default)) for s in scenarios]
    else:
        if not configs:
            _fail(f"--agent {agents[0]}: the checkpoint records no evaluation set (saved "
                  "without a config); give --scenario")  # fmt: skip
        specs = _evaluation_specs(configs, seed_list)
    for spec in specs:
        try:
            scenario_mapping(spec)
        except DLClusterError as err:
            where = (
                f"--split {split}: scenario"
                if split is not None
                else "--scenario"
                if scenarios
                else f"{parsed[0][2]}: evaluation scenario"
            )
            _fail(f"{where} {spec.scenario!r}: {err}")
    if out is not None:
        if out.suffix == ".json":
            prepare_out_file(out, "--out")
        else:
            check_writable(out, "--out", directory=True)
    kept, skipped = available(specs, traces_dir)
    for s in skipped:
        click.echo(f"note: skipped {s} (needs traces; trace root not found)", err=True)
    few = [s.name for s in kept if len(s.seeds or ()) < MIN_CI_SEEDS]
    if few:
        click.echo(
            f"warning: {', '.join(few)}: fewer than {MIN_CI_SEEDS} seeds; 95% confidence "
            f"intervals need >= {MIN_CI_SEEDS} seeds per scenario to be worth reading "
            "(e.g. --seeds 101-110)",
            err=True,
        )
    total = ev.count_runs(len(policies), kept, DEFAULT_EVAL_SEEDS, traces_dir)
    bar = None
    if quiet or fmt == "json":
        progress = None
    elif sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=total, unit="run", desc="evaluate", file=sys.stderr, dynamic_ncols=True)

        def progress(msg: str) -> None:
            bar.set_postfix_str(msg, refresh=False)
            bar.update(1)
    else:

        def progress(msg: str) -> None:
            click.echo(msg, err=True)

    started = time.perf_counter()
    try:
        rows = ev.run_set(policies, kept, DEFAULT_EVAL_SEEDS, traces_dir, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    report = ev.evaluation_report(rows, labels, ref, tie_rtol)
    report["command"] = _evaluate_command(click.get_current_context().params)
    if split_part is not None:
        report["split"] = split_part
    report["wall_s"] = time.perf_counter() - started
    report["cores"] = os.cpu_count()
    report["checkpoints"] = {
        label: str(path) for label, (_, path, _) in zip(labels, parsed, strict=True)
    }
    sections = ev.report_sections(report, rows)
    if out is not None:
        _write_evaluation(out, report, sections, ev)
    if fmt == "json":
        click.echo(json.dumps(report))
        return
    for i, (heading, table) in enumerate(sections):
        click.echo(f"{'' if i == 0 else chr(10)}{heading}:")
        click.echo(table)
    if report["no_decision"]:
        click.echo(f"\nno decision (left out of the aggregate): {', '.join(report['no_decision'])}")


def _entrant_option(value: str) -> tuple[str, Any]:
    """``--entrant YAML`` -> (label, a maker of fresh policy objects); the policy is built
    once here, so a bad name or parameter fails before any simulation."""
    import yaml
    from pydantic import ValidationError

    from dlcluster_gym.config import safe_load, yaml_problem
    from dlcluster_gym.leaderboard.suite import EntrantSpec
    from dlcluster_gym.scheduler import make_policy

    form = "expected a mapping like '{policy: NAME, params: {...}, label: LABEL}'"
    try:
        spec = EntrantSpec.model_validate(safe_load(value))
    except yaml.YAMLError as err:
        _fail(f"--entrant {value!r}: {form} ({yaml_problem(err)})")
    except ValidationError as err:
        why = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'value'}: "
            + ("unknown key" if e["type"] == "extra_forbidden" else e["msg"])
            for e in err.errors()
        )
        _fail(f"--entrant {value!r}: {form} ({why})")
    try:
        make_policy(spec.policy, **spec.params)
    except DLClusterError as err:
        _fail(f"--entrant {value!r}: {err}")
    return spec.label or spec.policy, functools.partial(make_policy, spec.policy, **spec.params)


def _evaluate_command(params: dict[str, Any]) -> str:
    """The ``dlcluster evaluate`` command line that repeats this evaluation from its parsed
    ``params`` (the options that decide what runs and where it is written; progress and
    format options left out)."""
    agents, scenarios, tie_rtol = params["agents"], params["scenarios"], params["tie_rtol"]
    args = ["dlcluster", "evaluate", *(f"--agent={a}" for a in agents)]
    args += [f"--scenario={sc}" for sc in scenarios]
    args += [f"--entrant={e}" for e in params.get("entrants", ())]
    for key in ("seeds", "split", "baselines", "reference", "out"):
        if (value := params.get(key)) is not None:
            args.append(f"--{key}={value}")
    if tie_rtol != 1e-3:
        args.append(f"--tie-rtol={tie_rtol:g}")
    return shlex.join(args)


def _split_specs(text: str, spec_cls: Any) -> tuple[str, list[Any]]:
    """``--split NAME[:PART]`` -> ("NAME:PART", the part's entries as evaluation specs, each
    with its own seeds)."""
    from dlcluster_gym.splits import load_split, parse_split_part

    try:
        name, part = parse_split_part(text)
        entries = load_split(name).part(part)
    except DLClusterError as err:
        _fail(f"--split {text}: {err}")
    for e in entries:
        if len(e.seeds) > MAX_EVAL_SEEDS:
            _fail(f"--split {text}: {e.label!r} has {len(e.seeds):,} seeds ({e.seeds}); at "
                  f"most {MAX_EVAL_SEEDS:,} per scenario are evaluated")  # fmt: skip
    specs = [
        spec_cls(
            scenario=e.scenario, overrides=e.overrides, label=e.label, seeds=tuple(e.seeds),
            requires_traces=e.requires_traces,
        )
        for e in entries
    ]  # fmt: skip
    return f"{name}:{part}", specs


def _evaluation_specs(configs: list[Any], seeds: list[int] | None) -> list[Any]:
    """The scenarios of the agents' evaluation sets, each once (by label), with the seeds it
    runs: ``seeds`` when given, else every seed its sets give it."""
    specs: dict[str, Any] = {}
    for ev_set in configs:
        for spec in ev_set.scenarios:
            own = tuple(seeds) if seeds is not None else ev_set.seeds_of(spec)
            if spec.name in specs:
                old = specs[spec.name]
                if old.model_copy(update={"seeds": None}) != spec.model_copy(
                    update={"seeds": None}
                ):
                    _fail(f"evaluation scenario {spec.name!r} differs between the agents' "
                          "configs; evaluate them apart or give --scenario")  # fmt: skip
                own = tuple(dict.fromkeys((*old.seeds, *own)))
            specs[spec.name] = spec.model_copy(update={"seeds": own})
    return list(specs.values())


def _write_evaluation(out: Path, report: dict, sections: list[tuple[str, str]], ev: Any) -> None:
    """``--out``: FILE.json, or a folder with eval.json, eval.md and eval.png."""
    if out.suffix == ".json":
        out.write_text(json.dumps(report, indent=1))
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval.json").write_text(json.dumps(report, indent=1))
    from dlcluster_gym.leaderboard.tables import seed_ranges

    seeds = "; ".join(f"{sc}: {seed_ranges(v)}" for sc, v in report["seeds"].items())
    lines = ["# Agent evaluation", ""]
    for label, path in report.get("checkpoints", {}).items():
        lines.append(f"- agent `{label}`: `{path}`")
    if "split" in report:
        lines.append(f"- split: `{report['split']}` (scenarios and seeds of that part)")
    if "command" in report:
        lines.append(f"- command: `{report['command']}` ({report['wall_s']:.0f} s wall on "
                     f"{report['cores']} cores)")  # fmt: skip
    lines += [f"- reference: {report['reference']}; seeds per scenario: {seeds}",
              f"- no decision (relative tolerance {report['tie_rtol']:g}): "
              f"{', '.join(report['no_decision']) or 'none'}", ""]  # fmt: skip
    for heading, table in sections:
        lines += [f"## {heading[0].upper()}{heading[1:]}", "", table, ""]
    lines += ["![ratios to the reference](eval.png)", ""]
    (out / "eval.md").write_text("\n".join(lines))
    png = ev.ratio_figure(report["stats"], report["aggregate"], report["reference"])
    (out / "eval.png").write_bytes(png)


if __name__ == "__main__":
    main()
