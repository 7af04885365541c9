"""Registries of named plug-ins: protocols, bandit environments, topologies.

The engine never imports an algorithm. Protocol packages announce themselves through the
``netsim.plugins`` entry-point group (the bundled ``protocols`` package does so in
``setup.cfg``); importing such a package runs its ``@register_protocol`` decorators.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, TypeVar

from netsim.errors import InputError

T = TypeVar("T")

ENTRY_POINT_GROUP = "netsim.plugins"
SCENARIO_GROUP = "netsim.scenarios"


class Registry:
    """A name → object table with did-you-mean lookup."""

    def __init__(self, what: str):
        self.what = what
        self._items: dict[str, Any] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorate(obj: T) -> T:
            if name in self._items and self._items[name] is not obj:
                raise ValueError(f"{self.what} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return decorate

    def get(self, name: str, *, key: str, source: str | None = None) -> Any:
        load_plugins()
        if not isinstance(name, str) or name not in self._items:
            close = difflib.get_close_matches(str(name), list(self._items), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise InputError(
                f"unknown {self.what} {name!r}{hint}; accepted: {', '.join(sorted(self._items))}",
                source=source,
                key=key,
            )
        return self._items[name]

    def names(self) -> list[str]:
        load_plugins()
        return sorted(self._items)

    def items(self) -> list[tuple[str, Any]]:
        load_plugins()
        return sorted(self._items.items())


protocols = Registry("protocol")
bandits = Registry("bandit kind")
topologies = Registry("topology")
# privacy-audit targets (name -> object with the audit interface); filled by protocol packages
audit_targets = Registry("audit target")

_loaded = False


def load_plugins() -> None:
    """Import every module announced in the ``netsim.plugins`` entry-point group (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    importlib.import_module("netsim.bandits")
    importlib.import_module("netsim.topology")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        importlib.import_module(ep.value)


def register_protocol(cls: T) -> T:
    """Class decorator: make a :class:`~netsim.protocol.Protocol` subclass available by its ``name``."""
    return protocols.register(cls.name)(cls)  # type: ignore[attr-defined]
