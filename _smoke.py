import sys, time
from netsim import scenario as S
from netsim.sim import run_trial
from netsim.streams import trial_sequence
name = sys.argv[1]; sets = sys.argv[2:]
sc = S.load(name, sets)
for i in range(int(sc.run["trials"])):
    t=time.process_time(); r = run_trial(sc, trial_sequence(sc.run["seed"], i), i)
    keys=["sample_complexity","identified_arm","correct","votes_sent","votes_corrupted","agents_done","deadlock","end_time"]
    print({k:r.row.get(k) for k in keys}, round(time.process_time()-t,3), r.info["stop_reason"])
