"""The experiment layer: what a user drives, on top of the engine.

Running trials in processes or on a cluster (:mod:`~netsim.experiment.runner`), their tables
(:mod:`~netsim.experiment.results`, :mod:`~netsim.experiment.resultset`), the Python API
(:mod:`~netsim.experiment.api`, re-exported by :mod:`netsim`), sweeps and studies
(:mod:`~netsim.experiment.sweeps`, :mod:`~netsim.experiment.studies`), figures
(:mod:`~netsim.experiment.plots`), message traces and their viewer (:mod:`~netsim.experiment.trace`,
:mod:`~netsim.experiment.viewer`), the key catalogue and schema (:mod:`~netsim.experiment.catalog`,
:mod:`~netsim.experiment.schema`), the one-call trial runner for tests (:mod:`~netsim.experiment.testing`)
and the command line (:mod:`~netsim.experiment.cli`).

Nothing below this layer imports it.
"""
