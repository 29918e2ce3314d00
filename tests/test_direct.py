"""The direct path's stream reader as a table: the chunks a server streams -> the reply amas builds
(what litellm's builder makes of the same chunks, where servers differ from OpenAI's own shape)."""

import json
import subprocess
import sys

import pytest
from conftest import amas_env

from amas_code import direct, toolcalls


def chunk(delta=None, finish=None, usage=None) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"choices": choices, **({"usage": usage} if usage else {})}


def call(index=None, cid=None, name=None, arguments=None) -> dict:
    piece = {"function": {k: v for k, v in (("name", name), ("arguments", arguments)) if v}}
    piece |= {k: v for k, v in (("index", index), ("id", cid)) if v is not None}
    return {"tool_calls": [piece]}


CASES = {  # name: (chunks, content, calls as (id, name, arguments), finish)
    "text in pieces, then counts": (
        [
            chunk({"role": "assistant"}),
            chunk({"content": "Hel"}),
            chunk({"content": "lo."}, "stop"),
        ],
        "Hello.",
        [],
        "stop",
    ),
    "a call in pieces by index (OpenAI, llama.cpp, vLLM)": (
        [
            chunk(call(0, "call_a", "read_file", "")),
            chunk(call(0, arguments='{"path": ')),
            chunk(call(0, arguments='"a.py"}')),
            chunk({}, "tool_calls"),
        ],
        "",
        [("call_a", "read_file", '{"path": "a.py"}')],
        "tool_calls",
    ),
    "whole calls without an index, each with its id": (
        [
            chunk(call(None, "c1", "list_files", "{}")),
            chunk(call(None, "c2", "read_file", '{"path": "b"}')),
        ],
        "",
        [("c1", "list_files", "{}"), ("c2", "read_file", '{"path": "b"}')],
        None,
    ),
    "arguments sent as an object": (
        [chunk(call(0, "c1", "read_file", {"path": "a.py"}))],
        "",
        [("c1", "read_file", '{"path": "a.py"}')],
        None,
    ),
    "no arguments, no id: an empty object and an id of amas's": (
        [chunk(call(0, None, "list_files"))],
        "",
        [("call_0", "list_files", "{}")],
        None,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_chunks_make_the_reply(case):
    chunks, content, calls, finish = CASES[case]
    shown = []
    answer = direct.Streamed(shown.append)
    assert all(answer.add(c) for c in chunks)
    value = answer.value()
    assert (value["content"], value["finish"], value["carried"]) == (content, finish, True)
    assert "".join(shown) == content  # the text, shown as it came
    got = [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in value["calls"]]
    assert got == calls


def test_counts_alone_carry_and_nothing_at_all_does_not():
    counted = direct.Streamed(print)
    counted.add(chunk(usage={"prompt_tokens": 3, "completion_tokens": 1}))
    assert counted.value()["carried"] and counted.value()["usage"]["prompt_tokens"] == 3
    assert direct.Streamed(print).value()["carried"] is False  # an empty stream: probed, then said


def test_a_call_past_the_cap_stops_the_reading_and_is_kept():
    """One more than MAX_CALLS is kept, so the agent sees the reply held more; nothing after it is
    read (bounded time and memory)."""
    answer = direct.Streamed(print)
    for i in range(toolcalls.MAX_CALLS):
        assert answer.add(chunk(call(i, f"c{i}", "list_files", "{}")))
    assert not answer.add(chunk(call(toolcalls.MAX_CALLS, "over", "list_files", "{}")))
    assert len(answer.value()["calls"]) == toolcalls.MAX_CALLS + 1


def test_the_sdk_is_entered_without_its_types_and_completes_for_anyone_who_asks(tmp_path):
    """direct.load() leaves openai's every type unimported; a later `import openai` (litellm's)
    still gets the whole package, the same classes."""
    code = (
        "import sys, json\n"
        "from amas_code import direct\n"
        "client, stream = direct.load()\n"
        "light = 'openai.types.chat' not in sys.modules and 'openai.resources' not in sys.modules\n"
        "import openai\n"
        "from openai.types.chat import ChatCompletion\n"
        "print(json.dumps([light, openai.OpenAI is client, openai.Stream is stream]))\n"
    )
    run = [sys.executable, "-c", code]
    done = subprocess.run(run, capture_output=True, text=True, cwd=tmp_path, env=amas_env())
    assert json.loads(done.stdout) == [True, True, True], done.stderr
