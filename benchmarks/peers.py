"""Agent-steps per CPU second of the whole ``netsim run`` process on the two peer settings (issue 16).

Two public research codes have bundled settings: ``mp_ucb.py`` on Byzantine-proof multi-agent UCB
(M = 200, G(200, 0.1), K = 5, gamma = 1, T = 200: ``peer-mpucb-byzantine``) and the
``bandits-network`` flooding code (N = 100, G(100, 3/100), K = 50, gamma = 4, T = 300:
``peer-flooding-ucb``). This script runs each setting as a user would (``netsim run NAME``, one
trial, tables written) in a child process and reports agents x horizon / CPU seconds of that
process.

A ratio to a peer is given only when the peer code ran in the same run, on the same machine and
load: pass its command line with ``--peer SCENARIO=COMMAND`` (or ``peer_commands``); its CPU
seconds are those of its own child process, measured the same way. The peers' codes are not
shipped with netsim. Without a command, the figure measured for issue 16 (before 2026-11-23, on
this machine kind, another load) is shown as such, labelled with its source, and divides nothing.

Run: ``python -m benchmarks.peers [--peer peer-mpucb-byzantine='python mp_ucb.py ...']`` (JSON)
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics

from benchmarks import process

#: scenario -> (peer code, its agent-steps per CPU s as measured for issue 16: a figure from elsewhere)
PEERS = {
    "peer-mpucb-byzantine": ("mp_ucb.py", 381.0),
    "peer-flooding-ucb": ("bandits-network flooding", 587.0),
}
ELSEWHERE = "measured for issue 16 (before 2026-11-23) on this machine kind, not in this run"
TARGET, GOAL = 30.0, 100.0


def measure(repeats: int = 3, overrides: list[str] = (), peer_commands: dict[str, list[str]] | None = None) -> dict:
    """netsim's rate on each setting; the peer's rate and the ratio when its command ran in this run too."""
    out = {}
    for scenario, (peer, reported) in PEERS.items():
        runs = [process.run(scenario, list(overrides)) for _ in range(repeats)]
        steps = runs[0]["agents"] * runs[0]["horizon"]
        cpu = statistics.median(r["cpu_s"] for r in runs)
        rate = steps / cpu
        point = {"peer": peer, "agent_steps": steps, "cpu_s": [r["cpu_s"] for r in runs],
                 "maxrss_mib": max(r["maxrss_mib"] for r in runs), "rate": round(rate),
                 "peer_reported": {"rate": reported, "source": ELSEWHERE}}
        argv = (peer_commands or {}).get(scenario)
        if argv:
            peer_runs = [process.command(argv) for _ in range(repeats)]
            peer_cpu = statistics.median(r["cpu_s"] for r in peer_runs)
            point["peer_measured"] = {"command": argv, "cpu_s": [r["cpu_s"] for r in peer_runs],
                                      "rate": round(steps / peer_cpu)}
            point["times_peer"] = round(rate / (steps / peer_cpu), 1)
        out[scenario] = point
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", action="append", default=[], metavar="SCENARIO=COMMAND",
                        help="run this peer command on this setting in the same run (repeatable)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    commands = {}
    for item in args.peer:
        scenario, _, command = item.partition("=")
        if scenario not in PEERS or not command:
            parser.error(f"--peer {item!r}; accepted: SCENARIO=COMMAND with SCENARIO one of {', '.join(PEERS)}")
        commands[scenario] = shlex.split(command)
    print(json.dumps(measure(args.repeats, peer_commands=commands), indent=2))


if __name__ == "__main__":
    main()
