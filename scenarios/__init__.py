"""Bundled scenario files (``*.toml``), found by name through the ``netsim.scenarios`` entry point."""
