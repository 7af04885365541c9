import cProfile, pstats, sys
from netsim import scenario as S
from netsim.sim import run_trial
from netsim.streams import trial_sequence
sc = S.load(sys.argv[1], sys.argv[2:])
run_trial(sc, trial_sequence(1, 5), 5)
pr = cProfile.Profile(); pr.enable()
r = run_trial(sc, trial_sequence(sc.run["seed"], 0), 0)
pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(25)
