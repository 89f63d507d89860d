"""The public traces the package reads: where each comes from, its license, and the sha256 and
size of every file (``configs/traces/catalog.yaml``); fetching a trace into a trace root and
checking a folder against the catalog (``dlcluster traces list / fetch / check``).

The catalog holds names, sources and hashes only, never trace data. A trace is fetched from its
upstream repository at a fixed commit (single files, or members of a ``.tar.gz`` in the
repository), or from a mirror laid out like a trace root (a local folder, or a ``file://``,
``http://`` or ``https://`` URL). Every file is written under a temporary name next to its
destination and renamed only once its sha256 matches the catalog, so a failed or interrupted
fetch leaves no partial file behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dlcluster_gym.config import PACKAGED_CONFIGS, REPO_CONFIGS, configs_dir, load_yaml_file
from dlcluster_gym.errors import ConfigError, TraceError, UnknownNameError
from dlcluster_gym.workload.traces import TRACE_FORMATS

CATALOG_FILE = Path("traces") / "catalog.yaml"
UPSTREAM_BASE = "https://raw.githubusercontent.com"  # + /OWNER/REPO/COMMIT/PATH
TIMEOUT_S = 60.0  # per network read
CHUNK = 1 << 16
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SHA256 = r"^[0-9a-f]{64}$"
_COMMIT = r"^[0-9a-f]{40}$"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Archive(_Frozen):
    """A ``.tar.gz`` in the upstream repository that holds some of a trace's files."""

    sha256: str = Field(pattern=_SHA256)
    size: int = Field(ge=0)


class TraceFile(_Frozen):
    """One file of a trace: where it goes under the trace root and where it comes from."""

    path: str  # under the trace root, with forward slashes
    upstream: str  # path in the repository, or member name in ``archive``
    sha256: str = Field(pattern=_SHA256)
    size: int = Field(ge=0)
    commit: str | None = Field(default=None, pattern=_COMMIT)  # another commit than the trace's
    archive: str | None = None

    @field_validator("path", "upstream")
    @classmethod
    def _relative(cls, v: str) -> str:
        p = PurePosixPath(v)
        if not v or p.is_absolute() or ".." in p.parts or "\\" in v:
            raise ValueError(f"must be a relative path without '..' (got {v!r})")
        return v


class TraceSpec(_Frozen):
    """A trace of the catalog (one upstream source, one license)."""

    name: str
    title: str
    formats: tuple[str, ...]
    license: str
    note: str = ""
    repository: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    commit: str = Field(pattern=_COMMIT)
    needs: tuple[str, ...] = ()
    archives: dict[str, Archive] = {}
    files: tuple[TraceFile, ...] = Field(min_length=1)

    @field_validator("formats")
    @classmethod
    def _known_formats(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [f for f in v if f not in TRACE_FORMATS]
        if bad:
            raise ValueError(f"unknown trace format(s) {bad}; known: {', '.join(TRACE_FORMATS)}")
        return v

    def model_post_init(self, _: Any) -> None:
        paths = [f.path for f in self.files]
        if len(set(paths)) != len(paths):
            raise ValueError(f"trace {self.name!r} lists a file twice")
        missing = {f.archive for f in self.files if f.archive} - set(self.archives)
        if missing:
            raise ValueError(f"trace {self.name!r}: archive(s) {sorted(missing)} not in archives")

    @property
    def size(self) -> int:
        """Bytes of all its files."""
        return sum(f.size for f in self.files)

    @property
    def folder(self) -> str:
        """The folder, under the trace root, that holds all its files."""
        return os.path.commonpath([PurePosixPath(f.path).parent.as_posix() for f in self.files])

    @property
    def url(self) -> str:
        """The upstream repository at the recorded commit, at the folder of its data files."""
        parents = [
            PurePosixPath(f.archive or f.upstream).parent.as_posix()
            for f in self.files
            if f.commit is None and not _is_license(f)
        ]
        sub = os.path.commonpath(parents) if parents else "."
        return f"https://github.com/{self.repository}/tree/{self.commit}" + (
            "" if sub == "." else f"/{sub}"
        )

    def file_url(self, f: TraceFile, base: str = UPSTREAM_BASE) -> str:
        """The upstream download URL of ``f`` (or of the archive that holds it)."""
        path = f.archive if f.archive else f.upstream
        return f"{base.rstrip('/')}/{self.repository}/{f.commit or self.commit}/{path}"

    def archive_url(self, archive: str, base: str = UPSTREAM_BASE) -> str:
        return f"{base.rstrip('/')}/{self.repository}/{self.commit}/{archive}"


Catalog = Mapping[str, TraceSpec]


def catalog_path() -> Path:
    """The catalog shipped with the package (not a preset: ``DLCLUSTER_CONFIGS`` does not
    replace it)."""
    root = PACKAGED_CONFIGS if PACKAGED_CONFIGS.is_dir() else REPO_CONFIGS
    return root / CATALOG_FILE


def read_catalog(path: str | Path) -> dict[str, TraceSpec]:
    """The catalog in ``path`` (validated: ``ConfigError`` naming the file and each problem)."""
    data = load_yaml_file(Path(path))
    traces = data.get("traces") if isinstance(data, dict) else None
    if not isinstance(traces, dict) or not traces:
        raise ConfigError(f"{path}: a trace catalog is a mapping 'traces:' of name -> trace")
    out: dict[str, TraceSpec] = {}
    for name, spec in traces.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{path}: trace {name!r}: a mapping of its fields, not {spec!r}")
        try:
            out[str(name)] = TraceSpec.model_validate({**spec, "name": str(name)})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'trace'}: "
                + str(e["msg"]).removeprefix("Value error, ")
                for e in exc.errors()
            )
            raise ConfigError(f"{path}: trace {name!r}: {problems}") from None
    for spec in out.values():
        unknown = [n for n in spec.needs if n not in out]
        if unknown:
            raise ConfigError(f"{path}: trace {spec.name!r} needs unknown trace(s) {unknown}")
    return out


@cache
def load_catalog() -> dict[str, TraceSpec]:
    """The shipped catalog (read once)."""
    return read_catalog(catalog_path())


def select(names: Iterable[str], catalog: Catalog | None = None) -> list[TraceSpec]:
    """The traces called ``names`` (``all``: every one) and the traces they need, each once,
    in catalog order."""
    catalog = load_catalog() if catalog is None else catalog
    wanted: set[str] = set()
    todo = list(names)
    if "all" in todo:
        todo = list(catalog)
    while todo:
        name = todo.pop()
        if name not in catalog:
            raise UnknownNameError("trace", name, [*catalog, "all"])
        if name not in wanted:
            wanted.add(name)
            todo.extend(catalog[name].needs)
    return [spec for name, spec in catalog.items() if name in wanted]


def scenario_readers(catalog: Catalog | None = None) -> dict[str, list[str]]:
    """Trace name -> the scenario presets that read it (directly or through ``needs``)."""
    catalog = load_catalog() if catalog is None else catalog
    owner = {f.path: name for name, spec in catalog.items() for f in spec.files}
    out: dict[str, set[str]] = {name: set() for name in catalog}
    for path in sorted((configs_dir() / "scenarios").glob("*.yaml")):
        try:
            data = load_yaml_file(path)
        except ConfigError:
            continue
        workload = data.get("workload") if isinstance(data, dict) else None
        if not isinstance(workload, dict):
            continue
        for key in ("path", "task_path"):
            name = owner.get(str(workload.get(key, "")))
            if name is not None:
                for reached in select([name], catalog):
                    out[reached.name].add(path.stem)
    return {name: sorted(s) for name, s in out.items()}


# --------------------------------------------------------------------------- checking


@dataclass(frozen=True)
class FileCheck:
    """One file of a folder against the catalog: ``status`` is ``ok``, ``missing``, ``size``
    or ``sha256`` (with what was expected and what was found)."""

    trace: str
    path: str
    status: str
    expected: str = ""
    actual: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        """One line: the file and what is wrong with it."""
        if self.status == "missing":
            return f"{self.path}: missing"
        return f"{self.path}: {self.status} mismatch: expected {self.expected}, got {self.actual}"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def check_file(root: Path, f: TraceFile, trace: str = "") -> FileCheck:
    """``root / f.path`` against its size and sha256 (the size first: cheap)."""
    p = root / f.path
    if not p.is_file():
        return FileCheck(trace, f.path, "missing")
    size = p.stat().st_size
    if size != f.size:
        return FileCheck(trace, f.path, "size", f"{f.size:,} bytes", f"{size:,} bytes")
    digest = file_sha256(p)
    if digest != f.sha256:
        return FileCheck(trace, f.path, "sha256", f.sha256, digest)
    return FileCheck(trace, f.path, "ok")


def check(root: str | Path, traces: Iterable[TraceSpec]) -> list[FileCheck]:
    """Every file of ``traces`` under ``root``."""
    base = Path(root)
    return [check_file(base, f, spec.name) for spec in traces for f in spec.files]


def present(root: str | Path, catalog: Catalog | None = None) -> list[TraceSpec]:
    """The traces of which ``root`` holds at least one data file (a LICENSE alone, which
    traces of one repository share, does not count)."""
    catalog = load_catalog() if catalog is None else catalog
    base = Path(root)
    return [
        spec
        for spec in catalog.values()
        if any((base / f.path).is_file() for f in spec.files if not _is_license(f))
    ]


def _is_license(f: TraceFile) -> bool:
    return PurePosixPath(f.path).name.upper().startswith(("LICENSE", "LICENCE"))


# --------------------------------------------------------------------------- fetching


@dataclass(frozen=True)
class Fetched:
    """What a fetch did with one file: ``fetched``, ``kept`` (already there, hash checked) or
    ``replaced`` (there with another hash)."""

    trace: str
    path: str
    action: str


def _is_url(source: str) -> bool:
    return bool(_SCHEME.match(source))


@contextlib.contextmanager
def _open_source(where: str) -> Iterator[IO[bytes]]:
    """A URL (``file://``, ``http(s)://``) or a local file, opened for reading, with one-line
    ``TraceError``s for what cannot be read."""
    if _is_url(where):
        try:
            with urllib.request.urlopen(where, timeout=TIMEOUT_S) as resp:
                yield resp
        except urllib.error.HTTPError as exc:
            raise TraceError(f"{where}: HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            raise TraceError(f"{where}: cannot be read ({exc.reason})") from None
        except (TimeoutError, ConnectionError) as exc:
            raise TraceError(f"{where}: download failed ({exc})") from None
        return
    try:
        fh = open(where, "rb")  # noqa: SIM115 (closed below, after the caller is done)
    except FileNotFoundError:
        raise TraceError(f"{where}: not found") from None
    except OSError as exc:
        raise TraceError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    with fh:
        yield fh


def _write_checked(
    src: IO[bytes],
    dest: Path,
    sha256: str,
    label: str,
    advance: Callable[[int], Any],
) -> None:
    """Copy ``src`` to ``dest`` through a temporary file beside it, renamed into place only if
    its sha256 is ``sha256``; otherwise (or on any error) the temporary file is removed and
    ``dest`` is left as it was."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = _scratch(dest)
    try:
        h = hashlib.sha256()
        with open(tmp, "xb") as out:  # new, with the permissions of any file made here
            for chunk in iter(lambda: src.read(CHUNK), b""):
                h.update(chunk)
                out.write(chunk)
                advance(len(chunk))
        actual = h.hexdigest()
        if actual != sha256:
            raise TraceError(
                f"{label}: sha256 mismatch: expected {sha256}, got {actual}; the source differs "
                f"from the catalog's copy, nothing was written to {dest}"
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _scratch(dest: Path) -> Path:
    """A name beside ``dest`` that no other fetch uses (hidden, ``.part``)."""
    return dest.with_name(f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}.part")


def _source_of(spec: TraceSpec, f: TraceFile, source: str | None, base: str) -> str:
    """Where ``f`` is read from when it is not in an upstream archive."""
    if source is None:
        return spec.file_url(f, base)
    if _is_url(source):
        return f"{source.rstrip('/')}/{urllib.parse.quote(f.path)}"
    return str(Path(source) / f.path)


def fetch(
    traces: Iterable[TraceSpec],
    dest: str | Path,
    source: str | None = None,
    *,
    progress: bool = False,
    upstream_base: str = UPSTREAM_BASE,
) -> list[Fetched]:
    """Put every file of ``traces`` under the trace root ``dest``, each checked against its
    sha256. ``source``: a folder or URL laid out like a trace root (None: the upstream
    repositories, under ``upstream_base``). Files already there with the right hash are kept.
    Raises ``TraceError`` naming the file, the expected and the actual hash on a mismatch."""
    root = Path(dest)
    if source is not None and not _is_url(source):
        if not Path(source).is_dir():
            raise TraceError(f"source {source}: not a folder, nor a URL (file://, https://)")
        if Path(source).resolve() == root.resolve():
            raise TraceError(f"source and destination are one folder ({root}); check it instead")
    if root.exists() and not root.is_dir():
        raise TraceError(f"destination {root}: not a folder")
    done: list[Fetched] = []
    todo: list[tuple[TraceSpec, TraceFile, str]] = []
    seen: set[str] = set()
    for spec in traces:
        for f in spec.files:
            if f.path in seen:
                continue
            seen.add(f.path)
            state = check_file(root, f, spec.name)
            if state.ok:
                done.append(Fetched(spec.name, f.path, "kept"))
            else:
                todo.append((spec, f, "fetched" if state.status == "missing" else "replaced"))
    if not todo:
        return done
    # from upstream, files in an archive come from one download of the archive
    by_archive: dict[tuple[str, str], list[tuple[TraceSpec, TraceFile, str]]] = {}
    single: list[tuple[TraceSpec, TraceFile, str]] = []
    for item in todo:
        spec, f, _ = item
        if source is None and f.archive:
            by_archive.setdefault((spec.name, f.archive), []).append(item)
        else:
            single.append(item)
    total = sum(f.size for _, f, _ in single)
    total += sum(items[0][0].archives[a].size for (_, a), items in by_archive.items())
    root.mkdir(parents=True, exist_ok=True)
    from tqdm import tqdm

    with tqdm(
        total=total, unit="B", unit_scale=True, unit_divisor=1000, desc="traces",
        disable=None if progress else True, dynamic_ncols=True,
    ) as bar:  # fmt: skip
        for spec, f, action in single:
            where = _source_of(spec, f, source, upstream_base)
            with _open_source(where) as src:
                _write_checked(src, root / f.path, f.sha256, f"{f.path} (from {where})", bar.update)
            done.append(Fetched(spec.name, f.path, action))
        for (_, archive), items in by_archive.items():
            spec = items[0][0]
            done += _fetch_archive(spec, archive, items, root, upstream_base, bar.update)
    return done


def _fetch_archive(
    spec: TraceSpec,
    archive: str,
    items: list[tuple[TraceSpec, TraceFile, str]],
    root: Path,
    base: str,
    advance: Callable[[int], Any],
) -> list[Fetched]:
    """Download ``archive`` of ``spec`` (checked), then write its members ``items``."""
    where = spec.archive_url(archive, base)
    tmp = _scratch(root / PurePosixPath(archive).name)
    done: list[Fetched] = []
    try:
        with _open_source(where) as src:
            label = f"{archive} (from {where})"
            _write_checked(src, tmp, spec.archives[archive].sha256, label, advance)
        with tarfile.open(tmp, "r:gz") as tar:
            for _, f, action in items:
                try:
                    member = tar.getmember(f.upstream)
                except KeyError:
                    raise TraceError(f"{where}: no member {f.upstream!r} (for {f.path})") from None
                data = tar.extractfile(member) if member.isfile() else None
                if data is None:
                    raise TraceError(f"{where}: member {f.upstream!r} is not a regular file")
                label = f"{f.path} (member {f.upstream} of {where})"
                with data:  # the archive's bytes were counted as it downloaded
                    _write_checked(data, root / f.path, f.sha256, label, lambda n: None)
                done.append(Fetched(spec.name, f.path, action))
    finally:
        tmp.unlink(missing_ok=True)
    return done
