"""amas's faults seen in the task bench with a real small model (Qwen2.5-Coder-1.5B), and in the
held-out corpus of real model outputs, as tests: each failed before its fix."""

import pytest
from conftest import run_amas

OK_TEST = "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        pass\n"


def test_a_timeout_above_shell_timeout_under_yes_is_capped_not_declined_by_nobody(project, llm):
    """Qwen2.5-Coder-1.5B's first call in the task bench (run-tests): shell_command
    {"command": "python -m unittest", "timeout": 60}. Under --yes with no terminal amas answered
    "Error: a timeout of 60s (...) was declined by the user" -- no user was asked -- the model spent
    a turn (16 s) repeating the call with 30, and the run exited 2 as if the person had declined."""
    (project / "test_ok.py").write_text(OK_TEST)
    llm.reply(tool="shell_command", command="python -m unittest", timeout=60)
    llm.reply(text="All tests pass.")
    done = run_amas("-y", "run the tests", llm=llm)
    said = llm.requests[1]["messages"][-1]["content"]
    assert "declined by the user" not in said
    assert "Ran 1 test" in said and "30" in said  # run, with the model told of the 30 s ceiling
    assert done.returncode == 0


def test_code_shown_for_a_file_with_no_change_made_is_asked_once_to_apply_it(project, llm):
    """The 1.5B's only reply in two of the first three tasks (failing-test, new-param): prose and a
    fenced block with the whole new function for a named file, no tool call. amas took it as the
    answer: exit 0, files_changed [], the file untouched."""
    (project / "report.py").write_text(
        'def format_row(name, amount):\n    return f"{name}: {amount:.2f}"\n'
    )
    shown = (
        "To add a parameter `currency` to `format_row` in `report.py`, here's the updated code:\n\n"
        "```python\n# report.py\ndef format_row(label, amount, currency=''):\n"
        '    return f"{label}: {currency}{amount:.2f}"\n```\n'
    )
    edit = {"path": "report.py", "old_str": "def format_row(name, amount):"}
    llm.reply(shown).reply(
        tool="edit_file", new_str="def format_row(name, amount, currency=''):", **edit
    )
    llm.reply(text="Done.")
    done = run_amas("-y", "Add a parameter currency to format_row in report.py", llm=llm)
    assert len(llm.requests) == 3, done.stdout
    again = llm.requests[1]["messages"][-1]
    assert again["role"] == "user" and again["content"].startswith("[You showed code but changed")
    assert "currency=''" in (project / "report.py").read_text()


def test_a_project_never_initialised_still_shows_the_model_its_files(project, llm):
    """Task bench, unnamed-file: `python shop.py 200 10` is wrong, the bug is in pricing.py. Without
    `amas init` the first request named no file of the project (no map), and the 1.5B answered
    with a made-up `def shop(price, discount)` in prose; Aider's first request listed both files."""
    from conftest import git

    (project / "shop.py").write_text(
        "from pricing import discounted\n\nprint(discounted(200, 10))\n"
    )
    (project / "pricing.py").write_text(
        "def discounted(price, percent):\n    return price - percent / 100\n"
    )
    git(project, "add", ".")
    git(project, "commit", "-qm", "shop")
    llm.reply(text="ok")
    run_amas("-y", "`python shop.py` prints 199.9, it should be 180. Fix the bug.", llm=llm)
    system = llm.requests[0]["messages"][0]["content"]
    assert "pricing.py" in system and "shop.py" in system


def test_a_path_that_does_not_exist_names_the_real_files(project, llm):
    """Task bench, readme-convention in text mode: the 1.5B's first call was read_file
    {"path": "src/js/temperatureConverter.js"}; amas answered "Error: FileNotFoundError: [Errno 2]
    No such file or directory: '/tmp/.../repo/src/js/temperatureConverter.js'" and the model told
    the user to `touch` the file; the project's convert.py was never named to it."""
    (project / "convert.py").write_text("def km_to_miles(km):\n    return km * 0.621371\n")
    llm.reply(tool="read_file", path="src/js/temperatureConverter.js").reply(text="ok")
    run_amas("-y", "Add a converter from Celsius to Fahrenheit.", llm=llm)
    said = llm.requests[1]["messages"][-1]["content"]
    assert "convert.py" in said  # the files there are, so the next call can be the right one
    assert "Errno" not in said and str(project) not in said


def test_a_reply_that_only_echoes_the_tool_result_is_asked_again_once(project, llm):
    """Task bench, failing-test after `amas init`: edit_file with an old_str not in the file got
    "Error: old_str not found in test_stats.py. The closest region ...", and the model's next reply
    was only that result wrapped in <tool_response>...</tool_response>; amas ended the run with it
    as the answer, exit 0."""
    (project / "stats.py").write_text("def mean(values):\n    return sum(values) / len(values)\n")
    llm.reply(
        tool="edit_file", path="stats.py", old_str="def mean(xs):", new_str="def mean(xs=()):"
    )
    echo = (
        "<tool_response>\n"
        "Error: old_str not found in stats.py. The closest region (lines 1-1) is:\n"
        "     1\tdef mean(values):\nCopy old_str exactly from the file.\n</tool_response>"
    )
    llm.reply(echo)
    fix = {"old_str": "    return sum(values) / len(values)", "new_str": "    return 0.0"}
    llm.reply(tool="edit_file", path="stats.py", **fix).reply(text="Fixed.")
    done = run_amas("-y", "--output-format", "json", "make mean of nothing 0.0", llm=llm)
    assert len(llm.requests) == 4, done.stdout
    assert "return 0.0" in (project / "stats.py").read_text()
    assert '"result": "Fixed."' in done.stdout


def test_a_run_whose_every_change_failed_does_not_exit_0(project, llm):
    """Task bench, failing-test after `amas init`: the run's one edit failed (old_str not found),
    nothing changed, and amas exited 0 with is_error false: a script cannot tell it from success."""
    import json

    (project / "stats.py").write_text("def mean(values):\n    return sum(values) / len(values)\n")
    llm.reply(
        tool="edit_file", path="stats.py", old_str="def mean(xs):", new_str="def mean(xs=()):"
    )
    llm.reply(text="I fixed mean.")
    done = run_amas("-y", "--output-format", "json", "make mean of nothing 0.0", llm=llm)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["files_changed"] == []
    assert done.returncode != 0 and result["exit_code"] == done.returncode


UNKNOWN_TOOLS = [  # the 1.5B's whole reply, as it wrote it (bench/taskbench.py runs)
    '```json\n{\n  "name": "format_row",\n  "arguments": {\n    "name": "tea",\n'
    '    "amount": 2.5,\n    "currency": "$"\n  }\n}\n```',
    '```python\n{\n    "name": "discounted",\n    "arguments": {\n        "price": 199.90,\n'
    '        "percent": 10\n    }\n}\n```',
    '```json\n{\n  "name": "run_tests",\n  "arguments": {\n'
    '    "command": "python -m unittest"\n  }\n}\n```',
    '```json\n{\n  "name": "rename_function",\n  "arguments": {\n'
    '    "old_function_name": "get_usr",\n    "new_function_name": "get_user",\n    "path": "."\n'
    "  }\n}\n```",
]


@pytest.mark.parametrize(
    "reply", UNKNOWN_TOOLS, ids=["format_row", "discounted", "run_tests", "rename_function"]
)
def test_a_call_to_a_tool_that_does_not_exist_is_answered_with_the_tools_there_are(
    project, llm, reply
):
    """Task bench: four times (new-param and unnamed-file after `amas init`, run-tests and rename at
    temperature 0) the 1.5B's whole reply was a call, in the fenced JSON form amas reads for its own
    tools, to a tool that does not exist (the project's own function, or a made-up run_tests,
    rename_function). amas took it as the final answer: exit 0, no tool call, nothing changed; the
    model never heard there is no such tool."""
    llm.reply(reply).reply(text="ok")
    run_amas("-y", "do the task", llm=llm)
    assert len(llm.requests) == 2
    said = llm.requests[1]["messages"][-1]["content"]
    name = reply.split('"name": "')[1].split('"')[0]
    assert f"there is no tool named {name}" in said
    if name == "run_tests":  # what it meant to run, as the call that runs it
        call = '{"name": "shell_command", "arguments": {"command": "python -m unittest"}}'
        assert said.endswith(f"To run `python -m unittest`, call shell_command: {call}")
    else:
        assert "edit_file" in said and "shell_command" in said


def test_the_answer_to_an_unknown_tool_lists_the_tools_offered_and_no_call_to_copy(project, llm):
    """Task bench, third run, rename: told "there is no tool named rename_function. To run a tool,
    write just the call, as <tool_call>{"name": "list_files", ...}" with the web's tools listed
    (not offered at the bench's 16k), the 1.5B called list_files -- the example -- then
    rename_function again, three times over, and stopped."""
    llm.props = {"default_generation_settings": {"n_ctx": 8192}}  # a small server's window
    llm.reply(UNKNOWN_TOOLS[3]).reply(text="ok")
    run_amas("-y", "rename get_usr", llm=llm)
    offered = [tool["function"]["name"] for tool in llm.requests[0]["tools"]]
    said = llm.requests[1]["messages"][-1]["content"]
    assert "search_google" not in offered and f"The tools are: {', '.join(offered)}." in said
    assert '"arguments"' not in said  # no call to copy
    assert "read_file it, then edit_file" in said


STATS = (
    '"""Small statistics helpers."""\n\n\n'
    'def mean(values):\n    """The arithmetic mean; 0.0 for none."""\n'
    "    return sum(values) / len(values)\n"
)


def test_old_str_not_found_in_a_file_never_read_shows_it_and_says_to_read_it(project, llm):
    """Task bench at temperature 0, failing-test: the 1.5B's first call was edit_file on
    test_stats.py with old_str "pass" (it had read nothing); amas answered "old_str not found ...
    The closest region (lines 13-13) is: 13  def test_spread(self):" -- a line unrelated to the
    task. The model sent the same call twice more and gave up with an empty reply."""
    (project / "stats.py").write_text(STATS)
    llm.reply(tool="edit_file", path="stats.py", old_str="pass", new_str="return 0.0").reply(
        text="ok"
    )
    run_amas("-y", "make mean of nothing return 0.0", llm=llm)
    said = llm.requests[1]["messages"][-1]["content"]
    assert "read_file" in said  # the way back: read it first
    assert "return sum(values) / len(values)" in said  # or the small file itself, shown


def test_an_empty_reply_after_failed_calls_is_asked_again_once(project, llm):
    """Task bench at temperature 0, failing-test and new-param: after three identical failed edits
    and amas's note "you have made this same call 3 times in a row; change your approach", the
    model's reply was empty (3 tokens); amas ended the run with "result": "" and exit 0."""
    (project / "stats.py").write_text(STATS)
    bad = {"path": "stats.py", "old_str": "pass", "new_str": "return 0.0"}
    for _ in range(3):
        llm.reply(tool="edit_file", **bad)
    llm.reply(text="")
    fix = {"old_str": "    return sum(values) / len(values)", "new_str": "    return 0.0"}
    llm.reply(tool="edit_file", path="stats.py", **fix).reply(text="Fixed.")
    run_amas("-y", "make mean of nothing return 0.0", llm=llm)
    assert len(llm.requests) == 6
    assert "return 0.0" in (project / "stats.py").read_text()


def test_a_call_to_no_tool_that_ends_the_turn_is_said_not_taken_for_the_answer(project, llm):
    """Task bench, third run, run-tests: after two runs of the tests the 1.5B replied with nothing,
    was asked again, and wrote `{"name": "run_tests", ...}`; the turn ended there, as it must after
    one asking, but the JSON result was that call as the answer, with no warning and exit 0."""
    import json

    llm.reply(text="").reply(UNKNOWN_TOOLS[2])
    done = run_amas("-y", "--output-format", "json", "run the tests", llm=llm)
    assert len(llm.requests) == 2  # asked again once, not twice
    said = "the model called run_tests, which is no tool of amas; the turn ended there"
    assert said in done.stderr
    assert said in json.loads(done.stdout)["warnings"]


def test_the_first_request_of_a_coding_task_fits_a_small_model(project, llm):
    """Task bench: amas's first request was 1,661 tokens as llama-server counted it (Qwen2.5's
    template): 322 of system prompt, 1,305 of tool schemas, of which the 7 web and browser tools are
    508 and the browsing section of the prompt 145 more; Aider's was 848, mini's 865. At 15-26
    tokens/s of prompt evaluation that is 64-110 s before the first output token, on every cache
    miss. Here: 1,555 tokens by cl100k for the system prompt and the tool schemas."""
    import json

    from conftest import count_tokens

    llm.props = {"default_generation_settings": {"n_ctx": 16384}}  # the bench's llama-server
    llm.reply(text="ok")
    run_amas("-y", "The test test_mean_of_nothing in test_stats.py fails. Fix the code.", llm=llm)
    first = llm.requests[0]
    tokens = count_tokens(first["messages"][0]["content"] + json.dumps(first.get("tools", [])))
    assert tokens <= 1000


def test_a_local_model_is_asked_at_a_low_temperature(project, llm):
    """Task bench: amas sends no temperature, so llama-server samples at its default 0.8 (Aider
    sends 0). With the server's default set to 0 (`--server-args "--temp 0"`) the 1.5B wrote a call
    in five of six tasks instead of one; at 0.8 it mostly answered in prose."""
    llm.reply(text="ok")
    run_amas("-y", "hello", llm=llm)
    assert llm.requests[0].get("temperature") is not None
    assert llm.requests[0]["temperature"] <= 0.2


def test_a_question_answered_with_code_is_not_asked_again(project, llm):
    """The nudge is for a change asked for: "how do I fix X?" answered with code is an answer."""
    llm.reply("Like this:\n\n```python\nx = 1\n```\n")
    run_amas("-y", "how do I fix the loop in main.py?", llm=llm)
    assert len(llm.requests) == 1


def test_code_shown_in_text_mode_for_a_bug_to_fix_is_asked_again(project, llm):
    """In text mode the 1.5B answered `python shop.py 200 10 prints 199.90 ... Fix the bug.` with
    a corrected script in prose: asked once to make the change as tool calls."""
    (project / ".amas").mkdir(exist_ok=True)
    (project / ".amas" / "config.yaml").write_text("text_tools: true\n")
    llm.reply("Here's the corrected version:\n\n```python\nprint(180.0)\n```\n").reply(text="ok")
    run_amas("--trust", "-y", "`python shop.py 200 10` prints 199.90. Fix the bug.", llm=llm)
    assert len(llm.requests) == 2
    assert "as tool calls, not as code" in llm.requests[1]["messages"][-1]["content"]


FAILING = (
    "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_no(self):\n"
    "        self.fail('x')\n"
)


def test_the_same_call_with_the_same_result_again_is_told_at_once(project, llm):
    """Task bench, fourth run, run-tests: the 1.5B ran the failing tests, then ran them again with
    nothing changed in between, got the same failures, and replied with nothing; amas's note on a
    repeated call came only at the third."""
    (project / "test_it.py").write_text(FAILING)
    run = {"command": "python -m unittest"}
    llm.reply(tool="shell_command", **run).reply(tool="shell_command", **run).reply(text="ok")
    run_amas("-y", "run the tests and fix what fails", llm=llm)
    first, second = (r["messages"][-1]["content"] for r in llm.requests[1:3])
    assert "FAILED (failures=1)" in first and "[note:" not in first
    assert "FAILED (failures=1)" in second
    assert "same as your last one: nothing changed in between" in second


def test_the_same_call_with_a_new_result_gets_no_note(project, llm):
    """Running the same command again is fine when what it says changed."""
    run = {"command": "echo more >> grows.txt && cat grows.txt"}
    llm.reply(tool="shell_command", **run).reply(tool="shell_command", **run).reply(text="ok")
    run_amas("-y", "grow the file twice", llm=llm)
    second = llm.requests[2]["messages"][-1]["content"]
    assert "[note:" not in second


REPORT = 'def format_row(name, amount):\n    return f"{name}: {amount:.2f}"\n'


def test_a_made_up_tool_named_like_the_projects_code_is_pointed_to_that_code(project, llm):
    """Task bench, fourth run, new-param: the 1.5B called format_row -- the function the task
    named -- as a tool; told the tools there are, it answered with a usage example and stopped.
    The name is in report.py: that is the file to read and change."""
    (project / "report.py").write_text(REPORT)
    llm.reply(UNKNOWN_TOOLS[0]).reply(text="ok")
    run_amas("-y", "add a currency parameter to format_row", llm=llm)
    said = llm.requests[1]["messages"][-1]["content"]
    assert "format_row is a name in this project, not a tool:" in said
    assert "report.py:1: def format_row(name, amount):" in said
    assert "To change it, read_file report.py, then edit_file." in said


def test_a_made_up_tool_the_project_does_not_name_gets_no_pointer(project, llm):
    llm.reply(UNKNOWN_TOOLS[3]).reply(text="ok")
    run_amas("-y", "rename get_usr", llm=llm)
    said = llm.requests[1]["messages"][-1]["content"]
    assert "there is no tool named rename_function" in said and "name in this project" not in said


ROUND = (  # the 1.5B's paragraph, written 30 times over until the run's limit (task bench, 4th run)
    "However, this would result in a price of 0, which is not correct. Instead, we should "
    "calculate the discounted price as:\n\n\\[ \\text{Discounted Price} = \\text{Original Price} "
    "\\times (1 - \\text{Discount}) \\]\n\nFor a 200% discount, the discount is 1.00, so the "
    "calculation should be:\n\n\\[ \\text{Discounted Price} = \\text{Original Price} \\times "
    "(1 - 1.00) = 0 \\]\n\n"
)


def test_a_reply_that_goes_round_in_circles_is_stopped_after_the_first_round(project, llm):
    """Task bench, fourth run, unnamed-file: the 1.5B wrote one paragraph over and over, 15,893
    characters, until the bench's 480 s limit (max_tokens 8192 at ~10 tokens/s is 13 minutes)."""
    import json

    llm.reply(text="To fix the bug in shop.py:\n\n" + ROUND * 40, piece=60)
    done = run_amas("-y", "--output-format", "json", "fix the discount", llm=llm)
    result = json.loads(done.stdout)
    said = "the model kept repeating itself; its answer was stopped after the first round"
    assert said in " ".join(done.stderr.split()) and said in result["warnings"]
    assert result["result"].strip() == ("To fix the bug in shop.py:\n\n" + ROUND).strip()
    assert len(llm.requests) == 1


def test_a_long_reply_whose_lines_only_look_alike_is_whole(project, llm):
    import json

    text = "".join(f"- step {n}: run the same check on the next file\n" for n in range(400))
    llm.reply(text=text, piece=60)
    done = run_amas("-y", "--output-format", "json", "list the steps", llm=llm)
    result = json.loads(done.stdout)
    assert result["result"].strip() == text.strip() and not result["warnings"]


SLUG = "def slugify(text):\n    return '-'.join(text.replace(',', '').split())\n"


def test_code_shown_after_only_running_the_tests_is_asked_once_to_apply_it(project, llm):
    """Task bench, fifth run, run-tests: the 1.5B ran the tests twice, then answered with the fixed
    slugify in a fenced block and "you should run the tests again"; it had called a tool (the
    tests), so amas took the shown code as the answer: exit 0, nothing changed."""
    (project / "textutil.py").write_text(SLUG)
    shown = (
        "Here's how you can modify the `slugify` function in `textutil.py`:\n\n```python\n"
        "def slugify(text):\n    return '-'.join(text.replace(',', '').split()).lower()\n```\n"
    )
    llm.reply(tool="shell_command", command="python -m unittest").reply(shown)
    fix = {"old_str": "split())", "new_str": "split()).lower()"}
    llm.reply(tool="edit_file", path="textutil.py", **fix).reply(text="Fixed.")
    run_amas("-y", "Some tests fail. Run them, find the bug and fix it.", llm=llm)
    assert llm.requests[2]["messages"][-1]["content"].startswith("[You showed code but changed")
    assert ".lower()" in (project / "textutil.py").read_text()


CONVERT = (
    '"""Unit converters: one function each, named from_to."""\n\n\n'
    "def km_to_miles(km):\n    return km * 0.621371\n"
)


def test_create_file_over_a_small_file_never_read_shows_it(project, llm):
    """Task bench, fourth run, readme-convention: the 1.5B's create_file of convert.py was told the
    file exists, nothing more; it never read it, wrote a class where the file's convention is a
    function, and the run ended with every change failed."""
    (project / "convert.py").write_text(CONVERT)
    llm.reply(tool="create_file", path="convert.py", content="class C:\n    pass\n")
    added = CONVERT + "\n\ndef c_to_f(c):\n    return c * 9 / 5 + 32\n"
    llm.reply(tool="write_file", path="convert.py", content=added)
    llm.reply(text="Done.")
    run_amas("-y", "Add a converter from Celsius to Fahrenheit.", llm=llm)
    said = llm.requests[1]["messages"][-1]["content"]
    assert said.startswith("Error: convert.py already exists; use edit_file")
    assert "     4\tdef km_to_miles(km):" in said  # the file, whole: the model has now read it
    assert "def c_to_f(c):" in (project / "convert.py").read_text()  # so write_file may replace it


SHOP = (
    "import sys\n\nfrom pricing import discounted\n\n\ndef main(argv):\n"
    '    print(f"{discounted(float(argv[0]), float(argv[1])):.2f}")\n'
)


def test_a_write_of_amas_own_tool_result_over_a_program_is_refused(project, llm):
    """Task bench, fifth run, unnamed-file: after reading shop.py and a no-op edit, the 1.5B
    wrote shop.py over with amas's tool result as its content; under --yes it was kept (with a
    warning) and the program was gone when the run ended."""
    (project / "shop.py").write_text(SHOP)
    junk = "<tools>\n<tool_response>\nEdit shop.py: 15 lines\n</tool_response>"
    llm.reply(tool="read_file", path="shop.py")
    llm.reply(tool="write_file", path="shop.py", content=junk)
    llm.reply(text="Done.")
    run_amas("-y", "fix the discount", llm=llm)
    assert (project / "shop.py").read_text() == SHOP
    said = llm.requests[2]["messages"][-1]["content"]
    assert said.startswith("Error: write_file would leave shop.py unparsable")


def test_a_reply_that_only_repeats_what_amas_told_it_is_asked_again_once(project, llm):
    """Task bench, fifth run, new-param: told that format_row is a name in report.py and "To
    change it, read_file report.py, then edit_file.", the 1.5B's last reply was that sentence."""
    (project / "report.py").write_text(REPORT)
    llm.reply(UNKNOWN_TOOLS[0]).reply(tool="read_file", path="report.py")
    llm.reply(text="To change it, read_file report.py, then edit_file.")
    llm.reply(text="I read it; the parameter goes after amount.")
    run_amas("-y", "add a currency parameter to format_row", llm=llm)
    assert len(llm.requests) == 4
    assert llm.requests[3]["messages"][-1]["content"].startswith("[Your reply only repeated")


def test_a_parameter_written_null_in_xml_is_no_value(project, llm):
    """Qwen3.5's parser tests write <parameter=misc>null</parameter>: the reader passed the text
    "null" on, and an integer parameter refused it; null is no value (the default applies)."""
    xml = "<function=read_file>\n<parameter=path>\nREADME.md\n</parameter>\n"
    xml += "<parameter=limit>\nnull\n</parameter>\n</function>"
    llm.reply(text=f"<tool_call>\n{xml}\n</tool_call>").reply(text="It is a demo.")
    done = run_amas("-y", "read the README", llm=llm)
    said = llm.requests[1]["messages"][-1]["content"]
    assert "# demo" in said and "Error" not in said
    assert done.returncode == 0
