"""What ``sqlanon dbt`` writes must stay text to dbt and stay inside the project (issue 32, 9-12).

dbt renders every model file and almost every string of a properties ``.yml`` as Jinja, and it
wraps a test argument that looks like a call (``env_var('X')``, ``ref('m')``) in ``{{ }}`` before
rendering it: a column named ``{{ run_query(...) }}`` or ``env_var('SECRET')`` would run. So every
name sqlanon writes goes through :func:`jinja_text` (SQL and comments: each ``{`` that would open
Jinja becomes ``{{ '{' }}``) or :func:`jinja_value` (a YAML string: a Jinja string literal whose
escapes leave no brace, so that dbt's rendering gives back the name, byte for byte).

Files are written under the project's real root only, never through a link: every folder is
opened from the root one name at a time with ``O_NOFOLLOW``, every file is first written to a
temporary file created exclusively beside it, and then moved into place (``os.replace`` for a file
sqlanon replaces, a hard link that fails if the name exists for a new one), so a failure while
writing leaves the files as they were and removes the folders it created.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlanon.errors import SqlanonError

#: dbt's test-argument check (dbt/clients/jinja.py ``looks_like_func``), made broader: a string that
#: starts like one of these calls is written as a literal.
_CALL = re.compile(r"\s*(env_var|ref|var|source|doc)\s*\(", re.IGNORECASE)
_OPEN = re.compile(r"\{(?=[{%#])")
_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def jinja_text(text: str) -> str:
    """Template text that dbt renders back to ``text``: no ``{{``, ``{%`` or ``{#`` opens a block.

    >>> jinja_text("{{ log('x') }} {%")
    "{{ '{' }}{ log('x') }} {{ '{' }}%"
    """
    return _OPEN.sub("{{ '{' }}", text)


def _literal(text: str) -> str:
    """A Jinja string literal of ``text`` in printable ASCII with no brace or quote of its own
    (Jinja decodes a literal's escapes as Python's ``unicode-escape``)."""
    out = []
    for ch in text:
        if ch in "\\'{}%#" or not (" " <= ch <= "~"):
            code = ord(ch)
            out.append(
                f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
            )
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


def jinja_value(text: str) -> str:
    """A YAML string that dbt renders (as text or as a test argument) back to ``text``.

    >>> jinja_value("age")
    'age'
    >>> jinja_value("env_var('K')")
    "{{ 'env_var(\\\\x27K\\\\x27)' }}"
    """
    if _OPEN.search(text) or _CALL.match(text):
        return "{{ " + _literal(text) + " }}"
    return text


def jinja_doc(value: Any, keep: frozenset[str] = frozenset()) -> Any:
    """Every string of a YAML document through :func:`jinja_value`, but the values of ``keep``'s keys
    (Jinja that sqlanon means dbt to run, such as a test's ``reference: source('s', 't')``)."""
    if isinstance(value, dict):
        return {k: v if k in keep else jinja_doc(v, keep) for k, v in value.items()}
    if isinstance(value, list):
        return [jinja_doc(v, keep) for v in value]
    return jinja_value(value) if isinstance(value, str) else value


def one_line(text: str) -> str:
    """``text`` for one line of a comment: every character that is not printable (a newline would end
    a SQL or YAML comment) as a ``\\u`` escape, and no Jinja.

    >>> one_line("a\\nb {{ x }}")
    "a\\\\u000ab {{ '{' }}{ x }}"
    """
    safe = "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in text)
    return jinja_text(safe)


# -- paths ---------------------------------------------------------------------------------------


def inside(root: Path, path: Path, what: str) -> Path:
    """``path`` with every link resolved, refused unless it lies under ``root`` (already resolved)."""
    try:
        real = path.resolve(strict=False)
    except (OSError, RuntimeError, ValueError) as e:
        raise SqlanonError(f"--project: {what} cannot be resolved ({e})") from None
    if real != root and not real.is_relative_to(root):
        raise SqlanonError(f"--project: {what} is outside the project ({real} is not under {root})")
    return real


def name_max(folder: Path) -> int:
    """The longest file name (bytes) the folder's file system takes, 255 where it cannot say."""
    probe = folder
    while not probe.is_dir() and probe != probe.parent:
        probe = probe.parent
    try:
        return int(os.pathconf(probe, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def existing(path: Path, shown: str) -> str | None:
    """The text of ``path`` if it exists, None if it does not; refuses a link (live or dangling)
    and anything that is not a regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise SqlanonError(f"--project: {shown}: {e.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise SqlanonError(f"--project: {shown} is a symbolic link; sqlanon dbt never writes through one")
    if not stat.S_ISREG(st.st_mode):
        raise SqlanonError(f"--project: {shown} exists and is not a file")
    try:
        with open(path, "rb") as f:  # noqa: PTH123 - read once, no link (checked just above)
            return f.read().decode("utf-8", errors="replace")
    except OSError as e:
        raise SqlanonError(f"--project: {shown}: {e.strerror}") from None


class _Writer:
    """Folders opened from the root without following links; what it created, to undo."""

    def __init__(self, root: Path) -> None:
        self.root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.fds: dict[tuple[str, ...], int] = {(): self.root_fd}
        self.made: list[tuple[int, str]] = []  # (parent fd, name) of folders created, in order
        self.temps: list[tuple[int, str]] = []

    def folder(self, parts: tuple[str, ...]) -> int:
        if parts in self.fds:
            return self.fds[parts]
        parent = self.folder(parts[:-1])
        try:
            fd = os.open(parts[-1], _NOFOLLOW_DIR, dir_fd=parent)
        except FileNotFoundError:
            os.mkdir(parts[-1], 0o777, dir_fd=parent)
            self.made.append((parent, parts[-1]))
            fd = os.open(parts[-1], _NOFOLLOW_DIR, dir_fd=parent)
        self.fds[parts] = fd
        return fd

    def temp(self, dir_fd: int, data: bytes, mode: int) -> str:
        name = f".sqlanon-{secrets.token_hex(6)}.tmp"
        fd = os.open(name, _NEW_FILE, 0o600, dir_fd=dir_fd)
        self.temps.append((dir_fd, name))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        return name

    def undo(self) -> None:
        for dir_fd, name in self.temps:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=dir_fd)
        for dir_fd, name in reversed(self.made):
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=dir_fd)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)


def _mode(dir_fd: int, name: str) -> int | None:
    """The permission bits of the regular file ``name`` (None: it does not exist); refuses a link."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.ELOOP, "became a link or not a file while sqlanon was writing")
    return stat.S_IMODE(st.st_mode)


def _place_new(dir_fd: int, tmp: str, name: str, text: str) -> None:
    """Move the temporary file to the new name, failing if the name exists (a file or a link planted
    since the check): a hard link, or where the file system has none an exclusive create."""
    try:
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV):
            raise
        fd = os.open(name, _NEW_FILE, 0o666, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
    os.unlink(tmp, dir_fd=dir_fd)


def write_all(root: Path, files: dict[Path, str], replace: set[Path]) -> None:
    """Write ``files`` (paths under the resolved ``root``): every file to a temporary file first,
    then each into place: ``replace`` names the files that exist and may be replaced, every other
    must still be absent. Nothing is followed through a link; a failure before the moves (a full
    disk, a name the file system refuses, a link planted since the check) changes nothing."""
    umask = os.umask(0)
    os.umask(umask)
    try:
        w = _Writer(root)
    except OSError as e:
        raise SqlanonError(f"--project: {root}: {e.strerror}") from None
    shown = ""
    try:
        staged = []
        for path, text in files.items():
            parts = path.relative_to(root).parts
            shown = str(path.relative_to(root))
            dir_fd = w.folder(parts[:-1])
            mode = _mode(dir_fd, parts[-1])
            if (mode is not None) != (path in replace):
                raise OSError(errno.EEXIST, "appeared or vanished while sqlanon was writing")
            tmp = w.temp(dir_fd, text.encode("utf-8"), mode if mode is not None else 0o666 & ~umask)
            staged.append((dir_fd, tmp, parts[-1], path in replace, shown, text))
        for dir_fd, tmp, name, is_replace, shown, text in staged:  # noqa: B007 - shown is the error's
            if is_replace:
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            else:
                _place_new(dir_fd, tmp, name, text)
    except OSError as e:
        w.undo()
        raise SqlanonError(f"--project: cannot write {shown}: {e.strerror or e}") from None
    finally:
        w.close()


def walk_files(folder: Path) -> Iterator[Path]:
    """The files under ``folder`` (sorted), without following links to folders."""
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            yield Path(dirpath) / name
