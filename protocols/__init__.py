"""The bundled protocols: one package per paper family (``li2022``, ``zhu2021``, ``dubey2020a``,
``feducb``, ``rio2023``) and the shared parts (``privacy``, ``robust``, ``ucb``, ``baselines``).

Importing this package imports every module below it, which registers each protocol with
:func:`netsim.engine.registry.register_protocol` (and each privacy-audit target); a new paper family
is a new package here, with no other file to edit.
"""

import importlib
import pkgutil

for _module in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
    importlib.import_module(_module.name)
