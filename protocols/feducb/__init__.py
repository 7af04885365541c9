"""FedUCB (Dubey & Pentland, NeurIPS 2020, "Differentially-Private Federated Linear Bandits").

Modules: :mod:`.linucb` (the OFUL state, thresholds and the synchronisation trigger of Alg. 1),
:mod:`.centralized` (``feducb``: Alg. 1 with a controller node), :mod:`.p2p` (``feducb-p2p``:
the decentralized variant of Sec. 4.2) and :mod:`.audit` (privacy-audit targets). The
PRIVATIZER (Alg. 2) is :mod:`protocols.privacy.gaussian_tree`.
"""
