"""``gsjax run`` / ``gsjax check`` for ``kind = "oco"`` configs.

:mod:`gsjax.cli` hands a config file whose top-level ``kind`` is ``"oco"`` to
:func:`cmd_run` / :func:`cmd_check` (the Section 6 report: :mod:`gsjax.paper.section6`).
"""

from __future__ import annotations

from pathlib import Path

from gsjax.config import ConfigError
from gsjax.oco.config import OCOConfig, load_oco_config
from gsjax.oco.experiment import check, run_and_write

__all__ = ["cmd_run", "cmd_check"]


def cmd_run(args, cfg: OCOConfig, progress=None) -> int:
    """``gsjax run <oco config>`` or ``--resume`` of an OCO run folder, with a bandit run's
    options (:mod:`gsjax.cli` has checked ``--chunk`` against every horizon)."""
    if args.seed_start < 0:
        raise ConfigError("--seed-start", f"must be >= 0, got {args.seed_start}")
    out = args.out or Path("runs") / cfg.name
    log = (lambda *a, **k: None) if args.quiet else print
    run_and_write(cfg, out, log=log, seed_start=args.seed_start, chunk_rounds=args.chunk,
                  progress=progress)
    return 0


def cmd_check(path: Path, overrides: list[str]) -> int:
    cfg = load_oco_config(path, overrides)
    check(cfg)
    print(f"{path}: ok ({cfg.name}, {len(cfg.algorithms)} algorithms, kind = 'oco')")
    return 0
