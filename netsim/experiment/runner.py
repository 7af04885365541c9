"""Run units of work (trials) on an executor and collect their results.

Trial ``i`` of a run seeded with ``seed`` always uses ``SeedSequence(seed, spawn_key=(i,))``,
and trial ``i`` of sweep point ``p`` uses ``SeedSequence(seed, spawn_key=(*p, i))`` (see
:func:`netsim.engine.streams.trial_sequence` and :func:`netsim.experiment.sweeps.point_key`). A unit carries
everything it needs, so results do not depend on the executor, the number of jobs or the
order in which units finish: callers sort them before writing.

Executors share one small interface (:class:`Executor`): ``results(fn, items)`` yields
``(index, fn(items[index]))`` pairs in completion order. Three implementations:

- :class:`SerialExecutor`: in this process, in order;
- :class:`ProcessExecutor`: a local pool of ``jobs`` worker processes;
- :class:`DaskExecutor`: a ``dask.distributed`` cluster, either an existing one
  (``scheduler="tcp://HOST:PORT"``) or a ``LocalCluster`` of ``jobs`` single-threaded workers.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
import signal
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Self

from netsim.engine import registry
from netsim.engine.errors import InputError
from netsim.engine.scenario import Scenario
from netsim.engine.sim import TrialResult, lockstep_key, lockstep_scope, run_trial, run_trials
from netsim.engine.streams import trial_sequence

EXECUTORS = ("serial", "process", "dask")
DEFAULT_SCHEDULER_TIMEOUT = 10.0


@dataclass(frozen=True)
class Unit:
    """One trial of one scenario: everything a worker needs (picklable).

    ``point`` is the spawn-key prefix of a sweep point (empty for a plain run). ``plugins`` are
    the plug-in files loaded where the unit was made (``--plugin``, ``NETSIM_PLUGINS``): a worker
    process imports them before it runs the unit, whatever its start method or machine.
    """

    scenario: Scenario
    trial: int
    point: tuple[int, ...] = ()
    plugins: tuple[str, ...] = field(default_factory=registry.plugin_files)

    def seed_sequence(self):
        return trial_sequence(self.scenario.run["seed"], self.trial, self.point)

    def run(self) -> TrialResult:
        registry.load_plugin_files(self.plugins, origin="plug-in file")
        return run_trial(self.scenario, self.seed_sequence(), self.trial)


def _run_unit(unit: Unit) -> TrialResult:
    return unit.run()


#: most units run in lockstep in one call (their arrays grow with the group; beyond a few dozen trials the
#: per-call overhead a group shares is already small)
LOCKSTEP_MAX = 32


def lockstep_groups(units: Sequence[Unit], jobs: int = 1) -> list[list[int]]:
    """The indices of ``units`` cut into groups that run as one call (:func:`netsim.engine.sim.run_trials`).

    Units whose scenarios share a non-None :func:`netsim.engine.sim.lockstep_key` (and plug-in files) go
    together, in groups of at most ``LOCKSTEP_MAX`` and small enough that there are at least ``jobs``
    groups when there are as many such units; every other unit is a group of its own. Within a key, the
    units of one seed sequence (point and trial: the variants of a study) stay in one group unless they
    are more than a group holds (a protocol may make their common draws once,
    ``netsim.engine.streams.SharedDraws``); a protocol whose ``lockstep_scope`` is ``"seed"`` gets a group
    per seed sequence and key, never one holding two seed sequences. Results do not depend on the grouping
    (a lockstep run gives each trial its own results).
    """
    by_key: dict[Any, list[int]] = {}
    groups: list[list[int]] = []
    for index, unit in enumerate(units):
        key = lockstep_key(unit.scenario)
        if key is None:
            groups.append([index])
        else:
            by_key.setdefault((key, unit.plugins), []).append(index)
    together = sum(len(members) for members in by_key.values())
    size = max(1, min(LOCKSTEP_MAX, math.ceil(together / max(1, jobs))))
    for members in by_key.values():
        target = math.ceil(len(members) / math.ceil(len(members) / size))  # even groups of at most size
        alone = lockstep_scope(units[members[0]].scenario) == "seed"  # one seed sequence a group
        group: list[int] = []
        seed_sets = [list(same) for _, same in itertools.groupby(
            sorted(members, key=lambda i: (units[i].point, units[i].trial, i)),
            key=lambda i: (units[i].point, units[i].trial))]
        for same in seed_sets:
            for start in range(0, len(same), target):  # one seed sequence, cut only if too many
                part = same[start:start + target]
                if group and (alone or len(group) + len(part) > target):
                    groups.append(group)
                    group = []
                group += part
        groups.append(group)
    return sorted(groups)


def _run_units(units: tuple[Unit, ...]) -> list[TrialResult]:
    """Run a group of :func:`lockstep_groups` as one call; a progress hook counts it as ``len(units)`` trials."""
    from netsim.engine import sim as simulation

    if len(units) == 1:
        return [units[0].run()]
    registry.load_plugin_files(units[0].plugins, origin="plug-in file")
    hook = simulation.progress_hook
    if hook is not None:
        simulation.progress_hook = lambda fraction: hook(fraction * len(units))
    try:
        return run_trials([(unit.scenario, unit.seed_sequence(), unit.trial) for unit in units])
    finally:
        simulation.progress_hook = hook


def with_run_options(scenario: Scenario, *, trials: int | None = None, seed: int | None = None) -> Scenario:
    """``scenario`` with ``run.trials`` / ``run.seed`` replaced (command-line flags win over the file)."""
    changes = {}
    if trials is not None:
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
            raise InputError(f"--trials {trials}: accepted: an integer >= 1")
        changes["run.trials"] = trials
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InputError(f"--seed {seed}: accepted: an integer >= 0")
        changes["run.seed"] = seed
    return scenario.with_(**changes) if changes else scenario


# ---------------------------------------------------------------------- executors
class Executor(ABC):
    """Runs ``fn`` over items somewhere; a context manager that releases its workers on exit."""

    name = "?"

    @abstractmethod
    def results(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        """Yield ``(index, fn(items[index]))`` as each item finishes (any order).

        Closing the generator early (an error, Ctrl-C) cancels the items not yet started.
        """

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release workers and connections (idempotent)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SerialExecutor(Executor):
    """Every item in this process, in order."""

    name = "serial"

    def results(self, fn, items):
        for index, item in enumerate(items):
            yield index, fn(item)


class ProcessExecutor(Executor):
    """A pool of ``jobs`` local worker processes (created per call, sized to the work)."""

    name = "process"

    def __init__(self, jobs: int = 1):
        self.jobs = jobs

    def results(self, fn, items):
        if self.jobs == 1 or len(items) <= 1:
            yield from SerialExecutor().results(fn, items)
            return
        import multiprocessing

        from netsim.engine import sim as simulation

        # Each worker writes the fraction of its trial's horizon done into its unit's slot; the parent
        # reads the slots of the running units while it waits, so its progress bar moves inside trials.
        shares = multiprocessing.RawArray("d", len(items))
        pool = ProcessPoolExecutor(max_workers=min(self.jobs, len(items)), initializer=_worker_setup,
                                   initargs=(os.getpid(), shares))
        try:
            futures = {pool.submit(_with_progress, fn, index, item): index for index, item in enumerate(items)}
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, timeout=PROGRESS_POLL, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield futures[future], future.result()
                hook = simulation.progress_hook
                if hook is not None and pending:
                    hook(sum(shares[futures[f]] for f in pending))
        except BaseException:
            # Ctrl-C, an error, or the consumer stopped early: drop the queue, stop the workers now.
            processes = list(getattr(pool, "_processes", {}).values())
            pool.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                if process.is_alive():
                    process.terminate()
            for process in processes:
                process.join(timeout=5)
            raise
        pool.shutdown(wait=True)


#: seconds between two looks of the parent at its workers' progress
PROGRESS_POLL = 0.25
_SHARES = None  # a worker's view of the parent's progress slots (set by _worker_setup)


def _with_progress(fn, index: int, item):
    """Run ``fn(item)`` in a worker, publishing its trial's progress in slot ``index``."""
    from netsim.engine import sim as simulation

    shares = _SHARES
    if shares is None:
        return fn(item)
    previous = simulation.progress_hook
    simulation.progress_hook = lambda fraction: shares.__setitem__(index, fraction)
    try:
        return fn(item)
    finally:
        simulation.progress_hook = previous


def _worker_setup(parent: int | None = None, shares=None) -> None:
    """Pool workers leave Ctrl-C (SIGINT to the whole process group) to the parent, which stops them,
    and die with the parent however it dies (Linux PR_SET_PDEATHSIG; ``kill -9`` of a sweep must not
    leave idle workers behind)."""
    global _SHARES
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _SHARES = shares
    if parent is None or not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    if os.getppid() != parent:  # the parent died before the call above: nobody would kill us
        os._exit(1)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _dask():
    try:
        import distributed
    except ImportError:
        raise InputError("--executor dask needs dask.distributed; accepted: install it with "
                         "pip install 'dask[distributed]' (netsim's 'dask' extra)") from None
    return distributed


class DaskExecutor(Executor):
    """A ``dask.distributed`` cluster.

    With ``scheduler`` (``tcp://HOST:PORT``) it connects to a running cluster, waiting at most
    ``timeout`` seconds; an unreachable scheduler is an :class:`InputError`. Without it, it
    starts a ``LocalCluster`` of ``jobs`` worker processes with one thread each and stops it on
    :meth:`close`. Workers must be able to import ``netsim`` and the protocol packages (install
    netsim on every worker, or start workers from a checkout's root).
    """

    name = "dask"

    def __init__(self, scheduler: str | None = None, jobs: int = 1, *, timeout: float = DEFAULT_SCHEDULER_TIMEOUT):
        distributed = _dask()
        self.scheduler = scheduler
        self.cluster = None
        if scheduler is None:
            # Worker processes inherit an ignored SIGINT, so Ctrl-C reaches only this process,
            # which then closes the cluster (instead of every worker printing a traceback).
            # Loopback only, no dashboard: nothing of this throw-away cluster listens beyond this machine.
            with _sigint_ignored():
                self.cluster = distributed.LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                                        host="127.0.0.1", dashboard_address=None,
                                                        silence_logs=logging.ERROR)
            self.client = distributed.Client(self.cluster, deserializers=WIRE_DESERIALIZERS)
            self.timeout = timeout
            return
        self.timeout = timeout
        try:
            self.client = distributed.Client(scheduler, timeout=timeout, deserializers=WIRE_DESERIALIZERS)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:  # TypeError: tls:// without a TLS setup
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(f"--scheduler {scheduler}: cannot reach a dask scheduler within {timeout:g} s "
                             f"({detail}); accepted: the address of a running scheduler, e.g. "
                             "tcp://HOST:8786, or for tls:// the certificates of docs/cluster.md, Security") from None
        try:
            self._check_cluster(timeout)
        except BaseException:
            self.close()
            raise

    def _check_cluster(self, timeout: float) -> None:
        """Fail early, in one line, unless the scheduler and every worker run this very netsim.

        The scheduler unpickles the tasks and the workers run them: both must import the same
        netsim and protocol code (compared by a hash of their source) for results to be those
        of a local run.
        """
        where = f"--scheduler {self.scheduler}"
        accepted = ("accepted: a scheduler and workers that import this netsim (install the same netsim, with "
                    "its 'dask' extra, on every machine of the cluster)")
        local = code_fingerprint()
        try:
            remote = {"scheduler": self.client.run_on_scheduler(code_fingerprint)}
        except Exception as exc:  # noqa: BLE001 (any failure to run our code there)
            raise InputError(f"{where}: the scheduler cannot run netsim ({_first_line(exc)}); {accepted}") from None
        try:
            self.client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            raise InputError(f"{where}: no dask worker joined within {timeout:g} s; accepted: a scheduler with "
                             "workers (start them with: dask worker ADDR)") from None
        # Workers also import the plug-in files (the scheduler never does): they must find the same files.
        plugins = registry.plugin_files()
        try:
            workers = self.client.run(code_fingerprint, plugins)
        except Exception as exc:  # noqa: BLE001
            raise InputError(f"{where}: a worker cannot run netsim ({_first_line(exc)}); {accepted}") from None
        expected = {"scheduler": local} | dict.fromkeys(workers, code_fingerprint(plugins))
        for name, found in (remote | workers).items():
            if found != expected[name]:
                files = f" and plug-in files {', '.join(plugins)}" if plugins and name != "scheduler" else ""
                raise InputError(f"{where}: {name} runs different code ({_difference(found, expected[name])}); "
                                 f"accepted: the same netsim{files} and dependency versions on every machine")

    def results(self, fn, items):
        distributed = _dask()
        items = list(items)
        # Every result comes back with the fingerprint of the code and dependencies of the process that
        # computed it, and is refused unless it is this process's: a worker that joined after the check
        # of _check_cluster (or whose files changed since) cannot slip a result in.
        plugins = registry.plugin_files()
        expected = code_fingerprint(plugins)
        where = f"--scheduler {self.scheduler}" if self.scheduler else "--executor dask"
        # pure=False: two identical units (there are none in a sweep) must still both run.
        futures = self.client.map(_fingerprinted_call, [fn] * len(items), items, [plugins] * len(items), pure=False)
        index_of = {future.key: index for index, future in enumerate(futures)}
        try:
            for future in self._completed(distributed.as_completed(futures), where):
                try:
                    found, worker, wire = future.result()
                except Exception as exc:  # noqa: BLE001 - dask's own failure (a unit's travels in the reply)
                    raise InputError(f"{where}: lost the dask cluster or a task failed there ({_first_line(exc)}); "
                                     "accepted: a cluster that stays up (finished units are kept: rerun to "
                                     "continue)") from None
                if found != expected:
                    raise InputError(f"{where}: worker {worker} returned a result computed with different code "
                                     f"({_difference(found, expected)}); its results are refused; accepted: the same "
                                     "netsim, plug-in files and dependency versions on every worker (finished "
                                     "units are kept: rerun to continue)")
                result = _from_wire(wire)
                yield index_of[future.key], result
                future.release()
        finally:
            pending = [f for f in futures if not f.done()]
            if pending:
                with contextlib.suppress(Exception):  # the cluster may be gone already
                    self.client.cancel(pending)

    def _completed(self, finished: Any, where: str) -> Iterator[Any]:
        """The futures of ``finished`` (a dask ``as_completed``) as they complete; an InputError once the
        cluster has had no live worker for ``timeout`` seconds (dask itself would wait for ever)."""
        import time

        alone_since = None
        while not finished.is_empty():
            batch = finished.next_batch(block=False)
            if batch:
                alone_since = None
                yield from batch
                continue
            time.sleep(PROGRESS_POLL)
            if self.client.nthreads():
                alone_since = None
            elif alone_since is None:
                alone_since = time.monotonic()
            elif time.monotonic() - alone_since >= self.timeout:
                raise InputError(f"{where}: no live dask worker for {self.timeout:g} s (--scheduler-timeout); "
                                 "accepted: a cluster with workers (finished units are kept: rerun to continue)")

    def close(self) -> None:
        client, self.client = getattr(self, "client", None), None
        if client is not None:
            client.close()
        cluster, self.cluster = self.cluster, None
        if cluster is not None:
            cluster.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


#: What the client deserializes of a reply: msgpack (plain data), never pickle (see docs/cluster.md, "Trust").
WIRE_DESERIALIZERS = ("msgpack", "error")


def _fingerprinted_call(fn: Callable[[Any], Any], item: Any, plugins: Sequence[str]) -> tuple[dict[str, str], str, str]:
    """On a worker: ``fn(item)`` as JSON text (:func:`_to_wire`), with the fingerprint of this process's code
    and its address; an exception travels as its type name and message."""
    found = code_fingerprint(tuple(plugins))
    try:
        from distributed import get_worker

        worker = get_worker().address
    except (ImportError, ValueError):
        worker = f"pid {os.getpid()}"
    try:
        return found, worker, _to_wire(fn(item))
    except Exception as exc:  # noqa: BLE001 - re-raised on the client from its text (_from_wire)
        return found, worker, _to_wire(exc)


def _to_wire(value: Any) -> str:
    """``value`` (a :class:`TrialResult`, an exception or JSON data) as JSON text: what a dask reply carries, so
    that the client decodes it with ``json``, not ``pickle``."""
    from netsim.experiment.sweeps.store import canonical, encode_trial

    if isinstance(value, TrialResult):
        return canonical({"trial": encode_trial(value)})
    if isinstance(value, list) and value and all(isinstance(v, TrialResult) for v in value):
        return canonical({"trials": [encode_trial(v) for v in value]})
    if isinstance(value, BaseException):
        return canonical({"error": [type(value).__name__, str(value)]})
    return canonical({"value": value})


def _from_wire(text: Any) -> Any:
    """The value :func:`_to_wire` encoded; a unit's exception is raised again (an InputError as such)."""
    import json

    from netsim.experiment.sweeps.store import decode_result

    data = json.loads(text) if isinstance(text, str) else None
    if not isinstance(data, dict):
        raise InputError("a dask worker returned something other than netsim's JSON reply; accepted: workers "
                         "running this netsim")
    if "trial" in data:
        return decode_result(data["trial"])
    if "trials" in data:
        return [decode_result(trial) for trial in data["trials"]]
    if "error" in data:
        kind, message = data["error"]
        raise InputError(message) if kind == "InputError" else RuntimeError(f"on a dask worker: {kind}: {message}")
    return data["value"]


def _difference(found: dict[str, str], expected: dict[str, str]) -> str:
    """What differs between two fingerprints, in a few words."""
    parts = []
    for key in sorted(set(found) | set(expected)):
        theirs, ours = found.get(key, "none"), expected.get(key, "none")
        if theirs != ours:
            short = (lambda v: v[:12]) if key == "code" else (lambda v: v)
            parts.append(f"{key} {short(theirs)} there, {short(ours)} here")
    return "; ".join(parts) or "fingerprints differ"


#: Dependencies whose imported versions are part of the fingerprint (they compute the trials).
FINGERPRINT_DEPENDENCIES = ("numpy", "scipy", "simpy", "networkx")
_FINGERPRINTS: dict[tuple[str, ...], dict[str, str]] = {}


def code_fingerprint(plugin_files: Sequence[str] = ()) -> dict[str, str]:
    """netsim's version, Python's and the dependencies' versions as imported here, and a SHA-256 over
    the source of netsim, the protocol packages and ``plugin_files``.

    Two processes with the same fingerprint run the same simulation code. A plug-in file missing
    on this machine is hashed as missing (so the fingerprints differ). The fingerprint is computed
    once per process (and set of plug-in files), at its first use, which in a worker is its first
    unit, right after it imported the code: a file edited afterwards does not change what the
    process reports, as it does not change what the process runs.
    """
    key = tuple(plugin_files)
    if key not in _FINGERPRINTS:
        _FINGERPRINTS[key] = _compute_fingerprint(key)
    return dict(_FINGERPRINTS[key])


def _compute_fingerprint(plugin_files: Sequence[str]) -> dict[str, str]:
    import hashlib
    import importlib
    from importlib.metadata import entry_points
    from pathlib import Path

    from netsim.engine import __version__
    from netsim.engine.registry import ENTRY_POINT_GROUP

    digest = hashlib.sha256()
    plugins = {ep.value.split(":")[0].split(".")[0] for ep in entry_points(group=ENTRY_POINT_GROUP)}
    packages = ["netsim", *sorted(plugins)]
    for package in packages:
        module = importlib.import_module(package)
        if getattr(module, "__file__", None) is None:  # a namespace package: name only
            digest.update(f"{package}\0".encode())
            continue
        root = Path(module.__file__).parent
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{package}/{path.relative_to(root).as_posix()}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    for name in plugin_files:
        path = Path(name)
        digest.update(f"plugin {name}\0".encode())
        digest.update(path.read_bytes() if path.is_file() else b"\0missing\0")
    versions = {"python": ".".join(map(str, sys.version_info[:3]))}
    for name in FINGERPRINT_DEPENDENCIES:
        versions[name] = str(getattr(importlib.import_module(name), "__version__", "?"))
    return {"netsim": __version__, "code": digest.hexdigest(), **versions}


def make_executor(name: str | None = None, *, jobs: int = 1, scheduler: str | None = None,
                  timeout: float = DEFAULT_SCHEDULER_TIMEOUT) -> Executor:
    """The executor named ``name`` (default: dask with a scheduler, process with jobs > 1, else serial)."""
    if name is None:
        name = "dask" if scheduler else ("process" if jobs > 1 else "serial")
    if name not in EXECUTORS:
        raise InputError(f"--executor {name!r}: accepted: {', '.join(EXECUTORS)}")
    if jobs < 1:
        raise InputError(f"--jobs {jobs}: accepted: an integer >= 1")
    if scheduler is not None and name != "dask":
        raise InputError(f"--scheduler needs --executor dask, got --executor {name}; accepted: "
                         "--executor dask --scheduler tcp://HOST:PORT")
    if not (math.isfinite(timeout) and timeout > 0):
        raise InputError(f"--scheduler-timeout {timeout:g}: accepted: a finite number of seconds > 0")
    if name == "serial":
        return SerialExecutor()
    if name == "process":
        return ProcessExecutor(jobs)
    return DaskExecutor(scheduler, jobs, timeout=timeout)


# ---------------------------------------------------------------------- running units
def iter_results(
    units: Sequence[Unit], *, executor: str | Executor | None = "serial", jobs: int = 1,
    scheduler: str | None = None, progress: bool | None = None, total: int | None = None, initial: int = 0,
) -> Iterator[tuple[int, TrialResult]]:
    """Yield ``(index, result)`` for every unit as it finishes, with a progress bar.

    ``progress=None`` shows the bar on stderr only when it is a terminal; ``total`` and
    ``initial`` let a resumed sweep show its units done earlier.
    """
    if isinstance(executor, Executor):
        owned, pool = False, executor
    else:
        owned, pool = True, make_executor(executor, jobs=jobs, scheduler=scheduler)
    try:
        bar_total = total if total is not None else initial + len(units)
        groups = lockstep_groups(units, getattr(pool, "jobs", jobs))
        done = pool.results(_run_units, [tuple(units[i] for i in group) for group in groups])
        yield from _progress(((groups[g][k], result) for g, results in done for k, result in enumerate(results)),
                             bar_total, progress, initial)
    finally:
        if owned:
            pool.close()


def execute(
    units: Sequence[Unit], *, executor: str | Executor | None = "serial", jobs: int = 1,
    progress: bool | None = None, on_result: Callable[[TrialResult], None] | None = None,
    scheduler: str | None = None,
) -> list[TrialResult]:
    """Run ``units`` and return their results in unit order."""
    results: dict[int, TrialResult] = {}
    for index, result in iter_results(units, executor=executor, jobs=jobs, scheduler=scheduler, progress=progress):
        results[index] = result
        if on_result is not None:
            on_result(result)
    return [results[i] for i in range(len(units))]


def _progress(iterable, total: int, progress: bool | None, initial: int = 0):
    show = sys.stderr.isatty() if progress is None else progress
    if not show or os.environ.get("NETSIM_NO_PROGRESS"):
        return iterable
    return _within_trials(iterable, total, initial)


def _within_trials(iterable, total: int, initial: int):
    """A tqdm bar in trials that also advances inside the trials run in this process.

    Trials run here (serial executor) report the fraction of their horizon done at every
    checkpoint (``netsim.engine.sim.progress_hook``), so a long single trial moves the bar too; the
    process executor passes on the sum of its running trials' fractions (read from shared memory
    every ``PROGRESS_POLL`` seconds); Dask trials count when they finish.
    """
    from tqdm import tqdm

    from netsim.engine import sim as simulation

    bar = tqdm(total=total, initial=initial, unit="trial", file=sys.stderr, dynamic_ncols=True,
               bar_format="{l_bar}{bar}| {n:.2f}/{total_fmt} [{elapsed}<{remaining}]")
    done = [float(initial)]

    def inside(fraction: float) -> None:
        bar.update(done[0] + fraction - bar.n)

    previous, simulation.progress_hook = simulation.progress_hook, inside
    try:
        for item in iterable:
            done[0] += 1
            bar.update(done[0] - bar.n)
            yield item
    finally:
        simulation.progress_hook = previous
        bar.close()


def run_scenario(scenario: Scenario, *, executor: str | Executor | None = "serial", jobs: int = 1,
                 progress: bool | None = None, scheduler: str | None = None) -> list[TrialResult]:
    """All ``run.trials`` trials of ``scenario``."""
    units = [Unit(scenario, trial) for trial in range(scenario.run["trials"])]
    return execute(units, executor=executor, jobs=jobs, progress=progress, scheduler=scheduler)
