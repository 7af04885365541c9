"""What every scenario key and result column means: found by name, with its label and unit.

The meaning of a key lives in exactly one place, the :class:`~netsim.engine.params.Field` that validates
it (``netsim/engine/scenario.py``, ``netsim/engine/faults.py``, ``netsim/engine/distributions.py``, each topology,
bandit
kind and protocol); a result column's in the :func:`~netsim.engine.params.column` that declares it (the
engine's columns below, :data:`netsim.engine.faults.EXTRAS`, each protocol's ``columns``). This module
only walks them:

* :func:`scenario_entries` lists every dotted scenario key (``network.delay.mean``, ``protocol.epsilon``)
  with the field that accepts it and where it applies (a protocol, a bandit kind, a topology, a law);
* :func:`column_entries` lists every result column;
* :func:`title` is what a figure writes on an axis (``"mean per-hop delay (slots)"``);
* :func:`explain` is what ``netsim explain KEY`` prints.

A key that several protocols (or kinds, topologies, laws) accept has one entry per definition;
:func:`explain` groups identical ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from netsim.engine import params as P
from netsim.engine.errors import InputError

#: the engine's result columns (``trials.csv``, ``agents.csv``, ``timeseries.csv``)
ENGINE_COLUMNS: dict[str, P.Field] = {
    "scenario": P.column("scenario", doc="the scenario's name"),
    "protocol": P.column("protocol", doc="the protocol's name"),
    "trial": P.column("trial", doc="index of the trial (its seed is spawned from run.seed and this index)"),
    "seed": P.column("seed", doc="the run's root seed"),
    "agents": P.column("agents M", doc="number of agents"),
    "horizon": P.column("horizon T", "slots", doc="simulated time the trial was to run"),
    "end_time": P.column("end time", "slots", doc="simulated time at which the trial ended"),
    "group_regret": P.column("group pseudo-regret", doc="sum over agents of the pseudo-regret (true means)"),
    "mean_agent_regret": P.column("per-agent pseudo-regret", doc="group pseudo-regret divided by the agents"),
    "links_agent_agent": P.column("agent-agent links built", doc="agent pairs counted once per slot they are used"),
    "links_server_agent": P.column("server-agent links built", doc="server-agent pairs counted once per slot"),
    "comm_cost": P.column("communication cost C(T)", "cost units",
                          doc="li2022 Eq. (2): c2 per agent-agent and c1 per server-agent link built"),
    "messages_sent": P.column("messages sent", doc="every message handed to the network"),
    "messages_delivered": P.column("messages delivered", doc="messages that reached their receiver"),
    "messages_dropped": P.column("messages dropped", doc="messages lost (loss, down links, crashed receivers)"),
    "messages_corrupted": P.column("messages corrupted", doc="messages a byzantine sender or link changed"),
    "messages_in_flight": P.column("messages in flight", doc="messages still travelling when the trial ended"),
    "rounds": P.column("rounds", doc="communication rounds the protocol counted"),
    "status": P.column("status", doc="ok, unfinished (the algorithm had not finished at T) or failed"),
    "failure": P.column("failure", doc="why a trial failed or is unfinished"),
    "time": P.column("time", "slots", doc="simulated time of a checkpoint"),
    "agent": P.column("agent", doc="agent id"),
    "regret": P.column("pseudo-regret", doc="the agent's pseudo-regret"),
    "pulls": P.column("pulls", doc="arms pulled by the agent"),
    "messages_received": P.column("messages received", doc="messages delivered to the agent"),
    "links": P.column("links built", doc="links the agent took part in (one per pair and slot)"),
    "wall_s": P.column("wall time", "s", doc="wall-clock seconds of the trial"),
}


@dataclass(frozen=True)
class Entry:
    """One definition of a key or column: the field, and where it applies (``""``: everywhere)."""

    key: str
    field: P.Field
    where: str = ""
    holder: P.Field | None = None  # the key holding a law, for a law's parameter
    column: bool = False  # a result column, not a scenario key

    @property
    def label(self) -> str:
        label = self.field.label or self.key.rsplit(".", 1)[-1].replace("_", " ")
        if self.holder is not None and "{}" in label:
            label = label.replace("{}", self.holder.label)
        return label

    @property
    def unit(self) -> str | None:
        if self.field.unit is None and self.holder is not None:
            return self.holder.unit
        return self.field.unit

    @property
    def title(self) -> str:
        """``label (unit)``, the label alone for a pure number."""
        return f"{self.label} ({self.unit})" if self.unit else self.label


# ---------------------------------------------------------------------- walking the definitions
def _section(prefix: str, fields: Mapping[str, P.Field], where: str = "") -> Iterator[Entry]:
    for name, field in fields.items():
        yield Entry(f"{prefix}.{name}" if prefix else name, field, where)


def _law(key: str, holder: P.Field, models: tuple[str, ...]) -> Iterator[Entry]:
    from netsim.engine.distributions import MODELS

    yield Entry(f"{key}.model", P.choice(models, doc=f"the law of {holder.label}", label=f"{holder.label} law"))
    for model in models:
        for name, field in MODELS[model].items():
            yield Entry(f"{key}.{name}", field, f"model {model}", holder)


def scenario_entries() -> list[Entry]:
    """Every dotted scenario key, in the order ``netsim show`` prints the sections."""
    from netsim.bandits import bandits
    from netsim.engine import faults as F
    from netsim.engine import scenario as S
    from netsim.engine.distributions import DELAY_MODELS, REPORT_MODELS
    from netsim.engine.registry import protocols
    from netsim.engine.topology import topologies

    out = [e for e in _section("", S.TOP) if not isinstance(S.TOP[e.key].default, dict)
           and e.key not in ("bandit", "network", "protocol")]
    out.append(Entry("bandit.kind", P.choice(tuple(bandits.names()), "bernoulli", label="bandit",
                                             doc="the bandit environment (netsim list shows each kind)")))
    for kind, cls in bandits.items():
        out += _section("bandit", cls.fields, f"bandit {kind}")
    out += _section("network", S.NETWORK)
    for name, topology in topologies.items():
        out += _section("network", topology.fields, f"topology {name}")
    out += _section("network.cost", S.COST)
    for key in ("delay", "server_delay"):
        out += _law(f"network.{key}", S.NETWORK[key], DELAY_MODELS)
    out += _section("network.links[]", S.LINK)
    out += _law("network.links[].delay", S.LINK["delay"], DELAY_MODELS)
    out.append(Entry("protocol.name", P.choice(tuple(protocols.names()), label="protocol",
                                               doc="the algorithm (netsim list shows each protocol)")))
    for name, cls in protocols.items():
        out += _section("protocol", cls.fields, f"protocol {name}")
    out += _section("adversary", S.ADVERSARY)
    out += _law("adversary.distribution", S.ADVERSARY["distribution"], REPORT_MODELS)
    out += _section("clock", S.CLOCK)
    out += _section("run", S.RUN)
    out += _section("faults", F.FAULTS)
    out += _section("faults.links[]", F.LINK_DOWN)
    out += _section("faults.crashes[]", F.CRASH)
    out += _law("faults.reorder_delay", F.FAULTS["reorder_delay"], DELAY_MODELS)
    return out


def column_entries() -> list[Entry]:
    """Every result column: the engine's, the fault counters, each protocol's."""
    from netsim.engine import faults as F
    from netsim.engine.registry import protocols

    out = [Entry(name, field, column=True) for name, field in ENGINE_COLUMNS.items()]
    out += [Entry(name, field, "scenarios with faults", column=True) for name, field in F.EXTRAS.items()]
    for name, cls in protocols.items():
        columns = cls.columns
        for column in columns:
            field = columns[column] if isinstance(columns, Mapping) else P.column("")
            out.append(Entry(column, field, f"protocol {name}", column=True))
    return out


def find(name: str) -> list[Entry]:
    """Every definition of the scenario key or result column ``name`` (empty if none)."""
    key = _plain(name)
    return [e for e in scenario_entries() if e.key == key] + [e for e in column_entries() if e.key == name]


def _plain(name: str) -> str:
    """``network.links[0].delay`` -> ``network.links[].delay`` (a list item's keys are the same for every item)."""
    import re

    return re.sub(r"\[\d+\]", "[]", name)


def title(name: str, where: str = "") -> str:
    """What an axis, legend or table header shows for ``name``: ``label (unit)``.

    ``where`` prefers the definition of one protocol, kind or law (``"protocol ddp-mab"``); a name
    nobody defines is shown with its underscores as spaces (``sent_gis-adv``: ``sent gis-adv``).
    """
    if name.startswith("sent_") and name not in ENGINE_COLUMNS:
        return f"{name[5:]} messages sent"
    entries = find(name)
    labelled = [e for e in entries if e.field.label] or entries
    if not labelled:
        return name.replace("_", " ")
    chosen = next((e for e in labelled if e.where == where), labelled[0])
    return chosen.title


# ---------------------------------------------------------------------- netsim explain
def toml_value(value: Any) -> str:
    """``value`` written as a TOML value (tables inline)."""
    import json
    import math

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        items = ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items() if v is not None)
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "(none)" if value is None else json.dumps(str(value))


def _value(value: Any) -> str:
    return "required" if value is P.REQUIRED else "(none)" if value is None else toml_value(value)


def explain(name: str) -> str:
    """What ``netsim explain NAME`` prints: each definition of a key or column (meaning, unit, default,
    accepted values, where it applies), and the keys under it."""
    entries = find(name)
    key = _plain(name)
    below = list(dict.fromkeys(e.key for e in scenario_entries() if e.key.startswith(key + ".")))
    if not entries and not below:
        known = [e.key for e in scenario_entries()] + [e.key for e in column_entries()]
        import difflib

        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise InputError(f"not a scenario key or result column{hint}; accepted: a dotted scenario key (netsim show "
                         "SCENARIO --doc lists them) or a result column (comm_cost, group_regret, ...)",
                         key=P.bounded_repr(name)[1:-1] if len(name) > P.ECHO_LIMIT else name)
    groups: dict[tuple, list[Entry]] = {}
    for e in entries:
        groups.setdefault((e.title, e.field.doc, e.field.accepts, _value(e.field.default), e.column), []).append(e)
    lines = []
    for (heading, doc, accepts, default, column), same in groups.items():
        where = [e.where for e in same if e.where]
        lines.append(f"{name}: {heading}" + (f"   [{', '.join(where)}]" if where else ""))
        if doc:
            lines.append(f"  {doc}")
        unit = same[0].unit
        if column:
            lines.append(f"  result column; unit: {unit or 'none (a count or a pure number)'}")
            continue
        lines.append(f"  unit: {unit or 'none (a count, probability or pure number)'}")
        lines.append(f"  accepts: {accepts}")
        within = " (a parameter of its law)" if same[0].holder is not None and default == "required" else ""
        lines.append(f"  default: {default}{within}")
    if below:
        lines.append(f"keys under {key}: " + ", ".join(below))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- netsim show --doc
def _entry(key: str, where: str) -> Entry | None:
    entries = [e for e in scenario_entries() if e.key == key]
    return next((e for e in entries if e.where == where), next((e for e in entries if not e.where), None))


def _comment(entry: Entry | None) -> list[str]:
    if entry is None:
        return []
    field = entry.field
    text = f"# {entry.title}: {field.doc}" if field.doc else f"# {entry.title}"
    text += f". Accepts {field.accepts}; default {_value(field.default)}."
    import textwrap

    return textwrap.wrap(text, 116, subsequent_indent="#   ")


def annotated_toml(scenario: Any) -> str:
    """The resolved ``scenario`` as TOML with each key's label, unit, meaning, accepted values and
    default in a comment above it (``netsim show --doc``); it reads back as ``netsim show``'s TOML."""
    data = scenario.as_dict()
    where = {"bandit": f"bandit {scenario.bandit['kind']}", "network": f"topology {scenario.network['topology']}",
             "protocol": f"protocol {scenario.protocol['name']}"}
    lines = ["# netsim show --doc: every key with its meaning (netsim explain KEY tells more)"]
    for key, value in data.items():
        if not isinstance(value, Mapping):
            lines += [*_comment(_entry(key, "")), f"{key} = {toml_value(value)}"]
    for section, table in data.items():
        if not isinstance(table, Mapping):
            continue
        lines += ["", f"[{section}]"]
        for key, value in table.items():
            if key == "name" and section == "protocol" or key == "kind" and section == "bandit":
                lines += _comment(_entry(f"{section}.{key}", ""))
            else:
                lines += _comment(_entry(f"{section}.{key}", where.get(section, "")))
            lines.append(f"{key} = {toml_value(value)}")
    return "\n".join(lines) + "\n"
