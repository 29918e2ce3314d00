"""Safety: shell permissions, paths outside the project, secret redaction, a fuzzed dispatcher."""

import json

import yaml
from conftest import API_KEY
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amas_code import safety, tools
from amas_code.config import DEFAULT_CONFIG


def setup(root, **config):
    tools.setup(root, {**DEFAULT_CONFIG, "permissions": {"allow": [], "deny": []}, **config})


def shell(command):
    return tools.execute("shell_command", json.dumps({"command": command}))


def test_deny_refuses_even_under_yes(bare):
    (bare / "precious.txt").write_text("keep")
    setup(bare, auto_accept=True, permissions={"allow": ["rm *"], "deny": ["rm -rf *", "*sudo *"]})
    assert shell("rm -rf precious.txt") == "Error: command refused by the deny rule 'rm -rf *' in permissions"
    assert (bare / "precious.txt").read_text() == "keep"
    assert shell("echo x && sudo reboot").startswith("Error: command refused by the deny rule '*sudo *'")
    assert safety.LAST_RULE == {"command": "echo x && sudo reboot", "rule": "*sudo *", "verdict": "deny"}


def test_allow_rule_runs_without_asking_and_others_are_declined_without_a_terminal(bare):
    setup(bare, permissions={"allow": ["echo *"], "deny": []})
    assert shell("echo allowed") == "$ echo allowed\nallowed\n[exit code 0]"
    assert shell("touch made.txt") == "Command declined by user."
    assert not (bare / "made.txt").exists()


def test_always_answer_saves_an_allow_rule(repl, project, llm):
    llm.reply(tool="shell_command", command="echo first").reply(text="one")
    llm.reply(tool="shell_command", command="echo first").reply(text="two")
    child = repl()
    child.sendline("run it")
    child.expect(r"Run `echo first`\?")
    child.sendline("a")
    child.expect("one")
    child.expect("›")
    saved = yaml.safe_load((project / ".amas/config.yaml").read_text())
    assert saved == {"permissions": {"allow": ["echo first"]}}
    child.sendline("run it again")
    child.expect("two")  # no question this time
    child.expect("›")
    assert "Run `echo first`?" not in child.before
    child.sendline("/permissions")
    child.expect(r"allow: echo first")
    child.expect_exact("last: 'echo first' -> allow by 'echo first'")


def test_reading_outside_the_project_warns(bare, tmp_path, capsys):
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("far away\n")
    setup(bare)
    out = tools.execute("read_file", json.dumps({"path": str(outside)}))
    assert out.startswith("[warning: this file is outside the project root]\n     1\tfar away")
    assert "outside the project root" in capsys.readouterr().err


def test_writing_outside_asks_even_under_yes_and_symlinks_count(bare, tmp_path):
    target = tmp_path / "outside.txt"
    target.write_text("original\n")
    (bare / "link.txt").symlink_to(target)
    setup(bare, auto_accept=True)
    for args in ({"path": str(target), "content": "x"}, {"path": "link.txt", "content": "x"}):
        assert tools.execute("write_file", json.dumps(args)) == "Edit declined by user."
    assert tools.execute("edit_file", json.dumps({"path": "link.txt", "old_str": "original",
                                                  "new_str": "changed"})) == "Edit declined by user."
    assert target.read_text() == "original\n"
    assert tools.execute("write_file", json.dumps({"path": "inside.txt", "content": "ok"})).startswith("Write")


def test_secrets_are_redacted_everywhere(project, llm, amas, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-abcdef123456")
    monkeypatch.setenv("SHORT_KEY", "abc")  # under 8 characters: left alone
    llm.reply(tool="shell_command", command="echo $MY_SERVICE_TOKEN $AMAS_API_KEY $SHORT_KEY").reply(text="done")
    result = amas("-y", "show the env")
    assert result.exit_code == 0
    fed_back = llm.requests[1]["messages"][-1]["content"]
    assert "[REDACTED] [REDACTED] abc" in fed_back
    history = (project / ".amas/history.jsonl").read_text()
    for secret in ("tok-abcdef123456", API_KEY):
        assert secret not in fed_back and secret not in history and secret not in result.output


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.one_of(st.sampled_from(sorted(tools.HANDLERS)), st.text(max_size=20)),
       args=st.one_of(st.dictionaries(st.sampled_from(["path", "content", "old_str", "new_str", "command",
                                                        "timeout", "pattern", "offset", "limit", "url", "selector",
                                                        "text", "query", "num_results", "x"]),
                                      st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                                                st.text(max_size=30), st.lists(st.integers(), max_size=3))),
                      st.text(max_size=40).map(lambda s: {"__raw__": s})))
def test_fuzzed_dispatcher_always_returns_a_string(bare, monkeypatch, name, args):
    setup(bare, permissions={"allow": [], "deny": ["*"]})  # no fuzzed command ever runs
    offline = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("offline in this test"))  # noqa: E731
    for handler in ("search_google", "fetch_url", "navigate", "click", "type", "screenshot", "get_text"):
        monkeypatch.setitem(tools.HANDLERS, handler, offline)
    raw = args["__raw__"] if "__raw__" in args else json.dumps(args)
    result = tools.execute(name, raw)
    assert isinstance(result, str) and result
