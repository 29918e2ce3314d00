"""Tool calls written as text, both ways:
read the forms local models write, write the one we ask for."""

import ast
import json
import keyword
import random
import re
import string
import textwrap
from typing import NamedTuple

# a call that works in any project (a small model copies an example as it is: one that read
# README.md had it read, then create, a README the project did not have)
EXAMPLE = '<tool_call>{"name": "list_files", "arguments": {}}</tool_call>'
SERVER_LINE = (
    "this model writes tool calls in a form only its server can read: let the server parse them "
    "(llama.cpp --jinja, vLLM --tool-call-parser, an Ollama model with a tools template)"
)
BROKEN_LINE = "the model wrote a tool call amas could not read; it is asked to write it again"
EXAMPLE_LINE = "the reply shows a tool call as an example, so it was not run; the model is told"
# Markup only a server's own parser can read (harmony, DeepSeek, Kimi-K2, Gemma 4, MiniMax, Step3);
# a call in it has two of these at least, a sentence about them only one
SERVER_ONLY = re.compile(
    r"<\|channel\|>|<\|message\|>|<\|call\|>|<\|start\|>assistant|<[｜|]tool▁|<｜tool_call"
    r"|<\|tool_calls?_section_begin\|>|<\|tool_call_(?:argument_)?begin\|>"
    r"|<\|tool_call>|<tool_call\|>"
    r"|</?minimax:tool_call>|</?start_function_call>|<end_function_call>"
)
FENCES = re.compile(r"^[ \t]*(```+|~~~+)[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)", re.M | re.S)
INLINE = re.compile(r"(`+)[^`\n]+?\1")
CALL_START = re.compile(r"\s*(?:[\[{]|<function=|```|[\w.-]+\s*<arg_key>)")
# What a server's template writes around calls: thinking (<think>, Seed's <seed:think>, a thought
# channel, harmony's analysis), role headers, section tokens, the tags of a call's wrapper; cut with
# the calls it came with
LITTER = re.compile(
    r"<\|channel>.*?<channel\|>|<\|channel\|>analysis<\|message\|>.*?<\|end\|>"
    r"|<\|thought_start\|>.*?<\|thought_end\|>|<(?P<thought>(?:\w+:)?think)>.*?</(?P=thought)>"
    r"|</?(?:\w+:)?think>"
    r"|<\|from\|>\s*assistant\s*|(?:<\|recipient\|>|\A)\s*all\s*<\|content\|>|<\|start\|>assistant"
    r"|function\s*<[|｜]tool_sep[|｜]>[\w.-]*\s|<[|｜][\w▁.-]*[|｜]>"
    r"|<\|?(?:tool_call|tool_response|channel)\|?>"
    r"|</?(?:\w+:tool_call|longcat_tool_call|tool_call|tools?|tool_calls|(?:\w+:)?function_calls)>"
    r"|\bto=[\w.-]+[^<\n]*(?=<\|)"
    r"|<(?:start|end)_function_call>|</?[|｜]DSML[|｜](?:function|tool)_calls>",
    re.S,
)
CONTENT_AFTER = re.compile(r"\s*(?:<(?:code|content)>|```)")  # what a call's empty value left out
QUOTED = re.compile(r"[ \t]*>(?!>>)")  # a Markdown quote, not Functionary's >>>
# What may follow a call that ends the reply: blanks, and the tokens that close a call or a turn
CLOSING = re.compile(r"(?:\s|\\n|<[^\s<>]{1,60}>|\[/[A-Z_]+\])*")
# A result the model went on to make up after its call, at a token where a server stops it (Gemma's
# <|tool_response>, DeepSeek's tool outputs, Llama's ipython turn): cut with the call
MADE_UP = re.compile(
    r"(?:\s|</[^\s<>]{1,60}>|<[|｜][^\s<>]{1,40}[|｜]>)*"
    r"(?:<\|tool_response>|<[|｜]tool▁outputs▁begin[|｜]>|<\|start_header_id\|>ipython)"
)
TAG_BREAK = re.compile(r"[<>\n]")  # what a tag cannot hold
LAST_MARKUP = re.compile(r"[>}\])]([^>}\])]*)\Z")  # what follows the reply's last tag or bracket
QUOTED_STRING = re.compile(r'"[^"]*"?')
WORD = re.compile(r"[^\W\d_]{2}")  # two letters of any script
CLAUSES = re.compile(r"[,;]\s+")
SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z])|(?<=[。！？])")
# Words that present what follows as a sample, and (before a colon) as a form described, in the
# languages models answer in most; and words that refuse to run what follows
SAMPLE = re.compile(
    r"(?i)\be\.g\.|\b(?:for (?:example|instance)|such as"
    r"|looks? (?:something )?like|like (?:this|so)"
    r"|as follows|example|sample|template|placeholder)\b(?![./_-]\w)"  # not example.py
    r"|\b(?:exemple|ejemplo|esempio|exemplo|beispiel|z\. ?b\.|пример|например)"
    r"|例如|比如|示例|例子|样例|范例|例えば|の例|例[:：]|예시|예를 들어"
)
DESCRIBED = re.compile(
    r"(?i)\b(?:format|syntax|form|shape|schema|signature|convention|typical(?:ly)?|usually"
    r"|standard|parser|parsed|parses|written|would|like|how|expects?|payload|formato|формат"
    r"|writes|wrote|emits|outputs?|returns|produces|prints|yields|generates|says|reads)\b"
    r"|\A\s*(?:when|whenever|if|each time|every time)\b|格式|形式|書式|형식"
)
REFUSED = re.compile(
    r"(?i)\b(?:can't|cannot|can not|won't|will not|wouldn't|shouldn't|should not|must not"
    r"|refuse to|not going to)\s+(?:\w+\s+){0,2}?(?:run|execute|call|perform|do)\b"
    r"|不会执行|不能执行"
)
# A sentence that says what the model itself does next introduces a call, not a form: "Let me…",
# "First, I'll…", "Checking the tests:"
INTENT = re.compile(
    r"(?i)\s*(?:(?:first|next|now|then|so|ok(?:ay)?|sure|alright|great)[,!.]?\s+)*"
    r"(?:let me|let's|i'll|i will|i need|i'm going|i am going|i want|i should|i must|i have to"
    r"|i'd like|i would like|we need|we'll|(?!\w*thing\b)[a-z]+ing\b)"
)
MAX_CALLS = 200  # tool calls of one reply amas considers: the rest are not run, nor read
MISSES = 20  # starts of one format that read as nothing before it stops looking
TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[\[\](){}]')
BLANKS = re.compile(r"\s*")
SEPARATOR = re.compile(r"\s*[;,]?\s*")
CALL_KEYS = set("name arguments parameters args type id function tool_name tool_call_id".split())
# Words of a model's name, each group a family whose formats it writes (a model named by none of
# them may write any; "any" names models that write only the forms every model may)
FAMILY_WORDS = re.compile(
    r"(?P<harmony>gpt-?oss)|(?P<seed>seed-?oss)|(?P<qwen>qwen|qwq|nemotron)"
    r"|(?P<llama>llama|toolace)"
    r"|(?P<mistral>m[ia]xtral|mistral|ministral|devstral|codestral|magistral|pixtral|voxtral|xlam)"
    r"|(?P<granite>granite)|(?P<deepseek>deepseek|cogito)|(?P<glm>glm|laguna)|(?P<gemma>gemma)"
    r"|(?P<kimi>kimi)|(?P<minimax>minimax)|(?P<step>(?<![a-z])step-?\d)|(?P<hermes>hermes)"
    r"|(?P<phi>(?<![a-z])phi(?![a-z])|firefunction)|(?P<functionary>functionary)|(?P<lfm>lfm)"
    r"|(?P<cohere>command-?[ar]|c4ai|(?<![a-z])aya(?![a-z]))|(?P<olmo>olmo)|(?P<minicpm>minicpm)"
    r"|(?P<internlm>intern)|(?P<hunyuan>hunyuan)|(?P<longcat>longcat)|(?P<gigachat>gigachat)"
    r"|(?P<atem>glimmer|muse)|(?P<apertus>apertus)|(?P<any>exaone|smollm|falcon|hammer)"
)
LOOKBACK = 2000  # characters before a call that may present it


def read(text: str, names, model: str = "") -> tuple[list[dict], str, str | None]:
    """The calls to known tools in a reply, the text left for the user, and a line
    when a call was lost.

    `names` holds the tools' names; a dict of name -> schema also types the values written as text.
    `model` is the model's name: where it names a family, only that family's formats count."""
    families = family(model)
    code = [m.span() for m in FENCES.finditer(text)] + [m.span() for m in INLINE.finditer(text)]
    spans, broken = _spans(text, code, names, families)
    free = [block for block in code if not any(s <= block[0] < e for s, e, *_ in spans)]
    if free != code:  # a fence a call opened (DeepSeek R1's ```json) is no code block
        code = free
        spans, broken = _spans(text, code, names, families)
    spans = _first_of_overlaps(spans + _litter(text, code))
    spans = _grouped(text, _ending(text, _made_up(text, spans)))
    calls = [native(n, _schema_typed(a, names, n)) for s in spans if s.run for n, a in s.calls]
    shown = [span for span in spans if not span.run]
    lost = _lost(text, code, broken, shown)
    if not calls and not lost:
        lost = _unknown(text, names)
    return _left(text, spans, calls, lost)


UNKNOWN_LINE = "the model called {name}, which is no tool of amas; it is told the tools there are"
TAIL = re.compile(r"\s*(?:```)?\s*\Z")  # what may follow a call that ends the reply: its fence


def _unknown(text: str, names) -> tuple[int, str] | None:
    """A call to a tool that does not exist ending the reply (a small model's `{"name":
    "format_row", "arguments": {…}}`, the project's own function): the line that says so (the
    reply stays whole; the model hears the tools there are). Looked for in the reply's last 4,000
    characters, at each `{` that starts a line."""
    start = max(0, len(text) - 4000)
    for match in re.finditer(r"(?m)^[ \t]*(?=\{)", text[start:]):
        found = _json_at(text, start + match.end())
        call = _as_call(found[0]) if found else None
        if call and call[0] not in names and TAIL.match(text, found[1]):
            return len(text), UNKNOWN_LINE.format(name=call[0]) + _wanted(call[1])
    return None


def _wanted(args: dict) -> str:
    """What a call to a tool that does not exist meant to run, where it says (`run_tests` with a
    `command`): the way to run it with the tools there are."""
    command = args.get("command") or args.get("cmd")
    if isinstance(command, str) and command.strip():
        return f" (it meant to run `{command.strip()[:200]}`)"
    return ""


def family(model: str) -> set | None:
    """The families whose formats count for a model, from its name; None when its name says none."""
    name = model.lower().split("/", 1)[-1]  # not the provider (ollama/, openai/, …)
    found = {match.lastgroup for match in FAMILY_WORDS.finditer(name)}
    return found or None


class Span(NamedTuple):
    """Where a call (or the markup around calls) stands, what it calls, and whether it runs."""

    start: int
    end: int
    calls: list
    run: bool


def _spans(text: str, code: list, names, families) -> tuple[list, list]:
    """What every row finds: call spans (shown in a format not the model's family's), and where
    unreadable call markup starts."""
    spans = []
    broken = []
    for row in FORMATS:
        found, lost = _row_spans(text, row, code, names)
        if not row.counts(families):
            found = [span._replace(run=False) for span in found]
        spans = spans + found
        broken = broken + lost
    return spans, broken


def _row_spans(text: str, row: "Row", code: list, names) -> tuple[list, list]:
    """The calls one format finds (each marked run or shown as an example), and where its markup
    holds no readable call."""
    spans = []
    broken = []
    misses = 0
    for match in row.start.finditer(text):
        # inside a call this row read already (a list's items): its span wins anyway, and reading
        # each item to the list's end again would cost the square of a long list
        if spans and match.start() < spans[-1].end:
            continue
        if _in_code(match.start(), code, fenced=row.body is _fenced):
            continue
        span = _call_at(text, row, match, names)
        if span:
            spans.append(span._replace(run=not _example(text, match.start(), spans)))
            continue
        if _lost_call(text, row, match):
            broken.append(match.start())
        misses += 1
        if misses > MISSES:  # a model repeating itself: each try costs a scan of the rest
            break
    return spans, broken


def _call_at(text: str, row: "Row", match, names) -> Span | None:
    """The calls to known tools a format's markup holds where it starts, and where they end."""
    found = row.body(text, match.end(), match)
    if not found or not _known(found[0], names):
        return None
    end = _close(text, found[1], row.close)
    if _starved(text, found[0], end):
        return None
    return Span(match.start(), end, found[0], True)


def _lost_call(text: str, row: "Row", match) -> bool:
    """Markup that surely begins a call (not a sample presented) where none could be read."""
    if not row.strong or not CALL_START.match(text, match.end()):
        return False
    return not _presented(text, match.start())


class Row:
    """One format: where a call starts, how its body is read, what may close it, and the families
    that write it (none: any model may). Its markup is surely a call (a Weak row's may be prose)."""

    strong = True

    def __init__(self, start: str, body, close: str = "", families=()):
        self.start = re.compile(start)
        self.body = body
        self.close = None
        if close:
            self.close = re.compile(r"(?:\s|\\n)*(?:" + close + ")")
        self.families = set(families)

    def counts(self, families) -> bool:
        """Whether a call in this format counts for a model of these families (None: unknown)."""
        if families is None or not self.families:
            return True
        return bool(self.families & families)


class Weak(Row):
    """A format whose start may be prose too: markup it cannot read is not a lost call."""

    strong = False


def _in_code(at: int, code: list, fenced: bool = False) -> bool:
    """A match inside a code block or inline code is shown, not run;
    a fenced call is its own block."""
    if fenced:
        return any(start < at < end for start, end in code)
    return any(start <= at < end for start, end in code)


def _known(found: list, names) -> bool:
    return bool(found) and all(name in names for name, _ in found)


def _schema_typed(args: dict, names, name: str) -> dict:
    """Values as the schema types them:
    XML text becomes a number, and "5" an integer, when it asks."""
    schema = {}
    if isinstance(names, dict):
        schema = names.get(name) or {}
    props = schema.get("function", schema).get("parameters", {}).get("properties", {})
    return {key: _value(value, props.get(key, {}).get("type")) for key, value in args.items()}


class Written(str):
    """A value written as bare text (an XML parameter): a string unless the schema types it."""


def _value(value, kind: str | None):
    if not isinstance(value, str):
        return value
    if kind in (None, "string"):
        return str(value)
    raw = value.strip()
    if raw == "null":  # no value, as JSON writes it, for any type but a string
        return None
    if kind == "boolean":
        raw = raw.lower()
    guess = _lenient(raw)
    if guess is None:
        return str(value)
    return guess


def _close(text: str, at: int, close) -> int:
    if close and (match := close.match(text, at)):
        return match.end()
    return at


def _first_of_overlaps(spans: list) -> list:
    """Spans in order; one starting inside an earlier one is part of it
    (a tag's body, a list's item)."""
    kept = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if not kept or span.start >= kept[-1].end:
            kept.append(span)
    return kept


def _made_up(text: str, spans: list) -> list:
    """A result the model made up after its call, where a server would have stopped it, is cut with
    the call: the rest of the reply becomes markup."""
    for span in spans:
        if span.calls and MADE_UP.match(text, span.end):
            kept = [each for each in spans if each.start < span.end]
            return kept + [Span(span.end, len(text), [], True)]
    return spans


def _ending(text: str, spans: list) -> list:
    """Calls run only where they end the reply (a model that calls a tool stops there): from the end
    back, while nothing but closing tokens lies between. A call prose follows is an example, and a
    reply that shows one call as an example shows its others so too."""
    out = []
    tail = len(text)
    ending = True
    example = False
    for span in reversed(spans):
        ending = ending and _closing(text, span.end, tail)
        example = example or (bool(span.calls) and not ending)
        if ending and tail == len(text):  # the closing tokens after the last call go with it
            span = span._replace(end=tail)
        out.append(span)
        tail = span.start
    out.reverse()
    if not example:
        return out
    return [_as_example(span) for span in out]


def _as_example(span: Span) -> Span:
    if span.calls:
        return span._replace(run=False)
    return span


def _closing(text: str, start: int, end: int) -> bool:
    return CLOSING.match(text, start, end).end() == end


def _grouped(text: str, spans: list) -> list:
    """Calls written together, and the markup around them, share one fate: shown when any is."""
    out = []
    group = []
    for span in spans:
        if group and not _closing(text, group[-1].end, span.start):
            out = out + _one_fate(group)
            group = []
        group.append(span)
    return out + _one_fate(group)


def _one_fate(group: list) -> list:
    calls = [span for span in group if span.calls]
    if not calls:
        return group
    run = all(span.run for span in calls)
    return [span._replace(run=run) for span in group]


def _lost(text: str, code: list, strong: list, shown: list) -> tuple[int, str] | None:
    """Where unreadable call markup begins outside code, and the line the user gets about it; a call
    shown as an example that ends the reply may have been meant: kept whole, the model told."""
    unreadable = _unreadable(text, code, strong, shown)
    if unreadable:
        return unreadable
    last = max((span.end for span in shown if span.calls), default=0)
    if last and _closing(text, last, len(text)):
        return len(text), EXAMPLE_LINE
    return None


def _unreadable(text: str, code: list, strong: list, shown: list) -> tuple[int, str] | None:
    """Call markup amas cannot read, where it ends the reply:
    markup a sentence follows was quoted."""
    if _prose_after(text):
        return None
    quiet = code + [(span.start, span.end) for span in shown]  # code, and what examples show
    marks = [m.start() for m in SERVER_ONLY.finditer(text) if not _in_code(m.start(), quiet)]
    server = [at for at in marks if not _presented(text, at)]
    if len(server) > 1:
        return min(server), SERVER_LINE
    if strong:
        return min(strong), BROKEN_LINE
    return None


def _prose_after(text: str) -> bool:
    """Whether words (outside quoted strings) follow the reply's last tag or bracket."""
    tail = LAST_MARKUP.search(text)
    if not tail:
        return True
    return bool(WORD.search(QUOTED_STRING.sub("", tail[1])))


def _left(text: str, spans: list, calls: list, lost) -> tuple[list[dict], str, str | None]:
    """The reply's text with the calls and their wrappers cut out; unreadable markup cut from where
    it starts."""
    if not calls and not lost:
        return [], text, None
    if not calls:
        if lost[0] < len(text):
            return [], text[: lost[0]].strip(), lost[1]
        return [], text, lost[1]
    for span in reversed(spans):
        if span.run:
            text = text[: span.start].rstrip(" \t") + text[span.end :]
    return calls, re.sub(r"\n{3,}", "\n\n", text).strip(), None


def _litter(text: str, code: list) -> list:
    """What a server's template leaves around calls (section tokens, a thought channel, role
    headers) outside code: cut with the calls, never shown. A </think> before any <think> closes
    a thought the template opened: all before it is thought too."""
    found = [m.span() for m in LITTER.finditer(text) if not _in_code(m.start(), code)]
    close = THOUGHT_END.search(text)
    if close and not THOUGHT_START.search(text, 0, close.start()):
        found.append((0, close.end()))
    return [Span(start, end, [], True) for start, end in found]


THOUGHT_START = re.compile(r"<(?:\w+:)?think>")
THOUGHT_END = re.compile(r"</(?:\w+:)?think>")


def _starved(text: str, calls: list, end: int) -> bool:
    """A call with an empty value while content follows in markup (Qwen-Agent's <code> not joined):
    run as it is, it would write nothing."""
    empty = any(value == "" for _, args in calls for value in args.values())
    return empty and bool(CONTENT_AFTER.match(text, end))


def _example(text: str, at: int, spans: list) -> bool:
    """A call shown as an example: presented by the prose before it, or right after one that is."""
    if spans and not text[spans[-1].end : at].strip():  # the next of calls written together
        return not spans[-1].run
    return _presented(text, at)


def _presented(text: str, at: int) -> bool:
    """A call the prose before it presents as an example: a quoted line, or a last sentence such as
    "for example", "it looks like" or "the format is:", past the markup a call may open with."""
    line = text.rfind("\n", 0, at) + 1
    quote = QUOTED.match(text, line)
    if quote and quote.end() <= at:
        return True
    window = text[max(0, at - LOOKBACK) : at]
    lead = _before_markup(window)
    inline = ""
    if "\n" not in window[len(lead) :]:  # prose on the call's own line
        inline = lead[lead.rfind("\n") + 1 :].strip()
    if inline.endswith(('"', "“", "'", "«")):  # in quotation marks
        return True
    sentence = SENTENCES.split(lead[lead.rfind("\n") + 1 :].strip())[-1]
    if SAMPLE.search(sentence) or REFUSED.search(sentence):
        return True
    # described before a colon, or mid-sentence ("Qwen-Agent writes ✿FUNCTION✿: … and …")
    described = sentence.endswith((":", "：")) or (inline and not inline.endswith(tuple(".!?>)]}")))
    intent = INTENT.match(CLAUSES.split(sentence)[-1])  # "The test fails, so let me read it:"
    return bool(described and DESCRIBED.search(sentence) and not intent)


def _before_markup(text: str) -> str:
    """The text before the markup it ends with: the tags a call may open with, on lines of their own
    (a wrapper, a section token), blanks, newlines written as the two characters \\n."""
    while True:
        text = text.rstrip()
        tag = text.rfind("<")
        if text.endswith("\\n"):
            text = text[:-2]
        elif text.endswith(">") and tag >= 0 and not TAG_BREAK.search(text, tag + 1, len(text) - 1):
            text = text[:tag]
        else:
            return text


def native(name: str, args: dict | str, cid: str = "") -> dict:
    """A call in OpenAI's shape; without an id, one strict chat templates accept (Mistral's: nine
    alphanumerics)."""
    cid = cid or "".join(random.choices(string.ascii_letters + string.digits, k=9))
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


class Call(NamedTuple):
    """One tool call, read once: its id, the tool's name, its arguments as the model wrote them
    (raw) and as an object (None when they are not one)."""

    id: str
    name: str
    raw: str | dict
    args: dict | None

    @classmethod
    def of(cls, call: dict) -> "Call":
        """A call in OpenAI's shape, read."""
        function = call["function"]
        raw = function["arguments"]
        return cls(call["id"], function["name"], raw, arguments(raw))


# -- reading JSON leniently ----------------------------------------------------------------------


def arguments(raw) -> dict | None:
    """A call's arguments as a dict, leniently (single quotes, trailing commas, True/False/None)."""
    if isinstance(raw, dict):
        return raw
    value = _lenient(raw or "{}")
    if isinstance(value, str):  # arguments sent as a JSON string inside the JSON
        value = _lenient(value)
    if isinstance(value, dict):
        return value
    return None


def _lenient(raw: str):
    """JSON, or JSON as small models get it wrong; None when it cannot be read."""
    try:
        return json.loads(raw, strict=False)  # strict=False: raw newlines inside strings
    except (ValueError, RecursionError):
        pass
    try:
        return json.loads(SLIPS.sub(_as_json, raw), strict=False)
    except (ValueError, RecursionError):
        pass
    try:  # single quotes: Python's literal syntax, read without running anything
        return ast.literal_eval(SLIPS.sub(_as_python, raw))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


# Strings (left as they are), trailing commas, and the words JSON and Python spell differently
SLIPS = re.compile(
    r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|,(?=\s*[}\]])|\b(?:True|False|None|true|false|null)\b'
)
JSON_SPELLING = {"True": "true", "False": "false", "None": "null", ",": ""}  # a trailing comma
PYTHON_SPELLING = {"true": "True", "false": "False", "null": "None", ",": ""}


def _as_json(match) -> str:
    return JSON_SPELLING.get(match[0], match[0])


def _as_python(match) -> str:
    return PYTHON_SPELLING.get(match[0], match[0])


def _json_at(text: str, at: int):
    """The JSON value starting at `at` (after blanks) and where it ends; None if there is none."""
    at = BLANKS.match(text, at).end()
    if text[at : at + 1] not in ("{", "["):
        return None
    try:
        return json.JSONDecoder(strict=False).raw_decode(text, at)
    except (ValueError, RecursionError):
        end = _balanced(text, at)
        if not end or (value := _lenient(text[at:end])) is None:
            return None
        return value, end


def _balanced(text: str, at: int) -> int | None:
    """Where the bracket opened at `at` closes, skipping quoted strings of either quote."""
    depth = 0
    for token in TOKENS.finditer(text, at):
        if token[0] in "[({":
            depth += 1
        elif token[0] in "])}":
            depth -= 1
        if depth == 0:
            return token.end()
    return None


def _as_call(value) -> tuple[str, dict] | None:
    """(name, arguments) when a JSON object has the shape of a call and nothing else; the name may
    stand under "function" (LocalAI's grammar), the arguments under "args"."""
    if not isinstance(value, dict):
        return None
    if not set(value) <= CALL_KEYS:
        return _keyed_call(value)
    inner = value.get("function")
    if isinstance(inner, dict) and "name" in inner:
        return _as_call(inner)
    name = _first(value, ("name", "tool_name", "function"))
    args = arguments(_first(value, ("arguments", "parameters", "args")) or {})
    if isinstance(name, str) and args is not None:
        return name, args
    return None


def _first(value: dict, keys: tuple):
    return next((value[key] for key in keys if key in value), None)


def _keyed_call(value: dict) -> tuple[str, dict] | None:
    """{"name": {"args": {…}}}: the tool's name as the only key, its arguments under "args" (a
    one-key object without "args" is data, not a call)."""
    named = _named(value)
    if not named or "args" not in named[1] or not set(named[1]) <= {"args", "id"}:
        return None
    args = arguments(named[1]["args"])
    if args is None:
        return None
    return named[0], args


def _as_calls(value) -> list | None:
    """Calls from one call object or a list of them; None when any item is not a call."""
    items = value
    if not isinstance(value, list):
        items = [value]
    calls = [_as_call(item) for item in items]
    if calls and None not in calls:
        return calls
    return None


# -- the bodies of each format -------------------------------------------------------------------


def _json_body(text: str, at: int, match=None):
    """Call objects or lists of them, split by ; or , or blanks, maybe inside a ```json fence."""
    fence = JSON_FENCE.match(text, at)
    if not fence:
        return _json_calls(text, at)
    found = _json_calls(text, fence.end())
    closing = found and FENCE_END.match(text, found[1])
    if closing:
        return found[0], closing.end()
    return found


JSON_FENCE = re.compile(r"\s*```(?:json)?[ \t]*\n?")
FENCE_END = re.compile(r"\s*```")


def _json_calls(text: str, at: int):
    """Call objects one after another (Llama writes `{…}; {…}`); None unless the first is a call."""
    calls = []
    end = at
    while (found := _json_at(text, at)) and (more := _as_calls(found[0])):
        calls = calls + more
        end = found[1]
        at = SEPARATOR.match(text, end).end()
    if calls:
        return calls, end
    return None


def _tagged_body(text: str, at: int, match=None):
    """A <tool_call> body: JSON, the Qwen3-Coder XML <function=…>, GLM's name and <arg_key>s (or a
    name alone), a name then its JSON arguments (Laguna, GLM-4), or a Python call."""
    xml = FUNCTION.match(text, BLANKS_OR_ESCAPED.match(text, at).end())
    if xml:
        return _function_body(text, xml.end(), xml)
    glm = GLM_NAME.match(text, at)
    if glm:
        return _glm_body(text, glm)
    named = NAMED_JSON.match(text, at)
    if named:  # a word before a whole call object is a label (`json`), not the tool's name
        return _json_body(text, named.end()) or _functionary_body(text, named.end(), named)
    if PY_CALL.match(text, at):  # name(a='v'), name()
        return _pythonic_lines(text, at, closing="</tool_call>")
    return _with_code(text, _json_body(text, at))


BLANKS_OR_ESCAPED = re.compile(r"(?:\s|\\n)*")  # newlines written as the two characters \n, too
# the closing tag is the one its row opened: </tool_call>, Laguna's </user>, </longcat_tool_call>
GLM_NAME = re.compile(r"\s*([\w.-]+)\s*(?=<arg_key>|</\w+>)")
NAMED_JSON = re.compile(r"\s*([\w.-]+)\s*(?=\{)")
PY_CALL = re.compile(r"\s*[A-Za-z_][\w.]*\(")


def _with_code(text: str, found):
    """Qwen-Agent's code mode: the call's empty value ("code" first) takes the <code> body after it,
    as Qwen-Agent joins it; a body no empty value can take leaves the call unread."""
    if not found or len(found[0]) != 1:
        return found
    code = CODE.match(text, found[1])
    if not code:
        return found
    name, args = found[0][0]
    empty = [key for key, value in args.items() if value == ""]
    if "code" in empty:
        return [(name, args | {"code": code[1]})], code.end()
    if len(empty) == 1:
        return [(name, args | {empty[0]: code[1]})], code.end()
    return None


CODE = re.compile(r"\s*<code>\n?(.*?)\n?</code>", re.S)


def _function_body(text: str, at: int, match):
    """<function=name> then a JSON object (maybe after a [call_id]) or
    <parameter=x>value</parameter>s, then </function>: left out where the reply (or its <tool_call>)
    ends after a parameter."""
    if ESCAPED_LINES.match(text, at):
        return _escaped_function(text, at, match)
    found = _json_at(text, CALL_ID.match(text, at).end())
    if found and (args := arguments(found[0])) is not None:
        return [(match[1], args)], found[1]
    args = {}
    end = at
    while item := PARAM.match(text, end):
        key = item[2] or item[4]
        args[key.strip()] = _xml_value(_param_value(item))
        end = item.end()
    closing = FUNCTION_END.match(text, end)
    if closing:
        return [(match[1], args)], closing.end()
    if args and CUT_AFTER_PARAMS.match(text, end):
        return [(match[1], args)], end
    return None


def _param_value(item) -> str:
    """A parameter's value; where its closing tag is indented (the call was),
    less that indentation."""
    if not item[2]:
        return item[5]
    value = item[3]
    indented = INDENTED_END.search(value)
    if not indented:
        return value
    return textwrap.dedent(value[: indented.start()])


def _escaped_function(text: str, at: int, match):
    """Qwen3-Coder XML whose newlines came as the two characters \\n (escaped once too often):
    read with real newlines, to its </function>."""
    stop = text.find("</function>", at)
    end = len(text)
    if stop >= 0:
        end = stop + len("</function>")
    found = _function_body(text[at:end].replace("\\n", "\n"), 0, match)
    if not found:
        return None
    return found[0], end


INDENTED_END = re.compile(r"(?:\A|\n)[ \t]+\Z")  # the blanks before an indented </parameter>
ESCAPED_LINES = re.compile(r"\\n[ \t]*<param")
CALL_ID = re.compile(r"\s*(?:\[[\w.:-]+\])?")  # LocalAI's [call_abc] before the JSON
FUNCTION_END = re.compile(r"\s*</function>")
CUT_AFTER_PARAMS = re.compile(r"\s*(?:</tool_call>|\Z)")  # </function> left out
# Qwen3-Coder's <parameter=x> (its value on lines of its own), MiniCPM's <param name="x"> and
# <parameter name="x"> (the value inline, every blank kept); a value may hold </parameter>: it ends
# at the one the next parameter or the call's end follows
PARAM = re.compile(
    r'\s*<(param(?:eter)?)(?:=([^>\n]+)>\n?(.*?)\n?|\s+name="([^"]*)"[^>]*>(.*?))</\1>'
    r"(?=\s*(?:<param|</function>|</tool_call>|\Z))",
    re.S,
)


def _xml_value(raw: str) -> "Written":
    cdata = CDATA.fullmatch(raw)
    if cdata:
        return Written(cdata[1])
    return Written(raw)


CDATA = re.compile(r"\s*<!\[CDATA\[(.*)\]\]>\s*", re.S)


def _invoke_body(text: str, at: int, match):
    """MiniMax-M2's, Step-3's and DeepSeek's DSML <invoke name=…><parameter name=…>, any prefix."""
    ns = re.escape(match["ns"])
    param = re.compile(
        rf'\s*<{ns}parameter name="([^"]*)"([^>]*)>(.*?)</{ns}parameter>'
        rf"(?=\s*<(?:{ns}parameter|/{ns}invoke)|\s*\Z)",
        re.S,
    )
    args = {}
    end = at
    while item := param.match(text, end):
        args[item[1]] = _dsml_value(item[3], item[2])
        end = item.end()
    found = not args and _json_at(text, at)  # DeepSeek V3.2 may write a JSON body instead
    if found and (body := arguments(found[0])) is not None:
        args = body
        end = found[1]
    closing = re.compile(rf"\s*</{ns}invoke>").match(text, end)
    if closing:
        return [(match["name"], args)], closing.end()
    return None


def _dsml_value(raw: str, attributes: str):
    """DeepSeek's DSML writes string="false" on a value written as JSON; other values are text."""
    if 'string="false"' in attributes and (value := _lenient(raw)) is not None:
        return value
    return _xml_value(raw)


def _gemma_body(text: str, at: int, match):
    """Gemma 4's and FunctionGemma's call:name{key:<|"|>text<|"|>,n:42}, one or more in a block."""
    masked = GEMMA_STRING.sub(_blanked, text)  # strings hold any brace; blanked, lengths kept
    calls = []
    end = at
    while item := GEMMA_CALL.match(text, end):
        close = _balanced(masked, item.end())
        if not close:
            return None
        value = _lenient(GEMMA_TOKEN.sub(_as_json_token, text[item.end() : close]))
        if not isinstance(value, dict):
            return None
        calls.append((item[1], value))
        end = close
    if calls:
        return calls, end
    return None


def _blanked(match) -> str:
    return '"' + "_" * (len(match[0]) - 2) + '"'


def _as_json_token(match) -> str:
    """A Gemma string (<|"|>…<|"|> or <escape>…<escape>), bare key or bare word as JSON; a JSON
    string, number, true, false or null as it is."""
    if match["key"]:
        return json.dumps(match["key"].strip())
    if match["bare"]:
        word = match["bare"].strip()
        if _lenient(word) is not None or word == "null":
            return word
        return json.dumps(word)
    string = match["string"]
    for mark in ('<|"|>', "<escape>"):
        if string.startswith(mark):
            return json.dumps(string[len(mark) : -len(mark)], ensure_ascii=False)
    return string


GEMMA_CALL = re.compile(r"\s*,?\s*call:([\w.-]+)\s*(?=\{)")
GEMMA_STRING = re.compile(r'<\|"\|>.*?<\|"\|>|<escape>.*?<escape>|"(?:[^"\\]|\\.)*"', re.S)
GEMMA_TOKEN = re.compile(
    rf"(?P<string>{GEMMA_STRING.pattern})|(?<=[{{,])(?P<key>\s*[A-Za-z_][\w.-]*\s*)(?=:)"
    r"|(?<=:)(?P<bare>[^{}\[\],\"<\s][^{}\[\],\"<]*?)(?=\s*[,}\]])",
    re.S,
)


def _glm_body(text: str, match):
    """GLM's name then <arg_key>/<arg_value> pairs; a value written as a JSON string is decoded, as
    GLM-4.7's parser does; a name alone is a call without arguments."""
    args = {}
    end = match.end()
    while item := GLM_PAIR.match(text, end):
        args[item[1].strip()] = _glm_value(item[2])
        end = item.end()
    return [(match[1], args)], end


# a value may hold </arg_value>: it ends at the one the next key or the call's end follows
GLM_PAIR = re.compile(
    r"\s*<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>"
    r"(?=\s*(?:<arg_key>|</\w+>|\Z))",
    re.S,
)


def _glm_value(raw: str):
    quoted = raw.strip()
    if quoted.startswith('"') and quoted.endswith('"'):
        decoded = _lenient(quoted)
        if isinstance(decoded, str):
            return decoded
    return _xml_value(raw)


def _mistral_body(text: str, at: int, match=None):
    """Mistral's old [TOOL_CALLS][{…}] or new [TOOL_CALLS]name[ARGS]{…}
    (maybe with [CALL_ID]), repeated."""
    if text.startswith("[", BLANKS.match(text, at).end()):
        return _json_body(text, at)
    head = re.compile(r"\s*(?:\[TOOL_CALLS\])?\s*([\w.-]+)(?:\[CALL_ID\]\w+)?\[ARGS\]")
    calls = []
    end = at
    while (item := head.match(text, end)) and (found := _json_at(text, item.end())):
        args = arguments(found[0])
        if args is None:
            return None
        calls.append((item[1], args))
        end = found[1]
    if calls:
        return calls, end
    return None


def _keyed_body(text: str, at: int, match=None):
    """Apertus's [{"name": {arguments}}, …]: each tool's name the only key of its object."""
    found = _json_at(text, at)
    if not found or not isinstance(found[0], list):
        return None
    calls = [_named(item) for item in found[0]]
    if not calls or None in calls:
        return None
    return calls, found[1]


def _named(item) -> tuple[str, dict] | None:
    """(key, value) of an object whose only key holds an object."""
    if not isinstance(item, dict) or len(item) != 1:
        return None
    [(name, args)] = item.items()
    if not isinstance(args, dict):
        return None
    return name, args


def _functionary_body(text: str, at: int, match):
    """A name then its JSON arguments: Functionary's >>>name, Kimi-K2, DeepSeek, harmony, …"""
    found = _json_at(text, at)
    if found and (args := arguments(found[0])) is not None:
        return [(match[1], args)], found[1]
    return None


def _qwen_agent_body(text: str, at: int, match):
    """Qwen-Agent's ✿FUNCTION✿: name then ✿ARGS✿: {…}; a name with no ✿ARGS✿ takes none."""
    if "✿ARGS✿" not in match[0]:
        return [(match[1], {})], at
    return _functionary_body(text, at, match)


def _fenced(text: str, at: int, match=None):
    """A fence that holds call objects and nothing else (a wrapper tag at most) is a call."""
    found = _json_body(text, WRAPPER.match(text, at).end())
    if not found:
        return None
    closing = FENCE_END.match(text, _close(text, found[1], UNWRAPPER))
    if closing:
        return found[0], closing.end()
    return None


# Hermes 2 Pro's wrappers inside a fence; a <tool_call> in a fence is someone showing the format
WRAPPER = re.compile(r"\s*(?:<(?:function_call|response|json|xml|JSON)>)?")
UNWRAPPER = re.compile(r"\s*</(?:function_call|response|json|xml|JSON)>")


def _pythonic(text: str, at: int, match):
    """[name(a='v'), other(b=1)], read with ast: the text is parsed, never run."""
    end = _balanced(text, match.start("list"))
    if end is None:
        return None
    try:
        tree = ast.parse(_keywords(text[match.start("list") : end]), mode="eval").body
        calls = [_py_call(node) for node in tree.elts]
    except (SyntaxError, ValueError, TypeError, AttributeError, RecursionError):
        return None
    if calls:
        return calls, end
    return None


def _pythonic_lines(text: str, at: int, match=None, closing: str = "</function_calls>"):
    """OLMo's <function_calls>: one name(a='v') a line, up to the closing tag."""
    end = text.find(closing, at)
    if end < 0:
        end = len(text)
    try:
        lines = ast.parse(_keywords(text[at:end].strip())).body
        calls = [_py_call(line.value) for line in lines]
    except (SyntaxError, ValueError, TypeError, AttributeError, RecursionError):
        return None
    if calls:
        return calls, end
    return None


def _python_fenced(text: str, at: int, match=None):
    """MiniCPM's ```python fence of name(a='v') lines."""
    return _pythonic_lines(text, at, closing="```")


def _py_call(node) -> tuple[str, dict]:
    """A call's name and keyword arguments; JSON's true/false/null read as Python's."""
    if not isinstance(node, ast.Call) or node.args:
        raise ValueError("not a call with keyword arguments")
    if any(kw.arg is None for kw in node.keywords):
        raise ValueError("**arguments are not literal")
    args = {
        kw.arg.removeprefix(KEYWORD): ast.literal_eval(JsonWords().visit(kw.value))
        for kw in node.keywords
    }
    return ast.unparse(node.func), args


KEYWORD = "_amas_keyword_"


def _keywords(source: str) -> str:
    """Arguments named like Python keywords (from=, class=) renamed so ast can read them."""
    words = "|".join(keyword.kwlist)
    return re.sub(rf"(?<=[(,\s])({words})(?=\s*=[^=])", KEYWORD + r"\1", source)


class JsonWords(ast.NodeTransformer):
    """true, false and null as the constants they mean."""

    def visit_Name(self, node):
        if node.id in JSON_WORDS:
            return ast.Constant(JSON_WORDS[node.id])
        return node


JSON_WORDS = {"true": True, "false": False, "null": None}


FUNCTION = re.compile(r"<function=([\w.-]+)>")
QWEN_AGENT = r"✿FUNCTION✿:?[ \t]*([\w.-]+)\s*(?:✿ARGS✿:?)?"
# a ✿RESULT✿ after a Qwen-Agent call (a result the model made up) and all after it is dropped, as
# Qwen-Agent drops it
QWEN_AGENT_END = r"(?s:✿(?:RESULT|RETURN)✿.*)?"
GEMMA = r"<\|tool_call>|<start_function_call>"
GIGACHAT = r"(?:<\|message_sep\|>\s*)?function call\s*<\|role_sep\|>|<\|function_call\|>"
KIMI = (
    r"<\|tool_call_begin\|>\s*(?:functions\.)?([\w.-]+?)(?::\d+)?\s*<\|tool_call_argument_begin\|>"
)
# DeepSeek R1/V3: function<｜tool▁sep｜>name then a ```json fence; V3.1: name<｜tool▁sep｜>{…}
DEEPSEEK = (
    r"<[|｜]tool▁call▁begin[|｜]>\s*(?:function\s*<[|｜]tool▁sep[|｜]>\s*)?([\w.-]+)\s*"
    r"(?:<[|｜]tool▁sep[|｜]>)?\s*(?:```(?:json)?)?"
)
DEEPSEEK_END = r"(?:```)?(?:\s*<[|｜]tool▁call▁end[|｜]>)?"
INVOKE = r'<(?P<ns>(?:\w+:|[|｜]DSML[|｜])?)invoke name="(?P<name>[\w.-]+)"[^>]*>'
HARMONY = (
    r"(?:<\|start\|>assistant\s*)?(?:<\|channel\|>\s*commentary\s*)?to=(?:functions\.)?([\w.-]+)"
    r"[^<\n]*(?:<\|channel\|>[^<]*)?(?:<\|constrain\|>[^<]*)?<\|message\|>"
)
FUNCTIONARY_V2 = r"(?:<\|recipient\|>|\A)\s*([\w.-]+)\s*<\|content\|>"
FUNCTIONARY_V25 = r"<\|reserved_special_token_249\|>\s*([\w.-]+)\s*\n"
LFM2 = r"<\|tool_call_start\|>\s*(?P<list>\[)"
MINICPM = r"<\|tool_call_start\|>\s*```(?:python)?[ \t]*\n"
INTERNLM = r"<\|action_start\|>\s*<\|plugin\|>"
PYTHONIC = r"(?:<\|python_start\|>)?(?P<list>\[)\s*[A-Za-z_][\w.]*\s*\("
PYTHONIC_FAMILIES = ["llama", "lfm", "olmo", "gemma", "granite"]
APERTUS = r"<\|tools_prefix\|>(?=\s*\[)"
HERMES_XML = r'<function name="([\w.-]+)">'

FORMATS = [  # one row a family; the first to start a span reads it (a tag's body, not its items)
    # the forms amas asks for in text mode, which any model may write: rows of no family
    Row(r"<tool_call>", _tagged_body, r"</tool_call>"),  # Hermes, Qwen, Qwen3-Coder, GLM
    Row(r"<tools?>|<tool_calls>", _json_body, r"</tools?>|</tool_calls>"),  # wrappers, Hunyuan
    Weak(r"(?m)^[ \t]*```(?:json|xml|tool_call|tool_code)?[ \t]*\n(?=\s*[\[{<])", _fenced),
    # Llama 3.x, xLAM, LocalAI's grammar
    Weak(r"(?=(?:\[\s*)?\{\s*[\"'](?:name|function|type)[\"'])", _json_body),
    # the markup of one family each
    Row(r"<longcat_tool_call>", _tagged_body, r"</longcat_tool_call>", families=["longcat"]),
    # Laguna writes <user> for <tool_call> (a tag prose may hold too: <user>hello</user>)
    Weak(r"<user>", _tagged_body, r"</user>", families=["glm"]),
    Row(GEMMA, _gemma_body, r"<tool_call\|>|<end_function_call>", families=["gemma"]),
    Row(KIMI, _functionary_body, r"<\|tool_call_end\|>", families=["kimi"]),
    Row(DEEPSEEK, _functionary_body, DEEPSEEK_END, families=["deepseek"]),  # R1, V3, V3.1
    # MiniMax-M2, Step-3 <steptml:…>, Atem <atem:…>, DeepSeek V3.2's DSML
    Row(INVOKE, _invoke_body, families=["minimax", "step", "atem", "deepseek"]),
    Row(HARMONY, _functionary_body, r"<\|call\|>", families=["harmony", "atem"]),  # gpt-oss
    Row(GIGACHAT, _json_body, families=["gigachat"]),  # GigaChat 3 and 3.1
    Row(FUNCTIONARY_V2, _functionary_body, families=["functionary"]),
    Row(FUNCTIONARY_V25, _functionary_body, families=["functionary"]),
    Row(QWEN_AGENT, _qwen_agent_body, QWEN_AGENT_END, families=["qwen"]),  # Qwen-Agent
    Weak(r"<(?:response|json|xml|JSON)>", _json_body, UNWRAPPER.pattern, ["hermes"]),
    Row(r"<\|tool_call\|>", _json_body, r"<\|/tool_call\|>", families=["granite", "phi"]),
    Row(r"<function_call>", _json_body, r"</function_call>", families=["granite"]),  # 20b FC
    Row(r"\bfunctools(?=\[)", _json_body, families=["phi"]),  # Phi-4-mini, FireFunction v2
    Row(r"<\|python_tag\|>", _json_body, families=["llama"]),  # Llama 3.1
    Row(r"\[TOOL_CALLS\]", _mistral_body, r"\[/TOOL_CALLS\]", families=["mistral"]),
    Row(r"<\|START_ACTION\|>", _json_body, r"<\|END_ACTION\|>", families=["cohere"]),  # R7B
    Row(r"<function_calls>", _pythonic_lines, r"</function_calls>", families=["olmo"]),  # OLMo 3
    Row(LFM2, _pythonic, r"<\|tool_call_end\|>", families=["lfm"]),  # LFM2
    Row(MINICPM, _python_fenced, r"```", families=["minicpm"]),  # MiniCPM 3, 4
    Row(INTERNLM, _json_body, r"<\|action_end\|>", families=["internlm"]),  # InternLM
    Row(APERTUS, _keyed_body, r"<\|tools_suffix\|>", families=["apertus"]),  # Apertus
    # Functionary v3.1, Llama 3.1's custom form, Seed-OSS, Step-3.5, Qwen3-Coder bare: any model
    Row(FUNCTION.pattern, _function_body, r"</function>"),
    Row(HERMES_XML, _function_body, r"</function>", families=["hermes", "minicpm"]),  # MiniCPM
    Weak(r">>>\s*([\w.-]+)\s*\n?", _functionary_body, families=["functionary"]),
    # Functionary v3.2's first call without >>>, GLM-4's name line then its arguments
    Weak(r"\A([\w.-]+)\n(?=\{)", _functionary_body, families=["functionary", "glm"]),
    Weak(r"Action:\s*(?=```)", _json_body, families=["cohere"]),  # Command R
    Weak(PYTHONIC, _pythonic, r"<\|python_end\|>", PYTHONIC_FAMILIES),  # Llama 3.2+/4, …
]


# -- writing: the prompt, the conversation, the stream -------------------------------------------


def describe(schemas: list[dict]) -> str:
    """The tools for the system prompt in text mode: typed parameters from the native schemas."""
    lines = [_described(schema["function"]) for schema in schemas]
    how = f"To call a tool, write on its own line, for example:\n{EXAMPLE}\nthen stop and wait: "
    how += 'the result comes back as <tool_response name="list_files">...</tool_response>. Tools:\n'
    return "\n# Calling tools\n" + how + "\n".join(lines) + "\n"


def _described(function: dict) -> str:
    """- name(param: type, optional?: type): what it does"""
    params = function.get("parameters", {})
    required = params.get("required", [])
    typed = [_param(key, spec, required) for key, spec in params.get("properties", {}).items()]
    return f"- {function['name']}({', '.join(typed)}): {function.get('description') or ''}"


def _param(key: str, spec: dict, required: list) -> str:
    """path: string, or limit?: integer for a parameter that may be left out."""
    if key in required:
        return f"{key}: {_type(spec)}"
    return f"{key}?: {_type(spec)}"


def _type(spec: dict) -> str:
    kind = spec.get("type", "any")
    if spec.get("enum"):
        return f"{kind} ({' | '.join(map(str, spec['enum']))})"
    return kind


def made_up(line: str) -> str | None:
    """The name of the tool that does not exist a line about the model's call names."""
    unknown = re.match(r"the model called (\S+), which is no tool", line)
    return unknown and unknown[1]


def error(names, line: str = "", named: list[str] = ()) -> str:
    """What the model reads when its call could not be read, was read as an example, or named no
    tool (line: what the user was told; named: where the project has that tool's name): how to
    write one, and the tools there are."""
    if made_up(line):
        return _no_such_tool(made_up(line), names, line) + _in_project(made_up(line), named)
    said = "your tool call could not be read, or it stood in prose as an example and was not run"
    return (
        f"Error: {said}. To run a tool, write just the call, as {EXAMPLE} "
        f"(tools: {', '.join(names)})"
    )


def _no_such_tool(name: str, names, line: str) -> str:
    """The model can write a call, so no example to copy (a small model called the example, three
    times): the call that runs what it meant, or the tools offered and the way to a change."""
    said = f"Error: there is no tool named {name}."
    meant = re.search(r"\(it meant to run `(.+)`\)$", line)
    if meant:
        call = json.dumps({"name": "shell_command", "arguments": {"command": meant[1]}})
        return f"{said} To run `{meant[1]}`, call shell_command: {call}"
    said += f" The tools are: {', '.join(names)}."
    if "edit_file" in names:
        said += " To change a file, read_file it, then edit_file; to run a command, shell_command."
    return said


def _in_project(name: str, named: list[str]) -> str:
    """Where the project has the name the model called as a tool (a small model called the function
    its task named): the file to read and change."""
    if not named:
        return ""
    where = named[0].split(":", 1)[0]
    lines = "\n".join(named)
    return (
        f"\n{name} is a name in this project, not a tool:\n{lines}\n"
        f"To change it, read_file {where}, then edit_file."
    )


def to_text(messages: list[dict]) -> list[dict]:
    """Native calls and results rewritten as text, never two user messages in a row."""
    out = []
    names = {}
    for message in messages:
        if message.get("tool_calls"):
            names.update({c["id"]: c["function"]["name"] for c in message["tool_calls"]})
            message = _calls_as_text(message)
        elif message["role"] == "tool":
            message = _result_as_text(message, names.get(message.get("tool_call_id"), ""))
        _append(out, message)
    return out


def _calls_as_text(message: dict) -> dict:
    """An assistant's native calls written back in the form the prompt asks for."""
    lines = [message.get("content") or ""]
    for call in message["tool_calls"]:
        raw = call["function"]["arguments"]
        args = arguments(raw)
        if args is None:  # written back as it came, for the model to see what it sent
            args = raw
        call = {"name": call["function"]["name"], "arguments": args}
        lines.append(f"<tool_call>{json.dumps(call, ensure_ascii=False)}</tool_call>")
    return {"role": "assistant", "content": "\n".join(lines).strip()}


def _result_as_text(message: dict, name: str) -> dict:
    text = f'<tool_response name="{name}">\n{message["content"]}\n</tool_response>'
    return {"role": "user", "content": text}


def _append(out: list[dict], message: dict) -> None:
    """Gemma's and Mistral's templates refuse two user turns in a row:
    the second joins the first."""
    last = (out or [{}])[-1]
    texts = isinstance(last.get("content"), str) and isinstance(message.get("content"), str)
    if last.get("role") == "user" == message["role"] and texts:
        out[-1] = {**last, "content": f"{last['content']}\n\n{message['content']}"}
    else:
        out.append(message)


MARKS = [  # text that begins call markup, shown to nobody while it streams
    "<tool_call",
    "<tool>",
    "<tools>",
    "<function",
    "<response>",
    "<json>",
    "<xml>",
    "<JSON>",
    "<|",
    "<｜",
    "<minimax:",
    "<seed:tool_call",
    "<start_function_call>",
    "[TOOL_CALLS]",
    "functools[",
    "<longcat_tool_call",
    "<invoke",
    "<steptml:",
    "✿FUNCTION✿",
]
STARTS = re.compile(  # markup told from prose by what follows it, even when it is not all here yet
    r"(?:\[\s*)?\{\s*[\"'](?:name|function|type)[\"']|\[\s*[A-Za-z_][\w.]*\("
    r"|>>>[\w.-]*(?:\n|\Z)|Action:\s*(?:```|`{0,2}\Z)"
    r"|(?m:^)[ \t]*```(?:json|xml|tool_call|tool_code)?[ \t]*\n\s*[\[{<]"
    # GigaChat, Atem, Functionary v2
    r"|function call\s*<\||\bto=[\w.-]+[^<\n]*<\||\A[\w.-]+\s*<\|content"
)


def visible(text: str) -> str:
    """The streamed text up to anything that may begin call markup, even a mark not yet complete."""
    cuts = [text.find(mark) for mark in MARKS if mark in text]
    found = STARTS.search(text)
    if found:
        cuts.append(found.start())
    head = text[: min(cuts, default=len(text))]
    for mark in MARKS:  # a mark cut in two by the stream: "<tool_" now, "call>" next
        for size in range(min(len(mark) - 1, len(head)), 0, -1):
            if head.endswith(mark[:size]):
                head = head[:-size]
                break
    return head
