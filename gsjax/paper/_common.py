"""What the paper drivers share (kept apart from :mod:`gsjax.paper.report`, which imports them)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

__all__ = ["script_section", "copy_outputs", "ratio", "pm"]


def script_section(cfg, md: list[str], figure: str) -> list[str]:
    """Report lines of a long experiment run by its own module (``[paper].script``): heading,
    description, the module's markdown ``md``, the paper's claim and ``figure`` (relative to the
    config's folder in the report's folder)."""
    paper = cfg.paper
    return [f"## {cfg.name} (paper Section {paper.get('section', '?')})", "",
            cfg.description.strip(), "", *md, "",
            f"Paper's claim: {paper.get('claims', '')}", "",
            f"![{cfg.name}]({cfg.name}/{figure})", ""]


def copy_outputs(out, docs, stem: str, suffixes=("png", "json", "md")) -> Path:
    """Copy ``out/STEM.{png,json,md}`` into the folder ``docs`` (created); returns it."""
    docs = Path(docs)
    docs.mkdir(parents=True, exist_ok=True)
    for suffix in suffixes:
        shutil.copyfile(Path(out) / f"{stem}.{suffix}", docs / f"{stem}.{suffix}")
    return docs


def ratio(a: dict, b: dict) -> dict:
    """``a / b`` of two means over seeds (``{"mean", "stderr"}``), its standard error by the
    delta method: ``|r| sqrt((se_a / a)^2 + (se_b / b)^2)``."""
    r = a["mean"] / b["mean"]
    se = abs(r) * math.sqrt((a["stderr"] / a["mean"]) ** 2 + (b["stderr"] / b["mean"]) ** 2)
    return {"mean": r, "stderr": se}


def pm(x: dict, digits: int = 1) -> str:
    """``mean ± stderr`` of a ``{"mean", "stderr"}`` dict."""
    return f"{x['mean']:.{digits}f} ± {x['stderr']:.{digits}f}"
