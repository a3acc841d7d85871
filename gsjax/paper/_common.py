"""What the paper drivers share (kept apart from :mod:`gsjax.paper.report`, which imports them)."""

from __future__ import annotations

__all__ = ["script_section"]


def script_section(cfg, md: list[str], figure: str) -> list[str]:
    """Report lines of a long experiment run by its own module (``[paper].script``): heading,
    description, the module's markdown ``md``, the paper's claim and ``figure`` (relative to the
    config's folder in the report's folder)."""
    paper = cfg.paper
    return [f"## {cfg.name} (paper Section {paper.get('section', '?')})", "",
            cfg.description.strip(), "", *md, "",
            f"Paper's claim: {paper.get('claims', '')}", "",
            f"![{cfg.name}]({cfg.name}/{figure})", ""]
