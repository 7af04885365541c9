"""The bundled protocols: one package per paper family (``li2022``, ``zhu2021``, ``dubey2020a``,
``feducb``, ``rio2023``) and the shared parts (``privacy``, ``robust``, ``ucb``, ``baselines``).

Importing this package imports every module below it, which registers each protocol with
:func:`netsim.engine.registry.register_protocol` (and each privacy-audit target); a new paper family
is a new package here, with no other file to edit. A module whose name starts with an underscore
is private to its package and registers nothing: it is not imported here but by its package when
first needed (``feducb._kernels``: numba's start-up, about 0.2 CPU s with scipy, is paid only by a
run that steps a FedUCB learner).
"""

import importlib
import pkgutil

for _module in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
    if not _module.name.rpartition(".")[2].startswith("_"):
        importlib.import_module(_module.name)
