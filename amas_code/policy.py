"""Policy: the gate that judges effects (allow, ask or deny), shell rules, paths and hosts; pure, it
never talks to the person."""

import fnmatch
import functools
import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from amas_code import home, project, ui, webproxy
from amas_code.effects import ALLOW, Change, Command, Verdict
from amas_code.redact import CREDENTIALS, TOOLCHAINS

GRANTS = {  # what a grant lets a command do, in amas's words, for one run
    "network": "the network (still in the box)",
    "repository": "the repository writable for a commit: objects, refs, logs, index and HEAD "
    "(its config, hooks and the rest stay read-only)",
    "folder": "one folder outside the project writable (still in the box)",
}
# a question's kind: whether --yes answers it (yes), and what an 'always' covers ("": none)
KINDS = {
    "edit": (True, "the rest of this session's edits"),
    "shell": (True, "this exact command in this project, from now on; /permissions lists it"),
    "read": (True, "reads outside the project, this session"),
    "net": (True, "this site, from now on"),
    "many": (True, ""),  # many tool calls in one reply
    "grant": (False, ""),  # one more run with one capability beyond the box: never remembered
    "unboxed": (False, ""),  # a command where no sandbox can run
    "write": (False, ""),
    "secret": (False, ""),
    "copy": (False, ""),  # a checkpoint that would copy more than checkpoint_max_mb
    # a command given longer than shell_timeout, the ceiling set in the config
    "timeout": (False, ""),
    # a note stored in or forgotten from the user's memory: it steers later sessions
    "memory": (False, ""),
}
MEMORY = {  # the memory tool's changes, and the question each asks
    "remember": "Keep this note for later sessions (they will follow it)?",
    "forget": "Forget these notes?",
}
# what a yes for this session covers, where a kind offers one besides 'always'
SESSION = {"shell": "this exact command, until amas exits"}
# said with each change to what steers: why it is asked even under --yes or after 'a'
STEERS = "It steers amas or your tools (their hooks, tasks or rules): asked every time."
# run the words after them; a word of theirs holding a space is run as a line (`flock -c`)
WRAPPERS = set(
    "env command builtin exec nohup nice time timeout xargs sudo doas su setsid stdbuf find "
    "busybox unbuffer watch parallel ionice flock chrt taskset nsenter unshare chroot runuser "
    "systemd-run torsocks proxychains strace ltrace firejail script pkexec trap coproc".split()
)
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "fish", "eval"}  # run a string: parsed again
READERS = SHELLS | {".", "source"}  # without -c: run what they read
PLAIN = set(  # the grammar's nodes a plain line holds: simple commands, pipes, lists, redirections
    "program list pipeline command command_name word raw_string string string_content "
    "concatenation number simple_expansion variable_name variable_assignment "
    "variable_assignments redirected_statement file_redirect file_descriptor herestring_redirect "
    "declaration_command unset_command comment".split()
)
COMMANDS = {"command", "declaration_command", "unset_command", "variable_assignments"}
# bash's reserved words: a command the grammar named after one
# (`coproc x { …; }`) is no plain command
RESERVED = set(
    "if then elif else fi for while until do done case esac function select coproc "
    "{ } [[ ]] !".split()
)
# what bash may still expand in a word once its quotes are gone: substitutions; $[ ${ $' $"; a
# subscript, evaluated as arithmetic (`printf -v a[…]`)
HIDDEN = re.compile(r"`|\$[(\[{'\"]|[<>]\(|\w\[")
ESCAPED = re.compile(r"\\(.)", re.S)  # a backslash and the character it keeps as it is


@dataclass
class Line:
    """A shell line as the grammar reads it: every simple command in it (nested ones too), the
    targets of its redirections, what it feeds commands (here-strings and documents), whether the
    parser read it whole, and whether it is plain (no substitution, subshell, group, compound
    command or newline)."""

    commands: list[list[str]] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    fed: list[str] = field(default_factory=list)
    whole: bool = True
    plain: bool = True


@functools.cache
def _parser():
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


@functools.lru_cache(maxsize=64)
def parse(line: str) -> Line:
    """The line's commands, redirections and shape, from bash's grammar (tree-sitter-bash). Cached:
    treat the result as read-only."""
    # a line continuation joins the words around it, even inside a name
    root = _parser().parse(line.replace("\\\n", "").encode(errors="surrogateescape")).root_node
    found = Line(whole=not root.has_error)
    extra = {}  # a command's words the grammar put after a redirection's target (`cp >x a b`)
    stack = [root]
    while stack:
        node = stack.pop()
        _visit(node, found, extra)
        stack.extend(reversed(node.children))
    words = [w for c in found.commands for w in c] + found.targets
    # the words as the command gets them, and the line as written:
    # the grammar reads `$"x"` as `$` and "x"
    hidden = any(HIDDEN.search(w) for w in [*words, line.replace("\\", "")])
    reserved = any(c and c[0] in RESERVED for c in found.commands)
    found.plain = found.plain and found.whole and "\n" not in line and not (hidden or reserved)
    return found


def _visit(node, found: Line, extra: dict) -> None:
    """What one node of the tree adds to the line's reading."""
    if node.is_named and node.type not in PLAIN:
        found.plain = False
    if _bare_assignment(node):
        found.commands.append([_value(node)])
    elif node.type in COMMANDS:
        found.commands.append([*_words(node), *extra.get(node.id, [])])
    elif node.type == "redirected_statement":
        _extra(node, found, extra)
    elif node.type == "file_redirect":
        target = node.child_by_field_name("destination")
        found.targets += [_value(target)] if target is not None else []
    elif node.type == "herestring_redirect" and node.named_children:
        found.fed.append(_value(node.named_children[-1]))
    elif node.type == "heredoc_body":
        found.fed.append(_value(node))


def _bare_assignment(node) -> bool:
    """`PATH=.` alone is a command of its own (it changes what the next one runs)."""
    if node.type != "variable_assignment":
        return False
    return node.parent is None or node.parent.type not in ("command", *COMMANDS)


def _words(node) -> list[str]:
    """A simple command's words, quotes removed (its assignments too, its redirections not)."""
    children = [
        c for i, c in enumerate(node.children) if node.field_name_for_child(i) != "redirect"
    ]
    # `export`, `local`, `unset`: the keyword is a word too
    return [_value(c) for c in children if c.type != "comment" and (c.is_named or c.type.isalpha())]


def _extra(node, found: Line, extra: dict) -> None:
    """The grammar reads `cp >x a b` as a redirection to x, a and b:
    a and b are the command's words."""
    body = node.child_by_field_name("body")
    words = []
    for redirect in node.children_by_field_name("redirect"):
        words += [_value(d) for d in redirect.children_by_field_name("destination")[1:]]
    if body is not None and body.type == "command":
        extra[body.id] = words
    elif words:
        found.commands.append(words)


def _value(node) -> str:
    """A word as the command receives it, where the line says it: quotes and escapes removed; one
    holding an expansion keeps its text (`$HOME/bin`)."""
    text = node.text.decode(errors="surrogateescape")
    if node.type == "raw_string":
        return text[1:-1]
    if node.type == "word":
        return ESCAPED.sub(r"\1", text) if "\\" in text else text
    literal = all(c.type in ('"', "string_content") for c in node.children)
    if node.type == "string" and literal:
        return re.sub(r'\\([$`"\\])', r"\1", text[1:-1])
    if node.type in ("concatenation", "command_name"):
        return "".join(_value(c) for c in node.children)
    return text


def split(line: str) -> tuple[list[list[str]], list[str], bool]:
    """The simple commands of a line, its redirection targets, and whether it is plain: read whole,
    with no substitution, subshell, group, compound command or newline (only a plain line can match
    an allow rule)."""
    found = parse(line)
    return [list(c) for c in found.commands], list(found.targets), found.plain


def programs(line: str) -> list[str]:
    """The program of each simple command of a line, in order, once each (assignments skipped)."""
    found = []
    for words in parse(line).commands:
        named = _unassigned(list(words))
        if named and named[0] not in found:
            found.append(named[0])
    return found


def every_command(line: str, depth: int = 0) -> list[list[str]]:
    """Every command a line may run, for deny rules: each simple command wherever the grammar finds
    it (groups, subshells, substitutions, conditions, functions), what it wraps, and the echo/printf
    text, here-string or redirected file a shell of the line may read as commands."""
    found = parse(line)
    commands = [list(c) for c in found.commands]
    if not found.whole:  # what the parser could not place still counts, split at the operators
        commands += [p.split() for p in re.split(r"[;&|(){}!`\n]", line) if p.split()]
    every = [v for c in commands for v in variants(c, depth)]
    reads = any(v[0].rsplit("/", 1)[-1] in READERS and not _dash_c(v) for v in every)
    if not reads or depth >= 4:
        return every
    # a shell reading its input: what the line echoes (all its words, and each) may be its commands
    echoed = [c[1:] for c in commands if c and c[0] in ("echo", "printf")]
    fed = [" ".join(w) for w in echoed] + [w for words in echoed for w in words]
    for text in fed + found.fed + found.targets:
        every += every_command(text, depth + 1)
    return every


def variants(words: list[str], depth: int) -> list[list[str]]:
    """A command and those it runs: assignments dropped, wrappers (env, sudo, xargs, find -exec ...)
    peeled, `sh -c`, `eval` and `git -c alias.x=!…` strings parsed again."""
    words = _unassigned(words)
    if not words or depth > 4:
        return [words] if words else []
    name = words[0].rsplit("/", 1)[-1]
    # what a wrapper runs starts at one of its words:
    # each is tried once (not each of each: n², not n!)
    tails = [_unassigned(words[i:]) for i in range(1, len(words))] if name in WRAPPERS else []
    found = [tail for tail in [words, *tails] if tail]
    return found + [v for tail in found for v in _strings(tail, depth)]


def _unassigned(words: list[str]) -> list[str]:
    """The words from the program on: `A=1 B=2 rm` is rm."""
    start = next((i for i, w in enumerate(words) if not re.match(r"^\w+=", w)), len(words))
    return words[start:]


def _strings(words: list[str], depth: int) -> list[list[str]]:
    """The commands in the strings a command runs as a line: `sh -c`, `eval`, a runner's
    (`flock x -c 'rm …'`, `watch 'rm …'`, `env -S 'rm …'`, `trap 'rm …' EXIT`), a git alias; and
    `git -C . push` as `git push`."""
    name = words[0].rsplit("/", 1)[-1]
    inner = [" ".join(words[1:])] if name == "eval" else []
    spaced = [w for w in words[1:] if name in WRAPPERS and re.search(r"\s", w)]
    inner += [w.removeprefix("-S").removeprefix("--split-string=") for w in spaced]
    if name in SHELLS and _dash_c(words):  # `sh -c -- '…'` too
        inner += [w for w in words[1:] if not w.startswith("-")]
    inner += [
        w.split("=!", 1)[1] for w in words if name == "git" and re.match(r"alias\.[^=]*=!", w)
    ]
    git = [["git", *_git_command(words[1:])]] if name == "git" else []
    return git + [v for text in inner for v in every_command(text, depth + 1)]


def _dash_c(words: list[str]) -> bool:
    """A shell given its commands as a string (-c, -ec, -xc…), not on its input."""
    return any(re.fullmatch(r"-\w*c\w*", w) for w in words[1:])


def _git_command(words: list[str]) -> list[str]:
    """git's words from its subcommand on, past its own options
    (-C dir, -c name=value, --git-dir=…, -P)."""
    while words and words[0].startswith("-"):
        words = words[2:] if words[0] in ("-C", "-c") else words[1:]
    return words


def _parts(words: list[str]) -> tuple[str, set, str]:
    flags = {f"-{c}" for w in words[1:] if re.fullmatch(r"-\w+", w) for c in w[1:]}
    flags |= {w.split("=")[0] for w in words[1:] if w.startswith("--") and len(w) > 2}
    return (
        words[0].rsplit("/", 1)[-1],
        flags,
        " ".join(w for w in words[1:] if not w.startswith("-")),
    )


def denied(words: list[str], rule: str) -> bool:
    """A deny rule matches whatever the flag order, spelling (-rf, -fr, -r -f) or path of the
    program; a program named by a glob (`/bin/r?`) matches what the glob finds, one named by a
    variable or substitution any rule."""
    pattern = next(iter(parse(rule).commands), None) or [rule]
    (name, flags, rest) = _parts(words)
    (want, need, args) = _parts(pattern)
    # -R as -r, --force as -f
    flags |= {f.lower() for f in flags} | {f"-{f[2].lower()}" for f in flags if f.startswith("--")}
    # more or none
    fits = any(fnmatch.fnmatchcase(rest, a) for a in (args, f"{args} *", args.removesuffix(" *")))
    unknown = "$(" in words[0] or "`" in words[0] or "$" in name  # `$HOME/bin/tool` is tool
    named = unknown or fnmatch.fnmatchcase(name, want) or fnmatch.fnmatchcase(want, name)
    return named and need <= flags and fits


def _in_git(rel: Path) -> bool:
    """A path inside a .git folder, however its case is written
    (one folder on macOS's and Windows' disks)."""
    return ".git" in {part.lower() for part in rel.parts}


class Gate:
    """Pure policy: what may happen unasked, what must be asked, what is refused, and what the user
    allowed always. It never talks to the person: the agent asks and tells it the answer."""

    def __init__(self, config: dict, root: Path, sandbox: str = "on"):
        self.config = config
        self.root = Path(root).resolve()
        self.always = set()
        self.last = None  # (command line, decision, what decided it, in words)
        self.sandbox = sandbox
        saved = home.remembered(self.root)
        self.commands = list(saved.get("commands", []))
        self.for_session = []  # commands allowed until amas exits ([s]ession)
        self.hosts = set(saved.get("hosts", []))
        self.scripts = dict(saved.get("scripts", {}))  # a remembered command -> the script it ran

    def settled(self, verdict: Verdict) -> Verdict:
        """An ask that --yes or an earlier 'always' answers is an allow."""
        if verdict.decision != "ask":
            return verdict
        auto = KINDS[verdict.kind][0] and self.config.get("auto_accept")
        if auto or (verdict.kind, verdict.key) in self.always:
            self._answered(verdict.key)
            return ALLOW
        return verdict

    def _answered(self, key: str) -> None:
        """/permissions says which answer let the command it lists as last run."""
        if not self.last or self.last[0] != key:
            return
        by = "by your answer for this session"
        if key not in self.for_session:
            by = "by an earlier answer or --yes"
        self.last = (key, "allow", by)

    def judge(self, effect: Change | Command) -> Verdict:
        """The verdict on an effect a tool returned."""
        if isinstance(effect, Command):
            return self.settled(self.judge_command(effect))
        return self.settled(self.judge_change(effect))

    def judge_change(self, change: Change) -> Verdict:
        path = change.path
        name = project.shown(self.root, change.path)
        if change.verb in MEMORY:  # the memory tool's own file in ~/.amas: asked every time
            return Verdict("ask", "memory", MEMORY[change.verb])
        place = self.where(path, write=True)
        if place:
            kind = "secret" if "credentials" in place else "write"
            reason = f"access to {path} ({place})"
            return Verdict("ask", kind, f"Write {path} ({place})?", reason=reason)
        if project.steers(self.root, path, project.git_places(self.root)[2]):
            # what amas or the user's tools run or obey (hooks, editor tasks, rules): asked every
            # time, never by --yes or an 'always', and no without a terminal
            reason = f"a change to {name}, which steers amas or your tools"
            return Verdict(
                "ask", "write", f"{change.verb.capitalize()} {name}? {STEERS}", reason=reason
            )
        if change.verb == "screenshot" and change.old is None:
            return ALLOW  # a new picture in the project: nothing of the user's is replaced
        if change.verb == "screenshot":
            return Verdict("ask", "edit", f"Replace {name} with a screenshot?")
        return Verdict("ask", "edit", f"Apply {change.verb} to {name}?")

    def judge_command(self, command: Command) -> Verdict:
        line = command.line
        for words in every_command(line):
            rule = next((r for r in self.deny_rules() if denied(words, r)), None)
            if rule:
                self.last = (line, "deny", f"by {rule!r}")
                reason = f"command refused by the deny rule {rule!r} in permissions"
                return Verdict("deny", reason=reason)
        if command.timeout > self.config["shell_timeout"]:
            return self.judge_timeout(command)
        if self.sandbox == "unavailable":  # no box: every command asked, allow rules and --yes off
            self.last = (line, "ask", "(no sandbox)")
            return Verdict("ask", "unboxed", f"Run `{line}` (no sandbox)?", key=line)
        rule = self.allowed_by(line)
        if rule:
            self.last = (line, "allow", f"by {rule!r}")
            return ALLOW
        self.last = (line, "ask", "")
        return Verdict("ask", "shell", f"Run `{line}`?", key=line)

    def judge_timeout(self, command: Command) -> Verdict:
        """shell_timeout is the ceiling the model cannot lift: a longer time is the person's to
        give, in a terminal (never --yes, never an allow rule); without one the command is
        refused."""
        line = command.line
        self.last = (line, "ask", "(a timeout above shell_timeout)")
        ceiling = self.config["shell_timeout"]
        asked = f"a timeout of {command.timeout:g}s"
        question = f"Run `{line}` with {asked}, above shell_timeout ({ceiling:g}s)?"
        reason = f"{asked} (the most a call may take unasked, shell_timeout, is {ceiling:g}s)"
        return Verdict("ask", "timeout", question, key=line, reason=reason)

    def judge_grant(self, line: str, capability: str) -> Verdict:
        """One more run of a command with one capability beyond the box: always asked, in amas's
        words (never settled by --yes, allow rules or an earlier answer)."""
        question = f"Run `{line}` again once with {GRANTS[capability]}?"
        return Verdict("ask", "grant", question, key=line)

    def deny_rules(self) -> list[str]:
        return self.config["permissions"].get("deny", [])

    def allowed_by(self, line: str) -> str | None:
        """The allow rules that match every simple command of a plain line, or None."""
        commands, targets, plain = split(line)
        mine = self.config["permissions"].get("allow", [])
        matched = [_first_match(" ".join(c), [*mine, *self.unchanged(c)]) for c in commands]
        named = not any(re.search(r"\s", c[0]) for c in commands)  # `'echo /../bin/sh'` is not echo
        # an argument reaching out: --basetemp=.git, --output-file ~/.bashrc
        reach = [w for c in commands for w in c[1:] if self.reaches(w)]
        fits = plain and commands and all(matched) and named
        if fits and not reach and all(map(self.inside, targets)):
            return ", ".join(dict.fromkeys(matched))
        return None

    def granted(self, verdict: Verdict, always: bool = False, session: bool = False) -> str:
        """The user said yes: for this once; for this session (session: the exact command, where
        the kind offers it); or always (for the rest of the session, and a plain command or a
        host in the user's home too). Returns a note for the user
        when 'always' could not be kept."""
        if verdict.kind == "net":
            self.hosts.add(verdict.key)  # asked once a session
        if session and SESSION.get(verdict.kind):
            self.always.add((verdict.kind, verdict.key))
            self.for_session.append(verdict.key)
        if not always or not KINDS[verdict.kind][1]:  # a kind without 'always' keeps no answer
            return ""
        self.always.add((verdict.kind, verdict.key))
        if verdict.kind == "shell":
            return self.remember_command(verdict.key)
        if verdict.kind == "net" and _local(urlsplit(verdict.key).hostname or ""):
            self.always.discard((verdict.kind, verdict.key))  # asked again, every session
            return f"not remembered: {verdict.key} is on this machine or a private network"
        if verdict.kind == "net":
            saved = home.remembered(self.root).get("hosts", [])
            home.remember(self.root, "hosts", sorted({*saved, verdict.key}))
        return ""

    def unchanged(self, words: list[str]) -> list[str]:
        """The remembered commands, but one
        whose script (./run.sh, make's Makefile) changed since."""
        digest = script_digest(words, self.root)
        return [c for c in self.commands if self.scripts.get(c, "") == digest]

    def remember_command(self, line: str) -> str:
        commands, _, plain = split(line)
        if not plain:
            return (
                "not remembered: a line with substitutions, subshells or newlines "
                "is asked every time"
            )
        # the exact commands, glob characters escaped,
        # kept in the user's home with the script each runs
        for words in commands:
            exact = glob.escape(" ".join(words))
            self.commands.append(exact)
            self.scripts[exact] = script_digest(words, self.root)
        home.remember(self.root, "commands", self.commands)
        home.remember(self.root, "scripts", self.scripts)
        return ""

    def forget(self, what: str) -> list[str]:
        """Forget remembered commands and hosts, and commands allowed for this session: the one
        named (a command as /permissions lists it, or a host), or all of them;
        what was forgotten."""
        commands = [c for c in self.commands if what in ("all", c)]
        hosts = sorted(h for h in self.hosts if what in ("all", h))
        commands += [c for c in self.for_session if what in ("all", c) and c not in commands]
        self.for_session = [c for c in self.for_session if c not in commands]
        self.commands = [c for c in self.commands if c not in commands]
        self.scripts = {c: d for c, d in self.scripts.items() if c in self.commands}
        self.hosts -= set(hosts)
        self.always = {(kind, key) for kind, key in self.always if key not in [*commands, *hosts]}
        saved = home.remembered(self.root).get("hosts", [])
        home.remember(self.root, "commands", self.commands)
        home.remember(self.root, "scripts", self.scripts)
        home.remember(self.root, "hosts", [h for h in saved if h not in hosts])
        return [*commands, *hosts]

    def inside(self, target: str) -> bool:
        """A redirection target that stays in the project and out of .git (or a file descriptor, or
        /dev/null)."""
        if re.fullmatch(r"\d+|-|/dev/null", target):
            return True
        if re.search(r"[*?[]", target):
            # the shell expands it: `.?` may be `..`, `.gi?` `.git`, `l?k` a link out
            return self.globbed(target)
        return self.within(target)

    def within(self, target: str) -> bool:
        """A path, taken as written, that stays in the project and out of .git."""
        try:  # git would run what a write into .git/config or hooks names
            path = (self.root / target).resolve()
        except (RuntimeError, OSError):  # a symlink loop leads nowhere: the person is asked
            return False
        inside = self.root in path.parents and not _in_git(path.relative_to(self.root))
        return "$" not in target and not target.startswith("~") and inside

    def globbed(self, target: str) -> bool:
        """A glob that stays in the project and out of .git whatever it expands to,
        a file it makes too."""
        dotted = [p.lower() for p in Path(target).parts if p.startswith(".")]  # a dot matches a dot
        reaching = any(fnmatch.fnmatchcase(n, p) for p in dotted for n in ("..", ".git"))
        if target.startswith(("/", "~")) or reaching:
            return False
        folder = [folder] if (folder := os.path.dirname(target)) else []
        # a name found may hold `*` itself: it is taken as written
        found = glob.glob(target, root_dir=self.root)
        return all(map(self.within, found)) and all(map(self.inside, folder))

    def reaches(self, word: str) -> bool:
        """An argument (or an option's value)
        that may name a place outside the project or inside .git."""
        attached = word[2:] if re.match(r"-\w.", word) else ""  # `-t..` is `-t ..`
        values = {word.split("=", 1)[-1], attached}
        return any(
            v and not self.inside(v) and os.path.realpath(self.root / v) != str(self.root)
            for v in values
        )

    def where(self, path: Path, write: bool = False) -> str:
        """Why a path needs a question: credentials, inside .git (for a write),
        outside the project; or ''."""
        secret = [c for c in CREDENTIALS if path.is_relative_to(Path(c).expanduser().resolve())]
        if secret:
            return f"{secret[0]}, which holds credentials"
        if not path.is_relative_to(self.root):
            return _dotted(path) or "outside the project"
        # git runs what its hooks and config name at your next git command,
        # outside every gate of amas
        if write and _in_git(path.relative_to(self.root)):
            return "inside .git"
        return ""

    def judge_path(self, path: Path) -> Verdict:
        """The verdict on reading a path (writes are judged as a Change)."""
        place = self.where(path)
        if not place:
            return ALLOW
        kind = "secret" if "credentials" in place else "read"
        reason = f"access to {path} ({place})"
        return self.settled(Verdict("ask", kind, f"Read {path} ({place})?", reason=reason))

    def judge_host(self, url: str) -> Verdict:
        """Ask before the first request to a host in this session; 'always' remembers it for the
        project."""
        origin = _origin(url)  # scheme, host and port: http://a:80 is not https://a:443
        if origin in self.hosts:
            return ALLOW
        # a name that mixes scripts is shown as its punycode: what it really is
        scheme, _, place = origin.partition("://")
        name, colon, port = place.rpartition(":")
        shown = f"{scheme}://{ui.host(name)}{colon}{port}"
        question = f"Let the agent connect to {shown}?"
        reason = f"connecting to {shown}"
        return self.settled(Verdict("ask", "net", question, key=origin, reason=reason))


def _dotted(path: Path) -> str:
    """A dot-file or dot-folder of the home, where shells and tools keep settings and tokens (but
    the toolchain places), or a folder holding them all: the place to name in the question, or
    ''."""
    home_dir = Path.home().resolve()
    if path == home_dir or path in home_dir.parents:
        return f"outside the project: {path}, which holds your home's dot-files and credentials"
    if not path.is_relative_to(home_dir):
        return ""
    first = path.relative_to(home_dir).parts[0]
    toolchain = any(path.is_relative_to(Path(t).expanduser().resolve()) for t in TOOLCHAINS)
    if not first.startswith(".") or toolchain:
        return ""
    return f"outside the project: ~/{first} in your home, which may hold credentials"


def _first_match(command: str, rules: list[str]) -> str | None:
    return next((r for r in rules if fnmatch.fnmatchcase(command, r)), None)


def _origin(url: str) -> str:
    """scheme://host:port of a URL, the port written out
    (http://a and http://a:80 are one place)."""
    return f"{urlsplit(url).scheme.lower()}://{webproxy.place(url)}"


def _local(host: str) -> bool:
    """A loopback, private or link-local address, or a name that resolves to one."""
    import ipaddress
    import socket

    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return False
    addresses = [ipaddress.ip_address(a.split("%")[0]) for a in found]
    return any(a.is_loopback or a.is_private or a.is_link_local for a in addresses)


INTERPRETERS = {"sh", "bash", "zsh", "dash", "python", "python3", "node", "ruby", "perl", "php"}
BUILD_FILES = {  # a build tool -> the files that say what it runs, first found wins
    "make": ("GNUmakefile", "makefile", "Makefile"),
    "just": ("justfile", "Justfile", ".justfile"),
    "npm": ("package.json",),
    "yarn": ("package.json",),
    "pnpm": ("package.json",),
}


def script_of(words: list[str], root: Path) -> Path | None:
    """The project file a script-like command runs
    (`./run.sh`, `bash x.sh`, `python x.py`, `make x`), if any."""
    if not words:
        return None
    program = os.path.basename(words[0])
    if "/" in words[0]:
        named = words[0]
    elif program.rstrip("0123456789.") in INTERPRETERS:
        named = next((w for w in words[1:] if not w.startswith("-")), "")
    else:
        found = [root / f for f in BUILD_FILES.get(program, ()) if (root / f).is_file()]
        return found[0] if found else None
    path = (root / named).resolve() if named else None
    return path if path and path.is_relative_to(root) and path.is_file() else None


def script_digest(words: list[str], root: Path) -> str:
    """What to store beside a remembered command: a hash of the script it runs ("" when it runs
    none), so the command is asked about again once the script changed."""
    import hashlib

    path = script_of(words, Path(root).resolve())
    return hashlib.sha256(path.read_bytes()).hexdigest() if path else ""
