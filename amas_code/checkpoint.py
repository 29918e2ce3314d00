"""Checkpoints in a shadow git repository in the user's home with the project as its work tree:
nothing of the user's git (branch, index, refs, hooks, config, objects) is written, and a folder
without git works the same way."""

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import stat
import subprocess
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from amas_code import home, project, ui
from amas_code.project import git_env

# bytes in and out exactly as on disk
ATTRIBUTES = "* -text -filter -ident -working-tree-encoding !eol\n"
# in a git repository the rest is what git ignores
GENERATED = ["node_modules", "__pycache__", "*.pyc", ".venv"]
UNREAD = re.compile(r"""error: open\("(.+?)"\): |warning: could not open directory '(.+?)': """)
GIT_MOVED = "git's HEAD, branches or index changed too, which /undo does not put back"
LOST = (  # what no checkpoint holds
    "which /undo cannot bring back (git ignores it, it is a repository of its own, or only the "
    ".git it removed held its content): /undo keeps the files it made"
)
BEYOND = (  # tracked by a nested repository
    "tracked by a repository of its own (a submodule): /undo does not put them back, a "
    "`git checkout` in that repository can"
)
MAIN = "refs/heads/main"
REDO = "refs/amas/redo"
TREE = "040000"
LINK = "120000"
GITLINK = "160000"
BIG = 10 << 20  # a file this big is stored by git, which streams it (core.bigFileThreshold above)
HUGE = 256 << 20  # a new file this big is left out of a command's checkpoint (named, never read)
UNCOPIED = "uncopied.json"  # files a command made past checkpoint_max_mb (see Shadow.remembered)
# a new file's mode under the umask, by the mode git records
NEW_MODES = {"100755": 0o777, "100644": 0o666}
UNCOPIED_SAID = (
    "not copied (past checkpoint_max_mb): /undo deletes them, asked; /redo cannot bring them back"
)


class CheckpointError(Exception):
    """An undo, redo or restore that was refused or failed;
    the message says whether anything changed."""


@dataclasses.dataclass
class Record:
    """What one change's recording made: the note for its result, and the checkpoint's id and the
    files it holds (no id: no checkpoint)."""

    note: str = ""
    id: str | None = None
    files: list[str] = dataclasses.field(default_factory=list)


# a change then goes on without checkpoint
TROUBLE = (OSError, ValueError, CheckpointError, home.ConfigError)


class Shadow:
    """The shadow repository of one project: a git directory in the user's home whose work tree is
    the project; it stores objects, commits and refs of its own, and reads the user's repository
    without writing it."""

    def __init__(self, root: Path, ignore: list[str], session: str = ""):
        self.root = Path(root).resolve()
        self.ignore = ignore
        self.session = session
        self.request = ""
        # the project's identity, not its path:
        # a clone where another was never inherits its checkpoints
        self.dir = Path.home() / ".amas" / "checkpoints" / home.project_id(self.root, history=False)
        self.pending = self.dir / "pending.json"
        self.borrowed = None
        self.gitdir = ""
        self.indexed = None
        # the user's git directory shared by its worktrees (objects, info/exclude), once found
        self.common = ""
        self.excludes = ""  # the ignore file the user's git config names, once found
        self.huge: list[str] = []  # new files the last snapshot left out (sparse or huge)
        self.uncopied: list[str] = []  # and those it left out past its limit
        # the turn the next checkpoints belong to (set by the agent): /undo takes back a turn
        self.turn = ""

    def run_git(
        self, *args: str, data: bytes | None = None, borrow: bool = False
    ) -> subprocess.CompletedProcess:
        """git on the shadow repository; with borrow it also reads the user's objects
        (writing none of them)."""
        # of your config, only that
        excludes = []
        if self.excludes:
            excludes = ["-c", f"core.excludesFile={self.excludes}"]
        return project.git(self.root, *excludes, *args, env=self.env(borrow), data=data)

    def env(self, borrow: bool = False) -> dict:
        env = git_env(
            GIT_DIR=str(self.dir),
            GIT_WORK_TREE=str(self.root),
            GIT_CONFIG_GLOBAL=os.devnull,
            LC_ALL="C",
        )
        if borrow and self.borrowed:
            env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = self.borrowed
        return env

    def descends(self, newer: str, older: str) -> bool:
        """Whether checkpoint `newer` comes after `older` on its line."""
        return self.run_git("merge-base", "--is-ancestor", older, newer).returncode == 0

    def git(self, *args: str, data: bytes | None = None, borrow: bool = False) -> bytes:
        done = self.run_git(*args, data=data, borrow=borrow)
        if done.returncode:
            raise CheckpointError(
                f"git {args[0]} failed: {done.stderr.decode(errors='replace').strip()[:300]}"
            )
        return done.stdout

    def user(self, *args: str) -> subprocess.CompletedProcess:
        """git on the user's repository, reading only: none of its hooks or programs run."""
        env = git_env(GIT_OPTIONAL_LOCKS="0", LC_ALL="C")  # its messages in English, which are read
        return project.git(self.root, *args, env=env)

    def find_git(self) -> None:
        """The user's repository, if any, and its object store, read through git's alternates
        (tracked files cost no disk)."""
        asked = ["--path-format=absolute", "--git-common-dir", "--git-dir", "--show-object-format"]
        found = self.user("rev-parse", *asked)
        lines = ["", "", ""]
        if found.returncode == 0:
            lines = os.fsdecode(found.stdout).split("\n") + lines
        self.common, self.gitdir, kind = lines[:3]
        self.borrowed = ""
        if kind == "sha1":
            self.borrowed = _alternate(self.common + "/objects")
        excludes = self.user("config", "--path", "core.excludesFile").stdout
        self.excludes = os.fsdecode(excludes).strip()

    def excluded(self) -> list[str]:
        """The patterns of the user's .git/info/exclude, which git ignores like a .gitignore's."""
        with contextlib.suppress(OSError):
            return (
                Path(self.common, "info", "exclude")
                .read_text(errors="surrogateescape")
                .splitlines()
            )
        return []

    def user_git(self) -> str:
        """A fingerprint of the user's HEAD, refs and index:
        what git commands in a shell command may change."""
        if not self.gitdir:
            return ""
        # -v: flags too
        listed = self.user("show-ref", "--head").stdout + self.user("ls-files", "-sv").stdout
        # a command moved .git away: its HEAD is gone, which counts as moved
        with contextlib.suppress(OSError):
            listed += Path(self.gitdir, "HEAD").read_bytes()
        return hashlib.sha1(listed).hexdigest()

    def store(self, data: bytes | Path, kind: str = "blob") -> str:
        """An object written loose into the shadow's own store, where the user's gc can never take
        it; its id. A big file (a path) git stores in a pack, streamed: never whole in memory."""
        if isinstance(data, Path):
            return self.git("hash-object", "-w", "--no-filters", "--", str(data)).decode().strip()
        raw = b"%s %d\0" % (kind.encode(), len(data)) + data
        sha = hashlib.sha1(raw).hexdigest()
        path = self.dir / "objects" / sha[:2] / sha[2:]
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            path.with_name("tmp_" + sha).write_bytes(zlib.compress(raw, 1))
            os.replace(path.with_name("tmp_" + sha), path)
        return sha

    def keep(self, changes: dict) -> set[str]:
        """Copy into the shadow's own store the blobs of a checkpoint that only the user's objects
        hold; the ids of those not even there (a command removed the user's .git)."""
        blobs = "".join(
            {f"{side[1]}\n" for sides in changes.values() for side in sides if side}
        ).encode()
        # without the user's objects, the shadow holds every blob it names
        checked = []
        if self.borrowed:
            checked = self.batch_check(blobs)
        missing = b"".join(line[:40] + b"\n" for line in checked if line.endswith(b" missing"))
        there = []
        if missing:
            there = self.batch_check(missing, borrow=True)
        if found := b"".join(line[:40] + b"\n" for line in there if not line.endswith(b" missing")):
            pack = str(self.dir / "objects" / "pack" / "pack")
            self.git("pack-objects", "-q", pack, data=found, borrow=True)
        return {line[:40].decode() for line in there if line.endswith(b" missing")}

    def batch_check(self, ids: bytes, borrow: bool = False) -> list[bytes]:
        """`git cat-file --batch-check` of ids: a line each, `<id> missing` for one not there."""
        done = self.run_git("cat-file", "--batch-check", data=ids, borrow=borrow)
        return done.stdout.splitlines()

    def snapshot(self, limit: int | None = None, retry: bool = True) -> dict:
        """The tree through the shadow index as a stat cache (only changed files are read); folders
        with no file. With a limit, new files past it are left out (see left_out)."""
        first = not (self.dir / "index").exists()
        marks = (Path(self.gitdir, "index"), self.dir / "restored")
        stamp = [mark.stat().st_mtime_ns for mark in marks if self.gitdir and mark.exists()]
        # again whenever the user's index moved (a `git add -f`) or an undo, here or in another
        # amas, put back what it tracks
        if self.gitdir and (first or stamp != self.indexed):
            self.track()
            self.indexed = stamp
        found = self.add(first, limit)
        try:
            tree = self.git("write-tree", borrow=True).decode().strip()
        # the index names content now nowhere (the user's gc took it): read all again
        except CheckpointError:
            if not retry:
                raise
            (self.dir / "index").unlink()
            return self.snapshot(limit, False)
        hollow = set()
        for top in self.untracked():
            if top.endswith("/") and not os.path.lexists(self.root / top / ".git"):
                hollow.update(os.path.relpath(d, self.root) for d, _, _ in os.walk(self.root / top))
        return {"tree": tree, "empty": sorted(hollow), **found}

    def add(self, first: bool, limit: int | None = None) -> dict:
        """Every file into the shadow's index, the first time what the user's objects lack into one
        pack (threshold 1), not a file each; nested repositories left out, or the next `add` runs
        `git status` (and filters) in them. The paths it could not read ("unread"): not covered, and
        never taken for new when a command makes them readable; nested repositories ("nested"): not
        covered, and said to be lost when a command removes one; new files left uncopied past the
        limit by an earlier command, unchanged since ("uncopied")."""
        self.huge, self.uncopied, known = self.left_out(limit)
        out = [*self.huge, *self.uncopied, *known]
        spec = [b".", *(b":(exclude,literal)" + os.fsencode(p) for p in out)]
        add = ["add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul"]
        bulk = []
        if first:
            bulk = ["-c", "core.bigFileThreshold=1"]
        added = self.run_git(*bulk, *add, data=b"\0".join(spec) + b"\0", borrow=True)
        # an error on one path (a nested repository with no commit) is no reason
        if b"fatal:" in added.stderr:
            raise CheckpointError(
                f"git add failed: {added.stderr.decode(errors='replace').strip()[:300]}"
            )
        unread = [a or b for a, b in UNREAD.findall(added.stderr.decode(errors="surrogateescape"))]
        found = {"unread": unread, "nested": self.drop_nested()}
        return {**found, "huge": self.huge, "uncopied": known}

    def drop_nested(self) -> list[str]:
        """Nested repositories (gitlinks) out of the shadow's index; their paths."""
        staged = self.git("ls-files", "-sz").split(b"\0")
        nested = [e.partition(b"\t")[2] for e in staged if e.startswith(GITLINK.encode())]
        if nested:
            listed = b"\0".join(nested) + b"\0"
            self.git("update-index", "--force-remove", "-z", "--stdin", data=listed)
        return [os.fsdecode(p) for p in nested]

    def copy_size(self) -> int:
        """Bytes a command's checkpoint would copy into the shadow now: the new files it has not
        seen (what git ignores, and files too big to read, are never copied)."""
        listing = ["ls-files", "-oz", "--exclude-standard"]
        with self.locked():
            # before the first snapshot the user's git knows what is new (the shadow: everything)
            if self.gitdir and not (self.dir / "index").exists():
                listed = self.user(*listing).stdout
            else:
                listed = self.git(*listing)
            known = self.remembered()
        new = [os.fsdecode(p) for p in listed.split(b"\0") if p and os.fsdecode(p) not in known]
        sizes = (_size(self.root / p) for p in new)
        return sum(size for size in sizes if size <= HUGE)

    def size(self) -> int:
        """Bytes the shadow repository takes on disk."""
        folders = os.walk(self.dir)
        files = (os.path.join(folder, name) for folder, _, names in folders for name in names)
        return sum(_size(Path(path)) for path in files)

    def left_out(self, limit: int | None) -> tuple[list[str], list[str], list[str]]:
        """New files never read: sparse or over HUGE (a `truncate -s 64G` would be hashed for
        minutes); with a limit (after a command), the biggest new files past it, not copied (a
        command's 3 × 120 MB of data); and those an earlier command left so, unchanged since."""
        listed = self.git("ls-files", "-oz", "--exclude-standard").split(b"\0")
        listed = [os.fsdecode(p) for p in listed if p]
        known = self.remembered()
        huge = [p for p in listed if _huge(self.root / p)]
        over = []
        if limit is not None:
            rest = set(listed) - set(huge) - known.keys()
            total = 0
            # the smallest first: the new sources a command wrote are copied, its big data is not
            for size, rel in sorted((_size(self.root / p), p) for p in rest):
                total += size
                if total > limit:
                    over.append(rel)
        return huge, over, [p for p in listed if p in known]

    def remembered(self) -> dict:
        """The files a command made that were left uncopied past the limit, as they still are:
        {path: [size, mtime]}; no snapshot copies them, no question counts them."""
        try:
            known = json.loads((self.dir / UNCOPIED).read_text())
        except (OSError, ValueError):
            return {}
        return {rel: was for rel, was in known.items() if _stamp(self.root / rel) == was}

    def remember(self, paths: list[str]) -> None:
        """Keep in mind files left uncopied (see remembered)."""
        known = self.remembered() | {rel: _stamp(self.root / rel) for rel in paths}
        home.write_private(self.dir / UNCOPIED, json.dumps(known))

    def untracked(self, *flags: str) -> list[str]:
        """Paths the shadow does not track (with -i: those git ignores),
        a folder of nothing else as one `dir/`."""
        listed = self.git("ls-files", "-oz", "--directory", "--exclude-standard", *flags)
        return [os.fsdecode(p) for p in listed.split(b"\0") if p]

    def track(self) -> None:
        """Start from the files the user's git tracks, an ignored one too
        (a committed dist/): hashed, not copied."""
        paths = [
            self.root / os.fsdecode(p) for p in self.user("ls-files", "-z").stdout.split(b"\0") if p
        ]
        # beyond a link the user made in place of a tracked folder
        paths = [p for p in paths if not _linked(p)]
        files = [
            os.fsencode(p.relative_to(self.root)) for p in paths if p.is_symlink() or _readable(p)
        ]
        if files:
            # --replace: a file now a folder, or back
            add = ["update-index", "--add", "--replace", "-z", "--stdin"]
            self.git(*add, data=b"\0".join(files) + b"\0", borrow=True)

    def compare(self, old: dict, new: dict) -> tuple[dict, list[str], list[str]]:
        """Files, folders made and folders gone between two snapshots;
        submodules are left to themselves."""
        changes, added, deleted = self.diff_trees(old["tree"], new["tree"])
        before = set(old["empty"])
        after = set(new["empty"])
        shown = _visible(old)
        # not made: only unignored
        changes = {p: sides for p, sides in changes.items() if sides[0] or not shown(p)}
        made = {d for d in (added | after) - before - deleted if not shown(d + "/")}
        return changes, sorted(made), sorted((deleted | before) - after - added)

    def diff_trees(self, old: str, new: str) -> tuple[dict, set, set]:
        """The files changed between two trees ([mode, blob] sides, None for absent), the folders
        added and the folders deleted (a file/folder swap counts as both)."""
        raw = self.git("diff-tree", "-r", "-t", "-z", "--no-renames", old, new, borrow=True)
        changes = {}
        added = set()
        deleted = set()
        fields = raw.split(b"\0")
        for head, path in zip(fields[0:-1:2], fields[1::2], strict=True):
            mode_a, mode_b, sha_a, sha_b, _ = head[1:].decode().split()
            rel = os.fsdecode(path)
            if mode_b == TREE and mode_a != TREE:
                added.add(rel)
            elif mode_a == TREE and mode_b != TREE:
                deleted.add(rel)
            elif TREE not in (mode_a, mode_b) and GITLINK not in (mode_a, mode_b):
                changes[rel] = [_tree_side(mode_a, sha_a), _tree_side(mode_b, sha_b)]
        return changes, added, deleted

    def made_by(self) -> dict:
        """Who makes the checkpoints now: this amas, its session,
        the turn and request they are of."""
        return dict(session=self.session, request=self.request, pid=os.getpid(), turn=self.turn)

    def commit(self, label: str, changes: dict, meta: dict) -> str:
        """One commit on main holding b/<path> and a/<path> of each change, and meta (who made it,
        the folders); its objects are written here directly. Its id."""
        meta = {"time": time.time(), **meta, "files": dict(sorted(changes.items()))}
        files = {
            f"{p}/{rel}": s
            for rel, sides in changes.items()
            for p, s in zip("ba", sides, strict=True)
            if s
        }
        parent = self.ref(MAIN)
        who = f"Amas Code <amas@localhost> {int(time.time())} +0000"
        head = f"tree {self.tree(files)}\n"
        if parent:
            head += f"parent {parent}\n"
        message = f"{ui.one_line(label)}\n\n{json.dumps(meta)}\n"
        body = f"{head}author {who}\ncommitter {who}\n\n{message}"
        sha = self.store(body.encode(errors="surrogateescape"), "commit")
        _pause("commit")
        self.set_ref(MAIN, sha)
        return sha

    def tree(self, files: dict) -> str:
        """The tree of {path: [mode, blob]} with the trees inside it, written here; its id."""
        inner = {}
        for path, side in files.items():
            name, _, rest = path.partition("/")
            inner.setdefault(name, {})[rest] = side  # rest "": a file right here
        here = {name: sub.get("") or ["40000", self.tree(sub)] for name, sub in inner.items()}
        order = sorted(here, key=lambda n: _git_order(n, here[n][0]))
        entries = [
            b"%s %s\0" % (here[n][0].encode(), os.fsencode(n)) + bytes.fromhex(here[n][1])
            for n in order
        ]
        return self.store(b"".join(entries), "tree")

    def ref(self, name: str) -> str | None:
        """The commit a ref points at; None where there is none (a shadow not made yet)."""
        try:
            return (self.dir / name).read_text().strip()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise CheckpointError(f"{self.unreadable()} ({e.strerror})") from None

    def unreadable(self) -> str:
        return f"the checkpoints in {self.dir} cannot be read; nothing changed"

    def set_ref(self, name: str, sha: str | None) -> None:
        """Point a ref at a commit, or delete it (None):
        written aside and renamed, so it is whole or not at all."""
        path = self.dir / name
        lock = self.dir / f"{name}.lock"
        if sha is None:
            return path.unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text(sha + "\n")
        os.replace(lock, path)

    def history(self, rev: str = MAIN, limit: int = 200) -> list[dict]:
        """Checkpoints from rev back, newest first:
        id, parent, label, and the meta stored with it."""
        done = self.run_git("log", f"-n{limit}", "--format=%H%x1f%P%x1f%B%x1e", rev)
        if done.returncode and (rev != MAIN or self.ref(MAIN)):
            said = done.stderr.decode(errors="replace").strip()[:300]
            raise CheckpointError(f"{self.unreadable()} ({said})")
        out = []
        for entry in filter(str.strip, os.fsdecode(done.stdout).split("\x1e")):
            sha, parents, body = entry.strip("\n").split("\x1f")
            # the meta is one line, last (a label may hold blank lines)
            label, _, meta = body.rpartition("\n\n")
            out.append(
                {
                    "id": sha,
                    "parent": (parents.split() or [None])[0],
                    "label": label,
                    **json.loads(meta),
                }
            )
        return out

    def contents(self, blobs: list[str]) -> dict[str, bytes]:
        """Blob bytes by id."""
        with self.blobs(blobs) as pieces:
            return {sha: b"".join(pieces()) for sha in blobs}

    @contextlib.contextmanager
    def blobs(self, blobs: list[str]):
        """`pieces()` gives the next blob's bytes in pieces, read by one git cat-file (a big file is
        never whole in memory), once every blob is known to be there; the ids come from a file, so
        git never waits on us."""
        asked = "".join(f"{b}\n" for b in blobs).encode()
        listed = self.git("cat-file", "--batch-check", data=asked).splitlines()
        if lost := [line.split()[0].decode() for line in listed if line.split()[1:2] != [b"blob"]]:
            raise CheckpointError(f"the checkpoint's content {lost[0]} is missing; nothing changed")
        with tempfile.TemporaryFile() as ids:
            ids.write(asked), ids.seek(0)
            cat = project.git_argv("cat-file", "--batch")
            with subprocess.Popen(
                cat, stdin=ids, stdout=subprocess.PIPE, env=self.env(), cwd=self.root
            ) as git:
                yield lambda: _pieces(git.stdout)


class Checkpoint(Shadow):
    """A chain of commits on the shadow's main, each the before (b/) and after
    (a/) of the files one change touched."""

    @contextlib.contextmanager
    def locked(self, wait: bool = True):
        """Hold the project's checkpoint lock (a second amas waits; without wait, BlockingIOError),
        with the shadow repository ready. A live amas holds it for the whole of its change."""
        fd = os.open(home.private_dir(self.dir) / "amas.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not wait:
                    raise
                ui.info("waiting for another amas working in this project…")
                fcntl.flock(fd, fcntl.LOCK_EX)
            self.ready()
            yield
        finally:
            os.close(fd)

    def settle(self) -> None:
        """Finish the checkpoint a killed amas left half-made, so that every reader of the history
        sees it: a pending one whose lock is free. One whose lock is held is a live amas's own, and
        a reader never waits for its command."""
        if not os.path.exists(self.pending):
            return
        with contextlib.suppress(*TROUBLE), self.locked(wait=False):
            pass

    def history(self, rev: str = MAIN, limit: int = 200) -> list[dict]:
        self.settle()
        return super().history(rev, limit)

    def ready(self) -> None:
        """Under the lock no other amas is inside:
        make the shadow if it is missing, finish what a killed one left."""
        # written last: a half-made shadow is simply made again
        if not (self.dir / "info" / "attributes").exists():
            for folder in ("objects", "refs/heads", "info"):  # all git needs (no hooks, no config)
                (self.dir / folder).mkdir(parents=True, exist_ok=True)
            (self.dir / "HEAD").write_text(f"ref: {MAIN}\n")
            (self.dir / "info" / "attributes").write_text(ATTRIBUTES)
        (self.dir / "index.lock").unlink(missing_ok=True)
        if self.borrowed is None:
            self.find_git()
        ignored = self.ignore
        if self.gitdir:
            ignored = GENERATED + self.excluded()
        patterns = "\n".join(["/.amas/", *ignored]) + "\n"
        exclude = self.dir / "info" / "exclude"
        if not exclude.exists() or exclude.read_text() != patterns:
            exclude.write_text(patterns)
        if self.pending.exists():
            self.finish(interrupted=True)

    # -- recording ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def recording(
        self,
        label: str,
        paths: list[Path] | None = None,
        git: bool = True,
        limit: int | None = None,
    ):
        """`with checkpoint.recording(label, paths) as rec:` the change inside is one checkpoint,
        its Record filled in when it ends. paths None: anything in the project may change (a shell
        command), and with git its repository too (said in the note when it did); new files past
        limit bytes are not copied."""
        rec = Record()
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(self.locked())
                self.begin(label, paths, git, limit)
            except TROUBLE as e:
                rec.note = _failed(e)
            _pause("before")
            try:
                yield rec
            finally:
                if not rec.note:
                    _pause("after")
                    vars(rec).update(vars(self.finish()))

    def begin(
        self, label: str, paths: list[Path] | None, git: bool = True, limit: int | None = None
    ) -> None:
        """Keep the before state where a killed amas is found again: the named files, or the
        project's snapshot; and who makes the change, whose checkpoint it is even if another amas
        has to finish it."""
        if paths is None:
            before = self.before_command(git)
        else:
            before = self.before_files(paths)
        pending = {"label": label, "main": self.ref(MAIN), "by": self.made_by(), **before}
        pending["limit"] = limit
        home.write_private(self.pending, json.dumps(pending))

    def before_command(self, git: bool = True) -> dict:
        """The project before a shell command: its snapshot, what git ignores, and with git a
        fingerprint of the user's repository. What git ignores is not snapshotted, but must not
        count as made by the command if it shows (`cp .env.example .env`): it is listed, and its
        small files are kept here (not copied) until the command ends. So are the small files
        nested repositories do not track (`sub/wip.txt`, which `rm -rf sub` would take)."""
        before = self.snapshot()
        ignored = self.untracked("-i")  # listed once the shadow tracks what git does
        inside, missing = self.inside(before["nested"])
        kept = {rel: _side(self.root / rel) for rel in _small(self.root, [*ignored, *inside])}
        before["ignored"] = ignored
        before["inside"] = inside
        before["missing"] = missing
        if git:
            before["git"] = self.user_git()
        before["kept"] = {
            rel: [side[0], side[1].decode("latin-1")] for rel, side in kept.items() if side
        }
        return before

    def before_files(self, paths: list[Path]) -> dict:
        """The named files before an edit, and the folders the edit would create."""
        rels = [os.fsdecode(Path(p).relative_to(self.root)) for p in paths]
        dirs = {
            str(d) for rel in rels for d in Path(rel).parents if not os.path.lexists(self.root / d)
        }
        return {"files": self.state(rels), "dirs": sorted(dirs)}

    def finish(self, interrupted: bool = False) -> Record:
        """Commit what changed since the kept before state as one checkpoint (interrupted: one a
        killed amas left), in the name of the amas that began it; its record."""
        try:
            pending = json.loads(self.pending.read_text())
            if pending["main"] != self.ref(MAIN):  # a killed amas had already committed it
                return Record()
            return self.record(pending, interrupted)
        except TROUBLE as e:
            return Record(_failed(e))
        finally:  # a shadow gone read-only meanwhile costs this checkpoint, never the change
            with contextlib.suppress(OSError):
                self.pending.unlink(missing_ok=True)

    def record(self, pending: dict, interrupted: bool) -> Record:
        """The checkpoint of what changed since the pending before state, if anything did."""
        changes, made, gone, unkept = self.changed(pending)
        big, ignored = self.unheld(pending)
        left = _left_out(big, _under(ignored, made))
        uncopied = self.left_uncopied(pending)
        # /undo would leave them: no change
        if not changes and not uncopied and _caches(self.root, made):
            made = []
        meta = self.leaves(pending, unkept) | {"made": made, "gone": gone, "uncopied": uncopied}
        said = _said(meta)
        if not (changes or made or gone or uncopied):
            return Record(_note(said, left))
        meta["left"] = sorted({*big, *ignored})  # /undo names what it leaves
        meta |= {"interrupted": interrupted, **pending.get("by", self.made_by())}
        label = pending["label"]
        if interrupted:
            label += " (interrupted)"
        sha = self.commit(label, changes, meta)
        note = _note([f"checkpoint: {_counted(changes, meta)}; /undo takes it back", *said], left)
        return Record(note, sha, sorted(changes))

    def leaves(self, pending: dict, unkept: list[str]) -> dict:
        """What a change did that /undo does not take back: git's state it moved (shell commands
        only), what it removed that no checkpoint holds or its own repository does."""
        moved = "git" in pending and pending["git"] != self.user_git()
        return {"git": moved, "lost": self.lost(pending) + unkept, "beyond": self.beyond(pending)}

    def left_uncopied(self, pending: dict) -> list[str]:
        """The new files a command made that the last snapshot left out past the limit, kept in
        mind (so that no later command copies them or asks about them while they stay as they
        are); those it made, not only un-ignored, are its own."""
        if "tree" not in pending or not self.uncopied:
            return []
        self.remember(self.uncopied)
        shown = _visible(pending)
        return [rel for rel in self.uncopied if not shown(rel)]

    def lost(self, pending: dict) -> list[str]:
        """What no checkpoint holds (ignored files, the files nested repositories do not track, a
        nested repository or its .git) and is gone, unless it was kept: a folder all of whose
        files were kept is not lost either."""
        held = []
        for repo in pending.get("nested", []):
            if os.path.lexists(self.root / repo):
                repo += "/.git"
            held.append(repo)
        held += [*pending.get("ignored", []), *pending.get("inside", [])]
        kept = pending.get("kept", {})
        return [p for p in held if not os.path.lexists(self.root / p) and not _kept(p, kept)]

    def inside(self, nested: list[str]) -> tuple[list[str], list[str]]:
        """In each nested repository, the files it does not track (a folder of nothing else as one
        `dir/`) and the tracked ones already missing: no checkpoint holds them."""
        untracked = []
        missing = []
        flags = ["-z", "-t", "-d", "-o", "--directory", "--exclude-standard"]
        for repo in nested:
            listed = os.fsdecode(self.nested(repo, "ls-files", *flags)).split("\0")
            for entry in filter(None, listed):
                tag, _, rel = entry.partition(" ")
                if tag == "?":
                    untracked.append(f"{repo}/{rel}")
                else:
                    missing.append(f"{repo}/{rel}")
        return untracked, missing

    def beyond(self, pending: dict) -> list[str]:
        """The tracked files of nested repositories a command removed: their own git holds them,
        never a checkpoint."""
        was = set(pending.get("missing", []))
        gone = []
        for repo in pending.get("nested", []):
            listed = os.fsdecode(self.nested(repo, "ls-files", "-z", "-d")).split("\0")
            gone += [f"{repo}/{rel}" for rel in listed if rel and f"{repo}/{rel}" not in was]
        return gone

    def nested(self, repo: str, *args: str) -> bytes:
        """git reading a nested repository: its own .git named (never the project's, found by
        walking up from a folder whose .git is gone), nothing written; nothing when it fails."""
        env = git_env(GIT_DIR=str(self.root / repo / ".git"), GIT_WORK_TREE=str(self.root / repo))
        env |= {"GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
        done = project.git(self.root, *args, env=env)
        if done.returncode:
            return b""
        return done.stdout

    def unheld(self, pending: dict) -> tuple[list[str], list[str]]:
        """What a command made that no checkpoint holds, so /undo leaves it: new files too big to
        read, and files git ignores (never copied: a new .env may hold a key)."""
        if "tree" not in pending:
            return [], []
        big = [p for p in self.huge if p not in pending.get("huge", [])]
        was = set(pending.get("ignored", []))
        ignored = [p for p in self.untracked("-i") if p not in was and not p.endswith("/")]
        return big, ignored

    def changed(self, pending: dict) -> tuple[dict, list[str], list[str], list[str]]:
        """Files changed, folders made and folders gone since the kept before state, and the changed
        files whose content is nowhere now (only the user's objects held it, and the command removed
        them)."""
        if "tree" in pending:
            changes, made, gone = self.compare(pending, self.snapshot(pending.get("limit")))
            nowhere = self.keep(changes)
            unkept = sorted(
                rel for rel, sides in changes.items() if any(s and s[1] in nowhere for s in sides)
            )
            changes = {rel: sides for rel, sides in changes.items() if rel not in unkept}
            # copied only when the command changed it
            for rel, (mode, text) in pending.get("kept", {}).items():
                if (was := (mode, text.encode("latin-1"))) != (now := _side(self.root / rel)):
                    changes[rel] = [
                        [mode, self.store(was[1])],
                        now and [now[0], self.store(now[1])],
                    ]
            return changes, made, gone, unkept
        now = self.state(list(pending["files"]))
        changes = {rel: [old, now[rel]] for rel, old in pending["files"].items() if old != now[rel]}
        return changes, [d for d in pending["dirs"] if os.path.isdir(self.root / d)], [], []

    def state(self, rels: list[str]) -> dict:
        """Named files as they are now, [mode, blob id] (None: absent or a folder),
        their bytes stored here."""
        return {
            rel: (side := _side(self.root / rel, BIG)) and [side[0], self.store(side[1])]
            for rel in rels
        }

    # -- undo, redo, restore (Putback puts a chain on disk) ----------------------------------
    def undo(self, n: int = 1, ask=lambda q: False) -> list[str]:
        """Restore the before state of the last n checkpoints; return the files restored."""
        with self.locked():
            chain = self.undoable(n, ask)
            files = Putback(self, False, ask).apply(chain)
            redo = self.ref(REDO)
            if not (redo and self.descends(redo, chain[0]["id"])):
                self.set_ref(REDO, chain[0]["id"])  # else it holds a longer line of undone ones
            self.set_ref(MAIN, chain[-1]["parent"])
            if moved := [cp["label"] for cp in chain if cp.get("git")]:
                ui.warning(f"{'; '.join(moved)}: {GIT_MOVED} (see `git status` and `git reflog`)")
            for cp in chain:
                if cp.get("lost") or cp.get("beyond"):
                    gone = {"lost": cp.get("lost"), "beyond": cp.get("beyond")}
                    ui.warning(f"{cp['label']}: {'; '.join(_said(gone))}")
            return files

    def undoable(self, n: int, ask) -> list[dict]:
        """The last n checkpoints, newest first;
        taking back a second window's own change is asked."""
        chain = self.history(limit=n)
        if not chain:
            raise CheckpointError("nothing to undo")
        if len(chain) < n:
            raise CheckpointError(
                f"only {ui.plural(len(chain), 'checkpoint')} to undo; nothing changed"
            )
        theirs = [cp["label"] for cp in chain if _running(cp.get("pid"))]
        question = f"another amas still running in this project made {'; '.join(theirs)}."
        if theirs and not ask(question + " Take it back?"):
            raise CheckpointError("cancelled; nothing changed")
        return chain

    def turns(self, n: int) -> list[dict]:
        """The checkpoints of the last n turns, newest first (a checkpoint made outside a turn is a
        turn of its own); a turn whose undo would change nothing (only folders /undo leaves) is not
        counted, and each checkpoint whose undo changes nothing is marked idle."""
        chain = []
        counted = 0
        for group in self.groups():
            marked = [cp | {"idle": self.idle(cp)} for cp in group]
            idle = all(cp["idle"] for cp in marked)
            if counted == n and not idle:
                break
            chain += marked
            counted += not idle
        if not counted:
            raise CheckpointError("nothing to undo")
        if counted < n:
            raise CheckpointError(f"only {ui.plural(counted, 'turn')} to undo; nothing changed")
        while chain[-1]["idle"]:  # older turns that change nothing stay
            chain.pop()
        return chain

    def groups(self) -> Iterator[list[dict]]:
        """The checkpoints, newest first, in runs of the same turn."""
        group = []
        for cp in self.history(limit=100_000):
            if group and (not cp.get("turn") or cp.get("turn") != group[-1].get("turn")):
                yield group
                group = []
            group.append(cp)
        if group:
            yield group

    def idle(self, cp: dict) -> bool:
        """Whether undoing the checkpoint would change nothing to speak of: no file, only folders
        made that hold files now (a cache: undo removes only empty folders, so it stays) and
        folders gone that are back."""
        if cp["files"] or cp.get("uncopied"):
            return False
        full = _caches(self.root, cp.get("made", []))
        return full and all((self.root / d).is_dir() for d in cp.get("gone", []))

    def redo(self, ask=lambda q: False) -> list[str]:
        """Re-apply what the last undo took back: the next checkpoint, with the rest of its turn."""
        with self.locked():
            ahead = self.redoable()
            if ahead is None:
                raise CheckpointError("nothing to redo")
            chain = self.rest_of_turn(ahead)
            files = Putback(self, True, ask).apply(chain)
            self.set_ref(MAIN, chain[-1]["id"])
            return files

    def rest_of_turn(self, first: dict) -> list[dict]:
        """The checkpoint /redo re-applies and those after it of the same turn, oldest first."""
        if not first.get("turn"):
            return [first]
        ahead = self.history(_after(first["parent"], REDO))
        chain = []
        for cp in reversed(ahead):
            if cp.get("turn") != first["turn"]:
                break
            chain.append(cp)
        return chain

    def redoable(self) -> dict | None:
        """The checkpoint /redo would re-apply,
        if any (one made since the undo ends what can be redone)."""
        self.settle()
        head = self.ref(MAIN)
        redo = self.ref(REDO)
        if not redo or redo == head:
            return None
        ahead = self.history(_after(head, redo))
        if not ahead or ahead[-1]["parent"] != head:
            return None
        return ahead[-1]

    def earlier(self, n: int) -> list[dict]:
        """Of the last n checkpoints, those an amas that has ended made in another session (a
        one-shot run, another terminal): /diff does not show them, so /undo asks first."""
        chain = self.history(limit=n)
        return [
            cp for cp in chain if cp.get("session") != self.session and not _running(cp.get("pid"))
        ]

    def restore(self, cid: str, ask=lambda q: False) -> list[str]:
        """Undo every checkpoint made after the given one."""
        match = [
            i
            for i, cp in enumerate(self.history(limit=100_000))
            if cid and cp["id"].startswith(cid.lower())
        ]
        if len(match) != 1:
            raise CheckpointError(
                f"{cid} is not one of the checkpoints (/checkpoint lists them); nothing changed"
            )
        if match[0] == 0:
            raise CheckpointError(f"{cid} is already the latest checkpoint; nothing changed")
        return self.undo(match[0], ask)

    def changes(self) -> list[tuple[str, tuple, tuple]]:
        """What the agent changed in this session, per file: (path, first before, last after), each
        (mode, bytes); an absent file is (None, b"")."""
        first = {}
        last = {}
        for cp in reversed([cp for cp in self.history() if cp.get("session") == self.session]):
            for rel, (before, after) in cp["files"].items():
                first.setdefault(rel, before)
                last[rel] = after
        if not first:
            return []
        blobs = self.contents([s[1] for s in [*first.values(), *last.values()] if s])
        files = sorted(first)
        return [(rel, _bytes(first[rel], blobs), _bytes(last[rel], blobs)) for rel in files]


class Putback:
    """One undo or redo on disk: a chain's before state (undo, newest first) or after state (redo,
    oldest first) put in place, once the person said yes to discarding what changed since; never
    written through a link."""

    def __init__(self, checkpoint: "Checkpoint", forward: bool, ask):
        self.checkpoint = checkpoint
        self.root = checkpoint.root
        self.forward = forward
        self.ask = ask

    def apply(self, chain: list[dict]) -> list[str]:
        """Put the chain's state on disk, asking about files changed since; the files put back."""
        plan, dirs, between = self.plan(chain)
        now = self.asked(plan, between)
        doomed = self.uncopied_going(chain)
        # a file already as wanted is left alone, so an undo that was interrupted can simply be run
        # again
        try:
            wanted = {rel: sides[-1] for rel, sides in plan.items() if now[rel] != sides[-1]}
            wanted |= dict.fromkeys(doomed)
            self.put(wanted, dirs, [*plan, *dirs, *doomed])
        except OSError as e:
            raise CheckpointError(
                f"stopped part way ({e}); what was put back stays, running it again goes on"
            ) from None
        finally:
            # what it put back the user's git tracks, an ignored file too, is tracked again, by
            # every amas
            (self.checkpoint.dir / "restored").touch()
        return sorted([*plan, *doomed])

    def plan(self, chain: list[dict]) -> tuple[dict, dict, set]:
        """Per file [expected now, ..., wanted], per folder whether it should be there, and the
        files to ask about: changed between two checkpoints of the chain (by you: undoing both
        would drop that edit unasked), or in a checkpoint of an amas that was killed (what changed
        until the next one started may be yours)."""
        forward = self.forward
        plan = {}
        dirs = {}
        between = set()
        for cp in chain:
            # a file made by a command that removed an ignored one stays
            made_stay = not forward and (cp.get("lost") or cp.get("beyond"))
            for rel, sides in cp["files"].items():
                if made_stay and not sides[0]:
                    continue
                if rel in plan and plan[rel][-1] != sides[not forward]:
                    between.add(rel)
                plan.setdefault(rel, [sides[not forward]]).append(sides[forward])
            dirs |= {d: forward for d in cp["made"]} | {d: not forward for d in cp["gone"]}
            # what changed while no amas watched
            if cp.get("interrupted"):
                between |= set(cp["files"])
        return plan, dirs, between

    def asked(self, plan: dict, between: set) -> dict:
        """The planned files as they are now, once the person said yes to discarding those changed
        since (CheckpointError: no)."""
        # the content of a file changed since is kept too, in case
        now = self.checkpoint.state(list(plan))
        edited = [
            rel
            for rel, sides in plan.items()
            if now[rel] not in (sides[0], sides[-1]) or rel in between
        ]
        if edited and not self.ask(
            f"{', '.join(edited)} changed since the checkpoint. Discard those edits?"
        ):
            raise CheckpointError("cancelled; nothing changed")
        return now

    def uncopied_going(self, chain: list[dict]) -> list[str]:
        """The files commands of the chain made and did not copy (past checkpoint_max_mb) that undo
        deletes: those still there, if the person says so. Redo says it cannot bring them back."""
        made = [rel for cp in chain for rel in cp.get("uncopied", [])]
        there = [rel for rel in made if os.path.lexists(self.root / rel)]
        if self.forward and len(there) < len(made):
            gone = _some([rel for rel in made if rel not in there])
            ui.warning(f"/redo cannot bring back {gone}: not copied (past checkpoint_max_mb)")
        if self.forward or not there:
            return []
        said = f"{_some(there)}: made by a command and not copied (past checkpoint_max_mb)"
        if self.ask(f"{said}, so /redo cannot bring them back. Delete them?"):
            return there
        ui.info(f"left in place: {said}")
        return []

    def put(self, files: dict, dirs: dict, rels: list[str]) -> None:
        """Remove files, remove and make folders, then write files; never through a link on the
        way to one of rels (a link this removes or replaces goes first: a folder swapped for a
        link)."""
        going = {rel for rel, side in files.items() if LINK not in (side or ())}
        links = {
            str(d) for rel in rels for d in Path(rel).parents if os.path.islink(self.root / d)
        } - going
        if linked := [rel for rel in rels if links & set(map(str, Path(rel).parents))]:
            raise CheckpointError(
                f"a folder on the path of {', '.join(linked)} is a symlink; nothing changed"
            )
        paths = {rel: self.root / rel for rel in [*files, *dirs]}
        written = sorted((rel for rel in files if files[rel]), key=len)
        gone = [(rel, False) for rel, side in files.items() if not side]
        gone += [(d, True) for d in dirs if not dirs[d]]
        # all there, or nothing changes
        with self.checkpoint.blobs([files[rel][1] for rel in written]) as pieces:
            for rel, folder in sorted(gone, key=lambda item: len(item[0]), reverse=True):
                _remove(paths[rel], folder)
            for rel in sorted(d for d, keep in dirs.items() if keep):
                paths[rel].mkdir(parents=True, exist_ok=True)
            for rel in written:
                _write(paths[rel], files[rel][0], pieces())
                _pause("undo")


def _visible(old: dict) -> Callable[[str], bool]:
    """Whether a path a command's snapshot holds was there before, out of the earlier snapshot:
    what the command only made visible (un-ignored, readable, a nested repository's files once its
    .git is gone, a file left uncopied): never made by it, so never deleted by /undo."""
    was = {*old.get("ignored", []), *old.get("unread", []), *old.get("huge", [])}
    was |= {*old.get("uncopied", []), *(f"{repo}/" for repo in old.get("nested", []))}
    folders = tuple(p for p in was if p.endswith("/"))
    return lambda p: p in was or p.startswith(folders)


def _stamp(path: Path) -> list[int] | None:
    """A file's size and modification time (None: gone), to tell whether it changed since."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns]


def _alternate(objects: str) -> str:
    """An object folder as GIT_ALTERNATE_OBJECT_DIRECTORIES takes it: quoted, with \\, " and
    newlines escaped."""
    quoted = objects.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{quoted}"'


def _tree_side(mode: str, sha: str) -> list[str] | None:
    """One side of a `git diff-tree` line as a checkpoint holds it: [mode, blob]; None: absent."""
    if mode == "000000":
        return None
    return [mode, sha]


def _git_order(name: str, mode: str) -> bytes:
    """Where a tree entry sorts in git's order: by name, a folder's as if it ended in /."""
    if mode == "40000":
        return os.fsencode(name) + b"/"
    return os.fsencode(name)


def _after(start: str | None, end: str) -> str:
    """The revisions of end's line after start; all of them when there is no start."""
    if not start:
        return end
    return f"{start}..{end}"


def _bytes(side: list | None, blobs: dict[str, bytes]) -> tuple[str | None, bytes]:
    """A side of a change as (mode, bytes); an absent file is (None, b"")."""
    if not side:
        return None, b""
    return side[0], blobs[side[1]]


def _left_out(big: list[str], ignored: list[str]) -> list[str]:
    """What a command made that no checkpoint holds, said: files too big to read, and files git
    ignores, those in a folder it made named by that folder (`.pytest_cache/`, not each file)."""
    too_big = f"over {HUGE >> 20} MB or sparse, not kept"
    return [f"{p} ({too_big})" for p in big] + [f"{p} (git ignores it)" for p in ignored]


def _note(said: list[str], left: list[str]) -> str:
    """The checkpoint's note under a command's output: what it holds, and what /undo leaves."""
    if left:
        said = [*said, f"/undo leaves {_some(left)}"]
    if not said:
        return ""
    return f"[{'; '.join(said)}]"


def _under(paths: list[str], made: list[str]) -> list[str]:
    """Paths, each inside a folder made named by its outermost such folder instead, once."""
    named = {}
    for rel in paths:
        folders = [str(f) for f in reversed(Path(rel).parents) if str(f) in made]
        name = rel
        if folders:
            name = folders[0] + "/"
        named.setdefault(name)
    return list(named)


def _caches(root: Path, made: list[str]) -> bool:
    """Whether each outermost folder made holds files now (ones git ignores: a cache), so that
    /undo, which removes only an empty folder, leaves them."""
    made = set(made)
    tops = [d for d in made if not made & {str(p) for p in Path(d).parents}]
    return all(any(files for _, _, files in os.walk(root / d)) for d in tops)


def _said(meta: dict) -> list[str]:
    """What a checkpoint's note and /undo say it leaves: git's state a command moved, and what
    it removed that no checkpoint holds."""
    said = []
    if meta.get("git"):
        said.append(GIT_MOVED)
    if meta.get("lost"):
        said.append(f"it removed {_some(meta['lost'])}, {LOST}")
    if meta.get("beyond"):
        said.append(f"it removed {_some(meta['beyond'])}, {BEYOND}")
    if meta.get("uncopied"):
        said.append(f"{_some(meta['uncopied'])} {UNCOPIED_SAID}")
    return said


def _counted(changes: dict, meta: dict) -> str:
    """How many files a checkpoint holds or deletes, or else folders."""
    files = len(changes) + len(meta["uncopied"])
    if files:
        return ui.plural(files, "file")
    return ui.plural(len(meta["made"]) + len(meta["gone"]), "folder")


def _some(paths: list[str]) -> str:
    """The first five paths, and an ellipsis if there are more."""
    if len(paths) > 5:
        return ", ".join(paths[:5]) + "…"
    return ", ".join(paths)


def _side(path: Path, big: float = float("inf")) -> tuple[str, bytes | Path] | None:
    """(mode, bytes) of the file or link at path, never read through a link on the way (a file over
    big: its path, not read); None: absent or a folder."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        if _linked(path):
            return None
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return LINK, os.fsencode(os.readlink(path))
        if stat.S_ISREG(st.st_mode) and st.st_size > big:
            return _mode(st), path
        if stat.S_ISREG(st.st_mode):
            return _mode(st), path.read_bytes()
    return None


def _mode(st: os.stat_result) -> str:
    """A regular file's mode as git records it: executable by its owner, or not."""
    if st.st_mode & 0o100:
        return "100755"
    return "100644"


def _pieces(pipe) -> Iterator[bytes]:
    """The next blob `git cat-file --batch` writes, in pieces of up to 1 MiB."""
    left = int(pipe.readline().split()[2])
    while left:
        piece = pipe.read(min(left, 1 << 20))
        if not piece:
            raise CheckpointError("git cat-file stopped part way")
        left -= len(piece)
        yield piece
    pipe.read(1)  # the newline after each blob


def _small(root: Path, paths: list[str], budget: int = 1 << 22) -> list[str]:
    """The files among paths worth keeping as they are:
    readable, up to 1 MiB each and 4 MiB in all."""
    out = []
    for rel in (p for p in paths if not p.endswith("/") and _readable(root / p)):
        size = os.lstat(root / rel).st_size
        if size <= min(1 << 20, budget):
            out.append(rel)
            budget -= size
    return out


def _huge(path: Path) -> bool:
    """A regular file over HUGE, or a sparse one over 1 MiB (fewer blocks than half its size)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    sparse = st.st_size > 1 << 20 and st.st_blocks * 512 < st.st_size // 2
    return stat.S_ISREG(st.st_mode) and (st.st_size > HUGE or sparse)


def _size(path: Path) -> int:
    """A regular file's size (0 for anything else, or gone)."""
    try:
        info = os.lstat(path)
    except OSError:
        return 0
    if not stat.S_ISREG(info.st_mode):
        return 0
    return info.st_size


def _kept(path: str, kept: dict) -> bool:
    """A path whose content the command's before state holds:
    a kept file, or a folder of kept files."""
    return path in kept or path.endswith("/") and any(k.startswith(path) for k in kept)


def _readable(path: Path) -> bool:
    # one unreadable file would fail the whole update-index
    return path.is_file() and os.access(path, os.R_OK)


def _linked(path: Path) -> bool:
    """A folder on the way to path is a symlink."""
    return os.path.realpath(path.parent) != os.path.normpath(path.parent)


def _running(pid) -> bool:
    """Another process with this id is alive (an amas that made a checkpoint and has not ended)."""
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except OSError:  # gone (or another user's process: not an amas of this user)
        return False
    return True


def _failed(error: Exception) -> str:
    """Say on screen that a change has no checkpoint; the note that tells the model."""
    message = f"checkpoint failed: /undo cannot take this change back ({str(error)[:300]})"
    ui.warning(message)
    return f"[{message}]"


def _remove(path: Path, folder: bool = False) -> None:
    """A file or link gone (never followed); a folder only if it holds nothing but empty folders."""
    if _linked(path):  # what is at the path is gone already: its folder is a link this undo removes
        return
    if not folder and (path.is_symlink() or path.is_file()):
        path.unlink()
    if not path.is_dir() or path.is_symlink():
        return
    for inner, _, _ in os.walk(path, topdown=False):
        with contextlib.suppress(OSError):
            os.rmdir(inner)


def _write(path: Path, mode: str, pieces: Iterator[bytes]) -> None:
    """A file or link as it was, through a temporary name and a rename: never written through a
    link. A new file gets git's modes under the umask; a file still there keeps its own, x bits as
    recorded."""
    if path.is_dir() and not path.is_symlink():
        path.rmdir()  # a folder where the file was (emptied above): a file/folder swap
    if mode == LINK:
        return _link(path, os.fsdecode(b"".join(pieces)))
    if not path.is_file() or path.is_symlink():
        return project.write(path, pieces, mode=NEW_MODES.get(mode, 0o666))
    project.write(path, pieces)  # its own bits, exactly
    _set_x(path, mode == "100755")


def _set_x(path: Path, executable: bool) -> None:
    """A file's x bits as recorded: on (for whoever may read it) or off, its other bits its own."""
    old = os.lstat(path).st_mode & 0o777
    bits = old & ~0o111
    if executable:
        bits = old | (old & 0o444) >> 2
    if bits != old:
        os.chmod(path, bits)


def _link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # short, whatever the name's length
    tmp = path.with_name(f".amas-undo-{os.urandom(4).hex()}.tmp")
    os.symlink(target, tmp)
    try:
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):  # only if the rename did not happen
            tmp.unlink()


def _pause(point: str) -> None:
    """A test hook: AMAS_TEST_PAUSE=<point> holds amas here for a minute,
    so a test can kill -9 it at that moment."""
    if os.environ.get("AMAS_TEST_PAUSE") == point:
        ui.info(f"paused at {point}")  # on stderr, where the test waits for it
        time.sleep(60)
