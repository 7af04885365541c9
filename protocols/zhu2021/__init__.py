"""Gossip_UCB and Fed_UCB (zhu2021): federated bandits over gossip links.

Modules: :mod:`.rules` (the decision rule of Alg. 1 / Alg. 4 as pure functions), :mod:`.gossip`
(the expected gossip matrix and the gossip average of Sec. 3.1 / line 20) and :mod:`.gossip_ucb`
(the two protocols on the engine; its docstring lists every decision).
"""
