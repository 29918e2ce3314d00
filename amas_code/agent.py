"""The agent: the conversation, the loop over model calls and tools, the system prompt, compaction."""

import json
import uuid
from collections import Counter
from pathlib import Path

from amas_code import history, providers, skills, tools, ui

PROMPT_BUDGET = 2000  # tokens of system prompt; the project map is trimmed to fit
WARN_STEPS = 20  # tool rounds in one turn before a soft warning
KEEP_TURNS = 2  # user turns kept verbatim by compaction
TEMPLATE = """You are Amas Code, an elite AI coding assistant and principal software engineer.
You execute tasks autonomously and thoroughly.

# Core Mandates
- **Engineering Standards & Completeness:** Never leave "TODO" or placeholder code. Always implement full, robust logic.
- **Idiomatic Code & Visuals:** Write idiomatic code. Ensure UIs are modern, polished, and use consistent spacing.
- **Development Lifecycle:** Research -> Strategy -> Execution -> Validation.
- **Validation:** Always verify your changes through tests or manual checks before declaring success. \
Fix all console errors.

# Browser Control & Web Interaction
- search_google finds sources; fetch_url reads a known page (docs, articles, APIs); use the browser \
(navigate) only for pages that need JavaScript, clicks, forms or a login.
- Work a page in steps: navigate, get_text to see it, click or type by CSS selector, then get_text again \
to verify the change. Never assume an action worked.
- Prefer stable selectors: #id, [name=...], [aria-label=...], button[type=submit].
- Chat-style web apps: type the message into the input box, click the send button, then get_text on the \
conversation until the reply stops growing; screenshot when the page looks wrong.

## Rules
- ALWAYS read a file before editing it.
- Explain your plan before executing multi-step changes.
- Provide FULL file content when using write_file.
"""
TEXT_TOOLS = """
# Calling tools
Call a tool by writing, on its own line, <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>, \
then stop and wait. Results come back as <tool_response name="TOOL">...</tool_response>. Tools:
"""
SUMMARIZE = ("Summarize this conversation between a user and a coding agent for the agent's own memory: "
             "the goals, decisions, files touched and their state, commands run and results, and open "
             "problems. Be concise and concrete; keep paths, names and numbers exact.")


class Agent:
    """One conversation with the model; messages are the only state."""

    def __init__(self, config: dict, root: Path, session: str | None = None, messages: list | None = None):
        self.config, self.root = config, Path(root)
        self.session, self.messages = session or uuid.uuid4().hex[:12], messages or []
        self.log, self.attachments, self.told_text_tools = self.root / ".amas" / "history.jsonl", [], False

    def add(self, message: dict) -> None:
        self.messages.append(message)
        history.append(self.log, self.session, message)

    def turn(self, text: str) -> bool:
        """Run the model until it answers without tools; False if the user cancelled."""
        self.add({"role": "user", "content": self.attached() + text})
        actions, seen = [], Counter()
        try:
            for step in range(1, 10**9):
                if step == WARN_STEPS + 1:
                    ui.warning(f"{WARN_STEPS} tool rounds in this turn; Ctrl+C stops it")
                reply = self.call()
                if reply is None or not reply.get("tool_calls"):
                    break
                for call in reply["tool_calls"]:
                    self.add(self.run_tool(call, seen, actions))
        except KeyboardInterrupt:
            self.repair()
            ui.warning("cancelled; the conversation is kept")
            return False
        finally:
            if actions:
                ui.show_summary(actions)
            tools.close(idle_only=True)  # a browser unused for a whole turn gives its memory back
        return True

    def call(self) -> dict | None:
        """One model call, switching to text tool calls or compacting when the provider needs it."""
        for attempt in range(3):
            try:
                schemas = self.schemas()  # first: it may switch to text tools, which the prompt describes
                messages = self.prompted()
                if providers.token_count(self.config["model"], messages) > self.config["max_context_tokens"]:
                    ui.info("the conversation passed max_context_tokens; compacting")
                    messages = self.prompted() if self.compact() else messages
                with ui.Stream(self.config.get("stream", True)) as stream:
                    reply = providers.complete(messages, schemas, self.config, stream)
                break
            except providers.ToolsUnsupported:
                if self.config.get("text_tools"):
                    raise
                self.use_text_tools()
            except providers.ProviderError as e:
                if e.kind != "ContextWindowExceededError" or attempt or not self.compact():
                    raise
        if not reply["content"].strip() and not reply.get("tool_calls"):
            ui.warning("the model sent an empty reply")
            return None
        self.add(reply)
        return reply

    def run_tool(self, call: dict, seen: Counter, actions: list) -> dict:
        name, raw = call["function"]["name"], call["function"]["arguments"]
        args = tools.parse_args(name, raw)
        ui.show_tool_call(name, args if isinstance(args, dict) else {"arguments": raw})
        result = tools.run(name, args) if isinstance(args, dict) else args
        seen[(name, str(raw))] += 1
        if seen[(name, str(raw))] >= 3:
            ui.warning(f"the model repeated the same {name} call {seen[(name, str(raw))]} times")
            result += "\n[note: you have made this exact call several times this turn; change approach]"
        ui.show_result(result)
        target = next((str(args[k]) for k in ("path", "command", "url", "query", "selector", "pattern")
                       if isinstance(args, dict) and k in args), "")
        actions.append((name, target, result))
        return {"role": "tool", "tool_call_id": call["id"], "content": result}

    def repair(self) -> None:
        """After Ctrl+C: every tool call gets a result, so the next request is valid."""
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i].get("tool_calls"):
                done = {m.get("tool_call_id") for m in self.messages[i + 1:]}
                for call in self.messages[i]["tool_calls"]:
                    if call["id"] not in done:
                        self.add({"role": "tool", "tool_call_id": call["id"], "content": "Cancelled by the user."})
                return

    def use_text_tools(self) -> None:
        self.config["text_tools"] = True
        if not self.told_text_tools:
            self.told_text_tools = True
            ui.warning(f"{self.config['model']} has no native tool calling; using text tool calls for this session")

    def schemas(self) -> list | None:
        if not self.config.get("text_tools") and not providers.native_tools(self.config["model"]):
            self.use_text_tools()
        return None if self.config.get("text_tools") else tools.TOOLS

    def attached(self) -> str:
        text = "".join(f"Attached file {p}:\n```\n{c}\n```\n\n" for p, c in self.attachments)
        self.attachments = []
        return text

    # -- the system prompt ----------------------------------------------------------------------
    def prompted(self) -> list[dict]:
        return [{"role": "system", "content": self.system_prompt()}, *self.messages]

    def last_user(self) -> str:
        return next((m["content"] for m in reversed(self.messages) if m["role"] == "user"
                     and isinstance(m.get("content"), str) and not m["content"].startswith("<tool_response")), "")

    def system_prompt(self) -> str:
        """The notes' template, then project map, rules and skills; the map trimmed to the budget."""
        head = TEMPLATE + (TEXT_TOOLS + tool_list() if self.config.get("text_tools") else "")
        rules, found, latest = skills.rules(self.root), skills.load(self.root), self.last_user()
        tail = f"## Context & Rules\nProject root: {self.root}\n"
        if rules:
            tail += f"\n### Project rules\n{rules}\n"
        matched = [s for s in found if skills.matches(s, latest)]
        tail += "".join(f"\n### Skill: {s['name']}\n{s['body']}\n" for s in matched)
        others = [f"- {s['name']}: {s['description']}" for s in found if s not in matched]
        if others:
            tail += "\n### Other skills (mention one by name to load it)\n" + "\n".join(others) + "\n"
        room = PROMPT_BUDGET - self.tokens(head + tail)
        project_map = self.project_map(room)
        return head + tail + (f"\n### Project map\n{project_map}\n" if project_map else "")

    def tokens(self, text: str) -> int:
        return providers.token_count(self.config["model"], [{"role": "system", "content": text}])

    def project_map(self, room: int) -> str:
        """The map from `amas init`, files mentioned in the conversation first, cut to `room` tokens."""
        path = self.root / ".amas" / "project_map.md"
        if room <= 50 or not path.is_file():
            return ""
        sections = ["## " + s for s in path.read_text(encoding="utf-8").split("\n## ")[1:]]
        talk = " ".join(m["content"] for m in self.messages if m["role"] == "user" and isinstance(m["content"], str))

        def mentioned(section: str) -> bool:
            path = section.split("\n", 1)[0][3:]
            return path in talk or Path(path).name in talk

        sections.sort(key=lambda s: not mentioned(s))
        keep, used = [], 0
        for section in sections:  # characters/3 overestimates tokens: cheap and safe, checked below
            if used + len(section) // 3 > room:
                break
            keep.append(section)
            used += len(section) // 3
        while keep and self.tokens("\n".join(keep)) > room:
            keep = keep[: len(keep) * 4 // 5]
        dropped = len(sections) - len(keep)
        return "\n".join(keep) + (f"\n({dropped} more files in .amas/project_map.md)" if dropped else "")

    # -- compaction -----------------------------------------------------------------------------
    def compact(self) -> int:
        """Replace all but the last few turns with a model-written summary; return tokens freed."""
        starts = [i for i, m in enumerate(self.messages) if m["role"] == "user"]
        cut = starts[-KEEP_TURNS] if len(starts) >= KEEP_TURNS else (starts[-1] if starts else 0)
        if cut == 0:
            ui.info("nothing old enough to compact")
            return 0
        before = providers.token_count(self.config["model"], self.prompted())
        transcript = "\n\n".join(f"{m['role']}: {(m.get('content') or '')[:3000]} "
                                 f"{json.dumps(m.get('tool_calls', ''))[:1000]}" for m in self.messages[:cut])
        summary = providers.complete([{"role": "system", "content": SUMMARIZE},
                                      {"role": "user", "content": transcript}], None, self.config)
        self.messages = [{"role": "user", "content": f"[Summary of the earlier conversation]\n{summary['content']}"},
                         {"role": "assistant", "content": "Understood. I will continue from that summary."},
                         *self.messages[cut:]]
        freed = before - providers.token_count(self.config["model"], self.prompted())
        ui.success(f"compacted {cut} messages: {freed} tokens freed")
        return max(freed, 1)


def tool_list() -> str:
    """Tools described in text, for models without native tool calling."""
    lines = []
    for tool in tools.TOOLS:
        f = tool["function"]
        params = ", ".join(k + ("" if k in f["parameters"]["required"] else "?") for k in f["parameters"]["properties"])
        lines.append(f"- {f['name']}({params}): {f['description']}")
    return "\n".join(lines) + "\n"

