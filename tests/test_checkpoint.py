"""Checkpoints against a git expert's scenarios, in real temporary repositories: after the agent's
changes and the matching /undo, the user's files (bytes, modes, links, empty folders), index, HEAD
and refs are as before, and the user's repository never moved while the agent worked."""

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import git, toolbox

from amas_code.checkpoint import Checkpoint, CheckpointError

SCENARIOS = {}


def scenario(git_repo: bool = True, skip: tuple = (), needs: str = ""):
    """Register a scenario:
    a function that sets up the user's state and returns the agent's tool calls."""

    def register(fn):
        SCENARIOS[fn.__name__] = (fn, git_repo, skip, needs)
        return fn

    return register


def sh(command: str) -> tuple:
    return "shell_command", {"command": command}


def edit(path: str, old: str, new: str) -> tuple:
    return "edit_file", {"path": path, "old_str": old, "new_str": new}


def create(path: str, content: str) -> tuple:
    return "create_file", {"path": path, "content": content}


def overwrite(path: str, content: str) -> tuple:
    return "write_file", {"path": path, "content": content}


def refuse(question: str) -> bool:
    raise AssertionError(f"asked although nothing changed since: {question}")


def files(root: Path, contents: dict) -> None:
    for name, data in contents.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())


def commit(root: Path, message: str = "user work") -> None:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)


def walk(top: Path, skip: tuple = ()) -> dict:
    """Every path under top: a file's mode and bytes, a link's target, a folder
    (empty ones included)."""
    out = {}
    for folder, dirs, names in os.walk(top):
        for name in dirs + names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, top)
            if any(rel == s or rel.startswith(s + "/") for s in skip):
                continue
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            else:
                out[rel] = (oct(st.st_mode & 0o777), Path(path).read_bytes())
    return out


def user_state(root: Path, skip: tuple = ()) -> dict:
    """Everything of the user's a checkpoint could touch: the work tree, the .git folder byte for
    byte, a folder beside the project ("outside"), and git's own view (all index stages, HEAD, refs,
    status)."""
    tree = walk(root, skip)
    state = {
        "files": {k: v for k, v in tree.items() if not (k == ".git" or k.startswith(".git/"))},
        "dotgit": {k: v for k, v in tree.items() if k.startswith(".git/")},
        "outside": walk(root.parent / "outside"),
    }
    if (root / ".git").exists():
        # reading status must not refresh the user's index
        env = {
            **os.environ,
            "GIT_OPTIONAL_LOCKS": "0",
        }
        for name, args in {
            "stages": ["ls-files", "-s"],
            "head": ["rev-parse", "HEAD"],
            "refs": ["for-each-ref"],
            "status": ["status", "--porcelain=v2", "-uall", "--ignore-submodules=all"],
        }.items():
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, env=env)
            state[name] = done.stdout + done.stderr
    return state


def repo_part(state: dict) -> dict:
    """What the agent's work must never move:
    the user's .git folder and git's index, HEAD and refs."""
    return {k: v for k, v in state.items() if k in ("dotgit", "stages", "head", "refs")}


def assert_whole(shadow: Path, root: Path) -> None:
    """The shadow's objects are well-formed,
    and its checkpoints whole without the user's objects."""
    env = {**os.environ, "GIT_DIR": str(shadow)}
    if (root / ".git").exists():  # the snapshots' own trees name the user's objects
        env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(root / ".git" / "objects")
    fsck = subprocess.run(
        ["git", "fsck", "--strict", "--no-dangling"], capture_output=True, text=True, env=env
    )
    assert fsck.returncode == 0 and not fsck.stderr, fsck.stderr
    env.pop("GIT_ALTERNATE_OBJECT_DIRECTORIES", None)
    cmd = ["git", "rev-list", "--objects", "--missing=print", "--all"]
    listed = subprocess.run(cmd, capture_output=True, env=env).stdout
    assert listed and not [line for line in listed.splitlines() if line.startswith(b"?")]


def round_trip(root: Path, actions: list, skip: tuple = ()) -> Checkpoint:
    """The invariant: the agent's calls make one checkpoint each without moving the user's
    repository; undoing them all gives back the user's state exactly; redoing gives back the
    agent's."""
    before = user_state(root, skip)
    # unboxed: the box keeps the repository read-only, and these scenarios run git in it
    box = toolbox(root, checkpoint=True, auto_accept=True, sandbox="off")
    for name, args in actions:
        if name == "write_file":  # it replaces only a file the model has read
            box.execute("read_file", json.dumps({"path": args["path"]}))
        result = box.execute(name, json.dumps(args))
        assert "Error" not in result and "checkpoint failed" not in result, result
        assert "[checkpoint:" in result, result
    after = user_state(root, skip)
    # HEAD, refs, index, .git untouched while the agent worked
    assert repo_part(after) == repo_part(before)
    assert after["files"] != before["files"]
    cp = Checkpoint(root, box.config["ignore"], "other-session")  # a new amas process undoes it
    assert len(cp.history()) == len(actions)
    cp.undo(len(actions), refuse)
    assert user_state(root, skip) == before
    for _ in actions:
        cp.redo(refuse)
    assert user_state(root, skip) == after
    assert_whole(cp.dir, root)
    cp.undo(len(actions), refuse)
    assert user_state(root, skip) == before
    return cp


# -- ordinary work ---------------------------------------------------------------------------------
@scenario()
def file_tools_edit_create_overwrite(root):
    files(root, {"app.py": "a = 1\nb = 2\n", "data.txt": b"keep\r\nme\x00?\n"})
    commit(root)
    return [
        edit("app.py", "a = 1", "a = 10"),
        create("pkg/new/mod.py", "x = 1\n"),
        overwrite("data.txt", "replaced\n"),
        edit("app.py", "b = 2", "b = 20"),
    ]


@scenario()
def shell_edit_create_delete_rename(root):
    files(root, {"a.txt": "one\n", "b.txt": "two\n", "c.txt": "three\n", "u.txt": "untracked\n"})
    commit(root)
    files(root, {"a.txt": "one, edited by the user\n", "v.txt": "user's untracked\n"})
    return [
        sh(
            "sed -i 's/one/ONE/' a.txt && echo new > n.txt && rm b.txt && mv c.txt d.txt "
            "&& rm v.txt"
        )
    ]


@scenario()
def odd_names(root):
    names = [
        "sp ace.txt",
        "new\nline.txt",
        "ünï😀.txt",
        "-dash.txt",
        'q"uo\\te.txt',
        "tab\t.txt",
        "*.txt",
    ]
    files(root, {n: f"{n}\n" for n in names})
    (root / os.fsdecode(b"bad\xff.txt")).write_bytes(b"not utf-8 name\n")
    commit(root)
    script = (  # given inline: a file beside the project is not in the box's private /tmp
        "import os\n"
        "for n in os.listdir(b'.'):\n"
        "    if n.endswith(b'.txt'):\n"
        "        open(n, 'ab').write(b'more\\n')\n"
        "open('-new \\n\\u00e9.txt', 'w').write('x')\n"
        "os.rename('sp ace.txt', 'sp  ace.txt')\n"
    )
    return [sh(f"python3 -c {shlex.quote(script)}"), edit("-dash.txt", "more", "less")]


@scenario()
def nested_and_empty_folders(root):
    (root / "keep" / "empty").mkdir(parents=True)  # the user's own empty folders must survive
    (root / "gone").mkdir()
    return [
        sh("mkdir -p deep/er/est && echo x > deep/er/est/f && mkdir -p hollow/a/b && rmdir gone"),
        create("made/by/tool.txt", "x\n"),
        sh("mkdir keep/empty/inner && echo y > keep/new.txt"),
    ]


@scenario()
def file_folder_swaps(root):
    files(root, {"f": "a file\n", "d/x": "in a folder\n", "d/y": "also\n"})
    commit(root)
    return [sh("rm f && mkdir f && echo in > f/inner && rm -r d && echo now-a-file > d")]


@scenario()
def folder_link_swaps(root):
    files(root, {"d/x": "in a folder\n", "target/t": "t\n"})
    os.symlink("target", root / "l")
    if (root / ".git").exists():
        commit(root)
    return [sh("mv d d.old && ln -s d.old d && rm l && mkdir l && echo in > l/inner")]


@scenario(git_repo=False)
def folder_link_swaps_without_git(root):
    return folder_link_swaps(root)


@scenario()
def detached_head(root):
    files(root, {"a.txt": "a\n"})
    commit(root)
    git(root, "checkout", "-q", "--detach")
    return [edit("a.txt", "a", "b"), sh("echo c >> a.txt")]


@scenario(git_repo=False)
def no_git(root):
    files(root, {"a.txt": "a\n", "sub/b.txt": "b\n"})
    return [edit("a.txt", "a", "A"), sh("rm sub/b.txt && echo c > c.txt")]


@scenario()
def fresh_git_init(root):
    shutil.rmtree(root / ".git")
    git(root, "init", "-q")
    files(root, {"a.txt": "a\n"})
    return [edit("a.txt", "a", "A"), create("b.txt", "b\n")]


@scenario()
def ignored_but_tracked(root):
    files(
        root,
        {".gitignore": "dist/\n*.log\n", "dist/bundle.js": "v1\n", "keep.log": "tracked log\n"},
    )
    git(root, "add", "-f", ".gitignore", "dist/bundle.js", "keep.log")
    git(root, "commit", "-qm", "build output committed")
    return [sh("echo v2 > dist/bundle.js && echo more >> keep.log")]


# -- the user's index and merge state --------------------------------------------------------------
@scenario()
def staged_partial_and_new(root):
    files(root, {"a.txt": "".join(f"line {i}\n" for i in range(20))})
    commit(root)
    files(
        root,
        {
            "a.txt": "STAGED\n" + "".join(f"line {i}\n" for i in range(1, 20)),
            "n.txt": "staged new\n",
        },
    )
    git(root, "add", "a.txt", "n.txt")
    files(root, {"a.txt": "STAGED\n" + "".join(f"line {i}\n" for i in range(1, 19)) + "unstaged\n"})
    files(root, {"n.txt": "staged new, then edited\n", "s.txt": "only staged\n"})
    git(root, "add", "s.txt")
    files(root, {"s.txt": "worktree differs\n"})
    return [
        edit("a.txt", "line 5", "agent 5"),
        edit("n.txt", "edited", "agent"),
        sh("echo x >> s.txt"),
    ]


@scenario()
def mid_merge_conflict(root):
    files(root, {"c.txt": "base\n"})
    commit(root)
    git(root, "checkout", "-qb", "theirs")
    files(root, {"c.txt": "theirs\n"})
    commit(root, "theirs")
    git(root, "checkout", "-q", "main")
    files(root, {"c.txt": "ours\n"})
    commit(root, "ours")
    assert subprocess.run(
        ["git", "merge", "-q", "theirs"], cwd=root, capture_output=True
    ).returncode
    return [edit("c.txt", "<<<<<<< HEAD\n", ""), sh("echo resolved > c.txt")]


@scenario()
def mid_rebase(root):
    files(root, {"r.txt": "base\n"})
    commit(root)
    git(root, "checkout", "-qb", "topic")
    files(root, {"r.txt": "topic\n"})
    commit(root, "topic")
    git(root, "checkout", "-q", "main")
    files(root, {"r.txt": "main\n"})
    commit(root, "main")
    git(root, "checkout", "-q", "topic")
    assert subprocess.run(["git", "rebase", "main"], cwd=root, capture_output=True).returncode
    return [sh("echo agent > r.txt")]


# -- bytes exactly, whatever git's attributes say --------------------------------------------------
@scenario()
def crlf_autocrlf(root):
    git(root, "config", "core.autocrlf", "true")
    files(root, {"w.txt": b"one\r\ntwo\r\n", "mixed.txt": b"a\r\nb\n"})
    commit(root)
    return [
        edit("w.txt", "two", "2"),
        sh("printf 'three\\r\\n' >> w.txt && printf 'c\\n' >> mixed.txt"),
    ]


@scenario()
def eol_and_encoding_attributes(root):
    files(root, {".gitattributes": "*.crlf eol=crlf\n*.u16 working-tree-encoding=UTF-16\n"})
    files(root, {"a.crlf": b"x\r\ny\r\n", "b.u16": "h\u00e9llo\n".encode("utf-16")})
    commit(root)
    return [
        sh(
            "printf 'z\\r\\n' >> a.crlf "
            "&& python3 -c \"open('b.u16','ab').write('!'.encode('utf-16-le'))\""
        )
    ]


@scenario()
def clean_filter(root):
    git(root, "config", "filter.upper.clean", "tr a-z A-Z")
    git(root, "config", "filter.upper.smudge", "cat")
    files(root, {".gitattributes": "*.up filter=upper\n", "f.up": "lower case\n"})
    commit(root)
    return [edit("f.up", "lower", "still lower"), sh("echo more lower >> f.up")]


@scenario(needs="lfs")
def git_lfs(root):
    git(root, "lfs", "install", "--local")
    git(root, "lfs", "track", "*.bin")
    files(root, {"model.bin": b"\x00real large content\xff" * 1000})
    commit(root)
    return [sh("printf 'appended' >> model.bin")]


# -- links, modes, submodules, size ----------------------------------------------------------------
@scenario()
def symlinks(root):
    files(root, {"a.txt": "a\n", "b.txt": "b\n", "sub/in.txt": "in\n"})
    files(root.parent / "outside", {"secret.txt": "outside secret 7f3a\n"})
    os.symlink("a.txt", root / "l")
    os.symlink("sub", root / "dl")
    os.symlink("../outside/secret.txt", root / "out")
    commit(root)
    return [
        sh(
            "rm l && ln -s b.txt l2 && ln -s sub newdirlink && rm out && echo replaced > out "
            "&& ln -sfn b.txt dl"
        ),
        # undo must replace this link, not write through it
        sh("rm a.txt && ln -s ../outside/secret.txt a.txt"),
    ]


@scenario()
def modes(root):
    files(root, {"run.sh": "#!/bin/sh\necho hi\n", "data.txt": "d\n"})
    os.chmod(root / "run.sh", 0o755)
    commit(root)
    return [
        sh("chmod -x run.sh && chmod +x data.txt"),
        edit("data.txt", "d", "e"),
        sh("chmod +x run.sh"),
    ]


@scenario(skip=("sub", ".git/modules"))
def submodule_left_alone(root):
    src = root.parent / "subsrc"
    src.mkdir()
    files(src, {"s.txt": "1\n"})
    git(src, "init", "-q")
    commit(src, "one")
    files(src, {"s.txt": "2\n"})
    commit(src, "two")
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(src), "sub")
    commit(root, "add submodule")
    return [sh("cd sub && git checkout -q HEAD~1 && cd .. && echo more >> README.md")]


@scenario()
def big_tracked_file(root):
    files(root, {"big.dat": b"0123456789abcdef" * (12 * 2**16)})  # 12 MB: past BIG, streamed by git
    commit(root)
    return [sh("printf tail >> big.dat")]


# -- found by probing after the first shadow version: what git ignores, and amas's own names -------
@scenario()
def unignored_by_the_command(root):
    files(
        root,
        {
            ".gitignore": ".env\nvenv/\n",
            ".env": "API_KEY=user-secret\n",
            "venv/lib.py": "user's venv\n",
        },
    )
    git(root, "add", ".gitignore")
    git(root, "commit", "-qm", "ignore")
    # they were there before: undo must not delete them
    return [sh("sed -i '/^.env$/d;/^venv/d' .gitignore")]


# an agent's `cp .env.example .env` over the user's only copy
@scenario()
def ignored_files_overwritten_or_removed(
    root,
):
    files(
        root,
        {
            ".gitignore": ".env\n*.log\n",
            ".env.example": "API_KEY=\n",
            "run.log": "the user's log\n",
        },
    )
    commit(root)
    files(root, {".env": "API_KEY=the user's only copy\n"})
    return [sh("cp .env.example .env && rm run.log && echo x >> README.md")]


# no shadow index yet: dist/ is not "ignored" here
@scenario()
def ignored_but_tracked_moved_by_the_first_command(
    root,
):
    files(root, {".gitignore": "dist/\n", "dist/app.js": "v1\n"})
    git(root, "add", "-f", ".gitignore", "dist/app.js")
    git(root, "commit", "-qm", "build output committed")
    return [sh("mv dist old-dist")]


@scenario()
def a_folder_of_small_ignored_files_removed(root):  # every file of logs/ is kept: logs/ is not lost
    files(root, {".gitignore": "*.log\n", "logs/app.log": "the user's log\n"})
    commit(root)
    return [sh("rm -rf logs && echo agent > new.py")]


# the user's index still names conf/x, beyond the link
@scenario()
def a_tracked_folder_the_user_made_a_link(
    root,
):
    files(root, {"conf/x": "x\n", "a.txt": "a\n"})
    commit(root)
    subprocess.run("mv conf conf.real && ln -s conf.real conf", shell=True, cwd=root, check=True)
    files(root, {"notes.txt": "the user's notes\n"})
    return [sh("rm notes.txt && echo agent > a.txt")]


# amas's own ignore list: build/ is kept out, dist a file
@scenario(git_repo=False)
def ignored_files_overwritten_without_git(
    root,
):
    files(root, {"app.py": "a\n", "build/out.o": "built\n", "dist": "the user's notes\n"})
    return [sh("echo new > dist && echo b >> app.py")]


@scenario()
def folders_named_like_build_output(root):
    files(
        root, {"docs/build/chapter1.md": "user's uncommitted chapter\n", "dist": "user's notes\n"}
    )
    # not ignored by git: amas's own ignore list must not hide them
    return [sh("rm -rf docs/build dist")]


@scenario()
def a_file_named_like_the_undo_temporary(root):
    files(root, {".amas-undo.tmp": "the user's\n", "a.txt": "a\n"})
    commit(root)
    return [sh("echo agent > a.txt")]


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario(name, bare):
    fn, git_repo, skip, needs = SCENARIOS[name]
    if needs == "lfs" and subprocess.run(["git", "lfs", "version"], capture_output=True).returncode:
        pytest.skip("git lfs is not installed (Debian package git-lfs)")
    if git_repo:
        (bare / "README.md").write_text("# demo\n")
        git(bare, "init", "-q", "-b", "main")
        commit(bare, "initial")
    round_trip(bare, fn(bare), skip)


# -- what the scenarios cannot show on their own ---------------------------------------------------
def test_the_shadow_repository_holds_links_as_links_and_no_outside_content(project, home):
    (project.parent / "outside").mkdir()
    (project.parent / "outside" / "secret.txt").write_text("outside secret 7f3a\n")
    box = toolbox(project, checkpoint=True, auto_accept=True)
    box.execute(
        "shell_command", json.dumps({"command": "ln -s ../outside/secret.txt s && ln -s .. up"})
    )
    assert list(box.checkpoint.history()[0]["files"]) == ["s", "up"]
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=box.checkpoint.dir,
        capture_output=True,
    ).stdout
    assert b"7f3a" not in objects and b"../outside/secret.txt" in objects


def test_ignored_files_are_never_copied_and_make_no_checkpoint(project):
    (project / ".gitignore").write_text("build/\n*.log\n")
    box = toolbox(project, checkpoint=True, auto_accept=True)
    mark = (
        "printf 5e%s 1f >"  # the content is not in the command, which the checkpoint's label holds
    )
    result = box.execute(
        "shell_command", json.dumps({"command": f"mkdir build && {mark} build/o && {mark} x.log"})
    )
    assert "checkpoint" not in result and box.checkpoint.history() == []
    box.execute(
        "shell_command", json.dumps({"command": f"{mark} node_modules.txt && mkdir node_modules"})
    )
    box.execute("shell_command", json.dumps({"command": f"{mark} node_modules/x"}))
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=box.checkpoint.dir,
        capture_output=True,
    )
    assert objects.stdout.count(b"5e1f") == 1  # the one file that is not ignored


def test_nothing_is_written_to_the_users_git_and_no_program_of_the_repository_runs(project):
    marker = project.parent / "ran"
    hook = f"#!/bin/sh\necho $0 >> {marker}\n"
    for name in [
        "pre-commit",
        "post-commit",
        "post-checkout",
        "post-index-change",
        "reference-transaction",
    ]:
        (project / ".git" / "hooks" / name).write_text(hook)
        os.chmod(project / ".git" / "hooks" / name, 0o755)
    git(project, "config", "core.fsmonitor", str(project / ".git" / "hooks" / "pre-commit"))
    git(project, "config", "filter.mark.clean", f"sh -c 'echo clean >> {marker}; cat'")
    git(project, "config", "filter.mark.smudge", f"sh -c 'echo smudge >> {marker}; cat'")
    (project / ".gitattributes").write_text("* filter=mark\n")
    before = walk(project / ".git")
    box = toolbox(project, checkpoint=True, auto_accept=True)
    box.execute(
        "edit_file", json.dumps({"path": "README.md", "old_str": "demo", "new_str": "agent"})
    )
    box.execute("shell_command", json.dumps({"command": "echo x > new.txt && echo y >> README.md"}))
    box.checkpoint.changes()
    box.checkpoint.undo(2, refuse)
    box.checkpoint.redo(refuse)
    assert not marker.exists() and walk(project / ".git") == before


def times(top: Path) -> dict:
    """Every path under top with its modification and change times (ns)."""
    out = {}
    for folder, dirs, names in os.walk(top):
        for name in dirs + names:
            st = os.lstat(os.path.join(folder, name))
            out[os.path.relpath(os.path.join(folder, name), top)] = (st.st_mtime_ns, st.st_ctime_ns)
    return out


def test_amas_touches_no_time_in_your_project_but_git_freshening_your_objects(project):
    """What amas's git touches of yours, exactly: your files, index, refs and config keep their
    times (no `git status` refreshes your index); git may only re-time objects of .git/objects it
    found there ("freshen": it would otherwise have written them), which changes no byte."""
    (project / "src").mkdir()
    (project / "src" / "m.py").write_text("x = 1\n")
    commit(project)
    (project / "notes.txt").write_text("untracked\n")
    before, content = times(project), walk(project / ".git")
    box = toolbox(project, checkpoint=True, auto_accept=True)
    for name, args in [
        ("search_files", {"pattern": "x = 1"}),
        ("search_files", {"pattern": r"x\s="}),
        ("list_files", {}),
        ("read_file", {"path": "src/m.py"}),
        ("shell_command", {"command": "echo new > made.txt"}),
    ]:
        box.execute(name, json.dumps(args))
    box.checkpoint.changes()
    box.checkpoint.undo(1, refuse)
    after = times(project)
    changed = sorted(p for p in before if before[p] != after.get(p))
    assert all(p.startswith(".git/objects/") for p in changed), changed
    assert walk(project / ".git") == content and sorted(after) == sorted(before)


def test_checkpoint_content_survives_the_users_gc(project):
    (project / "a.txt").write_text("only ever in a commit the user throws away\n")
    commit(project, "throwaway")
    box = toolbox(project, checkpoint=True, auto_accept=True)
    box.execute("shell_command", json.dumps({"command": "echo agent > a.txt"}))
    git(project, "reset", "-q", "--hard", "HEAD~1")
    git(project, "reflog", "expire", "--expire=now", "--all")
    git(project, "gc", "-q", "--prune=now")
    (project / "a.txt").write_text("agent\n")  # as the agent left it
    box.checkpoint.undo(1, refuse)
    assert (project / "a.txt").read_text() == "only ever in a commit the user throws away\n"


def test_tracked_content_is_borrowed_not_copied(project):
    (project / "big.bin").write_bytes(os.urandom(4 << 20))
    commit(project)
    box = toolbox(project, checkpoint=True, auto_accept=True)
    box.execute("shell_command", json.dumps({"command": "echo x > small.txt"}))
    size = sum(f.stat().st_size for f in box.checkpoint.dir.rglob("*") if f.is_file())
    assert size < 1 << 20


def test_a_file_changed_since_is_shown_and_asked_about(project):
    (project / "a.txt").write_text("a\n")
    commit(project)
    box = toolbox(project, checkpoint=True, auto_accept=True)
    box.execute("edit_file", json.dumps({"path": "a.txt", "old_str": "a", "new_str": "agent"}))
    box.execute("shell_command", json.dumps({"command": "echo b > b.txt"}))
    (project / "a.txt").write_text("user's later work\n")
    git(project, "commit", "-qam", "user commits on top", "--amend")
    asked = []
    with pytest.raises(CheckpointError, match="nothing changed"):
        box.checkpoint.undo(2, lambda q: asked.append(q) or False)
    assert asked == ["a.txt changed since the checkpoint. Discard those edits?"]
    assert (project / "a.txt").read_text() == "user's later work\n" and (project / "b.txt").exists()
    assert box.checkpoint.undo(2, lambda q: True) == ["a.txt", "b.txt"]
    assert (project / "a.txt").read_text() == "a\n" and not (project / "b.txt").exists()


def test_worktrees_have_their_own_checkpoints_and_redo(project):
    other = project.parent / "wt"
    git(project, "worktree", "add", "-q", str(other))
    main_box = toolbox(project, checkpoint=True, auto_accept=True)
    wt_box = toolbox(other, checkpoint=True, auto_accept=True)
    main_box.execute("create_file", json.dumps({"path": "m.txt", "content": "m\n"}))
    wt_box.execute("create_file", json.dumps({"path": "w.txt", "content": "w\n"}))
    assert main_box.checkpoint.dir != wt_box.checkpoint.dir
    main_box.checkpoint.undo(1, refuse)
    with pytest.raises(CheckpointError, match="nothing to redo"):
        wt_box.checkpoint.redo(refuse)
    assert (other / "w.txt").exists() and not (project / "m.txt").exists()


def test_undo_never_writes_through_a_linked_folder(project):
    outside = project.parent / "outside"
    outside.mkdir()
    (outside / "f").write_text("outside\n")
    box = toolbox(project, checkpoint=True, auto_accept=True)
    box.execute("shell_command", json.dumps({"command": "mkdir d && echo agent > d/f"}))
    shutil.rmtree(project / "d")
    # the user (or a later change) puts a link where the folder was
    os.symlink(outside, project / "d")
    with pytest.raises(CheckpointError, match="symlink; nothing changed"):
        box.checkpoint.undo(1, lambda q: True)
    assert (outside / "f").read_text() == "outside\n" and os.path.islink(project / "d")


def test_one_folder_per_project_in_the_users_home(project, home):
    box = toolbox(project, checkpoint=True, auto_accept=True)
    box.execute("create_file", json.dumps({"path": "n.txt", "content": "n\n"}))
    assert [p.name for p in (home / ".amas" / "checkpoints").iterdir()] == [box.checkpoint.dir.name]
    assert (
        box.checkpoint.dir.name.startswith("proj-")
        and stat.S_IMODE(box.checkpoint.dir.stat().st_mode) == 0o700
    )
    assert not (project / ".amas").exists() or not any((project / ".amas").rglob("*.pack"))


def test_a_file_the_user_tracks_later_is_checkpointed_though_ignored(project):
    (project / ".gitignore").write_text("config.local\nbuild/\n")
    commit(project)
    box = toolbox(project, checkpoint=True, auto_accept=True)
    # the shadow exists now
    box.execute("shell_command", json.dumps({"command": "echo first > first.txt"}))
    files(project, {"config.local": "v1\n", "build/gen.c": "v1\n"})
    git(project, "add", "-f", "config.local", "build/gen.c")
    git(project, "commit", "-qm", "track them")
    files(project, {"config.local": "user's edits\n", "build/gen.c": "user's edits\n"})
    result = box.execute(
        "shell_command",
        json.dumps({"command": "echo agent > config.local && echo agent > build/gen.c"}),
    )
    assert "[checkpoint: 2 files;" in result
    box.checkpoint.undo(1, refuse)
    assert (
        (project / "config.local").read_text()
        == (project / "build/gen.c").read_text()
        == "user's edits\n"
    )


def test_git_commands_of_the_agent_are_named_as_what_undo_does_not_put_back(project, capsys):
    box = toolbox(project, checkpoint=True, auto_accept=True, sandbox="off")  # git writes .git
    moved = "git's HEAD, branches or index changed too, which /undo does not put back"
    result = box.execute(
        "shell_command", json.dumps({"command": "git checkout -qb wip && echo x >> README.md"})
    )
    assert f"[checkpoint: 1 file; /undo takes it back; {moved}]" in result
    result = box.execute(
        "shell_command",
        json.dumps({"command": "git -c user.name=a -c user.email=a@b commit -qam wip"}),
    )
    # no file changed: no checkpoint
    assert result.endswith(f"[{moved}]") and len(box.checkpoint.history()) == 1
    capsys.readouterr()
    box.checkpoint.undo(1, lambda q: True)
    assert (
        moved in " ".join(capsys.readouterr().err.split())
        and (project / "README.md").read_text() == "# demo\n"
    )
    plain = box.execute("shell_command", json.dumps({"command": "git status -s && echo y > y.txt"}))
    assert "[checkpoint: 1 file; /undo takes it back]" in plain  # reading git moves nothing


def test_an_undo_stopped_part_way_says_so_and_can_be_run_again(project):
    files(project, {"a": "a\n", "longer.txt": "l\n"})
    commit(project)
    box = toolbox(project, checkpoint=True, auto_accept=True)
    box.execute("shell_command", json.dumps({"command": "rm a longer.txt"}))
    # a folder of the user's where a file comes back
    files(project, {"longer.txt/mine": "the user's\n"})
    with pytest.raises(
        CheckpointError, match="stopped part way .*Directory not empty.*running it again goes on"
    ):
        box.checkpoint.undo(1, refuse)
    assert (project / "a").read_text() == "a\n" and (project / "longer.txt/mine").exists()
    shutil.rmtree(project / "longer.txt")
    assert (
        box.checkpoint.undo(1, refuse) == ["a", "longer.txt"]
        and (project / "longer.txt").read_text() == "l\n"
    )


@pytest.mark.parametrize("registered", [False, True])
def test_no_program_of_a_nested_repository_runs(project, registered):
    """The shadow's `git add` once ran `git status` inside a nested repository,
    and with it that one's filters."""
    lib, marker = project / "vendor" / "lib", project.parent / "ran"
    lib.mkdir(parents=True)
    git(lib, "init", "-q")
    git(lib, "config", "filter.mark.clean", f"sh -c 'echo clean >> {marker}; cat'")
    files(lib, {".gitattributes": "* filter=mark\n", "lib.c": "int x;\n"})
    commit(lib)
    if registered:
        git(
            project,
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            "./vendor/lib",
            "vendor/lib",
        )
        commit(project, "add submodule")
    marker.unlink(missing_ok=True)
    box = toolbox(project, checkpoint=True, auto_accept=True)
    for n in range(3):
        # stat-dirty in the nested index: a status there would run its filter
        os.utime(lib / "lib.c", (n, n))
        assert "checkpoint: 1 file" in box.execute(
            "shell_command", json.dumps({"command": f"echo {n} > a{n}.txt"})
        )
    assert not marker.exists()
    box.checkpoint.undo(3, refuse)
    assert not list(project.glob("a*.txt")) and (lib / "lib.c").read_text() == "int x;\n"


def test_undo_keeps_what_a_command_made_when_it_removed_a_file_git_ignores(project, capsys):
    """A small ignored file is kept (see the scenarios);
    one in an ignored folder is not, nor is one over 1 MiB."""
    files(project, {".gitignore": "secrets/\n", "secrets/.env": "KEY=the user's only copy\n"})
    commit(project)
    box = toolbox(project, checkpoint=True, auto_accept=True)
    result = box.execute(
        "shell_command", json.dumps({"command": "mv secrets env.backup && echo x >> README.md"})
    )
    lost = (
        "it removed secrets/, which /undo cannot bring back "
        "(git ignores it, it is a repository of its own, or only"
    )
    assert lost in " ".join(result.split())
    capsys.readouterr()
    assert (
        box.checkpoint.undo(1, refuse) == ["README.md"]
        and (project / "README.md").read_text() == "# demo\n"
    )
    assert (project / "env.backup/.env").read_text() == "KEY=the user's only copy\n"
    assert lost in " ".join(capsys.readouterr().err.split())
    assert box.checkpoint.redo(refuse) == ["README.md", "env.backup/.env"]
    assert (project / "env.backup/.env").read_text() == "KEY=the user's only copy\n"
    box.checkpoint.undo(1, refuse)
    plain = box.execute("shell_command", json.dumps({"command": "echo y > y.txt"}))
    assert plain.endswith("[checkpoint: 1 file; /undo takes it back]")
    assert box.checkpoint.undo(1, refuse) == ["y.txt"] and not (project / "y.txt").exists()


AS_A_USER = """
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from conftest import toolbox
root = Path(sys.argv[2])
box = toolbox(root, checkpoint=True, auto_accept=True)
said = [box.execute("shell_command", json.dumps({"command": c}))
        for c in ("echo 1 > made.txt", sys.argv[3])]
print(json.dumps({"said": said, "undone": box.checkpoint.undo(1, lambda q: False)}))
"""


@pytest.mark.parametrize("language", ["", "de"])  # git's messages in German were not understood
def test_a_file_a_command_only_made_readable_is_never_deleted_by_undo(tmp_path, language):
    """Unreadable before the command, git could not snapshot it; readable after, it looked new, and
    /undo deleted it. Root reads anything: as root the scenario runs as nobody."""
    # where nobody can go: tmp_path's parents are private
    base = Path(tempfile.mkdtemp(prefix="amas-unread-"))
    root, home = base / "proj", base / "home"
    try:
        for folder in (base, root, home):
            folder.mkdir(exist_ok=True)
            os.chmod(folder, 0o777)
        files(root, {"README.md": "# demo\n", "secret.cfg": "tracked, unreadable\n"})
        git(root, "init", "-q", "-b", "main")
        commit(root)
        files(root, {"private.txt": "only copy\n", "vault/notes.txt": "only copy too\n"})
        as_nobody = (
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            if os.geteuid() == 0
            else []
        )
        subprocess.run(["chown", "-R", "65534:65534", str(base)], check=True) if as_nobody else None
        for path in ("private.txt", "secret.cfg", "vault"):
            os.chmod(root / path, 0)
        env = {
            **os.environ,
            "HOME": str(home),
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "LANGUAGE": language,
        }
        tests = str(Path(__file__).parent)
        command = "chmod 644 private.txt && chmod 755 vault"
        done = subprocess.run(
            [*as_nobody, sys.executable, "-c", AS_A_USER, tests, str(root), command],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        # one unreadable file: still on
        assert out["said"][0].endswith("[checkpoint: 1 file; /undo takes it back]")
        # nothing looked new
        assert "checkpoint" not in out["said"][1] and out["undone"] == ["made.txt"]
        assert (root / "private.txt").read_text() == "only copy\n" and (
            root / "vault/notes.txt"
        ).exists()
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(base)])
        shutil.rmtree(base, ignore_errors=True)


def test_a_command_that_moves_the_users_git_away_still_gets_its_checkpoint(project, capsys):
    (project / "notes.txt").write_text("untracked, the only copy\n")
    # unboxed, as the user may let it run: in the box .git/config is a mount point and ../ read-only
    box = toolbox(project, checkpoint=True, auto_accept=True, sandbox="off")
    result = box.execute(
        "shell_command", json.dumps({"command": "mv .git ../moved.git && rm notes.txt"})
    )
    assert (
        "[checkpoint: 1 file; /undo takes it back; git's HEAD, branches or index changed too"
        in result
    )
    box.checkpoint.undo(1, refuse)
    assert (project / "notes.txt").read_text() == "untracked, the only copy\n"


@pytest.mark.parametrize(
    "command", ["git update-index --assume-unchanged README.md", "git sparse-checkout set d"]
)
def test_index_flags_a_command_sets_are_named_as_git_changes(project, command):
    files(project, {"d/a": "a\n", "e/b": "b\n"})
    commit(project)
    # unboxed, as the user may let it run: in the box sparse-checkout cannot write .git/config
    box = toolbox(project, checkpoint=True, auto_accept=True, sandbox="off")
    assert "git's HEAD, branches or index changed too" in box.execute(
        "shell_command", json.dumps({"command": command})
    )


def test_names_git_refuses_on_windows_are_covered_on_linux(project):
    files(project, {"git~1": "user's\n", ".git.": "also\n"})
    box = toolbox(project, checkpoint=True, auto_accept=True)
    box.execute("shell_command", json.dumps({"command": "rm git~1 .git. && echo y >> README.md"}))
    box.checkpoint.undo(1, refuse)
    assert (project / "git~1").read_text() == "user's\n" and (
        project / ".git."
    ).read_text() == "also\n"


def test_undoing_two_checkpoints_asks_about_your_edit_between_them(project):
    files(project, {"a.txt": "a0\n"})
    commit(project)
    box = toolbox(project, checkpoint=True, auto_accept=True)
    box.execute("edit_file", json.dumps({"path": "a.txt", "old_str": "a0", "new_str": "a1"}))
    (project / "a.txt").write_text("your edit\n")
    box.execute("shell_command", json.dumps({"command": "echo agent >> a.txt"}))
    asked = []
    with pytest.raises(CheckpointError, match="cancelled; nothing changed"):
        box.checkpoint.undo(2, lambda q: asked.append(q) or False)
    assert asked == ["a.txt changed since the checkpoint. Discard those edits?"]
    assert (project / "a.txt").read_text() == "your edit\nagent\n"


def test_files_your_info_exclude_ignores_are_never_copied(project):
    (project / ".git/info/exclude").write_text("# mine\n.env\n")
    (project / ".env").write_text("KEY=s3cr3t-9f8e7d\n")
    box = toolbox(project, checkpoint=True, auto_accept=True)
    assert "checkpoint: 1 file" in box.execute(
        "shell_command", json.dumps({"command": "echo y >> README.md"})
    )
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=box.checkpoint.dir,
        capture_output=True,
    ).stdout
    assert b"s3cr3t-9f8e7d" not in objects and b"y\n" in objects


def test_removing_a_nested_repository_is_said_to_be_beyond_undo(project, capsys):
    lib = project / "vendor" / "lib"
    lib.mkdir(parents=True)
    git(lib, "init", "-q")
    files(lib, {"lib.c": "v1\n"})
    commit(lib)
    (lib / "lib.c").write_text("uncommitted work\n")
    # unboxed: in the box a nested repository is read-only, and cannot be removed
    box = toolbox(project, checkpoint=True, auto_accept=True, sandbox="off")
    result = " ".join(
        box.execute(
            "shell_command", json.dumps({"command": "rm -rf vendor && echo y >> a.txt"})
        ).split()
    )
    assert (
        "it removed vendor/lib, which /undo cannot bring back (git ignores it, it is a repository"
        in result
    )


def test_a_command_that_removes_the_users_git_still_gets_what_can_be_kept(project, capsys):
    """The before content of unchanged tracked files lived only in the user's objects, which the
    command removed: the checkpoint failed whole, and the uncommitted line (already in the shadow)
    was lost with it."""
    files(project, {"src/app.py": "committed app\n", "src/lib.py": "lib\n"})
    commit(project)
    files(project, {"src/app.py": "committed app\nthe user's uncommitted line\n"})
    # the box keeps .git/hooks
    box = toolbox(project, checkpoint=True, auto_accept=True, sandbox="off")
    box.execute("shell_command", json.dumps({"command": "echo warm > warm.txt"}))
    box.checkpoint.undo(1, refuse)
    said = box.execute(
        "shell_command", json.dumps({"command": "rm -rf .git src && echo new > README.md"})
    )
    assert "checkpoint failed" not in said and "/undo takes it back" in said, said
    # their content is gone
    assert "src/lib.py" in said and "README.md" in said and "cannot bring back" in said
    assert Checkpoint(project, [], "other").undo(1, refuse) == ["src/app.py"]
    assert (project / "src/app.py").read_text() == "committed app\nthe user's uncommitted line\n"


def test_an_interrupted_checkpoint_asks_before_undo_takes_back_what_may_be_yours(project):
    """amas killed while a command ran: the next start books what changed since as that command's;
    the user's own edits made meanwhile were then taken back without a question."""
    files(project, {"notes.txt": "v1\n"})
    commit(project)
    cp = Checkpoint(project, [], "killed")
    with cp.locked():
        cp.begin("[amas] shell: echo agent > a.txt", None)  # and then amas was killed
    files(project, {"notes.txt": "v1\nthe user's edit after the crash\n"})
    later = Checkpoint(project, [], "next")
    with pytest.raises(CheckpointError, match="cancelled; nothing changed"):
        later.undo(1, lambda q: False)
    assert (project / "notes.txt").read_text() == "v1\nthe user's edit after the crash\n"
    asked = []
    assert (
        later.undo(1, lambda q: asked.append(q) or True) == ["notes.txt"]
        and "notes.txt" in asked[0]
    )


def test_a_file_undo_brings_back_into_an_ignored_folder_is_checkpointed_again(project):
    """git add -A dropped the user's force-tracked build/gen.c when a command removed it; /undo put
    it back, but the shadow no longer tracked it, so the agent's next change to it had no
    checkpoint."""
    files(project, {".gitignore": "build/\n", "build/gen.c": "committed\n"})
    git(project, "add", "-f", ".gitignore", "build/gen.c")
    git(project, "commit", "-qm", "generated code committed")
    files(project, {"build/gen.c": "committed\nthe user's edit\n"})
    box = toolbox(project, checkpoint=True, auto_accept=True)
    box.execute("shell_command", json.dumps({"command": "rm -rf build"}))
    box.checkpoint.undo(1, refuse)
    said = box.execute("shell_command", json.dumps({"command": "echo agent > build/gen.c"}))
    assert said.endswith("[checkpoint: 1 file; /undo takes it back]"), said
    box.checkpoint.undo(1, refuse)
    assert (project / "build/gen.c").read_text() == "committed\nthe user's edit\n"


def test_the_shadow_reads_only_the_ignore_file_of_your_git_config(project, home):
    """The shadow read the user's ~/.gitconfig: `core.ignoreStat` hid every change from it (no
    checkpoint). Its global ignore file is still honoured: what your git ignores is not copied."""
    (home / ".gitignore_global").write_text("*.secret\n")
    (home / ".gitconfig").write_text(
        f"[core]\n\tignoreStat = true\n\texcludesFile = {home}/.gitignore_global\n"
    )
    box = toolbox(project, checkpoint=True, auto_accept=True)
    line = "echo agent >> README.md && printf 5e%s 1f > k.secret"  # the content is not in the label
    said = box.execute("shell_command", json.dumps({"command": line}))
    ends = "[checkpoint: 1 file; /undo takes it back; /undo leaves k.secret (git ignores it)]"
    assert said.endswith(ends), said
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=box.checkpoint.dir,
        capture_output=True,
    )
    assert b"5e1f" not in objects.stdout and box.checkpoint.undo(1, refuse) == ["README.md"]


def test_undo_of_a_big_file_never_holds_it_in_memory(bare):
    """On a 1 GB board a file of a few hundred MB must still come back: amas streams it through git,
    never holding it whole (it held it about four times over)."""
    size = 24 << 20
    original = os.urandom(size)  # does not compress: the worst case
    (bare / "big.dat").write_bytes(original)
    box = toolbox(bare, checkpoint=True, auto_accept=True)
    result = box.execute(
        "shell_command", json.dumps({"command": f"head -c {size} /dev/urandom > big.dat"})
    )
    assert "[checkpoint: 1 file" in result and (bare / "big.dat").read_bytes() != original
    # this process's peak before and after the undo (git's own maps the object file: page cache)
    measure = (
        "from pathlib import Path; from amas_code.checkpoint import Checkpoint; "
        "peak = lambda: int(Path('/proc/self/status').read_text().split('VmHWM:')[1].split()[0]); "
        "before = peak(); print(Checkpoint(Path.cwd(), []).undo(1, lambda q: True)); "
        "print(peak() - before)"
    )
    done = subprocess.run(
        [sys.executable, "-c", measure], cwd=bare, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.startswith("['big.dat']\n"), done.stderr[-2000:]
    assert (bare / "big.dat").read_bytes() == original
    # KiB: 1.9 MB streamed; holding the file once adds 24 MB (it held it four times over)
    assert int(done.stdout.splitlines()[1]) < size / 3 / 1024


def sh_box(box, command: str) -> str:
    return box.execute("shell_command", json.dumps({"command": command}))


def test_a_path_that_turns_from_file_to_folder_in_your_index_keeps_checkpoints_going(project):
    files(project, {"foo": "committed\n"})
    commit(project)
    files(project, {"foo": "committed\nuncommitted line\n"})
    box = toolbox(project, checkpoint=True, auto_accept=True)
    assert "[checkpoint: 1 file" in sh_box(box, "echo warm > w.txt")
    assert "[checkpoint: 2 files" in sh_box(
        box, "rm foo && mkdir foo && echo new > foo/bar && git add foo"
    )
    assert "[checkpoint: 1 file" in sh_box(box, "echo z > z.txt")
    box.checkpoint.undo(2, refuse)
    assert (project / "foo").read_text() == "committed\nuncommitted line\n"


@pytest.mark.parametrize("kind", ["sha1", "sha256"])
def test_a_force_tracked_ignored_file_is_covered_in_any_object_format(bare, kind):
    git(bare, "init", "-q", "-b", "main", f"--object-format={kind}")
    files(bare, {".gitignore": "dist/\n", "dist/app.js": "v1\n"})
    git(bare, "add", "-f", ".gitignore", "dist/app.js")
    commit(bare)
    files(bare, {"dist/app.js": "v1\nthe user's edit\n"})
    box = toolbox(bare, checkpoint=True, auto_accept=True)
    assert "[checkpoint: 1 file" in sh_box(box, "echo agent > dist/app.js")
    assert box.checkpoint.undo(1, refuse) == ["dist/app.js"]
    assert (bare / "dist/app.js").read_text() == "v1\nthe user's edit\n"


def test_what_another_amas_put_back_is_covered_by_the_next_change(project):
    files(project, {".gitignore": "build/\n", "build/gen.c": "committed\n"})
    git(project, "add", "-f", ".gitignore", "build/gen.c")
    commit(project)
    files(project, {"build/gen.c": "committed\nthe user's edit\n"})
    # two windows
    first, second = (toolbox(project, checkpoint=True, auto_accept=True) for _ in range(2))
    sh_box(second, "echo warm > w.txt")
    sh_box(first, "rm -rf build")
    first.checkpoint.undo(1, refuse)
    assert "[checkpoint: 1 file" in sh_box(second, "echo agent > build/gen.c")
    assert second.checkpoint.undo(1, refuse) == ["build/gen.c"]
    assert (project / "build/gen.c").read_text() == "committed\nthe user's edit\n"


def test_a_project_with_a_very_long_folder_name_has_checkpoints(home, tmp_path, monkeypatch):
    root = tmp_path / ("p" * 245)
    root.mkdir()
    monkeypatch.chdir(root)
    box = toolbox(root, checkpoint=True, auto_accept=True)
    assert sh_box(box, "echo y > y.txt").endswith("[checkpoint: 1 file; /undo takes it back]")
    assert box.checkpoint.undo(1, refuse) == ["y.txt"] and not (root / "y.txt").exists()
