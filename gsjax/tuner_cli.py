"""``gsjax tuner init|suggest|query|observe|status``: the tuners of :mod:`gsjax.tuner` from a shell.

Bandit configs observe ``--losses`` (one per criterion) at the suggested setting; ``kind =
"oco"`` configs observe ``--gradient`` at the point ``query`` prints, with ``--setting`` the
deployed setting. The state file is read and written under a lock (``STATE.lock``: exclusive
for writes, so concurrent observations are serialised and none is lost). Every bad input exits
with status 2 and a one-line ``error: FIELD: MESSAGE``, leaving the state file unchanged.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

from gsjax.tuner import OGDTuner, TunerError, load, open_config

__all__ = ["add_parser"]


@contextlib.contextmanager
def _locked(state, exclusive: bool):
    lock_path = Path(str(state) + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _json_arg(text: str, field: str):
    try:
        return json.loads(text)
    except ValueError as e:  # JSONDecodeError, or an int over Python's 4300-digit limit
        why = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
        raise TunerError(field, f"not valid JSON ({why}): {text!r}") from None


def _read(state):
    with _locked(state, exclusive=False):
        return load(state)


def _cmd_init(args) -> int:
    state = Path(args.state)
    with _locked(state, exclusive=True):
        if state.exists() and not args.force:
            raise TunerError("STATE", f"{state} exists; pass --force to start it afresh")
        tuner = open_config(args.config, algorithm=args.algorithm, seed=args.seed,
                            overrides=list(args.set or []), budget_index=args.budget_index)
        tuner.save(state)
    info = {"state": str(state), "algorithm": tuner.algorithm, "kind": tuner.kind,
            "coordinates": tuner.num_coords, "suggested": tuner.suggest().tolist()}
    if isinstance(tuner, OGDTuner):
        info.update(components=tuner.num_components, query=tuner.query().tolist())
    else:
        info.update(criteria=tuner.num_criteria)
    print(json.dumps(info))
    return 0


def _cmd_suggest(args) -> int:
    print(json.dumps(_read(args.state).suggest().tolist()))
    return 0


def _cmd_query(args) -> int:
    tuner = _read(args.state)
    if not isinstance(tuner, OGDTuner):
        raise TunerError("query", f"{tuner.kind} observes losses at the suggested setting; "
                                  f"query is for the OGD family (gradients)")
    print(json.dumps(tuner.query().tolist()))
    return 0


def _cmd_observe(args) -> int:
    setting = _json_arg(args.setting, "--setting")
    with _locked(args.state, exclusive=True):
        tuner = load(args.state)
        ogd = isinstance(tuner, OGDTuner)
        want, other = ("gradient", "losses") if ogd else ("losses", "gradient")
        what = "the loss gradient at the query point" if ogd else "one loss per criterion"
        if getattr(args, want) is None or getattr(args, other) is not None:
            raise TunerError(f"--{want}", f"{tuner.kind} observes {what}: pass --{want} "
                                          f"(not --{other})")
        values = _json_arg(getattr(args, want), f"--{want}")
        out = tuner.observe(setting, values, allow_off_policy=args.allow_off_policy)
        tuner.save(args.state)
    print(json.dumps(out))
    return 0


def _cmd_status(args) -> int:
    print(json.dumps(_read(args.state).status(), indent=None if args.compact else 2))
    return 0


def add_parser(sub) -> None:
    """Add ``tuner`` and its subcommands to the ``gsjax`` subparsers."""
    t = sub.add_parser("tuner", help="ask/tell tuning of a live system (state kept in a file)")
    ts = t.add_subparsers(dest="tuner_command", required=True)

    def command(name, func, what, *positionals):  # positionals: (name, help); default: state
        p = ts.add_parser(name, help=what)
        for arg, arg_help in positionals or (("state", None),):
            p.add_argument(arg, help=arg_help)
        p.set_defaults(func=func)
        return p

    i = command("init", _cmd_init, "create a learner from a config",
                ("config", "config path or built-in name"), ("state", "state file to create"))
    i.add_argument("--algorithm", help="algorithm entry of the config (default: the first)")
    i.add_argument("--seed", type=int, default=0, help="the learner's seed id (default 0)")
    i.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    i.add_argument("--force", action="store_true", help="overwrite an existing state file")
    i.add_argument("--budget-index", type=int, default=0,
                   help="OGD configs: which of the entry's budgets (default 0)")

    command("suggest", _cmd_suggest, "print the setting to deploy (JSON list)")

    o = command("observe", _cmd_observe, "add the losses measured at a setting")
    o.add_argument("--setting", required=True, help="JSON list of n values (or a list of rows)")
    o.add_argument("--losses", help="JSON list of k losses (or a list of rows): bandit configs")
    o.add_argument("--gradient", help="JSON list of n partial derivatives at the query point "
                                      "(or a list of rows): OGD configs")
    o.add_argument("--allow-off-policy", action="store_true",
                   help="accept a setting other than the suggested one")

    command("query", _cmd_query, "OGD: where to measure this round's loss gradient")

    st = command("status", _cmd_status, "rounds, updates, movement, estimates and confidence")
    st.add_argument("--compact", action="store_true", help="one-line JSON")
