"""The text tool-call reader over a corpus taken from public parser test suites,
and its writing side."""

import json
import re
import zlib
from pathlib import Path

import pytest

from amas_code import toolcalls, tools

CORPUS = json.loads((Path(__file__).parent / "toolcall_corpus.json").read_text())
# real outputs from sources the reader was never tuned on (ollama's newer parsers, lmdeploy) and
# half of issue 52's written plain answers, split at random: measured, never tuned on
HELDOUT = json.loads((Path(__file__).parent / "toolcall_heldout.json").read_text())
NAMES = set(tools.NAMES)
MARKUP = (
    "<|",
    "<｜",
    "[TOOL_CALLS]",
    "<tool_call",
    "<function",
    "functools[",
    "[ARGS]",
    "✿",
    "<invoke",
)
MARKUP += (
    "<minimax:",
    "<steptml:",
    "<atem:",
    "<longcat",
    "tool_call>",
    "call:",
    "```",
    "role_sep",
    "<code>",
)
MISSES = {  # real cases the reader does not read yet, and why; each must still run nothing
    "[tool]name[args]{...}[end]": "a made-up form of ollama's own test, written by no model family",
    "name({json})": "a bare call with positional JSON; reading it would run prose such as f({...})",
    "{name: {args}}": "a tool name as the only key: any one-key JSON object would become a call",
}


def case_id(case: dict) -> str:
    return f"{case['family']}-{case.get('line') or zlib.crc32(case['raw'].encode()) % 10_000}"


def calls_of(found: list[dict]) -> list:
    return [[c["function"]["name"], json.loads(c["function"]["arguments"])] for c in found]


def names_for(case: dict):
    """The tool names, or name -> schema where the case's source typed its parameters."""
    if "schema" not in case:
        return NAMES
    props = {key: {"type": kind} for key, kind in case["schema"].items()}
    schema = {"function": {"parameters": {"properties": props}}}
    return {name: schema for name in NAMES}


@pytest.mark.parametrize("case", CORPUS, ids=case_id)
def test_corpus_case(case):
    calls, left, unreadable = toolcalls.read(case["raw"], names_for(case))
    if case["kind"] == "plain":  # shown whole, never run
        assert (calls, left, unreadable) == ([], case["raw"], None)
    # shown whole, never run; it may have been meant: the model told
    elif case["kind"] == "example":
        assert (calls, left, unreadable) == ([], case["raw"], toolcalls.EXAMPLE_LINE)
    elif case["kind"] == "broken":  # never run as written, the model asked again
        assert calls == [] and unreadable == toolcalls.BROKEN_LINE
    elif case["kind"] == "server":  # never run, never shown raw, the user told what to do
        assert calls == [] and unreadable == toolcalls.SERVER_LINE
        assert not any(mark in left for mark in MARKUP), left
    elif case.get("note") in MISSES:
        assert calls == [] and unreadable is None
    else:
        assert calls_of(calls) == case["calls"]
        assert not any(mark in left for mark in MARKUP), left
        assert all(c["id"].isalnum() and len(c["id"]) == 9 for c in calls)


def test_at_least_three_in_four_real_cases_are_read():
    real = [c for c in CORPUS if c["kind"] == "call" and not c["source"].startswith("written")]
    read = [c for c in real if calls_of(toolcalls.read(c["raw"], names_for(c))[0]) == c["calls"]]
    assert len(real) >= 60 and len(read) / len(real) >= 0.75


SHOWING = [c for c in HELDOUT if c["kind"] in ("plain", "example")]


@pytest.mark.parametrize("case", SHOWING, ids=case_id)
def test_no_held_out_plain_answer_runs_and_each_is_shown_whole(case):
    calls, left, _ = toolcalls.read(case["raw"], names_for(case))
    assert (calls, left) == ([], case["raw"])


def test_most_held_out_calls_are_read():
    real = [c for c in HELDOUT if c["kind"] == "call"]
    read = [c for c in real if calls_of(toolcalls.read(c["raw"], names_for(c))[0]) == c["calls"]]
    assert len(real) >= 50 and len(read) / len(real) >= 0.9


def test_a_name_then_its_json_arguments_in_a_tool_call_tag_is_read():
    """Laguna and GLM-4 write the tool's name on a line, then its arguments as JSON."""
    text = 'Reading it.\n<tool_call>read_file\n{"path": "a.py"}</tool_call>'
    calls, left, unreadable = toolcalls.read(text, NAMES)
    assert calls_of(calls) == [["read_file", {"path": "a.py"}]]
    assert (left, unreadable) == ("Reading it.", None)


def test_a_label_before_a_call_object_in_a_tool_call_tag_is_not_left_on_screen():
    text = '<tool_call>json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>'
    calls, left, unreadable = toolcalls.read(text, NAMES)
    assert calls_of(calls) == [["read_file", {"path": "a.py"}]]
    assert (left, unreadable) == ("", None)


LAGUNA = "<user>read_file\n<arg_key>path</arg_key>\n<arg_value>a.py</arg_value>\n</user>"


@pytest.mark.parametrize("model", ["", "ollama/laguna-xs.2"])
def test_lagunas_user_tag_around_a_call_is_read(model):
    """Laguna writes <user> where <tool_call> belongs; the call inside is read, its markup gone."""
    calls, left, unreadable = toolcalls.read(f"I'll read it.\n{LAGUNA}", NAMES, model=model)
    assert calls_of(calls) == [["read_file", {"path": "a.py"}]]
    assert (left, unreadable) == ("I'll read it.", None)


def test_a_user_tag_is_no_call_for_a_model_of_another_family():
    """As another family's markup is: not run, shown whole, and the model told it ran nothing."""
    calls, left, said = toolcalls.read(LAGUNA, NAMES, model="qwen2.5-coder:1.5b")
    assert (calls, left, said) == ([], LAGUNA, toolcalls.EXAMPLE_LINE)


def test_an_xml_value_written_null_is_no_value_whatever_its_type():
    body = "<function=read_file>\n<parameter=path>\na.py\n</parameter>\n"
    body += "<parameter=limit>\nnull\n</parameter>\n</function>"
    typed = {"read_file": {"parameters": {"properties": {"limit": {"type": "integer"}}}}}
    calls, _, _ = toolcalls.read(f"<tool_call>{body}</tool_call>", typed)
    assert calls_of(calls) == [["read_file", {"path": "a.py", "limit": None}]]


# -- example or call: by where it stands, and in whose format --------------------------------------

CALL = '<tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>'


@pytest.mark.parametrize(
    "after", ["", "\n", "<|im_end|>", "\n</s>", "<|eot_id|>\n\n", "<|tool_response>made up"]
)
def test_a_call_that_ends_the_reply_runs(after):
    calls, left, unreadable = toolcalls.read(f"I'll read it first:\n{CALL}{after}", NAMES)
    assert calls_of(calls) == [["read_file", {"path": "a.py"}]]
    assert (left, unreadable) == ("I'll read it first:", None)


@pytest.mark.parametrize(
    "after", ["\nThat is all it contains.", " — it reads a.py.", "\n\n这就是全部内容。", "."]
)
def test_a_call_prose_follows_is_an_example_shown_whole(after):
    answer = f"The page says:\n{CALL}{after}"
    assert toolcalls.read(answer, NAMES) == ([], answer, None)


def test_calls_written_together_all_run_and_a_reply_showing_one_shows_all():
    second = CALL.replace("a.py", "b.py")
    calls, left, _ = toolcalls.read(f"Reading both.\n{CALL}\n{second}", NAMES)
    assert calls_of(calls) == [["read_file", {"path": "a.py"}], ["read_file", {"path": "b.py"}]]
    assert left == "Reading both."
    # a tutorial: its first call has prose after it, so its last is part of the lesson too
    lesson = f"First {CALL} reads a file. Then, to read another:\n{second}"
    assert toolcalls.read(lesson, NAMES) == ([], lesson, toolcalls.EXAMPLE_LINE)


@pytest.mark.parametrize(
    "lead",
    [
        "格式如下：",  # "the format is as follows:"
        "例如：",  # "for example:"
        "ツール呼び出しの例:",  # "an example of a tool call:"
        "Пример вызова:",  # "an example of a call:"
        "Voici un exemple d'appel :",
        "Por ejemplo:",
        "EXAONE's system prompt asks for calls like:",
        "Here's how you'd call it:",
        "When I decide to use a tool, I output:",
        "The page says:",
        "MiniMax-M2 emits:\n<minimax:tool_call>",  # a wrapper on its own line hides no sentence
        "I won't run this for you:",
        "I can't execute",
    ],
)
def test_a_call_ending_the_reply_after_words_that_present_or_refuse_it_is_not_run(lead):
    answer = f"{lead}\n{CALL}"
    assert toolcalls.read(answer, NAMES) == ([], answer, toolcalls.EXAMPLE_LINE)


@pytest.mark.parametrize(
    "lead",
    [
        "Let me check the project structure:",
        "I'd like to see the file format first:",
        "First, I'll read the config format:",
        "Checking how main.py handles it:",
        "The error says the file is missing, so let me read it:",
        "",
    ],
)
def test_a_call_after_words_of_what_the_model_does_next_runs(lead):
    calls, left, _ = toolcalls.read(f"{lead}\n{CALL}", NAMES)
    assert calls_of(calls) == [["read_file", {"path": "a.py"}]] and left == lead


MISTRAL = '[TOOL_CALLS]read_file[ARGS]{"path": "a.py"}'
PYTHONIC = '[read_file(path="a.py")]'


@pytest.mark.parametrize(
    "model, raw, runs",
    [
        ("openai/qwen2.5-coder-1.5b-instruct", MISTRAL, False),
        ("openai/mistral-small-3.1", MISTRAL, True),
        ("openai/my-local-model", MISTRAL, True),  # a name that says no family: any format
        ("ollama_chat/qwen2.5-coder:7b", PYTHONIC, False),
        ("openai/Llama-3.2-3B-Instruct", PYTHONIC, True),
        ("openai/Meta-Llama-3.1-8B", CALL, True),  # the form amas asks for counts for every model
        ("hosted_vllm/deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", PYTHONIC, False),
    ],
)
def test_where_the_model_name_says_its_family_only_its_formats_count(model, raw, runs):
    calls, left, unreadable = toolcalls.read(f"Reading it:\n{raw}", NAMES, model=model)
    if runs:
        assert calls_of(calls) == [["read_file", {"path": "a.py"}]]
    else:  # shown whole; it ends the reply, so the model is told how to call
        assert (calls, left, unreadable) == ([], f"Reading it:\n{raw}", toolcalls.EXAMPLE_LINE)


def test_the_family_of_a_model_is_read_from_its_name():
    assert toolcalls.family("openai/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf") == {"qwen"}
    assert toolcalls.family("deepseek-r1-distill-qwen-7b") == {"deepseek", "qwen"}
    assert toolcalls.family("ollama/gpt-oss:20b") == {"harmony"}
    assert toolcalls.family("openai/phi-4-mini") == {"phi"}
    assert toolcalls.family("ollama/dolphin-mixtral") == {"mistral"}  # not Phi: a word of its own
    assert toolcalls.family("openai/test-model") is None and toolcalls.family("") is None


# -- through the real CLI, against the scripted server, in text mode and in native mode ------------

CONTENT = 'print("héllo")\n'
ARGS = json.dumps({"path": "out.py", "content": CONTENT}, ensure_ascii=False)
GEMMA = f'path:<|"|>out.py<|"|>,content:<|"|>{CONTENT}<|"|>'
GEMMA_ESC = f"path:<escape>out.py<escape>,content:<escape>{CONTENT}<escape>"
INVOKE = (
    f'<parameter name="path">out.py</parameter>\n<parameter name="content">{CONTENT}</parameter>\n'
)
QWEN_XML = (
    "<tool_call>\n<function=create_file>\n<parameter=path>\nout.py\n</parameter>\n"
    f"<parameter=content>\n{CONTENT}\n</parameter>\n</function>\n</tool_call>"
)
WRITTEN = {  # one create_file call a family, as that family writes it
    "hermes": (
        f'Creating it.\n<tool_call>{{"name": "create_file", "arguments": {ARGS}}}</tool_call>'
    ),
    "qwen3-coder-xml": QWEN_XML,
    "llama-json": f'<|python_tag|>{{"name": "create_file", "parameters": {ARGS}}}',
    "pythonic": f"[create_file(path='out.py', content={CONTENT!r})]",
    "mistral": f"[TOOL_CALLS]create_file[ARGS]{ARGS}",
    "granite": f'<|tool_call|>[{{"name": "create_file", "arguments": {ARGS}}}]',
    "phi4-functools": f'functools[{{"name": "create_file", "arguments": {ARGS}}}]',
    "functionary": f"<function=create_file>{ARGS}</function>",
    "command-r": f'Action: ```json\n[{{"tool_name": "create_file", "parameters": {ARGS}}}]\n```',
    "fenced-json": f'```json\n{{"name": "create_file", "arguments": {ARGS}}}\n```',
    "glm": (
        "<tool_call>create_file\n<arg_key>path</arg_key>\n<arg_value>out.py</arg_value>\n"
        f"<arg_key>content</arg_key>\n<arg_value>{CONTENT}</arg_value>\n</tool_call>"
    ),
    # the families of issue 39, each in the markup of its source in the corpus
    "gemma4": (
        f"<|channel>thought\nA file.<channel|><|tool_call>call:create_file{{{GEMMA}}}<tool_call|>"
    ),
    "functiongemma": f"<start_function_call>call:create_file{{{GEMMA_ESC}}}<end_function_call>",
    "kimi-k2": (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.create_file:0"
        f"<|tool_call_argument_begin|>{ARGS}<|tool_call_end|><|tool_calls_section_end|>"
    ),
    "minimax-m2": (
        f'<minimax:tool_call>\n<invoke name="create_file">\n{INVOKE}</invoke>\n</minimax:tool_call>'
    ),
    "deepseek-r1": (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>create_file\n```json\n"
        f"{ARGS}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>"
    ),
    "deepseek-v3.1": (
        f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>create_file<｜tool▁sep｜>{ARGS}"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    ),
    "step3": (
        "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>create_file\n"
        '<steptml:invoke name="create_file">'
        f"{INVOKE.replace('<', '<steptml:').replace('<steptml:/', '</steptml:')}"
        "</steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>"
    ),
    "longcat": (
        f'<longcat_tool_call>{{"name": "create_file", "arguments": {ARGS}}}</longcat_tool_call>'
    ),
    "atem": (
        f' to=create_file<|message|><atem:function_calls>\n<atem:invoke name="create_file">\n'
        f"{INVOKE.replace('<', '<atem:').replace('<atem:/', '</atem:')}</atem:invoke>\n"
        "</atem:function_calls><|eot|>"
    ),
    "functionary-v2": f"<|from|>assistant\n<|recipient|>create_file\n<|content|>{ARGS}<|stop|>",
    "functionary-v2.5": f"Writing it.<|reserved_special_token_249|>create_file\n{ARGS}",
    "qwen-agent": f"Writing it.\n✿FUNCTION✿: create_file\n✿ARGS✿: {ARGS}\n✿RESULT✿",
    "qwen-agent-code": (
        '<tool_call>\n{"name": "create_file", "arguments": {"path": "out.py", "content": ""}}\n'
        f"<code>\n{CONTENT}\n</code>\n</tool_call>"
    ),
    "gigachat3": (
        "Writing it.<|message_sep|>\n\nfunction call<|role_sep|>\n"
        f'{{"name": "create_file", "arguments": {ARGS}}}</s>'
    ),
    "minicpm": f'<function name="create_file"><param name="path">out.py</param>'
    f'<param name="content">{CONTENT}</param></function>',
    "minicpm-python": (
        "<|thought_start|>\nA file.\n<|thought_end|>\n<|tool_call_start|>\n```python\n"
        f"create_file(path='out.py', content={CONTENT!r})\n```\n<|tool_call_end|>"
    ),
    "harmony": (
        "<|channel|>analysis<|message|>A file.<|end|><|start|>assistant<|channel|>commentary "
        f"to=functions.create_file <|constrain|>json<|message|>{ARGS}<|call|>"
    ),
    # the forms issue 52 found missed, each as its source in the corpus writes it
    "localai-function-key": f'{{"function": "create_file", "arguments": {ARGS}}}',
    "args-under-key": (
        f'<tool_calls>[{{"create_file": {{"id": "call-0001", "args": {ARGS}}}}}]</tool_calls>'
    ),
    "call-id": f"<tool_call><function=create_file>[call_abc]{ARGS}</function></tool_call>",
    "qwen3-coder-escaped": QWEN_XML.replace("\n", "\\n"),
    "qwen3-coder-indented": (
        "<tool_call>\n  <function=create_file>\n"
        "    <parameter=path>\n      out.py\n    </parameter>\n"
        f"    <parameter=content>\n      {CONTENT}\n    </parameter>\n  </function>\n</tool_call>"
    ),
    "qwen3-coder-cut": QWEN_XML.removesuffix("</function>\n</tool_call>"),
    "dsml-json-body": (
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="create_file">\n'
        f"{ARGS}\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
    ),
}


def config(project: Path, text_tools: bool) -> None:
    (project / ".amas").mkdir(exist_ok=True)
    (project / ".amas/config.yaml").write_text(f"text_tools: {str(text_tools).lower()}\n")


@pytest.mark.parametrize("text_tools", [True, False], ids=["text", "native"])
@pytest.mark.parametrize("family", WRITTEN)
def test_a_written_call_runs_through_the_cli(project, llm, amas, family, text_tools):
    config(project, text_tools)
    llm.reply(text=WRITTEN[family]).reply(text="Created out.py.")
    result = amas("--yes", "make out.py")
    assert result.exit_code == 0, result.output
    assert (project / "out.py").read_text(encoding="utf-8") == CONTENT
    assert "Created out.py." in result.stdout
    assert not any(mark in result.stdout for mark in MARKUP + ("create_file(",))
    assert ("tools" in llm.requests[0]) is not text_tools


@pytest.mark.parametrize("text_tools", [True, False], ids=["text", "native"])
def test_a_plain_answer_showing_calls_is_printed_whole_and_runs_nothing(
    project, llm, amas, text_tools
):
    config(project, text_tools)
    shown = next(c["raw"] for c in CORPUS if c["raw"].startswith("Qwen models wrap a call"))
    answer = f"{shown}\n\nOr inline: `{WRITTEN['mistral']}`."
    llm.reply(text=answer)
    result = amas("--yes", "how are calls written?")
    assert result.exit_code == 0, result.output
    assert not (project / "out.py").exists() and len(llm.requests) == 1
    assert answer in result.stdout


EXAMPLES = [c["raw"] for c in CORPUS if c["kind"] == "plain" and c.get("issue") == 39]
# the two false runs issue 39 names (a bare JSON line in prose, a fenced list as a parser's output),
# a quoted one, and a server family's markup mid-sentence; the corpus holds the rest
SHOWN = [raw for raw in EXAMPLES if raw.startswith(("The format", "The parser", "> ", "MiniMax"))]


@pytest.mark.parametrize("text_tools", [True, False], ids=["text", "native"])
@pytest.mark.parametrize("shown", SHOWN, ids=range(len(SHOWN)))
def test_a_call_presented_as_an_example_is_shown_whole_and_not_run(
    project, llm, amas, shown, text_tools
):
    config(project, text_tools)
    answer = shown.replace("read_file", "create_file").replace('"a.py"', '"out.py"')
    llm.reply(text=answer)
    result = amas("--yes", "how does a model write a call?")
    assert result.exit_code == 0, result.output
    assert not (project / "out.py").exists() and len(llm.requests) == 1
    assert answer in result.stdout and toolcalls.EXAMPLE_LINE not in result.output


TOOL_NAMES = re.compile(
    r"\b(?:read_file|write_file|edit_file|shell_command|list_files|search_files)\b"
)
# issue 52's plain answers, one a kind: another language, a page quoted, a refusal, a fenced
# sample, a model explaining its own format, a wrapper on a line of its own; every tool they name
# made create_file, so one that ran would be seen (and would harm nothing)
ISSUE_52 = [c for c in CORPUS if c.get("issue") == 52 and c["source"].startswith("amas: a plain")]
KINDS = ("a Chinese format", "an issue quoted", "a refusal quoting a pythonic", "a Seed-OSS")
KINDS += ("a model explaining its own format, the wrapper", "'like:'", "a conditional sample")
PLAIN_52 = [
    TOOL_NAMES.sub("create_file", c["raw"]) for c in ISSUE_52 if c["note"].startswith(KINDS)
]


@pytest.mark.parametrize("text_tools", [True, False], ids=["text", "native"])
@pytest.mark.parametrize("answer", PLAIN_52, ids=range(len(PLAIN_52)))
def test_a_plain_answer_of_issue_52_reaches_the_user_whole_and_runs_nothing(
    project, llm, amas, answer, text_tools
):
    config(project, text_tools)
    llm.reply(text=answer)
    result = amas("--yes", "how do models call tools?")
    assert result.exit_code == 0, result.output
    assert len(llm.requests) == 1 and not (project / "out.py").exists()
    assert answer in result.stdout and toolcalls.EXAMPLE_LINE not in result.output


@pytest.mark.parametrize("text_tools", [True, False], ids=["text", "native"])
def test_a_glm_value_holding_its_closing_tag_is_written_whole(project, llm, amas, text_tools):
    config(project, text_tools)
    content = 'END = "</arg_value>"\n'
    call = "<tool_call>create_file\n<arg_key>path</arg_key>\n<arg_value>out.py</arg_value>\n"
    call += f"<arg_key>content</arg_key>\n<arg_value>{content}</arg_value>\n</tool_call>"
    llm.reply(text=call).reply(text="Created out.py.")
    result = amas("--yes", "make out.py")
    assert result.exit_code == 0, result.output
    assert (project / "out.py").read_text() == content


@pytest.mark.parametrize(
    "model, runs", [("qwen2.5-coder-1.5b", False), ("mistral-small-3.1", True)]
)
def test_the_model_name_reaches_the_reader_and_only_its_familys_format_counts(
    project, llm, amas, model, runs
):
    config(project, True)
    answer = f"Writing it.\n{WRITTEN['mistral']}"
    llm.reply(text=answer).reply(text="Done.")
    result = amas("--yes", "-m", f"openai/{model}", "make out.py")
    assert result.exit_code == 0, result.output
    assert (project / "out.py").exists() is runs
    if not runs:  # a Qwen model writing Mistral's markup: shown whole, and told how to call
        assert answer in result.stdout and toolcalls.EXAMPLE_LINE in result.output
        assert "Error: your tool call" in llm.requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize("text_tools", [True, False], ids=["text", "native"])
def test_an_example_that_may_be_meant_is_not_run_and_the_model_is_told(
    project, llm, amas, text_tools
):
    config(project, text_tools)
    answer = (
        'The format is:\n{"name": "create_file", "arguments": {"path": "out.py", "content": "x"}}'
    )
    llm.reply(text=answer).reply(text="That was only the format.")
    result = amas("--yes", "how is a call written?")
    assert result.exit_code == 0, result.output
    assert not (project / "out.py").exists()
    assert answer in result.stdout and toolcalls.EXAMPLE_LINE in result.output
    told = llm.requests[1]["messages"][-1]["content"]
    assert told.startswith(
        "Error: your tool call could not be read, or it stood in prose as an example"
    )


@pytest.mark.parametrize("text_tools", [True, False], ids=["text", "native"])
def test_a_call_whose_content_is_left_in_markup_does_not_empty_the_file(
    project, llm, amas, text_tools
):
    config(project, text_tools)
    (project / "keep.py").write_text("keep = 1\n")
    call = {"name": "write_file", "arguments": {"path": "keep.py", "content": ""}}
    llm.reply(text=f"<tool_call>\n{json.dumps(call)}\n<content>\nx = 2\n</content>\n</tool_call>")
    llm.reply(text="Sorry.")
    result = amas("--yes", "rewrite keep.py")
    assert result.exit_code == 0, result.output
    assert (project / "keep.py").read_text() == "keep = 1\n"
    assert toolcalls.BROKEN_LINE in result.output and "<content>" not in result.stdout


def test_a_server_format_amas_cannot_read_is_not_shown_and_the_reply_says_so(project, llm, amas):
    config(project, True)
    raw = next(c["raw"] for c in CORPUS if c["family"] == "harmony")
    llm.reply(text=f"Let me look.{raw.replace('read_file', 'get_weather')}")
    reply = _complete(project, llm)
    assert reply["content"] == "Let me look." and reply["unreadable"] == toolcalls.SERVER_LINE
    assert "tool_calls" not in reply


def test_a_request_without_tools_reads_no_calls(project, llm):
    text = '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>'
    llm.reply(text=text)  # a summary that quotes a call, as compaction asks for one
    assert _complete(project, llm, tools=False) == {"role": "assistant", "content": text}


def _complete(project: Path, llm, tools: bool = True) -> dict:
    """One reply from the scripted server through providers.Model, in text mode."""
    from conftest import API_KEY, make_config

    from amas_code import providers

    cfg = make_config(model="openai/test-model", api_base=llm.url, api_key=API_KEY, text_tools=True)
    schemas = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in NAMES]
    asked = [{"role": "user", "content": "hi"}]
    return providers.Model(cfg).complete(asked, schemas if tools else None)


# -- the writing side -----------------------------------------------------------------------------


def native_call(cid: str, name: str, args: dict) -> dict:
    function = {"name": name, "arguments": json.dumps(args)}
    return {"id": cid, "type": "function", "function": function}


def test_results_of_one_reply_and_the_next_question_are_one_user_message():
    calls = [native_call("a", "read_file", {"path": "a.py"}), native_call("b", "shell_command", {})]
    messages = [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        {"role": "user", "content": "next"},
    ]
    sent = toolcalls.to_text(messages)
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == (
        '<tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>\n'
        '<tool_call>{"name": "shell_command", "arguments": {}}</tool_call>'
    )
    assert sent[2]["content"] == (
        '<tool_response name="read_file">\nA\n</tool_response>\n\n'
        '<tool_response name="shell_command">\nB\n</tool_response>\n\nnext'
    )


def test_what_to_text_writes_back_the_reader_reads_again():
    call = native_call("a", "edit_file", {"path": "é.py", "old": 'x = "\\n"', "new": "{}"})
    sent = toolcalls.to_text([{"role": "assistant", "content": "ok", "tool_calls": [call]}])
    calls, left, _ = toolcalls.read(sent[0]["content"], NAMES)
    assert calls_of(calls) == [["edit_file", json.loads(call["function"]["arguments"])]]
    assert left == "ok"


def test_the_prompt_describes_typed_parameters_and_one_example():
    schema = {"name": "shell_command", "description": "Run a command.", "parameters": {}}
    schema["parameters"] = {
        "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
        "required": ["command"],
    }
    text = toolcalls.describe([{"type": "function", "function": schema}])
    assert "- shell_command(command: string, timeout?: integer): Run a command." in text
    assert text.count("<tool_call>") == 1 and toolcalls.EXAMPLE in text


STREAMED = {  # what the stream may show of a reply so far
    "Reading it.\n<tool_call>{": "Reading it.\n",
    "Reading it.\n<tool_": "Reading it.\n",
    "Sure [read_file(path=": "Sure ",
    "Sure\n[TOOL_CA": "Sure\n",
    'Here: {"name": "read_file"': "Here: ",
    "a < b and c > d": "a < b and c > d",
    ">>> print(1)\n1\nAction: none needed": ">>> print(1)\n1\nAction: none needed",
    "Then:\n>>>read_fi": "Then:\n",
    "Then:\n```json\n{": "Then:\n",
    "Code:\n```python\nx = 1\n```": "Code:\n```python\nx = 1\n```",
    "Done.": "Done.",
    "Writing it.<|message_sep|>\n\nfunction call<|role_sep|>\n{": "Writing it.",
    "Writing it.\n✿FUNCTION✿: create_": "Writing it.\n",
    "Writing it.\n✿FUNC": "Writing it.\n",
    "Then <longcat_tool_call>{": "Then ",
    "Then <minimax:tool_call>\n<invoke name=": "Then ",
    "Then <seed:tool_call>\n<function=read_file>": "Then ",
    'Then <invoke name="read_file">': "Then ",
    " to=read_file<|message|><atem:function_calls>": " ",
    "read_file\n<|content|>{": "",
    "Let me see.<|tool_call>call:read_file{": "Let me see.",
    "Let me see.<｜tool▁calls▁begin｜>": "Let me see.",
    "See example.py for a sample of the format.": "See example.py for a sample of the format.",
}


@pytest.mark.parametrize("text", STREAMED)
def test_the_stream_never_shows_the_start_of_call_markup(text):
    assert toolcalls.visible(text) == STREAMED[text]


def test_arguments_are_read_leniently_or_not_at_all():
    assert toolcalls.arguments("{'path': 'a', 'all': True,}") == {"path": "a", "all": True}
    assert toolcalls.arguments('"{\\"path\\": \\"a\\"}"') == {"path": "a"}
    assert toolcalls.arguments('{"path": ') is None and toolcalls.arguments("[1]") is None


def test_a_call_to_a_tool_we_do_not_have_is_never_read_as_one():
    """Never run; where it ends the reply, the model hears there is no such tool (a small model
    called the project's own function `format_row` and took it for done)."""
    calls, left, unreadable = toolcalls.read('{"name": "rm_rf", "arguments": {}}', NAMES)
    said = toolcalls.UNKNOWN_LINE.format(name="rm_rf")
    assert (calls, left, unreadable) == ([], '{"name": "rm_rf", "arguments": {}}', said)
    assert toolcalls.error(NAMES, said).startswith("Error: there is no tool named rm_rf. The tools")
    calls, left, unreadable = toolcalls.read('<tool_call>{"name": "rm_rf"}</tool_call>', NAMES)
    assert calls == [] and left == "" and unreadable == toolcalls.BROKEN_LINE


def test_deeply_nested_or_repeated_markup_is_text_not_a_crash():
    nested = '{"name": "read_file", "arguments": ' + "[" * 5000 + "]" * 5000 + "}"
    assert toolcalls.read(nested, NAMES) == ([], nested, None)
    looping = '<tool_call>{"name" ' * 3000  # a small model stuck repeating itself
    calls, left, unreadable = toolcalls.read(looping, NAMES)
    assert calls == [] and left == "" and unreadable == toolcalls.BROKEN_LINE


def test_lenient_reading_never_changes_the_strings_inside():
    raw = "{'code': 'x = None  # True, false, null', 'flag': true, 'list': [1,],}"
    assert toolcalls.arguments(raw) == {
        "code": "x = None  # True, false, null",
        "flag": True,
        "list": [1],
    }
    raw = '{"code": "if x is None: return True", "n": None,}'
    assert toolcalls.arguments(raw) == {"code": "if x is None: return True", "n": None}


# -- the figures docs/models.md and the README quote: `python tests/test_toolcalls.py` -------------


def figures(corpus: list[dict]) -> list[str]:
    """Per family: calls read right / cases, then false runs over the answers that only show calls.
    The reader is the same in text mode and native mode
    (a native reply carrying the call as text)."""
    read, total, false = {}, {}, [0, 0]
    for case in corpus:
        calls = calls_of(toolcalls.read(case["raw"], names_for(case))[0])
        if case["kind"] in ("plain", "example"):
            false = [false[0] + bool(calls), false[1] + 1]
        elif case["kind"] == "call":
            total[case["family"]] = total.get(case["family"], 0) + 1
            read[case["family"]] = read.get(case["family"], 0) + (calls == case["calls"])
    lines = [f"{family:20} {read[family]}/{total[family]}" for family in sorted(total)]
    lines.append(f"{'calls read':20} {sum(read.values())}/{sum(total.values())}")
    return lines + [f"{'false runs':20} {false[0]}/{false[1]}"]


if __name__ == "__main__":
    print("\n".join(["corpus (tuned on)"] + figures(CORPUS)))
    print("\n".join(["", "held out (never tuned on)"] + figures(HELDOUT)))
