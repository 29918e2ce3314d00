"""What a person meets (issue 16):
the screen of a real terminal, the files on disk, what the model is sent."""

import json
import re
import shlex
import subprocess
import sys
import time

import pexpect
import pytest
from conftest import FRESH, amas_argv, amas_env, history_file, run_amas

from amas_code import home as amas_home

ANSI = re.compile(r"\x1b(\[[0-9;?]*[a-zA-Z]|[()][0-9A-Za-z]|[=>])")
QUESTION = r"\[y\]es/\[n\]o"


def screen(raw: str) -> str:
    """What the terminal showed, as text: no escape codes, lines ending in \\n."""
    return ANSI.sub("", raw).replace("\r\n", "\n").replace("\r", "\n")


@pytest.fixture
def term(project, llm):
    """`amas [args]` (or argv) in a pseudo-terminal of the given size, without COLUMNS:
    rich asks the terminal."""
    children = []

    def start(*args, dims=(40, 120), argv=None, wait=True):
        # a folder the person trusted before, as it is now: no first-use question
        amas_home.set_trust(project, True)
        full = amas_env(llm, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm", NO_COLOR="1")
        full.pop("COLUMNS")
        argv = argv or amas_argv(*args, env=full)
        child = pexpect.spawn(
            argv[0],
            argv[1:],
            cwd=str(project),
            env=full,
            encoding="utf-8",
            timeout=30,
            dimensions=dims,
        )
        children.append(child)
        if wait:
            child.expect(r"Ctrl\+D to\s+quit")
            child.expect("›")
        return child

    yield start
    for child in children:
        child.close(force=True)


def upto(child, pattern) -> str:
    """Everything the terminal showed until pattern, pattern included, as text."""
    child.expect(pattern)
    return screen(child.before + child.after)


class Arrivals(list):
    """The scripted server's request list, with the moment the latest request arrived."""

    def append(self, body):
        self.at = time.monotonic()
        super().append(body)


def config(project, text: str) -> None:
    (project / ".amas").mkdir(exist_ok=True)
    (project / ".amas/config.yaml").write_text(text)


# -- the screen -----------------------------------------------------------------------------------


def test_a_created_file_is_shown_once_at_40_and_at_80_columns(term, project, llm):
    llm.reply(
        tool="create_file", path="poem.txt", content="zebra7 quokka9\nsecond line here\n"
    ).reply(text="Made it.")
    llm.reply(tool="create_file", path="note.txt", content="walrus3 alone\n").reply(text="Noted.")
    child = term(dims=(40, 40))
    child.sendline("write a poem")
    seen = upto(child, QUESTION)
    child.sendline("y")
    seen += upto(child, "Made it.") + upto(child, "›")
    assert seen.count("zebra7 quokka9") == 1 and seen.count("second line here") == 1, seen
    assert "Create poem.txt: 2 lines" in seen

    child.setwinsize(40, 80)
    child.sendline("and a note")
    seen = upto(child, QUESTION)
    child.sendline("y")
    seen += upto(child, "Noted.") + upto(child, "›")
    assert seen.count("walrus3 alone") == 1, seen
    assert "Create note.txt: 1 line" in seen and "1 lines" not in seen
    assert (project / "poem.txt").read_text() == "zebra7 quokka9\nsecond line here\n"


def test_shell_output_is_shown_as_an_excerpt_and_the_model_gets_its_tail(term, project, llm):
    command = "seq -f 'row%g' 1 40; python3 -c \"print('x' * 200000)\"; echo fatal-oops >&2; exit 3"
    llm.reply(tool="shell_command", command=command).reply(text="It failed.")
    child = term()
    child.sendline("run the build")
    child.expect(QUESTION)
    child.sendline("y")
    seen = upto(child, "It failed.")
    # an excerpt, not the whole
    assert "row1\n" in seen and "row20" not in seen and "more lines" in seen
    assert "fatal-oops" in seen and "[exit code 3]" in seen  # where it went wrong, and how it ended
    result = llm.requests[1]["messages"][-1]["content"]
    assert len(result) <= 60_100 and "characters cut" in result
    assert result.startswith("$ seq") and result.endswith("[stderr]\nfatal-oops\n[exit code 3]")


@pytest.mark.parametrize("preload", ["false", "true"])
def test_after_enter_the_spinner_shows_while_the_model_library_loads(term, project, llm, preload):
    config(project, f"preload: {preload}\n")
    llm.requests = Arrivals()
    llm.reply(text="Here it is.", wait=1)
    # litellm not imported yet: this is about waiting for it (the direct path loads in 0.3 s)
    child = term(argv=[*FRESH, "-m", "custom_openai/test-model"])
    enter = time.monotonic()
    child.sendline("hello")  # at once, while a preload would still be importing
    assert child.expect(["thinking", "Here it is."]) == 0
    shown = time.monotonic() - enter
    child.expect("Here it is.")
    asked = llm.requests.at - enter
    assert shown < asked / 2, (
        f"the spinner came {shown:.1f}s after Enter; the model was asked at {asked:.1f}s"
    )


def test_with_stdout_redirected_the_diff_and_question_stay_on_the_terminal(term, project, llm):
    llm.reply(tool="edit_file", path="README.md", old_str="# demo", new_str="# Demo Project").reply(
        text="Retitled."
    )
    amas = f"{shlex.join(amas_argv())} 'fix the title' > out.txt"
    child = term(argv=["bash", "-c", amas], wait=False)
    seen = upto(child, QUESTION)
    assert "-# demo" in seen and "+# Demo Project" in seen and "Apply edit to README.md?" in seen
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (project / "out.txt").read_text() == "Retitled.\n"
    assert (project / "README.md").read_text() == "# Demo Project\n"


@pytest.mark.parametrize(
    "shape", ["echo 'fix the title' | {amas}", "{amas} 'fix the title' 2> err.txt"]
)
def test_with_stdin_piped_or_stderr_redirected_the_question_is_asked_on_the_terminal(
    term, project, llm, shape
):
    llm.reply(tool="edit_file", path="README.md", old_str="# demo", new_str="# Demo Project").reply(
        text="Retitled."
    )
    child = term(
        argv=["bash", "-c", shape.format(amas=shlex.join(amas_argv()))],
        wait=False,
    )
    seen = upto(child, QUESTION)
    assert "+# Demo Project" in seen and "Apply edit to README.md?" in seen
    child.sendline("y")
    child.expect(pexpect.EOF)
    assert (project / "README.md").read_text() == "# Demo Project\n"


def test_a_one_line_edit_in_a_file_of_repeated_lines_shows_one_line_changed(term, project, llm):
    (project / "rows.csv").write_text("id,value\n" + "0,0\n" * 150 + "7,7\n" + "0,0\n" * 150)
    llm.reply(tool="edit_file", path="rows.csv", old_str="7,7", new_str="8,8").reply(text="Done.")
    child = term("-y", "fix row 7", wait=False)
    child.expect(pexpect.EOF)
    seen = screen(child.before)
    assert "@@ -150,5 +150,5 @@" in seen and "-7,7" in seen and "+8,8" in seen
    # not 600 lines of - and +
    assert len([ln for ln in seen.splitlines() if re.match(r"[-+]\d", ln)]) == 2


def test_resume_help_and_model_say_it_plainly(term, project, llm):
    old = [("old1234abcd9", "user", "first question"), ("5e55101d0a1f", "user", "latest question")]
    old.append(("5e55101d0a1f", "assistant", "latest answer"))
    lines = [
        {"session": s, "time": 1700000000.0 + n, "role": r, "content": c}
        for n, (s, r, c) in enumerate(old)
    ]
    history_file(project).write_text("".join(json.dumps(e) + "\n" for e in lines))
    child = term("-c", wait=False)
    seen = upto(child, "›")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(1700000002.0))
    assert (
        f"resuming the conversation of {when} (2 messages)" in seen and "5e55101d0a1f" not in seen
    )

    child.sendline("/help")
    assert "/undo [n]" in upto(child, "/quit")
    child.sendline("/model nonsense")
    line = upto(child, "✗[^\n]*\n")
    assert "unknown model 'nonsense'" in line and "LLM Provider" not in line
    child.sendline("/model")
    child.expect(f"model: openai/test-model at {re.escape(llm.url)}")  # unchanged
    # another provider: not our local server
    child.sendline("/model anthropic/claude-3-5-haiku-latest")
    line = upto(child, "model: anthropic/claude-3-5-haiku-latest[^\n]*\n")
    assert "127.0.0.1" not in line


def test_attach_says_what_happened_and_caps_what_it_sends(term, project, home, tmp_path, llm):
    # 5 MB
    (project / "big.log").write_text(
        "".join(f"log line {i} " + "y" * 80 + "\n" for i in range(60_000))
    )
    (project / "docs").mkdir()
    (home / ".bashrc").write_text("alias ll='ls -l'  # bashrc-marker\n")
    (tmp_path / "outside.txt").write_text("outside-marker\n")
    llm.reply(text="Seen them.")
    child = term()
    child.sendline("/attach")
    child.expect("/attach needs a file")
    child.sendline("/attach docs")
    child.expect("cannot attach docs: it is a folder")
    child.sendline("/attach ~/.bashrc")
    assert "outside the project" in upto(child, QUESTION)
    child.sendline("y")
    child.expect("attached .*bashrc")
    child.sendline(f"/attach {tmp_path / 'outside.txt'}")
    child.expect(QUESTION)
    child.sendline("n")
    child.expect("cannot attach .*outside.txt: access .* was declined")
    child.sendline("/attach big.log")
    child.expect("attached big.log")
    child.sendline("what do these say?")
    child.expect("Seen them.")
    sent = llm.requests[0]["messages"][-1]["content"]
    assert "bashrc-marker" in sent and "outside-marker" not in sent and "log line 0 " in sent
    assert len(sent) < 60_000 and "cut at 50 KB" in sent
    child.expect("›")
    assert history_file(project).stat().st_size < 100_000


def interrupt(child, until: str) -> str:
    """Ctrl+C until until shows
    (one typed while the prompt is still closing reaches the next prompt instead)."""
    for _ in range(20):
        child.sendintr()
        if child.expect([until, pexpect.TIMEOUT], timeout=0.5) == 0:
            return screen(child.before + child.after)
    raise AssertionError(f"{until!r} never showed: {screen(child.before)!r}")


def test_ctrl_c_while_loading_and_a_failed_turn_leave_the_next_request_clean(term, project, llm):
    config(project, "preload: true\n")
    llm.error(400, "the server refused this request").reply(text="Hello again to you.")
    child = term(argv=FRESH)  # litellm not imported yet
    child.sendline("first try")  # at once: the model library is still being imported
    child.expect("thinking")  # the turn is waiting for it (a Ctrl+C before clears the line)
    seen = interrupt(child, "cancelled") + upto(child, "›")
    assert "Exception ignored" not in seen and "Traceback" not in seen, seen
    assert not re.search(r"\^C[^\n]*cancelled", seen), seen  # the warning on a line of its own
    assert llm.requests == []  # cancelled before anything was sent
    child.sendline("/clear")
    child.expect("new conversation")

    child.sendline("hello")
    seen = upto(child, "refused") + upto(child, "›")
    assert "Traceback" not in seen
    child.sendline("hello again")
    child.expect("Hello again to you.")
    assert [m["content"] for m in llm.requests[-1]["messages"][1:]] == ["hello again"]


def read_only(project):
    """argv running amas with the project mounted read-only
    (root ignores file modes, not a read-only mount)."""
    probe = subprocess.run(
        ["unshare", "-m", "mount", "--bind", "-o", "ro", str(project), str(project)], check=False
    )
    if probe.returncode != 0:
        pytest.skip("cannot make a read-only mount here (unshare -m needs CAP_SYS_ADMIN)")
    p = shlex.quote(str(project))
    amas = f"mount --bind -o ro {p} {p} && exec {shlex.quote(sys.executable)} -m amas_code"
    return ["unshare", "-m", "sh", "-c", amas]


def test_a_read_only_folder_still_answers_and_writes_nothing(term, project, llm):
    before = sorted(p.name for p in project.iterdir())
    llm.reply(text="The answer is 42.").reply(text="Still 42.")
    child = term(argv=read_only(project), wait=False)
    seen = upto(child, r"Ctrl\+D to\s+quit")
    child.sendline("what is the answer?")
    seen += upto(child, "The answer is 42.") + upto(child, "›")
    child.sendline("and again?")
    seen += upto(child, "Still 42.") + upto(child, "›")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    seen += screen(child.before)
    assert "Traceback" not in seen and "unexpected" not in seen
    assert sorted(p.name for p in project.iterdir()) == before
    assert all(seen.count(line) == 1 for line in seen.splitlines() if line.startswith("⚠")), seen


def test_a_read_only_folder_costs_no_warning(term, project, llm):
    child = term(argv=read_only(project), wait=False)
    seen = upto(child, r"Ctrl\+D to\s+quit")
    child.sendline("/clear")  # saves the start of a new conversation, as every answer does
    seen += upto(child, "new conversation")
    assert "⚠" not in seen, seen  # amas keeps its state in your home, not in the folder


def test_continue_resumes_after_clear_and_after_compact(term, project, llm):
    two = "Answer two." + " More detail." * 100  # long enough that a summary is shorter
    llm.reply(text="Answer one.").reply(text=two)
    child = term()
    child.sendline("first question")
    child.expect("Answer one.")
    child.sendline("/clear")
    child.expect("new conversation")
    child.sendline("second question")
    child.expect("Answer two.")
    child.sendline("/quit")
    child.expect(pexpect.EOF)

    llm.reply(text="Answer three.").reply(text="Summary: asked a second question.", wait=1)
    child = term("-c")
    child.sendline("third question")
    child.expect("Answer three.")
    sent = [m["content"] for m in llm.requests[-1]["messages"][1:]]
    assert sent == ["second question", two, "third question"]
    child.sendline("/compact")
    seen = upto(child, "compacted")
    assert "thinking" in seen  # progress while the summary is written
    child.sendline("/quit")
    child.expect(pexpect.EOF)

    llm.reply(text="Answer four.")
    child = term("-c")
    child.sendline("fourth question")
    child.expect("Answer four.")
    sent = [m["content"] for m in llm.requests[-1]["messages"][1:]]
    assert (
        sent[0].startswith("[Summary of the earlier conversation]")
        and "asked a second question" in sent[0]
    )
    assert sent[2:] == ["third question", "Answer three.", "fourth question"]


# -- pipes and redirects ---------------------------------------------------------------------------


def test_a_piped_answer_is_the_model_text_unpadded_with_its_backticks(project, llm, amas):
    answer = "Call `load_config()` in __init__.py:\n\n# Steps\n- one *two*\n"
    llm.reply(text=answer)
    result = amas("how?")
    assert result.exit_code == 0 and result.stdout == answer


def test_piped_text_is_attached_to_the_prompt(project, llm, amas):
    llm.reply(text="The disk is full.")
    result = amas("explain this", input="starting\nERROR: disk full\n")
    assert result.exit_code == 0 and "The disk is full." in result.stdout
    sent = llm.requests[0]["messages"][-1]["content"]
    assert sent.startswith("explain this") and "starting\nERROR: disk full" in sent


@pytest.mark.parametrize("stdin", ["", "\n"], ids=["dev-null", "empty-line"])
def test_no_prompt_and_no_terminal_is_nothing_to_do(project, stdin):
    result = run_amas(input=stdin, timeout=30)
    assert result.returncode == 1 and "nothing to do" in result.stderr
    assert "Input is not a terminal" not in result.stdout + result.stderr
    assert not history_file(project).exists()


def test_from_a_subdirectory_the_project_root_config_is_used(project, llm, amas, monkeypatch):
    config(project, "model: openai/root-model\n")
    (project / "src/deep").mkdir(parents=True)
    monkeypatch.chdir(project / "src/deep")
    monkeypatch.delenv("AMAS_MODEL")
    llm.reply(text="from the root")
    result = amas("--trust", "hi")  # a project's model is used once you trust the folder
    assert result.exit_code == 0 and "from the root" in result.stdout
    assert llm.requests[0]["model"] == "root-model"
    assert not (project / "src/.amas").exists() and not (project / "src/deep/.amas").exists()
    assert history_file(project).is_file()


# -- files on disk ---------------------------------------------------------------------------------


def test_edit_refuses_a_file_that_is_not_utf8(project, llm, amas):
    (project / "menu.txt").write_bytes("café\nthé\n".encode("latin-1"))
    llm.reply(tool="edit_file", path="menu.txt", old_str="th", new_str="tea ").reply(text="ok")
    result = amas("-y", "fix the menu")
    assert (project / "menu.txt").read_bytes() == b"caf\xe9\nth\xe9\n"
    told = llm.requests[1]["messages"][-1]["content"]
    assert "not UTF-8" in told and "shell_command" in told  # what to do instead
    assert "+tea" not in result.stderr


def test_crlf_files_keep_crlf_through_edit_and_write(project, llm, amas):
    (project / "win.txt").write_bytes(b"alpha\r\nbeta\r\ngamma\r\n")
    llm.reply(tool="edit_file", path="win.txt", old_str="beta", new_str="beta\nbeta two")
    llm.reply(tool="read_file", path="win.txt")
    llm.reply(tool="write_file", path="win.txt", content="alpha\nbeta\nbeta two\nGAMMA\n")
    llm.reply(tool="write_file", path="win.txt", content="alpha\nbeta\nbeta two\nGAMMA\n").reply(
        text="done"
    )
    result = amas("-y", "change it")
    assert result.exit_code == 0
    assert (project / "win.txt").read_bytes() == b"alpha\r\nbeta\r\nbeta two\r\nGAMMA\r\n"
    diff = result.stderr.split("● write_file", 1)[1].split("● write_file")[0]
    assert "-gamma" in diff and "+GAMMA" in diff and "-alpha" not in diff  # only the changed line
    assert "no changes to win.txt" in result.stderr.rsplit("● write_file", 1)[1]


def test_a_tab_indented_old_str_keeps_its_tab(project, llm, amas):
    (project / "Makefile").write_text("all:\n\techo hi\n")
    llm.reply(tool="edit_file", path="Makefile", old_str="\techo hi", new_str="\techo bye").reply(
        text="done"
    )
    result = amas("-y", "say bye")
    assert result.exit_code == 0
    assert (project / "Makefile").read_text() == "all:\n\techo bye\n"
    shown = [line for line in result.output.splitlines() if "echo" in line]
    assert (
        len(shown) == 2
        and re.fullmatch(r"-\s{2,}echo hi", shown[0])
        and re.fullmatch(r"\+\s{2,}echo bye", shown[1])
    )


# -- config ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "yaml, args, line",
    [
        ('shell_timeout: "30"\n', ["hi"], "shell_timeout should be a number, not '30'"),
        ("model: null\n", ["hi"], "model should be a litellm model string"),
        ("ignore: [1, 2]\n", ["init"], "ignore should be a list of glob patterns, not [1, 2]"),
        ("", ["-m", "", "hi"], "model should be a litellm model string"),
        ("max_tokens: -5\n", ["hi"], "max_tokens should be above 0, not -5"),
        ("max_context_tokens: 0\n", ["hi"], "max_context_tokens should be above 0, not 0"),
        ("shell_timeout: -1.5\n", ["hi"], "shell_timeout should be above 0, not -1.5"),
    ],
    ids=[
        "quoted-number",
        "null-model",
        "ignore-numbers",
        "empty-model-flag",
        "negative",
        "zero",
        "negative-float",
    ],
)
def test_a_bad_setting_is_one_clear_line(project, llm, amas, yaml, args, line):
    config(project, yaml)
    result = amas(*args)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.stderr.count("\n") == 1 and line in result.stderr, result.stderr
    assert llm.requests == []


def test_a_model_without_a_provider_is_one_clear_line(project, llm, amas):
    result = amas("-m", "nonsense", "hi")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "unknown model 'nonsense'" in result.stderr and "LLM Provider" not in result.stderr
    assert llm.requests == []


def test_binary_piped_in_is_read_as_text_not_blamed_on_the_server(project, llm):
    llm.reply(text="Random bytes.")
    done = run_amas("what is this", llm=llm, input=bytes(range(256)) * 8)
    assert done.returncode == 0 and done.stdout == "Random bytes.\n"
    assert "\ufffd" in llm.requests[0]["messages"][-1]["content"]


def test_a_huge_log_piped_in_keeps_its_head_and_its_end(project, llm):
    llm.reply(text="The disk is full.")
    # 10 MB
    log = b"first line of the log\n" + b"INFO all is well\n" * 600_000 + b"ERROR disk full\n"
    done = run_amas("why did it fail?", llm=llm, input=log)
    assert done.returncode == 0 and done.stdout == "The disk is full.\n"
    sent = llm.requests[0]["messages"][-1]["content"]
    assert (
        sent.startswith("why did it fail?\n\n```\nfirst line of the log\n")
        and "ERROR disk full\n```" in sent
    )
    assert len(sent) < 70_000 and re.search(r"\[… [\d,]+ characters of piped input cut …\]", sent)
    said = [line for line in done.stderr.splitlines() if "piped input" in line]
    assert said == [
        f"⚠ piped input is {len(log):,} bytes: only its first 30 KB and last 30 KB are sent"
    ]


def test_in_your_home_folder_your_own_settings_are_not_a_stranger_project(home, llm, monkeypatch):
    (home / ".amas").mkdir()
    (home / ".amas/config.yaml").write_text("auto_accept: true\n")
    monkeypatch.chdir(home)
    llm.reply(tool="write_file", path="w.txt", content="w\n").reply(text="Written.")
    result = run_amas("write it", llm=llm, input="")
    assert result.returncode == 0 and (home / "w.txt").read_text() == "w\n"
    assert "not trusted" not in result.stderr
