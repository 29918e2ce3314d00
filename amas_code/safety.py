"""The gates: one approval function for every question, shell rules, paths, hosts, and secrets kept out of reach."""

import base64
import fnmatch
import glob
import os
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

from amas_code import config as config_file
from amas_code import ui

AUTO = {
    "edit": True,
    "shell": True,
    "read": True,
    "net": True,
    "write": False,
    "secret": False,
}  # under --yes
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
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS|_PWD\b|CRED|AUTH|COOKIE|PRIVATE", re.I)
URL_CREDENTIALS = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)([^\s@/]+)(?=@)", re.I)
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
    (
        "",
    ): r"(?m)^[-+ ]?[A-Za-z0-9+/]{60,80}={0,2}(?:\n[-+ ]?[A-Za-z0-9+/]{8,80}={0,2}$){2,}",  # a key's body, alone
}
MARK = re.compile("\0(\\d+)\0")  # a hidden span in the text as the model sees it (Secrets.masked)
KEY_LINE = re.compile(r"-----(?:BEGIN|END)[A-Z ]*PRIVATE KEY-----")
EXPORTED = re.compile(
    r"((?:KEY|TOKEN|SECRET|PASS|PWD|CREDENTIAL|AUTH)[A-Z0-9_]*=[\"']?)[^\s\"']+"
)  # NAME=value
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
    bare = line.replace(
        "\\", ""
    )  # `\$\(` is still a substitution where bash does arithmetic (`printf -v a[…]`)
    hidden = r"`|\$[(\[{'\"]|[<>]\(|\n|\w\["  # substitutions; $[ ${ $' $"; a subscript, evaluated as arithmetic
    commands, targets, words, plain = [], [], [], not re.search(hidden, bare)
    for i, tok in enumerate(toks):
        if i and set(toks[i - 1]) <= set("<>&|") and {"<", ">"} & set(toks[i - 1]):
            targets.append(tok)  # the word after a redirection
        elif set(tok) <= set("<>&|") and {"<", ">"} & set(tok):
            words = (
                words[:-1] if words and words[-1].isdigit() else words
            )  # `2>`: the 2 is no argument
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
    line = line.replace(
        "\\\n", ""
    )  # a line continuation joins the words around it, even inside a name
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
    out += (
        [["git", *_git_command(words[1:])]] if name == "git" else []
    )  # `git -C . push` is `git push`
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
    fits = any(
        fnmatch.fnmatchcase(rest, a) for a in (args, f"{args} *", args.removesuffix(" *"))
    )  # more or none
    unknown = "$(" in words[0] or "`" in words[0] or "$" in name  # `$HOME/bin/tool` is tool
    named = unknown or fnmatch.fnmatchcase(name, want) or fnmatch.fnmatchcase(want, name)
    return named and need <= flags and fits


class Secrets:
    """Every value that must never reach the model, the screen or the history, and the shapes secrets take."""

    def __init__(self, config: dict):
        keep = set(config["permissions"].get("env", []))
        values = {
            v
            for k, v in os.environ.items()
            if SECRET_NAME.search(k) and k not in keep and len(v) >= 6
        }
        values |= {m[2] for v in os.environ.values() for m in URL_CREDENTIALS.finditer(v)}
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
        text = URL_CREDENTIALS.sub(r"\1[REDACTED]", text) if "://" in text else text
        hide = lambda m: (m[1] or m[3] or m[4] or m[5] or m[6] or m[7]) + "[REDACTED]"  # noqa: E731 - a case-blind scan
        words = ("key", "secret", "token", "pass", "pwd", "cred", "auth")
        named = lambda line: any(w in line.lower() for w in words)  # noqa: E731
        lines = EXPORTED.sub(r"\1[REDACTED]", text).split("\n")  # only lines naming a secret get it
        return "\n".join(ASSIGNED.sub(hide, line) if named(line) else line for line in lines)

    def concealed(self, old: str, new: str) -> list[int]:
        """Lines the model writes (not in the old text) where hiding secrets would hide more than a secret: spaces or
        shell characters, which no secret needs (a key block with no END line, `KEY=1;curl …|sh`)."""
        out, known = [], set(old.split("\n"))
        for n, (real, shown) in enumerate(
            zip(new.split("\n"), self.redact(new).split("\n"), strict=False), 1
        ):
            hidden = _split(real, shown)[1]
            if real not in known and any(
                re.search(r"[\s`;|&<>()]", KEY_LINE.sub("", h)) for h in hidden
            ):
                out.append(n)
        return out

    def masked(self, text: str) -> tuple[str, list[str]]:
        """The text as the model sees it, each hidden span a mark (NUL, its number, NUL), and the spans: an edit made
        on it is answered as the model sees the file and never reaches into a secret."""
        lines, spans = [], []
        for real, shown in zip(text.split("\n"), self.redact(text).split("\n"), strict=False):
            kept, hidden = _split(real, shown)
            marks = [f"\0{n}\0" for n in range(len(spans), len(spans) + len(hidden))]
            lines.append("".join(k + m for k, m in zip(kept, [*marks, ""], strict=False)))
            spans += hidden
        return "\n".join(lines), spans


def _split(real: str, shown: str) -> tuple[list[str], list[str]]:
    """A line's shown parts and the spans [REDACTED] covers between them (a line shown empty: all of it hidden)."""
    if real == shown:
        return [real], []
    kept = shown.split("[REDACTED]")
    found = re.fullmatch("(.*?)".join(map(re.escape, kept)), real, re.S) if any(kept) else None
    return (kept, list(found.groups())) if found else (["", ""], [real])


def _in_git(rel: Path) -> bool:
    """A path inside a .git folder, however its case is written (one folder on macOS's and Windows' disks)."""
    return ".git" in {part.lower() for part in rel.parts}


def child_env(config: dict) -> dict:
    """The environment for commands and the browser: no secret-named variables or URL credentials, unless passed."""
    keep = set(config["permissions"].get("env", []))
    secret = lambda k, v: SECRET_NAME.search(k) or URL_CREDENTIALS.search(v)  # noqa: E731
    return {k: v for k, v in os.environ.items() if k in keep or not secret(k, v)}


class Gate:
    """Every question amas asks before acting, in one place; 'always' is scoped to its kind (and command or host)."""

    def __init__(self, config: dict, root: Path):
        self.config, self.root, self.always = config, Path(root).resolve(), set()
        self.secrets, self.last = Secrets(config), None
        saved = config_file.remembered(self.root)
        self.commands, self.hosts = list(saved.get("commands", [])), set(saved.get("hosts", []))

    def ask(self, kind: str, question: str, detail=None, key: str = "") -> str:
        """y, n or a: auto under --yes for the kinds that allow it; 'a' lasts the session for this kind (and key)."""
        if (AUTO[kind] and self.config.get("auto_accept")) or (kind, key) in self.always:
            if detail is not None:
                ui.console.print(detail, overflow="fold")
            return "y"
        answer = ui.ask(question, "yna" if AUTO[kind] else "yn", detail)
        if answer == "a":
            self.always.add((kind, key))
        return answer

    def shell(self, command: str) -> str | None:
        """None when the command may run; else why not, for the model."""
        commands, targets, plain = split(command)
        for words in every_command(command):
            rule = next(
                (r for r in self.config["permissions"].get("deny", []) if denied(words, r)), None
            )
            if rule:
                self.last = (command, "deny", rule)
                return f"Error: command refused by the deny rule {rule!r} in permissions"
        rules = [*self.config["permissions"].get("allow", []), *self.commands]
        matched = [
            next((r for r in rules if fnmatch.fnmatchcase(" ".join(c), r)), None) for c in commands
        ]
        named = not any(re.search(r"\s", c[0]) for c in commands)  # `'echo /../bin/sh'` is not echo
        reach = [
            w for c in commands for w in c[1:] if self.reaches(w)
        ]  # --basetemp=.git, --output-file ~/.bashrc
        if (
            plain
            and commands
            and all(matched)
            and named
            and not reach
            and all(map(self.inside, targets))
        ):
            self.last = (command, "allow", ", ".join(dict.fromkeys(matched)))
            return None
        self.last = (command, "ask", None)
        return self.approve(command, commands, plain)

    def approve(self, command: str, commands: list[list[str]], plain: bool) -> str | None:
        answer = self.ask("shell", f"Run `{command}`?", key=command)
        if (
            answer == "a" and plain
        ):  # the exact commands, glob characters escaped, kept in the user's home
            self.commands += [glob.escape(" ".join(c)) for c in commands]
            config_file.remember(self.root, "commands", self.commands)
        elif answer == "a":
            ui.info(
                "not remembered: a line with substitutions, subshells or newlines is asked every time"
            )
        return None if answer != "n" else "Command declined by user."

    def inside(self, target: str) -> bool:
        """A redirection target that stays in the project and out of .git (or a file descriptor, or /dev/null)."""
        if re.fullmatch(r"\d+|-|/dev/null", target):
            return True
        if re.search(
            r"[*?[]", target
        ):  # the shell expands it: `.?` may be `..`, `.gi?` `.git`, `l?k` a link out
            return self.globbed(target)
        path = (
            self.root / target
        ).resolve()  # git would run what a write into .git/config or hooks names
        inside = self.root in path.parents and not _in_git(path.relative_to(self.root))
        return "$" not in target and not target.startswith("~") and inside

    def globbed(self, target: str) -> bool:
        """A glob that stays in the project and out of .git whatever it expands to, a file it makes too."""
        parts = [
            p.lower() for p in Path(target).parts if p.startswith(".")
        ]  # as the shell, a dot matches a dot
        if target.startswith(("/", "~")) or any(
            fnmatch.fnmatchcase(n, p) for p in parts for n in ("..", ".git")
        ):
            return False
        folder = [folder] if (folder := os.path.dirname(target)) else []
        return all(map(self.inside, glob.glob(target, root_dir=self.root) + folder))

    def reaches(self, word: str) -> bool:
        """An argument (or an option's value) that may name a place outside the project or inside .git."""
        values = {
            word.split("=", 1)[-1],
            word[2:] if re.match(r"-\w.", word) else "",
        }  # `-t..` is `-t ..`
        return any(
            v and not self.inside(v) and (self.root / v).resolve() != self.root for v in values
        )

    def path(self, raw: str, write: bool = False) -> Path:
        """The path a tool may use; outside the project it asks (credentials and writes even under --yes)."""
        if write and raw.endswith("/"):
            raise ValueError(
                f"{raw} ends with /, which names a folder; give the file's name, e.g. {raw}file.txt"
            )
        path = (self.root / Path(raw).expanduser()).resolve()
        secret = [c for c in CREDENTIALS if path.is_relative_to(Path(c).expanduser().resolve())]
        inside = path.is_relative_to(self.root)
        git = (
            write and inside and _in_git(path.relative_to(self.root))
        )  # its hooks and config run at your
        if not secret and not git and inside:  # next git command, outside every gate of amas
            return path
        kind = "secret" if secret else "write" if write else "read"
        where = (
            f"{secret[0]}, which holds credentials"
            if secret
            else "inside .git"
            if git
            else "outside the project"
        )
        if self.ask(kind, f"{'Write' if write else 'Read'} {path} ({where})?") == "n":
            raise PermissionError(f"access to {path} ({where}) was declined by the user")
        return path

    def host(self, url: str) -> None:
        """Ask before the first request to a scheme, host and port in this session; 'a' remembers it for the
        project, except a loopback, private or link-local address (a page's way into your own network)."""
        origin = _origin(url)
        if origin in self.hosts:
            return
        answer = self.ask("net", f"Let the agent connect to {origin}?", key=origin)
        if answer == "n":
            raise PermissionError(f"connecting to {origin} was declined by the user")
        self.hosts.add(origin)
        if answer == "a" and _local(urlsplit(url).hostname or ""):
            ui.info(f"not remembered: {origin} is on this machine or a private network")
        elif answer == "a":
            saved = config_file.remembered(self.root).get("hosts", [])
            config_file.remember(self.root, "hosts", sorted({*saved, origin}))


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
