"""Parameter sweeps: a Cartesian grid of scenario overrides x trials, resumable.

A sweep is planned from a scenario, its ``--set`` overrides, ``--grid KEY=V1,V2,...`` options
and a number of trials (:mod:`.plan`, grid syntax in :mod:`.grid`). Each (point, trial) pair is
a *unit* with its own seed and identity (:mod:`.store`); finished units are stored one file each
in ``OUT/units/``, so a rerun of the same command runs only the missing ones (:mod:`.execute`).
Once every unit is stored the combined tables and ``meta.json`` are written (:mod:`.tables`)
and the figures drawn (:mod:`.figures`).
"""

from netsim.experiment.sweeps.execute import Outcome, run
from netsim.experiment.sweeps.figures import draw, plot_folder
from netsim.experiment.sweeps.grid import Axis, parse_axis, parse_grid, toml_value
from netsim.experiment.sweeps.plan import Plan, PlannedUnit, Point, encode_result, plan
from netsim.experiment.sweeps.store import UnitStore, decode_result, locked, point_key, unit_id
from netsim.experiment.sweeps.tables import meta, tables, write_tables

__all__ = [
    "Axis", "Outcome", "Plan", "PlannedUnit", "Point", "UnitStore", "decode_result", "draw", "encode_result",
    "locked", "meta", "parse_axis", "parse_grid", "plan", "plot_folder", "point_key", "run", "tables",
    "toml_value", "unit_id", "write_tables",
]
