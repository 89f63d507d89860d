"""The README tour's env example (section "Make an environment and step it") runs as printed,
and its episode has decisions that tell the policies apart: random, greedy and las end at
different average JCTs, in the order the README states."""

from __future__ import annotations

import contextlib
import io
import itertools
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION = "### Make an environment and step it"
POLICY_CALL = 'make_env_policy("random", env)'


def readme_block(section: str, lang: str = "python") -> str:
    """The first ``lang`` code block of README.md's ``section`` (a heading line), verbatim."""
    text = (ROOT / "README.md").read_text()
    start = text.index(section + "\n") + len(section) + 1
    body = text[start:]
    nxt = re.search(r"^#{1,3} ", body, re.MULTILINE)  # the section ends at the next heading
    body = body[: nxt.start()] if nxt else body
    fence = f"```{lang}\n"
    block = body[body.index(fence) + len(fence) :]
    return block[: block.index("```")]


def run_block(code: str) -> tuple[dict[str, Any], str]:
    """Execute ``code`` as a script; its globals and what it printed."""
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), namespace)
    namespace["env"].close()
    return namespace, out.getvalue()


@pytest.fixture(scope="module")
def block() -> str:
    code = readme_block(SECTION)
    assert code.count(POLICY_CALL) == 1, "the example makes its policy with make_env_policy"
    return code


def test_the_readme_example_runs_verbatim(block: str) -> None:
    ns, printed = run_block(block)
    assert ns["done"] and ns["info"]["results"]["jobs_unfinished"] == 0
    assert printed.strip().endswith(str(ns["info"]["results"]["avg_jct_s"]))


def test_the_policies_make_a_difference_in_the_readme_episode(block: str) -> None:
    """The same code with each policy the comment suggests: real decisions (many steps) and
    average JCTs that differ pairwise by more than 1 %, las lowest and random highest (the
    README's words)."""
    jct, steps = {}, {}
    for name in ("random", "greedy", "las"):
        ns, _ = run_block(block.replace(POLICY_CALL, f'make_env_policy("{name}", env)'))
        jct[name], steps[name] = ns["info"]["results"]["avg_jct_s"], ns["steps"]
    assert min(steps.values()) > 1000, steps  # "over a thousand steps"
    for a, b in itertools.combinations(jct, 2):
        assert abs(jct[a] - jct[b]) > 0.01 * min(jct[a], jct[b]), jct
    assert jct["las"] < jct["greedy"] < jct["random"], jct
