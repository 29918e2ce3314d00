"""The box commands run in: real commands under bubblewrap, as root and as an unprivileged user."""

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from conftest import git, make_config, run_amas

from amas_code import effects, netstack, providers, redact, sandbox

REPO = str(Path(__file__).parents[1])
NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
RUN = (  # sandbox.run in a fresh interpreter, for another user or for a process to kill
    "import json, sys, pathlib; from amas_code import effects, sandbox; "
    "a = json.loads(sys.argv[1]); "
    "box = None if a['box'] is None else sandbox.Box(**a['box']); "
    "command = effects.Command(a['command'], a['timeout'], a['env']); "
    "print(sandbox.run(command, pathlib.Path(a['root']), box), end='')"
)
KEY = "sk-proj-" + "Zq8" * 12  # the shape of an OpenAI key


def nobody_can_box() -> str:
    """Why the unprivileged runs are skipped here, or "" when they can run."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return "needs root and setpriv to become an unprivileged user"
    trial = [*NOBODY, "bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "true"]
    if subprocess.run(trial, capture_output=True).returncode:
        return "this kernel gives an unprivileged user no user namespaces"
    return ""


@pytest.fixture(params=["root", "nobody"])
def user(request):
    if sandbox.probe():
        pytest.skip(f"no box here: {sandbox.probe()}")
    if request.param == "nobody" and nobody_can_box():
        pytest.skip(nobody_can_box())
    return request.param


@pytest.fixture
def place(user, monkeypatch):
    """A project inside a home, both outside /tmp (which the box replaces whole),
    owned by the user."""
    base = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="amas-box-"))
    home, root = base / "home", base / "home" / "proj"
    root.mkdir(parents=True)
    git(root, "init", "-q")
    if user == "nobody":
        subprocess.run(["chown", "-R", "65534:65534", str(base)], check=True)
    base.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    yield root
    shutil.rmtree(base, ignore_errors=True)


def boxed(user: str, root: Path, command: str, timeout: float = 10, box: dict | None = None):
    """The result text of a command run by sandbox.run as the user (box None: unboxed)."""
    env = redact.child_env(make_config())
    if user == "root":
        where = None if box is None else sandbox.Box(**box)
        return sandbox.run(effects.Command(command, timeout, env), root, where)
    args = dict(command=command, timeout=timeout, root=str(root), env=env, box=box)
    done = subprocess.run(
        [*NOBODY, sys.executable, "-c", RUN, json.dumps(args)],
        env={**os.environ, "PYTHONPATH": REPO},
        capture_output=True,
        text=True,
        timeout=timeout + 30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def free(lock: Path) -> bool:
    """Whether no process holds the lock on this file any more."""
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False


def eventually(condition, seconds: float = 10) -> bool:
    """Wait, bounded, for something the kernel finishes shortly after a kill."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_a_write_outside_the_project_fails_and_says_why(user, place):
    command = 'echo in > inside.txt; touch "$HOME/outside.txt"; echo x > .git/hooks/pre-commit'
    result = boxed(user, place, command, box={})
    assert (place / "inside.txt").read_text() == "in\n"
    assert not (place.parent / "outside.txt").exists()
    assert not (place / ".git" / "hooks" / "pre-commit").exists()
    assert sandbox.refused(result, place, sandbox.Box()) == ["folder"]
    result = boxed(user, place, "git config user.name someone", box={})
    assert "someone" not in (place / ".git" / "config").read_text()
    # git's config stays read-only in every grant
    assert sandbox.refused(result, place, sandbox.Box()) == []


def test_no_repository_of_the_project_takes_a_planted_hook(user, place):
    """Hooks and config stay read-only where the repository has no hooks folder (a clone made with
    an empty template), in each submodule's repository under .git/modules, and in the project's
    folder core.hooksPath names: git runs what is planted there at your next git command."""
    sub = place / ".git" / "modules" / "lib"
    shutil.copytree(place / ".git", sub)
    shutil.rmtree(place / ".git" / "hooks")
    shutil.rmtree(sub / "hooks")
    (place / ".githooks").mkdir()
    (place / ".githooks" / "pre-commit").write_text("#!/bin/sh\n")
    with open(place / ".git" / "config", "a") as config:  # as husky sets it
        config.write("[core]\n\thooksPath = .githooks\n")
    if user == "nobody":
        subprocess.run(["chown", "-R", "65534:65534", str(place)], check=True)
    names = set(os.listdir(place / ".git"))
    plant = "mkdir -p {0}/hooks; echo 'touch pwned' > {0}/hooks/post-checkout; echo x >> {0}/config"
    for where in (".git", ".git/modules/lib"):
        before = (place / where / "config").read_text()
        result = boxed(user, place, plant.format(where), box={})
        assert not (place / where / "hooks" / "post-checkout").exists(), result
        assert (place / where / "config").read_text() == before
    result = boxed(user, place, "echo 'touch pwned' >> .githooks/pre-commit", box={})
    assert (place / ".githooks" / "pre-commit").read_text() == "#!/bin/sh\n", result
    # a hook folder is never granted: the model edits it
    assert sandbox.refused(result, place, sandbox.Box()) == []
    # the box leaves nothing behind: the whole .git is read-only, no hooks folder is made
    assert set(os.listdir(place / ".git")) == names


def own(user: str, *paths: Path) -> None:
    """Files a test made, given to the user the box runs as."""
    if user == "nobody":
        subprocess.run(["chown", "-R", "65534:65534", *map(str, paths)], check=True)


def write(base: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text(text)


def test_the_home_is_hidden_but_for_the_toolchains(user, place):
    """Credentials are unreadable without a deny-list naming them; git's identity and pip's cache
    are there, read-only."""
    home = place.parent
    write(home, {".ssh/id_ed25519": "PRIVATE KEY\n", ".codex/auth.json": "CODEX-TOKEN\n"})
    write(home, {".cache/huggingface/token": "HF-TOKEN\n", ".bash_history": "HISTORY\n"})
    write(home, {"notes.txt": "NOTE\n", ".gitconfig": "[user]\n\tname = Box Tester\n"})
    write(home, {".cache/pip/wheels/ab/cd/demo-1.0-py3-none-any.whl": ""})
    own(user, home)
    command = (
        "cat ~/notes.txt ~/.ssh/* ~/.codex/auth.json ~/.cache/huggingface/token ~/.bash_history"
    )
    command += "; git config user.name"
    # pip reads its cache (as an ordinary user, pip turns off a cache it cannot write)
    pip = "python3 -m pip cache list" if user == "root" else "ls ~/.cache/pip/wheels/ab/cd"
    command += f"; {pip}"
    command += "; touch ~/.cache/pip/x"
    result = boxed(user, place, command, box={})
    for secret in ("NOTE", "PRIVATE", "CODEX-TOKEN", "HF-TOKEN", "HISTORY"):
        assert secret not in result
    assert "\nBox Tester\n" in result and "demo-1.0-py3-none-any.whl" in result
    assert sandbox.refused(result, place, sandbox.Box()) == ["folder"]
    unboxed = boxed(user, place, command)
    assert "CODEX-TOKEN" in unboxed and "HF-TOKEN" in unboxed


def test_a_session_in_the_home_cannot_write_its_dotfiles(user, place):
    """Started in the home (no repository above), the box keeps it read-only."""
    home = place.parent
    write(home, {".bashrc": "# mine\n", ".codex/auth.json": "CODEX-TOKEN\n"})
    write(home, {".amas/config.yaml": "api_key: sk-user-key-123456\n"})  # amas's own state
    own(user, home)
    command = "echo evil >> ~/.bashrc; mkdir -p ~/.local/bin; echo evil > ~/.local/bin/ls; "
    command += "mkdir -p ~/.config/autostart; echo x > ~/.config/autostart/x.desktop; "
    command += "cat ~/.codex/auth.json ~/.amas/config.yaml; ls proj"
    before = sorted(p.name for p in home.iterdir())
    result = boxed(user, home, command, box={})
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert sorted(p.name for p in home.iterdir()) == before  # no .local, no .config
    assert "CODEX-TOKEN" not in result and "sk-user-key" not in result


def test_what_steers_amas_cannot_be_changed_from_the_box(user, place):
    """Rules, skills and AGENTS.md, changed or made new, would be read as the user's instructions
    by the next session; the project config's key is not readable."""
    rules = {".amas/rules.md": "be careful\n", ".amas/skills/x.md": "a skill\n"}
    write(place, {**rules, ".amas/config.yaml": "api_key: sk-project-key-123456\n"})
    own(user, place)
    before = set(os.listdir(place))
    command = "echo evil > AGENTS.md; echo evil >> .amas/rules.md; echo evil > .amas/skills/x.md; "
    command += "cat .amas/config.yaml; echo x > .envrc; mkdir -p .vscode; echo made > ok.txt"
    result = boxed(user, place, command, box={})
    assert "sk-project-key" not in result
    assert all((place / name).read_text() == text for name, text in rules.items())
    # the stand-ins that kept AGENTS.md, .envrc, .vscode from being made are gone too
    assert set(os.listdir(place)) == before | {"ok.txt"}
    write(place, {"AGENTS.md": "# ours\n"})
    own(user, place)
    boxed(user, place, "echo evil > AGENTS.md; mv AGENTS.md x.md; rm -f AGENTS.md", box={})
    assert (place / "AGENTS.md").read_text() == "# ours\n"


PLANTS = {  # each a way a boxed command could have git, outside amas, run a program of its choice
    "commondir": "mkdir -p evil; printf '[core]\\n\\tfsmonitor = {run}\\n' > evil/config; "
    "mkdir -p evil/refs evil/objects; echo HEAD > evil/HEAD; echo $PWD/evil > .git/commondir",
    "config": "git config core.fsmonitor '{run}'",
    "rename": "mv .git old; git init -q; git config core.fsmonitor '{run}'",
    "gitlink": "git init -q lib; git -C lib config core.fsmonitor '{run}'",
    "gitlink moved": "mv lib lib2; git init -q lib; git -C lib config core.fsmonitor '{run}'",
    "staged": "git init -q sub; git -C sub config core.fsmonitor '{run}'; "
    "git -C sub commit -q --allow-empty -m x; git add sub",
    "husky": "echo '{run}' >> .husky/pre-commit; echo '{run}' > .husky/_/pre-commit",
}


def test_no_git_plant_runs_at_the_next_git_status(user, place):
    """After each plant, the user's own `git status` and `git commit` (as the same user, outside
    the box) run nothing planted."""
    pwned = place.parent / "pwned"
    shim = '#!/bin/sh\n. "$(dirname "$0")/../pre-commit"\n'  # as husky v9's shims run its bodies
    write(place, {".husky/pre-commit": "true\n", ".husky/_/pre-commit": shim})
    (place / ".husky" / "_" / "pre-commit").chmod(0o755)
    setup = ["-c", "safe.directory=*"]  # the fixture gave the repository to the user already
    git(place, *setup, "config", "core.hooksPath", ".husky/_")
    git(place, *setup, "add", ".husky/pre-commit")
    git(place, *setup, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},lib")
    (place / "lib").mkdir()
    who = NOBODY if user == "nobody" else []
    commit = [*who, "git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "x"]
    own(user, place)
    said = {}
    for name, plant in PLANTS.items():
        said[name] = boxed(user, place, plant.format(run=f"touch {pwned}"), box={})
        subprocess.run([*who, "git", "status"], cwd=place, capture_output=True, check=True)
        subprocess.run([*commit, "--allow-empty"], cwd=place, capture_output=True, check=True)
        assert not pwned.exists(), f"{name}: {said[name]}"
    assert "Device or resource busy" in said["rename"] and "resource busy" in said["gitlink moved"]
    assert "sub/.git" in said["staged"]  # what the box cannot stop is named
    assert sandbox.read_only_repository(said["staged"]).endswith(".git/index.lock")


def test_a_boxed_commit_fails_as_the_repository_being_read_only(user, place):
    write(place, {"a.txt": "a\n"})
    own(user, place)
    result = boxed(user, place, "git add a.txt && git commit -qm x", box={})
    assert sandbox.read_only_repository(result) == f"{place}/.git/index.lock"
    assert sandbox.refused(result, place, sandbox.Box()) == ["repository"]
    assert git(place, "-c", "safe.directory=*", "status", "--short") == "?? a.txt\n"


def test_python_from_the_home_and_a_venv_in_the_project_run_in_the_box(user, place, monkeypatch):
    """This machine's python lives in root's home (pyenv): the box keeps it, the home hidden."""
    if user == "nobody":
        pytest.skip("the home that holds python here is root's")
    monkeypatch.setenv("HOME", os.path.expanduser("~root"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", ".venv"], cwd=place, check=True)
    write(place, {"test_it.py": "def test_it():\n    assert True\n"})
    # the project's own code, not amas's venv (which may live under /tmp, the box's own)
    run = "import test_it; test_it.test_it(); print('1 passed')"
    command = f'.venv/bin/python -c "{run}"; python3 -c "print(7)"'
    result = boxed(user, place, command, timeout=60, box={})
    assert "1 passed" in result and "\n7\n[exit code 0]" in result


def test_no_process_environ_holds_a_key(user, place):
    """Another process of the user (here a sleep; in life the shell that started amas)
    holds a key."""
    who = NOBODY if user == "nobody" else []
    holder = subprocess.Popen([*who, "sleep", "60"], env={**os.environ, "OPENAI_API_KEY": KEY})
    try:
        command = f"cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c {KEY[:12]}"
        assert "\n0\n" in boxed(user, place, command, box={})
        assert "\n0\n" not in boxed(user, place, command)  # unboxed, it can be read
    finally:
        holder.kill()
        holder.wait()


def test_the_network_is_not_there(user, place, llm):
    get = (
        "import urllib.request; "
        f"print(urllib.request.urlopen('{llm.url}/models', timeout=5).status)"
    )
    command = f'python3 -c "{get}"'
    result = boxed(user, place, command, box={})
    assert "[exit code 1]" in result and sandbox.refused(result, place, sandbox.Box()) == [
        "network"
    ]
    # with the network on, the box has a network of its own: the host's loopback is not in it
    if not shutil.which(netstack.NETWORK_STACK):
        pytest.skip(f"{netstack.NETWORK_STACK} is not installed")
    routes = boxed(user, place, f"{command}; cat /proc/net/route", box={"network": True})
    assert "Connection refused" in routes and "[exit code 0]" in routes
    assert "\ntap0\t00000000\t" in routes  # a default route, out through the user-mode stack


def test_a_daemon_a_command_starts_ends_with_it(user, place):
    command = "setsid flock d.lock sh -c 'touch held; exec sleep 300' & "
    command += "while [ ! -e held ]; do sleep 0.02; done; echo started"
    result = boxed(user, place, command, box={})
    assert "started\n[exit code 0]" in result
    assert eventually(lambda: free(place / "d.lock"))


def test_a_command_and_its_daemon_die_when_amas_is_killed(user, place):
    """kill -9 leaves amas no moment to clean up:
    the box dies with its parent, the daemon with the box."""
    command = "setsid flock d.lock sh -c 'exec sleep 300' & "
    command += "flock c.lock sh -c 'touch held; exec sleep 300'"
    args = dict(command=command, timeout=120, root=str(place), box={})
    args["env"] = redact.child_env(make_config())
    who = NOBODY if user == "nobody" else []
    amas = subprocess.Popen(
        [*who, sys.executable, "-c", RUN, json.dumps(args)],
        env={**os.environ, "PYTHONPATH": REPO},
        stdout=subprocess.DEVNULL,
    )
    try:
        assert eventually(lambda: (place / "held").exists(), 30)
        assert not free(place / "c.lock")
        amas.send_signal(signal.SIGKILL)
        amas.wait()
        assert eventually(lambda: free(place / "c.lock") and free(place / "d.lock"))
    finally:
        amas.kill()


def test_an_unboxed_command_dies_when_amas_is_killed(place):
    args = dict(command="echo $$ > cmd.pid; exec sleep 300", timeout=120, root=str(place))
    args.update(box=None, env=redact.child_env(make_config()))
    amas = subprocess.Popen(
        [sys.executable, "-c", RUN, json.dumps(args)], env={**os.environ, "PYTHONPATH": REPO}
    )
    try:
        assert eventually(
            lambda: (place / "cmd.pid").read_text().strip() if (place / "cmd.pid").exists() else "",
            30,
        )
        pid = int((place / "cmd.pid").read_text())
        amas.send_signal(signal.SIGKILL)
        amas.wait()
        assert eventually(
            lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
        )
    finally:
        amas.kill()


def test_a_boxed_command_is_in_the_boxs_cgroups_from_its_start(user, place):
    """As root (whom prlimit's process limit does not hold) the command runs in amas's cgroups: a
    shell joins them and becomes bubblewrap, so nothing in the box starts outside them. As another
    user amas makes none (prlimit holds there)."""
    said = boxed(user, place, "cat /proc/self/cgroup", box={})
    joined = {line.split(":")[1] for line in said.splitlines() if "/amas-" in line}
    assert joined == ({"pids", "memory"} if user == "root" else set()), said


def test_a_fork_bomb_is_stopped_by_the_limit(user, place):
    command = "for i in $(seq 80); do sleep 30 & echo $i > started; done"
    result = boxed(user, place, command, timeout=10, box={"procs": 32})
    assert "Cannot fork" in result and int((place / "started").read_text()) < 32
    bomb = boxed(user, place, "f() { f | f & }; f; sleep 1", timeout=4, box={"procs": 32})
    assert "Cannot fork" in bomb or "Resource temporarily unavailable" in bomb


def test_a_huge_allocation_is_refused(user, place):
    command = 'python3 -c "b = bytearray(400 << 20); print(len(b))"'
    assert "MemoryError" in boxed(user, place, command, box={"memory": 200 << 20})
    assert "419430400\n[exit code 0]" in boxed(user, place, command, box={})


def test_output_is_read_in_bounded_memory(place):
    peak = "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss"
    script = (
        f"import resource; start = {peak}; "  # what the interpreter itself holds, before the run
    )
    script += RUN.replace("print(", "r = str(").replace(", end='')", ")")
    script += f"; print(len(r), {peak} - start, r[-300:])"
    args = dict(command="yes", timeout=1, root=str(place), box={})
    args["env"] = redact.child_env(make_config())
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(args)],
        env={**os.environ, "PYTHONPATH": REPO},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    size, rss, tail = done.stdout.split(" ", 2)
    # characters; KB the run added: `yes` writes a gigabyte a second, which communicate() kept whole
    assert int(size) < 300_000 and int(rss) < 100_000
    assert "[timed out after 1s; the command and its children were killed]" in tail


def test_a_file_grows_no_further_than_the_limit(user, place):
    result = boxed(user, place, "yes > big", box={"file_size": 1 << 20})
    assert (place / "big").stat().st_size == 1 << 20
    assert "[exit code 0]" not in result


def test_the_sandbox_says_which_mode_is_in_force(monkeypatch, tmp_path):
    if sandbox.probe():
        pytest.skip(f"no box here: {sandbox.probe()}")
    config = make_config()
    on = sandbox.open(config)
    assert (on.mode, on.line) == (
        "on",
        "commands run in a sandbox (bubblewrap): no network, writes only in the project",
    )
    assert on.box == sandbox.Box(scratch=on.box.scratch)  # the session's /tmp: a folder of its own
    assert not os.path.exists(on.box.scratch)  # made at the first command
    assert sandbox.open({**config, "sandbox_network": True}).box.network
    off = sandbox.open({**config, "sandbox": False})  # YAML reads `sandbox: off` as false
    assert off == sandbox.Sandbox(
        "off",
        "no sandbox: sandbox is off in the config; every command will be asked, allow rules off",
    )
    monkeypatch.setenv("PATH", str(tmp_path))
    sandbox.probe.cache_clear()
    try:
        unavailable = sandbox.open(config)
        assert unavailable.mode == "unavailable" and unavailable.box is None
        assert unavailable.line.startswith("no sandbox: bwrap not found")
    finally:
        sandbox.probe.cache_clear()


def test_amas_takes_the_keys_out_of_its_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    config = providers.take_keys(make_config())
    assert "OPENAI_API_KEY" not in os.environ
    assert KEY not in subprocess.run(["env"], capture_output=True, text=True).stdout
    assert redact.Secrets(config).redact(f"key {KEY}") == "key [REDACTED]"
    with providers.lent(config["env_keys"]):
        assert os.environ["OPENAI_API_KEY"] == KEY
    assert "OPENAI_API_KEY" not in os.environ


def test_a_key_never_reaches_a_command_and_the_model_call_still_has_it(project, llm):
    command = "env > env.txt; cat /proc/[0-9]*/environ > environs.bin 2>/dev/null; true"
    llm.reply(tool="shell_command", command=command)
    llm.reply(text="done")
    env = dict(AMAS_MODEL="openai/test-model", AMAS_API_BASE=llm.url, OPENAI_API_KEY=KEY)
    done = run_amas("--yes", "look around", env=env)
    assert done.returncode == 0, done.stderr
    assert KEY not in (project / "env.txt").read_text()
    assert KEY.encode() not in (project / "environs.bin").read_bytes()
    assert llm.authorizations == [f"Bearer {KEY}"] * 2
