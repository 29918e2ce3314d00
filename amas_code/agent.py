"""The agent: one conversation, the loop over model calls and tools, the system prompt, compaction, history."""

import itertools
import json
import re
import time
import uuid
from pathlib import Path

from amas_code import config as config_file
from amas_code import providers, repomap, safety, skills, tools, ui
from amas_code.checkpoint import Checkpoint

PROMPT_BUDGET = 2000  # tokens of system prompt; the project map gets what the rest leaves
RULES_BUDGET = 500  # tokens of rules.md and AGENTS.md, so the map keeps a useful share
WARN_STEPS = 20  # tool rounds in one turn before a soft warning (never a hard cap)
REPEATS = 4  # the same call this many times in a row ends the turn: the model is stuck
SUMMARY_TOKENS = 1500  # cap on a compaction summary
SUMMARIZE = (
    "Summarize this conversation between a user and a coding agent for the agent's own memory: the goals, decisions, "
    "files touched and their state, commands run and results, and open problems. Be concise and concrete; keep paths,"
    " names and numbers exact."
)
TARGETS = ("path", "command", "url", "query", "selector", "pattern")  # the argument a call is about


def estimate(text: str) -> int:
    """Tokens, roughly and on the high side, without loading a tokenizer."""
    return len(text) // 3


class Agent:
    """One conversation with the model in one project; it makes and owns its model, gate, tools and checkpoints."""

    def __init__(self, config: dict, root: Path, resume: bool = False):
        self.config, self.root = config, Path(root).resolve()
        self.log: Path | None = config_file.state_file(self.root, "history.jsonl")
        self.session, self.messages = self.resume() if resume else (uuid.uuid4().hex[:12], [])
        self.logged, self.attachments, self.warned, self.preloading = (
            len(self.messages),
            [],
            set(),
            None,
        )
        self.model, self.gate = providers.Model(config), safety.Gate(config, self.root)
        self.checkpoint = (
            Checkpoint(self.root, config["ignore"], self.session)
            if config["checkpoint_on_edit"]
            else None
        )
        self.tools = tools.Tools(self.root, config, self.gate, self.checkpoint)
        self.prompt = re.split(
            r"<!-- \w+ -->\n", (Path(__file__).parent / "prompt.md").read_text(encoding="utf-8")
        )
        self.repair()

    # -- history ----------------------------------------------------------------------------------
    def resume(self) -> tuple[str, list[dict]]:
        """The latest session's id and messages (a /clear or /compact starts a new session)."""
        try:
            lines = config_file.read_private(self.log).splitlines() if self.log.is_file() else []
        except (OSError, config_file.ConfigError) as e:
            ui.warning(f"cannot read the history: {e}")
            lines = []
        entries = [e for e in map(_entry, lines) if e] or [
            {"session": uuid.uuid4().hex[:12], "time": 0}
        ]
        session, keep = entries[-1]["session"], ("role", "content", "tool_calls", "tool_call_id")
        found = [
            {k: e[k] for k in keep if k in e}
            for e in entries
            if e["session"] == session and "content" in e
        ]
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entries[-1]["time"]))
        ui.info(
            f"resuming the conversation of {when} ({ui.plural(len(found), 'message')})"
            if found
            else "no earlier conversation"
        )
        return session, found

    def flush(self, marker: bool = False) -> None:
        """Append what .amas/history.jsonl lacks (or a session marker); a folder that cannot hold it warns once."""
        new = [{"role": "session"}] if marker else self.messages[self.logged :]
        self.logged = len(self.messages)
        stamp = {"session": self.session, "time": time.time()}
        try:
            if self.log and new:
                config_file.append_private(
                    self.log, "".join(json.dumps({**stamp, **m}) + "\n" for m in new)
                )
        except (OSError, config_file.ConfigError) as e:
            ui.warning(f"the conversation is not saved (no --continue): {e}")
            self.log = None

    def new_session(self) -> None:
        """A fresh session in the history (after /clear or /compact), so --continue resumes what comes next."""
        self.session = uuid.uuid4().hex[:12]
        if self.checkpoint:
            self.checkpoint.session = self.session
        self.flush(marker=True)
        self.logged = 0
        self.flush()

    # -- the loop -----------------------------------------------------------------------------------
    def turn(self, text: str) -> bool:
        """Run the model until it answers without tools; False if the user cancelled (the conversation is kept)."""
        start, text = (
            len(self.messages),
            self.gate.secrets.redact(text),
        )  # piped in too: a log with a token in it
        attached = "".join(f"Attached file {p}:\n```\n{c}\n```\n\n" for p, c in self.attachments)
        self.messages.append({"role": "user", "content": attached + text})
        self.attachments = []
        if self.checkpoint:
            self.checkpoint.request = text[:300]
        try:
            self.loop()
        except KeyboardInterrupt:
            self.repair()
            ui.console.print()
            ui.warning("cancelled; the conversation is kept")
            return False
        except providers.ProviderError:
            if (
                len(self.messages) == start + 1
            ):  # nothing happened: the next request does not repeat it
                del self.messages[start:]
            raise
        finally:
            self.flush()
            self.tools.close(
                idle_only=True
            )  # a browser unused for a whole turn gives its memory back
        return True

    def loop(self) -> None:
        calls = []
        for step in itertools.count(1):
            if step == WARN_STEPS + 1:
                ui.warning(f"{WARN_STEPS} tool rounds in this turn; Ctrl+C stops it")
            reply = self.reply()
            for call in reply.get("tool_calls", []):
                calls.append(call["function"])
                self.messages.append(self.run_call(call, _repeats(calls)))
            if not reply.get("tool_calls"):
                return
            if _repeats(calls) >= REPEATS:
                name = calls[-1]["name"]
                return ui.warning(
                    f"the model made the same {name} call {REPEATS} times in a row; turn ended"
                )

    def reply(self) -> dict:
        """One model call; switches to text tool calls, or compacts, once when the provider needs it."""
        switched = None  # said once text tool calls worked: an empty stream may be the server failing anyway
        for attempt in range(3):
            try:
                reply = self.call()
                if switched:
                    ui.warning(f"{switched}; using text tool calls for this session")
                return reply
            except providers.NoNativeTools as e:
                if self.model.text_tools:
                    raise
                self.model.text_tools, switched = True, e
            except providers.ProviderError as e:
                if e.kind != "context" or attempt or not (self.compact() or self.shrink()):
                    self.model.text_tools &= (
                        switched is None
                    )  # they did not help: tools again next time
                    raise
        raise providers.ProviderError("the model call kept failing")

    def call(self) -> dict:
        with ui.Stream(
            self.config["stream"]
        ):  # the spinner from the first Enter, even while litellm still loads
            while (
                self.preloading and self.preloading.is_alive()
            ):  # Ctrl+C here is clean; inside an import it is not
                self.preloading.join(0.1)
        messages = self.request()
        with ui.Stream(self.config["stream"]) as stream:
            reply = self.model.complete(messages, self.tools.schemas(), stream)
        ui.show_answer(reply["content"])
        if lost := reply.pop(
            "lost", None
        ):  # the partial answer is kept, and the model told where it stopped
            self.messages.append(
                reply | {"content": f"{reply['content']}\n\n[connection lost mid-answer: {lost}]"}
            )
            raise lost
        if reply.pop("cut", False):
            ui.warning(
                f"the answer was cut at max_tokens ({self.config['max_tokens']}); raise it in your config"
            )
        if not reply["content"].strip() and not reply.get("tool_calls"):
            ui.warning("the model sent an empty reply")
            return reply
        self.messages.append(reply)
        return reply

    def run_call(self, call: dict, repeats: int) -> dict:
        name, raw = call["function"]["name"], call["function"]["arguments"]
        args, shell = (
            providers.loads(raw)[0] if isinstance(raw, str) else raw,
            name == "shell_command",
        )
        ui.show_call(
            name,
            next(
                (str(args[k]) for k in TARGETS if isinstance(args, dict) and k in args),
                str(raw)[:80],
            ),
        )
        result = tools.cap(
            self.tools.execute(name, raw), max(4000, self.model.context_limit())
        )  # one result fits
        ui.show_result(result.split("\n", 1)[-1] if shell else result, 3 * shell)
        if repeats == REPEATS - 1:
            result += f"\n[note: you have made this same call {repeats} times in a row; change your approach]"
        return {"role": "tool", "tool_call_id": call["id"], "content": result}

    def repair(self) -> None:
        """After Ctrl+C or a kill: every tool call gets a result, so the next request is valid."""
        at = max((i for i, m in enumerate(self.messages) if m.get("tool_calls")), default=None)
        done = {m.get("tool_call_id") for m in self.messages[at:]} if at is not None else set()
        for call in self.messages[at]["tool_calls"] if at is not None else []:
            if call["id"] not in done:
                self.messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": "Cancelled by the user.",
                    }
                )

    # -- the request --------------------------------------------------------------------------------
    def tokens(self, messages: list[dict], near: int = 0) -> int:
        """Tokens in messages: estimated, and counted exactly (litellm, tiktoken) only when the estimate is near."""
        guess = estimate(json.dumps(messages))
        return guess if guess < near * 0.6 else providers.token_count(self.model.name, messages)

    def limit(self) -> int:
        context = self.model.context_limit()
        return context - min(
            self.config.get("max_tokens") or 0, context // 4
        )  # room for the answer

    def request(self) -> list[dict]:
        """The system prompt and the conversation, compacted first when it passed the limit."""
        system = {
            "role": "system",
            "content": self.gate.secrets.redact(self.system_prompt()),
        }  # rules, map: files
        if self.tokens([system, *self.messages], self.limit()) > self.limit():
            self.compact() or self.shrink()
        return [system, *self.messages]

    def last_user(self) -> str:
        said = [
            m["content"]
            for m in self.messages
            if m["role"] == "user" and isinstance(m.get("content"), str)
        ]
        return next(
            (s for s in reversed(said) if not s.startswith(("<tool_response", "[Summary"))), ""
        )

    def system_prompt(self) -> str:
        """The notes' template, text-tool instructions when needed, rules, skills, then the ranked project map."""
        core, browsing, rules = self.prompt
        head = core + ("\n" + browsing if "navigate" in self.tools.names else "") + "\n" + rules
        head += self.model.tool_prompt(self.tools.schemas())
        tail = f"\n## Context & Rules\nProject root: {self.root}\n" + self.rules() + self.skills()
        room = PROMPT_BUDGET - estimate(head + tail)
        for _ in range(3):
            found = (
                repomap.prompt_map(self.root, self.last_user(), self.tools.touched, room)
                if room > 50
                else ""
            )
            prompt = head + tail + (f"\n### Project map\n{found}\n" if found else "")
            over = (
                self.tokens([{"role": "system", "content": prompt}], PROMPT_BUDGET) - PROMPT_BUDGET
            )
            if over <= 0:
                return prompt
            room -= over + 20
        return head + tail

    def rules(self) -> str:
        text = skills.rules(self.root)
        if estimate(text) > RULES_BUDGET:
            text = (
                text[: RULES_BUDGET * 3] + "\n[cut here: the rest did not fit in the system prompt]"
            )
            self.warn_once(
                f"AGENTS.md and .amas/rules.md are too long: the model sees the first ~{RULES_BUDGET} "
                "tokens (keep them short, or move detail into skills)"
            )
        return f"\n### Project rules\n{text}\n" if text else ""

    def skills(self) -> str:
        found, latest = skills.load(self.root), self.last_user()
        matched = [s for s in found if skills.matches(s, latest)]
        others = "\n".join(f"- {s['name']}: {s['description']}" for s in found if s not in matched)
        text = "".join(f"\n### Skill: {s['name']}\n{s['body']}\n" for s in matched)
        return text + (
            f"\n### Other skills (mention one by name to load it)\n{others}\n" if others else ""
        )

    def warn_once(self, message: str) -> None:
        if message not in self.warned:
            self.warned.add(message)
            ui.warning(message)

    # -- compaction ---------------------------------------------------------------------------------
    def compact(self) -> int:
        """Replace everything before the latest turn with a shorter model-written summary; tokens freed."""
        start = max(
            (i for i, m in enumerate(self.messages) if m["role"] == "user"), default=0
        )  # the latest turn
        if start == 0:
            return ui.info("nothing before the latest turn to compact") or 0
        old = self.messages[:start]
        transcript = "\n\n".join(
            f"{m['role']}: {m.get('content') or ''} {m.get('tool_calls', '')}"[:4000] for m in old
        )
        summarizer = providers.Model(
            {**self.config, "max_tokens": SUMMARY_TOKENS}, self.model.usage
        )
        with ui.Stream(self.config["stream"]):
            said = summarizer.complete(
                [{"role": "system", "content": SUMMARIZE}, {"role": "user", "content": transcript}]
            )
        new = [
            {
                "role": "user",
                "content": f"[Summary of the earlier conversation]\n{said['content']}",
            },
            {"role": "assistant", "content": "Understood. I will continue from that summary."},
        ]
        freed = self.tokens(old) - self.tokens(new)
        if freed <= 0:
            return (
                ui.warning(
                    "the summary was not shorter than what it would replace; nothing changed"
                )
                or 0
            )
        self.messages[:start] = new
        self.new_session()
        ui.success(f"compacted {ui.plural(start, 'message')}: {freed} tokens freed")
        return freed

    def shrink(self) -> int:
        """When the latest turn alone is too long: its longest tool results cut to a share of the context."""
        share, long = (
            max(2000, self.limit() // 4) * 3,
            [m for m in self.messages if m["role"] == "tool"],
        )
        long = [m for m in long if len(m["content"]) > share]
        for m in long:
            m["content"] = tools.cap(m["content"], share)
        if long:
            ui.warning(
                f"cut {ui.plural(len(long), 'long tool result')} so the conversation fits the context"
            )
        return len(long)


def _entry(line: str) -> dict | None:
    """One line of the history, if it has the shape amas writes (a hand-edited or damaged one is skipped)."""
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    shape = {
        "session": str,
        "time": (int, float),
        "role": str,
        "content": (str, type(None)),
        "tool_calls": list,
    }
    if not isinstance(entry, dict) or not {"session", "time", "role"} <= entry.keys():
        return None
    if any(not isinstance(entry[k], t) for k, t in shape.items() if k in entry):
        return None
    return entry if all(map(_whole_call, entry.get("tool_calls", []))) else None


def _whole_call(c) -> bool:
    return (
        isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("function"), dict)
    )


def _repeats(calls: list[dict]) -> int:
    """How many times in a row the last call was made, with the same arguments up to case, spaces and `./`."""
    same = [c["name"] + ":" + re.sub(r"\s+|\./", "", str(c["arguments"])).lower() for c in calls]
    return next((n for n in range(1, len(same)) if same[-1 - n] != same[-1]), len(same))
