"""The project map: `amas init` stores symbols and cross-file references;
`prompt_map` ranks them for the prompt."""

import functools
import hashlib
import math
import os
import re
import shutil
import stat
import time
from collections import Counter, defaultdict
from contextlib import closing
from pathlib import Path

from amas_code import project, ui
from amas_code.home import ConfigError, private_dir, project_id, write_private

MAX_BYTES = 1_000_000  # bigger files (generated, minified) are skipped
SIGNATURE = 120  # characters of a signature kept in the cache
LINE = 90  # characters of a signature shown in the prompt
PER_FILE = 4  # symbols shown per file in the prompt, then "(+N more)"
# share of the budget kept to name more files (less when naming them all costs less);
# blocks get the rest
NAMES = 0.6
DEMOTED = 0.1  # rank factor of tests, examples, docs, vendored and generated code
TOUCHED = 1.5  # rank added to a file read or changed in the conversation
MENTIONED = 10.0  # rank added to a file named by path
# a cache entry; a symbol is [depth, line, name, signature, refs]
MTIME, SIZE, LANG, LOW, WORDS, SYMS = range(6)
DEF = "def"  # list it
CLASS = "class"  # list it and its members
WALK = "walk"  # look inside it
# fmt: off
# ~1.0-1.3 per real token
TOKEN = re.compile(r"[A-Z]?[a-z]{1,7}|[A-Z]+(?![a-z])|\d{1,3}|[^\sA-Za-z\d]|\n")
# left by joining lines: `f( a, )`, `T = | A`
SPACES = re.compile(r"(?<=[(\[]) |,? (?=[)\]])|(?<==) \|(?= )")
NOISY = re.compile(rb"#|//|/\*|@|--")  # where a comment or an annotation may start
IDENTIFIER = re.compile(r"[A-Za-z_]\w+", re.ASCII)
WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")  # camelCase, snake_case and paths into words
# light stemming: redirects ~ redirect
SUFFIX = re.compile(r"(ations?|ers?|ings?|ions?|ed|es|s|e|y)$")
# in a .h
CPP = re.compile(
    rb"^\s*(class|namespace|template)\b|\b(public|private|protected)\s*:|\bstd::", re.M
)
# in the first lines
GENERATED = re.compile(rb"Code generated .{0,80}DO NOT EDIT|@generated|auto-?generated", re.I)
# tests, examples, docs, vendored and generated code
LOW_RANK = re.compile(r"(^|/)(tests?|testing|__tests__|specs?|testdata|fixtures?|examples?|samples?"
    r"|demos?|benchmarks?|bench|docs?|documentation|site|vendor|vendored|third_party|thirdparty"
    r"|external|node_modules|deps|generated)/|(^|/)(test_[^/]*|conftest\.py)$|_test\.\w+$"
    r"|\.(test|spec)\.\w+$|Tests?\.java$|\.(pb|min)\.\w+$|_pb2\.py$")
# words of a question that name no subject
STOP = set("""where what which when how why who is are was were be do does did the an and or of in
on at to for from with by this that it its can should would will we you me my our please there here
handle handled handles handling happen happens implemented defined code file files function project
logic hello hi hey help thanks""".split())
EXTENSIONS = {f".{ext}": language for language, exts in dict(python="py",
    javascript="js mjs cjs jsx", typescript="ts", tsx="tsx", go="go", rust="rs", java="java",
    c="c h", cpp="cc cpp cxx hpp hh").items() for ext in exts.split()}
# fmt: on
INDEX = "map_index.db"  # in ~/.amas/projects/<id>/: a clone's .amas/ could ship one (see index)
OLD_CACHE = ".amas/map_cache.json"
MAP = ".amas/project_map.md"
# bump when extraction or the index's layout changes, so older indexes are built again
INDEX_VERSION = 6
# project_map.md lists the best-ranked files up to this size, the rest by folder
MAP_BYTES = 300_000
FOLDERS = 2_000  # folders counted at the end of project_map.md, at most
CROWD = 100  # files in a folder from which look-alikes group by their symbols alone
DIGITS = re.compile(r"\d+")
# the index: files (a file's words: its identifiers, for mentions), symbols, word postings,
# mentions of each word
SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value);
CREATE TABLE files (id INTEGER PRIMARY KEY, rel TEXT UNIQUE, name TEXT, mtime INT, size INT,
    lang TEXT, low INT, words TEXT, nsyms INT, shape TEXT, mapsize INT, static REAL, grp INT,
    alike INT DEFAULT 0, lead REAL, tail REAL);
CREATE TABLE symbols (file INT, depth INT, line INT, name TEXT, signature TEXT, score REAL);
CREATE TABLE postings (word TEXT, file INT, weight INT);
CREATE TABLE mentions (word TEXT PRIMARY KEY, n INT) WITHOUT ROWID;
"""
# made after the first files are in: faster than kept up to date row by row
INDEXES = """
CREATE INDEX IF NOT EXISTS files_name ON files (name);
CREATE INDEX IF NOT EXISTS files_lead ON files (lead);
CREATE INDEX IF NOT EXISTS files_tail ON files (tail);
CREATE INDEX IF NOT EXISTS symbols_file ON symbols (file);
CREATE INDEX IF NOT EXISTS symbols_name ON symbols (name);
CREATE INDEX IF NOT EXISTS postings_word ON postings (word);
CREATE INDEX IF NOT EXISTS postings_file ON postings (file);
"""
ROWS = "SELECT id, rel, mtime, size FROM files"
INSERT = """INSERT INTO files (rel, name, mtime, size, lang, low, words, nsyms, shape, mapsize)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
POSTING = "INSERT INTO postings VALUES (?, ?, ?)"
MENTION = "INSERT INTO mentions VALUES (?, ?) ON CONFLICT (word) DO UPDATE SET n = n + excluded.n"
SYMBOL_NAMES = "SELECT DISTINCT name FROM symbols WHERE file = ?"
SYMBOLS = "SELECT depth, line, name, signature, score FROM symbols WHERE file = ? ORDER BY rowid"
# the names whose scores are worked out again:
# those whose counts changed, those of the files just parsed
DEFINED = """INSERT INTO defined SELECT name, count(DISTINCT file) FROM symbols WHERE name IN
    (SELECT name FROM changed UNION SELECT name FROM symbols WHERE file IN fresh) GROUP BY name"""
SCORES = """UPDATE symbols SET score = (SELECT round(max(0, coalesce(m.n, 0) - d.n) * 1.0 / d.n, 2)
    FROM defined AS d LEFT JOIN mentions AS m ON m.word = d.name WHERE d.name = symbols.name)
    WHERE name IN changed OR file IN fresh"""
# a file many others refer to, by many names, ranks high; overloads and constructors count once
STATIC = """UPDATE files SET static = (SELECT sum(sqrt(s)) FROM
    (SELECT max(score) AS s FROM symbols WHERE file = files.id GROUP BY name))
    * (CASE WHEN low THEN ? ELSE 1 END)
    WHERE id IN (SELECT file FROM symbols WHERE name IN changed) OR id IN fresh"""
# the static rank of a group's first file (or a file of its own), and of the other look-alikes
TIERS = """UPDATE files SET lead = CASE WHEN grp = id THEN static END,
    tail = CASE WHEN grp != id THEN static END
    WHERE nsyms > 0 AND (lead IS NOT (CASE WHEN grp = id THEN static END)
    OR tail IS NOT (CASE WHEN grp != id THEN static END))"""
LANGUAGE_COUNTS = "SELECT lang, count(*) FROM files GROUP BY lang ORDER BY 2 DESC, min(rel)"
BY_RANK = "SELECT id, mapsize FROM files WHERE nsyms > 0 ORDER BY grp != id, static DESC, rel"
NAMED = "SELECT id, rel FROM files WHERE name = ? AND nsyms > 0"
# the files a word root starts, by group:
# a group's first file holds the best score of its look-alikes
HITS = """SELECT f.grp, max(p.weight * CASE WHEN f.low THEN ? ELSE 1 END) FROM postings AS p
    JOIN files AS f ON f.id = p.file WHERE p.word >= ? AND p.word < ? GROUP BY f.grp"""
META = "SELECT value FROM meta WHERE key = ?"
TOUCHED_IDS = "SELECT id FROM files WHERE nsyms > 0 AND rel IN ({})"
BEST = "SELECT id FROM files WHERE {tier} IS NOT NULL ORDER BY {tier} DESC LIMIT ?"
ROW = "SELECT id, rel, static, grp, alike, nsyms FROM files WHERE id IN ({})"


def _holds(node):
    """JS/TS: a function assigned is listed;
    an object literal holding methods is listed with them."""
    value = node.child_by_field_name("value") or node.child_by_field_name("right")
    if getattr(value, "type", None) == "object":
        if any(c.type == "method_definition" or _holds(c) == DEF for c in value.children):
            return CLASS
        return None
    functions = dict.fromkeys(
        ["arrow_function", "function_expression", "function", "generator_function"], DEF
    )
    # a = b = function ()
    return {"assignment_expression": WALK, **functions}.get(getattr(value, "type", None))


def _nodes(listed: str, members: str = "", inside: str = "", holds: str = "") -> dict:
    """A node table: types listed, listed with their members, looked inside,
    or judged by what they hold."""
    table = {**dict.fromkeys(inside.split(), WALK), **dict.fromkeys(holds.split(), _holds)}
    return {**table, **dict.fromkeys(members.split(), CLASS), **dict.fromkeys(listed.split(), DEF)}


# fmt: off
JS = _nodes("function_declaration generator_function_declaration method_definition",
            "class_declaration",
            "class_body export_statement lexical_declaration variable_declaration "
            "expression_statement object",
            "variable_declarator assignment_expression pair field_definition")
TS = {**JS, **_nodes("type_alias_declaration enum_declaration function_signature "
                     "abstract_method_signature method_signature",
                     "abstract_class_declaration interface_declaration internal_module module",
                     "ambient_declaration statement_block interface_body",
                     "public_field_definition")}
C = _nodes("function_definition struct_specifier union_specifier type_definition", "",
           "preproc_if preproc_ifdef preproc_else preproc_elif")
LANGUAGES = dict(
    # `if TYPE_CHECKING:` guards definitions
    python=_nodes("function_definition", "class_definition",
                  "decorated_definition block if_statement elif_clause else_clause try_statement "
                  "except_clause finally_clause"),
    javascript=JS, typescript=TS, tsx=TS, c=C,
    # Go's grouped `type ( ... )` names each spec alone
    go=_nodes("function_declaration method_declaration type_alias method_elem", "type_spec",
              "type_declaration interface_type"),
    rust=_nodes("function_item function_signature_item struct_item enum_item union_item type_item "
                "macro_definition", "trait_item impl_item mod_item", "declaration_list"),
    java=_nodes("method_declaration constructor_declaration annotation_type_element_declaration",
                "class_declaration interface_declaration enum_declaration record_declaration "
                "annotation_type_declaration",
                "class_body interface_body enum_body enum_body_declarations annotation_type_body"),
    cpp={**C, **_nodes("", "struct_specifier class_specifier namespace_definition",
                       "field_declaration_list declaration_list template_declaration "
                       "linkage_specification")})
# fmt: on
# listed if they have a body
BODIED = {"struct_specifier", "union_specifier", "class_specifier", "type_definition"}
OPENERS = ("{", "field_declaration_list")  # where a definition without a body field opens its block
# followed down to the defined name
NAME_FIELDS = ("name", "declarator", "left", "property", "key", "type")
ANNOTATIONS = ("annotation", "marker_annotation", "attribute_item")
# the tsx grammar ships in the typescript package
GRAMMARS = {"tsx": "typescript"}


@functools.cache
def _parser(language: str):
    import importlib

    from tree_sitter import Language, Parser

    grammar = importlib.import_module(f"tree_sitter_{GRAMMARS.get(language, language)}")
    return Parser(Language((getattr(grammar, f"language_{language}", None) or grammar.language)()))


@functools.cache
def _checker(language: str):
    """One parser per language for syntax checks, kept for the session."""
    return _parser(language)


def syntax_error(path: Path, old: bytes | None, new: bytes) -> int | None:
    """The 1-based line of the first parse error an edit brought into a file the map parses: None
    when the new text parses, the old one did not either, or the map does not know the language."""
    if path.suffix.lower() not in EXTENSIONS or len(new) > MAX_BYTES or b"\0" in new[:8192]:
        return None
    parser = _checker(_language(path, new))
    if old and parser.parse(old).root_node.has_error:
        return None
    node = parser.parse(new).root_node
    if not node.has_error:
        return None
    # down the branch that holds the error, to its first ERROR or MISSING node
    while not (node.is_error or node.is_missing):
        inner = next((c for c in node.children if c.has_error or c.is_missing), None)
        if inner is None:
            break
        node = inner
    return node.start_point[0] + 1


def _language(path: Path, source: bytes) -> str:
    """The grammar a file is read with, by its extension; a .h holding C++ is read as C++."""
    if path.suffix == ".h" and CPP.search(source):
        return "cpp"
    return EXTENSIONS[path.suffix.lower()]


def symbols(source: bytes, language: str) -> list[list]:
    """[depth, 1-based line of the name, name, signature] for each class,
    function and method in source."""
    return list(_walk(_parser(language).parse(source).root_node, LANGUAGES[language], source, 0))


def _walk(node, table: dict, source: bytes, depth: int):
    for child in node.children:
        kind = _kind(child, table)
        # `typedef struct node node_t;`
        if kind is None or (child.type in BODIED and not _body(child)):
            continue
        if kind != WALK:
            name = _name(child)
            label = name.text.decode(errors="replace").strip("'\"`")
            yield [depth, name.start_point.row + 1, label, _signature(child, source)]
        if kind != DEF:
            yield from _walk(child, table, source, depth + (kind == CLASS))


def _kind(child, table: dict):
    """What the walk does with a node, by the table: list it (DEF, CLASS), look inside (WALK), or
    pass it by (None)."""
    # an error hides nothing
    if child.type == "ERROR":
        return WALK
    # not the keyword in `declare module "x"`
    if not child.is_named:
        return None
    kind = table.get(child.type)
    if callable(kind):
        return kind(child)
    return kind


def _name(node):
    """The node of a definition's name, down its name fields: through C declarators (`*\nf(void)`),
    JS member assignments and Rust impls."""
    while True:
        inner = next(filter(None, map(node.child_by_field_name, NAME_FIELDS)), None)
        if inner is None:
            return node
        node = inner


def _body(node) -> tuple[int, int] | None:
    """Bytes left out of a signature: the node's block, or that of its type or value
    (`typedef struct {}`)."""
    for owner in filter(None, (node, *map(node.child_by_field_name, ("type", "value", "right")))):
        body = owner.child_by_field_name("body") or next(
            (c for c in owner.children if c.type in OPENERS), None
        )
        if body is None:
            continue
        end = body.end_byte
        # the block opened by a bare `{` (`struct S(T) where …`) ends with its owner
        if body.type == "{":
            end = owner.end_byte
        return body.start_byte, end
    return None


def _noise(node, end: int):
    """Byte ranges of the comments and annotations before `end`: never part of a signature."""
    for child in (c for c in node.children if c.start_byte < end):
        if child.type.endswith("comment") or child.type in ANNOTATIONS:
            yield child.start_byte, child.end_byte
        elif child.child_count:
            yield from _noise(child, end)


def _signature(node, source: bytes) -> str:
    """The definition on one line without its body, comments or annotations:
    `def foo(a, b) -> int`."""
    text = b""
    at = node.start_byte
    end = min(node.end_byte, at + 8 * SIGNATURE)
    for cut_start, cut_end in _cuts(node, source, end):
        text = text + source[at : max(at, cut_start)] + b" "
        at = max(at, cut_end)
    # C's `typedef struct {...} name;` keeps the name after the body
    text += source[at : max(at, end)]
    line = SPACES.sub("", " ".join(text.decode("utf-8", errors="replace").split())).rstrip(" {:;=,")
    line = _decorators(node) + line
    if node.type in ("type_spec", "type_alias"):
        line = "type " + line
    if len(line) > SIGNATURE:
        line = line[: SIGNATURE - 1] + "…"
    return line


def _cuts(node, source: bytes, end: int) -> list[tuple[int, int]]:
    """The byte ranges a signature leaves out, in order: the body, and the comments and annotations
    before it (or before end)."""
    cuts = []
    cut = end
    body = _body(node)
    if body:
        cuts.append(body)
        cut = body[0]
    # most signatures hold no comment or annotation: skip walking them
    if NOISY.search(source, node.start_byte, cut):
        cuts += _noise(node, cut)
    return sorted(cuts)


def _decorators(node) -> str:
    """What goes before a decorated definition's signature: `@x.setter ` of `def x(self, v)`."""
    # a node walked has a parent
    if node.parent.type != "decorated_definition":
        return ""
    decorators = [d for d in node.parent.children if d.type == "decorator"]
    found = [re.match(rb"@\s*[\w.]+", d.text) for d in decorators]
    return "".join(m[0].decode() + " " for m in found if m)


def _scan(job: tuple[Path, str]) -> tuple[str, list | None, str]:
    """One file's cache entry [mtime_ns, size, language, ranked low, identifiers, symbols] (None if
    skipped), and what happened to it."""
    path, rel = job
    read = _source(path)
    if read is None:  # a link loop or dangling link, no permission, not a regular file
        return rel, None, "unreadable"
    st, source = read
    why = _unmapped(st, source)
    if why:
        return rel, None, why
    language = _language(path, source)
    try:
        found = symbols(source, language)
    # a grammar that fails to load or parse costs that file its symbols, never the map
    except Exception:
        return rel, None, "unparsable"
    low = bool(LOW_RANK.search(rel) or GENERATED.search(source[:600]))
    words = " ".join(dict.fromkeys(IDENTIFIER.findall(source.decode("latin-1"))))
    return rel, [st.st_mtime_ns, st.st_size, language, low, words, found], "reparsed"


def _unmapped(st: os.stat_result, source: bytes) -> str:
    """Why a file's symbols are not read: it is too large, or binary; "" when they are."""
    if st.st_size > MAX_BYTES:
        return "too large"
    if project.looks_binary(source):
        return "binary"
    return ""


def _source(path: Path) -> tuple[os.stat_result, bytes] | None:
    """A file's stat and bytes (none past MAX_BYTES); None when it cannot be read as a file."""
    try:
        if not path.is_file():  # a FIFO would block the read; a submodule is a folder
            return None
        st = path.stat()
        if st.st_size > MAX_BYTES:
            return st, b""
        return st, path.read_bytes()
    except OSError:
        return None


def _parse(jobs: list):
    """The files parsed, each as it comes: in several processes when there are many and the machine
    has the cores, while this one indexes those done."""
    from rich.progress import track  # a bar on a terminal, nothing elsewhere

    if len(jobs) < 200 or (os.cpu_count() or 1) < 2:
        yield from track(
            map(_scan, jobs), "mapping", total=len(jobs), console=ui.console, transient=True
        )
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawned, not forked:
    # a fork while the REPL's preload thread imports litellm can deadlock the workers
    with ProcessPoolExecutor(
        min(4, os.cpu_count() or 1), mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        done = pool.map(_scan, jobs, chunksize=32)
        yield from track(done, "mapping", total=len(jobs), console=ui.console, transient=True)


def _sqlite():
    import sqlite3  # the index's reader and writer; loaded with the map, not at start

    return sqlite3


def _reader(path: Path):
    """The index opened read-only, or None when there is none this version wrote (a link, a damaged
    or older file, one holding anything but tables and indexes)."""
    sqlite3 = _sqlite()
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        # a prompt reads a few hundred rows: a small page cache (the system caches the file)
        db.execute("PRAGMA cache_size = -256")
    except (OSError, sqlite3.Error):
        return None
    try:
        kinds = {kind for (kind,) in db.execute("SELECT type FROM sqlite_master")}
        version = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
    except sqlite3.Error:
        kinds = {"damaged"}
        version = None
    if kinds <= {"table", "index"} and version == (INDEX_VERSION,):
        return db
    db.close()
    return None


def index(root: Path) -> Path:
    """Where the project's index lives: in the user's home, by the project's identity, never in
    the project (its text reaches the system prompt, and a clone could ship one)."""
    return Path.home() / ".amas" / "projects" / project_id(root) / INDEX


def _writable(path: Path, tmp: Path):
    """A private copy of the index at path to bring up to date (a new one when there is none this
    version reads), which replaces it at the end: a prompt never reads a half-written index,
    nothing is written through a link."""
    private_dir(tmp.parent)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    old = _reader(path)
    with os.fdopen(fd, "wb") as copy:
        if old is not None:
            old.close()
            with open(path, "rb") as source:
                shutil.copyfileobj(source, copy, 1 << 20)
    db = _sqlite().connect(tmp)
    # a copy: no journal to leave beside it, no wait for the disk
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    db.create_function("sqrt", 1, math.sqrt, deterministic=True)
    if old is None:
        db.executescript(SCHEMA)
    return db


def init(root: Path, ignore: list[str]) -> int:
    """Map the project into its index (see index) and .amas/project_map.md, parsing only files
    changed since the last run; the exit code."""
    root = Path(root).resolve()
    sqlite3 = _sqlite()
    path = index(root)
    tmp = path.parent / f".{INDEX}.{os.getpid()}.tmp"
    made = not os.path.lexists(root / ".amas")
    try:
        _mapped(root, ignore, tmp)
        os.replace(tmp, path)
        # the JSON cache of earlier versions: read whole at every prompt, now replaced by the index
        (root / OLD_CACHE).unlink(missing_ok=True)
    # a read-only folder, a file named .amas, a link
    except (OSError, ConfigError, sqlite3.Error) as e:
        ui.error(f"cannot write the project map into .amas/: {getattr(e, 'strerror', None) or e}")
        return 1
    finally:  # failed or interrupted (Ctrl+C in a long parse): no half-written copy is left
        if tmp.exists() and not tmp.parent.is_symlink():
            tmp.unlink()
    if made:
        _made(root)
    return 0


def _mapped(root: Path, ignore: list[str], tmp: Path) -> None:
    """The index brought up to date in tmp (from the index there was), and the map written."""
    began = time.perf_counter()
    stats = Counter()
    found = _sources(root, ignore)
    db = _writable(index(root), tmp)
    with closing(db):
        _update(db, found, stats)
        db.commit()
        _write_map(root, db, stats, time.perf_counter() - began)


def _made(root: Path) -> None:
    """Said once, when init made .amas/: what it is, and what git shows of it."""
    said = "created .amas/ for the map and amas's files in this project"
    if (root / ".git").exists():
        said += (
            "; `git status` lists it as new (?? .amas/), as its .gitignore is not committed: "
            "commit .amas/ to share its rules and skills (the map and amas's state stay out), "
            "or add .amas/ to .git/info/exclude"
        )
    ui.info(said)


def _sources(root: Path, ignore: list[str]) -> dict[str, tuple]:
    """The project's files in a language the map reads, by path relative to root:
    (path, (mtime_ns, size)), the stamp None for a link that cannot be followed (then counted
    unreadable). One lstat a file."""
    found = {}
    cut = len(str(root).rstrip("/")) + 1
    for name in project.project_files(root, [*ignore, ".amas"]):
        path = Path(name)
        if path.suffix.lower() not in EXTENSIONS:
            continue
        try:
            info = os.lstat(path)
        except OSError:  # a file git still lists after its deletion is gone
            continue
        if stat.S_ISLNK(info.st_mode):
            # a link out of the project is never read
            # (only a link can lead out: no walk follows one)
            if not Path(os.path.realpath(path)).is_relative_to(root):
                continue
            info = _followed(path)
        found[str(path)[cut:]] = (path, info and (info.st_mtime_ns, info.st_size))
    return dict(sorted(found.items()))


def _followed(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _update(db, found: dict, stats: Counter) -> None:
    """The index brought to the files found: rows of changed and removed files dropped, changed and
    new files parsed and added, then the scores of the names whose counts changed, the groups and
    the totals worked out."""
    old = {rel: (key, (mtime, size)) for key, rel, mtime, size in db.execute(ROWS)}
    kept = {rel for rel, (_, stamp) in old.items() if rel in found and found[rel][1] == stamp}
    stats["cached"] = len(kept)
    counts = _drop(db, [key for rel, (key, _) in old.items() if rel not in kept])
    jobs = [(path, rel) for rel, (path, _) in found.items() if rel not in kept]
    fresh = _add(db, _parse(jobs), stats, counts)
    for statement in filter(str.strip, INDEXES.split(";")):
        db.execute(statement)
    # a file saved again as it was changes no count: only its own rows are scored
    _rescore(db, {name for (_, name), n in counts.items() if n}, fresh)
    _regroup(db)
    _totals(db)


def _drop(db, keys: list[int]) -> Counter:
    """Forget these files; the files mentioning and defining each name they held, taken away:
    {("m" or "d", name): -count}."""
    counts = Counter()
    for key in keys:
        words = db.execute("SELECT words FROM files WHERE id = ?", (key,)).fetchone()[0]
        counts.subtract(("m", word) for word in words.split())
        counts.subtract(("d", name) for (name,) in db.execute(SYMBOL_NAMES, (key,)))
    gone = [(-n, name) for (kind, name), n in counts.items() if kind == "m"]
    db.executemany("UPDATE mentions SET n = n - ? WHERE word = ?", gone)
    db.execute("DELETE FROM mentions WHERE n <= 0")
    for table, column in (("symbols", "file"), ("postings", "file"), ("files", "id")):
        db.executemany(f"DELETE FROM {table} WHERE {column} = ?", [(key,) for key in keys])
    return counts


def _add(db, scanned, stats: Counter, counts: Counter) -> list[int]:
    """Index the files parsed (rows, symbols, word postings, mentions), adding to the counts of the
    names they mention and define; their ids."""
    fresh = []
    mentioned = Counter()
    for rel, entry, what in scanned:
        stats[what] += 1
        if entry:
            mentioned.update(entry[WORDS].split())
            counts.update(("d", name) for name in {symbol[2] for symbol in entry[SYMS]})
            fresh.append(_insert(db, rel, entry))
    db.executemany(MENTION, mentioned.items())
    counts.update({("m", word): n for word, n in mentioned.items()})
    return fresh


def _insert(db, rel: str, entry: list) -> int:
    found = entry[SYMS]
    shape = " ".join(sorted({DIGITS.sub("#", symbol[2]) for symbol in found}))
    # what its lines take in project_map.md
    size = len(rel) + 5 + sum(len(s[3]) + 2 * s[0] + 12 for s in found)
    row = (rel, rel.rpartition("/")[2], *entry[: WORDS + 1], len(found), shape, size)
    key = db.execute(INSERT, row).lastrowid
    db.executemany("INSERT INTO symbols VALUES (?, ?, ?, ?, ?, 0)", [(key, *s) for s in found])
    weights = dict.fromkeys(_words(" ".join({s[2] for s in found})), 1)
    # a word in the path says more than a symbol's
    if found:
        weights |= dict.fromkeys(_words(rel.rsplit(".", 1)[0]), 3)
    db.executemany(POSTING, [(word, key, weight) for word, weight in weights.items()])
    return key


def _rescore(db, names: set[str], fresh: list[int]) -> None:
    """Each symbol's score: the other files that mention its name, per file defining it (`new`,
    `clone`, `len` in 300 files say little); each file's static rank from its names' scores. Only
    where a name's counts changed, and in the files just parsed."""
    for table in ("changed (name TEXT PRIMARY KEY)", "fresh (id INTEGER PRIMARY KEY)"):
        db.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table}")
    db.execute("CREATE TEMP TABLE IF NOT EXISTS defined (name TEXT PRIMARY KEY, n INT)")
    for table in ("changed", "fresh", "defined"):
        db.execute(f"DELETE FROM {table}")
    db.executemany("INSERT INTO changed VALUES (?)", ((name,) for name in names))
    db.executemany("INSERT INTO fresh VALUES (?)", ((key,) for key in fresh))
    db.execute(DEFINED)
    db.execute(SCORES)
    db.execute(STATIC, (DEMOTED,))


def _regroup(db) -> None:
    """Near-duplicates (the same names but for their numbers, in paths alike but for numbers) and
    look-alikes in a folder of hundreds (the same names but for numbers): a group, which ranks as
    its first file; the others come after every other file."""
    rows = db.execute(
        "SELECT id, rel, shape, grp, alike FROM files WHERE nsyms > 0 ORDER BY rel"
    ).fetchall()
    crowds = Counter(row[1].rpartition("/")[0] for row in rows)
    groups = defaultdict(list)
    for key, rel, shape, *_ in rows:
        folder = rel.rpartition("/")[0]
        where = DIGITS.sub("#", rel)
        if crowds[folder] >= CROWD:
            where = folder + "/"
        groups[where, shape].append(key)
    lead = {key: members[0] for members in groups.values() for key in members}
    alike = {members[0]: len(members) - 1 for members in groups.values()}
    changes = [
        (lead[k], alike.get(k, 0), k)
        for k, _, _, grp, n in rows
        if (grp, n) != (lead[k], alike.get(k, 0))
    ]
    db.executemany("UPDATE files SET grp = ?, alike = ? WHERE id = ?", changes)
    db.execute(TIERS)


def _totals(db) -> None:
    """What every prompt needs whole, worked out once: the top static rank, the count of groups,
    what naming every mapped file would cost (again only when the files named changed)."""
    top, groups = db.execute("SELECT max(lead), count(lead) FROM files").fetchone()
    names = [_shown(*row) for row in db.execute("SELECT rel, alike FROM files WHERE nsyms > 0")]
    names.sort()
    listing = hashlib.blake2b("\n".join(names).encode(errors="replace")).hexdigest()
    meta = {"version": INDEX_VERSION, "top": top or 1, "groups": groups, "listing": listing}
    if db.execute("SELECT value FROM meta WHERE key = 'listing'").fetchone() != (listing,):
        meta["naming"] = 0.85 * sum(1 for _ in TOKEN.finditer("\n".join(_more(names, math.inf))))
    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())


def _shown(rel: str, alike: int) -> str:
    if not alike:
        return rel
    return f"{rel} (+{alike} alike)"


def _write_map(root: Path, db, stats: Counter, seconds: float) -> None:
    """project_map.md, for people and for the agent to read in full: the files with their symbols,
    in path order, the best-ranked ones up to MAP_BYTES, the rest counted by folder; the report."""
    listed = _listed(db)
    mapped, symbols_count = db.execute(
        "SELECT count(*), sum(nsyms) FROM files WHERE nsyms > 0"
    ).fetchone()
    count = db.execute("SELECT count(*) FROM files").fetchone()[0]
    languages = ", ".join(f"{k} {n}" for k, n in db.execute(LANGUAGE_COUNTS)) or "none"
    lines = ["# Project map", f"{mapped} files, {symbols_count or 0} symbols ({languages})."]
    for key, rel in db.execute("SELECT id, rel FROM files WHERE nsyms > 0 ORDER BY rel"):
        if key in listed:
            symbols_of = db.execute(SYMBOLS, (key,))
            lines += ["", f"## {rel}"] + [f"{'  ' * s[0]}- L{s[1]} {s[3]}" for s in symbols_of]
    write_private(root / MAP, "\n".join(lines + _by_folder(db, listed)) + "\n")
    # the files the map lists: those with symbols (the others are read, and counted, too)
    found = f"{ui.plural(mapped, 'file')}, {ui.plural(symbols_count or 0, 'symbol')}"
    if count != mapped:
        found += f" (of {count} read)"
    ui.success(f"mapped {found} in {seconds:.2f} s → {MAP}; languages: {languages}")
    # what the person can act on; how many were parsed again is amas's business
    skipped = {k: n for k, n in stats.items() if k not in ("reparsed", "cached")}
    if skipped:
        why = ", ".join(f"{n} {k}" for k, n in skipped.items())
        ui.info(f"{ui.plural(sum(skipped.values()), 'file')} left out: {why}")


def _listed(db) -> set[int]:
    """The files project_map.md lists with their symbols: the best-ranked, until MAP_BYTES."""
    listed = set()
    used = 0
    for key, size in db.execute(BY_RANK):
        if used + size > MAP_BYTES:
            break
        listed.add(key)
        used += size
    return listed


def _by_folder(db, listed: set[int]) -> list[str]:
    """The files not listed, counted by folder."""
    files = Counter()
    symbols_in = Counter()
    for key, rel, count in db.execute("SELECT id, rel, nsyms FROM files WHERE nsyms > 0"):
        if key not in listed:
            folder = rel.rpartition("/")[0] or "."
            files[folder + "/"] += 1
            symbols_in[folder + "/"] += count
    if not files:
        return []
    lines = [
        "",
        f"# Not listed above: {ui.plural(files.total(), 'file')}, "
        "by folder (read them to see more)",
    ]
    folders = sorted(files)
    lines += [
        f"- {f} {ui.plural(files[f], 'file')}, {ui.plural(symbols_in[f], 'symbol')}"
        for f in folders[:FOLDERS]
    ]
    if len(folders) > FOLDERS:
        lines.append(f"- … and {len(folders) - FOLDERS} more folders")
    return lines


def _words(text: str) -> set[str]:
    """Word roots: `resolveRedirects` -> {resolv, redirect}, at least 3 letters each."""
    return {_stem(word) for word in {w.lower() for w in WORD.findall(text)}}


def _stem(word: str) -> str:
    """A word without its suffix (`redirects` -> `redirect`), unless under 3 letters are left."""
    stem = SUFFIX.sub("", word)
    if len(stem) < 3:
        return word
    return stem


def _query_scores(db, query: str, groups: int) -> tuple[Counter, frozenset]:
    """Rank added to files by the words of the user's message and the files it names; the message's
    word roots. A word's rarity counts a group of look-alikes once, and the group's first file takes
    its score."""
    scores = Counter()
    words = query
    # a whole path, or a file name not in a longer name
    for token in re.findall(r"(?:\./)?([\w./-]+\.\w+)", query):
        same_name = db.execute(NAMED, (token.rpartition("/")[2],))
        if named := [key for key, rel in same_name if rel == token or rel.endswith("/" + token)]:
            scores.update(dict.fromkeys(named, MENTIONED))
            words = words.replace(token, " ")  # `progress_bar.py` is not a word about bars
    roots = frozenset(
        _words(" ".join(w for w in WORD.findall(words) if w.lower() not in STOP and len(w) > 2))
    )
    for root in roots:
        start = root[: max(4, len(root) - 2)]  # `redirect` finds `redirection`
        hits = db.execute(HITS, (DEMOTED, start, start + "\uffff")).fetchall()
        rarity = math.log(1 + groups / max(1, len(hits)))
        scores.update({key: weight * rarity for key, weight in hits})
    return scores, roots


def _ranked(db, query: str, touched: set[str], budget: int) -> tuple[list, frozenset]:
    """The files in rank order, as many as a map of this budget could name: read from the index's
    best static ranks, the files the message's words hit and the files touched, never the whole
    index."""
    top, groups = (db.execute(META, (k,)).fetchone()[0] for k in ("top", "groups"))
    scores, roots = _query_scores(db, query, groups)
    # the shortest name costs ~3.4 tokens: no more files can be named
    limit = int(budget / 3.4) + 31
    keys = _candidates(db, scores, touched, limit)
    rows = _rows(db, keys)
    touched_keys = [key for key in keys if rows[key][0] in touched]
    # a file read or changed in the conversation ranks as one asked about
    scores.update(dict.fromkeys(touched_keys, TOUCHED))

    def order(key):
        rel, static, grp, alike, count = rows[key]
        asked = scores[key]
        # a look-alike nobody asked about comes after every other file;
        # ties favour files of their own
        return grp != key and not asked, -(static / top + asked), alike > 0, -count, rel

    best = sorted(rows, key=order)[:limit]
    return [(key, _shown(rows[key][0], rows[key][3])) for key in best], roots


def _candidates(db, scores: dict, touched: set[str], limit: int) -> set[int]:
    """The files worth ranking: the best the message's words hit, the files touched, and the
    index's best static ranks (its lead and its tail)."""
    keys = set(sorted(scores, key=scores.get, reverse=True)[:limit])
    keys |= _keys(db, TOUCHED_IDS, sorted(touched))
    for tier in ("lead", "tail"):
        keys.update(key for (key,) in db.execute(BEST.format(tier=tier), (limit,)))
    return keys


def _keys(db, sql: str, values: list) -> set[int]:
    found = set()
    for at in range(0, len(values), 500):
        chunk = values[at : at + 500]
        found.update(key for (key,) in db.execute(sql.format(",".join("?" * len(chunk))), chunk))
    return found


def _rows(db, keys: set[int]) -> dict[int, tuple]:
    """{id: (path, static rank, group, look-alikes, symbols)} of these files."""
    rows = {}
    keys = sorted(keys)
    for at in range(0, len(keys), 500):
        chunk = keys[at : at + 500]
        found = db.execute(ROW.format(",".join("?" * len(chunk))), chunk)
        rows.update((row[0], row[1:]) for row in found)
    return rows


def prompt_map(root: Path, query: str, touched: set[str], budget: int) -> str:
    """The files that matter most for this message, with their key symbols,
    in at most ~budget tokens."""
    db = _reader(index(Path(root).resolve()))
    if db is None:  # init never ran
        return ""
    with closing(db):
        try:
            return _packed(db, query, touched, budget)
        except _sqlite().Error:  # damaged meanwhile: the next init writes it again
            return ""


def _packed(db, query: str, touched: set[str], budget: int) -> str:
    ranked, roots = _ranked(db, query, touched, budget)
    naming = db.execute(META, ("naming",)).fetchone()[0]
    room = budget - min(budget * NAMES, naming)  # what naming files leaves the blocks
    # blocks are tried for at most 30 skipped files: each call stays cheap
    parts = []
    rest = []
    used = 0
    for key, shown in ranked:
        block = ""
        if room - used > 12 and len(rest) < 30:
            block = _block(shown, db.execute(SYMBOLS, (key,)).fetchall(), roots)
        if block and used + _tokens(block) <= room:  # one that does not fit is skipped, not the end
            parts.append(block)
            used += _tokens(block)
        else:
            rest.append(shown)
    return "\n".join(parts + _more(rest, budget - used))


def _block(rel: str, found: list, roots: frozenset) -> str:
    """A file's path and its most referenced symbols (those the user named first), each with its
    class; "" for a file without symbols."""
    if not found:
        return ""
    best = {}  # name -> its symbol ranked first: overloads of one name are shown once
    named = [bool(roots and roots & _words(symbol[2])) for symbol in found]
    for i in sorted(range(len(found)), key=lambda i: (named[i], found[i][4]), reverse=True):
        best.setdefault(found[i][2], i)
    keep = set(list(best.values())[:PER_FILE])
    # the enclosing classes of each symbol shown: the last one before it at each depth
    for i in list(keep):
        keep |= {max(j for j in range(i) if found[j][0] == depth) for depth in range(found[i][0])}
    lines = [rel] + [f"{'  ' * (found[i][0] + 1)}{found[i][3][:LINE]}" for i in sorted(keep)]
    more = len(found) - len(keep)
    if more:
        lines.append(f"  (+{more} more)")
    return "\n".join(lines)


@functools.lru_cache(maxsize=4096)  # file and folder names come back at every call
def _tokens(text: str) -> float:  # cheap: words split at case and underscores, each mark, each line
    # 0.92-1.02 of real counts in eight repositories (the agent counts exactly)
    return 0.85 * len(TOKEN.findall(text))


def _more(rest: list[str], room: float) -> list[str]:
    """Other files in rank order, in the room left, as a tree of folders:
    a folder's name is written once, short."""
    chosen = []
    folders = {""}
    used = _tokens("More files:\n")
    for rel in rest:
        parts = rel.split("/")
        new = [i for i in range(1, len(parts)) if "/".join(parts[:i]) not in folders]
        cost = _tokens(parts[-1] + ", ") + sum(_tokens(parts[i - 1] + "/:\n") for i in new)
        if used + cost <= room:  # a file that does not fit leaves room for shorter names
            chosen.append(rel)
            folders.update("/".join(parts[:i]) for i in new)
            used += cost
    if not chosen:
        return []
    return ["More files:", *_tree(chosen)]


def _tree(rels: list[str]) -> list[str]:
    """Files under their folders, each folder indented under its parent:
    `tokio/`, `  src/: lib.rs`."""
    names = defaultdict(list)
    for folder, _, name in (rel.rpartition("/") for rel in sorted(rels)):
        names[folder].append(name)
    folders = {"/".join(f.split("/")[:i]) for f in names if f for i in range(1, f.count("/") + 2)}
    lines = []
    if "" in names:
        lines.append(f"./: {', '.join(names[''])}")
    for folder in sorted(folders, key=lambda f: f.split("/")):  # `a/b` before `a-b`: parents first
        line = "  " * folder.count("/") + folder.rsplit("/", 1)[-1] + "/"
        if folder in names:
            line += f": {', '.join(names[folder])}"
        lines.append(line)
    return lines
