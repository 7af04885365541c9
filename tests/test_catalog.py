"""What a key means: labels and units from the field definitions (netsim.experiment.catalog), ``netsim explain``,
``netsim show --doc`` and the JSON Schema of scenario files (``netsim schema``)."""

from __future__ import annotations

import copy
import json
import tomllib

import jsonschema
import pytest

from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.experiment import catalog as C
from netsim.experiment.cli import main


def test_every_scenario_key_and_result_column_has_a_label_and_a_unit():
    """Every key any scenario may hold (all protocols, bandit kinds, topologies, laws, faults) and every
    result column has a display name; every key declares its unit ('' for a pure number)."""
    # what netsim ships: protocols that other test modules register in this process ("test-...") are left out
    keys = [e for e in C.scenario_entries() if not e.where.startswith("protocol test-")]
    columns = [e for e in C.column_entries() if not e.where.startswith("protocol test-")]
    assert len(keys) > 150 and len(columns) > 100
    assert [(e.where, e.key) for e in keys if not e.field.label or e.unit is None] == []
    assert [(e.where, e.key) for e in columns if not e.field.label] == []
    # a law's parameter reads with the label of the key that holds it
    assert C.title("network.delay.mean") == "mean per-hop delay (slots)"
    assert C.title("faults.reorder_delay.mean") == "mean extra delay of reordered messages (slots)"
    assert C.title("network.delay.sigma") == "sigma of log per-hop delay"
    assert C.title("network.agents") == "agents M" and C.title("comm_cost") == "communication cost C(T) (cost units)"
    assert C.title("t_delay_mean") == "round length t_delay (slots)"
    assert C.title("sent_gis-adv") == "gis-adv messages sent" and C.title("no_such_column") == "no such column"


def test_explain_prints_meaning_unit_default_and_accepted_values(capsys):
    assert main(["explain", "network.delay", "network.delay.mean", "protocol.epsilon", "comm_cost"]) == 0
    out = capsys.readouterr().out
    assert "network.delay: per-hop delay (slots)" in out
    assert 'default: { model = "constant", value = 1.0 }' in out
    assert "accepts: a table { model = ... } with model one of constant, uniform, exponential, lognormal" in out
    assert "keys under network.delay: network.delay.model" in out
    # the lognormal mean is the mean delay, not mu (the example)
    assert "not the log-mean mu" in out and "[model lognormal]" in out
    # a key several protocols define: one block per distinct definition, naming the protocols
    assert "[protocol cdp-mab, protocol ddp-mab, protocol hdp-mab]" in out and "[protocol dp-mase]" in out
    assert "result column; unit: cost units" in out


def test_explain_refuses_an_unknown_key_in_one_line(capsys):
    assert main(["explain", "network.dely"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "network.dely" in err and "did you mean 'network.delay'" in err
    with pytest.raises(InputError):
        C.explain("x" * 500)


def test_show_doc_reads_back_as_show_and_comments_every_key(capsys):
    assert main(["show", "li2022-fig11-case4", "--doc"]) == 0
    annotated = capsys.readouterr().out
    assert main(["show", "li2022-fig11-case4"]) == 0
    plain = capsys.readouterr().out
    assert tomllib.loads(annotated) == tomllib.loads(plain)
    lines = annotated.splitlines()
    for i, line in enumerate(lines):
        if "=" in line and not line.startswith("#"):
            assert lines[i - 1].startswith("#"), line  # every key has its comment
    assert "# edge probability p: edge probability. Accepts a number >= 0 and <= 1; default 0.1." in lines
    assert any(line.startswith("# privacy level ε: privacy level eps of the Laplace noise") for line in lines)


# ---------------------------------------------------------------------- the JSON Schema
@pytest.fixture(scope="module")
def validator(tmp_path_factory):
    path = tmp_path_factory.mktemp("schema") / "scenario.schema.json"
    assert main(["schema", "--out", str(path)]) == 0
    schema = json.loads(path.read_text())  # plain JSON: no inf or nan
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_schema_validates_every_bundled_scenario(validator):
    bundled = S.bundled()
    assert len(bundled) > 80
    for name, path in bundled.items():
        document = tomllib.loads(path.read_text())
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
        assert errors == [], name


def _set(document: dict, dotted: str, value) -> dict:
    out = copy.deepcopy(document)
    *parents, last = dotted.split(".")
    table = out
    for part in parents:
        table = table.setdefault(part, {})
    table[last] = value
    return out


def _netsim_accepts(document: dict) -> bool:
    try:
        S.from_dict(document)
    except InputError:
        return False
    return True


REFUSED = [("network.agents", 0), ("network.agnets", 5), ("network.loss", 1.5), ("network.delay", {"model": "gamma"}),
           ("network.delay", {"model": "lognormal", "mean": 1.0}), ("network.delay", {"model": "exponential",
                                                                                         "mean": 1.0, "sigma": 1}),
           ("protocol.epsilon", 1.0), ("protocol.name", "ucb2"), ("bandit.arms", 1), ("bandit.kind", "poisson"),
           ("run.horizon", "long"), ("run.horizon", 0), ("clock.jitter", 1.0), ("faults.duplication", -0.1),
           ("faults.state", "forgotten"), ("adversary.byzantine", 2), ("network.cost.server_agent", -1),
           ("network.p", 0.3), ("colour", "blue")]
ACCEPTED = [("network.delay", {"model": "lognormal", "mean": 2.0, "sigma": 0.5}), ("network.delay", 0.5),
            ("network.topology", "erdos_renyi"), ("run.horizon", 50), ("protocol.name", "central-ucb"),
            ("faults.crashes", [{"node": 1, "start": 3.0, "end": 9.0}]), ("network.cost.agent_agent", 2)]


@pytest.mark.parametrize(("key", "value"), REFUSED)
def test_schema_rejects_what_netsim_rejects(validator, key, value):
    base = tomllib.loads(S.locate("quickstart").read_text())
    assert validator.is_valid(base) and _netsim_accepts(base)
    mutated = _set(base, key, value)
    assert not _netsim_accepts(mutated)
    assert not validator.is_valid(mutated), (key, value)


@pytest.mark.parametrize(("key", "value"), ACCEPTED)
def test_schema_accepts_what_netsim_accepts(validator, key, value):
    base = tomllib.loads(S.locate("quickstart").read_text())
    if key == "network.delay":  # on a protocol that sends: quickstart's ucb1 refuses a delay it would ignore
        base = _set(base, "protocol.name", "dubey2020a-private")
    mutated = _set(base, key, value)
    assert _netsim_accepts(mutated) and validator.is_valid(mutated), (key, value)
