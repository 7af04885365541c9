"""Differential-privacy mechanisms shared by the protocol families.

One module per mechanism: :mod:`.mechanisms` (Laplace, Gaussian), and the families add
theirs beside it (binary-tree continual counter, interval mechanism, tree-based Gaussian
privatizer). Every mechanism is an object with validated keyword-only parameters, a
required ``rng``, a ``variance`` that tests check draws against, and the epsilon it spends.
"""
