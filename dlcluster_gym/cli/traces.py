"""``dlcluster traces {list,fetch,check}``: the public traces that trace scenarios read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from dlcluster_gym.cli.common import check_writable
from dlcluster_gym.errors import DLClusterError


@click.group(name="traces")
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


COMMANDS = (traces_cmd,)
