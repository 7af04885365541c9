"""Agent-steps per CPU second of the whole ``netsim run`` process on the two peer settings (issue 16).

Two public research codes were measured on their own settings (issue 16, CPU seconds of the
whole process on this machine kind): ``mp_ucb.py`` on Byzantine-proof multi-agent UCB
(M = 200, G(200, 0.1), K = 5, gamma = 1, T = 200): 381 agent-steps per CPU s, and the
``bandits-network`` flooding code (N = 100, G(100, 3/100), K = 50, gamma = 4, T = 300): 587.
The same settings are bundled as ``peer-mpucb-byzantine`` and ``peer-flooding-ucb``; this script
runs each as a user would (``netsim run NAME``, one trial, results written, no figures) and
reports agents x horizon / CPU seconds of the child process. Targets: 30x the peers (11.4 k and
17.6 k); goal 100x (38 k and 59 k).

Run: ``python -m benchmarks.peers`` (prints JSON)
"""

from __future__ import annotations

import json
import statistics

from benchmarks import process

#: scenario -> (peer code, its agent-steps per CPU s, as measured in issue 16)
PEERS = {
    "peer-mpucb-byzantine": ("mp_ucb.py", 381.0),
    "peer-flooding-ucb": ("bandits-network flooding", 587.0),
}
TARGET, GOAL = 30.0, 100.0


def measure(repeats: int = 3, overrides: list[str] = ()) -> dict:
    out = {}
    for scenario, (peer, peer_rate) in PEERS.items():
        runs = [process.run(scenario, list(overrides)) for _ in range(repeats)]
        steps = runs[0]["agents"] * runs[0]["horizon"]
        cpu = statistics.median(r["cpu_s"] for r in runs)
        rate = steps / cpu
        out[scenario] = {"peer": peer, "peer_rate": peer_rate, "agent_steps": steps,
                         "cpu_s": [r["cpu_s"] for r in runs], "maxrss_mib": max(r["maxrss_mib"] for r in runs),
                         "rate": round(rate),
                         "times_peer": round(rate / peer_rate, 1), "target_rate": TARGET * peer_rate,
                         "goal_rate": GOAL * peer_rate}
    return out


if __name__ == "__main__":
    print(json.dumps(measure(), indent=2))
