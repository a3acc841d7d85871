"""The DP's solvers under ``vmap``: their own batching rules (seed axis last) against JAX's default.

    python benchmarks/dp_batching.py                   # about 2 minutes on 2 CPU cores
    python benchmarks/dp_batching.py --n 10000 --graphs ring chain tree --seeds 100 --repeats 5
    python benchmarks/dp_batching.py --plan sequential --n 1000 --graphs grid ring --repeats 5
    python benchmarks/dp_batching.py --plan min_fill --n 10000 --graphs grid --seeds 4 --repeats 9
    python benchmarks/dp_batching.py --plan min_fill --triggers 16 --n 10000 --graphs grid --seeds 25

:func:`gsjax.dp.minimise` on a level plan calls one solver with a batching rule
(``jax.custom_batching.custom_vmap``): under ``vmap`` the seed axis goes last, so the levels'
static gathers copy rows of contiguous seeds. The contender is the same function batched by
JAX's default rules (``solver.fun``: the seed axis leading, every gather a per-entry loop), which
is what gsjax ran before. ``--seeds`` random objectives (``benchmarks/dp.py``'s ``_case``) per
jitted ``vmap``, all coordinates free; compiled apart (first call), alternated repetition by
repetition in one process (``benchmarks/timing.py``), medians; the answers checked identical.
Run with ``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=`` (see ``benchmarks/dp.py``).
Writes ``benchmarks/results/dp_batching.json``.

``--plan sequential`` (the plan of ``exact_ties=True``, one ``lax.scan`` step a coordinate: the
grid's, whose levels do not shrink; ``--graphs grid --n 1000``): the same two contenders, plus
``before``: the sequential DP as gsjax ran it until 2026-12-03 (kept below, :func:`_before`),
the whole bucket table of ``n 2^(w+1)`` entries a seed built up front, then the scan, under
JAX's default batching; and ``whole table``: gsjax's seed-last DP as it ran until 2026-12-04
(:func:`_whole_table`), every variable's bucket kept in a table of ``(n + 1) 2^(w+1)`` entries
a seed, zero-filled for every solve, where gsjax now keeps a few pending rows and the
back-tracking's gains. Each takes the criteria's term tables
(:func:`gsjax.dp._criterion_tables`, computed once outside the timed calls); ``--seeds 4 --n
10000 --graphs grid`` is the size of the Section 5.1 grid's solve at 10^4 nodes. ``--plan
min_fill`` (the sequential plan of ``exact_ties=False``, which those runs use: the criteria's
tables multiplied out inside the solver) times gsjax, default vmap and ``whole table``.
Writes ``benchmarks/results/dp_batching_PLAN.json`` for the sequential plans.

``--triggers T`` (with ``--plan min_fill``): each seed's free coordinates are the scopes of
``T`` random criteria (an async round's re-solve; in the grid's async run at 10^4 nodes about
16 criteria a seed trigger in an average round, fewer late in the run), and the contenders are
gsjax (its active path: :func:`gsjax.dp._active_batched`) and ``whole scan``
(:func:`gsjax.dp._scan_batched`, what gsjax ran for it before 2026-12-05). Their bits may
differ on near ties (the active path drops constant terms): each answer's LCB is checked, in
float64, to be no higher than the whole scan's up to float32 rounding. Writes
``dp_batching_min_fill_async.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from dp import _case
from gsjax import dp, lcb
from timing import interleave, machine


def _before(plan, tables):
    """The sequential plan's DP of one objective as gsjax ran it until 2026-12-03 (the whole
    bucket table up front, messages scatter-added; for JAX's default batching)."""
    n, dtype = plan.num_coords, tables.dtype
    placed = jnp.take_along_axis(tables, jnp.asarray(plan.term), axis=1)  # (k, 2^W)
    placed = jnp.concatenate([placed, jnp.zeros((1, placed.shape[1]), dtype)])
    buckets = jnp.sum(placed[jnp.asarray(plan.crit)], axis=1)
    buckets = jnp.concatenate([buckets, jnp.zeros((1, buckets.shape[1]), dtype)])

    def eliminate(tab, step):
        v, p, gather = step
        message = jnp.min(tab[v].reshape(-1, 2), axis=1)
        return tab.at[p].add(message[gather]), None

    order = plan.order
    tab, _ = jax.lax.scan(eliminate, buckets, (jnp.asarray(order), jnp.asarray(plan.parent[order]),
                                               jnp.asarray(plan.msg[order])))
    best = tab[n, 0]
    tol = 64 * jnp.finfo(dtype).eps * jnp.maximum(1.0, jnp.abs(best))
    weights = jnp.asarray(1 << np.arange(plan.width), jnp.int32)

    def assign(carry, step):
        x, reached = carry
        v, sep = step
        r = jnp.sum(x[sep] * weights)
        gain = jnp.maximum(tab[v, 2 * r] - tab[v, 2 * r + 1], 0.0)
        zero = reached + gain <= best + tol
        x = x.at[v].set(jnp.where(zero, 0, 1))
        return (x, jnp.where(zero, reached + gain, reached)), None

    down = plan.backtrack
    (x, _), _ = jax.lax.scan(assign, (jnp.zeros((n + 1,), jnp.int32), best),
                             (jnp.asarray(down, jnp.int32), jnp.asarray(plan.clique[down, 1:])))
    return x[:n]


def _whole_table(plan, pt, *args):
    """gsjax's sequential DP of ``B`` objectives (batch axis last) as it ran until 2026-12-04:
    the scan's carry a ``(n + 1, 2^(w+1), B)`` table of every variable's bucket, zero-filled,
    which the back-tracking reads."""
    tables = args[0] if plan.exact_ties else dp._terms(pt, *args)
    n, dtype = plan.num_coords, tables.dtype
    width = tables.shape[-1]
    flat = jnp.concatenate([tables.reshape(-1, width), jnp.zeros((1, width), dtype)])

    def bucket(u):
        crit = jax.lax.dynamic_index_in_dim(pt["crit"], u, keepdims=False)
        return jnp.sum(dp._take(flat, dp._take(pt["offset"], crit)), axis=0)

    def row(tab, u, touched):
        return jax.lax.cond(touched, lambda: jax.lax.dynamic_index_in_dim(tab, u, keepdims=False),
                            lambda: bucket(u))

    def eliminate(tab, step):
        v, p, gather, v_touched, p_touched = step
        own = row(tab, v, v_touched)
        tab = jax.lax.dynamic_update_index_in_dim(tab, own, v, 0)
        message = jnp.min(own.reshape(-1, 2, width), axis=1)
        into = row(tab, p, p_touched) + dp._take(message, gather)
        return jax.lax.dynamic_update_index_in_dim(tab, into, p, 0), None

    tab = jnp.zeros((n + 1, pt["offset"].shape[-1], width), dtype)
    tab, _ = jax.lax.scan(eliminate, tab, (pt["order"], pt["parent"], pt["msg"],
                                           pt["v_touched"], pt["p_touched"]))
    best = tab[n, 0]
    tol = 64 * jnp.finfo(dtype).eps * jnp.maximum(1.0, jnp.abs(best))
    weights = (1 << jnp.arange(plan.width, dtype=jnp.int32))[:, None]

    def assign(carry, step):
        x, reached = carry
        v, sep = step
        r = jnp.sum(dp._take(x, sep) * weights, axis=0)[None]
        tv = jax.lax.dynamic_index_in_dim(tab, v, keepdims=False)
        gain = jnp.maximum(jnp.take_along_axis(tv, 2 * r, axis=0, mode="promise_in_bounds")
                           - jnp.take_along_axis(tv, 2 * r + 1, axis=0,
                                                 mode="promise_in_bounds"), 0.0)[0]
        zero = reached + gain <= best + tol
        x = jax.lax.dynamic_update_index_in_dim(x, jnp.where(zero, 0, 1).astype(x.dtype), v, 0)
        return (x, jnp.where(zero, reached + gain, reached)), None

    x0 = jnp.zeros((n + 1, width), jnp.int32)
    (x, _), _ = jax.lax.scan(assign, (x0, best), (pt["down"], pt["sep"]))
    return x[:n]


def _lcb(scopes, theta, inv, beta, s) -> np.ndarray:
    """(seeds,) the LCB of states ``s`` (seeds, n), float64 NumPy."""
    theta, inv, beta = (np.asarray(a, np.float64) for a in (theta, inv, beta))
    phi = np.where(scopes.mask, np.asarray(s, np.float64)[..., scopes.index], 0.0)
    q = np.einsum("ski,skij,skj->sk", phi, inv, phi)
    return (np.sum(phi * theta, -1) - beta * np.sqrt(np.maximum(q, 1e-12))).sum(-1)


def _async_free(scopes, seeds: int, triggers: int) -> jax.Array:
    """(seeds, n) the coordinates of the scopes of ``triggers`` random criteria per seed free
    (an async round's re-solve), drawn with NumPy seed 0."""
    rng = np.random.default_rng(0)
    free = np.zeros((seeds, scopes.num_coords), bool)
    index, mask = np.asarray(scopes.index), np.asarray(scopes.mask)
    for i in range(seeds):
        crit = rng.choice(index.shape[0], triggers, replace=False)
        free[i, index[crit][mask[crit]]] = True
    return jnp.asarray(free)


def bench(n: int, graph: str, seeds: int, repeats: int, plan_kind: str = "levels",
          triggers: int = 0) -> dict:
    scopes, structure, problem, (theta, inv, beta, s0) = _case(n, seeds, graph=graph)
    free = (_async_free(scopes, seeds, triggers) if triggers else jnp.ones(s0.shape, bool))
    if plan_kind == "levels":
        plan = dp.make_plan(scopes, exact_ties=False, levels=True)
        solver = dp._level_solver(plan)
        args = (dp._level_tables(plan), free, s0, theta, inv, beta)
        axes = (None, 0, 0, 0, 0, 0)
        fns = {"seed axis last (gsjax)": jax.jit(jax.vmap(solver, in_axes=axes)),
               "default vmap": jax.jit(jax.vmap(solver.fun, in_axes=axes))}
    else:
        plan = dp.make_plan(scopes, exact_ties=plan_kind == "sequential", levels=False)
        solver = dp._sequential_solver(plan)
        if plan.exact_ties:
            args = (jax.jit(jax.vmap(lambda th, iv, bt, s, fr: dp._criterion_tables(
                plan, lcb.node_objective(structure, problem, th, iv, bt).terms, s, fr)))(
                theta, inv, beta, s0, free),)
        else:
            args = (free, s0, theta, inv, beta)
        args = (dp._sequential_tables(plan), *args)
        axes = (None,) + (0,) * (len(args) - 1)
        fns = {"seed axis last (gsjax)": jax.jit(jax.vmap(solver, in_axes=axes)),
               "default vmap": jax.jit(jax.vmap(solver.fun, in_axes=axes)),
               "whole table": jax.jit(jax.vmap(dp._batched_solver(functools.partial(
                   _whole_table, plan)), in_axes=axes))}
        if triggers:  # gsjax's active path against its whole scan
            fns = {"seed axis last (gsjax)": fns["seed axis last (gsjax)"],
                   "whole scan": jax.jit(jax.vmap(dp._batched_solver(functools.partial(
                       dp._scan_batched, plan)), in_axes=axes))}
        if plan.exact_ties:
            fns["before"] = jax.jit(jax.vmap(lambda _, t: _before(plan, t), in_axes=axes))
    first, outs = {}, {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        outs[name] = np.asarray(jax.block_until_ready(fn(*args)))
        first[name] = time.perf_counter() - t0
    for name in fns:
        if triggers:  # the active path drops constants: a minimiser, not the same bits
            ours, theirs = (_lcb(scopes, theta, inv, beta, np.where(free, outs[x], s0))
                            for x in ("seed axis last (gsjax)", name))
            assert np.all(ours <= theirs + 1e-5 * np.maximum(1.0, np.abs(theirs))), name
        else:
            np.testing.assert_array_equal(outs[name], outs["seed axis last (gsjax)"])
    t = interleave({name: (lambda fn=fn: jax.block_until_ready(fn(*args)))
                    for name, fn in fns.items()}, repeats)
    row = {"graph": graph, "n": n, "seeds": seeds, "plan": plan_kind, "triggers": triggers,
           "levels": len(plan.levels) if plan.levels is not None else None, "width": plan.width,
           **{name: {"ms": 1e3 * t[name]["wall_median"],
                     "compile_s": max(first[name] - t[name]["wall_median"], 0.0)}
              for name in fns}}
    other = "whole scan" if triggers else "default vmap"
    row["ratio"] = row[other]["ms"] / row["seed axis last (gsjax)"]["ms"]
    if "before" in fns:
        row["ratio_before"] = row["before"]["ms"] / row["seed axis last (gsjax)"]["ms"]
    if "whole table" in fns:
        row["ratio_whole"] = row["whole table"]["ms"] / row["seed axis last (gsjax)"]["ms"]
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[10000])
    ap.add_argument("--graphs", nargs="+", default=["ring", "chain", "tree"])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--plan", choices=["levels", "sequential", "min_fill"], default="levels")
    ap.add_argument("--triggers", type=int, default=0,
                    help="with --plan min_fill: free the scopes of this many random criteria "
                         "per seed (an async re-solve), gsjax's active path against its whole "
                         "scan (default 0: every coordinate free)")
    args = ap.parse_args(argv)
    if args.triggers and args.plan != "min_fill":
        ap.error("--triggers needs --plan min_fill (the active path's plan)")
    rows = []
    before, whole = args.plan == "sequential", args.plan != "levels" and not args.triggers
    other = "whole scan" if args.triggers else "default vmap"
    print(f"| graph | n | plan | levels | width | seed axis last ms | {other} ms | ratio |"
          + (" whole table ms | ratio |" if whole else "")
          + (" before ms | ratio |" if before else ""))
    print("|---|---|---|---|---|---|---|---|" + "---|---|" * (whole + before))
    for n in args.n:
        for graph in args.graphs:
            r = bench(n, graph, args.seeds, args.repeats, args.plan, args.triggers)
            rows.append(r)
            print(f"| {graph} | {n} | {args.plan} | {r['levels'] or '-'} | {r['width']} | "
                  f"{r['seed axis last (gsjax)']['ms']:.1f} | {r[other]['ms']:.1f} | "
                  f"{r['ratio']:.2f}× |"
                  + (f" {r['whole table']['ms']:.1f} | {r['ratio_whole']:.2f}× |" if whole else "")
                  + (f" {r['before']['ms']:.1f} | {r['ratio_before']:.2f}× |" if before else ""),
                  flush=True)
    os.makedirs("benchmarks/results", exist_ok=True)
    name = ("dp_batching.json" if args.plan == "levels" else
            f"dp_batching_{args.plan}{'_async' if args.triggers else ''}.json")
    with open(f"benchmarks/results/{name}", "w") as f:
        json.dump({"machine": machine(), "seeds": args.seeds, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
