"""Study files: what to run (variants, a grid, scales) and what to draw (figure specs).

A study is a TOML file (bundled ones live in ``scenarios/studies/`` and run by name)::

    title = "li2022 Fig. 10: DDP-MAB on five graphs"
    source = "Li & Song 2022, Fig. 10"
    notes = "What the paper shows, what netsim shows, and why they differ (if they do)."
    seed = 1                                    # root seed of every unit (default 1)
    paired = "variants"                         # trial i's seed is shared by the variants ("all": and grid points)

    [scale.quick]                               # every study has a quick and a paper scale
    trials = 4
    set = { "run.horizon" = 20000 }             # overrides applied to every variant
    note = "T = 2e4 instead of 1e5, 4 trials: about a minute"

    [scale.paper]
    trials = 100
    note = "the paper's size"
    grid = { "network.delay.mean" = [0, 0.5, 1, 2, 4, 8] }   # this scale's grid values (optional)

    [grid]                                      # optional: a Cartesian grid applied to every variant
    "network.delay.mean" = [0, 1, 4]

    [[variant]]                                 # one or more; protocols and keys may differ
    name = "ring"
    scenario = "li2022-fig10-ring"              # bundled name, or a file relative to the study
    set = { "protocol.epsilon" = 1 }
    scale = { quick = { "run.horizon" = 5000 } }   # overrides of this variant at one scale
    grid = true                                 # false: run once (a reference drawn across x)
    oracle = false                              # true: unreachable reference (hollow, off the Pareto front)

    [[figure]]
    kind = "series"                             # series | final | tradeoff | loglog
    y = "group_regret"

Overrides are tables of *quoted* dotted keys (``"run.horizon" = 1000``), read like ``--set``;
a bare key such as ``run`` is refused, because TOML would read ``run.horizon = 1000`` as a whole
new ``[run]`` table and silently drop the scenario's other run keys.

Figure kinds (:data:`KINDS`; the statistics are in :mod:`netsim.experiment.studies.stats`):

* ``series``: ``y`` (a time-series column) against time, one curve per ``hue`` value;
* ``final``: the final ``y`` (a trials column) against ``x`` (a parameter or ``variant``);
  for both, ``y`` may be a list of metrics, drawn side by side (one panel each);
* ``tradeoff``: ``y`` (default ``group_regret``) against ``x`` (default ``comm_cost``), one point
  per variant and grid point, the Pareto front (lower is better on both axes) marked;
* ``loglog``: ``y`` against a numeric ``x`` on log-log axes, with the fitted slope per curve.

``x``, ``hue`` and ``facet`` name ``variant``, a grid key or any dotted scenario key (its value
is read from each variant's resolved scenario, so ``protocol.epsilon`` works without a grid);
``facet`` draws one panel per value. A variant with ``grid = false`` runs once; where a figure's
``x`` or ``facet`` is a grid key it is drawn as a reference (a horizontal line and band across
the panel, in every panel). ``baseline = "NAME"`` (series, final) draws each variant's paired
difference from variant NAME: trial by trial, at the same grid point (the units share seeds).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Any

from netsim.engine import params as P
from netsim.engine.errors import InputError

#: what a figure's ``name`` may be (its files are NAME.png, NAME.svg, NAME.csv in OUT/figures)
_FILE_NAME_LENGTH = 100
_FILE_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._+=-]{{0,{_FILE_NAME_LENGTH - 1}}}")

#: the figure kinds a study may ask for
KINDS = ("series", "final", "tradeoff", "loglog")
#: the scales every bundled study defines (``--scale``)
SCALES = ("quick", "paper")
DEFAULT_STUDY = "quickstart"
#: columns a figure may use that are not scenario keys
RESERVED = ("variant", "time")
#: bounds on what a study file may ask for (a study is a list of runs: keep it a list a machine can hold)
MAX_VARIANTS = 200
MAX_POINTS = 2_000
MAX_UNITS = 100_000

TOP = {
    "name": P.text("", doc="the study's name (default: the file name)"),
    "title": P.text("", doc="one line shown on the report and the figures"),
    "description": P.text("", doc="what the study shows"),
    "source": P.text("", doc="paper and figure the study reproduces"),
    "notes": P.text("", doc="what the paper shows, what netsim shows and why (shown in the report)"),
    "seed": P.integer(1, low=0, doc="root seed of every unit"),
    "paired": P.choice(("variants", "all"), "variants",
                       doc="which units share trial i's seed: the variants at one grid point, or all"),
    "scale": P.table(doc="the scales: quick and paper"),
    "grid": P.table({}, doc="dotted key -> list of values, applied to every variant"),
    "variant": P.Field("a list of [[variant]] tables", lambda v: v if isinstance(v, list) else None),
    "figure": P.Field("a list of [[figure]] tables", lambda v: v if isinstance(v, list) else None, []),
}
SCALE = {
    "trials": P.integer(low=1, high=100_000, doc="trials per variant and grid point"),
    "set": P.table({}, doc="overrides applied to every variant"),
    "grid": P.table({}, doc="grid key -> the values this scale uses instead of the study's"),
    "note": P.text("", doc="what this scale changes from the paper, and why"),
}
VARIANT = {
    "name": P.text(doc="the variant's label in tables and figures"),
    "scenario": P.text(doc="bundled scenario name, or a file relative to the study file"),
    "set": P.table({}, doc="overrides of this variant"),
    "scale": P.table({}, doc="scale name -> overrides of this variant at that scale"),
    "grid": P.boolean(True, doc="false: run once, not at every grid point (a reference drawn across the x axis)"),
    "oracle": P.boolean(False, doc="a reference no real network can reach (central-ucb's instant pooling): marked "
                                   "'(oracle)', drawn hollow and dashed, kept off the Pareto front"),
}
FIGURE = {
    "name": P.text("", doc="file name of the figure: letters, digits, . _ - + =, at most 100, no '/' or '..' "
                           "(default: kind, y and x)"),
    "kind": P.choice(KINDS, doc="what to draw"),
    "y": P.either(P.text(), P.Field("a list of metrics", lambda v: tuple(v) if isinstance(v, list) and v and all(
        isinstance(i, str) for i in v) else None), default="",
        doc="the metric (default: group_regret); series and final: a list draws one panel per metric"),
    "x": P.text("", doc="final, loglog: a parameter or 'variant'; tradeoff: a trials column (comm_cost)"),
    "hue": P.text("", doc="one curve (or colour) per value of this column (default: variant)"),
    "facet": P.text("", doc="one panel per value of this column"),
    "variants": P.Field("a list of variant names", lambda v: tuple(v) if isinstance(v, list)
                        and all(isinstance(i, str) for i in v) else None, (), doc="draw only these variants"),
    "title": P.text("", doc="the figure's title"),
    "logy": P.boolean(False, doc="logarithmic y axis"),
    "logx": P.boolean(False, doc="logarithmic x axis"),
    "caption": P.text("", doc="shown under the figure in the report"),
    "baseline": P.text("", doc="series, final: plot each variant's paired difference from this variant"),
    "note": P.table({}, doc="scale name -> one line the figure shows at that scale (e.g. why it cannot separate "
                            "what the paper shows)"),
}


@dataclass(frozen=True)
class Scale:
    """One ``[scale.NAME]`` table."""

    name: str
    trials: int
    set: Mapping[str, Any]
    note: str
    grid: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Variant:
    """One ``[[variant]]``: a scenario with overrides, and per-scale overrides."""

    name: str
    scenario: str
    set: Mapping[str, Any]
    scale: Mapping[str, Mapping[str, Any]]
    grid: bool = True
    oracle: bool = False


@dataclass(frozen=True)
class Figure:
    """One ``[[figure]]`` (defaults filled in: ``y``, ``x``, ``hue``, ``name``)."""

    name: str
    kind: str
    y: str
    x: str
    metrics: tuple[str, ...]
    hue: str
    facet: str
    variants: tuple[str, ...]
    title: str
    logy: bool
    logx: bool
    caption: str
    baseline: str = ""
    oracles: tuple[str, ...] = ()  # the study's variants marked oracle = true
    notes: Mapping[str, str] = field(default_factory=dict)  # scale -> one line shown on the figure

    @property
    def panels(self) -> bool:
        """Several metrics, one panel each (then ``facet`` is the metric)."""
        return len(self.metrics) > 1

    def columns(self) -> list[str]:
        """The columns this figure groups by (beyond its metrics)."""
        group = [c for c in (self.hue, self.facet) if c]
        if self.kind in ("final", "loglog"):
            group.append(self.x)
        return group


@dataclass(frozen=True)
class Study:
    """A parsed, validated study file (see the module docstring)."""

    name: str
    title: str
    description: str
    source: str
    notes: str
    seed: int
    paired: str
    path: str
    text: str
    scales: Mapping[str, Scale]
    grid: Mapping[str, tuple[Any, ...]]
    variants: tuple[Variant, ...]
    figures: tuple[Figure, ...] = field(default=())

    def variant(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)

    def parameters(self) -> list[str]:
        """The parameter columns of the study's tables: grid keys, then keys the figures use."""
        keys = list(self.grid)
        for figure in self.figures:
            for column in (figure.x, figure.hue, figure.facet):
                if "." in column and column not in keys:
                    keys.append(column)
        return keys


# ---------------------------------------------------------------------- finding files
def bundled() -> dict[str, Path]:
    """Bundled study name -> file (``scenarios/studies/*.toml``)."""
    folder = Path(str(files("scenarios"))) / "studies"
    return {path.stem: path for path in sorted(folder.glob("*.toml"))}


def locate(name_or_path: str | Path | None) -> Path:
    """A study file from a path or a bundled name (``None``: the quickstart study)."""
    name = str(name_or_path or DEFAULT_STUDY)
    from netsim.engine.files import check_path

    check_path(name, where="study")
    path = Path(name)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise InputError(f"study file {name!r} not found")
        return path
    known = bundled()
    if name in known:
        return known[name]
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise InputError(f"no study file or bundled study named {P.bounded_repr(name)}{hint}; see 'netsim list'")


# ---------------------------------------------------------------------- parsing
def load(name_or_path: str | Path | None = None) -> Study:
    """Read and check a study file (its variants' scenarios are checked when a scale is planned)."""
    from netsim.engine import files as guarded

    path = locate(name_or_path)
    text = guarded.read_text(path, what="study file", limit=guarded.MAX_TOML)
    return parse(guarded.parse_toml(text, source=str(path)), path=path, text=text)


def parse(document: Mapping[str, Any], *, path: Path, text: str = "") -> Study:
    """A :class:`Study` from a parsed TOML document (errors name ``path``, the variant and the key)."""
    source = str(path)
    top = P.validate(document, TOP, source=source)
    scales = {name: _scale(name, raw, source) for name, raw in _tables(top["scale"], "scale", source).items()}
    for name in SCALES:
        if name not in scales:
            raise InputError(f"missing [scale.{name}]; accepted: a table with trials (and set, grid, note)",
                             source=source, key=f"scale.{name}")
    grid = _grid(top["grid"], source)
    for scale in scales.values():
        for key in scale.grid:
            if key not in grid:
                raise InputError(f"{P.bounded_repr(key)} is not a key of [grid]; accepted: "
                                 f"{', '.join(grid) or 'no keys (the study has no grid)'}", source=source,
                                 key=f"scale.{scale.name}.grid")
    if not top["variant"]:
        raise InputError("no [[variant]]; accepted: at least one [[variant]] with name and scenario",
                         source=source, key="variant")
    if len(top["variant"]) > MAX_VARIANTS:
        raise InputError(f"{len(top['variant'])} variants; accepted: at most {MAX_VARIANTS}", source=source,
                         key="variant")
    variants = []
    for index, raw in enumerate(top["variant"]):
        variant = _variant(index, raw, scales, path)
        if any(v.name == variant.name for v in variants):
            raise InputError(f"name {variant.name!r} given twice; accepted: one name per variant", source=source,
                             key=f"variant {variant.name!r}")
        variants.append(variant)
    figures = []
    for index, raw in enumerate(top["figure"]):
        figure = _figure(index, raw, [v.name for v in variants], source)
        figure = replace(figure, oracles=tuple(v.name for v in variants if v.oracle))
        for scale in figure.notes:
            if scale not in scales:
                raise InputError(f"unknown scale {P.bounded_repr(scale)}; accepted: {', '.join(scales)}", source=source,
                                 key=f"figure {figure.name!r}.note")
        if any(f.name == figure.name for f in figures):
            raise InputError(f"figure name {figure.name!r} given twice; accepted: a distinct name per figure",
                             source=source, key=f"figure {index + 1}")
        figures.append(figure)
    points = 1
    for values in grid.values():
        points *= len(values)
    if points > MAX_POINTS:
        raise InputError(f"{points:,} grid points; accepted: at most {MAX_POINTS:,}", source=source, key="grid")
    return Study(name=top.get("name") or path.stem, title=top["title"], description=top["description"],
                 source=top["source"], notes=top["notes"], seed=top["seed"], paired=top["paired"], path=source,
                 text=text,
                 scales=scales, grid=grid, variants=tuple(variants), figures=tuple(figures))


def _tables(raw: Mapping[str, Any], where: str, source: str) -> dict[str, Mapping[str, Any]]:
    for name, value in raw.items():
        if not isinstance(value, Mapping):
            raise InputError(f"got {P.bounded_repr(value)}; expected a table", source=source, key=f"{where}.{name}")
    return dict(raw)


def overrides(raw: Any, where: str, source: str) -> dict[str, Any]:
    """A table of overrides: quoted dotted keys (``"run.horizon" = 1000``) to values."""
    if not isinstance(raw, Mapping):
        raise InputError(f"got {P.bounded_repr(raw)}; expected a table of dotted keys, e.g. "
                         '{ "run.horizon" = 1000 }', source=source, key=where)
    for key in raw:
        parts = str(key).split(".")
        if len(parts) < 2 or any(not part for part in parts):
            raise InputError(f"key {P.bounded_repr(key)} is not a dotted scenario key; accepted: quoted dotted keys, "
                             'e.g. { "run.horizon" = 1000 } (an unquoted run.horizon is a new [run] table)',
                             source=source, key=where)
    return dict(raw)


def _scale(name: str, raw: Mapping[str, Any], source: str) -> Scale:
    values = P.validate(raw, SCALE, where=f"scale.{name}", source=source)
    return Scale(name, values["trials"], overrides(values["set"], f"scale.{name}.set", source), values["note"],
                 _grid(values["grid"], source, f"scale.{name}.grid"))


def _grid(raw: Mapping[str, Any], source: str, where: str = "grid") -> dict[str, tuple[Any, ...]]:
    grid = {}
    for key, values in raw.items():
        overrides({key: None}, where, source)
        if not isinstance(values, list) or not values:
            raise InputError(f"got {P.bounded_repr(values)}; expected a non-empty list of values", source=source,
                             key=f"{where}.{key}")
        grid[key] = tuple(values)
    return grid


def _variant(index: int, raw: Any, scales: Mapping[str, Scale], path: Path) -> Variant:
    source = str(path)
    where = f"variant {index + 1}"
    if not isinstance(raw, Mapping):
        raise InputError(f"got {P.bounded_repr(raw)}; expected a table", source=source, key=where)
    if isinstance(raw.get("name"), str):
        where = f"variant {raw['name']!r}"
    values = P.validate(raw, VARIANT, where=where, source=source)
    scenario = values["scenario"]
    if scenario.endswith(".toml") or "/" in scenario:
        from netsim.engine.files import absolute

        scenario = str(absolute(path.parent, scenario, where=f"{where}.scenario"))
    per_scale = {}
    for name, table in values["scale"].items():
        if name not in scales:
            raise InputError(f"unknown scale {P.bounded_repr(name)}; accepted: {', '.join(scales)}", source=source,
                             key=f"{where}.scale")
        per_scale[name] = overrides(table, f"{where}.scale.{name}", source)
    return Variant(values["name"], scenario, overrides(values["set"], f"{where}.set", source), per_scale,
                   values["grid"], values["oracle"])


def _figure(index: int, raw: Any, variants: Sequence[str], source: str) -> Figure:
    where = f"figure {index + 1}"
    if not isinstance(raw, Mapping):
        raise InputError(f"got {P.bounded_repr(raw)}; expected a table", source=source, key=where)
    values = P.validate(raw, FIGURE, where=where, source=source)
    kind = values["kind"]
    metrics = values["y"] if isinstance(values["y"], tuple) else (values["y"] or "group_regret",)
    if len(metrics) > 1 and (kind not in ("series", "final") or values["facet"]):
        raise InputError(f"y {list(metrics)}: several metrics draw one panel each; accepted: a list with kind "
                         "series or final and no facet, or one metric", source=source, key=f"{where}.y")
    y = metrics[0]
    x = values["x"]
    if kind == "series":
        if x and x != "time":
            raise InputError(f"x {x!r}: a series is drawn against time; accepted: no x", source=source,
                             key=f"{where}.x")
        x = "time"
    elif kind == "tradeoff":
        x = x or "comm_cost"
    elif not x:
        raise InputError(f"a {kind} figure needs x; accepted: 'variant', a grid key or a dotted scenario key",
                         source=source, key=f"{where}.x")
    if (kind == "loglog" or values["logx"]) and x == "variant":
        raise InputError("x 'variant' is not a number (no log axis); accepted: a numeric grid key or dotted "
                         "scenario key", source=source, key=f"{where}.x")
    hue = values["hue"] or ("" if x == "variant" else "variant")
    for name in values["variants"]:
        if name not in variants:
            raise InputError(f"no variant {P.bounded_repr(name)}; accepted: {', '.join(variants)}", source=source,
                             key=f"{where}.variants")
    columns = {"hue": values["hue"], "facet": values["facet"]} | ({} if kind == "tradeoff" else {"x": values["x"]})
    for key, column in columns.items():
        if column and column not in RESERVED and "." not in column:
            raise InputError(f"{P.bounded_repr(column)}: accepted: 'variant', a grid key or a dotted scenario key",
                             source=source, key=f"{where}.{key}")
    name = values["name"]
    if name and not _FILE_NAME.fullmatch(name):
        raise InputError(f"{P.bounded_repr(name)}: the figure's files are NAME.png, .svg, .csv in OUT/figures; "
                         f"accepted: at most {_FILE_NAME_LENGTH} letters, digits, '.', '_', '-', '+', '=' starting "
                         "with a letter or digit (no '/', no '..', not absolute)", source=source, key=f"{where}.name")
    if not name:  # the default, made of keys and metrics: every other character becomes '_'
        name = f"{kind}-{y}" + (f"-by-{x.rsplit('.', 1)[-1]}" if kind in ("final", "loglog") else "")
        name = re.sub(r"[^A-Za-z0-9._+=-]", "_", name)[:_FILE_NAME_LENGTH]
    baseline = values["baseline"]
    if baseline and (baseline not in variants or kind not in ("series", "final")):
        raise InputError(f"baseline {P.bounded_repr(baseline)}: accepted: with kind series or final, one of "
                         f"{', '.join(variants)}", source=source, key=f"{where}.baseline")
    if baseline and hue != "variant":
        raise InputError("a baseline needs one curve per variant; accepted: hue = 'variant' (the default)",
                         source=source, key=f"{where}.baseline")
    logged = kind == "loglog"
    notes = values["note"]
    for scale, line in notes.items():
        if not isinstance(line, str):
            raise InputError(f"got {P.bounded_repr(line)}; expected one line of text", source=source,
                             key=f"{where}.note.{scale}")
    return Figure(name=name, kind=kind, y=y, x=x, metrics=metrics, hue=hue, facet=values["facet"],
                  variants=values["variants"], title=values["title"], logy=values["logy"] or logged,
                  logx=values["logx"] or logged, caption=values["caption"], baseline=baseline, notes=dict(notes))
