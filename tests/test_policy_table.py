"""The gate as data: rows of (config, effect) -> verdict, judged by policy.Gate directly (no agent,
no model, nothing run). One end-to-end test per rule kind stays beside the CLI (test_safety,
test_trust)."""

import pytest
from conftest import git, make_config

from amas_code import policy, project
from amas_code.effects import Change, Command, Verdict

RULES = {
    "allow": ["echo *", "touch *", "cp *", "printf *", "ls *"],
    "deny": ["rm -rf *", "sudo *", "git push *"],
    "env": [],
}
YES = {"auto_accept": True}
LIMIT = make_config()["shell_timeout"]  # the most a command may take unasked
ASK = ("ask", "shell")
DENY = ("deny", "")
ALLOW = ("allow", "")

# (a shell line, its verdict with the rules above and no --yes)
SHELL = [
    # allow rules: every simple command of a plain line matches one
    ("echo hi", ALLOW),
    ("echo a && touch b.txt | cp b.txt c.txt", ALLOW),
    ("ls -la 2>/dev/null", ALLOW),
    ("echo src/*.py", ALLOW),  # a glob that stays in the project
    ("echo hi > out.txt", ALLOW),
    ("make", ASK),
    ("echo ok; make", ASK),
    ("echo ok && make", ASK),
    ("echo ok || make", ASK),
    ("echo ok | make", ASK),
    ("echo ok & make", ASK),
    ("PATH=. ls -la", ASK),  # an assignment is a word of the command: no rule says `PATH=. ls *`
    ("X=1; ls -la", ASK),
    # hidden constructs: substitutions, subshells, groups, compound commands, newlines never match
    ("echo $(make)", ASK),
    ("echo `make`", ASK),
    ("echo ok\necho two", ASK),
    ("(echo hi)", ASK),
    ("{ echo hi; }", ASK),
    ("if true; then echo hi; fi", ASK),
    ("! echo hi", ASK),
    ("f() { echo hi; }; f", ASK),
    ("coproc x { echo hi; }", ASK),  # a reserved word the grammar takes for a command name
    ("echo <(ls)", ASK),
    ("echo 'unclosed", ASK),  # a line the parser cannot read whole
    ("echo ok &&", ASK),
    ("printf -v x[\\$\\(id\\>../pwned\\)] %s hi", ASK),  # arithmetic in a subscript runs `id`
    ("printf -v x[$\\(id\\)] %s hi", ASK),
    ("printf ${X:=$'a[\\x24(id>pwned)]'} $[X]", ASK),
    ("printf %s $'\\x24(id)' ${X}", ASK),
    ('printf $"x" a', ASK),
    ("printf -v 'b[X]' 1", ASK),
    # an allowed program's arguments and redirections stay in the project and out of .git
    ("touch ../pwned", ASK),
    ("touch .git/pwned", ASK),
    ("touch ~/pwned", ASK),
    ("touch --reference=README.md ../pwned", ASK),
    ("touch x --no-create=../pwned", ASK),
    ("cp -t.. pwned.src", ASK),
    ("cp >/dev/null ~/.ssh/id_rsa x", ASK),  # a word after a redirection is still an argument
    ("touch .?/pwned", ASK),  # the shell expands a glob: `.?` may be `..`, `.gi?` `.git`
    ("touch .*/pwned", ASK),
    ("touch .gi?/pwned", ASK),
    ("touch .G[I]T/pwned", ASK),
    ("touch l?k/pwned", ASK),  # `lnk`, a link out of the project (without it: allowed)
    ("echo ok > ../pwned", ASK),
    ("echo ok >> /tmp/amas-pwned-$$", ASK),
    ("echo '[core] fsmonitor = touch pwned' >> .git/config", ASK),
    ("echo '[core] fsmonitor = touch pwned' >> .Git/config", ASK),
    ("'echo /../../../../usr/bin/touch' pwned", ASK),  # a program named `echo ` in a folder
]
# deny rules: each refuses, whatever the spelling, wrapper or place in the grammar
DENIED = [
    "rm -rf victim",
    "rm  -rf victim",
    "rm\t-rf victim",
    "rm -fr victim",
    "rm -r -f victim",
    "rm victim -rf",
    "rm -Rf victim",
    "rm --recursive --force victim",
    "/bin/rm -rf victim",
    "\\rm -rf victim",
    "'rm' -rf victim",
    "r\\\nm -rf victim",  # a line continuation inside the name
    "/bin/r? -rf victim",  # the shell finds the program a glob names
    "/usr/bin/r[m] -rf victim",
    '"$(echo rm)" -rf victim',  # a program named by a substitution or a variable may be any
    "X=rm; $X -rf victim",
    "S=sudo; $S reboot",
    "true; rm -rf victim",
    "echo x && sudo reboot",
    "{ rm -rf victim; }",
    "(rm -rf victim)",
    "if true; then rm -rf victim; fi",
    "while true; do rm -rf victim; done",
    "case a in a) rm -rf victim;; esac",
    "! rm -rf victim",
    "f() { rm -rf victim; }; f",
    "coproc rm -rf victim",
    "bash <<EOF\nrm -rf victim\nEOF",
    "sh < <(echo rm -rf victim)",
    "export A=$(rm -rf victim)",
    "for i in $(rm -rf victim); do :; done",
    "echo $(rm -rf victim)",
    "echo `rm -rf victim`",
    "cat <(rm -rf victim)",
    ":; rm -rf victim #'",  # a quote the parser cannot close, in a comment
    "rm -rf victim '",  # a line the parser cannot read whole is still judged
    "bash -c 'rm -rf victim'",
    'sh -c "rm -rf victim"',
    "sh -c -- 'rm -rf victim'",
    "sudo -u a bash -c 'rm -fr victim'",
    "env rm -rf victim",
    "env FOO=1 rm -rf victim",
    "env -S'rm -rf victim'",
    "command rm -rf victim",
    "echo victim | xargs rm -rf",
    "find . -name victim -exec rm -rf {} +",
    "find . -exec sh -c 'rm -rf victim' \\;",
    "timeout 5 nice -n 3 rm -rf victim",
    "setsid nohup rm -rf victim &",
    "ionice rm -rf victim",
    "flock /tmp/lock rm -rf victim",
    "flock .lk -c 'rm -rf victim'",
    "watch 'rm -rf victim'",
    "trap 'rm -rf victim' EXIT",
    "echo 'rm -rf victim' | sh",  # a shell reading its commands from its input
    "printf 'rm -rf victim\\n' | bash -s",
    "printf '%s\\n' 'rm -rf victim' | sh",
    "bash <<< 'rm -rf victim'",
    "echo 'rm -rf victim' | . /dev/stdin",
    "git -c 'alias.x=!rm -rf victim' x",  # a git alias runs a shell line
    "git -C . push origin main",  # git's own options before the command
    "git -c x.y=z push",
    "git --git-dir=.git --no-pager push -f",
    "nice " * 300 + "rm -rf victim",  # each wrapper's words tried once: bounded work, not n!
]


@pytest.fixture
def gate(bare):
    """The gate of a fresh project with RULES, in a home of its own,
    with what the rows name made."""
    (bare / "pwned.src").write_text("x\n")
    (bare / "echo ").mkdir()
    (bare / "lnk").symlink_to(bare.parent)

    def made(**config) -> policy.Gate:
        return policy.Gate(make_config(permissions=RULES, **config), bare)

    return made


def shown(verdict) -> tuple[str, str]:
    return verdict.decision, verdict.kind


@pytest.mark.parametrize("line, verdict", SHELL)
def test_shell_lines(gate, line, verdict):
    assert shown(gate().judge(Command(line, LIMIT))) == verdict


@pytest.mark.parametrize("line", DENIED)
def test_deny_rules_refuse_under_yes(gate, line):
    refused = gate(**YES).judge(Command(line, LIMIT))
    assert refused.decision == "deny" and "deny rule" in refused.reason


@pytest.mark.parametrize(
    "line", ["sudo rm -rf victim", "sudo -u a bash -c 'rm -fr victim'", "nohup rm -fr victim"]
)
def test_a_wrapper_is_judged_by_the_command_it_runs(bare, line):
    """With only `rm -rf *` denied, sudo and its like are seen through to the rm they run."""
    rules = {"allow": [], "deny": ["rm -rf *"], "env": []}
    gate = policy.Gate(make_config(permissions=rules, **YES), bare)
    refused = gate.judge(Command(line, LIMIT))
    assert refused.decision == "deny" and "the deny rule 'rm -rf *'" in refused.reason


@pytest.mark.parametrize(
    "config, line, timeout, verdict",
    [
        (YES, "make", LIMIT, ALLOW),  # --yes answers a command's question
        (YES, "D=/bin; $D/echo fine", LIMIT, ALLOW),  # a variable folder is no unknown program
        (YES, "make", LIMIT + 1, ("ask", "timeout")),  # but not a time above shell_timeout
        ({}, "echo hi", LIMIT + 1, ("ask", "timeout")),  # nor does an allow rule
        ({"shell_timeout": 5}, "echo hi", 5, ALLOW),
    ],
)
def test_yes_and_the_timeout_ceiling(gate, config, line, timeout, verdict):
    assert shown(gate(**config).judge(Command(line, timeout))) == verdict


def test_without_a_sandbox_every_command_is_asked_even_allowed_and_under_yes(bare):
    gate = policy.Gate(make_config(permissions=RULES, **YES), bare, sandbox="unavailable")
    assert shown(gate.judge(Command("echo hi", LIMIT))) == ("ask", "unboxed")
    assert shown(gate.judge(Command("rm -rf victim", LIMIT))) == DENY


@pytest.mark.parametrize(
    "path, plain, under_yes",
    [
        ("README.md", ALLOW, ALLOW),
        ("../elsewhere.txt", ("ask", "read"), ALLOW),  # outside the project: --yes reads it
        ("/usr/include/stdio.h", ("ask", "read"), ALLOW),
        ("~/notes.txt", ("ask", "read"), ALLOW),
        ("~/.ssh/id_rsa", ("ask", "secret"), ("ask", "secret")),  # credential places: never --yes
        ("~/.aws/credentials", ("ask", "secret"), ("ask", "secret")),
        ("/proc/self/environ", ("ask", "secret"), ("ask", "secret")),
        ("~/.config/fish/config.fish", ("ask", "secret"), ("ask", "secret")),  # a home dot-file
        ("~/.bashrc", ("ask", "secret"), ("ask", "secret")),
        ("~", ("ask", "secret"), ("ask", "secret")),  # a folder holding them all
        ("/", ("ask", "secret"), ("ask", "secret")),
        ("~/.rustup/settings.toml", ("ask", "read"), ALLOW),  # the toolchain's places
        ("~/.cargo/registry/src/x/lib.rs", ("ask", "read"), ALLOW),
        ("~/.cargo/credentials.toml", ("ask", "secret"), ("ask", "secret")),
    ],
)
def test_reads(gate, path, plain, under_yes):
    asked = gate().judge_path(project.resolved(gate().root, path))
    assert shown(asked) == plain
    assert shown(gate(**YES).judge_path(project.resolved(gate().root, path))) == under_yes


@pytest.mark.parametrize(
    "where",
    [
        ".pgpass",
        ".vault-token",
        ".config/rclone/rclone.conf",
        ".bash_history",
        ".config/git/credentials",
        ".config/containers/auth.json",
        ".m2/settings.xml",
        ".gradle/gradle.properties",
    ],
)
def test_more_credential_places_are_asked_even_under_yes(gate, where):
    asked = gate(**YES).judge_path(project.resolved(gate().root, f"~/{where}"))
    assert shown(asked) == ("ask", "secret") and "which holds credentials" in asked.reason


@pytest.mark.parametrize(
    "path, verb, old, plain, under_yes",
    [
        ("src/new.py", "create", None, ("ask", "edit"), ALLOW),
        ("README.md", "edit", b"# demo\n", ("ask", "edit"), ALLOW),
        ("shot.png", "screenshot", None, ALLOW, ALLOW),  # a new picture replaces nothing
        ("shot.png", "screenshot", b"png", ("ask", "edit"), ALLOW),
        (".git/config", "write", b"", ("ask", "write"), ("ask", "write")),  # git runs what it names
        (".GIT/hooks/pre-commit", "create", None, ("ask", "write"), ("ask", "write")),
        (".git/hooks/pre-commit", "create", None, ("ask", "write"), ("ask", "write")),
        ("vendor/lib/.git/hooks/post-checkout", "create", None, ("ask", "write"), ("ask", "write")),
        ("../outside.txt", "write", None, ("ask", "write"), ("ask", "write")),  # all writes outside
        # what steers amas or the user's tools: asked in every case, never by --yes
        (".amas/config.yaml", "write", None, ("ask", "write"), ("ask", "write")),
        ("AGENTS.md", "edit", b"", ("ask", "write"), ("ask", "write")),
        ("CLAUDE.md", "edit", b"", ("ask", "write"), ("ask", "write")),  # AGENTS.md's target
        (".husky/pre-commit", "create", None, ("ask", "write"), ("ask", "write")),
        ("lefthook-local.yml", "create", None, ("ask", "write"), ("ask", "write")),
        (".pre-commit-config.yaml", "create", None, ("ask", "write"), ("ask", "write")),
        (".vscode/tasks.json", "create", None, ("ask", "write"), ("ask", "write")),
        ("api/.envrc", "create", None, ("ask", "write"), ("ask", "write")),  # in any folder
        ("dev.code-workspace", "create", None, ("ask", "write"), ("ask", "write")),
        (".config/mise/config.toml", "create", None, ("ask", "write"), ("ask", "write")),
        ("tools/hooks/pre-push", "create", None, ("ask", "write"), ("ask", "write")),  # hooksPath
        ("docs/vscode.md", "create", None, ("ask", "edit"), ALLOW),  # a name that steers nothing
        ("~/.bashrc", "edit", b"", ("ask", "secret"), ("ask", "secret")),
        ("~/.ssh/authorized_keys", "edit", b"", ("ask", "secret"), ("ask", "secret")),
    ],
)
def test_writes(gate, path, verb, old, plain, under_yes):
    (gate().root / "CLAUDE.md").write_text("rules\n")
    (gate().root / "AGENTS.md").symlink_to("CLAUDE.md")
    git(gate().root, "init", "-q")
    git(gate().root, "config", "core.hooksPath", "tools/hooks")
    change = Change(project.resolved(gate().root, path, write=True), old, b"new", verb)
    assert shown(gate().judge(change)) == plain
    assert shown(gate(**YES).judge(change)) == under_yes


@pytest.mark.parametrize(
    "kind, under_yes",
    [
        ("edit", "allow"),
        ("shell", "allow"),
        ("read", "allow"),
        ("net", "allow"),
        ("many", "allow"),
        ("grant", "ask"),
        ("unboxed", "ask"),
        ("write", "ask"),
        ("secret", "ask"),
        ("timeout", "ask"),
        ("copy", "ask"),
        ("memory", "ask"),
    ],
)
def test_kinds_of_question_and_yes(gate, kind, under_yes):
    """Which questions --yes answers: every kind is listed, and each is settled or not."""
    kinds = {"edit", "shell", "read", "net", "many", "grant", "unboxed", "write", "secret"}
    assert set(policy.KINDS) == kinds | {"timeout", "copy", "memory"}
    asked = Verdict("ask", kind, "?", key="k")
    assert gate(**YES).settled(asked).decision == under_yes


def test_hosts_and_the_way_out_of_the_box(gate):
    assert shown(gate().judge_host("https://example.com/a")) == ("ask", "net")
    assert shown(gate(**YES).judge_host("https://example.com/a")) == ALLOW
    grant = gate(**YES).settled(gate(**YES).judge_grant("make", "network"))
    assert shown(grant) == ("ask", "grant")  # --yes never lets a command out


def test_shell_lines_split_into_simple_commands():
    assert policy.split("a -x 'b c' | d 2>/dev/null && e > out.txt") == (
        [["a", "-x", "b c"], ["d"], ["e"]],
        ["/dev/null", "out.txt"],
        True,
    )
    assert policy.split("{ a; } && if b; then c $(d); fi")[0] == [
        ["a"],
        ["b"],
        ["c", "$(d)"],
        ["d"],
    ]
    for line in ("echo $(id)", "(cd x; ls)", "if true; then ls; fi", "a\nb", "a '"):
        assert policy.split(line)[2] is False, line
