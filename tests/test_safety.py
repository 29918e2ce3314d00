"""The gates in-process: shell rules, paths outside the project, redaction,
and a fuzzed dispatcher."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import API_KEY, history_file, make_config, toolbox
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amas_code import home as amas_home
from amas_code import redact


def shell(box, command):
    return box.execute("shell_command", json.dumps({"command": command}))


def test_allow_rule_runs_without_asking_and_others_are_declined_without_a_terminal(bare):
    box = toolbox(bare, permissions={"allow": ["echo *"], "deny": [], "env": []})
    assert shell(box, "echo allowed") == "$ echo allowed\nallowed\n[exit code 0]"
    assert box.gate.last == ("echo allowed", "allow", "by 'echo *'")
    assert shell(box, "touch made.txt") == "Command declined (no terminal to ask the user on)."
    assert not (bare / "made.txt").exists()
    (bare / "src").mkdir()
    (bare / "src/a.py").write_text("")
    # a glob that stays in the project still runs
    for line in (
        "echo src/*.py",
        "echo -n src/?.py",
        "echo *",
    ):
        assert "[exit code 0]" in shell(box, line), line


def test_always_remembers_the_exact_commands_in_your_home(repl, project, home, llm):
    llm.reply(tool="shell_command", command="echo first && echo second").reply(text="one")
    llm.reply(tool="shell_command", command="echo first && echo second").reply(text="two")
    child = repl()
    child.sendline("run it")
    child.expect(r"Run `echo first && echo second`\?")
    child.sendline("a")
    child.expect("one")
    child.expect("›")
    saved = json.loads((home / ".amas/projects.json").read_text())[amas_home.project_id(project)]
    assert saved["commands"] == ["echo first", "echo second"]
    child.sendline("run it again")
    child.expect("two")  # no question this time
    child.expect("›")
    assert "Run `echo first" not in child.before
    child.sendline("/permissions")
    child.expect("allowed: echo first, echo second")
    child.expect_exact("last: 'echo first && echo second' -> allow by 'echo first, echo second'")


def test_writing_outside_asks_even_under_yes_and_symlinks_count(bare, tmp_path):
    target = tmp_path / "outside.txt"
    target.write_text("original\n")
    (bare / "link.txt").symlink_to(target)
    box = toolbox(bare, auto_accept=True)
    box.execute("read_file", json.dumps({"path": str(target)}))  # a read outside: --yes answers it
    for args in ({"path": str(target), "content": "x"}, {"path": "link.txt", "content": "x"}):
        assert "(outside the project) was declined: no terminal to ask the user on" in box.execute(
            "write_file", json.dumps(args)
        )
    edit = {"path": "link.txt", "old_str": "original", "new_str": "changed"}
    assert "declined" in box.execute("edit_file", json.dumps(edit))
    assert target.read_text() == "original\n"
    assert box.execute(
        "write_file", json.dumps({"path": "inside.txt", "content": "ok"})
    ).startswith("Write")


def test_secrets_are_redacted_before_the_model_the_screen_and_the_history(
    project, llm, amas, monkeypatch
):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-abcdef123456")
    monkeypatch.setenv("SHORT_KEY", "abc")  # under 6 characters: left alone
    llm.reply(tool="shell_command", command="cat token.txt").reply(text="done")
    # children never see them: a file does
    (project / "token.txt").write_text(f"tok-abcdef123456 abc {API_KEY}")
    result = amas("-y", "show the env")
    assert result.exit_code == 0
    fed_back = llm.requests[1]["messages"][-1]["content"]
    assert "[REDACTED] abc [REDACTED]" in fed_back
    history = history_file(project).read_text()
    for secret in ("tok-abcdef123456", API_KEY):
        assert secret not in fed_back and secret not in history and secret not in result.output


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.one_of(
        st.sampled_from(
            [
                "read_file",
                "write_file",
                "create_file",
                "edit_file",
                "shell_command",
                "search_files",
                "list_files",
                "get_text",
            ]
        ),
        st.text(max_size=20),
    ),
    args=st.one_of(
        st.dictionaries(
            st.sampled_from(
                [
                    "path",
                    "content",
                    "old_str",
                    "new_str",
                    "command",
                    "timeout",
                    "pattern",
                    "offset",
                    "limit",
                    "url",
                    "selector",
                    "text",
                    "query",
                    "num_results",
                    "x",
                ]
            ),
            st.one_of(
                st.none(),
                st.booleans(),
                st.integers(),
                st.floats(),
                st.text(max_size=30),
                st.lists(st.integers(), max_size=3),
            ),
        ),
        st.text(max_size=40).map(lambda s: {"__raw__": s}),
    ),
)
def test_fuzzed_dispatcher_always_returns_a_string(bare, name, args):
    # no fuzzed command ever runs
    box = toolbox(bare, permissions={"allow": [], "deny": ["*"], "env": []})
    raw = args["__raw__"] if "__raw__" in args else json.dumps(args)
    try:
        result = box.execute(name, raw)
    finally:
        # a browser tool started Chromium: left open, it holds Playwright's loop for later tests
        box.close()
    assert isinstance(result, str) and result


@pytest.mark.parametrize(
    "old, new",
    [("DB_PASSWORD=", "DB_PASSWORD=\n"), ("DB_PASSWORD=", "DB_NAME="), ("DB_PASSWORD=", "")],
)
def test_an_edit_never_parts_a_secret_from_the_name_that_hides_it(bare, old, new):
    env = "HOST=db\nDB_PASSWORD=Tr0ub4dor&3x\n"
    (bare / ".env").write_text(env)
    box = toolbox(bare, auto_accept=True)
    said = box.execute("edit_file", json.dumps({"path": ".env", "old_str": old, "new_str": new}))
    assert said.startswith(
        "Error: this edit would leave a hidden secret without the name that hides it"
    )
    assert (bare / ".env").read_text() == env and "Tr0ub4dor" not in box.execute(
        "read_file", '{"path": ".env"}'
    )
    done = box.execute(
        "edit_file", json.dumps({"path": ".env", "old_str": "HOST=db", "new_str": "HOST=db2"})
    )
    assert done.startswith("Edit .env") and (bare / ".env").read_text() == env.replace(
        "db\n", "db2\n", 1
    )


def test_config_secrets_from_every_layer_are_known(bare):
    secrets = redact.Secrets(make_config(secrets=["home-key-123456", "project-key-654321"]))
    assert secrets.redact("home-key-123456 project-key-654321") == "[REDACTED] [REDACTED]"


@pytest.mark.parametrize(
    "line, shown",
    [
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key = [REDACTED]",
        ),
        ("db_password=hunter2x", "db_password=[REDACTED]"),
        ("SECRET_KEY = unquoted9value", "SECRET_KEY = [REDACTED]"),
        ("password = hunter2", "password = [REDACTED]"),
        (
            'curl -H "Authorization: Bearer abcdef123456" x',
            'curl -H "Authorization: Bearer [REDACTED]" x',
        ),
        ("_auth=ZGV2dXNlcjpTM2NyZXQ=", "_auth=[REDACTED]"),  # .npmrc
        (
            "//registry.npmjs.org/:_authToken=abc123def456",
            "//registry.npmjs.org/:_authToken=[REDACTED]",
        ),
        # docker
        (
            '{"auths": {"r": {"auth": "ZGV2dXNlcjpTM2NyZXQ="}}}',
            '{"auths": {"r": {"auth": "[REDACTED]"}}}',
        ),
        ("<password>CorrectHorseBattery</password>", "<password>[REDACTED]</password>"),  # maven
        ("  password: hunter2", "  password: [REDACTED]"),
        ("DB_PASS = 'correcthorse'", "DB_PASS = '[REDACTED]'"),
        # not `password [REDACTED] correct9horse`
        (
            "password = correct9horse",
            "password = [REDACTED]",
        ),
        # code and config that hold no secret stay
        (
            "primary_key = id_column",
            "primary_key = id_column",
        ),
        ('"author": "JaneDoe", "compass": "north"', '"author": "JaneDoe", "compass": "north"'),
        ("self.token = token_from_env()", "self.token = token_from_env()"),
        ("max_tokens = 8192", "max_tokens = 8192"),
    ],
)
def test_secret_assignments_in_common_formats_are_redacted(bare, line, shown):
    assert redact.Secrets(make_config()).redact(line) == shown


AS_NOBODY = """
import json, sys
sys.path.insert(0, sys.argv[1])
from conftest import toolbox
box = toolbox(sys.argv[2], auto_accept=True)
print(json.dumps(box.execute("shell_command", json.dumps({"command": sys.argv[3]}))))
"""


def test_a_command_cannot_read_the_key_from_amas_own_environment(tmp_path):
    """Children get no secret variables, but /proc/$PPID/environ held amas's whole first
    environment: a shifted copy (`tr`, the name too) passed the redaction. Root reads any process's:
    as root the command runs as nobody."""
    base = Path(tempfile.mkdtemp(prefix="amas-environ-"))
    try:
        os.chmod(base, 0o777)
        as_nobody = (
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            if os.geteuid() == 0
            else []
        )
        env = {**os.environ, "HOME": str(base), "OPENAI_API_KEY": "sk-abcdefghijklmnopqrstuvwxyz"}
        # the name shifted too
        line = "tr 'A-Za-z' 'B-ZAb-za' < /proc/$PPID/environ | tr '\\0' '\\n' | grep tl-"
        args = [sys.executable, "-c", AS_NOBODY, str(Path(__file__).parent), str(base), line]
        done = subprocess.run(
            [*as_nobody, *args], env=env, capture_output=True, text=True, timeout=60
        )
        said = json.loads(done.stdout.strip().splitlines()[-1])
        assert "[exit code" in said and "tl-bcdefghijklmnopqrstuvwxyza" not in said, said
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("git_repo", [True, False])
def test_search_files_is_no_oracle_on_a_hidden_secret(bare, git_repo):
    """A pattern runs on the text as the model sees it, secrets redacted: which files and lines
    match, and how long it takes, never depend on a hidden value (before, the files were chosen on
    the raw text)."""
    if git_repo:
        subprocess.run(["git", "init", "-q"], cwd=bare, check=True)
    (bare / ".env").write_text("DEBUG=true\nDB_PASSWORD=Xk9#mQ2vLp7z!Rt4\n")
    (bare / "settings.py").write_text("API_TOKEN = 'tok_9fQ2xLm7Zp4K'\n")
    box = toolbox(bare)
    for right, wrong in [("Xk9#", "Yk9#"), ("Xk9#mQ", "Xk9#mR")]:
        forms = [
            r"\ADEBUG=true\Z|(?=[\s\S]*PASSWORD=%s)",
            r"\[REDACTED\]|PASSWORD=%s",
            r"DEBUG|PASSWORD=%s",
        ]
        for form in forms:
            said = [
                box.execute("search_files", json.dumps({"pattern": form % re.escape(g)}))
                for g in (right, wrong)
            ]
            assert said[0] == said[1], form
    guess = [
        box.execute("search_files", json.dumps({"pattern": rf"\[REDACTED\]|API_TOKEN = '{g}"}))
        for g in "tx"
    ]
    assert (
        guess[0]
        == guess[1]
        == (  # the pattern ran on the text as shown: the guess never counts
            ".env:2: DB_PASSWORD=[REDACTED]\nsettings.py:1: API_TOKEN = '[REDACTED]'"
        )
    )
    shown = box.execute("search_files", json.dumps({"pattern": "DEBUG|PASSWORD", "path": ".env"}))
    # a file matching elsewhere shows it redacted
    assert shown == ".env:1: DEBUG=true\n.env:2: DB_PASSWORD=[REDACTED]"


@pytest.mark.parametrize(
    "line",
    [
        "{ rm -rf victim; }",  # a group, a condition, a negation: bash runs the command inside
        "if true; then rm -rf victim; fi",
        "! rm -rf victim",
        "flock .lk -c 'rm -rf victim'",  # a runner's string, run by a shell
    ],
)
def test_deny_rules_see_commands_inside_the_shells_grammar(project, home, llm, amas, line):
    """Under --yes, a deny rule refuses a command wherever the grammar of bash puts it."""
    (home / ".amas").mkdir()
    (home / ".amas/config.yaml").write_text("permissions:\n  deny: ['rm -rf *']\n")
    (project / "victim").mkdir()
    (project / "victim/keep.txt").write_text("keep\n")
    llm.reply(tool="shell_command", command=line).reply(text="done")
    amas("-y", "tidy up")
    assert (project / "victim/keep.txt").read_text() == "keep\n"
    said = llm.requests[1]["messages"][-1]["content"]
    assert said == "Error: command refused by the deny rule 'rm -rf *' in permissions"


def test_the_model_cannot_lift_shell_timeout_and_yes_does_not_either(project, home, llm, amas):
    """A call's timeout above shell_timeout is the person's to give, in a terminal; under --yes with
    none, the command runs within shell_timeout and the model is told why (it would have held amas
    for the call's 100000 s; refused, a small model spent a turn asking again with 30)."""
    (home / ".amas").mkdir()
    (home / ".amas/config.yaml").write_text("shell_timeout: 1\n")
    llm.reply(tool="shell_command", command="sleep 600", timeout=100000).reply(text="done")
    result = amas("-y", "wait a while")
    said = llm.requests[1]["messages"][-1]["content"]
    assert said.startswith("$ sleep 600\n[exit code -9]\n[timed out after 1s")
    assert said.endswith(
        "[run within shell_timeout's 1 s, not the 100000 s asked: only the user can allow longer, "
        "in a terminal]"
    )
    assert "declined by the user" not in said and result.exit_code == 0


def test_yes_does_not_read_the_dot_files_of_your_home(project, home, llm, amas):
    """A shell's or tool's settings in the home (fish's config, here) hold tokens: read only when
    the person says so in a terminal, never under --yes alone; the toolchain's places stay
    readable."""
    (home / ".config/fish").mkdir(parents=True)
    (home / ".config/fish/config.fish").write_text("set -x DEPLOY_TOKEN 9fK2vQ7xLmZ4pR8t\n")
    (home / ".rustup").mkdir()
    (home / ".rustup/settings.toml").write_text('default_toolchain = "stable"\n')
    fish = str(home / ".config/fish/config.fish")
    llm.reply(tool="read_file", path=fish).reply(tool="read_file", path="~/.rustup/settings.toml")
    llm.reply(text="done")
    result = amas("-y", "look at my shell")
    said = [r["messages"][-1]["content"] for r in llm.requests[1:]]
    assert said[0] == (
        f"Error: access to {fish} (outside the project: ~/.config in your home, which may hold "
        "credentials) was declined: no terminal to ask the user on"
    )
    assert 'default_toolchain = "stable"' in said[1]
    sent = json.dumps(llm.requests)
    assert "9fK2vQ7xLmZ4pR8t" not in sent and "9fK2vQ7xLmZ4pR8t" not in result.output


def test_a_write_lands_where_it_was_approved_or_nowhere(bare, tmp_path, monkeypatch):
    """`sub` becomes a link out of the project while the person reads the question: the approved
    write is refused, and says why, rather than following the link."""
    from amas_code import act

    (bare / "sub").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()

    def swap_then_yes(gate, verdict, detail=None):
        if not (bare / "sub").is_symlink():
            (bare / "sub").rmdir()
            (bare / "sub").symlink_to(outside)
        return True, ""

    monkeypatch.setattr(act, "ask", swap_then_yes)
    box = toolbox(bare)
    said = box.execute("write_file", json.dumps({"path": "sub/notes.md", "content": "hi\n"}))
    assert said == (
        f"Error: the path changed since it was approved: {bare.resolve()}/sub "
        "is no longer a folder (a link now?); nothing was written"
    )
    assert list(outside.iterdir()) == []
    box.execute("write_file", json.dumps({"path": "new/notes.md", "content": "made\n"}))
    assert (bare / "new/notes.md").read_text() == "made\n"  # folders on the way are made
