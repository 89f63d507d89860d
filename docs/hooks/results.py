"""MkDocs hook: the generated results and the repository's links, in the site.

The experiment scripts write their reports and figures into ``experiments/results/``. The docs
and the README link to them, and to source files, by their path in the repository (as GitHub
shows them: ``../experiments/results/dally/report.md`` from ``docs/agents.md``). This hook

- adds the files under ``experiments/results/`` to the build (same paths in the site), so the
  reports render as pages without being copied into ``docs/``;
- rewrites each relative link of a page from its repository path to its site path (a page of
  ``docs/`` or of the results, the results' figures); a link to any other file of the
  repository (a source file, a config), which the site does not serve, becomes the file's
  path in code type.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results"
SUFFIXES = {".md", ".png", ".csv", ".json", ".svg"}
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def on_files(files: Files, config) -> Files:
    for path in sorted(RESULTS.rglob("*")):
        skip = {"previous", "cells"} & set(path.parts)  # superseded tables, per-run caches
        if path.is_file() and path.suffix in SUFFIXES and not skip:
            rel = path.relative_to(ROOT).as_posix()
            files.append(
                File(
                    rel,
                    src_dir=str(ROOT),
                    dest_dir=config["site_dir"],
                    use_directory_urls=config["use_directory_urls"],
                )
            )
    return files


def _repo_path(src_uri: str) -> str:
    """Where a page of the site lives in the repository."""
    return src_uri if src_uri.startswith("experiments/") else f"docs/{src_uri}"


def _site_path(repo_path: str) -> str | None:
    """Where a repository file is in the site, or None when it is not part of it."""
    if repo_path.startswith("docs/"):
        return repo_path[len("docs/") :]
    if repo_path.startswith("experiments/results/"):
        return repo_path
    return None


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    here_repo = posixpath.dirname(_repo_path(page.file.src_uri))
    here_site = posixpath.dirname(page.file.src_uri)

    def fix(m: re.Match) -> str:
        bang, text, target = m.group(1), m.group(2), m.group(3)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return m.group(0)
        path, _, anchor = target.partition("#")
        repo = posixpath.normpath(posixpath.join(here_repo, path))
        site = _site_path(repo)
        if site is None or (ROOT / repo).is_dir():
            if bang:
                return m.group(0)
            return text if repo in text else f"{text} (`{repo}`)"
        new = posixpath.relpath(site, here_site or ".")
        return f"{bang}[{text}]({new}{'#' + anchor if anchor else ''})"

    return LINK.sub(fix, markdown)
