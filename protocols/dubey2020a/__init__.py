"""Private and byzantine-proof cooperative UCB over the LOCAL protocol (Dubey & Pentland, AAMAS 2020).

Protocols
    ``dubey2020a-private``    Private Multi-Agent UCB: Alg. 2 on the group estimates of Alg. 1,
                              messages <m, t, gamma, noisy means, counts> (Eq. 6).
    ``dubey2020a-byzantine``  Byzantine-proof Multi-Agent UCB: Alg. 3 with the trimmed mean of
                              Definition 4.1, messages <m, t, gamma, A_{m,t}, X_{m,t}> (Eq. 7).
    ``dp-ucb-int``            Baseline: DP-UCB-INT (Tossou & Dimitrakakis 2016) on every agent in
                              isolation. Isolated UCB1 is the existing ``ucb1`` protocol.

Messages travel with :class:`netsim.comm.flooding.Flooding` (the LOCAL protocol, Sec. 2): each
agent publishes one record per trial, records are forwarded gamma hops, one engine message
per link per trial. Agent m therefore holds the message agent m' created d(m, m') trials
ago, for every m' within gamma hops (Eq. 4).

Trials and time. Trial t = 1, 2, ... is the tick at simulated time (t - 1) * period; all
agents act in the same tick (one vectorised clock). In its tick an agent chooses with what it
holds, pulls, updates its own statistics, publishes its record and the flush sends it.

gamma. ``gamma`` is an integer >= 0, or ``"diameter"`` (the diameter D of the sampled agent
graph), or ``"half-diameter"`` = max(1, floor(D / 2)) (Sec. 5: "gamma = diameter(G)/2"; the
paper does not say how D/2 is made an integer: we truncate, as integer division does, and keep
at least one hop). Erdős–Rényi G(200, 0.1) graphs have D = 3, so half-diameter gives gamma = 1.
The resolved value is reported as the ``gamma`` column of trials.csv.

Byzantine agents are decided by the engine's ``[adversary]`` section (who lies, with which
probability epsilon, which law Q, whether relays lie too). The protocol only declares how
its records are corrupted (``network.corruptible``): the reward column of a record is
replaced by a draw of Q, once per record and forwarding, the same for every link.
"""
