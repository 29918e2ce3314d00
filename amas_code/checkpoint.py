"""Checkpoints in git: every agent change is a commit of only its files; undo and redo by file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

PREFIX, SAVE = "[amas] ", "[amas] save"
REDO_REF = "refs/amas/redo"
BIG = 50_000_000  # bytes: larger dirty files are not snapshotted around shell commands


class CheckpointError(Exception):
    """An undo, redo or save that was refused; nothing was changed."""


class Checkpoint:
    """Agent changes as commits on the current branch, or in .amas/shadow.git outside a repo."""

    def __init__(self, root: Path, ignore: list[str] | None = None):
        self.root, self.ignore, self._git = Path(root).resolve(), ignore or [], None

    @property
    def git(self):
        if self._git is None:
            from git import Git
            from git.exc import GitCommandError

            try:
                top = Git(self.root).rev_parse("--show-toplevel")
            except GitCommandError:
                top = None
            self.top = Path(top).resolve() if top else self.root
            self._git = Git(self.top)
            self._git.update_environment(GIT_LITERAL_PATHSPECS="1", **self._identity())
            if top is None:
                self._make_shadow()
        return self._git

    def _identity(self) -> dict:
        from git import Git
        from git.exc import GitCommandError

        try:
            Git(self.root).var("GIT_COMMITTER_IDENT")
            return {}
        except GitCommandError:  # no user.name/email configured: commit as amas, never fail
            return {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
                    for what, value in (("NAME", "Amas Code"), ("EMAIL", "amas@localhost"))}

    def _make_shadow(self) -> None:
        """A separate git dir under .amas/ with the project as work tree: no .git in the user's folder."""
        gitdir = self.root / ".amas" / "shadow.git"
        fresh = not (gitdir / "HEAD").exists()
        if fresh:
            gitdir.parent.mkdir(parents=True, exist_ok=True)
            self.run("init", "-q", "--bare", str(gitdir))
        self._git.update_environment(GIT_DIR=str(gitdir), GIT_WORK_TREE=str(self.root))
        if fresh:
            (gitdir / "info").mkdir(exist_ok=True)
            (gitdir / "info" / "exclude").write_text("\n".join(["/.amas/", *self.ignore]) + "\n")
            empty = self.run("hash-object", "-t", "tree", "-w", "--stdin", istream=tempfile.TemporaryFile())
            self.run("update-ref", "HEAD", self.run("commit-tree", empty, "-m", "amas shadow repository"))

    def run(self, *args, **kwargs):
        return self.git.execute(["git", *args], **kwargs)

    # -- reading state --------------------------------------------------------------------------
    def head(self) -> str | None:
        return self._resolve("HEAD^{commit}")

    def rel(self, path: str | Path) -> str | None:
        """Path relative to the repository top, or None when it is outside or git-ignored."""
        from git.exc import GitCommandError

        full, top = (self.root / path).resolve(), self.git and self.top
        if not full.is_relative_to(top):
            return None
        rel = full.relative_to(top).as_posix()
        try:
            self.run("check-ignore", "-q", rel, env={"GIT_LITERAL_PATHSPECS": "0"})
            return None
        except GitCommandError:
            return rel

    def blobs_now(self, rels) -> dict:
        """Blob id of each file as it is now (stored in git), None when absent."""
        rels = list(rels)
        found = [r for r in rels if (self.top / r).is_file() and (self.top / r).stat().st_size < BIG]
        shas = []
        for i in range(0, len(found), 500):
            shas += self.run("hash-object", "-w", "--", *found[i:i + 500]).split()
        return {**dict.fromkeys(rels), **dict(zip(found, shas, strict=True))}

    def blobs_at(self, commit: str | None, rels) -> dict:
        """Blob id of each path in a commit, None when absent."""
        out = dict.fromkeys(rels)
        if commit and out:
            for line in self.run("ls-tree", "-r", "-z", commit, "--", *out).split("\0"):
                if line:
                    meta, path = line.split("\t", 1)
                    out[path] = meta.split()[2]
        return out

    def dirty(self) -> list[str]:
        """Paths git sees as modified, deleted or untracked."""
        entries = self.run("status", "--porcelain=v1", "-z", "-uall", "--no-renames").split("\0")
        return [e[3:] for e in entries if len(e) > 3]

    def files_in(self, commit: str) -> list[str]:
        return [p for p in self.run("diff-tree", "--no-commit-id", "-r", "-z", "--name-only", "--root",
                                    commit).split("\0") if p]

    # -- saving ---------------------------------------------------------------------------------
    def begin(self, paths: list[str] | None = None) -> dict:
        """Snapshot before a change: the given paths, or every dirty file (for shell commands)."""
        rels = [r for r in map(self.rel, paths) if r] if paths is not None else self.dirty()
        return {"explicit": paths is not None, "before": self.blobs_now(rels)}

    def commit(self, snap: dict | None, message: str) -> str | None:
        """Commit what changed since begin(); user edits found first go in their own save commit."""
        if not snap:
            return None
        before = snap["before"]
        rels = list(before) if snap["explicit"] else sorted(set(before) | set(self.dirty()))
        top = self.head()
        head, after = self.blobs_at(top, rels), self.blobs_now(rels)
        for r in rels:
            before.setdefault(r, head[r])
        changed = [r for r in rels if after[r] != before[r]]
        if not changed:
            return None
        saves = {r: before[r] for r in changed if before[r] != head[r]}
        if saves:
            top = self._commit(saves, f"{SAVE}: your uncommitted changes to {', '.join(saves)}", top)
        return self._commit({r: after[r] for r in changed}, PREFIX + message, top)[:8]

    def _commit(self, blobs: dict, message: str, head: str | None) -> str:
        """Commit blobs for paths on top of head through a temporary index; the user's index is reset
        only for those paths."""
        with tempfile.TemporaryDirectory() as tmp:
            env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
            self.run("read-tree", *([head] if head else ["--empty"]), env=env)
            for rel, sha in blobs.items():
                if sha is None:
                    self.run("update-index", "--force-remove", "--", rel, env=env)
                else:
                    mode = "100755" if os.access(self.top / rel, os.X_OK) else "100644"
                    self.run("update-index", "--add", "--cacheinfo", f"{mode},{sha},{rel}", env=env)
            tree = self.run("write-tree", env=env)
        commit = self.run("commit-tree", tree, *(["-p", head] if head else []), "-m", message)
        self.run("update-ref", "-m", message, "HEAD", commit, *([head] if head else []))
        self.run("reset", "-q", "HEAD", "--", *blobs)
        return commit

    # -- undo, redo, list -----------------------------------------------------------------------
    def log(self, rev: str = "HEAD", limit: int = 200) -> list[tuple[str, list[str], str]]:
        """(sha, parents, subject) from rev back, newest first."""
        if not self.head():
            return []
        raw = self.run("log", f"-n{limit}", "--first-parent", "-z", "--format=%H%x1f%P%x1f%s", rev)
        return [(c, p.split(), s) for c, p, s in (e.split("\x1f") for e in raw.split("\0") if e)]

    def _undo_chain(self, n: int) -> list[tuple]:
        """The commits of the last n checkpoints, newest first, with their save commits."""
        chain, count = [], 0
        for entry in self.log():
            sha, parents, subject = entry
            if count == n and not subject.startswith(SAVE):
                break
            if not subject.startswith(PREFIX):
                raise CheckpointError(f"refusing: {sha[:8]} {subject!r} is not an amas checkpoint; nothing changed")
            if len(parents) != 1:
                raise CheckpointError(f"refusing: {sha[:8]} is a merge or the first commit; nothing changed")
            chain.append(entry)
            count += not subject.startswith(SAVE)
        if count < n:
            raise CheckpointError(f"only {count} checkpoint(s) to undo; nothing changed")
        if self.run("for-each-ref", "--contains", chain[-1][0], "refs/remotes"):
            raise CheckpointError("refusing: those checkpoints were already pushed; nothing changed")
        return chain

    def _before(self, chain: list[tuple], rels: list[str]) -> dict:
        """Each file as it was before the chain: a save commit holds the user's own version."""
        out = {}
        for sha, parents, subject in reversed(chain):
            touched = [r for r in self.files_in(sha) if r in rels and r not in out]
            at = sha if subject.startswith(SAVE) else parents[0]
            out.update(self.blobs_at(at, touched))
        return out

    def _apply(self, rels: list[str], expect: dict, want: dict, ask) -> None:
        """Make the files as `want`; ask first if any differs from `expect` (edited since)."""
        now = self.blobs_now(rels)
        edited = [r for r in rels if now[r] != expect[r]]
        if edited and not ask(f"{', '.join(edited)} changed since the checkpoint. Discard those edits?"):
            raise CheckpointError("cancelled; nothing changed")
        for rel in rels:
            path = self.top / rel
            if want[rel] is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(self.run("cat-file", "blob", want[rel], stdout_as_string=False,
                                          strip_newline_in_stdout=False))

    def undo(self, n: int = 1, ask=lambda q: False) -> list[str]:
        """Take back the last n checkpoints; return the files restored."""
        chain = self._undo_chain(n)
        rels, redo = self._move(chain, False, ask), self._resolve(REDO_REF)
        if not (redo and self._is_ancestor(chain[0][0], redo)):
            self.run("update-ref", REDO_REF, chain[0][0])
        return rels

    def redo(self, ask=lambda q: False) -> list[str]:
        """Re-apply the checkpoint that the last undo took back."""
        head, redo = self.head(), self._resolve(REDO_REF)
        if not redo or redo == head or not self._is_ancestor(head, redo):
            raise CheckpointError("nothing to redo")
        ahead = self.log(f"{head}..{redo}")[::-1]
        take = next(i for i, c in enumerate(ahead) if not c[2].startswith(SAVE))
        return self._move(ahead[:take + 1][::-1], True, ask)

    def _move(self, chain: list[tuple], forward: bool, ask) -> list[str]:
        """Move HEAD over a chain of checkpoints (newest first), rewriting only their files."""
        top, base = chain[0][0], chain[-1][1][0]
        rels = sorted({r for c in chain for r in self.files_in(c[0])})
        before, after = self._before(chain, rels), self.blobs_at(top, rels)
        old, new = (base, top) if forward else (top, base)
        self._apply(rels, *((before, after) if forward else (after, before)), ask)
        self.run("reset", "-q", new, "--", *rels)
        self.run("update-ref", "-m", f"amas {'redo' if forward else 'undo'}", "HEAD", new, old)
        return rels

    def _resolve(self, ref: str) -> str | None:
        from git.exc import GitCommandError

        try:
            return self.run("rev-parse", "-q", "--verify", ref)
        except GitCommandError:
            return None

    def _is_ancestor(self, a: str, b: str) -> bool:
        return self.run("merge-base", "--is-ancestor", a, b, with_extended_output=True, with_exceptions=False)[0] == 0

    def list(self, limit: int = 20) -> list[tuple[str, str]]:
        """Recent agent checkpoints (sha, subject), newest first, up to the first user commit."""
        out = []
        for sha, _, subject in self.log():
            if not subject.startswith(PREFIX):
                break
            if not subject.startswith(SAVE):
                out.append((sha[:8], subject[len(PREFIX):]))
        return out[:limit]

    def restore(self, sha: str, ask=lambda q: False) -> list[str]:
        """Undo every checkpoint made after the given one."""
        shas = [s for s, _ in self.list(limit=200)]
        match = [i for i, s in enumerate(shas) if s.startswith(sha[:8])]
        if not match:
            raise CheckpointError(f"{sha} is not one of the recent checkpoints (/checkpoint lists them)")
        if match[0] == 0:
            raise CheckpointError(f"{sha} is already the latest checkpoint")
        return self.undo(match[0], ask)
