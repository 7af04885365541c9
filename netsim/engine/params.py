"""Declarative parameter fields and their validation.

Scenario sections, protocols, bandit kinds, topologies and delay models all declare their
keys as :class:`Field` objects. :func:`validate` checks a parsed TOML table against them,
fills defaults, and raises :class:`~netsim.engine.errors.InputError` naming the dotted key and the
accepted values (with a did-you-mean for unknown keys).

A field also says how a person reads the key: a display ``label`` and a ``unit`` (figures,
tables, ``netsim explain``), and a JSON ``schema`` of the accepted values (``netsim schema``).
Result columns are described by the same objects (:func:`column`), so that every name a user
meets has its meaning, label and unit in one place, next to the code that defines it.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from netsim.engine.errors import InputError

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()


@dataclass(frozen=True)
class Field:
    """One accepted key.

    Parameters
    ----------
    accepts:
        Human description of the accepted values, shown in errors and ``netsim show``.
    parse:
        Turns the raw TOML value into the stored value, or returns ``None`` when the value
        is not acceptable.
    default:
        Value used when the key is absent; :data:`REQUIRED` makes the key mandatory.
    doc:
        One line saying what the key means (and where it comes from in the paper).
    label:
        The key's name for a reader: axis titles, legends, table headers (``"mean per-hop delay"``).
        In a distribution's parameter, ``{}`` stands for the label of the key that holds the
        distribution (``"mean {}"`` under ``network.delay`` reads "mean per-hop delay").
    unit:
        The unit of the value (``"slots"``); ``""`` for a count, a probability or another pure
        number; ``None`` when not declared (a parameter of a distribution: the holder's unit).
    schema:
        JSON Schema of the accepted values (``netsim schema``); ``{}`` accepts any value (the
        key's own validation is then the only check).
    """

    accepts: str
    parse: Callable[[Any], Any]
    default: Any = REQUIRED
    doc: str = ""
    label: str = ""
    unit: str | None = None
    schema: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    def title(self, name: str = "") -> str:
        """``label (unit)`` as an axis shows it (the label alone for a pure number; ``name`` when there
        is no label)."""
        text = self.label or name.replace("_", " ")
        return f"{text} ({self.unit})" if self.unit else text


def column(label: str, unit: str = "", doc: str = "") -> Field:
    """A result column's description (not a scenario key: no value is ever parsed)."""
    return Field("a result column (not a scenario key)", lambda v: None, None, doc, label, unit)


#: Largest magnitude of a real key that declares no bound of its own, and the smallest value of one that
#: must be > 0: a product or a quotient of a few such numbers stays finite in double precision (a rate of
#: 1e300 times a horizon, an epsilon of 5e-324 inverted, overflowed into inf and a traceback before).
MAX_REAL = 1e12
MIN_POSITIVE = 1e-12
#: Largest integer key that declares no bound of its own (it fits the engine's 32-bit arrays)
MAX_INT = 2**31 - 1


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def real(
    default: Any = REQUIRED,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
    doc: str = "",
    label: str = "",
    unit: str | None = None,
) -> Field:
    """A real number in ``[low, high]`` (ends open when asked); ``inf`` only when allowed.

    Without ``high`` the bound is :data:`MAX_REAL` (and ``-MAX_REAL`` without ``low``); a key that must be
    ``> 0`` (``low = 0``, open) is at least :data:`MIN_POSITIVE`: every value accepted is one the formulas
    using it can honour. ``high = inf`` lifts the upper bound (for limits that may be lifted).
    """
    positive = low == 0.0 and low_open
    if positive:
        low, low_open = MIN_POSITIVE, False
    high = MAX_REAL if high is None else high
    low = -MAX_REAL if low is None else low
    lo = f"> 0 (at least {low:g})" if positive else ("> " if low_open else ">= ") + f"{low:g}"
    hi = "" if math.isinf(high) else ("< " if high_open else "<= ") + f"{high:g}"
    bounds = " and ".join(part for part in (lo, hi) if part)
    accepts = "a number" + (f" {bounds}" if bounds else "") + (" (inf allowed)" if allow_inf else "")

    def parse(value: Any) -> float | None:
        if not _is_number(value) or math.isnan(value):
            return None
        value = float(value) + 0.0  # -0.0 read as 0.0: numpy refuses uniform(0.0, -0.0) though -0.0 == 0.0
        if math.isinf(value):
            return value if allow_inf and value > 0 else None
        if value < low or (low_open and value == low) or value > high or (high_open and value == high):
            return None
        return value

    schema: dict[str, Any] = {"type": "number", "exclusiveMinimum" if low_open else "minimum": low}
    if not math.isinf(high) and not allow_inf:  # JSON has no inf: with inf allowed, the upper bound is left to netsim
        schema["exclusiveMaximum" if high_open else "maximum"] = high
    return Field(accepts, parse, default, doc, label, unit, schema)


def probability(default: Any = REQUIRED, *, doc: str = "", label: str = "") -> Field:
    """A probability in [0, 1]."""
    return real(default, low=0.0, high=1.0, doc=doc, label=label, unit="")


def integer(default: Any = REQUIRED, *, low: int | None = None, high: int | None = None, doc: str = "",
            label: str = "", unit: str | None = "") -> Field:
    """An integer in ``[low, high]`` (without ``high``: at most :data:`MAX_INT`)."""
    high = MAX_INT if high is None else high
    parts = (f">= {low}" if low is not None else "", f"<= {high}" if high is not None else "")
    bounds = " and ".join(p for p in parts if p)
    accepts = "an integer" + (f" {bounds}" if bounds else "")

    def parse(value: Any) -> int | None:
        if isinstance(value, bool):
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            return None
        if (low is not None and value < low) or value > high:
            return None
        return value

    schema: dict[str, Any] = {"type": "integer"}
    if low is not None:
        schema["minimum"] = low
    if high is not None:
        schema["maximum"] = high
    return Field(accepts, parse, default, doc, label, unit, schema)


def choice(options: tuple[str, ...], default: Any = REQUIRED, *, doc: str = "", label: str = "") -> Field:
    """One string out of ``options``."""
    accepts = "one of " + ", ".join(repr(o) for o in options)
    return Field(accepts, lambda v: v if isinstance(v, str) and v in options else None, default, doc, label, "",
                 {"enum": list(options)})


def text(default: Any = REQUIRED, *, doc: str = "", label: str = "") -> Field:
    """Any string."""
    return Field("a string", lambda v: v if isinstance(v, str) else None, default, doc, label, "", {"type": "string"})


def boolean(default: Any = REQUIRED, *, doc: str = "", label: str = "") -> Field:
    """true or false."""
    return Field("true or false", lambda v: v if isinstance(v, bool) else None, default, doc, label, "",
                 {"type": "boolean"})


def real_list(
    default: Any = REQUIRED, *, low: float | None = None, high: float | None = None, min_len: int = 1, doc: str = "",
    label: str = "", unit: str | None = None,
) -> Field:
    """A list of real numbers, each within ``[low, high]``."""
    item = real(low=low, high=high)

    def parse(value: Any) -> tuple[float, ...] | None:
        if not isinstance(value, list) or len(value) < min_len:
            return None
        parsed = [item.parse(v) for v in value]
        return None if any(p is None for p in parsed) else tuple(parsed)

    return Field(f"a list of at least {min_len} values, each {item.accepts}", parse, default, doc, label, unit,
                 {"type": "array", "minItems": min_len, "items": item.schema})


def integer_list(default: Any = REQUIRED, *, low: int | None = None, min_len: int = 1, doc: str = "",
                 label: str = "", unit: str | None = "") -> Field:
    """A list of integers, each >= ``low``."""
    item = integer(low=low)

    def parse(value: Any) -> tuple[int, ...] | None:
        if not isinstance(value, list) or len(value) < min_len:
            return None
        parsed = [item.parse(v) for v in value]
        return None if any(p is None for p in parsed) else tuple(parsed)

    return Field(f"a list of at least {min_len} values, each {item.accepts}", parse, default, doc, label, unit,
                 {"type": "array", "minItems": min_len, "items": item.schema})


def either(*fields: Field, default: Any = REQUIRED, doc: str = "", label: str = "", unit: str | None = None) -> Field:
    """The first of ``fields`` that accepts the value."""
    accepts = " or ".join(f.accepts for f in fields)

    def parse(value: Any) -> Any:
        for field in fields:
            parsed = field.parse(value)
            if parsed is not None:
                return parsed
        return None

    schemas = [f.schema for f in fields]
    return Field(accepts, parse, default, doc, label, unit, {} if {} in schemas else {"anyOf": schemas})


def table(default: Any = REQUIRED, *, doc: str = "", label: str = "") -> Field:
    """A TOML table, validated later by its own schema."""
    return Field("a table", lambda v: dict(v) if isinstance(v, Mapping) else None, default, doc, label, "",
                 {"type": "object"})


#: longest echo of a user's value in an error message (a message stays one readable line)
ECHO_LIMIT = 60


def bounded_repr(value: Any, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)``, cut to ``limit`` characters with an ellipsis and the full length."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _describe(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a table"
    return bounded_repr(value)


def unknown_key(key: str, known: list[str], *, where: str, source: str | None = None) -> InputError:
    """The error for a key nobody declared, with a did-you-mean."""
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    accepted = ", ".join(sorted(known)) if known else "no keys"
    return InputError(f"unknown key{hint}; accepted keys: {accepted}", source=source, key=_join(where, key))


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def validate(
    raw: Mapping[str, Any], fields: Mapping[str, Field], *, where: str = "", source: str | None = None
) -> dict[str, Any]:
    """Check ``raw`` against ``fields``; return the values with defaults filled in."""
    for key in raw:
        if key not in fields:
            raise unknown_key(key, list(fields), where=where, source=source)
    out: dict[str, Any] = {}
    for key, field in fields.items():
        if key not in raw:
            if field.default is REQUIRED:
                raise InputError(f"missing; expected {field.accepts}", source=source, key=_join(where, key))
            out[key] = field.default
            continue
        parsed = field.parse(raw[key])
        if parsed is None:
            raise InputError(
                f"got {_describe(raw[key])}; expected {field.accepts}", source=source, key=_join(where, key)
            )
        out[key] = parsed
    return out


class Frozen(Mapping):
    """A read-only, picklable mapping (validated sections of a frozen scenario)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] = ()):
        self._data = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Frozen({self._data!r})"
