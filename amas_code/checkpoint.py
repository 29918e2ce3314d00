"""Checkpoints in a shadow git repository in the user's home with the project as its work tree: the user's own git
(branch, index, refs, hooks, config) is never written, and a folder without git works the same way."""

import fcntl
import hashlib
import json
import os
import stat
import subprocess
import time
from pathlib import Path

from amas_code import config as config_file
from amas_code import ui

GIT = (  # every call: no hooks, no fsmonitor, no line-ending or filter conversion, no signing prompts
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.autocrlf=false -c core.safecrlf=false "
    "-c commit.gpgSign=false -c core.quotePath=false -c core.filemode=true -c core.symlinks=true "
    "-c core.untrackedCache=true -c gc.auto=0 -c core.bigFileThreshold=10m"
).split()
ATTRIBUTES = "* -text -filter -ident -working-tree-encoding !eol\n"  # bytes in and out exactly as on disk
LOCKS = ["index.lock", "HEAD.lock", "packed-refs.lock", "refs/heads/main.lock", "refs/amas/redo.lock"]
MAIN, REDO, GITLINK = "refs/heads/main", "refs/amas/redo", "160000"


class CheckpointError(Exception):
    """An undo, redo or restore that was refused or failed; the message says whether anything changed."""


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def on_disk(path: Path) -> tuple[str, bytes] | None:
    """What a path holds as git sees it: (mode, bytes) for a file or a link (its target), None when absent."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(st.st_mode):
        return "120000", os.fsencode(os.readlink(path))
    if stat.S_ISDIR(st.st_mode):
        return "040000", b""
    return ("100755" if st.st_mode & 0o100 else "100644"), path.read_bytes()


def quote(path: str) -> bytes:
    """A path for git fast-import, C-quoted so any name (spaces, quotes, newlines) survives."""
    escaped = os.fsencode(path).replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n")
    return b'"' + escaped + b'"'


class Recording:
    """`with checkpoint.recording(label, paths):` what changes inside becomes one checkpoint; `.note` says so.
    paths None means anything in the project (a shell command)."""

    def __init__(self, checkpoint, label: str, paths: list[Path] | None):
        self.checkpoint, self.label, self.paths, self.note, self.fd = checkpoint, label, paths, "", None

    def __enter__(self):
        try:
            self.fd = self.checkpoint.lock()
            self.before = self.checkpoint.before(self.paths)
        except (OSError, CheckpointError) as e:
            self.close(f"checkpoint failed, /undo will not cover this change: {str(e)[:300]}")
        except BaseException:  # Ctrl+C while taking the snapshot: nothing ran yet
            self.close("")
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            try:
                self.note = self.checkpoint.save(self.before, self.label)
            except (OSError, CheckpointError) as e:
                self.note = f"checkpoint failed, /undo will not cover this change: {str(e)[:300]}"
            self.close(self.note if self.note.startswith("checkpoint failed") else "")

    def close(self, warning: str) -> None:
        if warning:
            ui.warning(warning)
            self.note = f"[{warning}]"
        if self.fd is not None:
            os.close(self.fd)
        self.fd = None


class Checkpoint:
    """The project's checkpoints: a chain of commits on the shadow repository's main, each holding the before (b/)
    and after (a/) state of exactly the files one change touched."""

    def __init__(self, root: Path, ignore: list[str], session: str = ""):
        self.root, self.ignore, self.session, self.request = Path(root).resolve(), ignore, session, ""
        key = hashlib.sha256(os.fsencode(self.root)).hexdigest()[:16]
        self.dir = Path.home() / ".amas" / "checkpoints" / f"{self.root.name}-{key}"

    def recording(self, label: str, paths: list[Path] | None = None) -> Recording:
        return Recording(self, label, paths)

    def run(self, *args: str, data: bytes | None = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}  # never the user's repository
        env.update(GIT_DIR=str(self.dir), GIT_WORK_TREE=str(self.root), GIT_CONFIG_NOSYSTEM="1")
        return subprocess.run([*GIT, *args], input=data, capture_output=True, env=env, cwd=self.root)

    def git(self, *args: str, data: bytes | None = None) -> str:
        done = self.run(*args, data=data)
        if done.returncode:
            raise CheckpointError(f"git {args[0]} failed: {done.stderr.decode(errors='replace').strip()[:300]}")
        return os.fsdecode(done.stdout)

    def create(self) -> None:
        """Make the shadow repository once; it is built aside and renamed, so a half-made one is never used."""
        if (self.dir / "HEAD").exists():
            return
        config_file.private_dir(self.dir.parent)
        tmp = self.dir.with_name(f"{self.dir.name}.{os.getpid()}.tmp")
        subprocess.run(["git", "init", "-q", "--bare", "--template=", str(tmp)], check=True, capture_output=True)
        (tmp / "info").mkdir()
        (tmp / "info" / "attributes").write_text(ATTRIBUTES)
        try:
            os.rename(tmp, self.dir)
        except OSError:  # another amas made it first
            subprocess.run(["rm", "-rf", str(tmp)])

    def lock(self) -> int:
        """Hold the project's checkpoint lock; a second amas waits. Leftovers of a killed git are cleared."""
        self.create()
        (self.dir / "info" / "exclude").write_text("\n".join(["/.amas/", *self.ignore]) + "\n")
        fd = os.open(self.dir / "amas.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            ui.info("waiting for another amas working in this project…")
            fcntl.flock(fd, fcntl.LOCK_EX)
        for name in LOCKS:  # no other amas is inside: a lock file left here belongs to a process that died
            (self.dir / name).unlink(missing_ok=True)
        return fd

    def locked(self, action, *args):
        """Run an undo or redo holding the lock."""
        fd = self.lock()
        try:
            return action(*args)
        finally:
            os.close(fd)

    # -- recording ------------------------------------------------------------------------------
    def rel(self, path: Path) -> str:
        return os.fsdecode(Path(path).relative_to(self.root))

    def before(self, paths: list[Path] | None):
        """Named files as they are now, with the folders a write would create; or a snapshot of the project."""
        if paths is None:
            return self.snapshot()
        missing = {p.parent for p in paths} - {self.root}
        dirs = {self.rel(d) for p in missing for d in [p, *p.parents] if d.is_relative_to(self.root) and d != self.root}
        return {
            "files": {self.rel(p): on_disk(p) for p in paths},
            "dirs": sorted(d for d in dirs if not os.path.lexists(self.root / d)),
        }

    def snapshot(self) -> str:
        """The project's tree now, through the shadow index as a stat cache: only changed files are read."""
        _pause("snapshot")
        self.git("add", "-A", "--ignore-errors", "--", ".")
        return self.git("write-tree").strip()

    def save(self, before, label: str) -> str:
        """Commit what changed since `before` as one checkpoint; a note for the tool result ("" if nothing changed)."""
        if isinstance(before, str):
            changes, dirs = self.shell_changes(before, self.snapshot())
        else:
            now = {rel: on_disk(self.root / rel) for rel in before["files"]}
            changes = {rel: (old, now[rel]) for rel, old in before["files"].items() if old != now[rel]}
            dirs = [d for d in before["dirs"] if os.path.isdir(self.root / d)]
        if not changes:
            return ""
        meta = {
            "time": time.time(),
            "session": self.session,
            "request": self.request,
            "files": sorted(changes),
            "dirs": dirs,
        }
        self.commit(changes, f"{label}\n\n{json.dumps(meta)}")
        return f"[checkpoint: {ui.plural(len(changes), 'file')}; /undo takes it back]"

    def shell_changes(self, old: str, new: str) -> tuple[dict, list[str]]:
        """Files that differ between two snapshots, as (mode, blob id) pairs; submodules are left to themselves."""
        raw = self.git("diff-tree", "-r", "-z", "--no-renames", old, new).split("\0")
        changes, dirs = {}, set()
        for meta, rel in zip(raw[0:-1:2], raw[1::2], strict=False):
            mode_a, mode_b, sha_a, sha_b, _ = meta[1:].split()
            if GITLINK not in (mode_a, mode_b):
                changes[rel] = (
                    None if set(sha_a) == {"0"} else (mode_a, sha_a),
                    None if set(sha_b) == {"0"} else (mode_b, sha_b),
                )
        added = [rel for rel, (a, _) in changes.items() if a is None]
        if added:
            known = set(self.git("ls-tree", "-r", "-d", "-z", "--name-only", old).split("\0"))
            dirs = {str(d) for rel in added for d in Path(rel).parents if str(d) != "." and str(d) not in known}
        return changes, sorted(dirs)

    def commit(self, changes: dict, message: str) -> None:
        """One commit on main holding b/<path> and a/<path> for each change, written by git fast-import."""
        parent, when = self.ref(MAIN), int(time.time())
        out = [
            b"commit " + MAIN.encode(),
            b"committer Amas Code <amas@localhost> %d +0000" % when,
            *_data(message.encode()),
        ]
        out += [b"from " + parent.encode()] if parent else []
        out.append(b"deleteall")
        for rel, sides in changes.items():
            for prefix, side in zip(("b/", "a/"), sides, strict=True):
                if side and side[0] != "040000":
                    mode, value = side
                    body = (
                        [b"M %s inline %s" % (mode.encode(), quote(prefix + rel)), *_data(value)]
                        if isinstance(value, bytes)
                        else [b"M %s %s %s" % (mode.encode(), value.encode(), quote(prefix + rel))]
                    )
                    out += body
        _pause("commit")
        self.git("fast-import", "--quiet", "--date-format=raw", data=b"\n".join(out) + b"\n")
        self.run("update-ref", "-d", REDO)  # a new change after an undo: that undo can no longer be redone

    # -- reading, undo, redo ------------------------------------------------------------------
    def ref(self, name: str) -> str | None:
        return self.run("rev-parse", "-q", "--verify", name + "^{commit}").stdout.decode().strip() or None

    def history(self, rev: str = MAIN, limit: int = 200) -> list[dict]:
        """Checkpoints from rev back, newest first: id, parent, label, and the meta stored with it."""
        done = self.run("log", f"-n{limit}", "--format=%H%x1f%P%x1f%B%x1e", rev)
        raw, out = os.fsdecode(done.stdout) if done.returncode == 0 else "", []
        for entry in filter(str.strip, raw.split("\x1e")):
            sha, parents, body = entry.strip("\n").split("\x1f")
            label, _, meta = body.partition("\n\n")
            out.append(
                {
                    "id": sha,
                    "parent": parents.split()[0] if parents else None,
                    "label": label,
                    **json.loads(meta or "{}"),
                }
            )
        return out

    def entries(self, sha: str) -> dict:
        """{path: {"b": (mode, blob), "a": (mode, blob)}} of one checkpoint."""
        out = {}
        for line in filter(None, self.git("ls-tree", "-r", "-z", sha).split("\0")):
            meta, path = line.split("\t", 1)
            mode, _, blob = meta.split()
            out.setdefault(path[2:], {})[path[0]] = (mode, blob)
        return out

    def contents(self, blobs: list[str]) -> dict[str, bytes]:
        """Blob bytes by id, read by one git cat-file."""
        raw, out, at = self.git_bytes("cat-file", "--batch", data="".join(f"{b}\n" for b in blobs).encode()), {}, 0
        while at < len(raw):
            head_end = raw.index(b"\n", at)
            sha, _, size = raw[at:head_end].split()
            out[sha.decode()] = raw[head_end + 1 : head_end + 1 + int(size)]
            at = head_end + 2 + int(size)
        return out

    def git_bytes(self, *args: str, data: bytes) -> bytes:
        done = self.run(*args, data=data)
        if done.returncode:
            raise CheckpointError(f"git {args[0]} failed: {done.stderr.decode(errors='replace').strip()[:300]}")
        return done.stdout

    def now(self, rel: str) -> tuple[str, str] | None:
        found = on_disk(self.root / rel)
        return found and (found[0], blob_id(found[1]))

    def apply(self, cp: dict, forward: bool, ask) -> list[str]:
        """Put one checkpoint's before (undo) or after (redo) state on disk; ask first about files changed since."""
        entries, want, expect = self.entries(cp["id"]), "ab"[not forward], "ba"[not forward]
        edited = [rel for rel, e in entries.items() if self.now(rel) != e.get(expect)]
        if edited and not ask(f"{', '.join(edited)} changed since the checkpoint. Discard those edits?"):
            raise CheckpointError("cancelled; nothing changed")
        blobs = self.contents([e[want][1] for e in entries.values() if want in e])
        for rel in sorted((r for r, e in entries.items() if want not in e), key=len, reverse=True):
            _remove(self.root / rel)
        if not forward:
            for rel in sorted(cp.get("dirs", []), key=len, reverse=True):
                _remove(self.root / rel)
        for rel in sorted((r for r, e in entries.items() if want in e), key=len):
            mode, blob = entries[rel][want]
            _pause("apply")
            _write(self.root / rel, mode, blobs[blob])
        return sorted(entries)

    def undo(self, n: int = 1, ask=lambda q: False) -> list[str]:
        """Restore the before state of the last n checkpoints, newest first; return the files restored."""
        return self.locked(self._undo, n, ask)

    def _undo(self, n: int, ask) -> list[str]:
        chain = self.history(limit=n)
        if len(chain) < n:
            raise CheckpointError(f"only {ui.plural(len(chain), 'checkpoint')} to undo; nothing changed")
        files = sorted({f for cp in chain for f in self.apply(cp, False, ask)})
        redo = self.ref(REDO)
        if not (redo and self.run("merge-base", "--is-ancestor", chain[0]["id"], redo).returncode == 0):
            self.git("update-ref", REDO, chain[0]["id"])
        new, old = chain[-1]["parent"], chain[0]["id"]
        self.git("update-ref", *(["-d", MAIN, old] if new is None else [MAIN, new, old]))
        return files

    def redo(self, ask=lambda q: False) -> list[str]:
        """Re-apply the checkpoint the last undo took back."""
        return self.locked(self._redo, ask)

    def _redo(self, ask) -> list[str]:
        head, redo = self.ref(MAIN), self.ref(REDO)
        ahead = self.history(f"{head}..{redo}" if head else REDO) if redo and redo != head else []
        if not ahead or ahead[-1]["parent"] != head:
            raise CheckpointError("nothing to redo")
        files = self.apply(ahead[-1], True, ask)
        self.git("update-ref", MAIN, ahead[-1]["id"], *([head] if head else []))
        return files

    def restore(self, cid: str, ask=lambda q: False) -> list[str]:
        """Undo every checkpoint made after the given one."""
        ids = [cp["id"] for cp in self.history()]
        match = [i for i, sha in enumerate(ids) if cid and sha.startswith(cid.lower())]
        if len(match) != 1:
            raise CheckpointError(f"{cid} is not one of the checkpoints (/checkpoint lists them); nothing changed")
        if match[0] == 0:
            raise CheckpointError(f"{cid} is already the latest checkpoint; nothing changed")
        return self.undo(match[0], ask)

    def changes(self) -> list[tuple[str, bytes | None, bytes | None]]:
        """What the agent changed in this session, per file: (path, first before, last after)."""
        session = [cp for cp in self.history() if cp.get("session") == self.session][::-1]
        first, last = {}, {}
        for cp in session:
            for rel, e in self.entries(cp["id"]).items():
                first.setdefault(rel, e.get("b"))
                last[rel] = e.get("a")
        blobs = self.contents([s[1] for s in [*first.values(), *last.values()] if s])
        return [(rel, first[rel] and blobs[first[rel][1]], last[rel] and blobs[last[rel][1]]) for rel in sorted(first)]


def _data(raw: bytes) -> list[bytes]:
    return [b"data %d" % len(raw), raw]


def _remove(path: Path) -> None:
    """A file or link gone (never followed), or a folder that is empty."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir() and not any(path.iterdir()):
        path.rmdir()


def _write(path: Path, mode: str, data: bytes) -> None:
    """A file or symlink as it was, through a temporary name and a rename: never written through a link."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.amas-{os.getpid()}")
    if mode == "120000":
        os.symlink(os.fsdecode(data), tmp)
    else:
        old = os.lstat(path).st_mode & 0o777 if path.is_file() and not path.is_symlink() else 0o666 & ~_umask()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, old | 0o111 & ~_umask() if mode == "100755" else old & ~0o111)
    if path.is_dir() and not path.is_symlink():
        path.rmdir()  # a folder where the file was (it was emptied above): a file/folder swap
    os.replace(tmp, path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _pause(point: str) -> None:
    """A test hook: AMAS_TEST_PAUSE=<point> holds here, so a test can kill -9 amas at that moment."""
    if os.environ.get("AMAS_TEST_PAUSE") == point:
        time.sleep(60)
