"""`dlcluster list`: without an argument it shows its help, as `dlcluster` alone does; a
broken preset folder is an error that names every problem on a line of its own."""

from __future__ import annotations

from click.testing import CliRunner

from dlcluster_gym.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args), prog_name="dlcluster")


def test_list_alone_prints_its_help_with_what_can_be_listed():
    r = run("list")
    assert r.exit_code == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0].startswith("Usage: dlcluster list [OPTIONS] {policies|scenarios|models|")
    assert "Options:" in lines and len(lines) > 5
    assert "error:" not in r.stderr and "Traceback" not in r.stderr
    assert ";" not in lines[0]  # not click's choices joined into one line


def test_a_bad_or_extra_argument_stays_one_line():
    r = run("list", "policy")
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1
    assert "'policy' is not one of 'policies', 'scenarios'" in r.stderr


def test_a_missing_preset_folder_says_where_presets_are_read_from(tmp_path, monkeypatch):
    monkeypatch.setenv("DLCLUSTER_CONFIGS", str(tmp_path))
    r = run("list", "suites")
    assert r.exit_code == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0] == f"error: dlcluster list suites: no suites folder at {tmp_path / 'suites'}"
    assert lines[1].startswith(f"Presets are read from {tmp_path} (set by DLCLUSTER_CONFIGS)")
    assert "unset it" in lines[1] and len(lines) == 2


def test_broken_preset_files_are_each_named_on_a_line(tmp_path, monkeypatch):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "a-bad.yaml").write_text("description: [unclosed\n")
    (folder / "b-list.yaml").write_text("- one\n- two\n")
    (folder / "c-good.yaml").write_text("description: fine\n")
    monkeypatch.setenv("DLCLUSTER_CONFIGS", str(tmp_path))
    r = run("list", "scenarios")
    assert r.exit_code == 2 and "Traceback" not in r.output + r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == "error: dlcluster list scenarios: 2 preset files cannot be read:"
    assert lines[1].startswith(f"  {folder / 'a-bad.yaml'}: malformed YAML: line 2, column 1")
    assert lines[2] == f"  {folder / 'b-list.yaml'}: holds a list, not a mapping " + (
        "(description: ... and the rest)"
    )
    assert lines[3] == f"Presets are read from {tmp_path} (set by DLCLUSTER_CONFIGS): fix or " + (
        "remove these files."
    )
    (folder / "a-bad.yaml").unlink()
    (folder / "b-list.yaml").unlink()
    r = run("list", "scenarios")
    assert r.exit_code == 0 and r.stdout.split() == ["c-good", "fine"]
