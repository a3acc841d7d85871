"""The documentation: the README's promises, the site hook's checks (docs/hooks/gsjax_docs.py)
and, marked slow, the strict site build itself (.ci/run builds it on every CI run)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


@pytest.fixture(scope="module")
def hook():
    spec = importlib.util.spec_from_file_location("gsjax_docs",
                                                  REPO / "docs" / "hooks" / "gsjax_docs.py")
    module = importlib.util.module_from_spec(spec)
    pytest.importorskip("mkdocs")  # the hook imports mkdocs' File and PluginError
    spec.loader.exec_module(module)
    return module


def test_readme_is_short_and_keeps_the_two_commands():
    assert len(README.splitlines()) <= 200
    fence = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
    commands = [line for line in fence.splitlines() if line and not line.startswith("#")]
    assert commands == [
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && gsjax run",
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' "
        "&& python -m pytest -q -n 2",
    ]
    # CI runs the README's test command
    ci = (REPO / ".ci" / "run").read_text()
    assert commands[1].split("&& ")[-1] in ci
    assert "mkdocs build --strict" in ci and "mkdocs build --strict" in README


def test_readme_links_resolve():
    for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (REPO / target).exists(), target


def test_api_page_documents_every_public_name(hook):
    import gsjax

    page = (REPO / "docs" / "reference" / "api.md").read_text()
    assert hook.check_api(page) == []
    wanted = hook.expected_identifiers()
    assert set(wanted) == set(gsjax.__all__)
    # every identifier is where gsjax says the name comes from
    for name, ident in wanted.items():
        module, _, attr = ident.rpartition(".")
        obj = getattr(gsjax, name)
        assert obj is (sys.modules[ident] if ident == f"gsjax.{name}" else
                       getattr(sys.modules[module], attr)), name


def test_api_check_fails_on_a_missing_or_undocumented_name(hook, monkeypatch):
    page = (REPO / "docs" / "reference" / "api.md").read_text()
    without = page.replace("::: gsjax.runner.sweep\n", "")
    assert any("gsjax.sweep" in p for p in hook.check_api(without))
    # a public name whose object has no docstring (gsjax.config._length has none)
    wanted = {**hook.expected_identifiers(), "_length": "gsjax.config._length"}
    monkeypatch.setattr(hook, "expected_identifiers", lambda: wanted)
    problems = hook.check_api(page + "\n::: gsjax.config._length\n")
    assert problems == ["gsjax._length (gsjax.config._length) has no docstring"]


def _rows(text: str, heading: str) -> dict[str, list[str]]:
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): [c.strip() for c in m.group(0).split(" | ")]
            for m in re.finditer(r"^\| `(\w+)` \|.*$", section, re.M)}


def test_config_reference_follows_the_schema(hook):
    """Every [agent] key is listed with the default of AgentConfig(), and every bound the page
    states is one the validator enforces (the value at the bound is refused, naming the key)."""
    import dataclasses

    from gsjax.config import AgentConfig, ConfigError, parse_config

    text = hook.config_reference()
    rows = _rows(text, "`[agent]` and `[algorithms.NAME]`")
    default = AgentConfig()
    assert set(rows) == {f.name for f in dataclasses.fields(AgentConfig)}
    for name, cells in rows.items():
        value = getattr(default, name)
        if value is None:
            shown = "unset"
        elif isinstance(value, bool):
            shown = f"`{str(value).lower()}`"
        else:
            shown = f'`"{value}"`' if isinstance(value, str) else f"`{value}`"
        assert cells[2] == shown, name
    checked = 0
    for name, cells in rows.items():
        for sym, bound in re.findall(r"([>≥<≤]) (-?[\d.]+)", cells[1]):
            value = float(bound) if "." in bound else int(bound)
            raw = {"name": "x", "problem": {"structure": "blocks", "num_blocks": 1,
                                            "block_dim": 2}, "agent": {name: value},
                   "algorithms": {"lazy": {}}}
            if sym in "><":  # the bound itself is refused
                with pytest.raises(ConfigError) as err:
                    parse_config(raw)
                assert err.value.field == f"agent.{name}", (name, sym, bound)
            else:  # the bound itself is accepted
                parse_config(raw)
            checked += 1
    assert checked >= 10
    # every [problem] variant and the tables below it have a section
    for table in ("`[problem.theta]`", "`[problem.noise]`", "`[problem.adult]`",
                  "`[problem.factor]`", "`[relaxed]`", "`[grid]`"):
        assert f"## {table}\n" in text


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-d", str(tmp_path / "site")], cwd=REPO, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "config" / "index.html").exists()


def test_the_python_example_is_the_same_in_the_readme_and_the_site():
    """tests/test_scopes_config.py runs the README's copy; the site's must not drift from it."""
    pattern = r"<!-- python example.*?-->\n```python\n(.*?)```"
    page = (REPO / "docs" / "getting-started" / "python.md").read_text()
    assert re.search(pattern, page, re.S).group(1) == re.search(pattern, README, re.S).group(1)
