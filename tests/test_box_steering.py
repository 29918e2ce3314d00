"""What steers, defined once, what a command leaves behind, named, and secrets out of the box's
reach: real commands under bubblewrap, as root and as an unprivileged user, against the user's
next ordinary action (their own `git commit`, their editor, their shell entering a folder)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from conftest import make_config, run_amas
from test_sandbox import NOBODY, REPO, RUN, boxed, own, place, user, write  # noqa: F401

from amas_code import boxview, effects, netstack, redact, sandbox

COMMIT = ["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q"]
GROUP = 1234  # a group the unprivileged user shares with the checkout's owner


def as_who(who: str) -> list[str]:
    return NOBODY if who == "nobody" else []


def commit(who: str, root: Path) -> None:
    """The user's own next commit of a new file, outside the box, as the same user: what the
    hooks run."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    name = f"change-{len(os.listdir(root))}.txt"
    write(root, {name: "a\n"})
    own(who, root / name)
    subprocess.run([*as_who(who), "git", "add", name], cwd=root, check=True)
    argv = [*as_who(who), *COMMIT, "-m", "next"]
    subprocess.run(argv, cwd=root, env=env, capture_output=True, timeout=120)


def tool(name: str, who: str) -> str:
    """A hook manager installed beside the tests' python (pre-commit and lefthook come from
    PyPI; of lefthook, the program its wheel ships), which the user can run as git runs a hook."""
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if name == "lefthook" and found:
        import lefthook

        found = next(iter(Path(lefthook.__file__).parent.glob("bin/*/lefthook")), None)
    if not found:
        pytest.skip(f"{name} is not installed (pip install {name})")
    trial = [*as_who(who), "sh", "-c", f"{found} --version"]
    if subprocess.run(trial, capture_output=True).returncode:
        pytest.skip(f"{who} cannot run {found} here (the python it runs is in root's home)")
    return str(found)


@pytest.mark.parametrize("manager", ["pre-commit", "lefthook"])
def test_an_installed_hook_managers_configs_cannot_be_made(user, place, manager):  # noqa: F811
    """pre-commit's config and lefthook's `-local` one (which lefthook merges) did not exist; a
    command that made one had its body run at the user's next commit."""
    pwned = place.parent / "pwned"
    if manager == "pre-commit":
        config = ".pre-commit-config.yaml"
        body = "repos:\n- repo: local\n  hooks:\n  - {id: x, name: x, entry: touch PWNED, "
        body += "language: system, always_run: true, pass_filenames: false}\n"
    else:  # the project's own lefthook.yml runs a check; the -local one is merged over it
        config = "lefthook-local.yml"
        body = "pre-commit:\n  commands:\n    x:\n      run: touch PWNED\n"
        write(place, {"lefthook.yml": 'pre-commit:\n  commands:\n    lint:\n      run: "true"\n'})
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    own(user, place.parent)
    argv = [*as_who(user), tool(manager, user), "install"]
    subprocess.run(argv, cwd=place, env=env, capture_output=True, check=True)
    (place.parent / "body").write_text(body.replace("PWNED", str(pwned)))
    before = set(os.listdir(place))
    result = boxed(user, place, f"cat {place.parent}/body > {config}", box={})
    assert not (place / config).exists(), result
    assert set(os.listdir(place)) == before  # no stand-in left behind either
    commit(user, place)
    assert not pwned.exists()
    # the same file made by the user, outside the box, runs: the attack is real
    shutil.copy(place.parent / "body", place / config)
    own(user, place / config)
    commit(user, place)
    assert pwned.exists()


def boxed_in_group(root: Path, command: str) -> str:
    """A command run by sandbox.run as the unprivileged user, in the group GROUP too."""
    args = dict(command=command, timeout=10, root=str(root), box={})
    args["env"] = redact.child_env(make_config())
    member = [*NOBODY[:-1], "--groups", str(GROUP)]
    done = subprocess.run(
        [*member, sys.executable, "-c", RUN, json.dumps(args)],
        env={**os.environ, "PYTHONPATH": REPO},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_checkout_of_another_account_is_protected_all_the_same(user, place):  # noqa: F811
    """A shared checkout, group-writable, owned by another account: bubblewrap cannot make the
    stand-ins there, so amas makes them (or the command does not run)."""
    owner = "65534:0" if user == "root" else f"0:{GROUP}"
    subprocess.run(["chown", "-R", owner, str(place)], check=True)
    place.chmod(0o775)
    command = "mkdir -p .vscode && echo x > .vscode/tasks.json; echo x > .envrc; echo x > AGENTS.md"
    command += "; echo x > .tool-versions; echo made > ok.txt"
    if user == "root":
        result = boxed(user, place, command, box={})
    else:
        result = boxed_in_group(place, command)
    assert (place / "ok.txt").read_text() == "made\n", result  # the project is writable
    assert sorted(os.listdir(place)) == [".git", "ok.txt"], result


def named(result: str) -> str:
    """What the result's last note names as left behind, or ""."""
    mark = "at your next use of them: "
    return result.rpartition(mark)[2].partition("; look at them")[0] if mark in result else ""


PLANTED = {  # each a way to have git, python, an editor or a shell run code outside amas later
    # a repository in a folder the command itself has git ignore
    "vendor/tool/.git": "echo vendor/ >> .gitignore; git init -q vendor/tool; "
    "git -C vendor/tool config core.fsmonitor 'touch PWNED'",
    ".gitignore": "",
    # a bare repository, no .git: git uses it when the user enters the folder
    "tools/evil": "mkdir -p tools/evil/refs tools/evil/objects; echo 'ref: refs/heads/m' > "
    "tools/evil/HEAD; printf '[core]\\n\\tbare = true\\n\\tfsmonitor = touch PWNED\\n' > "
    "tools/evil/config",
    # a .pth in nested virtual environments: python runs it at its next start there
    "backend/.venv/lib/python3.11/site-packages/evil.pth": "mkdir -p backend/.venv/lib/"
    "python3.11/site-packages; touch backend/.venv/pyvenv.cfg; echo 'import os' > "
    "backend/.venv/lib/python3.11/site-packages/evil.pth",
    ".tox/py311/lib/python3.11/site-packages/sitecustomize.py": "mkdir -p .tox/py311/lib/"
    "python3.11/site-packages; touch .tox/py311/pyvenv.cfg; echo x > "
    ".tox/py311/lib/python3.11/site-packages/sitecustomize.py",
    "backend/.venv/pyvenv.cfg": "",  # a new venv: its interpreter and its paths
    ".tox/py311/pyvenv.cfg": "",
}
TOOLS = {  # editors' and tools' files, made in a subfolder or beside the top's stand-ins
    "sub/.zed/tasks.json": "mkdir -p sub/.zed; echo '[]' > sub/.zed/tasks.json",
    "sub/.helix/languages.toml": "mkdir -p sub/.helix; echo x > sub/.helix/languages.toml",
    "sub/.nvim.lua": "echo x > sub/.nvim.lua",
    "sub/.exrc": "echo x > sub/.exrc",
    "dev.code-workspace": "echo '{}' > dev.code-workspace",
    "sub/.devcontainer/devcontainer.json": "mkdir -p sub/.devcontainer; "
    "echo '{}' > sub/.devcontainer/devcontainer.json",
    "sub/mise.toml": "echo x > sub/mise.toml",
    "sub/.tool-versions": "echo x > sub/.tool-versions",
    "sub/.envrc": "echo x >> sub/.envrc",  # changed in place: it was there before
    "sub/.vscode/tasks.json": "mkdir -p sub/.vscode; echo '{}' > sub/.vscode/tasks.json",
}
# what changes in a build and runs nothing: never named
ORDINARY = (
    "mkdir -p build/.cache node_modules/pkg src .pytest_cache; echo x > build/.cache/x; "
    "echo x > node_modules/pkg/.eslintrc; printf '*\\n' > .pytest_cache/.gitignore; "
    "echo x > .pytest_cache/lastfailed; echo x > src/main.py"
)


def ticked(path: Path) -> None:
    """Wait, bounded, until the clock files' times come from has passed path's change: what
    changed before a command is not the command's."""
    changed = path.lstat().st_ctime_ns
    for _ in range(1_000_000):
        if boxview.now() > changed:
            return
    raise AssertionError("the file clock did not move")


def test_what_a_command_left_that_runs_outside_amas_is_named(user, place):  # noqa: F811
    """Found as git and python find it (a repository by HEAD, objects and refs, a venv by
    pyvenv.cfg), wherever it is, git-ignored folders too; and a dot-file or a steering file made
    or changed outside them. What a build makes in its ignored outputs is not named."""
    write(place, {".gitignore": "build/\nnode_modules/\n.venv/\n.tox/\n", "sub/.envrc": "# mine\n"})
    own(user, place)
    ticked(place / "sub" / ".envrc")
    result = boxed(user, place, "; ".join(filter(None, PLANTED.values())), box={})
    assert named(result).split(", ") == sorted(PLANTED), result
    result = boxed(user, place, "; ".join(TOOLS.values()), box={})
    assert named(result).split(", ") == sorted(TOOLS), result
    result = boxed(user, place, ORDINARY, box={})
    assert named(result) == "" and "[exit code 0]" in result, result


def test_the_walk_after_a_command_names_more_than_ten_and_counts_the_rest():
    """The note stays one line: ten names, then how many more."""
    names = [f"d{i}/.envrc" for i in range(12)]
    assert boxview.planted_note(names).count(".envrc") == 10
    assert "and 2 more; look at them" in boxview.planted_note(names)
    assert boxview.planted_note([]) == ""


def test_a_closed_folder_in_the_session_tmp_is_swept_too(user, place):  # noqa: F811
    """`chmod 000` hid a folder from the 256 MB sweep (only root walks into it), and from its
    removal at exit."""
    scratch = place.parent / ".amas" / "tmp" / f"{os.getpid()}-test"
    box = {"scratch": str(scratch), "tmp": 1 << 20}
    command = "mkdir /tmp/d && head -c 2000000 /dev/zero > /tmp/d/big && chmod 000 /tmp/d"
    result = boxed(user, place, command, box=box)
    assert "[/tmp held 1 MB, more than 1 MB: it was emptied]" in result or (
        "[/tmp held 2 MB" in result
    ), result
    assert os.listdir(scratch) == []
    boxed(user, place, "mkdir /tmp/e && chmod 000 /tmp/e", box=box)
    script = f"from amas_code import sandbox; sandbox.Box(scratch={str(scratch)!r}).close()"
    subprocess.run([*as_who(user), sys.executable, "-c", script], env={"PYTHONPATH": REPO})
    assert not scratch.exists()


SECRETS = {  # what a CI runner's or a developer's environment holds, in names no list knows
    "GITHUB_PAT": "ghp_" + "a1" * 18,
    "SENTRY_DSN": "https://9f8e7d6c5b4a@o1.ingest.sentry.io/42",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/XyZ123",
    "AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=https;AccountKey=QmFzZTY0==",
    "CI_JOB_JWT": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjaSJ9.c2lnbmF0dXJl",
}


def test_commands_get_an_allow_list_of_the_environment(user, place, monkeypatch):  # noqa: F811
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_TIME", "C")
    monkeypatch.setenv("CARGO_HOME", "/opt/cargo")
    env = redact.child_env(make_config())
    assert env["PATH"] == os.environ["PATH"] and env["LC_TIME"] == "C"
    assert env["CARGO_HOME"] == "/opt/cargo" and env["HOME"] == os.environ["HOME"]
    assert not set(SECRETS) & set(env)
    result = boxed(user, place, "env", box={})
    assert not any(value in result for value in SECRETS.values()), result
    passed = make_config(permissions={"allow": [], "deny": [], "env": ["SENTRY_DSN"]})
    assert redact.child_env(passed)["SENTRY_DSN"] == SECRETS["SENTRY_DSN"]


def test_the_home_shown_to_the_box_holds_no_token(user, place):  # noqa: F811
    """git's identity is there (a generated config of user.* and core.*), not a token in an
    insteadOf URL or a credential helper; cargo's config, uv's and gem's credentials are not."""
    home = place.parent
    token = "ghp_" + "Zq9" * 12
    gitconfig = f'[user]\n\tname = Box Tester\n[url "https://x:{token}@github.com/"]\n'
    gitconfig += "\tinsteadOf = https://github.com/\n[credential]\n\thelper = store\n"
    write(home, {".gitconfig": gitconfig, ".cargo/config.toml": f'token = "{token}"\n'})
    write(home, {".cargo/bin/cargo-x": "", ".local/share/uv/python/x": ""})
    write(home, {".local/share/uv/credentials/credentials.toml": f"password = '{token}'\n"})
    write(home, {".gem/credentials": f":rubygems_api_key: {token}\n", ".gem/ruby/x": ""})
    own(user, home)
    command = "git config user.name; git config --get-regexp 'url|credential'; "
    command += "cat ~/.gitconfig ~/.cargo/config.toml ~/.local/share/uv/credentials/* "
    command += "~/.gem/credentials; ls ~/.cargo ~/.local/share/uv ~/.gem"
    result = boxed(user, place, command, box={})
    assert token not in result and "helper store" not in result, result
    assert result.startswith(f"$ {command}\nBox Tester\n"), result
    assert "bin\n" in result and "python\n" in result and "ruby\n" in result


def test_the_users_runtime_folder_is_hidden_by_the_filter(user, place, monkeypatch):  # noqa: F811
    """podman keeps its registry logins in $XDG_RUNTIME_DIR/containers/auth.json."""
    runtime = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="amas-run-")) / "user" / "1000"
    try:
        write(runtime, {"containers/auth.json": '{"auths": {"r": {"auth": "c2VjcmV0"}}}\n'})
        for folder in (runtime, runtime.parent, runtime.parent.parent):
            folder.chmod(0o755)
        own(user, runtime)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        result = boxed(user, place, f"cat {runtime}/containers/auth.json", box={})
        assert "c2VjcmV0" not in result and "No such file" in result, result
    finally:
        shutil.rmtree(runtime.parent.parent)


KEYRING = "import ctypes; c = ctypes.CDLL(None, use_errno=True); "
KEYRING += "print('keyctl', c.syscall(250, 0, -3, 0), ctypes.get_errno())"  # x86_64: keyctl


def test_the_keyring_and_datagram_pairs_are_refused(user, place):  # noqa: F811
    if os.uname().machine != "x86_64":
        pytest.skip("x86_64's numbers")
    assert "\nkeyctl -1 1\n" in boxed(user, place, f'python3 -c "{KEYRING}"', box={})
    # a datagram pair re-addressed with sendto reached any datagram socket of the host
    journal = place.parent / "journal.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(journal))
    journal.chmod(0o777)
    # a datagram to a Unix socket is in its queue when sendto returns: nothing to wait for
    listener.setblocking(False)
    send = (
        f"a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b'x', '{journal}')"
    )
    try:
        result = boxed(user, place, f'python3 -c "import socket; {send}"', box={})
        assert "PermissionError: [Errno 1] Operation not permitted" in result, result
        with pytest.raises(BlockingIOError):
            listener.recv(10)
        stream = "a, b = socket.socketpair(); a.send(b'ok'); print(b.recv(2))"
        assert "b'ok'" in boxed(user, place, f'python3 -c "import socket; {stream}"', box={})
    finally:
        listener.close()


SETUID = (
    "cp /bin/true t1 && chmod u+s t1; cp /bin/true t2 && chmod 2755 t2; "
    "python3 -c \"import os; os.close(os.open('t3', os.O_CREAT | os.O_WRONLY, 0o4755))\"; "
    "ls -l t1 t2 t3"
)


def test_the_box_makes_no_setuid_or_setgid_program(user, place):  # noqa: F811
    """As root, the box's uid 0 is the host's: a setuid copy of a program it left in the project
    gave an ordinary user root."""
    result = boxed(user, place, SETUID, box={})
    assert "Operation not permitted" in result, result
    for name in ("t1", "t2", "t3"):
        mode = (place / name).stat().st_mode if (place / name).exists() else 0
        assert not mode & 0o6000, (name, oct(mode), result)
    boxed(user, place, "rm -f t1 t2 t3")
    assert "-rwsr" in boxed(user, place, SETUID)  # unboxed, it is made


def test_the_proc_entries_docker_masks_are_masked(user, place):  # noqa: F811
    if user != "root":
        pytest.skip("as root: an unprivileged user cannot read or write them anyway")
    readable = [p for p in ("/proc/timer_list", "/proc/keys") if os.path.exists(p)]
    if not readable:
        pytest.skip("this kernel has neither /proc/timer_list nor /proc/keys")
    command = f"cat {' '.join(readable)} | wc -c"
    assert boxed(user, place, command, box={}).split("\n")[1] == "0"
    assert boxed(user, place, command).split("\n")[1] != "0"  # unboxed, root reads them
    if os.path.exists("/proc/sysrq-trigger"):
        result = boxed(user, place, "echo h > /proc/sysrq-trigger", box={})
        assert "Read-only file system" in result or "Permission denied" in result


class Service:
    """A service of the host on all its addresses, as a LAN address's would be."""

    def __init__(self):
        self.server = socket.create_server(("0.0.0.0", 0))
        self.server.settimeout(0.1)  # accept() wakes to see close(); closing alone does not wake it
        self.port = self.server.getsockname()[1]
        self.heard, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        for _ in range(600):  # a minute at most
            if self.stop.is_set():
                return
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            conn.sendall(b"HOST-SERVICE\n")
            self.heard.append(True)
            conn.close()

    def close(self):
        self.stop.set()
        self.thread.join()
        self.server.close()


def host_address() -> str:
    """One of this machine's own addresses that is not loopback, or ""."""
    import psutil

    found = [a.address for addrs in psutil.net_if_addrs().values() for a in addrs]
    return next((a for a in found if "." in a and not a.startswith("127.")), "")


def test_the_hosts_own_addresses_are_refused_with_the_network_on(user, place):  # noqa: F811
    """slirp4netns connects from the host: the host's services on its LAN address answered."""
    if not shutil.which(netstack.NETWORK_STACK) or not host_address():
        pytest.skip(f"needs {netstack.NETWORK_STACK} and an address besides loopback")
    service = Service()
    dial = f"socket.create_connection(('{host_address()}', {service.port}), timeout=3)"
    command = f'python3 -c "import socket; print({dial}.recv(20))"'
    try:
        result = boxed(user, place, command, box={"network": True})
        assert "HOST-SERVICE" not in result and "No route to host" in result, result
        lan = boxed(user, place, command, box={"network": True, "lan": True})
        assert "HOST-SERVICE" not in lan, lan  # lan: the private ranges, never the host's own
    finally:
        service.close()
    assert service.heard == []
    assert f"{host_address()}/32" in netstack._refused(True)
    assert "169.254.0.0/16" in netstack._refused(False)  # the clouds' metadata servers


def test_a_dangling_link_at_a_steering_name_cannot_be_followed(user, place):  # noqa: F811
    """`.envrc -> run.sh`, run.sh missing: writing through the link would make what direnv runs."""
    (place / ".envrc").symlink_to("run.sh")
    own(user, place)
    result = boxed(user, place, "echo 'touch PWNED' > .envrc", box={})
    assert not (place / "run.sh").exists(), result
    assert (place / ".envrc").is_symlink()


def test_a_command_that_cannot_be_protected_is_not_run(tmp_path, monkeypatch):
    """Where a stand-in cannot be made for a reason the box would not share, the command is not
    run: it says why."""
    if sandbox.probe():
        pytest.skip(f"no box here: {sandbox.probe()}")
    real = os.mkdir

    def full(path, mode=0o777):
        if str(path).endswith(".envrc"):
            raise OSError(28, "No space left on device")
        return real(path, mode)

    monkeypatch.setattr(os, "mkdir", full)
    with pytest.raises(PermissionError, match="could not keep .*.envrc from being made"):
        sandbox.run(effects.Command("touch ran", 10, dict(os.environ)), tmp_path, sandbox.Box())
    assert not (tmp_path / "ran").exists()


@pytest.mark.skipif(bool(sandbox.probe()), reason="bubblewrap cannot run here")
def test_what_a_command_left_is_said_on_screen_and_to_the_model(project, llm):
    plant = "git init -q tools/x && git -C tools/x config core.fsmonitor 'touch pwned'"
    llm.reply(tool="shell_command", command=plant).reply(text="done")
    done = run_amas("-y", "set it up", llm=llm)
    assert done.returncode == 0, done.stderr
    assert "the command left what runs outside amas: tools/x/.git" in done.stdout + done.stderr
    said = llm.requests[1]["messages"][-1]["content"]
    assert "at your next use of them: tools/x/.git; look at them" in said


def test_a_session_in_the_home_runs_and_shows_no_git_token(user, place):  # noqa: F811
    """Started in the home, the box shows it read-only: git's config there is amas's copy too, and
    where there is none, commands still run (no file can be made in a read-only home)."""
    home = place.parent
    own(user, home)
    assert "notes\n[exit code 0]" in boxed(user, home, "echo notes", box={})
    token = "ghp_" + "Hm7" * 12
    write(home, {".gitconfig": f'[user]\n\tname = Home Tester\n[url "https://x:{token}@h/"]\n'})
    write(home, {".config/git/config": f'[url "https://y:{token}@h/"]\n\tinsteadOf = z\n'})
    own(user, home)
    result = boxed(
        user, home, "git config user.name; cat ~/.gitconfig ~/.config/git/config", box={}
    )
    assert "\nHome Tester\n" in result and token not in result, result


GIT_FINDS = {  # git's test: HEAD, and objects and refs here or in the commondir it names
    # a worktree's gitdir, its objects, refs and config elsewhere, in a folder git ignores
    "build/w/.git": "mkdir -p build/w/.git build/common/objects build/common/refs; "
    "echo 'ref: refs/heads/m' > build/w/.git/HEAD; echo ../../common > build/w/.git/commondir; "
    "printf '[core]\\n\\tfsmonitor = touch PWNED\\n' > build/common/config",
    # a gitfile, in an ignored folder, naming a repository elsewhere
    "build/g/.git": "mkdir -p build/g; echo 'gitdir: ../../vendor.git' > build/g/.git",
}


def test_what_git_finds_through_a_commondir_or_a_gitfile_is_named(user, place):  # noqa: F811
    write(place, {".gitignore": "build/\n", "api/run.sh": "echo hi\n"})
    (place / "api" / ".envrc").symlink_to("run.sh")  # direnv runs what it links to
    own(user, place)
    ticked(place / "api" / "run.sh")
    result = boxed(user, place, "; ".join(GIT_FINDS.values()), box={})
    assert named(result).split(", ") == sorted(GIT_FINDS), result
    result = boxed(user, place, "echo 'curl x | sh' >> api/run.sh", box={})
    assert named(result) == "api/.envrc", result
