import sys, time, numpy as np
from scipy import stats
from netsim import scenario as S
from netsim.sim import run_trial
from netsim.streams import trial_sequence
def doc(proto, mode, n=4, dist="uniform", **kw):
    p = {"name": proto, "simulation": mode, "agent_distribution": dist, **kw}
    return S.from_dict({"name": "t", "bandit": {"kind": "bernoulli", "arms": 3, "means": [0.9, 0.6, 0.2]},
        "network": {"topology": "ring", "agents": n, "servers": 1, "delay": {"model": "constant", "value": 0.0}},
        "protocol": p, "run": {"horizon": 1e9, "seed": 1, "checkpoints": 1}})
def sample(sc, seeds, key="sample_complexity"):
    return np.array([run_trial(sc, trial_sequence(7, i), i).row[key] for i in seeds])
proto = sys.argv[1]; kw = eval(sys.argv[2]) if len(sys.argv) > 2 else {}
t=time.process_time(); a = sample(doc(proto, "events", **kw), range(200)); t1=time.process_time()-t
t=time.process_time(); b = sample(doc(proto, "rounds", **kw), range(1000, 1200)); t2=time.process_time()-t
print(proto, a.mean(), b.mean(), stats.ks_2samp(a, b).pvalue, t1, t2)
