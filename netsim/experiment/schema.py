"""A JSON Schema of scenario files, for editors (``netsim schema``).

Built from the same :class:`~netsim.engine.params.Field` definitions that validate a scenario, so an
editor's completion, hover text (each key's label, unit and meaning) and checks follow the code.
The sections whose keys depend on a choice are written with ``if``/``then``: ``[bandit]`` by
``kind``, ``[network]`` by ``topology`` and ``[protocol]`` by ``name``; a law (``network.delay``)
is one of its models.

The schema is coarser than netsim in a few places, on purpose: it checks types, ranges, choices
and unknown keys, not the checks that need several keys or the graph (components summing to the
agents, a connected topology, a data file that exists, a protocol's cross-section checks). A file
the schema accepts may still be refused by ``netsim show``, never the other way round for a key
the schema describes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from netsim.engine import params as P

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _json_default(value: Any) -> Any:
    """``value`` as JSON, or None when JSON has no spelling for it (inf, nan)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, tuple):
        return [_json_default(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json_default(v) for k, v in value.items()}
    return value


def describe(field: P.Field, schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The schema of one key: its accepted values with its label, unit and meaning as annotations."""
    out = dict(field.schema if schema is None else schema)
    if field.label:
        out["title"] = field.label + (f" ({field.unit})" if field.unit else "")
    text = field.doc or field.accepts
    out["description"] = f"{text}. Accepts {field.accepts}." if field.doc else f"Accepts {field.accepts}."
    default = _json_default(field.default)
    if field.default is not P.REQUIRED and default is not None:
        out["default"] = default
    return out


def obj(fields: Mapping[str, P.Field], nested: Mapping[str, Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An object with exactly the keys ``fields`` (``nested``: a key's own schema instead of its field's)."""
    nested = nested or {}
    properties = {**(extra or {}), **{k: describe(f, nested.get(k)) for k, f in fields.items()}}
    required = [k for k, f in fields.items() if f.default is P.REQUIRED]
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def _choose(key: str, options: Mapping[str, dict[str, Any]], default: str | None) -> dict[str, Any]:
    """An object whose keys depend on ``key``: one ``if``/``then`` per option (the default applies
    when ``key`` is absent)."""
    branches = []
    for name, then in options.items():
        condition: dict[str, Any] = {"properties": {key: {"const": name}}}
        if name != default:
            condition["required"] = [key]
        branches.append({"if": condition, "then": then})
    out: dict[str, Any] = {"type": "object", "properties": {key: {"enum": list(options)}}, "allOf": branches}
    if default is None:
        out["required"] = [key]
    return out


def scenario_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a scenario file, as a dict."""
    from netsim.bandits import bandits
    from netsim.engine import faults as F
    from netsim.engine import scenario as S
    from netsim.engine.registry import protocols
    from netsim.engine.topology import topologies

    def array(item: dict[str, Any]) -> dict[str, Any]:
        return {"type": "array", "items": item}

    bandit = _choose("kind", {kind: obj(cls.fields, extra={"kind": {"const": kind}}) for kind, cls in bandits.items()},
                     "bernoulli")
    network_nested = {"cost": obj(S.COST), "links": array(obj(S.LINK))}
    network = _choose("topology", {name: obj({**S.NETWORK, **topology.fields}, network_nested)
                                   for name, topology in topologies.items()}, S.NETWORK["topology"].default)
    protocol = _choose("name", {name: obj(cls.fields, extra={"name": {"const": name}})
                                for name, cls in protocols.items()}, None)
    faults = obj(F.FAULTS, {"links": array(obj(F.LINK_DOWN)), "crashes": array(obj(F.CRASH))})
    sections = {"bandit": bandit, "network": network, "protocol": protocol, "adversary": obj(S.ADVERSARY),
                "clock": obj(S.CLOCK), "run": obj(S.RUN), "faults": faults}
    top = obj({k: f for k, f in S.TOP.items() if k not in sections}, extra=None)
    for name, schema in sections.items():
        top["properties"][name] = {**describe(S.TOP[name], schema)}
    top["required"] = ["bandit", "network", "protocol"]
    return {"$schema": DIALECT, "$id": "urn:netsim:scenario", "title": "netsim scenario file",
            "description": "A netsim scenario (TOML). netsim explain KEY tells what a key means.", **top}
