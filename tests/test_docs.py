"""The documents a newcomer reads:
the README stays short, its test command is CI's, its links lead somewhere."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "PLAN.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """The anchors GitHub makes of a Markdown file's headings."""
    titles = re.findall(r"^#+ (.+)$", path.read_text(), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", t.strip().lower()).replace(" ", "-") for t in titles}


def test_readme_is_short():
    assert len((ROOT / "README.md").read_bytes()) <= 10_000


def test_readme_test_command_is_the_one_ci_runs():
    last = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert last.startswith("python3 -m venv .venv") and "pytest" in last
    assert f"\n{last}\n" in (ROOT / "README.md").read_text()


def test_relative_links_lead_to_files_and_headings():
    broken = []
    for doc in DOCS:
        for link in LINK.findall(doc.read_text()):
            if link.startswith(("http://", "https://")):
                continue
            path, _, anchor = link.partition("#")
            target = (doc.parent / path).resolve() if path else doc
            if not target.exists() or (anchor and anchor not in anchors(target)):
                broken.append(f"{doc.name}: {link}")
    assert broken == []
