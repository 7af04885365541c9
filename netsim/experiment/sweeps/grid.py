"""The ``--grid KEY=V1,V2,...`` syntax of sweeps and the TOML spelling of one value.

Grid values are TOML values like those of ``--set`` (numbers, booleans, quoted strings, arrays,
inline tables) or bare words (``ring``), separated by commas outside quotes and brackets.
:func:`toml_value` writes a value back the way ``--set`` reads it (used to build the ``--set``
overrides of every grid point and the labels of tables and figures).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from netsim.engine.errors import InputError
from netsim.engine.files import parse_toml

FORBIDDEN_KEYS = {"run.trials": "use --trials"}


@dataclass(frozen=True)
class Axis:
    """One ``--grid`` option: a dotted scenario key and its values, in the order given."""

    key: str
    values: tuple[Any, ...]


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside quotes, brackets and braces."""
    items, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced {ch!r}")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
        i += 1
    if quote or depth:
        raise ValueError("unbalanced quote or bracket")
    items.append(text[start:])
    return items


def _value(item: str) -> Any:
    """One grid value: a TOML value when it parses as one, else a bare word (as ``--set`` does)."""
    try:
        return parse_toml(f"v = {item}")["v"]
    except InputError as exc:
        if "nested" in exc.detail:
            raise ValueError(exc.detail) from None
        if any(ch in item for ch in "[]{}\"'=") or any(ch.isspace() for ch in item):
            raise ValueError(f"{item!r} is neither a TOML value nor a bare word") from None
        return item


def parse_axis(text: str) -> Axis:
    """``protocol.epsilon=0.1,0.5,1`` → ``Axis("protocol.epsilon", (0.1, 0.5, 1))``.

    Values are TOML values like those of ``--set`` (numbers, booleans, quoted strings, arrays,
    inline tables) or bare words (``ring``), separated by commas outside brackets.
    """
    usage = "accepted: KEY=V1,V2,... with a dotted KEY, e.g. --grid protocol.epsilon=0.1,0.5,1"
    if "=" not in text:
        raise InputError(f"--grid {text!r}: no '='; {usage}")
    key, raw = (part.strip() for part in text.split("=", 1))
    if not key or any(not part or part.strip() != part for part in key.split(".")):
        raise InputError(f"--grid {text!r}: bad key {key!r}; {usage}")
    if key in FORBIDDEN_KEYS:
        raise InputError(f"--grid {text!r}: {key} cannot be swept ({FORBIDDEN_KEYS[key]}); {usage}")
    try:
        items = [item.strip() for item in _split_top_level(raw)]
        if any(not item for item in items):
            raise ValueError("empty value")
        values = tuple(_value(item) for item in items)
    except ValueError as exc:
        raise InputError(f"--grid {text!r}: {exc}; {usage}") from None
    return Axis(key, values)


def parse_grid(texts: Sequence[str]) -> list[Axis]:
    """Every ``--grid`` option; a key may appear once."""
    if not texts:
        raise InputError("no --grid given; accepted: at least one --grid KEY=V1,V2,...")
    axes = [parse_axis(text) for text in texts]
    seen: set[str] = set()
    for axis in axes:
        if axis.key in seen:
            raise InputError(f"--grid {axis.key} given twice; accepted: each key once, with all its values")
        seen.add(axis.key)
    return axes


def toml_value(value: Any) -> str:
    """``value`` written as a TOML value (the inverse of ``_value`` for what TOML can hold)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_toml_key(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def _toml_key(key: str) -> str:
    return key if key and all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in key) else _toml_string(key)


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped, the rest literal."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
