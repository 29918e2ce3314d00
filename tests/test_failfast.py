"""Fail fast (issue 42, item 3; issue 53, item 2): a one-shot whose model cannot work — no key for a
known provider, an unknown provider prefix, a malformed api_base, a local server that is not
listening — says so before any model library loads. Each run is a fresh `python -m amas_code` (the
fork server has the openai SDK loaded already) that reports at exit whether litellm and openai were
imported; nothing is timed."""

import socket
import subprocess
import sys

import pytest
from conftest import amas_env

from amas_code import providers

# amas as `python -m amas_code`, telling at exit (amas's own exit runs atexit) if litellm loaded
PROBE = (
    "import atexit, runpy, sys; "
    "atexit.register(lambda: print('litellm loaded:', 'litellm' in sys.modules, file=sys.stderr)); "
    "atexit.register(lambda: print('openai loaded:', 'openai' in sys.modules, file=sys.stderr)); "
    "sys.argv = ['amas', *sys.argv[1:]]; runpy.run_module('amas_code', run_name='__main__')"
)


def dead_port() -> int:
    """A port of 127.0.0.1 where nothing listens (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fresh(*args, **env):
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=amas_env(None, **env),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


@pytest.mark.parametrize(
    "args, env, said",
    [
        (
            ["-m", "openai/gpt-4.1"],
            {},
            "✗ no API key for openai/gpt-4.1: export OPENAI_API_KEY, or set api_key",
        ),
        (
            [],  # the default model, gemini
            {},
            "no API key for gemini/gemini-2.5-flash: export GOOGLE_API_KEY or GEMINI_API_KEY",
        ),
        (
            ["-m", "openrouter/anthropic/claude-sonnet-4"],
            {},
            "no API key for openrouter/anthropic/claude-sonnet-4: export OPENROUTER_API_KEY",
        ),
        (
            ["-m", "nosuchprovider/some-model"],
            {"OPENAI_API_KEY": "sk-test-1234567890"},
            "unknown model 'nosuchprovider/some-model': write it as provider/model",
        ),
        (
            ["-m", "openai/gpt-4.1", "--api-base", "localhost:11434"],
            {},
            "api_base 'localhost:11434' is not a URL: write it like http://localhost:11434",
        ),
        (
            ["-m", "ollama_chat/qwen", "--api-base", "http://127.0.0.1:port/v1"],
            {},
            "api_base 'http://127.0.0.1:port/v1' is not a URL",
        ),
    ],
)
def test_a_model_that_cannot_work_is_said_before_litellm_loads(bare, args, env, said):
    done = fresh(*args, "hello", **env)
    assert done.returncode == 1
    assert said in done.stderr
    assert "litellm loaded: False" in done.stderr and "openai loaded: False" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.parametrize("model", ["openai/local", "ollama_chat/qwen2.5-coder", "custom_openai/m"])
def test_a_local_server_not_listening_is_said_before_any_model_library_loads(bare, model):
    """One connect to the address, on either path: refused, the run ends with it named."""
    base = f"http://127.0.0.1:{dead_port()}/v1"
    done = fresh("-m", model, "--api-base", base, "hello", AMAS_API_KEY="sk-local-12345")
    assert done.returncode == 1
    line = (
        f"✗ cannot reach {base}: is the server running and the address right? (Connection refused)"
    )
    assert done.stderr.splitlines()[0] == line
    assert "litellm loaded: False" in done.stderr and "openai loaded: False" in done.stderr


def test_credentials_in_an_api_base_not_listening_are_not_shown(bare):
    base = f"http://alice:S3cretPassw0rd@127.0.0.1:{dead_port()}/v1"
    done = fresh("-m", "openai/local", "--api-base", base, "hello")
    assert done.returncode == 1
    assert "cannot reach http://alice:[REDACTED]@127.0.0.1:" in done.stderr
    assert "S3cretPassw0rd" not in done.stderr + done.stdout


def test_credentials_in_a_malformed_api_base_are_not_shown(bare):
    done = fresh("--api-base", "alice:S3cretPassw0rd@127.0.0.1/v1", "hello")
    assert done.returncode == 1
    assert "api_base '[REDACTED]@127.0.0.1/v1' is not a URL" in done.stderr
    assert "S3cretPassw0rd" not in done.stderr + done.stdout


def test_json_output_carries_the_error(bare):
    done = fresh("--output-format", "json", "-m", "openai/gpt-4.1", "hello")
    assert done.returncode == 1
    assert '"no API key for openai/gpt-4.1: export OPENAI_API_KEY' in done.stdout
    assert "litellm loaded: False" in done.stderr


@pytest.mark.parametrize(
    "model, library", [("openai/test-model", "openai"), ("custom_openai/m", "litellm")]
)
def test_a_model_that_can_work_goes_on_to_its_library(bare, llm, model, library):
    """The check stops nothing that would work (a local server, listening): a server of your own
    that speaks OpenAI's API is asked through the openai SDK, and litellm is never imported; another
    provider prefix goes through litellm."""
    llm.reply(text="answered")
    done = fresh("hello", **{**amas_env(llm), "AMAS_MODEL": model})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "answered\n"
    assert f"litellm loaded: {library == 'litellm'}" in done.stderr
    assert "openai loaded: True" in done.stderr  # litellm calls the openai client too


@pytest.mark.parametrize(
    "model",
    ["nosuchprovider/x", "gpt4/turbo", "openai/gpt-4.1", "ollama_chat/qwen", "hosted_vllm/m", "x"],
)
def test_the_provider_table_read_from_litellms_files_agrees_with_litellm(model):
    import litellm

    unknown = "/" in model and model.split("/", 1)[0] not in providers._providers()
    try:
        litellm.get_llm_provider(model)
        placed = True
    except Exception:
        placed = False
    assert not (unknown and placed)  # what fails fast, litellm would refuse too
    assert placed or model in ("x",) or unknown
    assert len(providers._providers()) > 50


@pytest.mark.parametrize(
    "config",
    [
        {"model": "openai/gpt-4.1", "env_keys": {"OPENAI_API_KEY": "sk-x"}},  # taken at start
        {"model": "gemini/gemini-2.5-flash", "env_keys": {"GEMINI_API_KEY": "k"}},
        {"model": "anthropic/claude-sonnet-4-5", "api_key": "k"},
        {"model": "openai/local", "api_base": "LIVE/v1"},  # llama.cpp: no key
        {"model": "ollama_chat/qwen2.5-coder", "api_base": "LIVE"},  # a provider with no key at all
        {"model": "gpt-4.1"},  # no prefix: litellm places it
        {"model": "somewhere/model", "api_base": "https://api.example.com/v1"},  # litellm's call
    ],
)
def test_a_model_that_can_work_passes_the_early_check(config, monkeypatch, llm):
    """LIVE: a local server that is listening (the scripted one)."""
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    live = llm.url.removesuffix("/v1")
    if "api_base" in config:
        config = {**config, "api_base": config["api_base"].replace("LIVE", live)}
    providers.precheck(config)


def test_ollama_not_running_names_the_address_it_listens_on(bare):
    """`-m ollama_chat/…` with no api_base: Ollama's own address, named (the error named none)."""
    import socket

    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 11434)) == 0:
            pytest.skip("something listens on 11434 here")
    done = fresh("-m", "ollama_chat/qwen2.5-coder", "hello")
    assert done.returncode == 1
    assert done.stderr.splitlines()[0].startswith(
        "✗ cannot reach http://localhost:11434: is the server running and the address right?"
    )
    assert "litellm loaded: False" in done.stderr
