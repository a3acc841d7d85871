"""Property-based fuzzing of the input edges (issue 18): configs and ``--set`` overrides built
from the schema, damaged run folders and tuner state files, and random tuner observations.

Every case either succeeds or is refused with ONE line ``error: ...`` and exit status 2 (a
:class:`~gsjax.config.ConfigError` through the Python API), never another exception; a refused
call leaves the damaged files with their bytes and modification times.

Two profiles: ``fast`` runs in the default test run (``FAST_EXAMPLES`` per property) and
``long`` under ``-m slow`` (``LONG_EXAMPLES``); both derandomized, so a failure reproduces.
Everything that compiles (the interrupted run, its uninterrupted reference, the tuner state) is
made once per module; inside an example only a resume whose damage no reader checks really runs.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import math
import shutil
import tomllib
import typing

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gsjax import checkpoint, cli, experiment
from gsjax import config as C
from gsjax.tuner import Tuner, TunerError

FAST_EXAMPLES = 25
LONG_EXAMPLES = 500
_COMMON = dict(deadline=None, derandomize=True, database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILES = {"fast": settings(max_examples=FAST_EXAMPLES, **_COMMON),
            "long": settings(max_examples=LONG_EXAMPLES, **_COMMON)}
profiles = pytest.mark.parametrize(
    "profile", ["fast", pytest.param("long", marks=pytest.mark.slow)])


def _one_line_refusal(rc: int, out: str, err: str) -> None:
    assert rc == 2, (rc, out, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err, err


def _call(capsys, argv) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = cli.main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


# --- Values built from the schema ----------------------------------------------------------


def _walk(tp, found: dict) -> dict:
    """The literals, numeric bounds and base types an annotation of the schema declares."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(tp)
        for m in meta:
            for bound in getattr(m, "metadata", ()):
                for name in ("ge", "gt", "le", "lt"):
                    if getattr(bound, name, None) is not None:
                        found["bounds"].append(getattr(bound, name))
        return _walk(base, found)
    if origin is typing.Literal:
        found["literals"].extend(typing.get_args(tp))
    elif origin is not None:
        for arg in typing.get_args(tp):
            _walk(arg, found)
    elif isinstance(tp, type):
        found["types"].append(tp)
    return found


def _schema(*classes) -> dict[str, dict]:
    """Field name -> what its annotation declares, over the records ``classes``."""
    fields = {}
    for cls in classes:
        for f in dataclasses.fields(cls):
            if not f.name.startswith("_"):
                found = fields.setdefault(f.name, {"literals": [], "bounds": [], "types": []})
                _walk(f.type, found)
    return fields


_PROBLEMS = (C.BlocksProblem, C.ScopesProblem, C.GraphProblem, C.AdultProblem, C.FactorProblem)
# table prefix -> its fields (the top level's paper_json is written [paper])
TABLES = {
    "": _schema(C.ExperimentConfig),
    "problem": _schema(*_PROBLEMS),
    "problem.theta": _schema(C.ThetaConfig),
    "problem.noise": _schema(C.NoiseConfig),
    "problem.factor": _schema(C.FactorConfig),
    "problem.adult": _schema(C.AdultConfig),
    "agent": _schema(C.AdaptiveAgentConfig),
    "algorithms.lazy": _schema(C.AdaptiveAgentConfig),
    "relaxed": _schema(C.RelaxedConfig),
    "grid": {key: {"literals": [], "bounds": list(b.values()), "types": [float]}
             for key, b in C.GRID_FIELDS.items()},
}

NASTY = [0, -1, 1, 2 ** 31, 2 ** 32, 2 ** 63, 2 ** 70, -2 ** 70, 10 ** 30, 10 ** 400, 0.0,
         -0.0, 1e-320, 1e308, 1e39, math.nan, math.inf, -math.inf, "nan", "inf", "", " ", "x",
         True, False, [], [[]], [1, 2], [0.5], [[0, 1], [1]], {}, {"a": 1}]


def _near(bound):
    if isinstance(bound, int):
        return [bound - 1, bound, bound + 1]
    return [bound, math.nextafter(bound, -math.inf), math.nextafter(bound, math.inf), -bound]


@st.composite
def field_values(draw, spec: dict):
    """A value for a field: one it declares (a literal, a bound or next to it, a list of such),
    a case-changed literal, or a nasty one (wrong type, huge, non-finite, empty)."""
    own = list(spec["literals"]) + [v for b in spec["bounds"] for v in _near(b)]
    own += [str(lit).upper() for lit in spec["literals"] if isinstance(lit, str)]
    if not spec["literals"] and int in spec["types"]:
        own += [2, 3]
    if not spec["literals"] and float in spec["types"]:
        own += [0.5, 2.0]
    scalar = st.sampled_from(own + NASTY).map(copy.deepcopy)  # NASTY's lists stay as they are
    kind = draw(st.sampled_from(["scalar", "scalar", "list", "rows"]))
    if kind == "scalar":
        return draw(scalar)
    if kind == "list":
        return draw(st.lists(scalar, max_size=4))
    return draw(st.lists(st.lists(scalar, max_size=3), max_size=3))


def _toml(value) -> str:
    """``value`` as a TOML value (what ``--set key=TEXT`` parses)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, (int, str)):
        return json.dumps(value) if isinstance(value, str) else str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return "[" + ", ".join(_toml(v) for v in value) + "]"


@st.composite
def overrides(draw):
    """One ``--set`` item: a schema key with a value, an unknown key, or malformed text."""
    kind = draw(st.sampled_from(["field"] * 6 + ["unknown", "raw"]))
    if kind == "raw":
        return draw(st.sampled_from(["", "=", "=1", "a..b=1", ".a=1", "agent.=1", "seeds",
                                     "agent.beta.x=1", "problem=1", "agent=[1]", " = ",
                                     "seeds=1=2", "name=\n", "seeds=0x10", "seeds=1_000",
                                     f"horizon={'9' * 5000}", f"agent.beta=1e{'9' * 5000}"])
                    | st.text(max_size=12))
    table = draw(st.sampled_from(sorted(TABLES)))
    if kind == "unknown":
        key = draw(st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True))
        spec = {"literals": [], "bounds": [], "types": []}
    else:
        key = draw(st.sampled_from(sorted(TABLES[table])))
        spec = TABLES[table][key]
    text = draw(st.one_of(field_values(spec).map(_toml), st.text(max_size=8)))
    return f"{table + '.' if table else ''}{key}={text}"


BASES = {
    "blocks": 'structure = "blocks"\nnum_blocks = 2\nblock_dim = 2\n',
    "unequal": 'structure = "blocks"\nblock_dims = [1, 2]\n',
    "chain": 'structure = "graph"\ngraph = "chain"\nnum_nodes = 3\n',
    "edges": 'structure = "graph"\ngraph = "edges"\nnum_nodes = 3\nedges = [[0, 1], [1, 2]]\n',
    "grid": 'structure = "graph"\ngraph = "grid"\ngrid_shape = [2, 2]\n',
    "random": 'structure = "graph"\ngraph = "random"\nnum_nodes = 4\nmax_degree = 2\n'
              'num_edges = 3\n',
    "scopes": 'structure = "scopes"\nscopes = [[0, 1], [1, 2]]\n',
    "factor": 'environment = "factor"\n[problem.factor]\nnum_coords = 3\nnum_nodes = 2\n',
}
HEAD = 'name = "fuzz"\nseeds = 2\nhorizon = 8\n[agent]\nsolver = "vertex"\n[algorithms.lazy]\n'


@pytest.fixture(scope="module")
def base_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz-configs")
    paths = {}
    for name, problem in BASES.items():
        paths[name] = folder / f"{name}.toml"
        paths[name].write_text(HEAD + "[problem]\n" + problem)
    return paths


def _small(cfg) -> bool:
    """Small enough for ``gsjax check`` to build in well under a second (it builds the whole
    problem: a config with 2**31 blocks is valid and takes as long as its size)."""
    k, n = cfg.problem.sizes
    return max(k, n, cfg.seeds, cfg.problem.rff_dim) <= 64


@profiles
def test_configs_and_overrides_are_accepted_or_one_config_error(profile, base_files, capsys):
    """Every base config with random ``--set`` items: :func:`load_config` returns a config or
    raises one one-line :class:`ConfigError`, and ``gsjax check`` (in-process) says ``ok`` or
    prints that same error as one line with exit 2."""

    @PROFILES[profile]
    @given(base=st.sampled_from(sorted(BASES)), items=st.lists(overrides(), max_size=4))
    def check(base, items):
        path = base_files[base]
        try:
            cfg = C.load_config(path, items)
        except C.ConfigError as e:
            event("refused")
            error = str(e)
            assert "\n" not in error and error, error
            rc, out, err = _call(capsys, ["check", str(path), *(f"--set={i}" for i in items)])
            _one_line_refusal(rc, out, err)
            assert err == f"error: {error}\n"
            return
        assert isinstance(cfg, C.ExperimentConfig)
        event("accepted" if _small(cfg) else "accepted, too large to build")
        if _small(cfg):
            rc, out, err = _call(capsys, ["check", str(path), *(f"--set={i}" for i in items)])
            if rc != 0:  # refused by the build (a 'dp' table too large, ...)
                _one_line_refusal(rc, out, err)
            else:
                assert out.startswith(f"{path}: ok") and err == "", (out, err)

    check()


@st.composite
def mutated_raw(draw):
    """A base config's raw table with values replaced, keys deleted or unknown keys added,
    anywhere in its tree (the Python values TOML cannot write included)."""
    base = draw(st.sampled_from(sorted(BASES)))
    raw = tomllib.loads(HEAD + "[problem]\n" + BASES[base])
    for _ in range(draw(st.integers(1, 4))):
        tables = [("", raw)]
        stack = [("", raw)]
        while stack:
            prefix, node = stack.pop()
            for key, value in node.items():
                if isinstance(value, dict):
                    sub = f"{prefix}.{key}".lstrip(".")
                    tables.append((sub, value))
                    stack.append((sub, value))
        prefix, node = draw(st.sampled_from(tables))
        spec_table = TABLES.get(prefix, TABLES["algorithms.lazy"] if prefix.startswith(
            "algorithms") else {})
        action = draw(st.sampled_from(["set", "set", "delete", "unknown"]))
        if action == "delete" and node:
            del node[draw(st.sampled_from(sorted(node)))]
        elif action == "unknown":
            node[draw(st.text(max_size=6))] = copy.deepcopy(draw(st.sampled_from(NASTY)))
        elif spec_table:
            key = draw(st.sampled_from(sorted(spec_table)))
            node[key] = draw(field_values(spec_table[key]) | st.sampled_from([None, object()]))
    return raw


@profiles
def test_random_raw_configs_are_accepted_or_one_config_error(profile):
    """:func:`parse_config` on mutated raw tables: a config or one one-line ConfigError."""

    @PROFILES[profile]
    @given(raw=mutated_raw())
    def check(raw):
        try:
            C.parse_config(raw)
        except C.ConfigError as e:
            assert str(e) and "\n" not in str(e), str(e)

    check()


# --- Damaged files -------------------------------------------------------------------------


@st.composite
def damaged(draw, good: bytes):
    """``good`` truncated, bit-flipped, partly overwritten, extended, or replaced by random
    bytes (never ``good`` itself)."""
    kind = draw(st.sampled_from(["truncate", "flip", "overwrite", "append", "random"]))
    if kind == "truncate":
        data = good[:draw(st.integers(0, len(good) - 1))]
    elif kind == "flip":
        data = bytearray(good)
        for pos in draw(st.lists(st.integers(0, len(good) - 1), min_size=1, max_size=8)):
            data[pos] ^= 1 << draw(st.integers(0, 7))
        data = bytes(data)
    elif kind == "overwrite":
        start = draw(st.integers(0, len(good) - 1))
        patch = draw(st.binary(min_size=1, max_size=64))[:len(good) - start]
        data = good[:start] + patch + good[start + len(patch):]
    elif kind == "append":
        data = good + draw(st.binary(min_size=1, max_size=64))
    else:
        data = draw(st.binary(max_size=256))
    return data if data != good else good[:-1]


def _files(folder) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


RUN = """
name = "fuzz-run"
seeds = 2
horizon = 40
record_every = 1
[problem]
structure = "blocks"
num_blocks = 1
block_dim = 2
[problem.theta]
distribution = "explicit"
values = [[-0.5, 0.3]]
[agent]
lambda_reg = 0.1
beta = 0.5
solver = "vertex"
[algorithms.lazy]
"""


def _quiet(*args, **kwargs):
    pass


@pytest.fixture(scope="module")
def run_folders(tmp_path_factory):
    """``(config path, ref, stopped)``: a 2-seed, 40-round run done whole into ``ref``, and in
    chunks of 20 stopped by a KeyboardInterrupt after the first chunk into ``stopped`` (its
    ``checkpoint.npz`` and ``config.json`` there)."""
    root = tmp_path_factory.mktemp("fuzz-run")
    path = root / "c.toml"
    path.write_text(RUN)
    cfg = C.load_config(path)
    experiment.run_config(cfg, root / "ref", log=_quiet, figures=False)

    def stop(name, horizon, seeds):
        def update(done, total):
            if done == 20:
                raise KeyboardInterrupt
        return update

    with pytest.raises(KeyboardInterrupt):
        experiment.run_config(cfg, root / "stopped", log=_quiet, figures=False, chunk_rounds=20,
                              progress=stop)
    assert (root / "stopped" / checkpoint.FILENAME).is_file()
    return path, root / "ref", root / "stopped"


def _same_arrays(a_dir, b_dir) -> None:
    with np.load(a_dir / "arrays.npz") as a, np.load(b_dir / "arrays.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def _resume_or_refuse(capsys, argv, out, ref) -> None:
    """``gsjax ARGV`` refuses in one line and changes no file of ``out``, or finishes the run
    with the uninterrupted run's arrays (the damage was in bytes no reader checks)."""
    before = _files(out)
    rc, stdout, err = _call(capsys, argv)
    event(f"rc {rc}")
    if rc == 0:
        assert (out / "summary.json").is_file() and not (out / checkpoint.FILENAME).exists()
        _same_arrays(ref, out)
    else:
        _one_line_refusal(rc, stdout, err)
        assert _files(out) == before, argv


@profiles
def test_damaged_checkpoint_resumes_or_is_refused_unchanged(profile, run_folders, tmp_path,
                                                            capsys):
    """A damaged ``checkpoint.npz``, on ``run --resume DIR`` and on ``run CONFIG --out DIR``."""
    path, ref, stopped = run_folders
    good = (stopped / checkpoint.FILENAME).read_bytes()

    @PROFILES[profile]
    @given(data=damaged(good), how=st.sampled_from(["resume", "out"]))
    def check(data, how):
        out = tmp_path / "out"
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(stopped, out)
        (out / checkpoint.FILENAME).write_bytes(data)
        argv = (["run", "--resume", str(out), "--quiet"] if how == "resume" else
                ["run", str(path), "--out", str(out), "--quiet", "--chunk", "20"])
        _resume_or_refuse(capsys, argv, out, ref)

    check()


@st.composite
def mutated_json(draw, good: bytes):
    """``config.json`` with a value replaced, a key deleted or added (somewhere in its tree),
    or its bytes damaged."""
    if draw(st.booleans()):
        return draw(damaged(good))
    raw = json.loads(good)
    tables = [raw]
    stack = [raw]
    while stack:
        for value in stack.pop().values():
            if isinstance(value, dict):
                tables.append(value)
                stack.append(value)
    node = draw(st.sampled_from(tables))
    action = draw(st.sampled_from(["set", "set", "delete", "unknown"]))
    if action == "delete" and node:
        del node[draw(st.sampled_from(sorted(node)))]
    elif action == "unknown":
        node[draw(st.text(max_size=6))] = copy.deepcopy(draw(st.sampled_from(NASTY)))
    elif node:
        key = draw(st.sampled_from(sorted(node)))
        spec = {"literals": [], "bounds": [], "types": [type(node[key])]}
        node[key] = draw(field_values(spec) | st.sampled_from([None, str(node[key])]))
    text = json.dumps(raw, indent=2).encode()
    return text if text != good else good[:-1]


@profiles
def test_damaged_config_json_resumes_or_is_refused_unchanged(profile, run_folders, tmp_path,
                                                             capsys):
    """A damaged or edited ``config.json`` on ``run --resume DIR``."""
    path, ref, stopped = run_folders
    good = (stopped / "config.json").read_bytes()

    @PROFILES[profile]
    @given(data=mutated_json(good))
    def check(data):
        out = tmp_path / "out"
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(stopped, out)
        (out / "config.json").write_bytes(data)
        _resume_or_refuse(capsys, ["run", "--resume", str(out), "--quiet"], out, ref)

    check()


# --- The tuner: its state file and its observations ----------------------------------------

TUNER = {
    "name": "fuzz-tuner", "seeds": 1, "horizon": 40, "dtype": "float32",
    "problem": {"structure": "blocks", "num_blocks": 3, "block_dim": 2,
                "theta": {"distribution": "normal", "seed": 2}},
    "agent": {"lambda_reg": 0.3, "beta": 0.5, "solver": "vertex"},
    "algorithms": {"lazy": {}},
}
K, N = 3, 6


@pytest.fixture(scope="module")
def tuner_state(tmp_path_factory):
    """``(state path, its bytes, suggest output, status output)`` of a fresh float32 learner
    (3 criteria, 6 coordinates), made by ``gsjax tuner init``."""
    root = tmp_path_factory.mktemp("fuzz-tuner")
    path = root / "cfg.toml"
    path.write_text("\n".join(
        [f"{k} = {_toml(v)}" for k, v in TUNER.items() if not isinstance(v, dict)]
        + [f"{k} = {_toml(v)}" for k, v in TUNER.items() if isinstance(v, dict)]))
    state = root / "learner.npz"
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["tuner", "init", str(path), str(state)]) == 0
    outputs = []
    for cmd in ("suggest", "status"):
        with contextlib.redirect_stdout(io.StringIO()) as buf:
            assert cli.main(["tuner", cmd, str(state)]) == 0
        outputs.append(buf.getvalue())
    return state, state.read_bytes(), *outputs


def _restore(state, good: bytes) -> None:
    state.write_bytes(good)
    state.with_name(state.name + ".prev").unlink(missing_ok=True)


@profiles
def test_damaged_tuner_state_is_refused_unchanged(profile, tuner_state, capsys):
    """A damaged state file under ``tuner status``, ``suggest`` and ``observe``: one line and
    the file as it was, or (damage in bytes no reader checks) the good state's answer."""
    state, good, suggested, status = tuner_state
    observe = ["observe", str(state), "--setting", suggested.strip(), "--losses", "[1, 2, 3]"]

    @PROFILES[profile]
    @given(data=damaged(good), cmd=st.sampled_from([["status", str(state)],
                                                    ["suggest", str(state)], observe]))
    def check(data, cmd):
        _restore(state, good)
        state.write_bytes(data)
        before = (state.read_bytes(), state.stat().st_mtime_ns)
        rc, out, err = _call(capsys, ["tuner", *cmd])
        event(f"{cmd[0]}: rc {rc}")
        if rc == 0:
            assert out == {"status": status, "suggest": suggested}.get(cmd[0], out), out
        else:
            _one_line_refusal(rc, out, err)
            assert (state.read_bytes(), state.stat().st_mtime_ns) == before
        _restore(state, good)

    check()


NUMBERS = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0, -0.1, 1.5, 1e39, -1e39, 3e38, 1e308, math.nan, math.inf,
                     -math.inf, 2 ** 70, 10 ** 400, True, None, "1", "", [], {}]),
    st.floats(), st.integers(-2 ** 80, 2 ** 80), st.floats(0.0, 1.0))


@st.composite
def vectors(draw, length: int):
    """A list of ``length`` numbers, one of another length, rows of them, or a non-list."""
    kind = draw(st.sampled_from(["ok", "ok", "numbers", "rows", "other"]))
    if kind == "ok":
        return draw(st.lists(st.floats(0.0, 1.0), min_size=length, max_size=length))
    if kind == "numbers":
        return draw(st.lists(NUMBERS, min_size=length, max_size=length)
                    | st.lists(NUMBERS, max_size=length + 2))
    if kind == "rows":
        return draw(st.lists(st.lists(NUMBERS | st.floats(0.0, 1.0), min_size=length,
                                      max_size=length + draw(st.integers(0, 1))), max_size=3))
    return draw(NUMBERS)


def _json(value) -> str:
    return json.dumps(value)  # NaN and Infinity as Python's json writes (and reads) them


@profiles
def test_random_observations_are_accepted_or_refused_unchanged(profile, tuner_state, capsys):
    """``tuner observe`` with random settings and losses (non-finite, over float32, huge ints,
    strings, wrong lengths, rows, invalid JSON): accepted, or one line and the state file as it
    was (bytes and modification time)."""
    state, good, suggested, _ = tuner_state

    @PROFILES[profile]
    @given(setting=vectors(N) | st.just("SUGGESTED"), losses=vectors(K),
           raw=st.sampled_from([None, None, None, "setting", "losses"]),
           text=st.text(max_size=8) | st.sampled_from(["[1, 2, " + "9" * 5000 + "]", "[1e999]"]),
           off=st.booleans())
    def check(setting, losses, raw, text, off):
        _restore(state, good)
        args = {"setting": suggested.strip() if setting == "SUGGESTED" else _json(setting),
                "losses": _json(losses)}
        if raw is not None:
            args[raw] = text
        argv = ["tuner", "observe", str(state), f"--setting={args['setting']}",
                f"--losses={args['losses']}", *(["--allow-off-policy"] if off else [])]
        before = (state.read_bytes(), state.stat().st_mtime_ns)
        rc, out, err = _call(capsys, argv)
        event(f"rc {rc}")
        if rc == 0:
            assert Tuner.load(state).rounds >= 1 and err == ""
        else:
            _one_line_refusal(rc, out, err)
            assert (state.read_bytes(), state.stat().st_mtime_ns) == before
        _restore(state, good)

    check()


@profiles
def test_random_observations_through_the_api(profile, tuner_state):
    """:meth:`Tuner.observe` with the same values: accepted (one more round) or a
    :class:`TunerError` that leaves the learner's rounds and arrays as they were."""
    state, *_ = tuner_state
    tuner = Tuner.load(state)

    @PROFILES[profile]
    @given(setting=vectors(N) | st.just("SUGGESTED"), losses=vectors(K), off=st.booleans())
    def check(setting, losses, off):
        setting = tuner.suggest().tolist() if setting == "SUGGESTED" else setting
        rounds = tuner.rounds
        leaves = [np.array(x) for x in jax.tree_util.tree_leaves(tuner._state)]
        try:
            tuner.observe(setting, losses, allow_off_policy=off)
        except TunerError as e:
            assert str(e) and "\n" not in str(e), str(e)
            assert tuner.rounds == rounds
            after = jax.tree_util.tree_leaves(tuner._state)
            for a, b in zip(leaves, after, strict=True):
                np.testing.assert_array_equal(a, np.asarray(b))
        else:
            assert tuner.rounds > rounds

    check()


# --- Regression tests of the defects the fuzz found ----------------------------------------

HUGE_INT = "1" * 5000  # over Python's 4300-digit limit of int(str): int() raises ValueError


def test_an_integer_over_the_digit_limit_is_one_config_error(base_files, tmp_path, capsys):
    """tomllib raises a plain ValueError (not TOMLDecodeError) for an integer of more than
    4300 digits: in a ``--set`` value it is taken as text (then refused by the field's type),
    in a config file it is invalid TOML; both one line, exit 2."""
    path = base_files["blocks"]
    rc, out, err = _call(capsys, ["check", str(path), f"--set=seeds={HUGE_INT}"])
    _one_line_refusal(rc, out, err)
    assert err.startswith("error: seeds: expected an integer, got str '111"), err[:80]
    big = tmp_path / "big.toml"
    big.write_text(path.read_text().replace("seeds = 2", f"seeds = {HUGE_INT}"))
    rc, out, err = _call(capsys, ["check", str(big)])
    _one_line_refusal(rc, out, err)
    assert err.startswith(f"error: <file>: invalid TOML in {str(big)!r}: ") and "4300" in err


def test_observations_beyond_float64_are_one_line(tuner_state, capsys):
    """An integer beyond float64 (10**400: OverflowError in NumPy) and one over the digit limit
    of JSON (``json.loads`` raises a plain ValueError) are one line, exit 2, state unchanged."""
    state, good, suggested, _ = tuner_state
    _restore(state, good)
    before = (state.read_bytes(), state.stat().st_mtime_ns)
    for losses, needle in ((f"[1, 2, {10 ** 400}]", "error: losses: "),
                           (f"[1, 2, {HUGE_INT}]", "error: --losses: not valid JSON")):
        rc, out, err = _call(capsys, ["tuner", "observe", str(state), "--setting",
                                      suggested.strip(), "--losses", losses])
        _one_line_refusal(rc, out, err)
        assert err.startswith(needle), err[:80]
        assert (state.read_bytes(), state.stat().st_mtime_ns) == before
    with pytest.raises(TunerError, match="losses"):
        Tuner.load(state).observe(json.loads(suggested), [1.0, 2.0, 10 ** 400])


@pytest.mark.parametrize("field, value", [("seeds", 10 ** 5000), ("horizon", -(10 ** 5000)),
                                          ("root_seed", 10 ** 5000)],
                         ids=["seeds", "horizon", "root_seed"])  # str() of the ints fails
def test_an_integer_over_the_digit_limit_in_a_python_dict(base_files, field, value):
    """Python API only (TOML and JSON refuse such ints before gsjax sees them): the message
    used to format the value, and ``str`` of an int over 4300 digits raises ValueError."""
    raw = tomllib.loads(base_files["blocks"].read_text())
    raw[field] = value
    with pytest.raises(C.ConfigError, match=rf"^{field}: .*got an integer of about 500[01] digits$"):
        C.parse_config(raw)
