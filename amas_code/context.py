"""What the model sees besides the conversation: the system prompt (prompt.md, text-tool
instructions, rules, skills, the ranked project map) kept in budget, and the token estimates that
size it."""

import json
import re
from pathlib import Path

from amas_code import effects, home, memory, project, providers, repomap, skills, ui

PROMPT_BUDGET = 2000  # tokens of system prompt; the project map gets what the rest leaves
MEMORY_SHARE = 8  # the memory's notes get an eighth of the system prompt's budget
LISTED = 10_000  # files past the listing counted, at most (a huge tree is not walked whole)
ROOMY = 16_000  # tokens of context from which the web's and the browser's tools are offered
RULES_BUDGET = 500  # tokens of rules.md and AGENTS.md, so the map keeps a useful share
# the map sizes itself by its own estimate (0.92-1.02 of real counts), kept within the budget by a
# margin rather than a tokenizer's count (tiktoken's encoding costs 35 MB)
MAP_MARGIN = 0.95
CHARS_PER_TOKEN = providers.CHARS_PER_TOKEN  # a rough, high-side estimate without a tokenizer
estimate = providers.estimate  # tokens without a tokenizer: the one estimate amas makes
SUMMARY_TOKENS = 1500  # cap on a compaction summary
PLANNING = (
    "\n## Plan mode\nYou are in plan mode: look, think and propose; change nothing. You have the "
    "reading tools, and commands run with the project read-only (tests and linters still run). "
    "Your answer is the plan: the steps, the files each one changes, and how to check the result. "
    "The user leaves plan mode to have it carried out.\n"
)
SUMMARIZE = (
    "Summarize this conversation between a user and a coding agent for the agent's own memory: the "
    "goals, decisions, files touched and their state, commands run and results, and open problems. "
    "Be concise and concrete; keep paths, names and numbers exact."
)


# the verbs of a request for a change ("fix the bug", "find the bug and fix it"); a question asks
# for none
CHANGE = re.compile(
    r"(?i)\b(?:add|fix|make|change|rename|update|implement|create|write|remove|delete|refactor|"
    r"replace|move|convert|rewrite|correct|edit)\b"
)
FENCE = re.compile(r"^\s*```", re.M)


def shown_not_made(said: str, latest: str) -> bool:
    """Whether an answer shows code (a fenced block) for a request that asked for a change: a
    small model's way of answering without making it."""
    asked = CHANGE.search(latest) and not latest.rstrip().endswith("?")
    return bool(FENCE.search(said) and asked)


def _listing(files, room: float) -> str:
    """The project's files, one a line, as many as room tokens hold; how many more, if any."""
    shown = []
    left = room * CHARS_PER_TOKEN
    more = 0
    for path in files:
        if more or len(path) + 1 > left:
            more += 1
        else:
            shown.append(path)
            left -= len(path) + 1
        if more == LISTED:  # a huge tree: counted no further
            break
    if more == LISTED:
        shown.append(f"(over {LISTED:,} more files: list_files shows them)")
    elif more:
        shown.append(f"({more} more files: list_files shows them)")
    return "\n".join(shown)


def last_result(messages: list[dict]) -> str | None:
    """The latest tool result in the conversation, as the model read it."""
    return next((m["content"] for m in reversed(messages) if m["role"] == "tool"), None)


def last_user(messages: list[dict]) -> str:
    """The user's latest words (not a tool result sent as text, not a summary)."""
    said = [
        m["content"] for m in messages if m["role"] == "user" and isinstance(m.get("content"), str)
    ]
    return next((s for s in reversed(said) if not s.startswith(("<tool_response", "[Summary"))), "")


class Context:
    """The system prompt of one project's conversation, and its token budget."""

    def __init__(self, root: Path, config: dict, model: providers.Model, warn):
        self.root = root
        self.config = config
        self.model = model
        self.warn = warn  # a warning on screen and in the report
        self.cwd = Path.cwd().resolve()  # where the user is
        # what steers amas there, read once: what trust digests is what the prompt carries (a
        # command that changes AGENTS.md or its link changes nothing before the next start)
        self.steering = home.steering_files(root)
        self.trusted = home.trusted(root, self.steering)  # its rules and skills may steer the model
        memory.expire(root)  # a short-term note whose day has passed goes at start
        self.warned = set()
        prompt = (Path(__file__).parent / "prompt.md").read_text(encoding="utf-8")
        self.prompt = re.split(r"<!-- \w+ -->\n", prompt)  # its core, browsing and rules parts

    def tokens(self, messages: list[dict], near: int = 0) -> int:
        """Tokens in messages: estimated, and counted exactly (litellm, tiktoken: +35 MB) only when
        the estimate is past 60 % of `near` and the model's path has a tokenizer."""
        guess = estimate(json.dumps(messages))
        if guess < near * 0.6:
            return guess
        counted = self.model.count_tokens(messages)
        return guess if counted is None else counted

    def limit(self) -> int:
        """Tokens the conversation may take: the context, less room for the answer."""
        context = self.model.context_limit()
        return context - min(self.config.get("max_tokens") or 0, context // 4)

    def offered(self, tools) -> list[dict]:
        """The tools' schemas offered to the model: the web's and the browser's only where the
        context has room for them (a small local model pays for every token of the first request:
        Qwen2.5-Coder-1.5B read 1,661 of them at 15-26 a second on two cores)."""
        return tools.schemas(web=self.limit() >= ROOMY)

    def budget(self) -> int:
        """Tokens of system prompt: PROMPT_BUDGET, less in a small context (the map shrinks)."""
        return min(PROMPT_BUDGET, self.limit() // 8)

    def system_prompt(self, tools, latest: str) -> str:
        """The notes' template, text-tool instructions when needed, rules, skills,
        then the ranked project map."""
        core, browsing, rules = self.prompt
        offered = self.offered(tools)
        head = core + "\n" + rules
        if any(t["function"]["name"] == "navigate" for t in offered):
            head = core + "\n" + browsing + "\n" + rules
        head += self.model.tool_prompt(offered)
        if tools.planning:
            head += PLANNING
        tail = f"\n## Context & Rules\nProject root: {self.root}\n{self.where()}"
        tail += self.rules() + self.skills(latest)
        tail += memory.prompt(self.root, latest, self.budget() // MEMORY_SHARE)
        room = (self.budget() - estimate(head + tail)) * MAP_MARGIN
        return head + tail + self.project(latest, tools.touched, room)

    def project(self, latest: str, touched: set[str], room: float) -> str:
        """The project for the prompt in room tokens: its ranked map, or where `amas init` never
        made one, its files (a small model that sees no file name invents one)."""
        if room <= 50:
            return ""
        found = repomap.prompt_map(self.root, latest, touched, room)
        if found:
            return f"\n### Project map\n{found}\n"
        cut = len(str(self.root)) + 1  # the paths as the project names them
        files = (path[cut:] for path in project.project_files(self.root, self.config["ignore"]))
        listed = _listing(files, room)
        if listed:
            return f"\n### Project files\n{listed}\n"
        return ""

    def where(self) -> str:
        """The folder the user is in, when it is not the root: the paths they type start there."""
        if self.cwd == self.root or not self.cwd.is_relative_to(self.root):
            return ""
        here = self.cwd.relative_to(self.root).as_posix()
        return f"The user is in {here}/ (paths they mention are relative to it)\n"

    def rules(self) -> str:
        text = ""
        if self.trusted:
            text = skills.rules(self.steering)
        if estimate(text) > RULES_BUDGET:
            text = (
                text[: RULES_BUDGET * 3] + "\n[cut here: the rest did not fit in the system prompt]"
            )
            self.warn_once(
                "AGENTS.md and .amas/rules.md are too long: the model sees the first "
                f"~{RULES_BUDGET} tokens (keep them short, or move detail into skills)"
            )
        return f"\n### Project rules\n{text}\n" if text else ""

    def skills(self, latest: str) -> str:
        found = skills.load(self.root, self.trusted, self.steering)
        matched = [s for s in found if skills.matches(s, latest)]
        others = "\n".join(f"- {s['name']}: {s['description']}" for s in found if s not in matched)
        text = "".join(f"\n### Skill: {s['name']}\n{s['body']}\n" for s in matched)
        return text + (
            f"\n### Other skills (mention one by name to load it)\n{others}\n" if others else ""
        )

    def warn_once(self, message: str) -> None:
        if message not in self.warned:
            self.warned.add(message)
            self.warn(message)

    # -- when the conversation outgrows the context ------------------------------------------------
    def summary(self, old: list[dict]) -> list[dict]:
        """The messages that stand for `old`:
        the model's summary of them, and a reply that takes it."""
        transcript = "\n\n".join(
            f"{m['role']}: {m.get('content') or ''} {m.get('tool_calls', '')}"[:4000] for m in old
        )
        # its head and its end, in what the context leaves beside the instructions and the summary
        room = self.model.context_limit() - SUMMARY_TOKENS - estimate(SUMMARIZE) - 100
        transcript = effects.cap(transcript, max(room, 500) * CHARS_PER_TOKEN)
        config = {**self.config, "max_tokens": SUMMARY_TOKENS}
        summarizer = providers.Model(config, self.model.usage, self.model.known)
        asked = [{"role": "system", "content": SUMMARIZE}, {"role": "user", "content": transcript}]
        with ui.Stream(self.config["stream"]):
            said = summarizer.complete(asked)
        return [
            {
                "role": "user",
                "content": f"[Summary of the earlier conversation]\n{said['content']}",
            },
            {"role": "assistant", "content": "Understood. I will continue from that summary."},
        ]

    def shrink(self, messages: list[dict]) -> int:
        """When the latest turn alone is too long: its longest tool results cut to a share of the
        context; how many."""
        share = max(2000, self.limit() // 4) * 3
        long = [m for m in messages if m["role"] == "tool" and len(m["content"]) > share]
        for m in long:
            m["content"] = effects.cap(m["content"], share)
        if long:
            self.warn(
                f"cut {ui.plural(len(long), 'long tool result')} "
                "so the conversation fits the context"
            )
        return len(long)
