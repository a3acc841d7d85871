"""One gsjax run over many processes, on JAX's multi-controller runtime (``jax.distributed``).

Every process runs the same program (``gsjax run ... --coordinator HOST:PORT --num-processes N
--process-id I``, or under a cluster manager JAX detects, such as SLURM). After :func:`start`,
:mod:`gsjax.runner` shards the seed axis over one global mesh of every process's devices;
per-seed keys come from global seed ids, so N processes give a single-process run's numbers.

Process 0 alone writes the run folder (:func:`is_writer`): its checkpoints hold the whole carry
in global seed order (any process count resumes them), and a restart's checkpoint is sent to
the others (:func:`from_writer`). At start-up the processes' config hash, seed range, chunk size
and code version must agree (:func:`agree`).

Faults: a thread in every process (:class:`Watchdog`) bumps a counter in the coordination
service every ``heartbeat / 10`` seconds and watches the others'. A process whose counter stops
for ``heartbeat`` seconds or that posts an error makes every other one print one line naming it
and exit with status :data:`LOST` (4); the same command then resumes the last checkpoint. JAX's
own heartbeat is set longer, as a backstop (and stops the others at once if process 0 dies).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path

import jax
import numpy as np

__all__ = [
    "LOST", "Refused", "Session", "start", "detected_processes", "is_writer", "process_count",
    "host", "place", "code_version", "agree", "from_writer", "meta", "current",
    "flush_before_exit", "HOST_DEVICES_ENV", "use_host_cores",
]

LOST = 4  # exit status of a process stopped because another one was lost or failed
DEFAULT_HEARTBEAT = 60.0  # seconds without a sign of life before a process counts as lost
_PREFIX = "gsjax/"
_current: Session | None = None
_flushes: list = []  # run before a process leaves on a lost peer (:func:`flush_before_exit`)


class Refused(ValueError):
    """A multi-process run refused (different configs or code, bad flags); one line."""


#: Environment variable: JAX host (CPU) devices of a single-process ``gsjax`` command, ``auto``
#: (the default: one per core this process may run on) or a count (``1``: XLA's one device).
HOST_DEVICES_ENV = "GSJAX_HOST_DEVICES"


def use_host_cores() -> int | None:
    """Give JAX's CPU platform one device per core (or :data:`HOST_DEVICES_ENV`'s count), so a
    single-process sweep splits its seeds over the cores (same numbers; 1.3-1.9x faster on 2
    cores, ``benchmarks/RESULTS.md``). Returns the count set, or ``None`` when ``XLA_FLAGS`` or
    ``jax_num_cpu_devices`` fixes it or JAX's backends have started. Call before anything
    touches JAX's devices, and not in a multi-process run."""
    want = os.environ.get(HOST_DEVICES_ENV, "auto").strip()
    if want != "auto" and not (want.isdigit() and int(want) >= 1):
        raise Refused(f"{HOST_DEVICES_ENV}: expected 'auto' or a count >= 1, got {want!r}")
    if want == "auto":  # the cores this process may run on (all of them where that is unknown)
        cores = getattr(os, "sched_getaffinity", None)
        count = len(cores(0)) if cores else (os.cpu_count() or 1)
    else:
        count = int(want)
    if (count <= 1 or "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "")
            or jax.config.jax_num_cpu_devices != -1):
        return None
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:  # JAX has started its backends: the count is fixed for this process
        return None
    return count


def process_count() -> int:
    return jax.process_count() if _current is not None else 1


def is_writer() -> bool:
    """Whether this process writes the run folder: process 0, or the only process."""
    return _current is None or _current.process_id == 0


def current() -> Session | None:
    """The session :func:`start` opened in this process, or None (a single-process run)."""
    return _current


def meta() -> dict:
    """What a run's ``summary.json`` records about the processes: ``{"processes": N}`` when
    more than one ran it, else nothing (a single-process summary is unchanged)."""
    return {} if _current is None else {"processes": _current.num_processes}


#: The cluster managers detected (by ``jax.distributed``): those read from environment variables
#: alone, so that a plain ``gsjax run`` never queries a service.
DETECTED = ("slurm", "ompi")


def _detected_env():
    """``jax.distributed``'s description of this process's cluster job (:data:`DETECTED`)."""
    try:
        from jax._src import clusters
    except ImportError:  # a JAX without the detection: flags only
        return None
    for env in clusters.ClusterEnv._cluster_types:
        try:
            if getattr(env, "name", None) in DETECTED and env.is_env_present():
                return env
        except Exception:  # noqa: BLE001 -- an environment that cannot say: not detected
            continue
    return None


def detected_processes() -> int:
    """The process count a cluster manager announces (:data:`DETECTED`: SLURM, Open MPI),
    or 1 when none is detected."""
    env = _detected_env()
    try:
        return 1 if env is None else int(env.get_process_count())
    except (KeyError, ValueError, TypeError):
        return 1


def _check_address(address: str) -> None:
    host_, _, port = address.rpartition(":")
    if not host_ or not port.isdigit() or not 0 < int(port) < 65536:
        raise Refused(f"--coordinator: expected HOST:PORT (e.g. 10.0.0.1:7777), got {address!r}")


class Session:
    """This process's part in a multi-process run (see the module docstring)."""

    def __init__(self, process_id: int, num_processes: int, coordinator: str | None,
                 heartbeat: float):
        self.process_id, self.num_processes = process_id, num_processes
        self.coordinator, self.heartbeat = coordinator, heartbeat
        self.client = None
        self.watchdog: Watchdog | None = None
        self.lost_hint = ""  # added to the line printed when another process is lost

    def key(self, *parts) -> str:
        return _PREFIX + "/".join(str(p) for p in parts)

    def finish(self, rc: int, message: str | None = None, everywhere: bool = False) -> int:
        """End this process's part and return ``rc``: on success (or a failure met
        ``everywhere`` alike) wait for every process, then shut JAX's runtime down; on a failure
        of its own tell the others (``message``) and leave at once."""
        if rc == 0 or everywhere:
            self.client.key_value_set(self.key("done", self.process_id), "0")
            for j in range(self.num_processes):
                self.client.blocking_key_value_get(self.key("done", j), 2**31 - 1)
            self.watchdog.stop()
            jax.distributed.shutdown()
            return rc
        self.watchdog.fail(message or f"exit status {rc}")
        _exit(rc)
        return rc  # pragma: no cover


def start(coordinator: str | None = None, num_processes: int | None = None,
          process_id: int | None = None, heartbeat: float = DEFAULT_HEARTBEAT
          ) -> Session | None:
    """Join a multi-process run; None for a run of one process (nothing to join).

    ``coordinator`` (``HOST:PORT`` of process 0), ``num_processes`` and ``process_id``: all
    three, or none to take them from a detected cluster manager. ``heartbeat``: seconds without
    a sign of life after which a process counts as lost. Call before JAX touches its devices.
    """
    global _current
    given = [v is not None for v in (coordinator, num_processes, process_id)]
    if any(given) and not all(given):
        missing = next(f for f, g in zip(("--coordinator", "--num-processes", "--process-id"),
                                         given) if not g)
        raise Refused(f"{missing}: needed with the other multi-process flags (--coordinator, "
                      "--num-processes, --process-id: give all three)")
    if heartbeat <= 0:
        raise Refused(f"--heartbeat-timeout: must be > 0 seconds, got {heartbeat}")
    if not any(given):
        if detected_processes() <= 1:
            return None
        kwargs = {"cluster_detection_method": _detected_env().name}
    else:
        _check_address(coordinator)
        if num_processes < 1:
            raise Refused(f"--num-processes: must be >= 1, got {num_processes}")
        if not 0 <= process_id < num_processes:
            raise Refused(f"--process-id: must be in 0 .. {num_processes - 1}, got {process_id}")
        if num_processes == 1:
            return None
        kwargs = {"coordinator_address": coordinator, "num_processes": num_processes,
                  "process_id": process_id}
    if _current is not None:
        raise RuntimeError("gsjax.distributed.start: already started in this process")
    # JAX's heartbeat (an abort with a multi-line log) must come after our Watchdog's
    jax.distributed.initialize(**kwargs, heartbeat_timeout_seconds=int(3 * heartbeat + 30))
    from jax._src import distributed as _jd

    session = Session(jax.process_index(), jax.process_count(),
                      _jd.global_state.coordinator_address, heartbeat)
    session.client = _jd.global_state.client
    session.watchdog = Watchdog(session)
    session.watchdog.start()
    _current = session
    return session


@contextlib.contextmanager
def flush_before_exit(flush):
    """While the block runs, ``flush()`` is called before this process leaves because another
    was lost or failed (:data:`LOST`, an ``os._exit``), so a checkpoint write in flight lands."""
    _flushes.append(flush)
    try:
        yield
    finally:
        _flushes.remove(flush)


def _exit(rc: int) -> None:
    streams = (sys.stdout, sys.stderr)
    for flush in [*_flushes, *(getattr(stream, "flush", None) for stream in streams)]:
        with contextlib.suppress(Exception):  # leaving anyway; the previous checkpoint stays
            flush()
    os._exit(rc)


def _silent(seen: dict, j: int, beat, now: float) -> float:
    """Seconds since process ``j``'s beat (now ``beat``) last changed; ``seen`` remembers."""
    if j not in seen or seen[j][0] != beat:
        seen[j] = (beat, now)
    return now - seen[j][1]


class Watchdog(threading.Thread):
    """Signs of life between the processes (see the module docstring)."""

    def __init__(self, session: Session):
        super().__init__(name="gsjax-watchdog", daemon=True)
        self.s = session
        self.interval = min(2.0, max(0.1, session.heartbeat / 10))
        self._stop_flag = threading.Event()
        self._failing = threading.Event()

    def stop(self) -> None:
        self._stop_flag.set()
        self.join(timeout=5 * self.interval)

    def fail(self, message: str) -> None:
        """This process failed: say so to the others; process 0 (the coordination service)
        waits until they are gone, so that they stop on our line rather than on JAX's abort."""
        self._failing.set()
        s = self.s
        try:
            s.client.key_value_set(s.key("failed", s.process_id), " ".join(message.split()))
        except Exception:  # noqa: BLE001 -- the service is gone: the others see that
            return
        if s.process_id == 0:
            self._wait_others_gone()

    def _wait_others_gone(self) -> None:
        s = self.s
        end = time.monotonic() + s.heartbeat + 2 * self.interval
        seen: dict = {}
        while time.monotonic() < end:
            try:
                beats = dict(s.client.key_value_dir_get(s.key("beat") + "/"))
                gone = dict(s.client.key_value_dir_get(s.key("gone") + "/"))
            except Exception:  # noqa: BLE001
                return
            now = time.monotonic()
            silent = [_silent(seen, j, beats.get(s.key("beat", j)), now)
                      for j in range(1, s.num_processes) if s.key("gone", j) not in gone]
            if not any(x < 3 * self.interval for x in silent):
                return
            time.sleep(self.interval)

    def _lost(self, line: str) -> None:
        """Another process is lost or failed: one line, then leave (status LOST)."""
        if self._failing.is_set() or self._stop_flag.is_set():
            return
        s = self.s
        print(f"error: {line}; stopping process {s.process_id}{s.lost_hint}", file=sys.stderr,
              flush=True)
        with contextlib.suppress(Exception):
            s.client.key_value_set(s.key("gone", s.process_id), "1")
        if s.process_id == 0:
            self._failing.set()
            self._wait_others_gone()
        _exit(LOST)

    def run(self) -> None:  # noqa: C901 -- one loop, its cases in order
        s = self.s
        seen: dict[int, tuple] = {}
        last_ok = time.monotonic()
        beat = 0
        while not self._stop_flag.wait(self.interval):
            now = time.monotonic()
            try:
                beat += 1
                s.client.key_value_set(s.key("beat", s.process_id), str(beat),
                                       allow_overwrite=True)
                beats = dict(s.client.key_value_dir_get(s.key("beat") + "/"))
                failed = dict(s.client.key_value_dir_get(s.key("failed") + "/"))
                last_ok = now
            except Exception as e:  # noqa: BLE001 -- the coordination service is unreachable
                if self._stop_flag.is_set():
                    return
                if now - last_ok > s.heartbeat:
                    why = " ".join(str(e).split())[:160]
                    self._lost(f"process 0 (the coordinator, {s.coordinator}) stopped "
                               f"answering for {s.heartbeat:g} s ({why})")
                continue
            for j in range(s.num_processes):
                if j == s.process_id:
                    continue
                msg = failed.get(s.key("failed", j))
                if msg is not None:
                    self._lost(f"process {j} of {s.num_processes} stopped with an error: {msg}")
                    return
                if _silent(seen, j, beats.get(s.key("beat", j)), now) > s.heartbeat:
                    self._lost(f"process {j} of {s.num_processes} stopped responding (no "
                               f"heartbeat for {s.heartbeat:g} s)")
                    return


def host(tree):
    """Host (NumPy) copies of a pytree of arrays; an array spread over several processes is
    gathered onto every process first (a collective: every process calls this alike)."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    def one(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            if x.is_fully_replicated:
                return np.asarray(x.addressable_data(0))
            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return jax.device_get(x)

    return jax.tree_util.tree_map(one, tree)


def place(tree, sharding):
    """``jax.device_put(tree, sharding)`` where ``sharding`` (one, or a tree of them) may span
    several processes, each holding the whole value and putting its own shards."""
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)
    if isinstance(sharding, jax.sharding.Sharding):
        sharding = jax.tree_util.tree_map(lambda _: sharding, tree)

    def one(x, s):
        if jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key):
            data = one(jax.random.key_data(x), s)
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
        value = np.asarray(x)
        return jax.make_array_from_callback(value.shape, s, lambda idx: value[idx])

    return jax.tree_util.tree_map(one, tree, sharding)


def code_version() -> str:
    """The code a process runs: its JAX, jaxlib and a digest of gsjax's own source files."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    import jaxlib

    return f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, gsjax {digest.hexdigest()[:16]}"


_NAMES = {"config_hash": "config hash", "seed_start": "first seed", "chunk": "--chunk",
          "buffer": "--buffer", "code": "code"}


def agree(session: Session | None, identity: dict, error: str | None = None,
          timeout: float = 600.0) -> None:
    """Exchange every process's ``identity`` (JSON values: config hash, seed range, chunk,
    buffer, code version) and ``error`` (its refusal, one line, or None); raise :class:`Refused`
    on every process alike when one refused or differs from process 0. No session: nothing."""
    if session is None:
        return
    c = session.client
    c.key_value_set(session.key("start", session.process_id),
                    json.dumps({"identity": identity, "error": error}, sort_keys=True))
    entries = [json.loads(c.blocking_key_value_get(session.key("start", j), int(timeout * 1000)))
               for j in range(session.num_processes)]
    errors = [(j, e["error"]) for j, e in enumerate(entries) if e["error"]]
    if errors:
        if len({e for _, e in errors}) == 1 and len(errors) == session.num_processes:
            raise Refused(errors[0][1])  # every process refused alike: the error itself
        j, e = errors[0]
        raise Refused(f"process {j} of {session.num_processes} refused the run: {e}")
    first = entries[0]["identity"]
    for j, entry in enumerate(entries[1:], 1):
        for k, v in first.items():
            if entry["identity"].get(k) != v:
                short = (lambda x: x[:12] if k == "config_hash" and isinstance(x, str) else x)
                raise Refused(
                    f"process {j} runs a different {_NAMES.get(k, k)} from process 0 "
                    f"({short(entry['identity'].get(k))!r}, process 0: {short(v)!r}): start "
                    "every process with the same config, options and gsjax installation")


def from_writer(session: Session | None, name: str, read):
    """``read()`` on process 0 (bytes, or None), its result (or its :class:`Refused`/
    ``ValueError`` line) sent to every process; without a session, ``read()``."""
    if session is None:
        return read()
    c, key = session.client, session.key("data", name)
    if session.process_id == 0:
        try:
            data, err = read(), None
        except ValueError as e:
            data, err = None, str(e)
        head = {"error": err, "none": data is None}
        c.key_value_set_bytes(key + "/body", b"" if data is None else data)
        c.key_value_set(key + "/head", json.dumps(head))
    else:
        head = json.loads(c.blocking_key_value_get(key + "/head", 2**31 - 1))
        data = None if head["none"] else c.blocking_key_value_get_bytes(key + "/body",
                                                                        2**31 - 1)
    if head["error"]:
        raise Refused(head["error"])
    return data
