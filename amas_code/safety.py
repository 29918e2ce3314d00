"""Policy: the effects tools want and the verdicts on them, shell rules, paths, hosts, secrets kept out of
reach."""

import base64
import bisect
import fnmatch
import glob
import math
import os
import re
import shlex
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from urllib.parse import unquote, urlsplit

from amas_code import config as config_file

AUTO = {  # the questions --yes answers (yes), and those it never does
    "edit": True,
    "shell": True,
    "read": True,
    "net": True,
    "many": True,  # many tool calls in one reply
    "outside": False,  # a command again outside the sandbox
    "unboxed": False,  # a command where no sandbox can run
    "write": False,
    "secret": False,
}
ALWAYS = {"edit", "shell", "read", "net", "outside"}  # the questions 'always' may answer
WRAPPERS = set(  # run the words after them
    "env command builtin exec nohup nice time timeout xargs sudo doas su setsid stdbuf find busybox unbuffer "
    "watch parallel ionice flock chrt taskset nsenter unshare chroot runuser systemd-run torsocks proxychains strace "
    "ltrace firejail".split()
)
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "fish", "eval"}  # run a string: parsed again
READERS = SHELLS | {".", "source"}  # without -c: run what they read
RESERVED = set(
    "if then elif else fi for while until do done case esac function select coproc { [[ !".split()
)
CREDENTIALS = (
    "~/.ssh ~/.aws ~/.netrc ~/.config/gh ~/.gnupg ~/.docker ~/.kube ~/.amas ~/.git-credentials ~/.config/gcloud "
    "~/.azure ~/.npmrc ~/.pypirc ~/.password-store ~/.local/share/keyrings /proc /sys /dev /etc/shadow /etc/sudoers "
    "/etc/ssh ~/.pgpass ~/.my.cnf ~/.vault-token ~/.config/rclone ~/.config/git/credentials "
    "~/.terraform.d/credentials.tfrc.json ~/.cargo/credentials ~/.cargo/credentials.toml "
    "~/.config/containers/auth.json ~/.m2/settings.xml ~/.gradle/gradle.properties "
    "~/.bash_history ~/.zsh_history ~/.local/share/fish ~/.psql_history ~/.mysql_history ~/.python_history"
).split()
# a secret name, by word: GIT_AUTHOR_NAME, KEYBOARD, TOKENIZERS_PARALLELISM and PWD name no secret
SECRET_NAME = re.compile(
    r"PASSWORD|PASSWD|PASSPHRASE|SECRET|(?<!TIK)TOKENS?(?:_|$)|(?<=_)PWD$"  # not TIKTOKEN_CACHE_DIR
    r"|(?:^|_)(?:KEYS?|PASS|CREDS?|CREDENTIALS?|AUTH|AUTHORIZATION|COOKIES?|PRIVATE)(?:_|$)"
    r"|(?:API|ACCESS|PRIVATE|AUTH|SESSION|SIGNING|MASTER|ENCRYPTION)_?KEY",
    re.I,
)
REFERENCE = re.compile(  # a value kept elsewhere, named here: ${VAR} $(cmd) {{ x }} <token> os.environ[...] %(x)s
    r"\$\{|\$\(|\{\{|\{%|<[^<>]*>|^\[[\w -]*\]$|^\{\w+\}$|%\(\w+\)|^\$\w+$"
    r"|\b(?:os\.environ|getenv|process\.env|ENV\[|secrets\.|vars\.)"
)
PLACEHOLDERS = set(  # words that stand in for a value (gitleaks' allow-lists hold the like)
    "secret secrets password passwd pass pwd changeme change example sample test testing dummy fake placeholder "
    "your my none null nil empty todo tbd redacted hidden masked insert here xxx foo bar baz qux demo default "
    "token key apikey value mypassword yourpassword".split()
)
URL_CREDENTIALS = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)([^\s@/]+)(?=@)", re.I)
SHAPES = {  # well-known token shapes (after gitleaks' rules), each run only when one of its cheap markers appears
    (
        "PRIVATE KEY",
    ): r"-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)",
    ("sk-", "rk-", "pk-"): r"\b(?:sk|rk|pk)-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}",
    ("_live_", "_test_"): r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",
    (
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
    ): r"\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_\w{30,}",
    (
        "glpat-",
        "xox",
        "AKIA",
        "ASIA",
        "AIza",
        "hf_",
        "npm_",
    ): r"\bglpat-[\w-]{20,}|\bxox[abposr]-[\w-]{10,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\bAIza[\w-]{35}|\bhf_[A-Za-z0-9]{30,}|\bnpm_[A-Za-z0-9]{36}",
    ("eyJ",): r"\beyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}",  # a JSON web token
    # a key's body, alone
    ("",): r"(?m)^[-+ ]?[A-Za-z0-9+/]{60,80}={0,2}(?:\n[-+ ]?[A-Za-z0-9+/]{8,80}={0,2}$){2,}",
}
KEY_LINE = re.compile(r"-----(?:BEGIN|END)[A-Z ]*PRIVATE KEY-----")
# NAME=value, hidden when the name is secret
EXPORTED = re.compile(r"\b([A-Z][A-Z0-9_]*=[\"']?)([^\s\"']+)")
ASSIGNED = re.compile(  # key: "value" (YAML, JSON, TOML, code); unquoted in YAML; a line `db_password = v4lue`
    # (ini, .env, properties: a value with a digit or a symbol, so `key = other_name` in code stays); netrc; HTTP
    r"((?:api[_-]?key|secret|token|passw(?:or)?d|pwd|auth\b|(?<![a-z])pass\b)[\w.-]*[\"']?\s*[:=]\s*([\"']))"
    r"[^\"'\s]{4,}(?=\2)"
    r"|((?:api[_-]?key|secret|token|password)[\w.-]*[ \t]*:[ \t]*)[^\s\"'#]{6,}$"
    r"|(^[ \t]*(?:export[ \t]+)?[\w.:/-]*(?:key|secret|token|passw(?:or)?d|pwd|credential|auth\b)[\w.-]*[ \t]*=[ \t]*)"
    r"(?=\S*[\d/+!@$%^&*])[^\s\"'#()\[\]{},;]{6,}[ \t]*$"
    r"|((?:^|\blogin[ \t]+\S+)[ \t]*password[ \t]+)(?![=:])\S+"
    r"|(\bauthorization[ \t]*:[ \t]*(?:bearer|basic|token)?[ \t]*)[^\s\"']{8,}"
    r"|(<(?:\w+:)?(?:passw(?:or)?d|secret|token|api[_-]?key|auth)[\w.-]*>)[^<\s]{4,}(?=</)",  # XML
    re.M | re.I,
)


def tokens(line: str) -> list[str] | None:
    """Shell words and operators (quotes removed), or None when the line cannot be read (unbalanced quotes)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>\n")
    lex.whitespace, lex.whitespace_split, lex.commenters = " \t\r", True, ""
    try:
        return list(lex)
    except ValueError:
        return None


def split(line: str) -> tuple[list[list[str]], list[str], bool]:
    """The simple commands of a line, its redirection targets, and whether it is plain: no substitution,
    subshell, group, compound command or newline (only a plain line can match an allow rule)."""
    toks = tokens(line)
    if toks is None:  # split at operators all the same, for deny rules (`:; rm -rf x #'`)
        return [p.split() for p in re.split(r"[;&|()\n]", line) if p.split()], [], False
    # `\$\(` is still a substitution where bash does arithmetic (`printf -v a[…]`)
    bare = line.replace("\\", "")
    hidden = r"`|\$[(\[{'\"]|[<>]\(|\n|\w\["  # substitutions; $[ ${ $' $"; a subscript, evaluated as arithmetic
    commands, targets, words, plain = [], [], [], not re.search(hidden, bare)
    for i, tok in enumerate(toks):
        if i and set(toks[i - 1]) <= set("<>&|") and {"<", ">"} & set(toks[i - 1]):
            targets.append(tok)  # the word after a redirection
        elif set(tok) <= set("<>&|") and {"<", ">"} & set(tok):
            # `2>`: the 2 is no argument
            words = words[:-1] if words and words[-1].isdigit() else words
        elif set(tok) <= set(";&|()<>\n"):
            plain &= not {"(", ")"} & set(tok)
            commands, words = commands + [words] if words else commands, []
        else:
            words.append(tok)
    commands += [words] if words else []
    return commands, targets, plain and not any(c[0] in RESERVED for c in commands)


def every_command(line: str, depth: int = 0) -> list[list[str]]:
    """Every command a line may run, for deny rules: each simple command, what it wraps, substitutions, and the
    echo/printf text or here-string a shell of the line may read as commands."""
    # a line continuation joins the words around it, even inside a name
    line = line.replace("\\\n", "")
    commands, targets, _ = split(line)
    found = [v for c in commands for v in variants(c, depth)]
    reads = any(v[0].rsplit("/", 1)[-1] in READERS and not _dash_c(v) for v in found)
    echoed = [
        c[1:] for c in commands if c[0] in ("echo", "printf")
    ]  # all its words, and each (printf '%s' 'rm …')
    fed = (
        [" ".join(w) for w in echoed] + [w for words in echoed for w in words] + targets
        if reads
        else []
    )
    if depth < 4:  # `...`, and whatever follows $( <( >( up to the end: the parser splits it at ")"
        for part in (
            re.findall(r"`([^`]*)`", line)
            + [line[m.end() :] for m in re.finditer(r"[$<>]\(", line)]
            + fed
        ):
            found += every_command(part, depth + 1)
    return found


def variants(words: list[str], depth: int) -> list[list[str]]:
    """A command and those it runs: assignments dropped, wrappers (env, sudo, xargs, find -exec ...) peeled,
    `sh -c`, `eval` and `git -c alias.x=!…` strings parsed again."""
    while words and re.match(r"^\w+=", words[0]):
        words = words[1:]
    if not words or depth > 4:
        return [words] if words else []
    out, name = [words], words[0].rsplit("/", 1)[-1]
    if name in WRAPPERS:
        out += [v for i in range(1, len(words)) for v in variants(words[i:], depth + 1)]
    inner = [" ".join(words[1:])] if name == "eval" else []
    inner += [
        w.removeprefix("-S").removeprefix("--split-string=")
        for w in words
        if name == "env" and " " in w
    ]
    if name in SHELLS and _dash_c(words):  # `sh -c -- '…'` too
        inner += [w for w in words[1:] if not w.startswith("-")]
    inner += [
        w.split("=!", 1)[1] for w in words if name == "git" and re.match(r"alias\.[^=]*=!", w)
    ]
    # `git -C . push` is `git push`
    out += [["git", *_git_command(words[1:])]] if name == "git" else []
    return out + [v for text in inner for v in every_command(text, depth + 1)]


def _dash_c(words: list[str]) -> bool:
    """A shell given its commands as a string (-c, -ec, -xc…), not on its input."""
    return any(re.fullmatch(r"-\w*c\w*", w) for w in words[1:])


def _git_command(words: list[str]) -> list[str]:
    """git's words from its subcommand on, past its own options (-C dir, -c name=value, --git-dir=…, -P)."""
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
    """A deny rule matches whatever the flag order, spelling (-rf, -fr, -r -f) or path of the program; a program
    named by a glob (`/bin/r?`) matches what the glob finds, one named by a variable or substitution any rule."""
    pattern = tokens(rule) or [rule]
    (name, flags, rest), (want, need, args) = _parts(words), _parts(pattern)
    flags |= {f.lower() for f in flags} | {
        f"-{f[2].lower()}" for f in flags if f.startswith("--")
    }  # -R, --force
    # more or none
    fits = any(fnmatch.fnmatchcase(rest, a) for a in (args, f"{args} *", args.removesuffix(" *")))
    unknown = "$(" in words[0] or "`" in words[0] or "$" in name  # `$HOME/bin/tool` is tool
    named = unknown or fnmatch.fnmatchcase(name, want) or fnmatch.fnmatchcase(want, name)
    return named and need <= flags and fits


class Secrets:
    """Every value that must never reach the model, the screen or the history, and the shapes secrets take."""

    def __init__(self, config: dict):
        keep = set(config["permissions"].get("env", []))
        environ = {
            **os.environ,
            **config.get("env_keys", {}),
        }  # the keys amas took out of its environment
        values = {
            v
            for k, v in environ.items()
            if SECRET_NAME.search(k) and k not in keep and len(v) >= 6 and not placeholder(v)
        }
        values |= {m[2] for v in environ.values() for m in URL_CREDENTIALS.finditer(v)}
        values |= {s for s in config.get("secrets", []) if len(s) >= 6}
        found = [p for v in sorted(values, key=len, reverse=True) for p in self.spellings(v)]
        self.known = re.compile("|".join(found)) if found else None
        self.shapes = {mark: re.compile(pattern) for mark, pattern in SHAPES.items()}

    @staticmethod
    def spellings(value: str) -> list[str]:
        """The value as is, split across lines, reversed, and base64-encoded at any alignment."""
        raw, out = value.encode(), [r"\s*".join(map(re.escape, value)), re.escape(value[::-1])]
        for pad in range(3):
            encoded = base64.b64encode(b"\0" * pad + raw).decode()
            out.append(re.escape(encoded[(8 * pad + 5) // 6 : 8 * (pad + len(raw)) // 6]))
        return [p for p in out if len(p) >= 6]

    def redact(self, text: str) -> str:
        """Text with every secret [REDACTED], its lines kept (line numbers stay true)."""
        keep = lambda m: "[REDACTED]" + "\n" * m[0].count("\n")  # noqa: E731
        if self.known:
            text = self.known.sub(keep, text)
        for marks, pattern in self.shapes.items():
            text = pattern.sub(keep, text) if any(m in text for m in marks) else text
        text = URL_CREDENTIALS.sub(_hidden, text) if "://" in text else text
        words = ("key", "secret", "token", "pass", "pwd", "cred", "auth")
        named = lambda line: any(w in line.lower() for w in words)  # noqa: E731 - a case-blind scan
        lines = EXPORTED.sub(_exported, text).split("\n")  # only lines naming a secret get it
        return "\n".join(ASSIGNED.sub(_assigned, line) if named(line) else line for line in lines)

    def concealed(self, old: str, new: str) -> list[int]:
        """Lines the model writes (not in the old text) where hiding secrets would hide more than a secret: spaces or
        shell characters, which no secret needs (a key block with no END line, `KEY=1;curl …|sh`)."""
        out, known = [], set(old.split("\n"))
        for n, (real, shown) in enumerate(
            zip(new.split("\n"), self.redact(new).split("\n"), strict=False), 1
        ):
            hidden = [value for piece, value in _pieces(real, shown) if piece != value]
            if real not in known and any(
                re.search(r"[\s`;|&<>()]", KEY_LINE.sub("", h)) for h in hidden
            ):
                out.append(n)
        return out

    def parts(self, text: str) -> list[tuple[str, str]]:
        """The text as (shown, real) pieces: the same where visible, [REDACTED] and the value where hidden (the
        lines of a private key, shown empty, go with the [REDACTED] that starts it)."""
        out = []
        for real, shown in zip(text.split("\n"), self.redact(text).split("\n"), strict=False):
            if shown == "" and real and len(out) > 1 and out[-2][0] != out[-2][1]:
                out[-2] = (out[-2][0] + "\n", out[-2][1] + "\n" + real)
            else:
                out += _pieces(real, shown) + [("\n", "\n")]
        return out[:-1]


class Masked:
    """A file as the model sees it and the values hidden behind it: an edit is made on the shown text, where
    [REDACTED] stands for the value at its place, and never changes or reveals a hidden value."""

    def __init__(self, secrets: Secrets, text: str):
        self.secrets, self.text, self.parts = secrets, text, secrets.parts(text)
        self.shown = "".join(shown for shown, _ in self.parts)
        self.starts = list(accumulate((len(shown) for shown, _ in self.parts), initial=0))
        self.reals = list(accumulate((len(real) for _, real in self.parts), initial=0))

    def find(self, old: str) -> list[int]:
        """Where old occurs in the shown text, each [REDACTED] in it taken whole or not at all."""
        found, at = [], self.shown.find(old) if old else -1
        while at >= 0:
            if self._edge(at) and self._edge(at + len(old)):
                found.append(at)
            at = self.shown.find(old, at + 1)
        return found

    def replace(self, at: int, old: str, new: str) -> str | None:
        """The real text with old (found at `at`) replaced by new, each hidden value new names put back whole;
        None when a hidden value would change or show (moved away from the name that hides it)."""
        lo, hi = self._real(at, first=False), self._real(at + len(old), first=True)
        inside = [i for i in self._hidden() if lo <= self.reals[i] < self.reals[i + 1] <= hi]
        middle, placed = _place(
            new, [self._context(i) for i in inside], self.shown[:at].rpartition("\n")[2]
        )
        text, moved = self.text[:lo] + middle + self.text[hi:], len(middle) - (hi - lo)
        before = {(a, b) for a, b in self.spans() if b <= lo}
        after = {(a + moved, b + moved) for a, b in self.spans() if a >= hi}
        placed = {(a + lo, b + lo) for a, b in placed}
        return text if Masked(self.secrets, text).spans() >= before | after | placed else None

    def spans(self) -> set[tuple[int, int]]:
        """Where the hidden values are in the real text."""
        return {(self.reals[i], self.reals[i + 1]) for i in self._hidden()}

    def _hidden(self) -> list[int]:
        """The indexes of the hidden pieces."""
        return [i for i, (shown, real) in enumerate(self.parts) if shown != real]

    def _context(self, i: int) -> tuple[str, str, str]:
        """A hidden piece with the shown text before it on its line (what names it), its placeholder and value."""
        return self.shown[: self.starts[i]].rpartition("\n")[2], *self.parts[i]

    def _edge(self, x: int) -> bool:
        """Whether x is a place outside every [REDACTED]."""
        i = bisect.bisect_right(self.starts, x) - 1
        return self.starts[i] == x or self.parts[i][0] == self.parts[i][1]

    def _real(self, x: int, first: bool) -> int:
        """The place in the real text of place x in the shown text (before or after empty pieces there)."""
        i = bisect.bisect_left(self.starts, x) if first else bisect.bisect_right(self.starts, x) - 1
        if i < len(self.starts) and self.starts[i] == x:
            return self.reals[i]
        i = bisect.bisect_right(self.starts, x) - 1
        return self.reals[i] + x - self.starts[i]


def _place(
    new: str, taken: list[tuple[str, str, str]], before: str
) -> tuple[str, list[tuple[int, int]]]:
    """new with each [REDACTED] that stands for a taken value turned into that value, and where each value went;
    a [REDACTED] that stands for none is left as written (and refused when written)."""
    out, placed, used, j = [], [], [], 0
    while (k := new.find("[REDACTED]", j)) >= 0:
        out.append(new[j:k])
        pick = _pick(taken, used, new[k:], (before + new[:k]).rpartition("\n")[2])
        shown, value = pick[1:] if pick else ("[REDACTED]", "[REDACTED]")
        start = sum(map(len, out))
        out.append(value)
        placed += [(start, start + len(value))] if pick else []
        used.append(pick)
        j = k + len(shown)
    out.append(new[j:])
    return "".join(out), placed


def _pick(
    taken: list[tuple[str, str, str]], used: list, rest: str, context: str
) -> tuple[str, str, str] | None:
    """The hidden value a [REDACTED] at the start of rest stands for: one not yet placed before one that is (a value
    may be copied where it stays hidden), one named alike on its line before one in order."""
    fits = [t for t in taken if rest.startswith(t[1])]
    fits.sort(key=lambda t: (t in used, t[0] != context))
    return fits[0] if fits else None


def _pieces(real: str, shown: str) -> list[tuple[str, str]]:
    """A line as (shown, real) pieces: [REDACTED] and the value it covers where hidden (all of the line where the
    two cannot be aligned)."""
    if real == shown:
        return [(real, real)]
    kept = shown.split("[REDACTED]")
    found = re.fullmatch("(.*?)".join(map(re.escape, kept)), real, re.S) if any(kept) else None
    if not found:
        return [(shown, real)]
    pieces = []
    for kept_text, value in zip(kept, [*found.groups(), None], strict=True):
        pieces += [(kept_text, kept_text)] if kept_text else []
        pieces += [("[REDACTED]", value)] if value is not None else []
    return pieces


def placeholder(value: str) -> bool:
    """A value that stands in for a secret instead of being one: a reference, a placeholder word, a few letters,
    or too little entropy (after gitleaks' allow-lists and entropy floors)."""
    whole = unquote(value).strip("\"'")
    value = _basic(whole.rstrip(",;)]}"))  # the value without the code that follows it
    if REFERENCE.search(whole) or REFERENCE.search(value) or len(value) < 4:
        return True
    words = re.split(r"[-_. ]+", value.strip("-_. "))
    if len(words) <= 2 and all(w.isalpha() and len(w) <= 8 for w in words):
        return True  # `test`, `dev`, `test key`, `from-client`: test fixtures of a few letters
    letters = [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", value)]  # FooBarToken
    if letters and all(w in PLACEHOLDERS for w in letters) and len(re.sub(r"\D", "", value)) <= 4:
        return True  # `password123`, `your_api_key_here`, `example-password`
    return _entropy(value) < 2.0  # `xxxxxxxx`, `aaaa1111`


def _basic(value: str) -> str:
    """The password inside HTTP basic credentials (base64 of user:password), else the value itself."""
    try:
        decoded = base64.b64decode(value, validate=True).decode("ascii")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return value
    return decoded.partition(":")[2] if ":" in decoded and decoded.isprintable() else value


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    counts = [value.count(c) / len(value) for c in set(value)]
    return -sum(p * math.log2(p) for p in counts)


def _hidden(m: re.Match) -> str:
    """A URL's password hidden, unless it is a placeholder."""
    return m[0] if placeholder(m[2]) else m[1] + "[REDACTED]"


def _exported(m: re.Match) -> str:
    """NAME=value with the value hidden when the name is secret and the value no placeholder."""
    secret = SECRET_NAME.search(m[1].rstrip("=\"'")) and not placeholder(m[2])
    return m[1] + "[REDACTED]" if secret else m[0]


def _assigned(m: re.Match) -> str:
    """key: value with the value hidden, unless it is a placeholder."""
    name = m[1] or m[3] or m[4] or m[5] or m[6] or m[7]
    return m[0] if placeholder(m[0][len(name) :]) else name + "[REDACTED]"


def _in_git(rel: Path) -> bool:
    """A path inside a .git folder, however its case is written (one folder on macOS's and Windows' disks)."""
    return ".git" in {part.lower() for part in rel.parts}


def child_env(config: dict) -> dict:
    """The environment for commands and the browser: no secret-named variables or URL credentials, unless passed."""
    keep = set(config["permissions"].get("env", []))
    secret = lambda k, v: SECRET_NAME.search(k) or URL_CREDENTIALS.search(v)  # noqa: E731
    return {k: v for k, v in os.environ.items() if k in keep or not secret(k, v)}


@dataclass
class Change:
    """A file a tool wants written (old is None when it does not exist): the agent asks with its diff,
    checkpoints it and writes it."""

    path: Path
    old: bytes | None
    new: bytes
    verb: str  # edit, write, create, screenshot


@dataclass
class Command:
    """A shell line a tool wants run: the agent asks, checkpoints it and runs it."""

    line: str
    timeout: float


@dataclass
class Verdict:
    """The gate's word: allow, ask or deny. An ask names its kind and question; kind and key scope an
    'always'; a deny says why, for the model."""

    decision: str
    kind: str = ""
    question: str = ""
    key: str = ""
    reason: str = ""
    boxed: bool = True  # a command runs in the sandbox (where there is one)


ALLOW = Verdict("allow")


class Declined(PermissionError):
    """The person said no (or no one could be asked)."""


class Gate:
    """Pure policy: what may happen unasked, what must be asked, what is refused, and what the user
    allowed always. It never talks to the person: the agent asks and tells it the answer."""

    def __init__(self, config: dict, root: Path, sandbox: str = "on"):
        self.config, self.root, self.always = config, Path(root).resolve(), set()
        self.secrets, self.last, self.sandbox = Secrets(config), None, sandbox
        saved = config_file.remembered(self.root)
        self.commands, self.hosts = list(saved.get("commands", [])), set(saved.get("hosts", []))
        self.outside = list(saved.get("outside", []))  # commands always run outside the sandbox
        self.scripts = dict(saved.get("scripts", {}))  # a remembered command -> the script it ran

    def settled(self, verdict: Verdict) -> Verdict:
        """An ask that --yes or an earlier 'always' answers is an allow."""
        if verdict.decision != "ask":
            return verdict
        auto = AUTO[verdict.kind] and self.config.get("auto_accept")
        if auto or (verdict.kind, verdict.key) in self.always:
            return Verdict("allow", boxed=verdict.boxed)
        return verdict

    def judge(self, effect: Change | Command) -> Verdict:
        """The verdict on an effect a tool returned."""
        if isinstance(effect, Command):
            return self.settled(self.judge_command(effect))
        return self.settled(self.judge_change(effect))

    def judge_change(self, change: Change) -> Verdict:
        path, name = change.path, self.show(change.path)
        place = self.where(path, write=True)
        if place:
            kind = "secret" if "credentials" in place else "write"
            reason = f"access to {path} ({place})"
            return Verdict("ask", kind, f"Write {path} ({place})?", reason=reason)
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
                self.last = (line, "deny", rule)
                reason = f"command refused by the deny rule {rule!r} in permissions"
                return Verdict("deny", reason=reason)
        if self.sandbox == "unavailable":  # no box: every command asked, allow rules and --yes off
            self.last = (line, "ask", "no sandbox")
            return Verdict("ask", "unboxed", f"Run `{line}` (no sandbox)?", key=line, boxed=False)
        boxed = line not in self.outside
        rule = self.allowed_by(line)
        over = command.timeout > self.config["shell_timeout"]
        if rule and not over:
            self.last = (line, "allow", rule)
            return Verdict("allow", boxed=boxed)
        self.last = (line, "ask", None)
        question = f"Run `{line}`?"
        if over:
            question = f"Run `{line}` with a timeout of {command.timeout:g}s?"
        return Verdict("ask", "shell", question, key=line, boxed=boxed)

    def judge_escape(self, line: str, why: str) -> Verdict:
        """A command the sandbox stopped: running it again outside is asked (even under --yes)."""
        question = f"In the sandbox `{line}` failed: {why}. Run it again outside the sandbox?"
        return self.settled(Verdict("ask", "outside", question, key=line, boxed=False))

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

    def granted(self, verdict: Verdict, always: bool) -> str:
        """The user said yes (always: for the rest of the session, and a plain command or a host in the
        user's home too). Returns a note for the user when 'always' could not be kept."""
        if verdict.kind == "net":
            self.hosts.add(verdict.key)  # asked once a session
        if not always:
            return ""
        self.always.add((verdict.kind, verdict.key))
        if verdict.kind == "shell":
            return self.remember_command(verdict.key)
        if verdict.kind == "outside":  # this exact command, from now on
            self.outside.append(verdict.key)
            config_file.remember(self.root, "outside", self.outside)
        if verdict.kind == "net" and _local(urlsplit(verdict.key).hostname or ""):
            self.always.discard((verdict.kind, verdict.key))  # asked again, every session
            return f"not remembered: {verdict.key} is on this machine or a private network"
        if verdict.kind == "net":
            saved = config_file.remembered(self.root).get("hosts", [])
            config_file.remember(self.root, "hosts", sorted({*saved, verdict.key}))
        return ""

    def unchanged(self, words: list[str]) -> list[str]:
        """The remembered commands, but one whose script (./run.sh, make's Makefile) changed since."""
        digest = script_digest(words, self.root)
        return [c for c in self.commands if self.scripts.get(c, "") == digest]

    def remember_command(self, line: str) -> str:
        commands, _, plain = split(line)
        if not plain:
            return "not remembered: a line with substitutions, subshells or newlines is asked every time"
        # the exact commands, glob characters escaped, kept in the user's home with the script each runs
        for words in commands:
            exact = glob.escape(" ".join(words))
            self.commands.append(exact)
            self.scripts[exact] = script_digest(words, self.root)
        config_file.remember(self.root, "commands", self.commands)
        config_file.remember(self.root, "scripts", self.scripts)
        return ""

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
        """A glob that stays in the project and out of .git whatever it expands to, a file it makes too."""
        dotted = [p.lower() for p in Path(target).parts if p.startswith(".")]  # a dot matches a dot
        reaching = any(fnmatch.fnmatchcase(n, p) for p in dotted for n in ("..", ".git"))
        if target.startswith(("/", "~")) or reaching:
            return False
        folder = [folder] if (folder := os.path.dirname(target)) else []
        # a name found may hold `*` itself: it is taken as written
        found = glob.glob(target, root_dir=self.root)
        return all(map(self.within, found)) and all(map(self.inside, folder))

    def reaches(self, word: str) -> bool:
        """An argument (or an option's value) that may name a place outside the project or inside .git."""
        attached = word[2:] if re.match(r"-\w.", word) else ""  # `-t..` is `-t ..`
        values = {word.split("=", 1)[-1], attached}
        return any(
            v and not self.inside(v) and os.path.realpath(self.root / v) != str(self.root)
            for v in values
        )

    def show(self, path: Path) -> str:
        """A path as the user thinks of it: relative inside the project."""
        if path.is_relative_to(self.root):
            return os.path.relpath(path, self.root)
        return str(path)

    def resolve(self, raw: str, write: bool = False) -> Path:
        """The absolute path a tool names (ValueError for a name no file can have)."""
        if write and raw.endswith("/"):
            example = f"{raw}file.txt"
            raise ValueError(
                f"{raw} ends with /, which names a folder; give the file's name, e.g. {example}"
            )
        return (self.root / Path(raw).expanduser()).resolve()

    def where(self, path: Path, write: bool = False) -> str:
        """Why a path needs a question: credentials, inside .git (for a write), outside the project; or ''."""
        secret = [c for c in CREDENTIALS if path.is_relative_to(Path(c).expanduser().resolve())]
        if secret:
            return f"{secret[0]}, which holds credentials"
        if not path.is_relative_to(self.root):
            return "outside the project"
        # git runs what its hooks and config name at your next git command, outside every gate of amas
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
        question, reason = f"Let the agent connect to {origin}?", f"connecting to {origin}"
        return self.settled(Verdict("ask", "net", question, key=origin, reason=reason))


def _first_match(command: str, rules: list[str]) -> str | None:
    return next((r for r in rules if fnmatch.fnmatchcase(command, r)), None)


def _origin(url: str) -> str:
    """scheme://host:port of a URL, the port written out (http://a and http://a:80 are one place)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme, 0)
    except ValueError:  # a port that is not a number
        port = 0
    host = (parts.hostname or "").lower()
    return f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}"


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
    """The project file a script-like command runs (`./run.sh`, `bash x.sh`, `python x.py`, `make x`), if any."""
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
    """What to store beside a remembered command: a hash of the script it runs ("" when it runs none), so the
    command is asked about again once the script changed."""
    import hashlib

    path = script_of(words, Path(root).resolve())
    return hashlib.sha256(path.read_bytes()).hexdigest() if path else ""
