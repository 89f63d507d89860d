"""``dlcluster leaderboard`` (run a suite, or --verify a run) and ``dlcluster report``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from dlcluster_gym.cli.common import _check_time_limit, _fail, check_writable, traces_dir_option


@click.command()
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
@click.option(
    "--rerun",
    default=None,
    metavar="ENTRANTS",
    help="Comma-separated entrants: run their cells in --out again and keep every other "
    "finished cell, even one computed by other code (each row records its code; --verify "
    "replays them). For an entrant whose code or defaults changed.",
)
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
@traces_dir_option
@click.option("--quiet", is_flag=True, help="No progress bar.")
def leaderboard(
    suite: str | None,
    backend: str,
    workers: int | None,
    out: Path | None,
    resume: bool,
    rerun: str | None,
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
        rerun=None if rerun is None else [x.strip() for x in rerun.split(",") if x.strip()],
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


@click.command()
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


COMMANDS = (leaderboard, report)
