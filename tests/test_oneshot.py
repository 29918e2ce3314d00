"""One-shot runs end to end through amas's real provider path (an openai/ model at an api_base
goes through the openai SDK) against the scripted server."""

import json
import subprocess
import sys

from conftest import amas_env, git, history_file, run_amas

from amas_code import __version__
from amas_code import home as amas_home


def test_create_file_with_yes(project, llm, amas):
    llm.reply(tool="create_file", path="hello.py", content="print('hello')\n").reply(
        text="Created **hello.py**."
    )
    result = amas("-y", "create hello.py that prints hello")
    assert result.exit_code == 0, result.output
    assert (project / "hello.py").read_text() == "print('hello')\n"
    assert "Created **hello.py**." in result.output  # the answer as the model wrote it
    # the call, its diff
    assert "● create_file hello.py" in result.output and "+print('hello')" in result.output
    # checkpoints never land on the user's branch
    assert git(project, "log", "--format=%s") == "initial\n"
    first, second = llm.requests
    assert first["stream"] is True
    assert (
        first["messages"][0]["role"] == "system"
        and "You are Amas Code" in first["messages"][0]["content"]
    )
    assert first["messages"][-1] == {"role": "user", "content": "create hello.py that prints hello"}
    assert {t["function"]["name"] for t in first["tools"]} >= {
        "read_file",
        "edit_file",
        "shell_command",
    }
    # litellm consumed its own options; the `mcp` package is not needed for tool calls
    assert not {"_skip_mcp_handler", "retry_policy", "retry_strategy"} & set(first)
    tool_result = second["messages"][-1]
    assert tool_result["role"] == "tool" and "Create hello.py" in tool_result["content"]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "create_file"


def test_edit_without_terminal_is_declined(project, llm, amas):
    (project / "app.py").write_text("x = 1\n")
    llm.reply(tool="edit_file", path="app.py", old_str="x = 1", new_str="x = 2").reply(text="ok")
    result = amas("change x to 2")
    assert result.exit_code == 2  # done, but an edit was declined
    assert (project / "app.py").read_text() == "x = 1\n"
    assert "no terminal to ask on (run with --yes to accept)" in result.output
    assert (
        llm.requests[1]["messages"][-1]["content"]
        == "Edit declined (no terminal to ask the user on)."
    )
    assert git(project, "log", "--format=%s") == "initial\n"


def test_prompt_from_stdin(project, llm, amas):
    llm.reply(text="Hello from the model")
    result = amas(input="say hello\n")
    assert result.exit_code == 0 and "Hello from the model" in result.output
    assert llm.requests[0]["messages"][-1]["content"] == "say hello"


def test_401_exits_1_with_a_clear_line(project, llm):
    llm.error(401, "Incorrect API key provided")
    result = run_amas("hello", llm=llm, input="")
    assert result.returncode == 1
    assert "authentication failed for openai/test-model" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_dead_api_base_exits_1(project, llm):
    result = run_amas("hello", llm=llm, input="", env={"AMAS_API_BASE": "http://127.0.0.1:9/v1"})
    assert result.returncode == 1
    assert "cannot reach http://127.0.0.1:9/v1: is the server running" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_missing_api_key_says_which_variable(project):
    result = run_amas("hello", input="", env={"AMAS_MODEL": "gemini/gemini-2.5-flash"})
    assert result.returncode == 1
    assert (
        "no API key for gemini/gemini-2.5-flash: export GOOGLE_API_KEY or GEMINI_API_KEY"
        in result.stderr
    )


def test_bad_config_names_file_and_line(project, amas):
    (project / ".amas").mkdir()
    (project / ".amas/config.yaml").write_text("model: x\nignore: [unclosed\n")
    result = amas("hi")
    assert result.exit_code == 1
    assert "config.yaml: line 3: invalid YAML" in result.output


def test_config_value_of_the_wrong_type_is_named(project, amas):
    (project / ".amas").mkdir()
    (project / ".amas/config.yaml").write_text("max_context_tokens: lots\n")
    result = amas("hi")
    assert (
        result.exit_code == 1
        and "config.yaml: max_context_tokens should be a whole number, not 'lots'" in result.output
    )


def test_unknown_config_key_warns(project, llm, amas):
    (project / ".amas").mkdir()
    (project / ".amas/config.yaml").write_text("modle: typo\n")
    llm.reply(text="fine")
    result = amas("hi")
    assert result.exit_code == 0 and "unknown config key 'modle' ignored" in result.output


def test_config_merge_order(project, home, monkeypatch):
    from amas_code import config

    (home / ".amas").mkdir()
    (home / ".amas/config.yaml").write_text(
        "model: user/m\nshell_timeout: 5\nmax_context_tokens: 1000\n"
    )
    (project / ".amas").mkdir()
    (project / ".amas/config.yaml").write_text("model: project/m\nshell_timeout: 7\n")
    amas_home.set_trust(project, True)  # untrusted, a looser shell_timeout would be ignored
    monkeypatch.setenv("AMAS_MODEL", "env/m")
    merged, warnings, _ = config.load(project, {"model": None, "api_base": "http://flag"})
    assert (merged["model"], merged["shell_timeout"], merged["max_context_tokens"]) == (
        "env/m",
        7,
        1000,
    )
    assert merged["api_base"] == "http://flag" and warnings == []
    assert config.load(project, {"model": "flag/m"})[0]["model"] == "flag/m"


def test_version_and_help_import_nothing_heavy(bare):
    code = (
        "import sys, runpy; sys.argv = ['amas', '{arg}']\n"
        "try: runpy.run_module('amas_code', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "heavy = [m for m in ('litellm', 'playwright', 'tree_sitter', 'git', 'httpx', "
        "'prompt_toolkit', 'googlesearch', 'html2text', 'yaml') if m in sys.modules]\n"
        "sys.stderr.write(repr(heavy))"
    )
    for arg in ("--version", "--help"):
        result = subprocess.run(
            [sys.executable, "-c", code.format(arg=arg)],
            capture_output=True,
            text=True,
            env=amas_env(),
        )
        assert result.stderr == "[]", arg
    assert run_amas("--version").stdout == f"amas {__version__}\n"


def test_python_dash_m_help(bare):
    result = run_amas("--help")
    assert result.returncode == 0 and "amas init" in result.stdout and "--continue" in result.stdout


def test_a_folder_where_amas_cannot_keep_state_still_answers(project, llm):
    (project / ".amas").write_text("a file where amas expects its folder\n")
    llm.reply(text="still here")
    result = run_amas("hi", llm=llm, input="")
    assert result.returncode == 0 and "still here" in result.stdout
    # its state lives in your home: a file in place of .amas/ costs nothing
    assert "Traceback" not in result.stderr and history_file(project).is_file()
    assert (project / ".amas").read_text() == "a file where amas expects its folder\n"


def test_a_config_with_a_nul_or_that_is_a_folder_is_named_plainly(project, llm, amas):
    (project / ".amas").mkdir()
    (project / ".amas/config.yaml").write_text("model: x\0\n")
    result = amas("hi")
    assert (
        result.exit_code == 1
        and "config.yaml: invalid YAML (" in result.output
        and "::" not in result.output
    )
    (project / ".amas/config.yaml").unlink()
    (project / ".amas/config.yaml").mkdir()
    llm.reply(text="fine")
    result = amas("hi")
    assert result.exit_code == 0 and "config.yaml is not a file; ignored" in result.output


def test_credentials_in_the_api_base_never_reach_the_screen(project, llm):
    base = "http://alice:S3cretPassw0rd@127.0.0.1:9/v1"
    result = run_amas("hello", llm=llm, input="", env={"AMAS_API_BASE": base})
    assert result.returncode == 1
    assert (
        "cannot reach http://alice:[REDACTED]@127.0.0.1:9/v1: is the server running"
        in result.stderr
    )
    assert "S3cretPassw0rd" not in result.stderr + result.stdout


def test_write_file_over_a_file_the_model_never_read_is_refused_under_yes(project, llm, amas):
    """The real 1.5B model applied its edit, then wrote `obj['calc.py']` over the file it had only
    edited: write_file replaces a file only once the model has read it in this session."""
    (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    llm.reply(tool="edit_file", path="calc.py", old_str="a + b", new_str="b + a")
    llm.reply(tool="write_file", path="calc.py", content="obj['calc.py']")
    llm.reply(tool="read_file", path="calc.py")
    llm.reply(tool="write_file", path="calc.py", content="def add(a, b):\n    return a + b  # +\n")
    llm.reply(text="done")
    result = amas("--yes", "--output-format", "json", "fix calc.py")
    refused = [m for m in llm.requests[2]["messages"] if m["role"] == "tool"][-1]["content"]
    assert refused == (
        "Error: calc.py exists and you have not read it in this session: write_file would replace "
        "all 2 lines of it. Read it first (read_file), or change a part with edit_file"
    )
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a + b  # +\n"
    assert json.loads(result.output.splitlines()[-1])["tool_calls"][1]["status"] == "failed"


def test_write_file_over_a_file_changed_since_it_was_read_is_refused(project, llm, amas):
    (project / "notes.txt").write_text("mine\n")

    def the_user_edits_meanwhile(body):
        (project / "notes.txt").write_text("the user's edit\n")
        return "write_file", json.dumps({"path": "notes.txt", "content": "the model's\n"})

    llm.reply(tool="read_file", path="notes.txt")
    llm.reply_from(the_user_edits_meanwhile)
    llm.reply(text="done")
    amas("--yes", "tidy the notes")
    said = [m for m in llm.requests[2]["messages"] if m["role"] == "tool"][-1]["content"]
    assert said.startswith("Error: notes.txt changed since you last read it")
    assert (project / "notes.txt").read_text() == "the user's edit\n"


def test_a_run_whose_every_change_failed_exits_4(project, llm, amas):
    """Every failed run of the real 1.5B model exited 0 though all its edits failed and nothing
    changed: exit code 4, said on screen and in the JSON result."""
    llm.reply(tool="edit_file", path="src/main.py", old_str="a", new_str="b")
    llm.reply(tool="edit_file", path="README.md", old_str="no such text", new_str="b")
    llm.reply(text="I fixed it.")
    result = amas("--yes", "--output-format", "json", "fix main")
    assert result.exit_code == 4
    assert "every change the agent attempted failed: nothing changed (exit code 4)" in result.stderr
    assert json.loads(result.output.splitlines()[-1])["exit_code"] == 4
    llm.reply(tool="edit_file", path="README.md", old_str="no such text", new_str="b")
    llm.reply(tool="edit_file", path="README.md", old_str="demo", new_str="Demo")
    llm.reply(text="Fixed on the second try.")
    assert amas("--yes", "fix the title").exit_code == 0
    llm.reply(text="Nothing to change.")
    assert amas("--yes", "look").exit_code == 0  # no change attempted: nothing failed


def test_a_turn_that_ends_with_a_file_left_unparsable_says_so(project, llm, amas):
    """The model broke calc.py, got the warning in its tool result, and answered in prose: the run
    ended with the file broken and said nothing to the user."""
    (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    llm.reply(tool="edit_file", path="calc.py", old_str="return a + b", new_str="return (a + b")
    llm.reply(text="Done: add is fixed.")
    result = amas("--yes", "--output-format", "json", "fix add")
    said = "the agent's edits left calc.py (a syntax error at line 2): the file no longer parses"
    assert said in result.stderr
    assert any(said in w for w in json.loads(result.output.splitlines()[-1])["warnings"])
    llm.reply(tool="edit_file", path="calc.py", old_str="return a + b", new_str="return (a + b")
    llm.reply(tool="edit_file", path="calc.py", old_str="return (a + b", new_str="return (a + b)")
    llm.reply(text="Done.")
    (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    assert "no longer parses" not in amas("--yes", "fix add").stderr  # mended within the turn


def test_a_reply_that_only_echoes_a_tool_result_is_asked_again_once(project, llm, amas):
    """A small model answered with amas's own `<tool_response> Error: …`, which ended the task."""
    llm.reply(tool="read_file", path="nope.py")
    llm.reply(
        text='<tool_response name="read_file">\nError: nope.py does not exist.\n</tool_response>'
    )
    llm.reply(text="There is no nope.py in this project.")
    result = amas("--yes", "read nope.py")
    assert len(llm.requests) == 3
    assert llm.requests[2]["messages"][-1]["content"].startswith("[Your reply only repeated")
    assert "There is no nope.py in this project." in result.output
