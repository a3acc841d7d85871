"""Command line: ``gsjax run``, ``check``, ``plot``, ``merge``, ``list``, ``tuner`` and ``tune``
(bandit and ``kind = "oco"`` configs alike; :mod:`gsjax.__main__` adds ``reproduce``).

User errors (a bad config, a missing file) print one line ``error: FIELD: MESSAGE`` and exit
with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
import time
import traceback
from pathlib import Path

from gsjax import (checkpoint, commands, distributed, experiment, plotting, results, runner,
                   tune, tuner_cli)
from gsjax.config import (ConfigError, builtin_config_dir, check_seed_range, config_hash,
                          dict_hash, find_config, load_config, parse_config, read_toml)
from gsjax.oco import experiment as oco_experiment
from gsjax.oco.config import config_kind, load_oco_config, parse_oco_config

__all__ = ["main", "DEFAULT_CONFIG"]

DEFAULT_CONFIG = "section7_2"


def progress_reporter(stream=None, clock=time.perf_counter):
    """A progress factory for :func:`gsjax.experiment.run_experiment`.

    A run is first shown as compiling; its first report (after the compile and the first
    chunk) gives that phase's time, and rates and the time left are measured from it on. On a
    terminal: a tqdm bar per algorithm; otherwise one plain line per chunk with the rate in
    seed-rounds per second and the time left. ``clock``: seconds, for the rates.
    """
    stream = sys.stderr if stream is None else stream
    tty = stream.isatty()

    def factory(name, horizon, seeds):
        began, label = clock(), f"{name:>14s}"
        first = []  # (time, rounds) at the first report: compilation is behind us then
        if tty:
            from tqdm import tqdm

            bar = tqdm(total=horizon, desc=label, bar_format="{desc}: compiling ...", file=stream,
                       leave=False)
        else:
            print(f"{label}: compiling ...", file=stream, flush=True)

        def update(done, total):
            nonlocal bar
            now = clock()
            if not first:
                first.append((now, done))
                compiled = f"compile and first chunk {now - began:.1f} s"
                if tty:
                    bar.close()
                    bar = tqdm(total=total, initial=done, desc=label, unit="round", file=stream,
                               leave=False, dynamic_ncols=True, postfix=compiled)
                else:
                    print(f"{label}: {compiled}\n{label}: round {done}/{total}", file=stream,
                          flush=True)
            else:
                t1, d1 = first[0]
                rate = (done - d1) / (now - t1) if now > t1 else float("inf")
                if tty:
                    bar.update(done - bar.n)
                    bar.set_postfix_str(f"{rate * seeds:,.0f} seed-rounds/s")
                else:
                    left = (total - done) / rate if rate > 0 else float("nan")
                    print(f"{label}: round {done}/{total}, {rate * seeds:,.0f} seed-rounds/s, "
                          f"{left:.0f} s left", file=stream, flush=True)
            if tty and done >= total:
                bar.close()

        return update

    return factory


def _checkpoint_meta(folder: Path) -> dict | None:
    """:func:`gsjax.checkpoint.meta`; a damaged checkpoint is a one-line ``<resume>`` error."""
    try:
        return checkpoint.meta(folder)
    except checkpoint.Unreadable as e:
        raise ConfigError("<resume>", str(e)) from None


def _folder_seed_start(folder: Path) -> int:
    """The first global seed id of the run in ``folder``: checkpoint, else summary, else 0."""
    ck = _checkpoint_meta(folder)
    try:
        if ck is not None:
            return int(ck["seed_start"])
        if (folder / "summary.json").is_file():
            meta = results.read_json(folder / "summary.json")["meta"]
            return int(meta.get("seed_start", meta["seed_range"]["start"]))
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        pass  # unreadable: the run's own checks report the file
    return 0


def _folder_config(folder: Path) -> dict:
    """The run folder's ``config.json``; one ``--resume`` line when it cannot be read."""
    path = folder / "config.json"
    try:
        raw = results.read_json(path)
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        raise ConfigError("--resume", f"{path} cannot be read ({type(e).__name__}: "
                                      f"{' '.join(str(e).split())}); resume with the original "
                                      f"config: gsjax run CONFIG --out {folder}") from None
    return raw


def _check_out(out: Path) -> None:
    """``--out`` is a folder that exists or can be made, and is writable (nothing is created)."""
    if out.exists() and not out.is_dir():
        raise ConfigError("--out", f"{out} exists and is not a folder")
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError("--out", f"{parent} is a file: cannot make the folder {out} under it")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError("--out", f"{parent} is not writable")


def _finished_run(folder: Path) -> dict | None:
    """A finished run's ``summary.json`` (``{}`` if unreadable); None if unfinished or absent."""
    if not (folder / "summary.json").is_file() or (folder / checkpoint.FILENAME).exists():
        return None
    try:
        return results.read_json(folder / "summary.json")
    except (OSError, ValueError):
        return {}


def _guard_out(out: Path, digest: str, force: bool, log) -> None:
    """Refuse to overwrite a finished run of another config; ``force``: delete the run first."""
    if force:
        removed = experiment.remove_run(out)
        if removed:
            log(f"--force: deleted {', '.join(p.name for p in removed)} from {out}")
        return
    summary = _finished_run(out)
    if summary is None:
        return
    try:
        old = dict_hash(results.read_json(out / "config.json"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        old = "unreadable config.json"
    if old == digest:
        return  # the same config again: it runs anew over its own folder
    meta = summary.get("meta") if isinstance(summary, dict) else None
    name = meta.get("name", "?") if isinstance(meta, dict) else "?"
    raise ConfigError("--out", f"{out} holds a finished run of another config ({name!r}, config "
                               f"hash {old[:12]}; this run: {digest[:12]}); refusing to "
                               "overwrite it: use another --out, or add --force to delete its "
                               "files first")


def _cmd_run(args) -> int:
    session = distributed.current()
    writer = session is None or session.process_id == 0
    log = (lambda *a, **k: None) if args.quiet or not writer else print
    if session is None:
        prepared = _prepare_run(args, log)
    else:  # every process checks, then they agree (or all refuse with one line)
        try:
            prepared, error = _prepare_run(args, log, writer), None
        except ConfigError as e:
            prepared, error = None, str(e)
        identity = {} if prepared is None else {
            "config_hash": prepared[3], "seed_start": args.seed_start, "chunk": args.chunk,
            "buffer": args.buffer, "code": distributed.code_version()}
        distributed.agree(session, identity, error)
    if prepared is None:
        return 0  # --resume of a finished run
    cfg, oco, out, _ = prepared
    if session is not None:
        session.lost_hint = (f"; the last checkpoint is kept in {out}: run the same command "
                             "again to resume")
    run = oco_experiment.run_and_write if oco else functools.partial(experiment.run_config,
                                                                      buffer=args.buffer)
    run(cfg, out, log=log, seed_start=args.seed_start, chunk_rounds=args.chunk,
        figures=False if args.no_figures else None, checkpoint_every=args.checkpoint_every,
        progress=None if args.quiet or not writer else progress_reporter())
    return 0


def _prepare_run(args, log, writer: bool = True):
    """``gsjax run``'s checks before compiling: ``(config, is_oco, out, config hash)``, None when
    ``--resume`` finds the run complete. ``writer``: this process writes (checks) the folder."""
    flags = (("seeds", args.seeds), ("horizon", args.horizon))
    overrides = [*(args.set or []), *(f"{key}={val}" for key, val in flags if val is not None)]
    if args.resume is not None:
        resolved = Path(args.resume) / "config.json"
        if not resolved.is_file():
            raise ConfigError("--resume", f"{resolved} not found: not a gsjax run folder")
        if overrides:
            raise ConfigError("--resume",
                              "resumes the folder's own config; drop --set/--seeds/--horizon")
        args.out = Path(args.resume)
        if _finished_run(args.out) is not None:
            log(f"{args.out}: the run is complete (summary.json, no checkpoint); nothing to "
                "resume")
            return None
        folder_start = _folder_seed_start(args.out)
        if args.seed_start not in (None, folder_start):
            raise ConfigError("--seed-start", f"{args.out} runs from seed {folder_start}; "
                                              f"got {args.seed_start} (drop --seed-start)")
        args.seed_start = folder_start
        raw = _folder_config(args.out)
        oco = raw.get("kind") == "oco"
        cfg = parse_oco_config(raw) if oco else parse_config(raw)
    else:
        path = find_config(args.config)
        oco = config_kind(path) == "oco"  # Section 6 (full-information OCO): gsjax.oco
        cfg = load_oco_config(path, overrides) if oco else load_config(path, overrides)
    args.seed_start = args.seed_start or 0
    check_seed_range(cfg.seeds, args.seed_start)
    horizons = ([(T, oco_experiment.record_every(cfg, T)) for T in cfg.horizons] if oco
                else [(cfg.horizon, cfg.record_every)])
    experiment.checkpoint_interval(args.checkpoint_every)  # the flag's, or the variable's
    if args.buffer is not None and (oco or args.buffer < 1):
        raise ConfigError("--buffer", "a positive number of seeds, for bandit runs (the OCO "
                                      f"runner has no solver buffer); got {args.buffer}")
    for horizon, every in horizons:
        if args.chunk is not None and (args.chunk < 1 or horizon % args.chunk
                                       or args.chunk % every):
            raise ConfigError("--chunk", f"must divide horizon ({horizon}) and be a multiple "
                              f"of record_every ({every}); got {args.chunk}")
    out = args.out or Path("runs") / cfg.name
    digest = (oco_experiment.config_digest if oco else config_hash)(cfg)
    if oco and distributed.current() is not None:
        raise ConfigError("--num-processes", "a multi-process run takes bandit configs; run "
                                             "this kind = 'oco' config in one process")
    if writer:
        _check_out(out)
        if args.resume is None and not args.force:  # --resume read it; --force deletes it
            _checkpoint_meta(out)
        if args.resume is None:
            _guard_out(out, digest, args.force, log)
    # refused before anything is compiled when it cannot fit
    experiment.check_memory(oco_experiment.memory_needed(cfg) if oco
                            else experiment.memory_needed(cfg, args.seed_start), cfg.seeds)
    return cfg, oco, out, digest


def _one_line(text: str, width: int) -> str:
    """The first sentence of ``text`` on one line, cut at a word to ``width`` characters."""
    text = " ".join(text.split())
    first = re.split(r"(?<=\.)\s", text, maxsplit=1)[0]
    if len(first) <= width:
        return first
    return first[:width - 3].rsplit(" ", 1)[0].rstrip(",;:") + "..."


def _cmd_list(args) -> int:
    paths = sorted(builtin_config_dir().glob("*.toml"))
    width = max((len(p.stem) for p in paths), default=0)
    for p in paths:
        about = _one_line(str(read_toml(p).get("description", "")), max(40, 98 - width))
        print(f"{p.stem:<{width}s}  {about}")
    return 0


def _cmd_merge(args) -> int:
    _check_out(args.out)
    merged_from = {"merged_from": [str(d) for d in args.dirs]}
    try:
        kind = results.read_json(Path(args.dirs[0]) / "config.json").get("kind")
    except (OSError, ValueError, AttributeError):
        kind = None  # merge_parts names the file
    if kind == "oco":
        exp, timings = oco_experiment.merge(args.dirs)
        oco_experiment.write_results(exp, args.out, extra_meta={**timings, **merged_from})
    else:
        experiment.write_results(experiment.merge(args.dirs), args.out, extra_meta=merged_from)
    return 0


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.4g} {unit}"
        n /= 1024


def _cmd_check(args) -> int:
    """Validate and build a config; one line per 'dp' entry: its width and tables, or fallback."""
    path = find_config(args.config)
    oco = config_kind(path) == "oco"
    cfg = (load_oco_config if oco else load_config)(path, list(args.set or []))
    if oco:
        oco_experiment.check(cfg)
    entries = () if oco else experiment.build(cfg).algorithms
    kind = ", kind = 'oco'" if oco else ""
    print(f"{path}: ok ({cfg.name}, {len(cfg.algorithms)} algorithms{kind})")
    for ba in entries:
        if ba.fallback is not None:
            print(f"  algorithms.{ba.name}: solver 'dp' falls back to {ba.spec.solver!r} "
                  f"(agent.dp_fallback): {ba.fallback}")
        elif ba.spec.solver == "dp":
            plan = ba.spec.dp_plan
            lim, held = plan.limits, plan.entries_held
            size = held * {"float32": 4, "float64": 8}[cfg.dtype]
            print(f"  algorithms.{ba.name}: solver 'dp', elimination width {lim.width}, largest "
                  f"table {lim.table:,} entries, all tables {lim.total:,} entries, {held:,} held "
                  f"at once ({_bytes(size)} a solve in {cfg.dtype}, up to "
                  f"{_bytes(size * cfg.seeds)} for {cfg.seeds} seeds)")
    return 0


def _cmd_plot(args) -> int:
    d = Path(args.dir)
    if not (d / "arrays.npz").is_file():
        raise ConfigError("<file>", f"{d}/arrays.npz not found: not a gsjax run folder")
    meta = results.read_json(d / "summary.json")["meta"]
    if meta.get("kind") == "oco":
        paths = oco_experiment.replot(d)
    else:
        paths = plotting.plot_all(results.read_npz(d / "arrays.npz"), d,
                                  name=meta.get("name", d.name))
    for p in paths:
        print(p)
    return 0


def build_parser(extra=()) -> argparse.ArgumentParser:
    """The ``gsjax`` parser; each of ``extra`` is an ``add_parser(subparsers)`` of a layer above
    (the paper's ``reproduce``, added by :mod:`gsjax.__main__`)."""
    p = argparse.ArgumentParser(prog="gsjax", description=commands.DESCRIPTION)
    p.add_argument("--version", action="version", version=f"gsjax {commands.version()}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help=commands.COMMANDS["run"])
    r.add_argument("config", nargs="?", default=DEFAULT_CONFIG,
                   help=f"config path or built-in name (default: {DEFAULT_CONFIG})")
    r.add_argument("--seeds", type=int, help="override the number of seeds")
    r.add_argument("--horizon", type=int, help="override the horizon T")
    r.add_argument("--out", type=Path, help="output folder (default: runs/NAME)")
    r.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a config field, e.g. --set agent.beta=0.3 (repeatable)")
    r.add_argument("--quiet", action="store_true", help="print nothing (no progress either)")
    r.add_argument("--resume", type=Path, metavar="DIR",
                   help="resume the run in DIR with its own config (same as running the same "
                        "command again with --out DIR)")
    r.add_argument("--chunk", type=int, default=None,
                   help="rounds per compiled chunk (default: at most 20 chunks, fewer for a "
                        "short run with the vertex solver: each of 1e7 seed-criterion-rounds at "
                        "least); progress is reported after each")
    r.add_argument("--buffer", type=int, default=None, metavar="B",
                   help="seeds solved at once per device in a lazy or async sweep's rounds "
                        "(default: a 16th of the seeds); the numbers do not depend on it. A "
                        "run whose seeds re-optimise in most rounds (large graphs, reference "
                        "'own') goes faster with B = the seeds per device")
    r.add_argument("--checkpoint-every", type=float, default=None, metavar="SECONDS",
                   help="write a checkpoint at the end of a chunk once SECONDS have passed "
                        "since the last one (default: $GSJAX_CHECKPOINT_EVERY, else 10; 0: after "
                        "every chunk); a crash loses at most that long plus one chunk")
    r.add_argument("--seed-start", type=int, default=None,
                   help="global id of the first seed (default 0; split a sweep over hosts, see "
                        "merge); --resume keeps the folder's")
    r.add_argument("--force", action="store_true",
                   help="delete the run files already in the output folder (config, summary, "
                        "arrays, figures, checkpoint) first; without it a finished run of "
                        "another config there is refused")
    r.add_argument("--no-figures", action="store_true",
                   help="write no figures (GSJAX_FIGURES=off does the same); `gsjax plot DIR` "
                        "draws them later from the saved arrays")
    r.add_argument("--cache-dir", type=Path, metavar="DIR",
                   help="keep compiled programs in DIR (default: $GSJAX_CACHE_DIR, else "
                        "~/.cache/gsjax/xla; a later run of the same shapes loads them)")
    r.add_argument("--no-cache", action="store_true",
                   help="no persistent compilation cache (GSJAX_CACHE_DIR=off does the same)")
    d = r.add_argument_group(
        "one run over several processes (jax.distributed; under SLURM and other cluster "
        "managers JAX detects, none of these is needed)")
    d.add_argument("--coordinator", metavar="HOST:PORT",
                   help="address of process 0, which coordinates the run")
    d.add_argument("--num-processes", type=int, metavar="N", help="processes in the run")
    d.add_argument("--process-id", type=int, metavar="I", help="this process: 0 .. N-1")
    d.add_argument("--heartbeat-timeout", type=float, metavar="SECONDS",
                   default=distributed.DEFAULT_HEARTBEAT,
                   help="a process silent this long counts as lost: the others stop, naming "
                        f"it (default {distributed.DEFAULT_HEARTBEAT:g})")
    r.set_defaults(func=_cmd_run)

    ls = sub.add_parser("list", help=commands.COMMANDS["list"])
    ls.set_defaults(func=_cmd_list)

    m = sub.add_parser("merge", help=commands.COMMANDS["merge"])
    m.add_argument("out", type=Path, help="output folder")
    m.add_argument("dirs", nargs="+", help="run folders of the same config")
    m.set_defaults(func=_cmd_merge)

    c = sub.add_parser("check", help=commands.COMMANDS["check"])
    c.add_argument("config")
    c.add_argument("--set", action="append", metavar="KEY=VALUE")
    c.set_defaults(func=_cmd_check)

    pl = sub.add_parser("plot", help=commands.COMMANDS["plot"])
    pl.add_argument("dir")
    pl.set_defaults(func=_cmd_plot)

    tuner_cli.add_parser(sub)
    tune.add_parser(sub)  # gradient tuning through relaxed runs
    for add in extra:
        add(sub)
    return p


def main(argv=None, extra=(), host_cores: bool = False) -> int:
    """Run one command (``argv`` as on the command line; ``extra`` as in :func:`build_parser`).

    The ``gsjax`` command is :func:`gsjax.__main__.main`, which adds ``reproduce`` and
    ``host_cores``: a single-process command first gives JAX's CPU platform one device per
    core (:func:`gsjax.distributed.use_host_cores`, ``GSJAX_HOST_DEVICES``)."""
    args = build_parser(extra).parse_args(argv)
    session = None
    try:
        if args.func is _cmd_run:  # first of all: JAX's devices are global once it has joined
            session = _join(args)
        if host_cores and session is None:
            distributed.use_host_cores()
    except distributed.Refused as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cache = None if getattr(args, "no_cache", False) else (
        getattr(args, "cache_dir", None) or runner.default_cache_dir())
    runner.use_compilation_cache(cache)
    everywhere = False  # a failure every process of a multi-process run meets alike
    try:
        rc, line = args.func(args), None
    except distributed.Refused as e:  # processes that disagree, or process 0's refusal
        rc, line, everywhere = 2, f"error: {e}", True
    except ConfigError as e:
        rc, line = 2, f"error: {e}"
    except FloatingPointError as e:  # gsjax.runner.NonFiniteFeedback (from gathered values)
        rc, line, everywhere = 3, (f"error: {e}; the last good checkpoint is kept in the "
                                   "output folder"), True
    except KeyboardInterrupt:
        rc, line = 130, "interrupted"
    except BrokenPipeError:  # the reader of our output went away (gsjax list | head)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        rc, line = 0, None
    except OSError as e:  # a folder or file the system refuses (permissions, disk full, ...)
        rc, line = 2, f"error: {e}"
    except Exception as e:
        if session is None:
            raise
        # another process lost mid-collective can surface here first: give the watchdog the
        # time to name it (it ends the process), else report this error to the others
        session.watchdog.join(session.heartbeat + 5)
        traceback.print_exc()
        rc, line = 1, f"error: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
    if line is not None:
        print(line, file=sys.stderr)
    return rc if session is None else session.finish(rc, line, everywhere)


def _join(args):
    """:func:`gsjax.distributed.start` from the flags; an unreachable coordinator is one line."""
    try:
        return distributed.start(args.coordinator, args.num_processes, args.process_id,
                                 args.heartbeat_timeout)
    except distributed.Refused:
        raise
    except Exception as e:  # noqa: BLE001 -- JAX's runtime errors (no connection, timeout)
        where = args.coordinator or "the coordinator the cluster names"
        raise distributed.Refused(f"--coordinator: could not join the run at {where} "
                                  f"({type(e).__name__}: {' '.join(str(e).split())[:200]})"
                                  ) from None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
