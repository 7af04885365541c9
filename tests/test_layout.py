"""The source layout the project promises (README "Layout", issue 20).

* the engine (``netsim/``) imports nothing from ``protocols``;
* each paper family is one package under ``protocols/``;
* one UCB index (``protocols/ucb.py``) and one Laplace draw (``protocols/privacy/mechanisms.py``):
  no other module computes sqrt(c ln t / n) bonuses or calls a generator's ``laplace``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = {"li2022", "zhu2021", "dubey2020a", "feducb", "rio2023"}
SHARED = {"privacy", "robust", "ucb", "baselines"}


def _sources(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_engine_imports_nothing_from_protocols():
    offenders = [f"{p.relative_to(ROOT)}: {m}" for p in _sources("netsim") for m in _imported_modules(p)
                 if m == "protocols" or m.startswith("protocols.")]
    assert not offenders


def test_each_family_is_one_package():
    top = ROOT / "protocols"
    packages = {p.name for p in top.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in top.glob("*.py") if p.stem != "__init__"}
    assert packages == FAMILIES | {"privacy"}
    assert modules == SHARED - {"privacy"}
    for family in FAMILIES:  # one module per algorithm or concept: several modules, none of them huge
        files = list((top / family).glob("*.py"))
        assert len(files) >= 4, family
        assert all(len(f.read_text().splitlines()) <= 600 for f in files), family


def test_every_family_module_registers_through_the_package():
    from netsim.engine.registry import protocols

    found = {cls.__module__.split(".")[1] for _, cls in protocols.items() if cls.__module__.startswith("protocols.")}
    assert found == FAMILIES | {"baselines"}


LAPLACE_DRAW = re.compile(r"\.laplace\(")
UCB_BONUS = re.compile(r"sqrt\([^)]*log\(\s*(np\.maximum\()?t\b")  # sqrt(... log(t ...) / n): a UCB bonus


def _all_sources() -> list[Path]:
    """Every Python source of the project: engine, protocols, benchmarks, scenarios, docs scripts, and the
    Python blocks of the protocol-author guide (its example is a protocol too)."""
    return [p for folder in ("netsim", "protocols", "benchmarks", "scenarios", "docs") for p in _sources(folder)]


# independent reference models: written from the paper on purpose, they must not share the code they check
REFERENCES = {"benchmarks/dubey2020a_reference.py"}


def test_one_laplace_draw_and_one_ucb_index():
    sources = [p for p in _all_sources() if p.relative_to(ROOT).as_posix() not in REFERENCES]
    laplace = [p for p in sources if LAPLACE_DRAW.search(p.read_text())]
    assert [p.relative_to(ROOT).as_posix() for p in laplace] == ["protocols/privacy/mechanisms.py"]
    ucb = [p for p in sources if UCB_BONUS.search(p.read_text())]
    assert [p.relative_to(ROOT).as_posix() for p in ucb] == ["protocols/ucb.py"]
    guide = (ROOT / "docs" / "protocol-author.md").read_text()
    code = "\n".join(re.findall(r"```python\n(.*?)```", guide, flags=re.S))
    assert code and not LAPLACE_DRAW.search(code) and not UCB_BONUS.search(code)


def test_the_searches_can_fail(tmp_path):
    """The two patterns do match the code they guard against (the pre-issue-20 spellings)."""
    assert LAPLACE_DRAW.search("noise = self.rng.laplace(0.0, self.scale, count)")
    assert UCB_BONUS.search("index = means + np.sqrt(2.0 * math.log(t) / counts)")
    assert UCB_BONUS.search("sums / counts + np.sqrt(2.0 * np.log(np.maximum(t, 1.0)) / counts)")
    assert not UCB_BONUS.search("np.sqrt(2.0 * math.log(8.0 * arms * r * r * horizon))")
