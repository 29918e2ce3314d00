"""The task bench's tasks: six small projects, each with a prompt and a check that runs code.


Each project is under 60 lines, made fresh as a git repository for every run. A check returns what
is wrong (an empty list: solved): the project's own tests run with `python -m unittest`, hidden
calls or greps of what the task asked for, and the test files compared with their original text (a
task is not solved by editing its test).
"""

import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CHECK_TIMEOUT = (
    60  # seconds for one check's command: a task's code that loops for ever fails its check
)


@dataclass(frozen=True)
class Task:
    name: str
    what: str  # the kind of task, for the table
    prompt: str
    files: dict  # path -> text
    check: Callable  # (Task, repo Path) -> list of what is wrong


def run(repo: Path, *argv: str) -> subprocess.CompletedProcess:
    """A command in the repository, bounded in time; a timeout is a failed command (code 124)."""
    try:
        return subprocess.run(
            list(argv), cwd=repo, capture_output=True, text=True, timeout=CHECK_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"timed out after {CHECK_TIMEOUT} s")


def python(repo: Path, code: str) -> str:
    """What `code` prints, run in the repository (its modules importable); or its error."""
    done = run(repo, sys.executable, "-c", code)
    if done.returncode != 0:
        return (
            f"error: {(done.stderr.strip().splitlines() or ['exit ' + str(done.returncode)])[-1]}"
        )
    return done.stdout.strip()


def tests_pass(repo: Path) -> list[str]:
    done = run(repo, sys.executable, "-m", "unittest", "-q")
    if done.returncode == 0:
        return []
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return [f"the project's tests fail ({tail})"]


def unchanged(task: Task, repo: Path, *paths: str) -> list[str]:
    """The files the task must not touch (its tests), as they were."""
    wrong = []
    for path in paths:
        file = repo / path
        if not file.is_file() or file.read_text() != task.files[path]:
            wrong.append(f"{path} was changed")
    return wrong


def expect(repo: Path, code: str, wanted: str) -> list[str]:
    """What `code` prints must be `wanted` (said by what it prints: `code` ends in one print)."""
    got = python(repo, code)
    if got == wanted:
        return []
    printed = code.rsplit("print(", 1)[-1].removesuffix(")")
    return [f"{printed} gave {got!r}, not {wanted!r}"]


# -- 1. a failing test, named in the prompt -------------------------------------------------------
STATS = '''"""Small statistics helpers."""


def mean(values):
    """The arithmetic mean of values; 0.0 for no values."""
    return sum(values) / len(values)


def spread(values):
    """The largest value less the smallest; 0 for no values."""
    if not values:
        return 0
    return max(values) - min(values)
'''
TEST_STATS = """import unittest

from stats import mean, spread


class StatsTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3]), 2)

    def test_mean_of_nothing(self):
        self.assertEqual(mean([]), 0.0)

    def test_spread(self):
        self.assertEqual(spread([4, 1, 9]), 8)
"""


def check_failing_test(task: Task, repo: Path) -> list[str]:
    return unchanged(task, repo, "test_stats.py") + tests_pass(repo)


# -- 2. a bug found by running the tests ----------------------------------------------------------
TEXTUTIL = '''"""Text helpers for titles and slugs."""

import re


def slugify(title):
    """A URL slug: the title's words in lower case, joined by single hyphens."""
    words = re.findall(r"[A-Za-z0-9]+", title)
    return "-".join(words)


def shorten(text, width):
    """text cut to width characters, ending in '...' when cut."""
    if len(text) <= width:
        return text
    return text[: width - 3] + "..."
'''
TEST_TEXTUTIL = """import unittest

from textutil import shorten, slugify


class TextTest(unittest.TestCase):
    def test_slug(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_slug_with_numbers(self):
        self.assertEqual(slugify("Top 10 Tips"), "top-10-tips")

    def test_shorten(self):
        self.assertEqual(shorten("abcdefghij", 8), "abcde...")

    def test_short_enough(self):
        self.assertEqual(shorten("abc", 8), "abc")
"""


def check_run_tests(task: Task, repo: Path) -> list[str]:
    return unchanged(task, repo, "test_textutil.py") + tests_pass(repo)


# -- 3. a new parameter ---------------------------------------------------------------------------
REPORT = '''"""Format the rows of a report as lines of text."""


def format_row(name, amount):
    """One line: the name, then the amount with two decimals."""
    return f"{name}: {amount:.2f}"


def format_report(rows):
    """All rows, one per line."""
    return "\\n".join(format_row(name, amount) for name, amount in rows)
'''
TEST_REPORT = """import unittest

from report import format_report, format_row


class ReportTest(unittest.TestCase):
    def test_row(self):
        self.assertEqual(format_row("tea", 2.5), "tea: 2.50")

    def test_report(self):
        self.assertEqual(format_report([("a", 1), ("b", 2)]), "a: 1.00\\nb: 2.00")
"""


def check_new_param(task: Task, repo: Path) -> list[str]:
    imported = "from report import format_row as f; "
    wrong = expect(repo, imported + "print(f('tea', 2.5, currency='$'))", "tea: $2.50")
    wrong += expect(repo, imported + "print(f('tea', 2.5))", "tea: 2.50")
    return wrong + unchanged(task, repo, "test_report.py") + tests_pass(repo)


# -- 4. a rename across two files -----------------------------------------------------------------
USERS = '''"""The users this service knows."""

USERS = {1: "ada", 2: "grace"}


def get_usr(user_id):
    """The name of the user with this id, or None."""
    return USERS.get(user_id)
'''
APP = '''"""A tiny command line front end: `python app.py ID` greets the user."""

import sys

from users import get_usr


def greet(user_id):
    name = get_usr(user_id)
    if name is None:
        return "who are you?"
    return f"hello, {name}"


if __name__ == "__main__":
    print(greet(int(sys.argv[1])))
'''
TEST_APP = """import unittest

from app import greet


class AppTest(unittest.TestCase):
    def test_known(self):
        self.assertEqual(greet(1), "hello, ada")

    def test_unknown(self):
        self.assertEqual(greet(3), "who are you?")
"""


def check_rename(task: Task, repo: Path) -> list[str]:
    left = [p.name for p in sorted(repo.glob("*.py")) if re.search(r"\bget_usr\b", p.read_text())]
    wrong = []
    if left:
        wrong.append(f"get_usr is still in {', '.join(left)}")
    wrong += expect(repo, "import users; print(users.get_user(2))", "grace")
    wrong += expect(repo, "import app; print(app.greet(1))", "hello, ada")
    return wrong + unchanged(task, repo, "test_app.py") + tests_pass(repo)


# -- 5. a fix in a file the prompt does not name --------------------------------------------------
PRICING = '''"""Prices after discounts."""


def discounted(price, percent):
    """The price less `percent` per cent of it."""
    return price - percent / 100
'''
SHOP = (
    '"""`python shop.py PRICE PERCENT` prints the price to pay '
    'after a discount of PERCENT per cent."""\n'
    """
import sys

from pricing import discounted


def main(argv):
    price = float(argv[0])
    percent = float(argv[1])
    print(f"{discounted(price, percent):.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
"""
)


def check_unnamed_file(task: Task, repo: Path) -> list[str]:
    wrong = []
    for argv, wanted in ((("200", "10"), "180.00"), (("50", "50"), "25.00")):
        done = run(repo, sys.executable, "shop.py", *argv)
        if done.stdout.strip() != wanted:
            wrong.append(f"shop.py {' '.join(argv)} printed {done.stdout.strip()!r}, not {wanted}")
    return wrong + expect(repo, "import pricing; print(pricing.discounted(80, 25))", "60.0")


# -- 6. a README convention to follow -------------------------------------------------------------
README = "\n".join(
    [
        "# units",
        "",
        "Unit converters.",
        "",
        "## Conventions",
        "",
        "- A converter is a function named `<from>_to_<to>` (lower case) in "
        "`convert.py`, with a one-line docstring.",
        "- Every converter is registered in the `CONVERTERS` table at the end "
        "of `convert.py`, under its name.",
        "- Every converter has a test in `test_convert.py`.",
        "",
    ]
)
CONVERT = '''"""Unit converters (README.md says how to add one)."""


def km_to_miles(km):
    """Kilometres to miles."""
    return km * 0.621371


def kg_to_pounds(kg):
    """Kilograms to pounds."""
    return kg * 2.204623


CONVERTERS = {
    "km_to_miles": km_to_miles,
    "kg_to_pounds": kg_to_pounds,
}
'''
TEST_CONVERT = """import unittest

from convert import kg_to_pounds, km_to_miles


class ConvertTest(unittest.TestCase):
    def test_km_to_miles(self):
        self.assertAlmostEqual(km_to_miles(10), 6.21371)

    def test_kg_to_pounds(self):
        self.assertAlmostEqual(kg_to_pounds(2), 4.409246)
"""
CONVERTED = "from convert import *; print(round(celsius_to_fahrenheit(100), 6))"
CONVERTED_40 = "from convert import *; print(round(celsius_to_fahrenheit(-40), 6))"
DOCUMENTED = "from convert import *; print(bool((celsius_to_fahrenheit.__doc__ or '').strip()))"
REGISTERED = "from convert import *; print(CONVERTERS.get('celsius_to_fahrenheit') is "
REGISTERED += "celsius_to_fahrenheit)"


def check_readme_convention(task: Task, repo: Path) -> list[str]:
    wrong = expect(repo, CONVERTED, "212.0") + expect(repo, CONVERTED_40, "-40.0")
    wrong += expect(repo, DOCUMENTED, "True") + expect(repo, REGISTERED, "True")
    test = repo / "test_convert.py"
    if not test.is_file() or "celsius_to_fahrenheit" not in test.read_text():
        wrong.append("test_convert.py has no test of celsius_to_fahrenheit")
    return wrong + tests_pass(repo)


TASKS = [
    Task(
        "failing-test",
        "a failing test named in the prompt",
        "The test test_mean_of_nothing in test_stats.py fails. Fix the code so that it passes.",
        {"stats.py": STATS, "test_stats.py": TEST_STATS},
        check_failing_test,
    ),
    Task(
        "run-tests",
        "a bug found by running the tests",
        "Some of this project's tests fail. Run them with `python -m unittest`, find the bug and "
        "fix it.",
        {"textutil.py": TEXTUTIL, "test_textutil.py": TEST_TEXTUTIL},
        check_run_tests,
    ),
    Task(
        "new-param",
        "a new parameter",
        "Add a parameter `currency` to format_row in report.py, an empty string by default, "
        "written just before the amount: format_row('tea', 2.5, currency='$') returns "
        "'tea: $2.50'.",
        {"report.py": REPORT, "test_report.py": TEST_REPORT},
        check_new_param,
    ),
    Task(
        "rename",
        "a rename across two files",
        "Rename the function get_usr to get_user everywhere in this project.",
        {"users.py": USERS, "app.py": APP, "test_app.py": TEST_APP},
        check_rename,
    ),
    Task(
        "unnamed-file",
        "a fix in a file the prompt does not name",
        "`python shop.py 200 10` prints 199.90, but 200 with a 10% discount should be 180.00. "
        "Fix the bug.",
        {"shop.py": SHOP, "pricing.py": PRICING},
        check_unnamed_file,
    ),
    Task(
        "readme-convention",
        "a README convention to follow",
        "Add a converter from Celsius to Fahrenheit.",
        {"README.md": README, "convert.py": CONVERT, "test_convert.py": TEST_CONVERT},
        check_readme_convention,
    ),
]


def make_repo(task: Task, repo: Path) -> None:
    """The task's project as a fresh git repository with one commit."""
    repo.mkdir(parents=True)
    for path, text in task.files.items():
        (repo / path).write_text(text)
    steps = [["init", "-q", "-b", "main"], ["config", "user.name", "Bench"]]
    steps += [
        ["config", "user.email", "bench@example.com"],
        ["add", "-A"],
        ["commit", "-qm", "the project"],
    ]
    for argv in steps:
        subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True)
