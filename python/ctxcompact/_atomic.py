"""Write a file so that readers see the old one or the whole new one, never half."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class OutputNotWritableError(OSError):
    """An output that cannot be written; ``str()`` names the path and why."""

    def __str__(self) -> str:
        # a message that names its path already is shown as it is
        if self.strerror and self.filename and str(self.filename) in str(self.strerror):
            return str(self.strerror)
        return super().__str__()


class NotRegularFileError(OutputNotWritableError):
    """The path holds a device, pipe, socket or folder: never replaced by a file."""


class ReadOnlyFileError(OutputNotWritableError):
    """The path holds a file nobody may write (no write permission bit, or
    none for this user): it is never replaced."""


def read_only(path: Path) -> str | None:
    """Why the existing file ``path`` must not be replaced although its
    folder allows it (a rename needs only the folder's permission): no write
    permission bit for anyone (``chmod 444``; checked by the bits, as root may
    write anything), or none for this user; ``None`` when it may be, or when
    there is no file."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if not stat.S_ISREG(mode):
        return None
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        return f"read-only file (mode {stat.S_IMODE(mode):04o}): it is never replaced"
    if not os.access(path, os.W_OK):
        return "read-only file for this user: it is never replaced"
    return None


def keep_mode(replaced: Path, new: Path) -> None:
    """Give ``new`` the permission bits of the file ``replaced`` it is about to
    replace (a 0600 export stays private), and as root its owner and group
    too; nothing when there is no such file. Best effort for the owner: a
    filesystem that refuses it keeps the new file's."""
    try:
        old = replaced.stat()
    except FileNotFoundError:
        return
    if not stat.S_ISREG(old.st_mode):
        return
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        with contextlib.suppress(OSError):  # before chmod: chown clears set-id bits
            os.chown(new, old.st_uid, old.st_gid)
    os.chmod(new, stat.S_IMODE(old.st_mode))


def beside(path: Path, *, keep_suffix: bool = False) -> Path:
    """The temporary name ``replacing`` writes ``path`` under."""
    if keep_suffix:
        # no dot before "tmp": a path without a suffix must not gain one
        return path.with_name(f".{path.stem}-tmp{os.getpid()}{path.suffix}")
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def check_replaceable(path: Path) -> Path:
    """The file a write of ``path`` replaces (a symlink's target: the link
    stays), or an ``OSError`` naming why it cannot be: a path that exists and
    is not a regular file (a folder, device, pipe), a read-only file
    (``read_only``: ``ReadOnlyFileError``), or a missing folder."""
    if path.is_symlink():
        path = path.resolve()
    if path.exists() and not path.is_file():
        # A rename would put a plain file where a device, pipe or socket was.
        raise NotRegularFileError(errno.EINVAL, "not a regular file: it is never replaced",
                                  str(path))  # fmt: skip
    refused = read_only(path)
    if refused is not None:
        raise ReadOnlyFileError(errno.EACCES, refused, str(path))
    if not path.parent.is_dir():
        # Named here: the write would fail on the temporary name instead.
        missing = f"no folder to write {path.name} in"
        raise FileNotFoundError(errno.ENOENT, missing, str(path.parent))
    return path


@contextmanager
def replacing(path: str | Path, *, keep_suffix: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``,
    on any error it is removed and ``path`` is left as it was. A symlink's
    target is replaced (the link stays); a path that exists and is not a
    regular file (a folder, device, pipe) or a read-only file is an
    ``OSError``. The new file keeps the replaced one's mode (``keep_mode``).

    ``keep_suffix``: end the temporary name with ``path``'s suffix, for writers
    that choose the layout from it (``.jsonl`` vs ``.json``).
    """
    path = check_replaceable(Path(path))
    tmp = beside(path, keep_suffix=keep_suffix)
    try:
        yield tmp
        keep_mode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # keep the original error
            tmp.unlink(missing_ok=True)
        raise


def replace_together(moves: list[tuple[Path, Path]]) -> None:
    """Rename each finished temporary file onto its destination (``(tmp,
    destination)`` pairs, in order), all or nothing as far as the filesystem
    allows: each destination's old file is kept aside (a hard link beside
    it, or the file itself renamed where links are refused) until every
    rename has succeeded. When one fails, the destinations already replaced
    get their old file back (or are removed when they had none) and the
    error is raised; the temporary files not yet renamed are the caller's.
    Each new file keeps the mode of the file it replaces (``keep_mode``);
    a destination that became read-only meanwhile is refused
    (``check_replaceable``) before anything is renamed."""
    for _, dest in moves:
        check_replaceable(dest)
    done: list[tuple[Path, Path | None]] = []
    try:
        for tmp, dest in moves:
            kept = None
            if dest.exists():
                kept = dest.with_name(f".{dest.name}.old-{os.getpid()}")
                with contextlib.suppress(FileNotFoundError):
                    kept.unlink()  # left by a run that was killed
                try:
                    os.link(dest, kept)  # the destination stays in place meanwhile
                except OSError:
                    os.replace(dest, kept)
            done.append((dest, kept))
            keep_mode(kept if kept is not None else dest, tmp)
            os.replace(tmp, dest)
    except BaseException:
        for dest, kept in reversed(done):
            with contextlib.suppress(OSError):  # keep the original error
                if kept is not None:
                    os.replace(kept, dest)
                    # a no-op when both are still links to one file (its rename failed)
                    kept.unlink(missing_ok=True)
                else:
                    dest.unlink(missing_ok=True)
        raise
    for _, kept in done:
        if kept is not None:
            with contextlib.suppress(OSError):
                kept.unlink()
