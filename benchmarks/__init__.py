"""netsim benchmarks: ``python -m benchmarks`` runs them all and writes ``benchmarks/results.json``
and ``docs/performance.md``; the per-family modules (``benchmarks/engine.py``, ``zhu2021.py``,
``dubey2020a.py``, ``feducb.py``, ``rio2023.py``, ``li2022.py``) also run alone as scripts.

OpenBLAS / OpenMP are pinned to one thread before numpy is imported (as the CLI does): the
matrix products of the protocols are small, and CPU time is only comparable single-threaded.

``PYTHONDONTWRITEBYTECODE`` is removed from the environment the benchmarks' child processes
inherit: with it set, every child compiles netsim's modules from source again (about a tenth of a
CPU second, more under load), which no installed netsim does after its first run. The start-up
benchmark (``benchmarks/process.py``) also makes one untimed run first, so the bytecode exists.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
