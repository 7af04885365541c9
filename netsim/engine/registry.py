"""Registries of named plug-ins: protocols, bandit environments, topologies, audit targets.

The engine never imports an algorithm. Plug-ins register themselves when they are imported
(``@register_protocol`` and the ``register`` decorators below); they are found in three places,
all loaded by :func:`load_plugins` the first time a registry is consulted (the built-in bandit
kinds and topologies are registered by the modules that hold their tables,
:data:`netsim.bandits.bandits` and :data:`netsim.engine.topology.topologies`):

1. the ``netsim.plugins`` entry-point group (the bundled ``protocols`` package announces itself
   there in ``setup.cfg``; an installed package can do the same);
2. the Python files named by the ``NETSIM_PLUGINS`` environment variable (paths separated by
   ``os.pathsep``, ``:`` on POSIX);
3. the Python files given to :func:`load_plugin` (the command line's ``--plugin FILE.py``).

A plug-in file is imported once per process, under a module name made from its resolved path,
and its path is remembered (:func:`plugin_files`): the runner ships these paths with every unit
of work, so that worker processes (local pools, dask workers) import the same files before they
look a protocol up. A file that fails to import leaves the registries as they were.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from netsim.engine.errors import InputError

T = TypeVar("T")

_REGISTRIES: list[Registry] = []  # every table, for the undo of a failed plug-in file

ENTRY_POINT_GROUP = "netsim.plugins"
SCENARIO_GROUP = "netsim.scenarios"
PLUGINS_ENV = "NETSIM_PLUGINS"
PLUGIN_HINT = (f"a protocol in a file of your own loads with --plugin FILE.py (repeatable) or "
               f"{PLUGINS_ENV}=FILE.py{os.pathsep}MORE.py")


class Registry:
    """A name → object table with did-you-mean lookup.

    Parameters
    ----------
    what:
        What the table holds, as the error messages say it (``"protocol"``).
    hint:
        Appended to the unknown-name error: where more names can come from.
    """

    def __init__(self, what: str, hint: str = ""):
        self.what = what
        self.hint = hint
        self._items: dict[str, Any] = {}
        _REGISTRIES.append(self)

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: make the decorated object available as ``name`` (a name is taken once)."""
        def decorate(obj: T) -> T:
            if name in self._items and self._items[name] is not obj:
                raise ValueError(f"{self.what} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return decorate

    def get(self, name: str, *, key: str, source: str | None = None) -> Any:
        """The object registered as ``name``; an :class:`InputError` naming ``key`` otherwise."""
        load_plugins()
        if not isinstance(name, str) or name not in self._items:
            close = difflib.get_close_matches(str(name), list(self._items), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            more = f"; {self.hint}" if self.hint else ""
            raise InputError(
                f"unknown {self.what} {name!r}{hint}; accepted: {', '.join(sorted(self._items))}{more}",
                source=source,
                key=key,
            )
        return self._items[name]

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        load_plugins()
        return sorted(self._items)

    def items(self) -> list[tuple[str, Any]]:
        """Every ``(name, object)`` pair, sorted by name."""
        load_plugins()
        return sorted(self._items.items())


protocols = Registry("protocol", hint=PLUGIN_HINT)
# privacy-audit targets (name -> object with the audit interface); filled by protocol packages
audit_targets = Registry("audit target")

_loaded = False
_files: dict[str, ModuleType] = {}  # resolved path of each plug-in file loaded -> its module


def load_plugins() -> None:
    """Import the entry-point plug-ins and the ``NETSIM_PLUGINS`` files (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        importlib.import_module(ep.value)
    for path in env_plugin_paths():
        load_plugin(path, origin=PLUGINS_ENV)


def env_plugin_paths() -> list[str]:
    """The files named by ``NETSIM_PLUGINS`` (empty entries are skipped)."""
    return [part for part in os.environ.get(PLUGINS_ENV, "").split(os.pathsep) if part.strip()]


def load_plugin(path: str | os.PathLike[str], *, origin: str = "--plugin") -> ModuleType:
    """Import the plug-in file ``path`` (once per process) and return its module.

    Parameters
    ----------
    path:
        A ``.py`` file that registers protocols (or bandit kinds, topologies) when imported.
    origin:
        Where the path came from, named by the error messages (``--plugin``, ``NETSIM_PLUGINS``).

    Raises
    ------
    InputError
        The file does not exist, is not a ``.py`` file, or raises while it is imported (the
        message gives the line); the registries are then left as they were.
    """
    load_plugins()
    from netsim.engine.files import absolute

    resolved = absolute(Path.cwd(), path, where=origin)
    key = str(resolved)
    if key in _files:
        return _files[key]
    if resolved.suffix != ".py" or not resolved.is_file():
        raise InputError(f"{origin} {str(path)!r}: no such Python file; accepted: the path of a .py file "
                         "that registers protocols (see docs/protocol-author.md)")
    stem = "".join(ch if ch.isalnum() else "_" for ch in resolved.stem)
    name = f"netsim_plugin_{stem}_{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    module = importlib.util.module_from_spec(spec)
    before = [dict(registry._items) for registry in _REGISTRIES]
    sys.modules[name] = module  # classes defined in the file can then be pickled and introspected
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure of the user's file becomes one clear line
        del sys.modules[name]
        for registry, items in zip(_REGISTRIES, before, strict=True):
            registry._items = items
        raise InputError(f"{origin} {str(path)!r}: importing it failed ({_where(exc, key)})") from None
    _files[key] = module
    return module


def _where(exc: BaseException, filename: str) -> str:
    """``line N: Type: message`` for an exception raised while importing ``filename``."""
    line = exc.lineno if isinstance(exc, SyntaxError) and exc.filename == filename else None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == filename:
            line = frame.lineno
    text = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return f"line {line}: {detail}" if line else detail


def load_plugin_files(paths: Iterable[str | os.PathLike[str]], *, origin: str = "--plugin") -> None:
    """:func:`load_plugin` for each of ``paths``, in order."""
    for path in paths:
        load_plugin(path, origin=origin)


def plugin_files() -> tuple[str, ...]:
    """Resolved paths of the plug-in files loaded in this process, in load order."""
    return tuple(_files)


def register_protocol(cls: T) -> T:
    """Class decorator: make a :class:`~netsim.comm.protocol.Protocol` subclass available by its ``name``."""
    return protocols.register(cls.name)(cls)  # type: ignore[attr-defined]
