"""Identities of sweep units and the append-only store of finished units.

Each (grid point, trial) pair is a *unit*:

- its **seed** is ``SeedSequence(seed, spawn_key=(*point_key(point), trial))`` where
  :func:`point_key` is a stable hash of the point's sorted ``key = value`` pairs; it depends on
  neither the executor, the number of jobs, the order of the grid options nor the order in which
  units finish;
- its **identity** (:func:`unit_id`) is a hash of the fully resolved scenario of its point
  (``run.trials`` aside), the point and the trial; a unit stored under one command is reused by
  any later command that asks for the same unit (more trials, a longer grid), never by one that
  changed the scenario, an override or the seed.

Finished units are kept in ``OUT/units/`` (:class:`UnitStore`), one small file per unit written
to a temporary name, flushed to disk and renamed into place, so that a unit is either stored
completely or not at all, whatever interrupts the sweep (Ctrl-C, ``kill -9``, a lost worker).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from netsim.engine import files
from netsim.engine import scenario as S
from netsim.engine.errors import InputError
from netsim.engine.sim import TrialResult

STORE_FORMAT = 1


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True, default=plain_default)


def plain_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"not JSON data: {value!r}")


def point_key(assignments: Mapping[str, Any]) -> tuple[int, int]:
    """Spawn-key prefix of a grid point: two 32-bit words of SHA-256 of its sorted pairs."""
    digest = hashlib.sha256(canonical(sorted(assignments.items())).encode()).digest()
    return int.from_bytes(digest[:4], "big"), int.from_bytes(digest[4:8], "big")


def unit_id(scenario: S.Scenario, assignments: Mapping[str, Any], trial: int) -> str:
    """Identity of a stored unit: hash of the resolved scenario (``run.trials`` aside), point and trial."""
    return unit_ids(scenario, assignments, [trial])[0]


def unit_ids(scenario: S.Scenario, assignments: Mapping[str, Any], trials: Sequence[int]) -> list[str]:
    resolved = scenario.as_dict()
    resolved["run"] = {k: v for k, v in resolved["run"].items() if k != "trials"}
    prefix = canonical({"scenario": resolved, "point": sorted(assignments.items())})[:-1]
    return [hashlib.sha256(f'{prefix},"trial":{int(t)}}}'.encode()).hexdigest()[:32] for t in trials]


def encode_trial(result: TrialResult) -> dict[str, Any]:
    """A :class:`TrialResult` as JSON data (arrays as dtype and values); :func:`decode_result` reads it back."""
    def columns(table: Mapping[str, np.ndarray]) -> dict[str, Any]:
        return {k: {"dtype": str(np.asarray(v).dtype), "values": np.asarray(v).tolist()} for k, v in table.items()}

    return {"row": result.row, "agents": columns(result.agents), "timeseries": columns(result.timeseries),
            "wall_s": result.wall_s, "info": result.info}


def decode_result(record: Mapping[str, Any]) -> TrialResult:
    """The :class:`TrialResult` stored in ``record`` (arrays with their original dtypes)."""
    def columns(table: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return {k: np.asarray(v["values"], dtype=v["dtype"]) for k, v in table.items()}

    return TrialResult(dict(record["row"]), columns(record["agents"]), columns(record["timeseries"]),
                       float(record["wall_s"]), dict(record["info"]))


class UnitStore:
    """Append-only store of finished units: ``DIR/<unit id>.json``, one file per unit.

    A file holds two lines: the unit's record as JSON, then the SHA-256 of that line. It is
    written to a hidden temporary name in the same folder, flushed and fsync'ed, then renamed
    into place (atomic on POSIX), so a reader sees a whole unit or none; a file whose checksum
    does not match (a damaged disk, a hand edit) counts as missing and is redone. Leftover
    temporary files of a killed sweep are removed by :meth:`clean`.
    """

    SUFFIX = ".json"

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def path(self, uid: str) -> Path:
        return self.folder / f"{uid}{self.SUFFIX}"

    def clean(self) -> int:
        """Remove temporary files left by an interrupted writer (call while holding the lock)."""
        return files.remove_staged(self.folder.parent, self.folder.name)

    def put(self, uid: str, record: Mapping[str, Any]) -> None:
        """Store ``record`` as unit ``uid`` (:func:`netsim.engine.files.write`: staged under an unpredictable name,
        fsync'ed, renamed into place; never through a link)."""
        line = canonical(record)
        data = f"{line}\n{hashlib.sha256(line.encode()).hexdigest()}\n".encode()
        files.write(self.folder.parent, f"{self.folder.name}/{uid}{self.SUFFIX}", data, record=False, fsync=True)

    def get(self, uid: str) -> dict[str, Any] | None:
        """The record of ``uid``, or ``None`` when it is absent or damaged."""
        try:  # a unit file that is not a readable regular file (a pipe, a link loop) counts as missing
            text = files.read_text(self.path(uid), what="unit file", limit=files.MAX_DATA)
        except InputError:
            return None
        lines = text.split("\n")
        if len(lines) != 3 or lines[2] != "" or hashlib.sha256(lines[0].encode()).hexdigest() != lines[1]:
            return None
        try:
            record = json.loads(lines[0])
        except json.JSONDecodeError:
            return None
        return record if record.get("unit") == uid and record.get("format") == STORE_FORMAT else None

    def ids(self) -> set[str]:
        """Ids of every stored file (not checked; use :meth:`get`)."""
        if not self.folder.is_dir():
            return set()
        return {p.name[: -len(self.SUFFIX)] for p in self.folder.glob(f"*{self.SUFFIX}") if not p.name.startswith(".")}


_HELD: set[str] = set()  # folders this process holds locked


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``out`` so that two sweeps never write one folder at once."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    # A POSIX record lock (lockf), not flock: it belongs to this process alone, so forked pool workers
    # do not inherit it and it goes away with the process however it dies (kill -9 included).
    # O_NOFOLLOW: a symlink planted at the lock's name is refused, never followed.
    try:
        fd = os.open(out / ".sweep.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        raise InputError(f"--out {str(out)!r}: cannot open its .sweep.lock ({exc.strerror}); accepted: a folder "
                         "whose .sweep.lock is a plain file") from None
    key = os.path.realpath(out)
    try:
        try:
            if key in _HELD:  # record locks do not exclude the process itself: a second sweep of this one
                raise OSError
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InputError(f"--out {str(out)!r}: another sweep is writing to this folder; accepted: wait "
                             "for it to finish, or use another --out") from None
        _HELD.add(key)
        try:
            yield
        finally:
            _HELD.discard(key)
            fcntl.lockf(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
