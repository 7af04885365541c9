"""Every file netsim writes or reads goes through this module.

Writing (:func:`write`, :func:`write_together`, :func:`remove_written`, :func:`remove_staged`):

* an output is a folder the user named (``--out``, or ``results/NAME``) and a path relative to it;
  the relative path is refused when it is absolute, holds ``..``, an empty part, a control
  character or a part longer than :data:`MAX_NAME` bytes (never silently changed);
* the folders below the output folder are opened one at a time without following a symbolic link
  (``O_NOFOLLOW``; missing ones are created): a link inside the output folder, whoever made it, is
  refused, never followed. The output folder itself may be a link (the user named it);
* only regular files are written: a target that exists as anything else (a link, a folder, a
  device node, a pipe) is refused. A file is staged under an unpredictable hidden name created
  exclusively in the same folder, then renamed into place, so a reader sees the old file or the
  new one; its permissions are the user's umask (the kernel applies it when the file is created);
* files are recorded in the folder's manifest (:data:`MANIFEST`); :func:`remove_written` deletes
  only files listed there (a figure of an earlier save, never a file the user put beside it), and
  :func:`remove_staged` only netsim's own staging files left by a killed writer.

These rules guard against mistakes and crafted inputs (a scenario or study naming ``../x``, a link
planted in a results folder); they do not defend a folder against another user who can write to
it while netsim runs.

Reading (:func:`read_bytes`, :func:`read_text`, :func:`read_toml`, :func:`parse_toml`): a missing
file, a folder, a device or pipe, a link loop, a file larger than the limit, bytes that are not
UTF-8 and TOML that does not parse or nests too deep each become one
:class:`~netsim.engine.errors.InputError` naming the file and the key it came from. No error message
quotes what a file holds (a data file may be any file the user can read).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import stat
import threading
import tomllib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from netsim.engine.errors import NAME_LIMIT, InputError
from netsim.engine.params import bounded_repr

#: the manifest of an output folder: one relative path per line, each a file netsim wrote there
MANIFEST = ".netsim-written"
#: the longest file or folder name netsim writes, in bytes (the limit of common file systems)
MAX_NAME = 255
#: largest scenario, study or other TOML file read (bytes)
MAX_TOML = 1 << 20
#: deepest nesting of tables and arrays accepted in a TOML document (the bundled files nest 4 deep)
MAX_DEPTH = 32
#: largest data file read (CSV, edge list, results table; bytes)
MAX_DATA = 1 << 30
_STAGED_SUFFIX = ".tmp"


# ---------------------------------------------------------------------- writing
def _parts(relative: str | os.PathLike[str], where: str) -> tuple[str, ...]:
    """The parts of a relative output path, or an InputError saying why it is refused."""
    text = os.fspath(relative)
    parts = PurePosixPath(text).parts
    problem = ""
    if not text or text.startswith("/"):
        problem = "an absolute or empty path"
    elif any(ord(ch) < 32 or ch == "\x7f" for ch in text):
        problem = "a control character"
    elif any(part in (".", "..") for part in text.split("/")) or "" in text.split("/")[:-1]:
        problem = "a '..', '.' or empty part"
    elif any(len(part.encode("utf-8", "surrogateescape")) > MAX_NAME for part in parts):
        problem = f"a name longer than {MAX_NAME} bytes"
    if problem:
        raise InputError(f"{_q(text)} has {problem}; accepted: a file name (or folder/name) inside the output "
                         "folder", key=where)
    return parts


def check_path(path: str | os.PathLike[str], *, where: str = "--out") -> None:
    """Refuse a path no file system takes: a control character, a part longer than :data:`MAX_NAME`
    bytes, more than 4,096 bytes in all."""
    text = os.fspath(path)
    encoded = text.encode("utf-8", "surrogateescape")
    if any(ord(ch) < 32 or ch == "\x7f" for ch in text) or len(encoded) > 4096 or any(
            len(part) > MAX_NAME for part in encoded.split(b"/")):
        raise InputError(f"{_q(text)} is not a usable path (a control character, or a name longer than "
                         f"{MAX_NAME} bytes); accepted: a shorter path of printable characters", key=where)


def absolute(base: str | os.PathLike[str], name: str | os.PathLike[str], *, where: str) -> Path:
    """``name`` relative to ``base``, resolved (links followed where they lead somewhere; a link loop or a
    dangling link is left for the reader to refuse). A path no file system takes is one InputError."""
    check_path(name, where=where)
    path = Path(base, name).expanduser()
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a link loop: keep the path, reading it fails with one line
        return Path(os.path.abspath(path))


def _q(path: str | os.PathLike[str]) -> str:
    """A path as an error quotes it: in quotes, at most about :data:`~netsim.engine.errors.NAME_LIMIT` characters."""
    return bounded_repr(os.fspath(path), NAME_LIMIT)


def _shown(root: Path, parts: tuple[str, ...]) -> str:
    return str(root.joinpath(*parts))


def _open_folder(name: str | Path, dir_fd: int | None, *, follow: bool) -> int | None:
    """A descriptor of the folder ``name`` (relative to ``dir_fd``), or None when it does not exist."""
    flags = os.O_RDONLY | os.O_DIRECTORY | (0 if follow else os.O_NOFOLLOW)
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def _folder(root: Path, parents: tuple[str, ...], *, create: bool = True) -> Iterator[int | None]:
    """A descriptor of ``root/parents...``: each part created if missing (with ``create``), none followed
    through a symbolic link; ``None`` when a part is missing and ``create`` is off."""
    if create:
        root.mkdir(parents=True, exist_ok=True)
    try:
        fd = _open_folder(root, None, follow=True)  # the output folder itself: the user named it
    except OSError as exc:
        raise InputError(f"output folder {_q(root)}: cannot open it ({exc.strerror}); accepted: a folder") from None
    if fd is None:
        yield None
        return
    try:
        for depth, part in enumerate(parents):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
            try:
                child = _open_folder(part, fd, follow=False)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise InputError(f"{_q(_shown(root, parents[:depth + 1]))} is a symbolic link or not a folder; netsim "
                                 "never follows a link inside its output folder; accepted: a plain folder (remove "
                                 "or rename it)") from None
            if child is None:
                yield None
                return
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _check_target(fd: int, name: str, shown: str, where: str) -> None:
    """Refuse to replace anything but a regular file (or nothing)."""
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "a folder" if stat.S_ISDIR(info.st_mode) \
            else "not a regular file"
        raise InputError(f"{_q(shown)} exists and is {kind}; netsim writes only regular files and never follows a "
                         "link; accepted: a path that is a regular file or does not exist", key=where)


def _stage(fd: int, name: str, data: bytes, *, fsync: bool = False) -> str:
    """Write ``data`` to a new hidden file beside ``name`` (created exclusively, mode 0666 less the umask)."""
    staged = f".{name[:60]}.{secrets.token_hex(8)}{_STAGED_SUFFIX}"
    handle = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666, dir_fd=fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(handle, view):]
        if fsync:
            os.fsync(handle)
    except BaseException:
        os.close(handle)
        os.unlink(staged, dir_fd=fd)
        raise
    os.close(handle)
    return staged


def write(root: str | os.PathLike[str], relative: str, data: bytes, *, where: str = "--out", record: bool = True,
          fsync: bool = False) -> Path:
    """Write ``data`` to ``root/relative`` atomically under the rules of the module docstring.

    Parameters
    ----------
    root:
        The output folder (created if missing).
    relative:
        The file's path inside ``root``, ``/``-separated.
    where:
        What the path came from (named by a refusal): a flag or a key such as ``figure 2.name``.
    record:
        List the file in the folder's manifest (what :func:`remove_written` may delete later).
    fsync:
        Flush the file to disk before it is renamed into place.

    Returns
    -------
    Path
        ``root/relative``.
    """
    return write_together(root, {relative: data}, where=where, record=record, fsync=fsync)[relative]


def write_together(root: str | os.PathLike[str], contents: Mapping[str, bytes], *, where: str = "--out",
                   record: bool = True, fsync: bool = False) -> dict[str, Path]:
    """Write several files into ``root`` as one unit: every target is checked and staged first, then all are
    renamed into place with Ctrl-C held back, so an interruption leaves the old set or the new one."""
    root = Path(root)
    plan = {relative: _parts(relative, where) for relative in contents}
    with contextlib.ExitStack() as stack:
        staged: list[tuple[int, str, str]] = []
        try:
            for relative, parts in plan.items():
                fd = stack.enter_context(_folder(root, parts[:-1]))
                _check_target(fd, parts[-1], _shown(root, parts), where)
                staged.append((fd, _stage(fd, parts[-1], contents[relative], fsync=fsync), parts[-1]))
            with _sigint_deferred():
                for fd, tmp, name in staged:
                    os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        finally:
            for fd, tmp, _ in staged:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=fd)
    if record:
        _record(root, add=["/".join(parts) for parts in plan.values()])
    return {relative: root.joinpath(*parts) for relative, parts in plan.items()}


def written(root: str | os.PathLike[str]) -> list[str]:
    """The manifest of ``root``: relative paths of the files netsim wrote there (empty when there is none)."""
    with _folder(Path(root), (), create=False) as fd:
        if fd is None:
            return []
        try:
            handle = os.open(MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError:
            return []
        if not stat.S_ISREG(os.fstat(handle).st_mode):  # not a file netsim wrote: it lists nothing
            os.close(handle)
            return []
        with os.fdopen(handle, "rb") as file:
            text = file.read(MAX_TOML).decode("utf-8", "replace")
    return [line for line in text.splitlines() if line]


def _record(root: Path, *, add: list[str] = (), drop: set[str] = frozenset()) -> None:
    entries = list(dict.fromkeys([*(e for e in written(root) if e not in drop), *add]))
    data = "".join(f"{e}\n" for e in entries).encode()
    write_together(root, {MANIFEST: data}, record=False)


def remove_written(root: str | os.PathLike[str], match: Callable[[str], bool]) -> list[str]:
    """Delete the files of ``root``'s manifest whose relative path ``match`` accepts (regular files only,
    never through a link); returns what was deleted."""
    root = Path(root)
    removed = []
    for relative in written(root):
        if not match(relative):
            continue
        try:
            parts = _parts(relative, "manifest")
        except InputError:
            continue  # a damaged manifest entry names nothing netsim wrote
        with contextlib.suppress(InputError), _folder(root, parts[:-1], create=False) as fd:
            if fd is None:
                continue
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISREG(os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode):
                    os.unlink(parts[-1], dir_fd=fd)
                    removed.append(relative)
    if removed:
        _record(root, drop=set(removed))
    return removed


def remove_staged(root: str | os.PathLike[str], folder: str) -> int:
    """Delete netsim's own staging files (``.NAME.<16 hex>.tmp``, regular files) that a killed writer left
    in ``root/folder``; returns how many."""
    removed = 0
    with _folder(Path(root), _parts(folder, "--out"), create=False) as fd:
        if fd is None:
            return 0
        for name in os.listdir(fd):
            token = name[:-len(_STAGED_SUFFIX)].rsplit(".", 1)[-1] if name.endswith(_STAGED_SUFFIX) else ""
            if not (name.startswith(".") and len(token) == 16 and all(c in "0123456789abcdef" for c in token)):
                continue
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISREG(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    os.unlink(name, dir_fd=fd)
                    removed += 1
    return removed


def check(root: str | os.PathLike[str], *, folders: tuple[str, ...] = (), names: tuple[str, ...] = (),
          where: str = "--out") -> None:
    """Refuse now, before any work starts, what a later write into ``root`` would refuse: one of ``folders``
    that is a link or not a folder, one of ``names`` (files) that exists as anything but a regular file."""
    for folder in folders:
        with _folder(Path(root), _parts(folder, where), create=False):
            pass
    for name in names:
        parts = _parts(name, where)
        with _folder(Path(root), parts[:-1], create=False) as fd:
            if fd is not None:
                _check_target(fd, parts[-1], _shown(Path(root), parts), where)


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold back Ctrl-C (main thread only) and re-raise it when the block is done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


# ---------------------------------------------------------------------- reading
def read_bytes(path: str | os.PathLike[str], *, what: str = "file", key: str | None = None,
               source: str | None = None, limit: int = MAX_DATA) -> bytes:
    """The bytes of ``path`` (a regular file, links followed, at most ``limit`` bytes), or one InputError.

    Parameters
    ----------
    path:
        The file to read.
    what:
        How the error names the file (``data file``, ``scenario file``...).
    key, source:
        The scenario key and file the path came from (named by the error).
    limit:
        Largest size accepted, in bytes.
    """
    shown = os.fspath(path)
    try:
        # O_NONBLOCK: opening a named pipe must not wait for a writer; the file is then checked to be regular
        handle = os.open(shown, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputError(f"{what} {_q(shown)} not found; accepted: an existing, readable file", key=key,
                         source=source) from None
    except OSError as exc:
        reason = "a symbolic link loop" if exc.errno == errno.ELOOP else (exc.strerror or type(exc).__name__)
        raise InputError(f"{what} {_q(shown)} cannot be read ({reason}); accepted: an existing, readable file",
                         key=key, source=source) from None
    except (ValueError, UnicodeError):  # a NUL or an unencodable character in the path
        raise InputError(f"{what} {_q(shown)} is not a valid path; accepted: an existing, readable file",
                         key=key, source=source) from None
    if not stat.S_ISREG(os.fstat(handle).st_mode):
        os.close(handle)
        raise InputError(f"{what} {_q(shown)} is not a regular file (a folder, device or pipe); accepted: an "
                         "existing, readable file", key=key, source=source)
    with os.fdopen(handle, "rb") as file:
        os.set_blocking(file.fileno(), True)
        try:
            data = file.read(limit + 1)
        except OSError as exc:
            raise InputError(f"{what} {_q(shown)} cannot be read ({exc.strerror or type(exc).__name__})", key=key,
                             source=source) from None
    if len(data) > limit:
        raise InputError(f"{what} {_q(shown)} is larger than {limit:,} bytes; accepted: a smaller file", key=key,
                         source=source)
    return data


def read_text(path: str | os.PathLike[str], *, what: str = "file", key: str | None = None,
              source: str | None = None, limit: int = MAX_DATA) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a byte-order mark is dropped); other bytes are one InputError."""
    data = read_bytes(path, what=what, key=key, source=source, limit=limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {_q(path)} is not UTF-8 text (byte {exc.start:,}); accepted: a UTF-8 "
                         "text file", key=key, source=source) from None


def parse_toml(text: str, *, source: str | None = None, key: str | None = None) -> dict[str, Any]:
    """``tomllib.loads`` with every failure (syntax, nesting deeper than :data:`MAX_DEPTH`) as one InputError."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"TOML syntax error: {exc}", source=source, key=key) from None
    except RecursionError:
        document = None
    if document is None or _depth(document) > MAX_DEPTH:
        raise InputError(f"tables and arrays nested more than {MAX_DEPTH} deep; accepted: at most {MAX_DEPTH} "
                         "levels", source=source, key=key)
    return document


def _depth(value: Any) -> int:
    """Nesting depth of tables and arrays, without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            break
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def read_toml(path: str | os.PathLike[str], *, what: str = "file") -> dict[str, Any]:
    """A TOML file (at most :data:`MAX_TOML` bytes) as a dict; any failure is one InputError naming it."""
    return parse_toml(read_text(path, what=what, limit=MAX_TOML), source=os.fspath(path))
