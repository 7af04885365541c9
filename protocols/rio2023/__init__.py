"""Rio, Barlier, Colin & Soare (ICML 2023), "Multi-Agent Best Arm Identification with Private
Communications": MASE (Alg. 1), DP-MASE (Alg. 2 + appendix Alg. 4), CORRUPTED ELIMINATION
(Alg. 3 + appendix Alg. 4), Feraud et al. (2019) (CORRUPTED ELIMINATION with xi = 0), and the
baselines CENTRAL (one pooled successive elimination) and INDEPENDENT (Sec. 6).

Setting (Sec. 3): N agents share one K-armed bandit; one agent per round, drawn from
``P_N(t)`` (Assumptions 3.2-3.3), samples every arm of its local active set ``K^n``. Agents
vote against arms they eliminate locally by sending the arm index to a coordinator
(Assumption 3.4), which removes arm k from the global set ``K`` when ``lambda_k > M`` and tells
the agents, who drop it from ``K^n`` when the algorithm says (Alg. 2 line 18: at the end of the
agent's epoch; Alg. 3 line 12: at the agent's next activation). The run ends when ``|K| = 1``;
``sample_complexity`` is the number of rounds (iterations of the while loop).

Engine wiring: the coordinator is the scenario's single server node; votes are ``"vote"``
messages (payload: arm index) agent -> server and eliminations ``"eliminate"`` messages
server -> every agent still in ``N(t)``, both over engine links (delays and losses apply and
are counted). Agents that are done (``|K^n| <= 1``) leave ``N(t)``.

Two simulation modes (protocol key ``simulation``):

* ``"events"`` (default): only epoch ends / local steps where an elimination can happen /
  activations that apply a global elimination are simulated, at exactly sampled times; see
  :mod:`.paths` for the derivation (Poissonised rounds, Gamma waiting times,
  binomial/beta bridges, Binomial epoch sums, per-step reward blocks). The cost grows
  with epochs and votes, not with rounds. Engine time is Poissonised round time.
* ``"rounds"``: the reference, one engine tick per round (engine time = round index), the
  active agent drawn from ``P_N(t)`` and one pull per active arm. With zero delays both modes
  give the same law of every result (tested with a two-sample test).

Decisions (see also :mod:`.rules`):

* An agent leaves ``N(t)`` when ``|K^n| <= 1`` (the paper writes ``= 1``; a set emptied by
  synchronisation would otherwise keep a useless agent forever).
* Alg. 2 computes the next R(e) (line 17) before synchronising ``K^n`` (line 18), and Alg. 3
  synchronises after the local elimination and the done test: followed literally.
* CORRUPTED ELIMINATION: a corrupted vote (``nu = 0``) is simply not sent (the message
  ``lambda_k nu_k = 0`` carries nothing); it is counted in ``votes_corrupted``.
* If every agent leaves while ``|K| > 1`` the run stops (``deadlock = 1``) and the identified
  arm is the remaining arm with the fewest votes.
* INDEPENDENT: every agent runs successive elimination with confidence ``1 - delta`` and no
  communication; the run ends when every agent is done and the identified arm is the most
  frequent answer (``agents_correct`` gives the fraction of agents that found the best arm).
* CENTRAL: one successive elimination on all rewards pooled (confidence ``1 - delta``), each
  round sampling every arm of ``K``; its pulls are booked on agent 0's reward stream.
* DP-MASE accepts Bernoulli arms only: its Laplace sensitivity 1/R(e) assumes rewards in
  [0, 1] (Definition 3.1). The successive-elimination protocols accept Gaussian arms too
  (Problem 2 of appendix C.1).
"""
