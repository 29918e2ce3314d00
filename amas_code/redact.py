"""Secrets: what must never reach the model, the screen or the history (values, names, shapes), the
placeholders that are not secrets, and the environment children get without them."""

import base64
import bisect
import os
import re
from itertools import accumulate
from urllib.parse import unquote

CREDENTIALS = (
    "~/.ssh ~/.aws ~/.netrc ~/.config/gh ~/.gnupg ~/.docker ~/.kube ~/.amas ~/.git-credentials "
    "~/.config/gcloud ~/.azure ~/.npmrc ~/.pypirc ~/.password-store ~/.local/share/keyrings /proc "
    "/sys /dev /etc/shadow /etc/sudoers /etc/ssh ~/.pgpass ~/.my.cnf ~/.vault-token "
    "~/.config/rclone ~/.config/git/credentials ~/.terraform.d/credentials.tfrc.json "
    "~/.cargo/credentials ~/.cargo/credentials.toml ~/.cargo/config ~/.cargo/config.toml "
    "~/.gem/credentials ~/.local/share/uv/credentials ~/.config/uv ~/.config/pip ~/.pip "
    "~/.yarnrc.yml ~/.nuget ~/.config/containers/auth.json ~/.m2/settings.xml "
    "~/.gradle/gradle.properties ~/.bash_history ~/.zsh_history ~/.local/share/fish "
    "~/.psql_history ~/.mysql_history ~/.python_history"
).split()

# the places of the home a build reads, which hold no credentials: the box shows them read-only
# (boxview), and reading them is not asked under --yes (policy); credential places inside any of
# them stay hidden (CREDENTIALS). What a build needs, never a tool's whole folder (its config may
# hold a registry's token): cargo's programs and downloads, not its config
TOOLCHAINS = (
    "~/.local/bin ~/.local/lib ~/.local/share/pipx ~/.local/share/uv/python "
    "~/.local/share/uv/tools ~/.cargo/bin ~/.cargo/registry ~/.cargo/git ~/.rustup ~/.pyenv "
    "~/.nvm ~/.npm/_cacache ~/.m2/repository ~/.gradle/caches ~/.gradle/wrapper ~/.rbenv "
    "~/.gem/ruby ~/.gem/specs ~/.sdkman/candidates ~/.deno/bin ~/.bun/bin ~/.bun/install/cache "
    "~/.volta/bin ~/.volta/tools ~/.elan ~/.ghcup ~/.opam ~/.julia/packages ~/.cache/pip "
    "~/.cache/uv ~/.cache/go-build ~/.dotnet"
).split()
# what commands get of amas's environment (as Codex's `inherit = "core"`), and what the user's
# config adds (`permissions: {env: [NAME]}`): who and where the user is, the terminal and the
# locale, and the toolchains' own variables (where they live, which one is in force)
ENVIRONMENT = set(
    "PATH HOME USER LOGNAME USERNAME SHELL TERM COLORTERM NO_COLOR TZ LANG LANGUAGE TMPDIR "
    "VIRTUAL_ENV CONDA_PREFIX CONDA_DEFAULT_ENV PYENV_ROOT PYENV_VERSION PIPX_HOME UV_PYTHON "
    "CARGO_HOME RUSTUP_HOME RUSTUP_TOOLCHAIN NVM_DIR NVM_BIN NODE_PATH PNPM_HOME VOLTA_HOME "
    "BUN_INSTALL DENO_INSTALL GOPATH GOROOT GOBIN JAVA_HOME GRADLE_USER_HOME MAVEN_HOME M2_HOME "
    "SDKMAN_DIR RBENV_ROOT GEM_HOME GEM_PATH DOTNET_ROOT GHCUP_INSTALL_BASE_PREFIX OPAMROOT "
    "ELAN_HOME JULIA_DEPOT_PATH XDG_CONFIG_HOME XDG_CACHE_HOME XDG_DATA_HOME PKG_CONFIG_PATH "
    "CC CXX CFLAGS CXXFLAGS LDFLAGS LD_LIBRARY_PATH HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy "
    "https_proxy no_proxy GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME "
    "GIT_COMMITTER_EMAIL".split()
)


# a secret-named environment variable (withheld from commands, its value hidden): a wider net
# than secret_name(), as a variable costs nothing to withhold; GIT_AUTHOR_NAME, KEYBOARD,
# TOKENIZERS_PARALLELISM and PWD name no secret
SECRET_NAME = re.compile(
    r"PASSWORD|PASSWD|PASSPHRASE|SECRET|(?<!TIK)TOKENS?(?:_|$)|(?<=_)PWD$"  # not TIKTOKEN_CACHE_DIR
    r"|(?:^|_)(?:KEYS?|PASS|CREDS?|CREDENTIALS?|AUTH|AUTHORIZATION|COOKIES?|PRIVATE)(?:_|$)"
    r"|(?:API|ACCESS|PRIVATE|AUTH|SESSION|SIGNING|MASTER|ENCRYPTION)_?KEY",
    re.I,
)


# a value kept elsewhere, named here: ${VAR} $(cmd) {{ x }} <token> os.environ[...] %(x)s
REFERENCE = re.compile(
    r"\$\{|\$\(|\{\{|\{%|<[^<>]*>|^\[[\w -]*\]$|\{[\w.]*\}|%\(\w+\)|^\$\w+$"
    r"|\b(?:os\.environ|getenv|process\.env|ENV\[|secrets\.|vars\.)"
    r"|^![a-z]+\b|^\*\w+$"  # YAML: a tag (`!vault |`), an alias
    r"|%[sdr](?![A-Za-z0-9])|^<"  # a format's slot (`token=%s`), markup (`api_key=<span ...>`)
    r"|^(?:~|\.\.?)/|^/(?:[\w.-]+/)*[\w-]+\.\w{1,5}$"  # a file's path: `~/.token`, `/a/creds.json`
    r"|^/(?:etc|run|var|home|usr|opt|tmp|srv|mnt|root|Users|secrets)/"
    r"|^[A-Z]+(?:_[A-Z]+)+$"  # another variable's name: `"env_key": "GEMINI_API_KEY"`
    r"|^urn:|^[A-Za-z_][\w.]*(?:\[.*\])?(?:\s*\|\s*[A-Za-z_][\w.\[\], ]*)+$"  # a URN; `Auth | None`
    r"|^\$[A-Za-z_]|^\$\d+(?:::\w+)?$|^[Xx]-[A-Za-z-]+$"  # `$HOME/x`, SQL's `$3::text`, `x-api-key`
    # a float, `1e-05`, `-9850`; a version or its range (`"cookie": "0.5.0"`,
    # `"path-key": "^3.1.0"`)
    r"|^[-+~^]?(?:\d+\.[\d.]*|\.\d+|\d+(?:\.\d+)?e[-+]?\d+)$|^-\d+$"
    r"|^#[0-9a-fA-F]{3,8}$"  # a colour
)

# an unquoted value that calls: a call, an index or a bracket (`(cat f)` in fish), a name that
# an argument list goes on after (`token=token).create(`); or, in code, an attribute, another
# variable (`user_password`, `OAuthToken`)
CALL = re.compile(r"[\w$.]*[(\[{]|[A-Za-z_][\w.]*[),\]|]|lambda\b")
CODE = re.compile(
    CALL.pattern
    + r"|(?:[A-Za-z_]+(?:\.[A-Za-z_]+)+|[A-Za-z]*_[A-Za-z_]*|(?=[A-Za-z]*[a-z][A-Z])[A-Za-z]+)$"
    + r"|(?=[A-Za-z]*[a-z])(?:[a-z]*[A-Z]){2}[A-Za-z]*$"
)

# a name alone, which in a list of arguments or types, or before an operator, is code
# (`credentials: Credentials,`, `key = namespace + "_x"`)
IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*")
OPERATORS = set(",)]|+*/%&<>=?")

# an HTTP scheme before credentials; base64; what splits a fixture's words
SCHEME = re.compile(r"^(?:basic|bearer|token)\s+", re.I)
BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
SEPARATORS = re.compile(r"[-_. ]+")

# what a masked value is mostly made of: `sk-xxxxxxxx`, `****1234`, `sk-...`
MASKS = "xX*#.\u2022\u2026"

# a phrase that names the secret it stands for (a label, a message: `Password must be 8
# characters`), or asks to be replaced
LABEL = re.compile(
    r"\b(?:passw|passphrase|secret|token|(?:api[ -]?)?keys?\b|credential|cookie|auth"
    r"|change ?me|replace|your|example|placeholder|dummy|fake|todo|insert)",
    re.I,
)


PLACEHOLDERS = set(  # words that stand in for a value (gitleaks' allow-lists hold the like)
    "secret secrets password passwd pass pwd changeme change example sample test testing dummy "
    "fake placeholder your my none null nil empty todo tbd redacted hidden masked insert here xxx "
    "foo bar baz qux demo default token key apikey value mypassword yourpassword please replace "
    "real me dev development local insecure super string str required nullable confirmed min max "
    "any api boolean bool int integer number object array".split()
)


# user:password@ in a URL, the password of any characters (`Zx9/Qw7`), but not a port
# before a path (`:443/@scope`); at most 256 of them, so a long line is read in linear time
URL_CREDENTIALS = re.compile(
    r"""(\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)(?!\d{1,5}/)([^\s@"']{1,256})(?=@)""", re.I
)


# well-known token shapes (after gitleaks' rules), each run only when one of its cheap
# markers appears
SHAPES = {
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


# -- one notion of a secret name, for every form a value is written in --------------------

# what every secret name holds: a line without one is not read for names
STEM = re.compile(r"pass|pwd|secret|token|key|auth|cred|cookie")
STEM_ANY_CASE = re.compile(STEM.pattern, re.I)

# a name's words: camelCase and CAPS runs split, `_-.$` between (OAuth2Token: o auth 2 token)
WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

# endings that say secret wherever they stand, a whole word or the end of one (PGPASSWORD,
# AWSACCESSKEY)
SECRET_ENDINGS = tuple(
    "password passwd passphrase secret secrets token apikey secretkey accesskey privatekey".split()
)
NOT_SECRET_WORDS = {"tiktoken"}  # TIKTOKEN_CACHE_DIR

# words that say secret as a name's last word only: `basic_auth`, `DB_PASS`, `MYSQL_PWD`;
# not SSH_AUTH_SOCK, AUTH_USER_MODEL or pass_through
LAST_WORDS = set(
    "auth authorization pass pwd credential credentials cred creds cookie cookies".split()
)

# a key is secret after a word that names no plain key: `api_key`, `STRIPE_KEY`; not
# `sort_key`, `primary_key`, `public_key`, nor `key` alone
PLAIN_KEYS = set(
    "public primary foreign sort partition cache hash range row lookup map dict group object "
    "unique idempotency composite natural surrogate hot shortcut index next prev last first "
    "start end routing message translation label attr attribute field column param query "
    "entry item record parent node event metric".split()
)

# what a key that grants access is called; another key holding a snake_case, dotted or
# camelCase name, or a URL, names an entry (`REPORT_KEY = "roi_report"`, `id_key = "toolUseId"`)
ACCESS_KEYS = set(
    "api access private secret signing master encryption client service license session auth "
    "ssh deploy account admin app consumer subscription webhook hmac jwt shared storage "
    "crypto".split()
)
ENTRY = re.compile(r"_*[a-z0-9]+(?:[-_.:/][a-z0-9]+)+_*|[a-z]+[A-Z][A-Za-z]*|[a-z]+://\S+")

# where a bare `name: value` stands: starting a line or an item (YAML, a docstring, a header), in
# `{ ( ,` (code), or a curl header; not in prose (`JWT Auth: Resolving ...`)
KEYED = re.compile(r"(?:^[ \t]*(?:#[ \t]*)?(?:-[ \t]+)?|[{(,][ \t]*|(?:-H|--header)[ \t]+[\"'])$")

# a word before the secret word that says it is counted: `cost_per_token`, `MAX_TOKEN`
COUNTED = {"per", "max", "min", "num", "total"}

# a word after the secret word that says the value is about the secret, not the secret:
# TOKEN_URL, SECRET_KEY_PATH, passwordField, password_min_length
ABOUT = set(
    "file files path paths dir folder url uri endpoint host port name names id ids type kind "
    "length len size count min max limit ttl expiry expires expiration lifetime timeout age "
    "header field column env var prefix format policy reset regex pattern label hint prompt "
    "placeholder required enabled mode arn ref location store provider source version style "
    "input rule rules validator validation strength helper command cmd manager index error "
    "errors message msg text title description help schema widget visible toggle usage budget "
    "parallelism cache scope scopes audience issuer algorithm alg method bits digits "
    "generator backend model module request response callback handler counter counts dict list "
    "map array table pool registry interval retries attempts seconds secs ms minutes hours days "
    "domain bytes str string cost costs price pricing rate counting action param params arg args "
    "option options flag alias expr use setting settings override profile number".split()
)

# a value: quoted, backticks too (a Go raw string, a template literal), the text between its
# quotes each character read one way (a long line of backslashes costs linear time); or bare up
# to a space or a quote, less the `,;)]}` that end it in code (`DB_PASSWORD=Tr0ub4dor&3x;x` is
# all hidden, `f(password=pw, x)` reads `pw`)
VALUE = (
    r"""(?:(?P<prefix>[bfru]{0,2})(?P<q>["'`])(?P<inner>(?:\\.|(?!(?P=q))[^\\])*)(?P=q)"""
    r"""|(?P<bare>[^\s"'`]+))"""
)

# a name holding a secret word, bare or quoted (`"privateKey"`, `config["password"]`), not
# begun inside another name
NAME = (
    r"""(?P<open>\[)?(?<![\w$.])(?P<nq>["'])?(?P<name>(?=[a-z_$])[\w$.-]*?(?:"""
    + STEM.pattern
    + r""")[\w$.-]*)(?(nq)(?P=nq))(?(open)\])"""
)

# between name and value: `=`, `=>`, `:=`, a colon (after a bare name only before a space or a
# quote: not `$env:X`), or a type and `=` (`password: str = "..."`)
BETWEEN = (
    r"""[ \t]*(?::[ \t]+[a-z_][\w.\[\]|, ]*?[ \t]=(?!=)|=>|:=|(?P<eq>=)(?![=~])"""
    r"""|(?(nq):|(?P<colon>:)(?=[ \t"'])))[ \t]*"""
)

# after `name: ` (YAML, a docstring, a log line), words to the end of the line or a comment are
# one value: `password: correct horse battery staple`; but three words or more begun with a
# capital are prose (`token: Token object ready for JWT encoding`). After `NAME=` that starts a
# line (.env, INI), words of letters are one value too: `db_password=correct horse battery`
PHRASE = (
    r"""(?(colon)(?P<phrase>[^\s"'`#{}\[\];=|&<>]+(?:[ \t]+[^\s"'`#{}\[\];=|&<>]+)+)"""
    r"""|(?(eq)(?P<words>[a-z]+(?:[ \t]+[a-z]+)+)|(?!)))(?=[ \t]*$|[ \t]+\#)"""
)
PROSE = re.compile(r"[A-Z]\S*(?: \S+){2}")
ENV_LINE = re.compile(r"[ \t]*(?:export[ \t]+)?")

FORMS = {  # the forms a (name, value) pair is written in, each read where its marker is
    # env, shell `export`, INI, TOML, YAML, JSON, properties, code, `--password=`
    ("=", ":"): re.compile(NAME + BETWEEN + "(?:" + PHRASE + "|" + VALUE + ")", re.I),
    # fish `set -x NAME value`, `set -gx`, `set --export` (not prose's `Set X ...`); csh
    # `setenv NAME value`
    ("set",): re.compile(
        r"\b(?:set(?:[ \t]+--?[a-zA-Z]+)+|setenv)[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]+" + VALUE
    ),
    # .netrc, and `password value` at a line's start
    ("pass",): re.compile(
        r"(?:^[ \t]*|\blogin[ \t]+\S+[ \t]+)(?P<name>passw(?:or)?d)[ \t]+(?![=:])" + VALUE, re.I
    ),
    # an HTTP header, its scheme left visible
    ("authorization",): re.compile(
        r"""\b(?P<name>authorization)["']?[ \t]*[:=][ \t]*["'`]?"""
        r"""(?:(?:bearer|basic|token|digest)[ \t]+)?(?P<bare>[^\s"'`,;)}\]]+)""",
        re.I,
    ),
    # XML: <password>value</password>
    ("</",): re.compile(r"<(?P<name>[\w.:-]+)[^<>]*>(?P<inner>[^<>\n]+)</(?P=name)>"),
}


class Secrets:
    """Every value that must never reach the model, the screen or the history,
    and the shapes secrets take."""

    def __init__(self, config: dict):
        keep = set(config["permissions"].get("env", []))
        # with the keys amas took out of its environment
        environ = {**os.environ, **config.get("env_keys", {})}
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
        raw = value.encode()
        out = [r"\s*".join(map(re.escape, value)), re.escape(value[::-1])]
        for pad in range(3):
            encoded = base64.b64encode(b"\0" * pad + raw).decode()
            out.append(re.escape(encoded[(8 * pad + 5) // 6 : 8 * (pad + len(raw)) // 6]))
        return [p for p in out if len(p) >= 6]

    def redact(self, text: str) -> str:
        """Text with every secret [REDACTED], its lines kept (line numbers stay true)."""
        if self.known:
            text = self.known.sub(_whole, text)
        for marks, pattern in self.shapes.items():
            if any(m in text for m in marks):
                text = pattern.sub(_shaped, text)
        if "://" in text:
            text = URL_CREDENTIALS.sub(_url_password_hidden, text)
        return _named_lines(text)

    def hidden(self, value):
        """A JSON value with every string in it redacted."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {k: self.hidden(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.hidden(v) for v in value]
        return value

    def concealed(self, old: str, new: str) -> list[int]:
        """Lines the model writes (not in the old text) where hiding secrets would hide more than a
        secret: spaces or shell characters, which no secret needs (a key block with no END line,
        `KEY=1;curl …|sh`)."""
        out = []
        known = set(old.split("\n"))
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
        """The text as (shown, real) pieces: the same where visible, [REDACTED] and the value where
        hidden (the lines of a private key, shown empty, go with the [REDACTED] that starts it)."""
        out = []
        for real, shown in zip(text.split("\n"), self.redact(text).split("\n"), strict=False):
            if shown == "" and real and len(out) > 1 and out[-2][0] != out[-2][1]:
                out[-2] = (out[-2][0] + "\n", out[-2][1] + "\n" + real)
            else:
                out += _pieces(real, shown) + [("\n", "\n")]
        return out[:-1]


class Masked:
    """A file as the model sees it and the values hidden behind it: an edit is made on the shown
    text, where [REDACTED] stands for the value at its place, and never changes or reveals a hidden
    value."""

    def __init__(self, secrets: Secrets, text: str):
        self.secrets = secrets
        self.text = text
        self.parts = secrets.parts(text)
        self.shown = "".join(shown for shown, _ in self.parts)
        self.starts = list(accumulate((len(shown) for shown, _ in self.parts), initial=0))
        self.reals = list(accumulate((len(real) for _, real in self.parts), initial=0))

    def find(self, old: str) -> list[int]:
        """Where old occurs in the shown text, each [REDACTED] in it taken whole or not at all."""
        found = []
        at = self.shown.find(old) if old else -1
        while at >= 0:
            if self._edge(at) and self._edge(at + len(old)):
                found.append(at)
            at = self.shown.find(old, at + 1)
        return found

    def replace(self, at: int, old: str, new: str) -> str | None:
        """The real text with old (found at `at`) replaced by new, each hidden value new names put
        back whole; None when a hidden value would change or show (moved away from the name that
        hides it)."""
        lo = self._real(at, first=False)
        hi = self._real(at + len(old), first=True)
        inside = [i for i in self._hidden() if lo <= self.reals[i] < self.reals[i + 1] <= hi]
        middle, placed = _place(
            new, [self._context(i) for i in inside], self.shown[:at].rpartition("\n")[2]
        )
        text = self.text[:lo] + middle + self.text[hi:]
        moved = len(middle) - (hi - lo)
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
        """A hidden piece with the shown text before it on its line (what names it),
        its placeholder and value."""
        return self.shown[: self.starts[i]].rpartition("\n")[2], *self.parts[i]

    def _edge(self, x: int) -> bool:
        """Whether x is a place outside every [REDACTED]."""
        i = bisect.bisect_right(self.starts, x) - 1
        return self.starts[i] == x or self.parts[i][0] == self.parts[i][1]

    def _real(self, x: int, first: bool) -> int:
        """The place in the real text of place x in the shown text
        (before or after empty pieces there)."""
        i = bisect.bisect_left(self.starts, x) if first else bisect.bisect_right(self.starts, x) - 1
        if i < len(self.starts) and self.starts[i] == x:
            return self.reals[i]
        i = bisect.bisect_right(self.starts, x) - 1
        return self.reals[i] + x - self.starts[i]


def _place(
    new: str, taken: list[tuple[str, str, str]], before: str
) -> tuple[str, list[tuple[int, int]]]:
    """new with each [REDACTED] that stands for a taken value turned into that value, and where each
    value went; a [REDACTED] that stands for none is left as written (and refused when written)."""
    out = []
    placed = []
    used = []
    j = 0
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
    """The hidden value a [REDACTED] at the start of rest stands for: one not yet placed before one
    that is (a value may be copied where it stays hidden), one named alike on its line before one in
    order."""
    fits = [t for t in taken if rest.startswith(t[1])]
    fits.sort(key=lambda t: (t in used, t[0] != context))
    return fits[0] if fits else None


def _pieces(real: str, shown: str) -> list[tuple[str, str]]:
    """A line as (shown, real) pieces: [REDACTED] and the value it covers where hidden (all of the
    line where the two cannot be aligned)."""
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
    """A value that stands in for a secret instead of being one: a reference (a variable, a
    command, a template, a file), a mask, placeholder words, a phrase naming what it stands for,
    or a few letters (after gitleaks' allow-lists). Never entropy: where the name says secret, a
    value that reads like words is still one."""
    whole = unquote(value).strip("\"'")
    value = _basic(whole.rstrip(",;)]}"))  # the value without the code that follows it
    if REFERENCE.search(whole) or REFERENCE.search(value) or len(value) < 4:
        return True
    return _mask(value) or _fixture(value) or _placeholder_words(value) or _label(value)


def _mask(value: str) -> bool:
    """`xxxxxxxx`, `sk-xxxxxxxxxxxx`, `sk-...`, `****1234`: half or more masking characters."""
    masked = sum(value.count(c) for c in MASKS)
    return masked * 2 >= len(value) and re.search(rf"([{MASKS}])\1\1", value) is not None


def _fixture(value: str) -> bool:
    """`test`, `dev`, `test key`, `from-client`: a test fixture of a few letters."""
    words = SEPARATORS.split(value.strip("-_. "))
    return len(words) <= 2 and all(w.isalpha() and len(w) <= 8 for w in words)


def _placeholder_words(value: str) -> bool:
    """`password123`, `your_api_key_here`, `example-password`: placeholder words, a few digits."""
    letters = [w.lower() for w in WORD.findall(value) if not w.isdigit()]
    digits = sum(c.isdigit() for c in value)
    return bool(letters) and all(w in PLACEHOLDERS for w in letters) and digits <= 4


def _label(value: str) -> bool:
    """`Forgot your password?`, `Enter your API key`, `please change me in production`: a
    phrase that names the secret it asks for, or asks to be replaced."""
    return " " in value.strip() and LABEL.search(value) is not None


def _basic(value: str) -> str:
    """The password inside HTTP basic credentials (base64 of user:password, after its scheme),
    else the value itself."""
    value = SCHEME.sub("", value)
    if len(value) % 4 or not BASE64.fullmatch(value):
        return value
    try:
        decoded = base64.b64decode(value, validate=True).decode("ascii")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return value
    return decoded.partition(":")[2] if ":" in decoded and decoded.isprintable() else value


def _url_password_hidden(m: re.Match) -> str:
    """A URL's password hidden, unless it is a placeholder."""
    return m[0] if placeholder(m[2]) else m[1] + "[REDACTED]"


def _whole(m: re.Match) -> str:
    """A match hidden, its lines kept."""
    return "[REDACTED]" + "\n" * m[0].count("\n")


def _shaped(m: re.Match) -> str:
    """A token's shape hidden, unless it is masked (`sk-xxxxxxxxxxxxxxxxxxxxxxxx` in a README)."""
    return m[0] if _mask(m[0]) else _whole(m)


def secret_name(name: str) -> bool:
    """Whether a name says its value is secret, in any case and style (`db_password`,
    `privateKey`, `access-key`, `SECRET_KEY`, `PGPASSWORD`): its last secret word decides, unless
    a word after it says the value is about the secret (`TOKEN_URL`, `passwordField`)."""
    words = [w.lower() for w in WORD.findall(name)]
    for i in reversed(range(len(words))):
        if _secret_word(words, i):
            return ABOUT.isdisjoint(words[i + 1 :])
    return False


def _secret_word(words: list[str], i: int) -> bool:
    """Whether the i-th of a name's words says secret where it stands."""
    word = words[i]
    if i > 0 and words[i - 1] in COUNTED:
        return False
    if word.endswith(SECRET_ENDINGS):
        return word not in NOT_SECRET_WORDS
    if word in ("key", "keys"):
        return i > 0 and words[i - 1] not in PLAIN_KEYS
    last = i == len(words) - 1
    # `MYSQL_PWD`, but `PWD` alone is the working folder
    return word in LAST_WORDS and last and (word != "pwd" or i > 0)


def _named_lines(text: str) -> str:
    """The text with secret-named values hidden, reading only the lines that hold a secret word
    (one scan of the text finds them)."""
    out = []
    end = 0
    # found in the text's lower case, where its positions are the text's (ASCII: one character
    # each); three times faster than a case-blind search, which searching a large tree waits on
    if text.isascii():
        stems = STEM.finditer(text.lower())
    else:
        stems = STEM_ANY_CASE.finditer(text)
    for m in stems:
        if m.start() < end:
            continue  # on a line already read
        start = text.rfind("\n", 0, m.start()) + 1
        stop = text.find("\n", m.end())
        stop = len(text) if stop < 0 else stop
        out += [text[end:start], _named_values(text[start:stop])]
        end = stop
    return "".join(out) + text[end:]


def _named_values(line: str) -> str:
    """A line with the value of each (name, value) pair whose name says secret hidden, unless
    the value is a placeholder or a reference."""
    low = line.lower()
    spans = []
    for marks, form in FORMS.items():
        if any([mark in low for mark in marks]):
            spans += [span for m in form.finditer(line) for span in _secret_value(m)]
    return _hide(line, spans) if spans else line


def _secret_value(m: re.Match) -> list[tuple[int, int]]:
    """Where the value of a (name, value) match is, if it must be hidden."""
    found = m.groupdict()
    groups = ("inner", "phrase", "words", "bare")
    which = next(group for group in groups if found.get(group) is not None)
    start = m.start(which)
    # a bare value ends before the punctuation that ends it in code
    value = m[which].rstrip(",;)]}") if which == "bare" else m[which]
    if not value or not secret_name(m["name"]) or placeholder(value):
        return []
    after = m.string[start + len(value) :].lstrip()
    if _not_secret(m, value) or _written_as_code(m, which, value, after):
        return []
    return [(start, start + len(value))]


def _written_as_code(m: re.Match, which: str, value: str, after: str) -> bool:
    """Whether a value, as written, is code or prose rather than a secret: an f-string's field,
    a docstring's sentence, a call; and, where code can stand, another name or a type. A
    `NAME=value` (no spaces) ending its line, or fish's `set -x NAME value`, is a shell's or a
    .env's word: code only when it calls."""
    if which == "inner":
        return _template(m.groupdict().get("prefix") or "", value)
    if which == "words":
        return not ENV_LINE.fullmatch(m.string[: m.start()])
    if which == "phrase":
        head, _, rest = value.partition(" ")
        return PROSE.match(value) is not None or _code(head, rest.lstrip())
    between = m.string[m.end("name") : m.start(which)]
    if (between == "=" or not between.strip()) and after[:1] in ("", "#"):
        return CALL.match(value) is not None
    return _code(value, after)


def _template(prefix: str, value: str) -> bool:
    """Whether a quoted value is code: an f-string with a field, a raw string with a pattern."""
    if "f" in prefix.lower() and "{" in value:
        return True
    return "r" in prefix.lower() and re.search(r"[\\\[(]", value) is not None


def _not_secret(m: re.Match, value: str) -> bool:
    """Whether the name tells the value is no secret: it repeats the name (`self.token = token`),
    names an entry under a key that grants no access, or a bare `name:` stands in prose."""
    name = [w.lower() for w in WORD.findall(m["name"])]
    said = [w.lower() for w in WORD.findall(value)]
    shorter = min(len(name), len(said))
    if shorter and name[-shorter:] == said[-shorter:] and all(w.isalpha() for w in said):
        return True
    if m.groupdict().get("colon") and not KEYED.search(m.string[: m.start()]):
        return True
    deciding = max(i for i in range(len(name)) if _secret_word(name, i))
    plain = name[deciding] in ("key", "keys") and name[deciding - 1] not in ACCESS_KEYS
    return plain and ENTRY.fullmatch(value) is not None


def _code(value: str, after: str) -> bool:
    """Whether a bare value reads as code: a call, an attribute, another variable, or a name in
    a list of arguments or types, before `after` (`credentials: Credentials,`, `auth: Auth |`)."""
    if after[:1] in OPERATORS and IDENTIFIER.fullmatch(value):
        return True
    return CODE.match(value) is not None


def _hide(line: str, spans: list[tuple[int, int]]) -> str:
    """The line with each span shown as [REDACTED], overlapping spans as one."""
    merged = []
    for start, stop in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    out = []
    end = 0
    for start, stop in merged:
        out += [line[end:start], "[REDACTED]"]
        end = stop
    return "".join(out) + line[end:]


def child_env(config: dict) -> dict:
    """The environment commands get: an allow-list (ENVIRONMENT, the locale's LC_* and what the
    user's `permissions.env` names), never a variable whose value carries credentials in a URL
    unless the user named it. A token in any other variable stays out without a list of names."""
    keep = set(config["permissions"].get("env", []))
    listed = ENVIRONMENT | keep
    found = {k: v for k, v in os.environ.items() if k in listed or k.startswith("LC_")}
    return {k: v for k, v in found.items() if k in keep or not _secret_variable(k, v)}


def without_secrets(config: dict) -> dict:
    """amas's environment without secret-named variables or URL credentials, unless passed: what
    amas keeps for itself (the keys are taken out at start) and gives the browser."""
    keep = set(config["permissions"].get("env", []))
    return {k: v for k, v in os.environ.items() if k in keep or not _secret_variable(k, v)}


def _secret_variable(name: str, value: str) -> bool:
    return bool(SECRET_NAME.search(name) or URL_CREDENTIALS.search(value))
