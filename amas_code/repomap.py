"""The project map: `amas init` stores symbols and cross-file references; `prompt_map` ranks them for the prompt."""

import functools
import json
import math
import os
import re
import stat
import time
from bisect import bisect_left
from collections import Counter, defaultdict
from pathlib import Path

from amas_code import tools, ui
from amas_code.config import write_private

CACHE, MAP = ".amas/map_cache.json", ".amas/project_map.md"
CACHE_VERSION = 2  # bump when extraction or the entry layout changes, so older caches are parsed again
MAX_BYTES = 1_000_000  # bigger files (generated, minified) are skipped
SIGNATURE, LINE = 120, 90  # characters of a signature kept in the cache, and shown in the prompt
PER_FILE = 4  # symbols shown per file in the prompt, then "(+N more)"
BLOCKS = 0.7  # share of the budget for files with their symbols; the rest names more files
TOKEN = re.compile(r"[A-Z]?[a-z]{1,7}|[A-Z]+(?![a-z])|\d{1,3}|[^\sA-Za-z\d]|\n")  # ~1.15-1.4 per real token
DEMOTED = 0.1  # rank factor of tests, examples, docs, vendored and generated code
TOUCHED, MENTIONED = 1.5, 10.0  # rank added to a file read or changed in the conversation, or named by path
PROGRESS = 200  # files above which a progress bar is shown
MTIME, SIZE, LANG, KIND, WORDS, SYMS = range(6)  # a cache entry; a symbol is [depth, line, name, signature, refs]
DEF, CLASS, WALK = "def", "class", "walk"  # list it; list it and its members; look inside it
FUNCTIONS = {"arrow_function", "function_expression", "function", "generator_function"}
OPENERS = {"{", "field_declaration_list"}  # where a definition without a body field opens its block
NAME_FIELDS = ("name", "declarator", "left", "property", "key", "type")  # followed down to the defined name
PREFIX = {"type_spec": "type ", "type_alias": "type "}  # Go's grouped `type ( ... )` names each spec alone
SPACES = re.compile(r"(?<=[(\[]) |,? (?=[)\]])|(?<==) \|(?= )")  # left by joining lines: `f( a, )`, `T = | A`
IDENTIFIER = re.compile(r"[A-Za-z_]\w+", re.ASCII)
WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")  # camelCase, snake_case and paths into words
SUFFIX = re.compile(r"(ations?|ers?|ings?|ions?|ed|es|s|e|y)$")  # light stemming: redirects ~ redirect
CPP = re.compile(rb"^\s*(class|namespace|template)\b|\b(public|private|protected)\s*:|\bstd::", re.M)
GENERATED = re.compile(rb"Code generated .{0,80}DO NOT EDIT|@generated|auto-?generated", re.I)  # in the first lines


def _holds(node):
    """JS/TS: a function assigned is listed; an object literal holding methods is listed with them."""
    value = node.child_by_field_name("value") or node.child_by_field_name("right")
    kind = getattr(value, "type", None)
    if kind == "assignment_expression":  # a = b = function () {}: the inner one is listed
        return WALK
    if kind == "object" and any(c.type == "method_definition" or _holds(c) == DEF for c in value.children):
        return CLASS
    return DEF if kind in FUNCTIONS else None


# fmt: off
# (the node tables read best as tables)
PY = {"function_definition": DEF, "class_definition": CLASS, "decorated_definition": WALK, "block": WALK,
      **dict.fromkeys(["if_statement", "elif_clause", "else_clause", "try_statement", "except_clause",
                       "finally_clause"], WALK)}  # `if TYPE_CHECKING:` and `try: import` guard definitions
JS = {"function_declaration": DEF, "generator_function_declaration": DEF, "class_declaration": CLASS,
      "class_body": WALK, "method_definition": DEF, "export_statement": WALK, "lexical_declaration": WALK,
      "variable_declaration": WALK, "expression_statement": WALK, "object": WALK,
      **dict.fromkeys(["variable_declarator", "assignment_expression", "pair", "field_definition"], _holds)}
TS = {**JS, "abstract_class_declaration": CLASS, "interface_declaration": DEF, "type_alias_declaration": DEF,
      "enum_declaration": DEF, "function_signature": DEF, "abstract_method_signature": DEF, "method_signature": DEF,
      "ambient_declaration": WALK, "internal_module": CLASS, "module": CLASS, "statement_block": WALK,
      "public_field_definition": _holds}
GO = {"function_declaration": DEF, "method_declaration": DEF, "type_declaration": WALK, "type_spec": CLASS,
      "type_alias": DEF, "interface_type": WALK, "method_elem": DEF}
RUST = {"function_item": DEF, "function_signature_item": DEF, "struct_item": DEF, "enum_item": DEF, "union_item": DEF,
        "type_item": DEF, "macro_definition": DEF, "trait_item": CLASS, "impl_item": CLASS, "mod_item": CLASS,
        "declaration_list": WALK}
JAVA = {"class_declaration": CLASS, "interface_declaration": CLASS, "enum_declaration": CLASS,
        "record_declaration": CLASS, "annotation_type_declaration": CLASS, "class_body": WALK, "interface_body": WALK,
        "enum_body": WALK, "enum_body_declarations": WALK, "annotation_type_body": WALK, "method_declaration": DEF,
        "constructor_declaration": DEF, "annotation_type_element_declaration": DEF}
C = {"function_definition": DEF, "struct_specifier": DEF, "union_specifier": DEF, "type_definition": DEF,
     **dict.fromkeys(["preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif"], WALK)}
CPP_TABLE = {**C, "struct_specifier": CLASS, "class_specifier": CLASS, "field_declaration_list": WALK,
             "namespace_definition": CLASS, "declaration_list": WALK, "template_declaration": WALK,
             "linkage_specification": WALK}
FIELDED = {"struct_specifier", "union_specifier", "class_specifier", "type_definition"}  # listed if they have a body
LANGUAGES = {  # name -> (grammar package, its language function, node table)
    "python": ("tree_sitter_python", "language", PY), "javascript": ("tree_sitter_javascript", "language", JS),
    "typescript": ("tree_sitter_typescript", "language_typescript", TS),
    "tsx": ("tree_sitter_typescript", "language_tsx", TS), "go": ("tree_sitter_go", "language", GO),
    "rust": ("tree_sitter_rust", "language", RUST), "java": ("tree_sitter_java", "language", JAVA),
    "c": ("tree_sitter_c", "language", C), "cpp": ("tree_sitter_cpp", "language", CPP_TABLE)}
EXTENSIONS = {".py": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
              ".ts": "typescript", ".tsx": "tsx", ".go": "go", ".rs": "rust", ".java": "java", ".c": "c", ".h": "c",
              ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp"}
STOP = set("where what which when how why who is are was were be do does did the an and or of in on at to for from "
           "with by this that it its can should would will we you me my our please there here handle handled handles "
           "handling happen happens implemented defined code file files function project logic hello hi hey help "
           "thanks".split())  # words of a question that name no subject
KINDS = {  # path -> a kind that is ranked down
    "test": re.compile(r"(^|/)(tests?|testing|__tests__|specs?|testdata|fixtures?)/|(^|/)test_[^/]*$|_test\.\w+$"
                       r"|\.(test|spec)\.\w+$|(^|/)conftest\.py$|Tests?\.java$"),
    "example": re.compile(r"(^|/)(examples?|samples?|demos?|benchmarks?|bench)/"),
    "doc": re.compile(r"(^|/)(docs?|documentation|site)/"),
    "vendor": re.compile(r"(^|/)(vendor|vendored|third_party|thirdparty|external|node_modules|deps)/"),
    "generated": re.compile(r"\.(pb|min)\.\w+$|_pb2\.py$|\.generated\.|(^|/)generated/")}
# fmt: on
PARSERS = {}  # language -> tree_sitter.Parser, made when a file of that language first appears


def _body(node) -> tuple[int, int] | None:
    """Bytes left out of a signature: the node's block, or that of its type or value (`typedef struct {}`)."""
    for field in (None, "type", "value", "right"):
        owner = node if field is None else node.child_by_field_name(field)
        if owner is None:
            continue
        if (body := owner.child_by_field_name("body")) is not None:
            return body.start_byte, body.end_byte
        if (brace := next((c for c in owner.children if c.type in OPENERS), None)) is not None:
            return brace.start_byte, owner.end_byte
    return None


def _noise(node, end: int):
    """Byte ranges of the comments and annotations before `end`: never part of a signature."""
    for child in node.children:
        if child.start_byte >= end:
            return
        if child.type.endswith("comment") or child.type in ("annotation", "marker_annotation", "attribute_item"):
            yield child.start_byte, child.end_byte
        else:
            yield from _noise(child, end)


def _decorators(node, source: bytes) -> str:
    """Python's decorator names, so a property's getter and setter can be told apart: `@x.setter def x(self, v)`."""
    if node.parent is None or node.parent.type != "decorated_definition":
        return ""
    found = (re.match(r"@\s*[\w.]+", _text(d, source)) for d in node.parent.children if d.type == "decorator")
    return "".join(f"{m.group()} " for m in found if m)


def _signature(node, source: bytes) -> str:
    """The definition on one line without its body, comments or annotations: `def foo(a, b) -> int`."""
    start, body = node.start_byte, _body(node)
    end = min(node.end_byte, start + 8 * SIGNATURE)
    text, at = b"", start
    for cut_start, cut_end in sorted([*_noise(node, body[0] if body else end), *([body] if body else [])]):
        text, at = text + source[at : max(at, cut_start)] + b" ", max(at, cut_end)
    text += source[at : max(at, end)]  # C's `typedef struct {...} name;` keeps the name after the body
    line = SPACES.sub("", " ".join(text.decode("utf-8", errors="replace").split())).rstrip(" {:;=,")
    line = PREFIX.get(node.type, "") + _decorators(node, source) + line
    return line if len(line) <= SIGNATURE else line[: SIGNATURE - 1] + "…"


def _text(node, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def _name(node):
    """The node naming a definition, through C declarators (`*\\nf(void)`), JS member assignments and Rust impls."""
    while (inner := next(filter(None, map(node.child_by_field_name, NAME_FIELDS)), None)) is not None:
        node = inner
    return node


def _walk(node, table: dict, source: bytes, depth: int):
    for child in node.children:
        kind = table.get(child.type) if child.is_named else None  # not the keyword in `declare module "x"`
        kind = kind(child) if callable(kind) else kind
        if kind is None or (child.type in FIELDED and not _body(child)):  # `typedef struct node node_t;`
            continue
        if kind != WALK:
            name = _name(child)
            yield [depth, name.start_point.row + 1, _text(name, source).strip("'\"`"), _signature(child, source)]
        if kind != DEF:
            yield from _walk(child, table, source, depth + (kind == CLASS))


def symbols(source: bytes, language: str) -> list[list]:
    """[depth, 1-based line of the name, name, signature] for each class, function and method in source."""
    module, function, table = LANGUAGES[language]
    if language not in PARSERS:
        import importlib

        from tree_sitter import Language, Parser

        PARSERS[language] = Parser(Language(getattr(importlib.import_module(module), function)()))
    return list(_walk(PARSERS[language].parse(source).root_node, table, source, 0))


def _scan(path: Path, rel: str, cached: list | None, stats: Counter) -> list | None:
    """The cache entry [mtime_ns, size, language, kind, identifiers, symbols] for one file, or None if skipped."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read; a submodule is a folder
            raise IsADirectoryError
        if cached and cached[:2] == [st.st_mtime_ns, st.st_size]:
            stats["cached"] += 1
            return cached
        why = "too large" if st.st_size > MAX_BYTES else ""
        source = b"" if why else path.read_bytes()
    except OSError:  # a link loop or dangling link, no permission, not a regular file
        why = "unreadable"
    if why := why or "binary" * (b"\0" in source[:8192]):
        stats[why] += 1
        return None
    parsed = _parse(path, rel, source, stats)
    return parsed and [st.st_mtime_ns, st.st_size, *parsed]


def _parse(path: Path, rel: str, source: bytes, stats: Counter) -> list | None:
    """[language, kind, identifiers, symbols] of one file, or None when its grammar fails."""
    language = "cpp" if path.suffix == ".h" and CPP.search(source) else EXTENSIONS[path.suffix.lower()]
    try:
        found = symbols(source, language)
    except Exception:  # a grammar that fails to load or parse costs that file its symbols, never the map
        stats["unparsable"] += 1
        return None
    stats["reparsed"] += 1
    kind = next(
        (k for k, kind in KINDS.items() if kind.search(rel)), "generated" * bool(GENERATED.search(source[:600]))
    )
    return [language, kind, " ".join(dict.fromkeys(IDENTIFIER.findall(source.decode("latin-1")))), found]


def _count_references(cache: dict) -> None:
    """Each symbol's refs: how many other files mention its name (kept identifiers spare re-reading them)."""
    defined = defaultdict(set)
    for rel, symbol in ((rel, s) for rel, entry in cache.items() for s in entry[SYMS]):
        defined[symbol[2]].add(rel)
    refs = Counter()
    for rel, entry in cache.items():
        refs.update(w for w in defined.keys() & set(entry[WORDS].split()) if rel not in defined[w])
    for entry in cache.values():
        for symbol in entry[SYMS]:
            symbol[4:] = [refs[symbol[2]]]


def _load_files(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data["files"] if data.get("version") == CACHE_VERSION else {}
    except (OSError, ValueError, AttributeError, KeyError, TypeError):  # no cache yet, or not one we wrote
        return {}


def _languages(cache: dict) -> str:
    return ", ".join(f"{k} {n}" for k, n in Counter(e[LANG] for e in cache.values()).most_common()) or "none known"


def _full_map(cache: dict) -> str:
    """Every file with symbols, for people and for the agent to read in full: `- L12 def name(args)` by depth."""
    mapped = {rel: entry[SYMS] for rel, entry in sorted(cache.items()) if entry[SYMS]}
    lines = ["# Project map", f"{len(mapped)} files, {sum(map(len, mapped.values()))} symbols ({_languages(cache)})."]
    for rel, found in mapped.items():
        lines += ["", f"## {rel}"] + [f"{'  ' * s[0]}- L{s[1]} {s[3]}" for s in found]
    return "\n".join(lines) + "\n"


def init(root: Path, ignore: list[str]) -> int:
    """Map the project into .amas/map_cache.json and project_map.md, parsing only files changed since the last run."""
    began, root = time.perf_counter(), Path(root).resolve()
    old, stats, cache = _load_files(root / CACHE), Counter(), {}
    files = sorted(
        f
        for f in tools.project_files(root, [*ignore, ".amas"])
        if f.suffix.lower() in EXTENSIONS and os.path.lexists(f)
    )
    if len(files) > PROGRESS and ui.console.is_terminal:
        from rich.progress import track

        files = track(files, "mapping", console=ui.console, transient=True)
    for path in files:
        rel = path.relative_to(root).as_posix()
        if entry := _scan(path, rel, old.get(rel), stats):
            cache[rel] = entry
    _count_references(cache)
    write_private(root / CACHE, json.dumps({"version": CACHE_VERSION, "files": cache}, separators=(",", ":")))
    write_private(root / MAP, _full_map(cache))
    _report(cache, stats, time.perf_counter() - began)
    return 0


def _report(cache: dict, stats: Counter, seconds: float) -> None:
    skipped = {k: n for k, n in stats.items() if k not in ("reparsed", "cached")}
    why = f" ({', '.join(f'{n} {k}' for k, n in skipped.items())})" if skipped else ""
    count = sum(len(e[SYMS]) for e in cache.values())
    ui.success(f"mapped {len(cache)} files, {count} symbols in {seconds:.2f} s → {MAP}")
    done = f"{stats['reparsed']} reparsed, {stats['cached']} cached, {sum(skipped.values())} skipped{why}"
    ui.info(f"{done}; languages: {_languages(cache)}")


def _stem(word: str) -> str:
    return stem if len(stem := SUFFIX.sub("", word.lower())) >= 3 else word.lower()


def _words(text: str) -> set[str]:
    return {_stem(w) for w in WORD.findall(text)}


@functools.lru_cache(maxsize=2)
def _index(path: str, mtime: int, size: int) -> dict:
    """The cache, read once per (path, mtime, size), with what ranking needs: file scores and a word index."""
    files = {rel: entry for rel, entry in _load_files(Path(path)).items() if entry[SYMS]}
    defs = Counter(name for entry in files.values() for name in {s[2]: 0 for s in entry[SYMS]})  # files defining it
    static, postings, names = {}, defaultdict(dict), defaultdict(list)
    for rel, entry in files.items():  # a name common to many files (get, toString, main) says little
        refs = {s[2]: s[4] for s in entry[SYMS]}  # overloads and constructors count once
        static[rel] = sum(math.sqrt(n) / defs[name] for name, n in refs.items()) * (DEMOTED if entry[KIND] else 1)
        names[rel.rsplit("/", 1)[-1]].append(rel)
        for word in (w for s in entry[SYMS] for w in _words(s[2])):  # more symbols on a subject, more weight
            postings[word][rel] = postings[word].get(rel, 0.6) + 0.4
        for word in _words(rel.rsplit(".", 1)[0]):  # a word in the path counts as much as three symbols
            postings[word][rel] = postings[word].get(rel, 0) + 2
    top = max(static.values(), default=1) or 1
    static = {rel: value / top for rel, value in static.items()}
    return dict(files=files, static=static, postings=postings, vocab=sorted(postings), names=names)


def _matches(index: dict, root: str) -> dict[str, float]:
    """Files with a word that starts with root, or that root starts with: `cooki` finds `cookies`, `auth` `authors`."""
    vocab, hits = index["vocab"], {}
    words = [root[:n] for n in range(4, len(root)) if root[:n] in index["postings"]]
    at = bisect_left(vocab, root)
    while at < len(vocab) and vocab[at].startswith(root):
        words.append(vocab[at])
        at += 1
    for word in words:
        for rel, weight in index["postings"][word].items():
            hits[rel] = max(hits.get(rel, 0), weight)
    return hits


@functools.lru_cache(maxsize=8)
def _query_scores(key: tuple, query: str) -> tuple[Counter, frozenset]:
    """Rank added to files by the words of the user's message and the files it names; the message's word roots."""
    index, scores, words = _index(*key), Counter(), query
    for token in re.findall(r"[\w./-]+", query):  # a whole path, or a file name not inside a longer name
        token = token.rstrip(".").removeprefix("./")
        named = [rel for rel in index["files"] if rel == token or rel.endswith("/" + token)] if "/" in token else []
        scores.update(dict.fromkeys(named := named + index["names"].get(token, []), MENTIONED))
        words = words.replace(token, " ") if named else words  # `progress_bar.py` is not a word about bars
    roots = frozenset(_stem(w) for w in WORD.findall(words) if w.lower() not in STOP and len(w) > 2)
    for root in roots:
        if hits := _matches(index, root):
            rarity = math.log(1 + len(index["static"]) / len(hits))
            scores.update({rel: w * rarity * (DEMOTED if index["files"][rel][KIND] else 1) for rel, w in hits.items()})
    return scores, roots


def _block(rel: str, found: list, roots: frozenset) -> str:
    """A file's path and its most referenced symbols (those the user named first), each with its class."""

    def rank(i: int) -> float:
        return math.sqrt(found[i][4]) + 100 * bool(roots and roots & _words(found[i][2]))

    keep, names = set(), set()
    for i in sorted(range(len(found)), key=rank, reverse=True):  # overloads of one name are shown once
        if len(keep) < PER_FILE and found[i][2] not in names:
            keep.add(i)
            names.add(found[i][2])
    for i in list(keep):  # the enclosing class of each method shown
        depth = found[i][0]
        for j in range(i - 1, -1, -1):
            if found[j][0] < depth:
                keep.add(j)
                depth = found[j][0]
    lines = [rel] + [f"{'  ' * (found[i][0] + 1)}{found[i][3][:LINE]}" for i in sorted(keep)]
    more = len(found) - len(keep)
    return "\n".join(lines + ([f"  (+{more} more)"] if more else []))


def prompt_map(root: Path, query: str, touched: set[str], budget: int) -> str:
    """The files that matter most for this message, with their key symbols, in at most ~budget tokens."""
    path = Path(root).resolve() / CACHE
    try:
        key = (str(path), path.stat().st_mtime_ns, path.stat().st_size)
    except OSError:  # init never ran
        return ""
    index, (scores, roots) = _index(*key), _query_scores(key, query)
    rank = {rel: static + scores[rel] + TOUCHED * (rel in touched) for rel, static in index["static"].items()}
    parts, rest, used = [], [], 0  # blocks are tried for at most 30 skipped files: each call stays cheap
    for rel in sorted(rank, key=rank.get, reverse=True):
        block = _block(rel, index["files"][rel][SYMS], roots) if budget * BLOCKS - used > 12 and len(rest) < 30 else ""
        if block and used + _tokens(block) <= budget * BLOCKS:  # one that does not fit is skipped, not the end
            parts.append(block)
            used += _tokens(block)
        else:
            rest.append(rel)
    return "\n".join(parts + _more(rest, budget - used))


def _tokens(text: str) -> float:
    """A cheap token count that errs high: words split at case and underscores, each mark, each line."""
    return 0.9 * len(TOKEN.findall(text))


def _more(rest: list[str], room: float) -> list[str]:
    """Other files by path, in rank order, in the room left."""
    shown, used = [], _tokens("More files: \n")
    for rel in rest:
        if used + _tokens(rel + ",") <= room:  # a long path that does not fit leaves room for shorter ones
            shown.append(rel)
            used += _tokens(rel + ",")
    return [f"More files: {', '.join(shown)}"] if shown else []
