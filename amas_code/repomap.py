"""The project map: `amas init` stores symbols and cross-file references; `prompt_map` ranks them for the prompt."""

import functools
import json
import math
import os
import re
import time
from bisect import bisect_left
from collections import Counter, defaultdict
from pathlib import Path

from amas_code import project, ui
from amas_code.home import ConfigError, write_private

CACHE, MAP = ".amas/map_cache.json", ".amas/project_map.md"
CACHE_VERSION = (
    5  # bump when extraction or the entry layout changes, so older caches are parsed again
)
MAX_BYTES = 1_000_000  # bigger files (generated, minified) are skipped
SIGNATURE, LINE = 120, 90  # characters of a signature kept in the cache, and shown in the prompt
PER_FILE = 4  # symbols shown per file in the prompt, then "(+N more)"
NAMES = 0.6  # share of the budget kept to name more files (less when naming them all costs less); blocks get the rest
DEMOTED = 0.1  # rank factor of tests, examples, docs, vendored and generated code
TOUCHED, MENTIONED = (
    1.5,
    10.0,
)  # rank added to a file read or changed in the conversation, or named by path
# a cache entry; a symbol is [depth, line, name, signature, refs]
MTIME, SIZE, LANG, LOW, WORDS, SYMS = range(6)
DEF, CLASS, WALK = "def", "class", "walk"  # list it; list it and its members; look inside it
# fmt: off
TOKEN = re.compile(r"[A-Z]?[a-z]{1,7}|[A-Z]+(?![a-z])|\d{1,3}|[^\sA-Za-z\d]|\n")  # ~1.0-1.3 per real token
SPACES = re.compile(r"(?<=[(\[]) |,? (?=[)\]])|(?<==) \|(?= )")  # left by joining lines: `f( a, )`, `T = | A`
NOISY = re.compile(rb"#|//|/\*|@|--")  # where a comment or an annotation may start
IDENTIFIER = re.compile(r"[A-Za-z_]\w+", re.ASCII)
WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")  # camelCase, snake_case and paths into words
SUFFIX = re.compile(r"(ations?|ers?|ings?|ions?|ed|es|s|e|y)$")  # light stemming: redirects ~ redirect
CPP = re.compile(rb"^\s*(class|namespace|template)\b|\b(public|private|protected)\s*:|\bstd::", re.M)  # in a .h
GENERATED = re.compile(rb"Code generated .{0,80}DO NOT EDIT|@generated|auto-?generated", re.I)  # in the first lines
# tests, examples, docs, vendored and generated code
LOW_RANK = re.compile(r"(^|/)(tests?|testing|__tests__|specs?|testdata|fixtures?|examples?|samples?|demos?|benchmarks?"
    r"|bench|docs?|documentation|site|vendor|vendored|third_party|thirdparty|external|node_modules|deps|generated)/|(^|/)"
    r"(test_[^/]*|conftest\.py)$|_test\.\w+$|\.(test|spec)\.\w+$|Tests?\.java$|\.(pb|min)\.\w+$|_pb2\.py$")
# words of a question that name no subject
STOP = set("""where what which when how why who is are was were be do does did the an and or of in on at to for from
with by this that it its can should would will we you me my our please there here handle handled handles handling
happen happens implemented defined code file files function project logic hello hi hey help thanks""".split())
EXTENSIONS = {f".{ext}": language for language, exts in dict(python="py", javascript="js mjs cjs jsx", typescript="ts",
    tsx="tsx", go="go", rust="rs", java="java", c="c h", cpp="cc cpp cxx hpp hh").items() for ext in exts.split()}
# fmt: on


def _holds(node):
    """JS/TS: a function assigned is listed; an object literal holding methods is listed with them."""
    value = node.child_by_field_name("value") or node.child_by_field_name("right")
    if getattr(value, "type", None) == "object":
        return (
            CLASS
            if any(c.type == "method_definition" or _holds(c) == DEF for c in value.children)
            else None
        )
    functions = dict.fromkeys(
        ["arrow_function", "function_expression", "function", "generator_function"], DEF
    )
    # a = b = function ()
    return {"assignment_expression": WALK, **functions}.get(getattr(value, "type", None))


def _nodes(listed: str, members: str = "", inside: str = "", holds: str = "") -> dict:
    """A node table: types listed, listed with their members, looked inside, or judged by what they hold."""
    table = {**dict.fromkeys(inside.split(), WALK), **dict.fromkeys(holds.split(), _holds)}
    return {**table, **dict.fromkeys(members.split(), CLASS), **dict.fromkeys(listed.split(), DEF)}


# fmt: off
JS = _nodes("function_declaration generator_function_declaration method_definition", "class_declaration",
            "class_body export_statement lexical_declaration variable_declaration expression_statement object",
            "variable_declarator assignment_expression pair field_definition")
TS = {**JS, **_nodes("type_alias_declaration enum_declaration function_signature abstract_method_signature "
                     "method_signature", "abstract_class_declaration interface_declaration internal_module module",
                     "ambient_declaration statement_block interface_body", "public_field_definition")}
C = _nodes("function_definition struct_specifier union_specifier type_definition", "",
           "preproc_if preproc_ifdef preproc_else preproc_elif")
LANGUAGES = dict(
    python=_nodes("function_definition", "class_definition", "decorated_definition block if_statement elif_clause "
                  "else_clause try_statement except_clause finally_clause"),  # `if TYPE_CHECKING:` guards definitions
    javascript=JS, typescript=TS, tsx=TS, c=C,
    go=_nodes("function_declaration method_declaration type_alias method_elem", "type_spec",
              "type_declaration interface_type"),  # Go's grouped `type ( ... )` names each spec alone
    rust=_nodes("function_item function_signature_item struct_item enum_item union_item type_item macro_definition",
                "trait_item impl_item mod_item", "declaration_list"),
    java=_nodes("method_declaration constructor_declaration annotation_type_element_declaration", "class_declaration "
                "interface_declaration enum_declaration record_declaration annotation_type_declaration", "class_body "
                "interface_body enum_body enum_body_declarations annotation_type_body"),
    cpp={**C, **_nodes("", "struct_specifier class_specifier namespace_definition",
                       "field_declaration_list declaration_list template_declaration linkage_specification")})
# fmt: on
BODIED = {
    "struct_specifier",
    "union_specifier",
    "class_specifier",
    "type_definition",
}  # listed if they have a body
OPENERS = ("{", "field_declaration_list")  # where a definition without a body field opens its block
NAME_FIELDS = (
    "name",
    "declarator",
    "left",
    "property",
    "key",
    "type",
)  # followed down to the defined name


@functools.cache
def _parser(language: str):
    import importlib

    from tree_sitter import Language, Parser

    grammar = importlib.import_module(
        f"tree_sitter_{'typescript' if language == 'tsx' else language}"
    )
    return Parser(Language((getattr(grammar, f"language_{language}", None) or grammar.language)()))


@functools.cache
def _checker(language: str):
    """One parser per language for syntax checks, kept for the session."""
    return _parser(language)


def syntax_error(path: Path, old: bytes | None, new: bytes) -> int | None:
    """The 1-based line of the first parse error an edit brought into a file the map parses: None
    when the new text parses, the old one did not either, or the map does not know the language."""
    language = EXTENSIONS.get(path.suffix.lower())
    if language is None or len(new) > MAX_BYTES or b"\0" in new[:8192]:
        return None
    # a .h holding C++ parses as C++, as the map reads it
    language = "cpp" if path.suffix == ".h" and CPP.search(new) else language
    parser = _checker(language)
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


def symbols(source: bytes, language: str) -> list[list]:
    """[depth, 1-based line of the name, name, signature] for each class, function and method in source."""
    return list(_walk(_parser(language).parse(source).root_node, LANGUAGES[language], source, 0))


def _walk(node, table: dict, source: bytes, depth: int):
    for child in node.children:
        # not the keyword in `declare module "x"`
        kind = table.get(child.type) if child.is_named else None
        # an error hides nothing
        kind = WALK if child.type == "ERROR" else kind(child) if callable(kind) else kind
        # `typedef struct node node_t;`
        if kind is None or (child.type in BODIED and not _body(child)):
            continue
        if kind != WALK:
            name = child
            while (
                inner := next(filter(None, map(name.child_by_field_name, NAME_FIELDS)), None)
            ) is not None:
                name = inner  # through C declarators (`*\nf(void)`), JS member assignments and Rust impls
            label = name.text.decode(errors="replace").strip("'\"`")
            yield [depth, name.start_point.row + 1, label, _signature(child, source)]
        if kind != DEF:
            yield from _walk(child, table, source, depth + (kind == CLASS))


def _body(node) -> tuple[int, int] | None:
    """Bytes left out of a signature: the node's block, or that of its type or value (`typedef struct {}`)."""
    for owner in filter(None, (node, *map(node.child_by_field_name, ("type", "value", "right")))):
        body = owner.child_by_field_name("body") or next(
            (c for c in owner.children if c.type in OPENERS), None
        )
        if body is not None:
            return (
                body.start_byte,
                owner.end_byte if body.type == "{" else body.end_byte,
            )  # `struct S(T) where …`
    return None


def _noise(node, end: int):
    """Byte ranges of the comments and annotations before `end`: never part of a signature."""
    for child in (c for c in node.children if c.start_byte < end):
        if child.type.endswith("comment") or child.type in (
            "annotation",
            "marker_annotation",
            "attribute_item",
        ):
            yield child.start_byte, child.end_byte
        elif child.child_count:
            yield from _noise(child, end)


def _signature(node, source: bytes) -> str:
    """The definition on one line without its body, comments or annotations: `def foo(a, b) -> int`."""
    text, at, body = b"", node.start_byte, _body(node)
    end = min(node.end_byte, at + 8 * SIGNATURE)
    # most signatures hold no comment or annotation: skip walking them
    cut = body[0] if body else end
    noise = _noise(node, cut) if NOISY.search(source, at, cut) else ()
    for cut_start, cut_end in sorted([*noise, *([body] if body else [])]):
        text, at = text + source[at : max(at, cut_start)] + b" ", max(at, cut_end)
    text += source[
        at : max(at, end)
    ]  # C's `typedef struct {...} name;` keeps the name after the body
    line = SPACES.sub("", " ".join(text.decode("utf-8", errors="replace").split())).rstrip(" {:;=,")
    # a node walked has one
    around = node.parent.children if node.parent.type == "decorated_definition" else ()
    tags = [
        m[0].decode() + " "
        for d in around
        if d.type == "decorator" and (m := re.match(rb"@\s*[\w.]+", d.text))
    ]
    # `@x.setter def x(self, v)`
    line = "type " * (node.type in ("type_spec", "type_alias")) + "".join(tags) + line
    return line if len(line) <= SIGNATURE else line[: SIGNATURE - 1] + "…"


def _scan(job: tuple[Path, str]) -> tuple[str, list | None, str]:
    """One file's cache entry [mtime_ns, size, language, ranked low, identifiers, symbols] (None if skipped), and
    what happened to it."""
    path, rel = job
    try:
        if not path.is_file():  # a FIFO would block the read; a submodule is a folder
            raise IsADirectoryError
        st = path.stat()
        source = b"" if st.st_size > MAX_BYTES else path.read_bytes()
    except OSError:  # a link loop or dangling link, no permission, not a regular file
        return rel, None, "unreadable"
    why = "too large" if st.st_size > MAX_BYTES else "binary" * (b"\0" in source[:8192])
    language = (
        "cpp" if path.suffix == ".h" and CPP.search(source) else EXTENSIONS[path.suffix.lower()]
    )
    try:
        found = [] if why else symbols(source, language)
    # a grammar that fails to load or parse costs that file its symbols, never the map
    except Exception:
        why = "unparsable"
    low = bool(LOW_RANK.search(rel) or GENERATED.search(source[:600]))
    words = " ".join(dict.fromkeys(IDENTIFIER.findall(source.decode("latin-1"))))
    return (
        rel,
        None if why else [st.st_mtime_ns, st.st_size, language, low, words, found],
        why or "reparsed",
    )


def _unchanged(path: Path, cached: list | None) -> bool:
    try:
        return bool(cached) and cached[:2] == [path.stat().st_mtime_ns, path.stat().st_size]
    except OSError:
        return False


def _parse(jobs: list) -> list:
    """The files to parse, in several processes when there are many and the machine has the cores."""
    from rich.progress import track  # a bar on a terminal, nothing elsewhere

    if len(jobs) < 200 or (os.cpu_count() or 1) < 2:
        return list(
            track(map(_scan, jobs), "mapping", total=len(jobs), console=ui.console, transient=True)
        )
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawned, not forked: a fork while the REPL's preload thread imports litellm can deadlock the workers
    with ProcessPoolExecutor(
        min(4, os.cpu_count() or 1), mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        done = pool.map(_scan, jobs, chunksize=32)
        return list(track(done, "mapping", total=len(jobs), console=ui.console, transient=True))


def _load_files(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data["files"] if data.get("version") == CACHE_VERSION else {}
    except (
        OSError,
        ValueError,
        AttributeError,
        KeyError,
        TypeError,
    ):  # no cache yet, or not one we wrote
        return {}


def init(root: Path, ignore: list[str]) -> int:
    """Map the project into .amas/map_cache.json and project_map.md, parsing only files changed since the last run."""
    began, root = time.perf_counter(), Path(root).resolve()
    stats = Counter()
    cache = _refresh(_sources(root, ignore), _load_files(root / CACHE), stats)
    _rank(cache)
    try:
        write_private(
            root / CACHE,
            json.dumps({"version": CACHE_VERSION, "files": cache}, separators=(",", ":")),
        )
        _write_map(root, cache, stats, time.perf_counter() - began)
    except (OSError, ConfigError) as e:  # a read-only folder, a file named .amas, a link
        ui.error(f"cannot write the project map into .amas/: {getattr(e, 'strerror', None) or e}")
        return 1
    return 0


def _sources(root: Path, ignore: list[str]) -> dict[Path, str]:
    """The project's files in a language the map reads, by their path relative to root."""
    found = project.project_files(root, [*ignore, ".amas"])

    def inside(f: Path) -> bool:  # a link out of the project is never read
        return Path(os.path.realpath(f)).is_relative_to(root)

    files = sorted(
        f
        for f in found
        if f.suffix.lower() in EXTENSIONS and (f.is_symlink() or f.exists()) and inside(f)
    )
    return {path: path.relative_to(root).as_posix() for path in files}


def _refresh(rels: dict[Path, str], old: dict, stats: Counter) -> dict:
    """The cache entries for these files: kept where the file is unchanged, parsed again where not."""
    cache = {rel: old[rel] for path, rel in rels.items() if _unchanged(path, old.get(rel))}
    stats["cached"] = len(cache)
    for rel, entry, what in _parse([(path, rel) for path, rel in rels.items() if rel not in cache]):
        stats[what] += 1
        cache.update({rel: entry} if entry else {})
    return cache


def _rank(cache: dict) -> None:
    """Each symbol's score: the other files that mention its name, per file defining it (`new`,
    `clone`, `len` in 300 files say little); kept in the cache, where ids spare re-reading."""
    defined = Counter(name for entry in cache.values() for name in {s[2] for s in entry[SYMS]})
    refs = Counter(
        w for entry in cache.values() for w in defined.keys() & set(entry[WORDS].split())
    )
    for symbol in (s for entry in cache.values() for s in entry[SYMS]):
        name = symbol[2]
        symbol[4:] = [round(max(0, refs[name] - defined[name]) / defined[name], 2)]


def _write_map(root: Path, cache: dict, stats: Counter, seconds: float) -> None:
    """Every file with its symbols into project_map.md, for people and for the agent to read in full; the report."""
    mapped = {rel: entry[SYMS] for rel, entry in sorted(cache.items()) if entry[SYMS]}
    languages = (
        ", ".join(f"{k} {n}" for k, n in Counter(e[LANG] for e in cache.values()).most_common())
        or "none"
    )
    lines = [
        "# Project map",
        f"{len(mapped)} files, {sum(map(len, mapped.values()))} symbols ({languages}).",
    ]
    for rel, found in mapped.items():
        lines += ["", f"## {rel}"] + [f"{'  ' * s[0]}- L{s[1]} {s[3]}" for s in found]
    write_private(root / MAP, "\n".join(lines) + "\n")
    skipped = {k: n for k, n in stats.items() if k not in ("reparsed", "cached")}
    why = f" ({', '.join(f'{n} {k}' for k, n in skipped.items())})" if skipped else ""
    found = (
        f"{ui.plural(len(cache), 'file')}, {ui.plural(sum(map(len, mapped.values())), 'symbol')}"
    )
    ui.success(f"mapped {found} in {seconds:.2f} s → {MAP}")
    done = f"{stats['reparsed']} reparsed, {stats['cached']} cached, {sum(skipped.values())} skipped{why}"
    ui.info(f"{done}; languages: {languages}")


def _words(text: str) -> set[str]:
    """Word roots: `resolveRedirects` -> {resolv, redirect}, at least 3 letters each."""
    return {
        stem if len(stem := SUFFIX.sub("", w.lower())) >= 3 else w.lower()
        for w in WORD.findall(text)
    }


@functools.lru_cache(maxsize=2)
def _index(path: str, mtime: int, size: int) -> tuple[dict, dict, dict, list]:
    """The cache read once per (path, mtime, size): files with symbols, their scores, a word index and its words."""
    files = {rel: entry for rel, entry in _load_files(Path(path)).items() if entry[SYMS]}
    static, postings = {}, defaultdict(Counter)
    for rel, entry in files.items():  # a file many others refer to, by many names, ranks high
        refs = {s[2]: s[4] for s in entry[SYMS]}  # overloads and constructors count once
        static[rel] = sum(map(math.sqrt, refs.values())) * (DEMOTED if entry[LOW] else 1)
        in_path = _words(rel.rsplit(".", 1)[0])  # a word in the path says more than a symbol's
        for word in _words(" ".join(refs)) | in_path:
            postings[word][rel] = 3 if word in in_path else 1
    top = max(static.values(), default=1) or 1
    return files, {rel: value / top for rel, value in static.items()}, postings, sorted(postings)


@functools.lru_cache(maxsize=8)
def _query_scores(key: tuple, query: str) -> tuple[Counter, frozenset]:
    """Rank added to files by the words of the user's message and the files it names; the message's word roots."""
    (files, static, postings, vocab), scores, words = _index(*key), Counter(), query
    # a whole path, or a file name not in a longer name
    for token in re.findall(r"(?:\./)?([\w./-]+\.\w+)", query):
        if named := [rel for rel in files if rel == token or rel.endswith("/" + token)]:
            scores.update(dict.fromkeys(named, MENTIONED))
            words = words.replace(token, " ")  # `progress_bar.py` is not a word about bars
    roots = frozenset(
        _words(" ".join(w for w in WORD.findall(words) if w.lower() not in STOP and len(w) > 2))
    )
    for root in roots:
        start, hits = root[: max(4, len(root) - 2)], Counter()  # `redirect` finds `redirection`
        for at in range(bisect_left(vocab, start), bisect_left(vocab, start + "\uffff")):
            hits |= postings[vocab[at]]
        rarity = math.log(1 + len(static) / max(1, len(hits)))
        scores.update(
            {rel: w * rarity * (DEMOTED if files[rel][LOW] else 1) for rel, w in hits.items()}
        )
    return scores, roots


def _block(rel: str, found: list, roots: frozenset) -> str:
    """A file's path and its most referenced symbols (those the user named first), each with its class."""
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
    return "\n".join(lines + ([f"  (+{more} more)"] if more else []))


def prompt_map(root: Path, query: str, touched: set[str], budget: int) -> str:
    """The files that matter most for this message, with their key symbols, in at most ~budget tokens."""
    if not (path := Path(root).resolve() / CACHE).is_file():  # init never ran
        return ""
    key = (str(path), path.stat().st_mtime_ns, path.stat().st_size)
    (files, static, _, _), (scores, roots) = _index(*key), _query_scores(key, query)
    rank = {rel: value + scores[rel] + TOUCHED * (rel in touched) for rel, value in static.items()}
    room = budget - min(budget * NAMES, _naming_all(key))  # what naming files leaves the blocks
    parts, rest, used = (
        [],
        [],
        0,
    )  # blocks are tried for at most 30 skipped files: each call stays cheap
    for rel in sorted(rank, key=rank.get, reverse=True):
        block = _block(rel, files[rel][SYMS], roots) if room - used > 12 and len(rest) < 30 else ""
        if block and used + _tokens(block) <= room:  # one that does not fit is skipped, not the end
            parts.append(block)
            used += _tokens(block)
        else:
            rest.append(rel)
    return "\n".join(parts + _more(rest, budget - used))


@functools.lru_cache(maxsize=2)
def _naming_all(key: tuple) -> float:
    """What naming every mapped file in More files would cost, worked out once per cache."""
    return _tokens("\n".join(_more(sorted(_index(*key)[0]), math.inf)))


@functools.lru_cache(maxsize=4096)  # file and folder names come back at every call
def _tokens(text: str) -> float:  # cheap: words split at case and underscores, each mark, each line
    # 0.92-1.02 of real counts in eight repositories (the agent counts exactly)
    return 0.85 * len(TOKEN.findall(text))


def _more(rest: list[str], room: float) -> list[str]:
    """Other files in rank order, in the room left, as a tree of folders: a folder's name is written once, short."""
    chosen, folders, used = [], {""}, _tokens("More files:\n")
    for rel in rest:
        parts = rel.split("/")
        new = [i for i in range(1, len(parts)) if "/".join(parts[:i]) not in folders]
        cost = _tokens(parts[-1] + ", ") + sum(_tokens(parts[i - 1] + "/:\n") for i in new)
        if used + cost <= room:  # a file that does not fit leaves room for shorter names
            chosen.append(rel)
            folders.update("/".join(parts[:i]) for i in new)
            used += cost
    return ["More files:", *_tree(chosen)] if chosen else []


def _tree(rels: list[str]) -> list[str]:
    """Files under their folders, each folder indented under its parent: `tokio/`, `  src/: lib.rs`."""
    names = defaultdict(list)
    for folder, _, name in (rel.rpartition("/") for rel in sorted(rels)):
        names[folder].append(name)
    folders = {"/".join(f.split("/")[:i]) for f in names if f for i in range(1, f.count("/") + 2)}
    lines = [f"./: {', '.join(names[''])}"] if "" in names else []
    for folder in sorted(folders, key=lambda f: f.split("/")):  # `a/b` before `a-b`: parents first
        listed = f": {', '.join(names[folder])}" if folder in names else ""
        lines.append("  " * folder.count("/") + folder.rsplit("/", 1)[-1] + "/" + listed)
    return lines
