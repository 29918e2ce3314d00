"""`amas init`: map each file's classes and functions with tree-sitter into .amas/project_map.md."""

import json
import os
import re
import stat
import time
from collections import Counter
from pathlib import Path

from amas_code import tools, ui

CACHE_VERSION = 1  # bump when the tables below change, so older caches are parsed again
MAX_BYTES = 1_000_000  # bigger files (generated, minified) are listed without symbols
SIGNATURE = 120  # characters of a signature kept
PROGRESS = 200  # files above which a progress bar is shown
DEF, CLASS, WALK = "def", "class", "walk"  # list it; list it and its members; look inside it

PY = {"function_definition": DEF, "class_definition": CLASS, "decorated_definition": WALK, "block": WALK}
JS = {"function_declaration": DEF, "generator_function_declaration": DEF, "class_declaration": CLASS,
      "class_body": WALK, "method_definition": DEF, "export_statement": WALK, "lexical_declaration": WALK,
      "variable_declaration": WALK, "variable_declarator": DEF}
TS = {**JS, "abstract_class_declaration": CLASS, "interface_declaration": DEF, "type_alias_declaration": DEF,
      "enum_declaration": DEF, "function_signature": DEF, "abstract_method_signature": DEF, "ambient_declaration": WALK}
GO = {"function_declaration": DEF, "method_declaration": DEF, "type_declaration": DEF}
RUST = {"function_item": DEF, "function_signature_item": DEF, "struct_item": DEF, "enum_item": DEF, "trait_item": CLASS,
        "impl_item": CLASS, "mod_item": CLASS, "declaration_list": WALK}
JAVA = {"class_declaration": CLASS, "interface_declaration": CLASS, "enum_declaration": CLASS,
        "record_declaration": CLASS, "class_body": WALK, "interface_body": WALK, "enum_body": WALK,
        "enum_body_declarations": WALK, "method_declaration": DEF, "constructor_declaration": DEF}
C = {"function_definition": DEF, "struct_specifier": DEF, "union_specifier": DEF, "type_definition": DEF,
     "preproc_if": WALK, "preproc_ifdef": WALK, "preproc_else": WALK, "preproc_elif": WALK}
CPP = {**C, "struct_specifier": CLASS, "class_specifier": CLASS, "field_declaration_list": WALK,
       "namespace_definition": CLASS, "declaration_list": WALK, "template_declaration": WALK,
       "linkage_specification": WALK}
LANGUAGES = {  # name -> (grammar package, its language function, node table)
    "python": ("tree_sitter_python", "language", PY), "javascript": ("tree_sitter_javascript", "language", JS),
    "typescript": ("tree_sitter_typescript", "language_typescript", TS),
    "tsx": ("tree_sitter_typescript", "language_tsx", TS), "go": ("tree_sitter_go", "language", GO),
    "rust": ("tree_sitter_rust", "language", RUST), "java": ("tree_sitter_java", "language", JAVA),
    "c": ("tree_sitter_c", "language", C), "cpp": ("tree_sitter_cpp", "language", CPP)}
EXTENSIONS = {".py": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
              ".ts": "typescript", ".tsx": "tsx", ".go": "go", ".rs": "rust", ".java": "java", ".c": "c", ".h": "c",
              ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp"}
FUNCTIONS = {"arrow_function", "function_expression", "function", "generator_function"}
SPACES = re.compile(r"(?<=[(\[]) |,? (?=[)\]])")  # left by joining a signature split over lines: `f( a, )`
PARSERS = {}  # language -> tree_sitter.Parser, made when a file of that language first appears


def _body(node):
    """The node's block: its body, or the body of its type (typedef struct) or value (const f = () => ...)."""
    body = node.child_by_field_name("body")
    for field in ("type", "value"):
        if body is None and (owner := node.child_by_field_name(field)) is not None:
            body = owner.child_by_field_name("body")
    return body


GUARDS = {  # listed only when the check passes: a typedef of a struct with fields, a const holding a function
    "struct_specifier": _body, "class_specifier": _body, "union_specifier": _body, "type_definition": _body,
    "variable_declarator": lambda n: getattr(n.child_by_field_name("value"), "type", None) in FUNCTIONS}


def _signature(node, source: bytes) -> str:
    """The definition on one line with its body left out: `def foo(a, b) -> int`, `impl Display for Point`."""
    start, body = node.start_byte, _body(node)
    if body is None:
        text = source[start:node.end_byte].split(b"\n", 1)[0][:4 * SIGNATURE]
    else:  # a comment before the body is left out; what follows it is kept for C's `typedef struct {} name;`
        end = body
        while (before := end.prev_sibling) is not None and before.type.endswith("comment"):
            end = before
        text = source[start:min(end.start_byte, start + 4 * SIGNATURE)] + source[body.end_byte:node.end_byte][:80]
    line = SPACES.sub("", " ".join(text.decode("utf-8", errors="replace").split())).rstrip(" {:;=")
    return line if len(line) <= SIGNATURE else line[:SIGNATURE - 1] + "…"


def _walk(node, table: dict, source: bytes, depth: int, out: list) -> None:
    for child in node.children:
        kind, guard = table.get(child.type), GUARDS.get(child.type)
        if kind is None or (guard is not None and not guard(child)):
            continue
        if kind != WALK:
            name = child.child_by_field_name("name") or child
            out.append([depth, name.start_point.row + 1, _signature(child, source)])
        if kind != DEF:
            _walk(child, table, source, depth + (kind == CLASS), out)


def symbols(source: bytes, language: str) -> list[list]:
    """[depth, 1-based line, signature] for each class, function and method in source."""
    module, function, table = LANGUAGES[language]
    if language not in PARSERS:
        import importlib

        from tree_sitter import Language, Parser

        PARSERS[language] = Parser(Language(getattr(importlib.import_module(module), function)()))
    out = []
    _walk(PARSERS[language].parse(source).root_node, table, source, 0, out)
    return out


def _scan(path: Path, language: str, cached: list | None, stats: Counter) -> list | None:
    """The cache entry [mtime_ns, size, symbols] for one file, or None when it is skipped."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read; a submodule is a folder
            raise IsADirectoryError
        if cached and cached[:2] == [st.st_mtime_ns, st.st_size]:
            stats["cached"] += 1
            return cached
        if st.st_size > MAX_BYTES:
            stats["too large"] += 1
            return None
        source = path.read_bytes()
    except OSError:  # a link loop or dangling link, no permission, not a regular file
        stats["unreadable"] += 1
        return None
    if b"\0" in source[:8192]:
        stats["binary"] += 1
        return None
    try:
        found = symbols(source, language)
    except Exception:  # a grammar that fails to load or parse costs that file its symbols, never the map
        stats["unparsable"] += 1
        return None
    stats["reparsed"] += 1
    return [st.st_mtime_ns, st.st_size, found]


def run(root: Path, config: dict) -> int:
    """Map the project into .amas/project_map.md, parsing only files changed since the last run."""
    began, root = time.perf_counter(), Path(root).resolve()
    cache_file, map_file = root / ".amas" / "map_cache.json", root / ".amas" / "project_map.md"
    try:
        old = json.loads(cache_file.read_text(encoding="utf-8"))
        old = old["files"] if old.get("version") == CACHE_VERSION else {}
    except (OSError, ValueError, AttributeError, KeyError):  # no cache yet, or not one we wrote
        old = {}
    ignore = [*(config.get("ignore") or []), ".amas"]  # never map our own output
    files = sorted(f for f in tools.project_files(root, ignore) if os.path.lexists(f))  # git lists deleted ones
    if len(files) > PROGRESS and ui.console.is_terminal:
        from rich.progress import track

        files = track(files, "mapping", console=ui.console, transient=True)
    stats, cache, sections, languages = Counter(), {}, {}, Counter()
    for path in files:
        rel, language = path.relative_to(root).as_posix(), EXTENSIONS.get(path.suffix.lower())
        entry = _scan(path, language, old.get(rel), stats) if language else None
        if entry:
            cache[rel] = entry
            languages[language] += 1
        sections[rel] = entry[2] if entry else []
    count, langs = sum(map(len, sections.values())), ", ".join(f"{k} {n}" for k, n in languages.most_common())
    lines = ["# Project map", f"{len(sections)} files, {count} symbols ({langs or 'no known language'})."]
    for rel, found in sections.items():
        lines += ["", f"## {rel}"] + [f"{'  ' * depth}- L{line} {sig}" for depth, line, sig in found]
    map_file.parent.mkdir(parents=True, exist_ok=True)
    map_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    partial = cache_file.with_suffix(".tmp")  # written whole, then renamed: Ctrl+C never leaves half a cache
    partial.write_text(json.dumps({"version": CACHE_VERSION, "files": cache}), encoding="utf-8")
    os.replace(partial, cache_file)
    skips = {why: n for why, n in stats.items() if why not in ("reparsed", "cached")}
    why = f" ({', '.join(f'{n} {why}' for why, n in skips.items())})" if skips else ""
    ui.success(f"mapped {len(sections)} files, {count} symbols in {time.perf_counter() - began:.2f} s"
               " → .amas/project_map.md")
    ui.info(f"{stats['reparsed']} reparsed, {stats['cached']} cached, {sum(skips.values())} skipped{why}; "
            f"languages: {langs or 'none known'}")
    return 0
