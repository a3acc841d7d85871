"""Command line: ``gsjax run``, ``check``, ``plot``, ``merge``, ``reproduce``, ``tuner`` and ``tune``.

User errors (a bad config, a missing file) print one line ``error: FIELD: MESSAGE`` and exit
with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gsjax.config import ConfigError, ExperimentConfig, config_hash, config_to_dict, load_config

__all__ = ["main", "find_config", "run_config", "write_results", "DEFAULT_CONFIG"]

DEFAULT_CONFIG = "section7_2"
_REPO_CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def config_dirs() -> list[Path]:
    """Where built-in config names are looked up: ``./configs``, then the repository's."""
    dirs = [Path.cwd() / "configs", _REPO_CONFIGS]
    out = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [o.resolve() for o in out]:
            out.append(d)
    return out


def find_config(name_or_path: str) -> Path:
    """A config path from a path or a built-in name (``section7_1`` -> ``configs/section7_1.toml``)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    for d in config_dirs():
        for cand in (d / name_or_path, d / f"{name_or_path}.toml"):
            if cand.is_file():
                return cand
    known = sorted({c.stem for d in config_dirs() for c in d.glob("*.toml")})
    raise ConfigError("<file>", f"no config file or built-in config {name_or_path!r}; built-in: {known}")


def _git_commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
            text=True, timeout=5,
        )
        return out.stdout.strip() or None
    except Exception:
        return None


def write_results(res, out_dir, log=print, figures: bool = True, extra_meta=None) -> dict:
    """Write a run folder from an :class:`~gsjax.experiment.ExperimentResult`; returns the summary.

    Files: ``config.json`` (resolved config), ``summary.json``, ``arrays.npz`` and PNG figures,
    each written atomically.
    """
    from gsjax import experiment, plotting, results

    cfg = res.built.cfg
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results.write_json(out / "config.json", config_to_dict(cfg))
    summary = experiment.summarise(res)
    summary["meta"].update(config_hash=config_hash(cfg), git_commit=_git_commit(),
                           **(extra_meta or {}))
    arrays = experiment.arrays(res)
    results.write_npz(out / "arrays.npz", arrays)
    if figures:
        paths = plotting.plot_all(arrays, out, name=cfg.name)
        summary["meta"]["figures"] = [p.name for p in paths]
    results.write_json(out / "summary.json", summary)
    log(f"wrote {out}/summary.json")
    return summary


def progress_reporter(stream=None):
    """A progress factory for :func:`gsjax.experiment.run_experiment`.

    On a terminal: a tqdm bar per algorithm (rounds, rate, time left). Otherwise one plain
    line per chunk with the rate in seed-rounds per second and the time left. tqdm is the
    standard, well-kept progress-bar library; a hand-written bar would not be better.
    """
    stream = sys.stderr if stream is None else stream
    if stream.isatty():
        from tqdm import tqdm

        def factory(name, horizon, seeds):
            bar = tqdm(total=horizon, desc=f"{name:>14s}", unit="round", file=stream,
                       leave=False, dynamic_ncols=True)

            def update(done, total):
                bar.update(done - bar.n)
                rate = bar.format_dict["rate"] or 0.0
                bar.set_postfix_str(f"{rate * seeds:,.0f} seed-rounds/s", refresh=False)
                if done >= total:
                    bar.close()

            return update

        return factory

    def factory(name, horizon, seeds):
        first = []  # (time, rounds) at the first report: compilation is behind us then

        def update(done, total):
            now = time.perf_counter()
            if not first:
                first.append((now, done))
                print(f"{name:>14s}: round {done}/{total}", file=stream, flush=True)
                return
            t1, d1 = first[0]
            rate = (done - d1) / (now - t1) if now > t1 else float("inf")
            left = (total - done) / rate if rate > 0 else float("nan")
            print(f"{name:>14s}: round {done}/{total}, {rate * seeds:,.0f} seed-rounds/s, "
                  f"{left:.0f} s left", file=stream, flush=True)

        return update

    return factory


def run_config(cfg: ExperimentConfig, out_dir, log=print, figures: bool = True,
               seed_start: int = 0, progress=None, chunk_rounds: int | None = None,
               checkpoints: bool = True) -> dict:
    """Run a validated config and write its folder (see :func:`write_results`).

    ``seed_start`` is the global id of the first seed: hosts that split a sweep run disjoint
    ranges and ``gsjax merge`` combines their folders. With ``checkpoints`` (default) the
    folder holds ``checkpoint.npz`` while the run is in progress and a run on a folder with a
    checkpoint of the same config resumes it; the checkpoint is removed once the results are
    written.
    """
    from gsjax import checkpoint, experiment, results

    t0 = time.perf_counter()
    built = experiment.build(cfg, seed_start)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / checkpoint.FILENAME).exists():
        results.write_json(out / "config.json", config_to_dict(cfg))
    log(f"{cfg.name}: {cfg.seeds} seeds x {cfg.horizon} rounds, "
        f"{built.structure.num_criteria} criteria over {built.structure.num_coords} coordinates")
    res = experiment.run_experiment(cfg, built, log=log, chunk_rounds=chunk_rounds,
                                    progress=progress,
                                    checkpoint_dir=out if checkpoints else None)
    summary = write_results(res, out, log=log, figures=figures,
                            extra_meta={"wall_seconds": time.perf_counter() - t0,
                                        "seed_start": seed_start})
    if checkpoints:
        checkpoint.remove(out)
    return summary


def _cmd_run(args) -> int:
    overrides = list(args.set or [])
    if args.seeds is not None:
        overrides.append(f"seeds={args.seeds}")
    if args.horizon is not None:
        overrides.append(f"horizon={args.horizon}")
    if args.resume is not None:
        from gsjax.config import parse_config
        from gsjax.results import read_json

        resolved = Path(args.resume) / "config.json"
        if not resolved.is_file():
            raise ConfigError("--resume", f"{resolved} not found: not a gsjax run folder")
        if overrides:
            raise ConfigError("--resume", "resumes the folder's own config; drop --set/--seeds/--horizon")
        cfg = parse_config(read_json(resolved))
        args.out = Path(args.resume)
    else:
        path = find_config(args.config)
        if _is_oco(path):  # Section 6 (full-information OCO): gsjax.oco
            from gsjax.oco.cli import cmd_run

            return cmd_run(args, path, overrides)
        cfg = load_config(path, overrides)
    if args.seed_start < 0:
        raise ConfigError("--seed-start", f"must be >= 0, got {args.seed_start}")
    out = args.out or Path("runs") / cfg.name
    if args.chunk is not None and (args.chunk < 1 or cfg.horizon % args.chunk
                                   or args.chunk % cfg.record_every):
        raise ConfigError("--chunk", f"must divide horizon ({cfg.horizon}) and be a multiple "
                          f"of record_every ({cfg.record_every}); got {args.chunk}")
    run_config(cfg, out, log=(lambda *a, **k: None) if args.quiet else print,
               seed_start=args.seed_start, chunk_rounds=args.chunk,
               progress=None if args.quiet else progress_reporter())
    return 0


def _is_oco(path) -> bool:
    """Whether a config file is marked ``kind = "oco"`` (handled by :mod:`gsjax.oco`)."""
    from gsjax.oco.config import config_kind

    return config_kind(path) == "oco"


def _cmd_merge(args) -> int:
    from gsjax import experiment

    res = experiment.merge(args.dirs)
    write_results(res, args.out, extra_meta={"merged_from": [str(d) for d in args.dirs]})
    return 0


def _cmd_check(args) -> int:
    from gsjax import experiment

    path = find_config(args.config)
    if _is_oco(path):
        from gsjax.oco.cli import cmd_check

        return cmd_check(path, list(args.set or []))
    cfg = load_config(path, list(args.set or []))
    experiment.build(cfg)
    print(f"{path}: ok ({cfg.name}, {len(cfg.algorithms)} algorithms)")
    return 0


def _cmd_plot(args) -> int:
    from gsjax import plotting, results

    d = Path(args.dir)
    if not (d / "arrays.npz").is_file():
        raise ConfigError("<file>", f"{d}/arrays.npz not found: not a gsjax run folder")
    arrays = results.read_npz(d / "arrays.npz")
    if results.read_json(d / "summary.json")["meta"].get("kind") == "oco":
        from gsjax.oco.plotting import replot

        for p in replot(d):
            print(p)
        return 0
    name = results.read_json(d / "summary.json")["meta"].get("name", d.name)
    for p in plotting.plot_all(arrays, d, name=name):
        print(p)
    return 0


def _cmd_reproduce(args) -> int:
    from gsjax import report

    report.reproduce(Path(args.out), quick=args.quick, only=args.only, log=print, long=args.long)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gsjax",
        description="Graph-structured continuous-state linear bandits with movement costs.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run one experiment config")
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
                   help="rounds per compiled chunk (default: at most 20 chunks); progress is "
                        "reported after each")
    r.add_argument("--seed-start", type=int, default=0,
                   help="global id of the first seed (split a sweep over hosts; see merge)")
    r.set_defaults(func=_cmd_run)

    m = sub.add_parser("merge", help="combine run folders over disjoint seed ranges into one")
    m.add_argument("out", type=Path, help="output folder")
    m.add_argument("dirs", nargs="+", help="run folders of the same config")
    m.set_defaults(func=_cmd_merge)

    c = sub.add_parser("check", help="validate a config and build its problem, without running")
    c.add_argument("config")
    c.add_argument("--set", action="append", metavar="KEY=VALUE")
    c.set_defaults(func=_cmd_check)

    pl = sub.add_parser("plot", help="redraw the figures of a run folder from its saved arrays")
    pl.add_argument("dir")
    pl.set_defaults(func=_cmd_plot)

    rp = sub.add_parser("reproduce", help="run every paper experiment and write report.md")
    rp.add_argument("--out", default="runs/reproduce", help="output folder")
    rp.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test, not the paper's)")
    rp.add_argument("--only", action="append", help="only these experiments (repeatable; a long "
                                                    "experiment named here runs too)")
    rp.add_argument("--long", action="store_true",
                    help="also the long experiments: adaptive_graph (Section 5.2; 8.4 min at 50 "
                         "seeds) and large_graphs (Section 5.1 at scale; 59 min on 2 loaded CPU "
                         "cores)")
    rp.set_defaults(func=_cmd_reproduce)

    from gsjax.tuner_cli import add_parser as add_tuner_parser

    add_tuner_parser(sub)

    from gsjax.tune import add_parser as add_tune_parser  # gradient tuning (gsjax.tune)

    add_tune_parser(sub)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except FloatingPointError as e:  # gsjax.runner.NonFiniteFeedback
        print(f"error: {e}; the last good checkpoint is kept in the output folder",
              file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
