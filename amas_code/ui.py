"""Everything the user sees: one console for output, one for errors, prompts and streaming."""

import difflib
import sys

from rich.console import Console
from rich.markup import escape
from rich.text import Text

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def _say(con: Console, mark: str, style: str, msg: str) -> None:
    con.print(Text.assemble((mark + " ", style), msg), soft_wrap=True)  # Text: "[" is not markup


def info(msg: str) -> None:
    _say(console, "ℹ", "blue", msg)


def success(msg: str) -> None:
    _say(console, "✓", "green", msg)


def warning(msg: str) -> None:
    _say(err_console, "⚠", "yellow", msg)


def error(msg: str) -> None:
    _say(err_console, "✗", "red", msg)


def short(value, limit: int = 200) -> str:
    """One value as text, shortened to limit characters."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} chars)"


def show_tool_call(name: str, args: dict) -> None:
    from rich.panel import Panel

    body = Text()
    for key, value in args.items():
        body.append(f"{key}: ", style="bold").append(short(value) + "\n")
    body.rstrip()
    console.print(Panel(body if body else Text("(no arguments)"), title=f"[cyan]{name}", expand=False))


def show_result(text: str) -> None:
    console.print(Text("  → " + short(text.split("\n", 1)[0], 120), style="dim"))


def show_diff(old: str, new: str, path: str) -> None:
    from rich.syntax import Syntax

    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{path}", f"b/{path}", lineterm="")
    diff = "\n".join(lines)
    console.print(Syntax(diff or f"(no changes to {path})", "diff", theme="ansi_dark", background_color="default"))


def confirm(question: str) -> str:
    """Ask y/n/a; without a terminal to ask on, decline and say so."""
    if not sys.stdin.isatty():
        warning(f"{question} declined: no terminal to ask on (run with --yes to accept)")
        return "n"
    while True:
        answer = console.input(f"[bold]{escape(question)}[/] \\[y]es/\\[n]o/\\[a]lways: ").strip().lower()
        if answer[:1] in ("y", "n", "a"):
            return answer[:1]


def show_response(text: str) -> None:
    from rich.markdown import Markdown

    if text.strip():
        console.print(Markdown(text))


def show_summary(actions: list[tuple[str, str, str]]) -> None:
    from rich.table import Table

    table = Table("tool", "target", "result", title="This turn", title_justify="left")
    for tool, target, result in actions:
        table.add_row(tool, short(target, 60), short(result.splitlines()[0] if result else "", 60))
    console.print(table)


class Stream:
    """Show a reply as it streams: a spinner, then the last lines of text, then markdown."""

    TAIL = 12  # lines kept on screen while streaming, so a long answer never re-renders whole

    def __init__(self, live: bool = True):
        self.text, self.live, self.show_live = "", None, live

    def __enter__(self):
        if console.is_terminal and self.show_live:
            from rich.live import Live
            from rich.spinner import Spinner

            self.live = Live(Spinner("dots", "thinking…"), console=console, transient=True,
                             refresh_per_second=8)
            self.live.start()
        return self

    def __call__(self, chunk: str) -> None:
        self.text += chunk
        if self.live:
            self.live.update(Text("\n".join(self.text[-4000:].splitlines()[-self.TAIL:])))  # O(1) a token

    def __exit__(self, *exc) -> None:
        if self.live:
            self.live.stop()
        show_response(self.text)
