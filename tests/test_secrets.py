"""Secrets: hidden where they are real, shown
where they are not, and edits that work on lines holding them."""

import json
from pathlib import Path

import pytest
from conftest import git, history_file, make_config, run_amas, toolbox

from amas_code import redact
from amas_code.checkpoint import Checkpoint

CORPUS = Path(__file__).parent / "corpus"
ENV = (
    "DEBUG=1\nSTRIPE_SECRET_KEY=sk_live_51HqLyjWDarjtT1zdp7dc\nDB_PASSWORD=Xq7!mP2vL9zR\nHOST=db\n"
)
KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nq9Zx2Lm4Nv6Bt9Rk3\n"
    "-----END RSA PRIVATE KEY-----\n"
)


def corpus(name: str) -> list[str]:
    """The lines of a corpus file, without its comment lines."""
    text = (CORPUS / name).read_text()
    return [line for line in text.splitlines() if not line.startswith("#")]


def edit(box, old: str, new: str, path: str = ".env") -> str:
    """What edit_file answers the model."""
    return box.execute("edit_file", json.dumps({"path": path, "old_str": old, "new_str": new}))


# -- what is hidden and what is not ----------------------------------------------------------------


def test_ordinary_code_comes_through_unchanged(bare):
    """Placeholders, references and the test fixtures of flask and httpx are no secrets."""
    secrets = redact.Secrets(make_config())
    hidden = [line for line in corpus("ordinary.txt") if secrets.redact(line) != line]
    assert hidden == []


def test_real_looking_secrets_stay_hidden(bare):
    secrets = redact.Secrets(make_config())
    rows = [line.split("\t") for line in corpus("secrets.txt")]
    shown = [line for line, value in rows if value in secrets.redact(line)]
    assert len(rows) > 25 and shown == []


REAL_NO_SECRETS = [  # lines hidden before, from the 408 that named values hid in 13 repositories
    # gothinkster/node-express-realworld-example-app 30b68e1 package.json, package-lock.json: the
    # model could not see which jsonwebtoken it bumps
    '"jsonwebtoken": "^9.0.2",',
    '"cookie": "0.5.0",',
    '"path-key": "^3.1.0",',
    # docker/awesome-compose 18f59bd react-express-mysql/backend/package-lock.json
    '"basic-auth": "~2.0.1",',
    # ShishirPatil/gorilla 6ea57973 agent-arena/client/src/components/UserProfile.js
    "headers: { Authorization: `Bearer ${localStorage.getItem('token')}` }",
    "const headers = token ? { Authorization: `Bearer ${token}` } : {};",
]


def test_versions_and_template_literals_are_no_secrets(bare):
    secrets = redact.Secrets(make_config())
    assert [line for line in REAL_NO_SECRETS if secrets.redact(line) != line] == []


def test_a_secret_between_backticks_is_hidden(bare):
    """A Go raw string, a JavaScript template literal with no field: quoted like any other
    (gitleaks' `go - backticks` form; 120 services' key shapes in it were shown before)."""
    secrets = redact.Secrets(make_config())
    lines = ["apiKey := `Zx9Qw7eP4mK2aB3c`", "const token = `9fK2mL5nP8qR1sT4`"]
    assert [secrets.redact(line) for line in lines] == [
        "apiKey := `[REDACTED]`",
        "const token = `[REDACTED]`",
    ]


def test_git_author_is_no_secret_name(project, monkeypatch):
    """GIT_AUTHOR_NAME holds AUTH but names no secret: commands get it and git log shows the author.
    Nor does TIKTOKEN_CACHE_DIR: taken out of amas's environment,
    litellm's tokenizer went online."""
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Jane Maintainer")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/opt/tokenizers")
    monkeypatch.setenv("DEPLOY_TOKEN", "dpl-5e3cr3t-value")
    monkeypatch.setenv("PGPASSWORD", "pg-5e3cr3t-value")
    box = toolbox(project, auto_accept=True, sandbox="off")  # a commit writes .git: not in the box
    command = (
        "git commit -q --allow-empty -m x && git log -1 --format=%an; "
        "echo [$DEPLOY_TOKEN$PGPASSWORD]"
    )
    said = box.execute("shell_command", json.dumps({"command": command}))
    assert "Jane Maintainer\n[]" in said
    assert git(project, "log", "-1", "--format=%an") == "Jane Maintainer\n"
    # amas keeps it for itself (commands get an allow-list, which has no use for it)
    assert redact.without_secrets(make_config())["TIKTOKEN_CACHE_DIR"] == "/opt/tokenizers"


ATTACKS = {  # the review's attacks (issue 41): a value whose name says secret, read by the model
    "words in quotes": ("settings.py", 'SECRET_KEY="correct horse battery staple"\n'),
    "lowercase name": (".env", "db_password=correcthorsebatterystaple\n"),
    "camelCase in JSON": (
        "keys.json",
        '{"privateKey": "purple monkey dishwasher", "accessKey": "Zx9Qw7eP4mK2"}\n',
    ),
    "slash in a URL password": (
        ".env",
        "DATABASE_URL=postgres://admin:Zx9/Qw7eP4@db.example:5432/app\n",
    ),
    "fish set -x": (
        "fish/config.fish",
        "set -x DEPLOY_TOKEN 9fK2mL5nP8qR1sT4\nset -gx EDITOR vim\n",
    ),
}
HIDDEN = {  # what of each must not reach the model
    "words in quotes": ["correct horse battery staple"],
    "lowercase name": ["correcthorsebatterystaple"],
    "camelCase in JSON": ["purple monkey dishwasher", "Zx9Qw7eP4mK2"],
    "slash in a URL password": ["Zx9", "Qw7eP4"],
    "fish set -x": ["9fK2mL5nP8qR1sT4"],
}


@pytest.mark.parametrize("attack", ATTACKS, ids=ATTACKS)
def test_a_value_whose_name_says_secret_never_reaches_the_model(project, llm, amas, attack):
    """Where the name says secret, only the placeholder and reference rules decide: not
    entropy, not whether the value reads like words."""
    path, text = ATTACKS[attack]
    (project / path).parent.mkdir(exist_ok=True)
    (project / path).write_text(text)
    llm.reply(tool="read_file", path=path).reply(text="done")
    result = amas("-y", "read it")
    assert result.exit_code == 0
    assert "[REDACTED]" in llm.requests[1]["messages"][-1]["content"]
    sent = json.dumps(llm.requests)
    assert [value for value in HIDDEN[attack] if value in sent] == []


NAMES = {  # a name in any case and style: secret, or not
    True: "db_password privateKey access-key SECRET_KEY accessKey clientSecret PGPASSWORD "
    "_authToken X-Api-Key apikey OAuth2Token MYSQL_PWD DB_PASS basic_auth "
    "spring.datasource.password API_KEY_PROD $password --password AWSACCESSKEY",
    False: "GIT_AUTHOR_NAME TIKTOKEN_CACHE_DIR KEYBOARD TOKENIZERS_PARALLELISM passwordField "
    "max_tokens primary_key SECRET_KEY_PATH token_url PWD key author compass SECRET_NAME passenv "
    "public_key",
}


@pytest.mark.parametrize("secret", [True, False])
def test_a_secret_name_in_any_case_and_style(bare, secret):
    secrets = redact.Secrets(make_config())
    lines = [f"{name} = Zx9Qw7eP4mK2" for name in NAMES[secret].split()]
    hidden = [line for line in lines if "Zx9Qw7eP4mK2" not in secrets.redact(line)]
    assert hidden == (lines if secret else [])
    # in a text that is not all ASCII too (its secret names are found another way)
    said = secrets.redact("# café crème\n" + "\n".join(lines)).split("\n")[1:]
    assert [
        line for line, shown in zip(lines, said, strict=True) if "Zx9Qw7eP4mK2" not in shown
    ] == hidden


# -- edits on lines that hold hidden values --------------------------------------------------------


@pytest.fixture
def box(bare):
    """A project with a .env the model has read (as it shows it: its values hidden)."""
    (bare / ".env").write_text(ENV)
    agent = toolbox(bare, auto_accept=True)
    agent.execute("read_file", json.dumps({"path": ".env"}))
    return agent


def test_a_line_holding_a_hidden_value_can_be_deleted(box, bare):
    said = edit(box, "DEBUG=1\nSTRIPE_SECRET_KEY=[REDACTED]\n", "DEBUG=1\n")
    assert said.startswith("Edit .env")
    assert (bare / ".env").read_text() == ENV.replace(
        "STRIPE_SECRET_KEY=sk_live_51HqLyjWDarjtT1zdp7dc\n", ""
    )


def test_a_line_holding_a_hidden_value_is_kept_beside_an_edited_one(box, bare):
    old = "DEBUG=1\nSTRIPE_SECRET_KEY=[REDACTED]\nDB_PASSWORD=[REDACTED]\n"
    said = edit(box, old, old.replace("DEBUG=1", "DEBUG=0"))
    assert said.startswith("Edit .env") and (bare / ".env").read_text() == ENV.replace(
        "DEBUG=1", "DEBUG=0"
    )


def test_lines_holding_hidden_values_can_be_moved_each_value_with_its_name(box, bare):
    old = "STRIPE_SECRET_KEY=[REDACTED]\nDB_PASSWORD=[REDACTED]\n"
    said = edit(box, old, "DB_PASSWORD=[REDACTED]\nSTRIPE_SECRET_KEY=[REDACTED]\n")
    assert said.startswith("Edit .env")
    swapped = (
        "DEBUG=1\nDB_PASSWORD=Xq7!mP2vL9zR\nSTRIPE_SECRET_KEY=sk_live_51HqLyjWDarjtT1zdp7dc\n"
        "HOST=db\n"
    )
    assert (bare / ".env").read_text() == swapped


@pytest.mark.parametrize(
    "old, new",
    [
        ("DB_PASSWORD=[REDACTED]", "DB_HOST=[REDACTED]"),  # out of the name that hides it
        ("DB_PASSWORD=[REDACTED]", "print('[REDACTED]')"),
        ("DB_PASSWORD=", "DB_HOST="),  # the name renamed, the value left where it was
        ("DB_PASSWORD=", "DB_PASSWORD=\n"),  # the value pushed onto a line of its own
        ("DB_PASSWORD=[REDACTED]", "DB_PASSWORD=[REDACTED]2"),  # changed
        ("DB_PASSWORD=[REDACTED]", "DB_PASSWORD=x[REDACTED]"),
    ],
)
def test_a_hidden_value_is_never_changed_or_shown_by_an_edit(box, bare, old, new):
    said = edit(box, old, new)
    assert said.startswith(
        "Error: this edit would leave a hidden secret without the name that hides it"
    )
    assert (bare / ".env").read_text() == ENV
    assert "Xq7!mP2vL9zR" not in box.execute("read_file", '{"path": ".env"}')


def test_a_placeholder_that_names_no_hidden_value_in_old_str_is_refused(box, bare):
    said = edit(box, "HOST=db", "HOST=[REDACTED]")
    assert said.startswith("Error: the new content of .env holds [REDACTED]")
    assert (bare / ".env").read_text() == ENV


def test_part_of_a_placeholder_matches_nothing(box, bare):
    assert edit(box, "[REDAC", "x").startswith("Error: old_str not found in .env")
    assert edit(box, "=[REDACTED", "=").startswith("Error: old_str not found in .env")
    assert (bare / ".env").read_text() == ENV


def test_a_mismatch_shows_the_region_as_the_model_sees_it_with_a_hint_that_does_not_loop(box):
    said = edit(box, "DEBUG=2\nSTRIPE_SECRET_KEY=[REDACTED]\n", "")
    assert "     2\tSTRIPE_SECRET_KEY=[REDACTED]" in said and "sk_live" not in said
    assert "[REDACTED] stands for a hidden value" in said and "Copy old_str exactly" not in said
    assert edit(box, "HOST=dbx", "").endswith("Copy old_str exactly from the file.")


def test_a_private_key_block_can_be_moved_and_deleted(bare):
    (bare / "keys.txt").write_text(f"a\n{KEY}b\n")
    box = toolbox(bare, auto_accept=True)
    shown = "[REDACTED]\n\n\n\n"
    assert edit(box, f"a\n{shown}b\n", f"b\n{shown}a\n", "keys.txt").startswith("Edit keys.txt")
    assert (bare / "keys.txt").read_text() == f"b\n{KEY}a\n"
    assert edit(box, f"b\n{shown}", "b\n", "keys.txt").startswith("Edit keys.txt")
    assert (bare / "keys.txt").read_text() == "b\na\n"


# -- real commits, replayed as a model makes them --------------------------------------------------


def test_real_commits_replayed_as_edits_apply_byte_for_byte(bare):
    """Hunks of pallets/flask and encode/httpx commits (CI files, tox.ini, tests and docs with
    fixture passwords, CODECOV_TOKEN and hidden example keys), each an edit_file call made from the
    text as the model sees it."""
    box = toolbox(bare, auto_accept=True)
    failed = []
    for case in json.loads((CORPUS / "replay.json").read_text()):
        (bare / "f").write_text(case["before"])
        said = edit(box, case["old_str"], case["new_str"], "f")
        if (bare / "f").read_text() != case["after"]:
            failed.append((case["from"], said))
    assert failed == []


def test_a_codecov_line_is_removed_through_the_model(project, llm, amas):
    """The commit that removed codecov from flask's CI, made by the model through amas."""
    case = json.loads((CORPUS / "replay.json").read_text())[0]
    assert "CODECOV_TOKEN: '$(codecov.token)'" in case["before"]
    (project / "ci.yml").write_text(case["before"])
    llm.reply(tool="read_file", path="ci.yml")
    llm.reply(tool="edit_file", path="ci.yml", old_str=case["old_str"], new_str=case["new_str"])
    llm.reply(text="done")
    result = amas("-y", "remove codecov from CI")
    assert result.exit_code == 0 and (project / "ci.yml").read_text() == case["after"]
    assert "CODECOV_TOKEN: '$(codecov.token)'" in llm.requests[1]["messages"][-1]["content"]


# -- where text crosses out of amas: the screen, the model, the disk -------------------------------

TOKEN = "dpl-5e3cr3t-value-42"  # in amas's environment as DEPLOY_TOKEN: a secret amas knows


def test_a_secret_the_model_writes_is_hidden_where_text_leaves_amas(project, llm):
    """Whoever wrote it (here the model itself: a guess, a copy it decoded), a secret amas knows is
    hidden on the screen (the answer, a question), in what the model is sent back, and on disk."""
    command = f"echo {TOKEN}"  # asked, and declined: no terminal
    llm.reply(text=f"The token is {TOKEN}.", tool="shell_command", command=command)
    llm.reply(text=f"Done: {TOKEN}")
    done = run_amas("go", llm=llm, env={"DEPLOY_TOKEN": TOKEN})
    assert done.returncode == 2, done.stderr
    assert "Done: [REDACTED]" in done.stdout and "Run `echo [REDACTED]`" in done.stderr
    assert TOKEN not in done.stdout + done.stderr
    sent_back = [m["content"] for m in llm.requests[1]["messages"] if m.get("content")]
    assert "The token is [REDACTED]." in sent_back and TOKEN not in json.dumps(sent_back)
    kept = [json.loads(line) for line in history_file(project).read_text().splitlines()]
    assert "Done: [REDACTED]" in [e.get("content") for e in kept]
    assert TOKEN not in json.dumps([e.get("content") for e in kept])


def test_the_report_hides_every_string_of_every_event(project, llm):
    """The command's output, the answer, the arguments: each event for scripts, and the result."""
    for form in ("stream-json", "json"):
        llm.reply(text=f"The token is {TOKEN}.", tool="shell_command", command=f"echo {TOKEN}")
        llm.reply(text=f"Done: {TOKEN}")
        done = run_amas("-y", "--output-format", form, "go", llm=llm, env={"DEPLOY_TOKEN": TOKEN})
        assert done.returncode == 0, done.stderr
        assert TOKEN not in done.stdout and "[REDACTED]" in done.stdout


def test_a_secret_in_a_call_runs_as_written_and_is_kept_hidden(project, llm):
    """The call runs as the model wrote it; the conversation it is sent back in, the history and
    the checkpoint's record keep it hidden."""
    llm.reply(tool="shell_command", command=f"printf %s {TOKEN} > out.txt").reply(text="done")
    done = run_amas("-y", "go", llm=llm, env={"DEPLOY_TOKEN": TOKEN})
    assert done.returncode == 0, done.stderr
    assert (project / "out.txt").read_text() == TOKEN
    sent_back = json.dumps(llm.requests[1]["messages"])
    assert TOKEN not in sent_back and "printf %s [REDACTED] > out.txt" in sent_back
    assert TOKEN not in history_file(project).read_text()
    (kept,) = Checkpoint(project, []).history()
    assert kept["label"] == "[amas] shell: printf %s [REDACTED] > out.txt"
