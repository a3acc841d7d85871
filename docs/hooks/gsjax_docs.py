"""MkDocs hooks of the gsjax site (``hooks:`` in ``mkdocs.yml``).

* The configuration reference (``reference/config.md``) is generated at build time from the
  pydantic records of :mod:`gsjax.config` and :mod:`gsjax.oco.config`: names, types, bounds and
  defaults from the models, the one-line comment beside each field from its source.
* The API reference must document every name of ``gsjax.__all__``, each with a docstring: a name
  missing from the ``::: identifier`` lines of ``reference/api.md``, or without a docstring, fails
  the build (not a warning that could be overlooked).
* Sphinx roles left in docstrings (``:func:`x```) are shown as plain code.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import sys
import types
import typing
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
API_PAGE = "reference/api.md"
CONFIG_PAGE = "reference/config.md"


def _source_map() -> dict[str, str]:
    """``__all__`` name -> the dotted identifier the API page must document (no import)."""
    tree = ast.parse((ROOT / "gsjax" / "__init__.py").read_text())
    names, source = None, {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "__all__":
            names = ast.literal_eval(node.value)
    sys.path.insert(0, str(ROOT))
    try:
        import gsjax  # cheap: its names load on first use
        source = dict(gsjax._SOURCE)
    finally:
        sys.path.remove(str(ROOT))
    return {n: source[n] if source[n] == f"gsjax.{n}" else f"{source[n]}.{n}" for n in names}


def expected_identifiers() -> dict[str, str]:
    return _source_map()


def documented_identifiers(markdown: str) -> set[str]:
    return set(re.findall(r"^:::\s+([\w.]+)", markdown, re.M))


def check_api(markdown: str) -> list[str]:
    """The problems of the API page: public names it does not document, or without docstring."""
    import griffe

    wanted = expected_identifiers()
    have = documented_identifiers(markdown)
    problems = [f"gsjax.{n} ({ident}) is public (gsjax.__all__) but not in {API_PAGE}"
                for n, ident in wanted.items() if ident not in have]
    pkg = griffe.load("gsjax", search_paths=[str(ROOT)])
    for n, ident in wanted.items():
        obj = pkg[ident.removeprefix("gsjax.")]
        obj = obj.final_target if obj.is_alias else obj
        if not (obj.docstring and obj.docstring.value.strip()):
            problems.append(f"gsjax.{n} ({ident}) has no docstring")
    return problems


# --- the configuration reference ---------------------------------------------------------


def _comments(cls) -> dict[str, str]:
    """The ``# comment`` beside each field in the class body (and comment lines just above)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not klass.__module__.startswith("gsjax"):
            continue
        try:
            lines = inspect.getsource(klass).splitlines()
        except (OSError, TypeError):
            continue
        above: list[str] = []
        for line in lines:
            s = line.strip()
            if s.startswith("#"):
                above.append(s.lstrip("# ").strip())
                continue
            m = re.match(r"\s{4}(\w+)\s*:\s*[^=]*?(?:=.*?)?(?:#\s*(.*))?$", line)
            if m and not s.startswith(("def ", "@", "return", "_")) and len(line) - len(
                    line.lstrip()) == 4:
                text = " ".join(above + ([m.group(2)] if m.group(2) else []))
                if text:
                    out[m.group(1)] = text
            above = []
    return out


def _bounds(meta) -> str:
    words = []
    for m in meta:
        for attr, sym in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
            v = getattr(m, attr, None)
            if v is not None and type(m).__name__ != "FieldInfo":
                if not (attr == "le" and v == 2 ** 31 - 1):  # every int's int32 cap: said once
                    words.append(f"{sym} {v}")
        if type(m).__name__ == "FieldInfo":
            words += [_bounds(m.metadata)] if _bounds(m.metadata) else []
        if type(m).__name__ == "MinLen":
            words.append("non-empty")
    return ", ".join(w for w in words if w)


def _type(ann) -> str:
    """A short, readable form of a field's annotation."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Annotated:
        base, meta = args[0], args[1:]
        b = _bounds(meta)
        return _type(base) + (f" ({b})" if b else "")
    if origin is typing.Literal:
        return " \\| ".join(f"`{a!r}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [a for a in args if a is not type(None)]
        text = " or ".join(_type(a) for a in parts)
        return text + (" or unset" if len(parts) < len(args) else "")
    if ann is tuple or origin is tuple:
        inner = _type(args[0]) if args else "value"
        return f"list of {inner}"
    if isinstance(ann, type):
        return {"float": "float", "int": "int", "bool": "bool", "str": "string"}.get(
            ann.__name__, f"table `{ann.__name__}`")
    return str(ann).replace("gsjax.config.", "")


def _default(field) -> str:
    if field.is_required():
        return "required"
    v = field.default
    if dataclasses.is_dataclass(v):
        return "its table's defaults"
    if v is None:
        return "unset"
    if isinstance(v, str):
        return f'`"{v}"`'
    if isinstance(v, bool):
        return f"`{str(v).lower()}`"
    if isinstance(v, tuple):
        return "`[]`" if not v else f"`{list(v)}`"
    return f"`{v}`"


def _table(cls, skip=()) -> str:
    notes = _comments(cls)
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for name, f in cls.__pydantic_fields__.items():
        if name in skip:
            continue
        note = notes.get(name, "").replace("|", "\\|")
        kind, bounds = _type(f.annotation), _bounds(f.metadata)
        if name == "grid":
            kind = "table of float lists ([below](#grid))"
        rows.append(f"| `{name}` | {kind}{f' ({bounds})' if bounds else ''} | {_default(f)} "
                    f"| {note} |")
    return "\n".join(rows)


def _doc(cls) -> str:
    text = inspect.getdoc(cls) or ""
    return re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text).replace("``", "`")


def config_reference() -> str:
    sys.path.insert(0, str(ROOT))
    try:
        from gsjax import config as c
        try:
            from gsjax.oco import config as oc
        except ImportError:  # pragma: no cover
            oc = None
    finally:
        sys.path.remove(str(ROOT))
    out = ["# Configuration reference", "",
           "Generated when the site is built, from the pydantic records of `gsjax/config.py` "
           "(and `gsjax/oco/config.py` for `kind = \"oco\"`): each key with its type, bounds and "
           "default as the validator enforces them, and the comment beside the field in the "
           "source. Every int is also at most 2^31 − 1 (int32), and seeds at most "
           f"{c.SEED_MAX:,} (uint32). A bad value is refused with one line naming the dotted key "
           "(`error: agent.lambda_reg: must be > 0.0, got -1.0`, exit 2).", "",
           "The module docstring of `gsjax.config`, the layout of a file:", "",
           "```toml", re.search(r"TOML layout.*?::\n\n(.*?)\n\n[A-Z]", c.__doc__, re.S).group(1)
           .replace("\n    ", "\n").strip(), "```", ""]
    problem_shared = {f for f in c.ProblemConfig.__pydantic_fields__}
    sections = [
        ("Top level (`[paper]`: free-form reference numbers, not validated)", c.ExperimentConfig, ("paper_json",)),
        ("`[agent]` and `[algorithms.NAME]`", c.AgentConfig, ()),
        ("`[algorithms.NAME]` of `algorithm = \"adaptive_lazy\"` (adds to `[agent]`)",
         c.AdaptiveAgentConfig, tuple(c.AgentConfig.__pydantic_fields__)),
        ("`[problem]`: keys of every variant", c.ProblemConfig, ()),
        ("`[problem]` with `structure = \"blocks\"`", c.BlocksProblem, problem_shared),
        ("`[problem]` with `structure = \"scopes\"`", c.ScopesProblem, problem_shared),
        ("`[problem]` with `structure = \"graph\"`", c.GraphProblem, problem_shared),
        ("`[problem]` with `environment = \"adult\"`", c.AdultProblem, problem_shared),
        ("`[problem]` with `environment = \"factor\"`", c.FactorProblem, problem_shared),
        ("`[problem.theta]`", c.ThetaConfig, ()),
        ("`[problem.noise]`", c.NoiseConfig, ()),
        ("`[problem.adult]`", c.AdultConfig, ()),
        ("`[problem.factor]`", c.FactorConfig, ()),
        ("`[relaxed]`", c.RelaxedConfig, ()),
    ]
    for title, cls, skip in sections:
        out += [f"## {title}", "", _doc(cls), "", _table(cls, skip), ""]
    out += ["## `[grid]`", "",
            "Each key a non-empty list of floats; the run covers their Cartesian product (at most "
            f"{c.MAX_GRID_POINTS} points) in one compiled program ([grids](../how-to/grids.md)).",
            "", "| key | bounds |", "|---|---|"]
    for key, bounds in c.GRID_FIELDS.items():
        out.append(f"| `{key}` | {_bounds([type('B', (), bounds)()]) or 'any float'} |")
    out.append("")
    if oc is not None:
        out += ["## `kind = \"oco\"` configs (Section 6)", "", _doc(oc).split("\n\n")[0], ""]
        for name in sorted(dir(oc)):
            cls = getattr(oc, name)
            if (isinstance(cls, type) and hasattr(cls, "__pydantic_fields__")
                    and cls.__module__ == oc.__name__ and not name.startswith("_")):
                out += [f"### `{name}`", "", _doc(cls), "", _table(cls), ""]
    return "\n".join(out)


# --- hooks ----------------------------------------------------------------------------------


def on_files(files, config):
    files.append(File.generated(config, CONFIG_PAGE, content=config_reference()))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == API_PAGE:
        problems = check_api(markdown)
        if problems:
            raise PluginError("API reference incomplete:\n  " + "\n  ".join(problems))
    return markdown


def on_page_content(html, page, config, files):
    # Sphinx roles in docstrings (":func:`x`" renders as ":func:<code>x</code>")
    return re.sub(r":(?:func|class|mod|data|meth|attr|exc|obj):(<code>)", r"\1", html)
