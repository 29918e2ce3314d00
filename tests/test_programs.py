"""No program from the project runs outside the box (issue 41, item 6): the browser and bubblewrap
are found only at absolute paths outside the project, never through a relative or in-project PATH
entry such as the `node_modules/.bin` that `npm run` puts first."""

import dataclasses
import os

import pytest
from conftest import make_config, toolbox

from amas_code import browser, effects, project, sandbox
from amas_code.browser import Browser

FAKE = "#!/bin/sh\necho ran > {marker}\nexit 1\n"


def plant(bare, marker, name: str) -> None:
    """A program called name in the project's node_modules/.bin, PATH'd first both ways."""
    bin_dir = bare / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / name).write_text(FAKE.format(marker=marker))
    (bin_dir / name).chmod(0o755)


@pytest.fixture
def planted_path(bare, monkeypatch):
    """PATH with the project's node_modules/.bin first:
    relative (as npm run has it) and absolute."""
    system = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"node_modules/.bin:{bare}/node_modules/.bin:{system}")
    return bare


def test_navigate_never_runs_a_browser_from_the_project(planted_path, tmp_path):
    marker = tmp_path / "ran"
    plant(planted_path, marker, "chromium-headless-shell")
    plant(planted_path, marker, "chromium")
    page = Browser(make_config())
    try:
        said = page.navigate("about:blank")
    finally:
        page.close()
    assert not marker.exists()
    found = browser.find({})
    assert found is None or not found.startswith(str(planted_path))
    assert said.startswith("Error: no Chromium found") if found is None else "Error" not in said


def test_browser_path_in_the_project_or_relative_is_not_run(planted_path, tmp_path):
    marker = tmp_path / "ran"
    plant(planted_path, marker, "my-chrome")
    inside = str(planted_path / "node_modules/.bin/my-chrome")
    assert browser.find({"browser_path": inside}) is None
    assert browser.find({"browser_path": "node_modules/.bin/my-chrome"}) is None
    assert browser.find({"browser_path": "my-chrome"}) is None  # a name: PATH outside only
    assert browser.find({"browser_path": "/bin/sh"}) == "/bin/sh"  # the user's own choice


def test_playwright_browsers_in_the_project_are_not_run(planted_path, monkeypatch, tmp_path):
    # no system Chromium: only Playwright's would be found
    monkeypatch.setenv("PATH", str(tmp_path))
    shell = planted_path / "pw/chromium_headless_shell-1/chrome-linux/headless_shell"
    shell.parent.mkdir(parents=True)
    shell.write_text("#!/bin/sh\n")
    shell.chmod(0o755)
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(planted_path / "pw"))
    assert browser.find({}) is None
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", "pw")  # relative: the project's too
    assert browser.find({}) is None


def test_the_box_is_never_started_by_the_projects_bwrap(planted_path, tmp_path):
    marker = tmp_path / "ran"
    plant(planted_path, marker, "bwrap")
    sandbox.probe.cache_clear()
    try:
        why = sandbox.probe()
        if not why:
            line = effects.Command("echo boxed", 10)
            env = {"PATH": os.environ["PATH"]}
            out = sandbox.run(dataclasses.replace(line, env=env), planted_path, sandbox.Box())
            assert "boxed\n[exit code 0]" in out
    finally:
        sandbox.probe.cache_clear()
    assert not marker.exists()
    assert sandbox.bwrap() is None or not sandbox.bwrap().startswith(str(planted_path))


def test_the_boxs_limits_are_set_by_the_systems_prlimit(planted_path):
    """prlimit runs inside the box; one of the project's would run the command without limits."""
    marker = planted_path / "ran"  # in the project: the box may write there
    plant(planted_path, marker, "prlimit")
    sandbox.probe.cache_clear()
    try:
        if sandbox.probe():
            pytest.skip(f"no box here: {sandbox.probe()}")
        line = effects.Command("ulimit -f", 10)
        out = sandbox.run(
            dataclasses.replace(line, env={"PATH": os.environ["PATH"]}), planted_path, sandbox.Box()
        )
    finally:
        sandbox.probe.cache_clear()
    assert not marker.exists()
    blocks = sandbox.Box().file_size // 512  # sh counts the limit in 512-byte blocks
    assert f"$ ulimit -f\n{blocks}\n[exit code 0]" in out


def test_git_is_never_the_projects(planted_path, tmp_path):
    """Listing files and recording a checkpoint run git outside the box: the system's, never one the
    project put on PATH."""
    marker = tmp_path / "ran"
    plant(planted_path, marker, "git")
    agent = toolbox(planted_path, checkpoint=True, auto_accept=True)
    assert "README" not in agent.execute("list_files", "{}")
    said = agent.execute("write_file", '{"path": "a.txt", "content": "hi\\n"}')
    assert said.startswith("Write a.txt: 1 line") and "checkpoint: 1 file" in said
    assert (planted_path / "a.txt").read_text() == "hi\n"
    assert not marker.exists()
    assert not project.git_argv()[0].startswith(str(planted_path))
