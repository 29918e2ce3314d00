"""The doors of the box (issue 50). A grant opens exactly what it names: the read-only set is
mounted last, over every writable bind, and the repository grant opens only what a commit writes.
And it opens when a person needs it: what the box refused is read from amas's own mounts, the
folder proposed from it, a wrong one named with its reason and asked again, a new one made."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pexpect
import pytest
from conftest import amas_argv, amas_env, git, run_amas
from test_sandbox import NOBODY, boxed, own, user  # noqa: F401 (user: a fixture)

from amas_code import boxview, sandbox
from amas_code import home as amas_home

needs_box = pytest.mark.skipif(bool(sandbox.probe()), reason="bubblewrap cannot run here")
ARITY = {"--bind": 2, "--ro-bind": 2, "--tmpfs": 1, "--remount-ro": 1, "--size": 1}
PWNED = "pwned"  # what a planted hook or fsmonitor would make, in the folder above the project
PLANT = "[core]\n\tfsmonitor = touch {pwned}\n"


def cover(argv: list[str], path: str) -> tuple[str, str, bool | None]:
    """The last mount that covers path in the box these mounts make (it decides): its option, its
    source and whether the box can write there (None: no mount covers it, / read-only decides)."""
    option, source, where, can = "", "", "", None
    at = 0
    while at < len(argv):
        width = ARITY.get(argv[at], 0)
        place = argv[at + width] if width else ""
        if width and (path == place or path.startswith(place + "/")):
            if argv[at] == "--remount-ro":
                can = can and place != where
            elif argv[at] != "--size":
                option, source, where = argv[at], argv[at + 1], place
                can = option != "--ro-bind"
        at += width + 1
    return option, source, can


def writable(argv: list[str], path: str) -> bool | None:
    return cover(argv, path)[2]


def hidden(argv: list[str], path: str) -> bool:
    """Whether the box shows something else there than the host has: an empty folder or file."""
    option, source, _ = cover(argv, path)
    return option == "--tmpfs" or source == "/dev/null"


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """A home with keys (~/.ssh, ~/.config/gh) and git's own config, and a project in a folder of
    it (~/work/proj): a repository, AGENTS.md and .amas."""
    home = tmp_path / "home"
    for name, text in {
        ".ssh/id_ed25519": "PRIVATE KEY\n",
        ".config/gh/hosts.yml": "oauth_token: gho_x\n",
        ".config/git/config": "[user]\n\tname = Me\n",
        "work/proj/AGENTS.md": "# rules\n",
        "work/proj/.amas/rules.md": "be nice\n",
    }.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    monkeypatch.setenv("HOME", str(home))
    root = home / "work" / "proj"
    git(root, "init", "-q")
    return home, root


def test_the_read_only_set_is_mounted_over_every_writable_bind(layout):
    home, root = layout
    kept = [root / ".git", root / ".git" / "hooks", root / ".git" / "config", root / "AGENTS.md"]
    kept += [root / ".amas", home / ".config" / "git" / "config"]
    hidden_places = [home / ".ssh" / "id_ed25519", home / ".config" / "gh" / "hosts.yml"]
    hidden_places += [home / ".amas"]
    # the project's parent, a folder holding keys, one holding the home: no grant opens them
    for grant in (home / "work", home / ".config", home.parent, home):
        argv = boxview.files(root, grant=str(grant))
        assert writable(argv, str(grant / "made")) is (grant != home), grant
        for place in kept:
            assert writable(argv, str(place)) is False, (grant, place)
        for place in hidden_places:
            assert hidden(argv, str(place)), (grant, place)
        # the grant's bind comes first, the read-only set after it
        at = argv.index(str(grant))
        assert argv[at - 1] == "--bind" and at < argv.index(str(root / ".git"))
    shown = boxview.files(root, grant=str(home / ".cache" / "pip"))  # a shown place, granted
    assert writable(shown, str(home / ".cache" / "pip" / "x"))


def test_a_folder_grant_never_holds_the_project_the_home_git_or_a_key(layout):
    home, root = layout
    (root / "out").symlink_to("..")  # a link the repository ships
    (home / ".cache" / "huggingface").mkdir(parents=True)
    (root / "notes.txt").write_text("x\n")
    cases = {
        "..": (home / "work", "it holds the project"),
        "out": (home / "work", "it holds the project"),  # shown resolved: links followed
        "~/.config": (home / ".config", "it holds ~/.config/g"),
        "~/.config/git": (home / ".config" / "git", "git's own config"),
        "~/.cache": (home / ".cache", "it holds ~/.cache/huggingface, a place that holds keys"),
        "~/.ssh/x": (home / ".ssh" / "x", "it is in ~/.ssh, a place that holds keys"),
        "~/.amas": (home / ".amas", "it is in ~/.amas"),
        "~": (home, "it is your home"),
        "~/newtool": (home / "newtool", "amas would make it in ~: it is your home"),
        "/run": (Path("/run"), "where programs outside the box listen"),
        "/proc/1": (Path("/proc/1"), "the box has its own"),
        "notes.txt": (root / "notes.txt", "a file, not a folder"),
        "src": (root / "src", "it is in the project"),
    }
    for typed, (path, reason) in cases.items():
        got = sandbox.grantable(typed, root)
        assert got[0] == str(path) and reason in got[1], (typed, got)
    (home / "githooks").mkdir()
    git(root, "config", "core.hooksPath", str(home / "githooks"))  # hooks outside the project
    assert (
        "git takes the project's hooks from ~/githooks" in sandbox.grantable("~/githooks", root)[1]
    )
    new = home / ".cache" / "newtool"  # not there yet: amas makes it, under ~/.cache
    assert sandbox.grantable("~/.cache/newtool", root) == (str(new), "")
    assert sandbox.grantable("~/.config/newtool/db", root) == (str(home / ".config/newtool/db"), "")


@pytest.fixture
def repository(tmp_path, home):
    """A project whose repository has a submodule (its gitdir in .git/modules/lib) and a linked
    worktree (whose gitdir names the common one in commondir)."""
    return make_repository(tmp_path)


def make_repository(base: Path) -> tuple[Path, Path]:
    lib, root = base / "lib", base / "proj"
    for place in (lib, root):
        place.mkdir()
        git(place, "init", "-q", "-b", "main")
        (place / "a.txt").write_text("a\n")
        git(place, "add", "a.txt")
        git(place, "commit", "-qm", "a")
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(root, "commit", "-qm", "lib")
    git(root, "worktree", "add", "-q", str(base / "wt"))
    return root, base / "wt"


def test_the_repository_grant_opens_only_what_a_commit_writes(repository):
    root, worktree = repository
    gitdir = root / ".git"
    assert boxview.gitdirs_of(root) == [gitdir, gitdir / "modules" / "lib"]
    assert boxview.gitdirs_of(worktree) == [
        gitdir,
        gitdir / "modules" / "lib",
        gitdir / "worktrees" / "wt",
    ]
    for project in (root, worktree):
        argv = boxview.files(project, grant="repository")
        for place in boxview.gitdirs_of(project):
            for written in (
                "objects/x",
                "refs/heads/x",
                "logs/HEAD",
                "index",
                "HEAD",
                "index.lock",
            ):
                assert writable(argv, str(place / written)), (project, place, written)
            for kept in ("config", "hooks/x", "commondir", "info/x", "modules/x", "worktrees/x"):
                assert writable(argv, str(place / kept)) is False, (project, place, kept)
            for kept in ("config.worktree", "objects/info/alternates"):
                assert writable(argv, str(place / kept)) is False, (project, place, kept)
    # the other worktree's own state is not the project's: read-only; so is all git does not write
    argv = boxview.files(root, grant="repository")
    assert writable(argv, str(gitdir / "description")) is False
    assert writable(argv, str(gitdir / "worktrees" / "wt" / "HEAD")) is False
    # missing, commondir stands in naming its gitdir itself: git dies on an empty one
    source = argv[argv.index(str(gitdir / "commondir")) - 1]
    assert Path(source).read_text() == ".\n" and not (gitdir / "commondir").exists()


# -- the attacks, with real bubblewrap, as root and as an ordinary user ----------------------------


@pytest.fixture
def work(user, monkeypatch):  # noqa: F811
    """~/work/proj outside /tmp (which the box replaces), a repository with one commit, and a home
    with a token in ~/.config/gh and git's config in ~/.config/git, all owned by the user."""
    base = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="amas-doors-"))
    home, root = base / "home", base / "home" / "work" / "proj"
    root.mkdir(parents=True)
    for name, text in {".config/gh/hosts.yml": "oauth_token: gho_SECRET\n"}.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    (home / ".config" / "git").mkdir()
    (home / ".config" / "git" / "config").write_text("[user]\n\tname = Me\n\temail = me@x\n")
    (root / "AGENTS.md").write_text("# rules\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "x", "--allow-empty")
    own(user, base)
    base.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    yield root
    shutil.rmtree(base, ignore_errors=True)


def git_as(person: str, place: Path, *args: str) -> subprocess.CompletedProcess:
    """Real git as the user, the user's own next command outside amas: hooks, fsmonitor and all."""
    who = NOBODY if person == "nobody" else []
    env = {**os.environ, "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x"}
    env.update(GIT_COMMITTER_NAME="u", GIT_COMMITTER_EMAIL="u@x")
    return subprocess.run([*who, "git", *args], cwd=place, env=env, capture_output=True, text=True)


def nothing_planted_runs(person: str, places: list[Path], pwned: Path) -> None:
    """The user's next git status and git commit, outside the box, in each repository: nothing
    planted runs."""
    for place in places:
        git_as(person, place, "status")
        done = git_as(person, place, "commit", "-qm", "after", "--allow-empty")
        assert done.returncode == 0, done.stderr
        assert not pwned.exists(), place


@needs_box
def test_a_grant_of_the_projects_parent_leaves_the_project_as_kept(user, work):  # noqa: F811
    """The person typed ~/work: grantable refuses it, and were it granted, the read-only set is
    mounted over it: .git's hooks and config, AGENTS.md and .amas stay as they are."""
    parent = work.parent
    assert "it holds the project" in sandbox.grantable("..", work)[1]
    pwned = parent / PWNED
    plant = (
        f"echo hi > ../build.log; echo 'touch {pwned}' > .git/hooks/post-commit; "
        f"chmod +x .git/hooks/post-commit; printf '{PLANT.format(pwned=pwned)}' >> .git/config; "
        "echo evil >> AGENTS.md; mkdir -p .amas; echo evil > .amas/rules.md; "
        "mv .git ../moved; echo evil > ../proj/.git/config"
    )
    config = (work / ".git" / "config").read_text()
    result = boxed(user, work, plant, box={"grant": str(parent)})
    assert (parent / "build.log").read_text() == "hi\n", result  # the grant opened its folder
    assert (work / ".git" / "config").read_text() == config
    assert not (work / ".git" / "hooks" / "post-commit").exists()
    assert (work / "AGENTS.md").read_text() == "# rules\n" and not (work / ".amas").exists()
    assert (work / ".git" / "HEAD").is_file()  # moved, it is only copied: it stays where it is
    nothing_planted_runs(user, [work], pwned)


@needs_box
def test_a_grant_of_a_folder_with_keys_shows_none_and_keeps_gits_config(user, work):  # noqa: F811
    home = Path(os.environ["HOME"])
    config = home / ".config"
    assert "it holds ~/.config/g" in sandbox.grantable("~/.config", work)[1]
    pwned = work.parent / PWNED
    line = (
        "cat ~/.config/gh/hosts.yml; echo stolen > ~/.config/gh/hosts.yml; "
        f"printf '{PLANT.format(pwned=pwned)}' >> ~/.config/git/config; "
        "mkdir -p ~/.config/newtool && echo made > ~/.config/newtool/x"
    )
    result = boxed(user, work, line, box={"grant": str(config)})
    assert "gho_SECRET" not in result
    assert (config / "gh" / "hosts.yml").read_text() == "oauth_token: gho_SECRET\n"
    assert "fsmonitor" not in (config / "git" / "config").read_text()
    assert (config / "newtool" / "x").read_text() == "made\n", result
    nothing_planted_runs(user, [work], pwned)


@needs_box
def test_the_repository_grant_takes_a_commit_but_nothing_that_runs(user, work):  # noqa: F811
    """With a submodule (its gitdir in .git/modules) and a linked worktree (its gitdir names the
    common one in commondir): commits land; each attack of the fifth review does not."""
    base = work.parent
    lib, wt = make_lib(work, base)
    own(user, base)
    pwned = base / PWNED
    fsmonitor = PLANT.format(pwned=pwned)
    plants = [
        f"printf '{fsmonitor}' >> .git/modules/lib/config",
        f"printf '{fsmonitor}' > .git/config.worktree",
        f"echo 'touch {pwned}' > .git/modules/lib/hooks/post-commit",
        f"echo 'touch {pwned}' > .git/hooks/pre-commit",
        f"cp -r .git {base}/copy && printf '{fsmonitor}' >> {base}/copy/config && "
        f"echo {base}/copy > .git/commondir",
        f"mkdir -p .git/modules/evil && printf '{fsmonitor}' > .git/modules/evil/config",
        f"echo {base}/copy/objects > .git/objects/info/alternates",
        "echo '* filter=evil' > .git/info/attributes",
        f"printf '{fsmonitor}' >> .git/worktrees/wt/config.worktree",
        f"echo {base}/copy > .git/worktrees/wt/commondir",
        "mv .git/modules .git/gone; mv .git ../gone",
    ]
    commit = "echo b > b.txt && git add b.txt && git commit -qm boxed"
    line = f"{commit} && (cd lib && {commit}); " + "; ".join(plants)
    result = boxed(user, work, line, box={"grant": "repository"})
    assert sure(work, "log", "-1", "--format=%s") == "boxed\n", result
    assert sure(work / "lib", "log", "-1", "--format=%s") == "boxed\n", result
    for made in ("commondir", "config.worktree", "modules/evil", "info/attributes"):
        assert not (work / ".git" / made).exists(), made
    nothing_planted_runs(user, [work, work / "lib", wt], pwned)
    result = boxed(user, wt, f"cd {wt} && {commit}", box={"grant": "repository"})
    assert sure(wt, "log", "-1", "--format=%s") == "boxed\n", result


def make_lib(root: Path, base: Path) -> tuple[Path, Path]:
    """A submodule lib in the project, and a linked worktree of it beside it."""
    lib = base / "lib"
    lib.mkdir()
    sure(lib, "init", "-q", "-b", "main")
    sure(lib, "commit", "-qm", "l", "--allow-empty")
    sure(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    sure(root, "commit", "-qm", "lib")
    sure(root, "worktree", "add", "-q", str(base / "wt"))
    return lib, base / "wt"


def sure(place: Path, *args: str) -> str:
    """git as the test (root) in a repository the ordinary user may own."""
    return git(place, "-c", "safe.directory=*", "-c", "user.name=u", "-c", "user.email=u@x", *args)


# -- asked as a person would be: proposed, checked, asked again, made ------------------------------


@pytest.fixture
def outside(home, monkeypatch):
    """A trusted project outside /tmp (the box has a /tmp of its own), as the current directory."""
    base = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="amas-doors-"))
    root = base / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "commit", "-qm", "x", "--allow-empty")
    monkeypatch.chdir(root)
    amas_home.set_trust(root, True)
    yield root
    shutil.rmtree(base, ignore_errors=True)


def spawn(root: Path, llm, *args: str) -> pexpect.spawn:
    """amas in a pseudo-terminal in root, at its prompt."""
    env = amas_env(llm, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm", NO_COLOR="1", COLUMNS="160")
    argv = amas_argv(*args, env=env)
    child = pexpect.spawn(argv[0], argv[1:], cwd=str(root), env=env, encoding="utf-8", timeout=30)
    child.expect("›")
    return child


@needs_box
def test_y_a_wrong_folder_then_the_right_one(outside, llm):
    """No folder to propose (the project's parent holds it): y says so and asks again; a link to
    the parent is named resolved, with its one reason, and asked again; a link to a new folder
    beside the project is shown resolved and made, asked, and the command runs again with it
    writable."""
    (outside / "up").symlink_to("..")
    (outside / "dest").symlink_to("../out")  # not there yet
    pwned = outside.parent / PWNED
    plant = f"echo evil > ../evil.txt; printf '{PLANT.format(pwned=pwned)}' >> .git/config"
    line = f"mkdir -p ../out && echo hi > ../out/x.txt; {plant}"
    llm.reply(tool="shell_command", command=line).reply(text="written")
    child = spawn(outside, llm, "-y")
    try:
        child.sendline("write it")
        child.expect("The command printed: mkdir: cannot create directory")
        child.expect("no folder to propose")
        child.expect(r"type the folder / \[n\]o: ")
        child.sendline("y")
        child.expect("no folder was proposed")
        child.sendline("up")
        child.expect(f"up \\({outside.parent}\\): it holds the project")
        child.expect(r"type the folder / \[n\]o: ")  # asked again: what was typed before is dropped
        child.sendline("dest")
        child.expect(f"dest is {outside.parent}/out \\(links followed\\); ")
        child.expect(f"{outside.parent}/out does not exist: amas makes it")
        child.sendline("y")
        child.expect("written")
    finally:
        child.close(force=True)
    assert (outside.parent / "out" / "x.txt").read_text() == "hi\n"
    assert sorted(os.listdir(outside.parent)) == ["out", "proj"]  # nothing outside the grant
    nothing_planted_runs("root", [outside], pwned)
    said = llm.requests[1]["messages"][-1]["content"]
    assert f"run again once with a writable {outside.parent}/out, as the user allowed" in said


@needs_box
def test_a_hidden_home_folder_is_named_and_its_grant_proposed(outside, home, llm):
    (home / ".cache" / "calc").mkdir(parents=True)
    (home / ".cache" / "huggingface").mkdir()  # ~/.cache holds keys: not proposed, not grantable
    pwned = outside.parent / PWNED
    plant = f"echo alias ls=x >> ~/.bashrc; printf '{PLANT.format(pwned=pwned)}' >> .git/config"
    line = f"echo 1 > ~/.cache/calc/x; {plant}"
    llm.reply(tool="shell_command", command=line).reply(text="stored")
    llm.reply(tool="shell_command", command="mkdir -p ~/.cache/newtool/db").reply(text="made")
    child = spawn(outside, llm, "-y")
    try:
        child.sendline("store it")
        child.expect("~/.cache/calc exists but the box hides your home")
        child.expect(r"\[y\]es: ~/.cache/calc")
        child.sendline("y")
        child.expect("stored")
        child.sendline("make it")
        child.expect("~/.cache/newtool writable \\(it does not exist yet: amas makes it\\)")
        child.expect(r"\[y\]es: ~/.cache/newtool")
        child.sendline("y")
        child.expect("made")
    finally:
        child.close(force=True)
    assert (home / ".cache" / "calc" / "x").read_text() == "1\n"
    assert (home / ".cache" / "newtool" / "db").is_dir()
    assert not (home / ".bashrc").exists()  # nothing outside the grant
    nothing_planted_runs("root", [outside], pwned)


@needs_box
def test_without_a_terminal_the_model_is_told_the_folder_exists_and_is_hidden(outside, home, llm):
    (home / ".config" / "tool").mkdir(parents=True)
    llm.reply(tool="shell_command", command="echo x > ~/.config/tool/settings").reply(text="ok")
    done = run_amas("-y", "go", llm=llm)
    said = llm.requests[1]["messages"][-1]["content"]
    assert "~/.config/tool exists but the box hides your home" in done.stderr
    assert "declined: no terminal to ask on" in done.stderr
    assert "~/.config/tool exists but the box hides your home; no run with more was granted" in said
    assert not (home / ".config" / "tool" / "settings").exists()


@needs_box
def test_a_silent_git_failure_in_the_read_only_repository_offers_its_grant(outside, llm):
    (outside / "a.txt").write_text("a\n")
    git(outside, "add", "a.txt")
    git(outside, "commit", "-qm", "a")
    (outside / "a.txt").write_text("changed\n")
    llm.reply(tool="shell_command", command="git stash").reply(text="stashed")
    child = spawn(outside, llm, "-y")
    try:
        child.sendline("stash it")
        child.expect("again once with the repository writable for a commit")
        child.sendline("y")
        child.expect("stashed")
    finally:
        child.close(force=True)
    assert git(outside, "stash", "list").startswith("stash@{0}")
    assert (outside / "a.txt").read_text() == "a\n"
    first = llm.requests[1]["messages"][-1]["content"]
    assert "[exit code 1]" in first and "as the user allowed" in first


@needs_box
def test_a_printed_path_the_box_does_not_refuse_offers_nothing(outside, llm):
    """What a command prints only names places: one the box lets it write (/tmp, the project) or
    that holds keys is no refusal, whatever the words around it."""
    fake = "touch: cannot touch '{}': Read-only file system"
    for place in ("/tmp/x", f"{outside}/x", "~/.ssh/id_rsa"):
        line = f'echo "{fake.format(place)}" >&2; exit 1'
        llm.reply(tool="shell_command", command=line).reply(text="ok")
        done = run_amas("-y", "go", llm=llm)
        assert "again once with" not in done.stderr, place
        assert "no run with more" not in llm.requests[-1]["messages"][-1]["content"]


@pytest.mark.skipif(not os.path.isdir("/run/user"), reason="no /run/user here")
def test_a_hidden_place_no_grant_opens_is_told_not_offered(bare):
    """/run/user, where programs outside the box listen: the box hides it (read from its mounts),
    the model is told so, and no folder question is asked."""
    said = "$ ls /run/user\nls: cannot open directory '/run/user': No such file\n[exit code 2]"
    refusal = sandbox.tried(said, bare, sandbox.Box())
    assert refusal.why == "/run/user exists but the box hides /run/user"
    assert refusal.folder == "" and "where programs outside the box listen" in refusal.reason
    assert sandbox.refused(said, bare, sandbox.Box()) == []
