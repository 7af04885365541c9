"""The bundled protocols. Importing this package imports every module in it, which
registers each protocol with :func:`netsim.registry.register_protocol`; a new paper family
is a new module here, with no other file to edit."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
