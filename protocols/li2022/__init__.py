"""CDP-MAB, DDP-MAB and HDP-MAB: private, communication-efficient federated elimination (Li & Song 2022).

All three run the same epochs (Alg. 1 lines 3-10, :mod:`.epochs`): in epoch r
every agent pulls each active arm S(r) - S(r-1) times, privatises its per-epoch means with
Laplace noise of scale 1/(N eps [S(r) - S(r-1)]) (line 9) and folds them into its historical
private means ybar_{i,k}(r) (Eq. 6). They differ in the communication round that follows:

* ``cdp-mab`` (Alg. 1, Sec. IV-B): N = ceil(pM) agents drawn at random by the server upload
  ybar_i to the server, which averages (line 12) and eliminates (line 14). Participation rate p
  and round cap R (Delta_r = Delta^{r/R}) are the communication constraints of Sec. IV-B.
* ``ddp-mab`` (Alg. 3): the GIS protocol (Alg. 2) floods every ybar_j to every agent with
  ADV/REQ/DATA handshakes between neighbours; every agent averages all M records (line 9, with
  ybar, see NOTES) and eliminates by itself (line 10).
* ``hdp-mab`` (Alg. 5): inside every component the records are collected at the sink agent of
  Alg. 4 (SAC), the sink averages them (line 9) and uploads to the server, which averages over
  components (line 14), eliminates (line 15) and announces I^(r) (line 16).

While a round is in progress, every agent pulls its local empirical best active arm once per
slot (Alg. 2 line 3, Alg. 5 line 11); that regret counts. The round occupies the slots from its
start to the first slot boundary at or after the arrival of its last needed message; that
number of slots is the measured t_delay. Once one arm remains, or after R rounds under a round
cap (then the arm with the highest aggregated private mean), every agent pulls it until T
(line 17). Time advances on the engine in slots (``[clock] period``); exploration and
exploitation runs are drawn as sums with ``pull(agent, arm, n)``, split at the checkpoints so
the regret curve is exact at every checkpoint.

Decisions (see docs/protocols/li2022.md; each pinned by a test):

* The server's announcement of I^(r) (Alg. 1 after line 15, Alg. 5 line 16) is the paper's
  synchronisation signal: it is not a link of Eq. (2). This is what makes Theorem 2's cost
  c1 ceil(pM) R exact and Theorem 4's c1 Q per round. Uploads (and, on lossy links, the
  server's recalls) are real messages and build server-agent links.
* GIS t_delay counts slots used (with unit slots and per-stage delays <= slot/3 it is the
  graph's diameter: flooding one hop per slot); Alg. 2's counter n starts at 0 and Theorem 3's
  proof writes d_G - 1 for the same quantity.
* SAC: ``sac_routing = "flood"`` (default) runs the GIS handshake flood inside each component
  and ends when the sink holds all M_q records (t_delay^q = the sink's eccentricity; every used
  link counts, so dense components cost more, as Fig. 11 reports); ``"tree"`` sends every
  record along a shortest-path tree to the sink one hop per slot (the cost counted in the proof
  of Theorem 4).
* Alg. 5 line 14 averages the Q component means without weights (``global_mean = "components"``);
  ``"agents"`` weights them by M_q (the mean over all M agents).
* Lossy links (whenever a message can be lost: loss, link outages, crashes): every wait is bounded by
  an RFC 6298 timer per pair of nodes (keys ``rto_initial``, ``rto_min``, ``rto_max``, in slots):
  GIS/SAC ADVs and REQs are repeated until answered (the answer is the acknowledgement), the
  server recalls overdue uploads, SAC tree hops ride a ``netsim.comm.transport.Transport``; so every
  round completes (docs/protocols/li2022.md, "Reliable mode").
* Adversary: uploads, GIS/SAC DATA and SAC hops are corruptible; a corrupted DATA carries its
  values and its receiver uses and forwards them; DDP agents that then disagree split into
  cohorts with their own active sets (:mod:`.elimination`).
* Faults (issue 15, docs/protocols/li2022.md "Faults"): copies and late messages change nothing
  (named immutable records, round tags); crashed agents pull nothing (:mod:`.play`); an agent that
  missed part of an epoch's exploration keeps its previous private mean and sample count; a
  round aggregates the records of the agents up at its start that reached the aggregator (pooled
  by sample counts, radius recomputed for what arrived); a GIS round that a crash cut ends when
  nothing more can arrive and every survivor uses the records all survivors hold; a crashed
  server stalls its rounds until it restarts and, if it lost its state, recalls the uploads.
"""
