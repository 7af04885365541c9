"""Small, validated, vectorised distributions: link delays and byzantine reports Q.

A distribution is declared in a scenario as an inline table, e.g.
``delay = { model = "lognormal", mean = 1.0, sigma = 0.5 }`` or
``distribution = { model = "bernoulli", p = 0.0 }``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from netsim.engine import params as P
from netsim.engine.errors import InputError


@dataclass(frozen=True)
class Distribution:
    """A named law with validated parameters; ``sample(rng, size)`` draws a numpy array."""

    model: str
    args: Mapping[str, float]

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray | float:
        a = self.args
        if self.model == "constant":
            return a["value"] if size is None else np.full(size, a["value"])
        if self.model == "uniform":
            return rng.uniform(a["low"], a["high"], size)
        if self.model == "exponential":
            return rng.exponential(a["mean"], size)
        if self.model == "lognormal":
            # parameterised by its mean: mu = ln(mean) - sigma^2 / 2
            return rng.lognormal(math.log(a["mean"]) - a["sigma"] ** 2 / 2, a["sigma"], size)
        if self.model == "bernoulli":
            draw = rng.random(size) < a["p"]
            return float(draw) if size is None else draw.astype(float)
        if self.model == "normal":
            return rng.normal(a["mean"], a["sigma"], size)
        raise AssertionError(self.model)

    @property
    def mean(self) -> float:
        a = self.args
        return {
            "constant": lambda: a["value"],
            "uniform": lambda: (a["low"] + a["high"]) / 2,
            "exponential": lambda: a["mean"],
            "lognormal": lambda: a["mean"],
            "bernoulli": lambda: a["p"],
            "normal": lambda: a["mean"],
        }[self.model]()

    @property
    def is_constant(self) -> bool:
        return self.model == "constant"

    def as_table(self) -> dict[str, Any]:
        return {"model": self.model, **self.args}


_NONNEG = dict(low=0.0)
# Labels: "{}" stands for the label of the key holding the law (network.delay.mean: "mean per-hop
# delay"); unit None: the holder's unit.
MODELS: dict[str, dict[str, P.Field]] = {
    "constant": {"value": P.real(low=0.0, doc="the value", label="{}")},
    "uniform": {"low": P.real(**_NONNEG, doc="lower end", label="{}, lower end"),
                "high": P.real(**_NONNEG, doc="upper end", label="{}, upper end")},
    # mean = 0 is the degenerate law (every delay 0): the zero point of a delay sweep
    "exponential": {"mean": P.real(low=0.0, doc="the mean (0: every value 0)", label="mean {}")},
    # sigma <= 10: the law is mean-preserving (mu = log(mean) - sigma^2 / 2); far beyond, every draw underflows to 0
    "lognormal": {"mean": P.real(low=0.0, low_open=True, label="mean {}",
                                 doc="the mean of the value itself, not the log-mean mu (mu = ln(mean) - sigma^2 / 2)"),
                  "sigma": P.real(low=0.0, high=10.0, doc="standard deviation of the value's logarithm",
                                  label="sigma of log {}", unit="")},
    "bernoulli": {"p": P.probability(doc="probability of the value 1", label="{}, P(1)")},
    "normal": {"mean": P.real(doc="the mean", label="mean {}"),
               "sigma": P.real(low=0.0, doc="the standard deviation", label="sd of {}")},
}

DELAY_MODELS = ("constant", "uniform", "exponential", "lognormal")
REPORT_MODELS = ("constant", "uniform", "bernoulli", "normal")


def parse_distribution(raw: Any, *, key: str, models: tuple[str, ...], source: str | None = None) -> Distribution:
    """Validate an inline table ``{ model = ..., <args> }`` (a bare number means constant)."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and "constant" in models:
        raw = {"model": "constant", "value": raw}
    if not isinstance(raw, Mapping):
        raise InputError(f"got {P.bounded_repr(raw)}; expected a table {{ model = ... }} with model one of {models}",
                         source=source, key=key)
    raw = dict(raw)
    model = raw.pop("model", None)
    if model not in models:
        got = "no model" if model is None else f"got model {P.bounded_repr(model)}"
        raise InputError(f"{got}; accepted: {', '.join(models)}", source=source, key=f"{key}.model")
    args = P.validate(raw, MODELS[model], where=key, source=source)
    if model == "uniform" and args["low"] > args["high"]:
        raise InputError("low must not exceed high", source=source, key=f"{key}.low")
    return Distribution(model, args)


def distribution_field(models: tuple[str, ...], default: Any, *, doc: str, label: str, unit: str) -> P.Field:
    """The field of a key holding a law ``{ model = ..., <args> }`` out of ``models`` (checked later
    by :func:`parse_distribution`; a bare number is a constant when ``constant`` is a model)."""
    options = []
    if "constant" in models:
        options.append({"type": "number", "minimum": 0})
    for model in models:
        fields = MODELS[model]
        options.append({"type": "object", "properties": {"model": {"const": model},
                                                          **{k: f.schema for k, f in fields.items()}},
                        "required": ["model", *fields], "additionalProperties": False})
    return P.Field("a table { model = ... } with model one of " + ", ".join(models), lambda v: v, default,
                   f"{doc}; models: " + "; ".join(f"{m} ({', '.join(MODELS[m])})" for m in models), label, unit,
                   {"anyOf": options})
