"""Secrets: what must never reach the model, the screen or the history (values, names, shapes), the
placeholders that are not secrets, and the environment children get without them."""

import base64
import bisect
import math
import os
import re
from itertools import accumulate
from urllib.parse import unquote

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


def child_env(config: dict) -> dict:
    """The environment for commands and the browser: no secret-named variables or URL credentials, unless passed."""
    keep = set(config["permissions"].get("env", []))
    secret = lambda k, v: SECRET_NAME.search(k) or URL_CREDENTIALS.search(v)  # noqa: E731
    return {k: v for k, v in os.environ.items() if k in keep or not secret(k, v)}
