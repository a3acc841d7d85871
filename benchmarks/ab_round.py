"""One change to the round at a time, A/B: the same gsjax sweep before and after it.

    python benchmarks/ab_round.py --change noise --kind lazy     # section7_2, S = 1024, T = 400
    python benchmarks/ab_round.py --change problem --kind linucb --repeats 9
    python benchmarks/ab_round.py --change inverse --kind async_lazy
    python benchmarks/ab_round.py --change vertex_write --kind linucb
    python benchmarks/ab_round.py --change shared --kind async_lazy
    python benchmarks/ab_round.py --change noise_inplace --kind linucb
    python benchmarks/ab_round.py --change noise_packed --kind lazy

Each change rebuilds the program as it was before it (A) beside gsjax's (B); outputs are checked
equal bit for bit, then the calls are alternated repetition by repetition in this process
(A B B A ...), compile apart; medians of wall and process CPU time.

* ``inverse`` (2026-12-02): ridge statistics refreshed every round keep no ``V^{-1}`` in the
  round-to-round state (:func:`gsjax.linalg.inverse` recomputes it where the solver reads it);
  A patches :func:`gsjax.algorithms.kernel.ridge_init` to carry it.
* ``noise`` (2026-12-02): :func:`gsjax.philox.normals` computes ``erfinv`` once, in a one-trip
  ``while_loop``; A is the plain transform, which XLA fuses into every consumer.
* ``problem`` (2026-12-02): a problem drawn per seed keeps the structure's fields once
  (:data:`gsjax.problem.DRAW_AXES`); A repeats every field per seed, as drawn before. This one
  runs the built ``configs/section7_2.toml`` (theta drawn per seed), the others the workload of
  ``benchmarks/workloads.py`` (one theta).
* ``vertex_write`` (2026-12-02): the vertex solver on disjoint blocks writes each block's choice
  into the state by a gather whose indices depend on the structure only; A is the scatter it
  replaced (on CPU a loop of one trip per scope entry, 2k per solve).
* ``union`` (2026-12-02): async's union of the triggering criteria's scopes reads disjoint
  scopes by a gather (:func:`gsjax.lcb.scope_slots`); A is the scatter-max it replaced.
* ``bonus`` (2026-12-04): the LCB's norm ``phi^T V^{-1} phi`` (:func:`gsjax.lcb._bonus`) as two
  element-wise products and sums; A is the ``einsum`` it replaced, which XLA CPU lowers to a
  small batched dot with a transposed copy of ``V^{-1}`` in front.
* ``noise_axis`` (2026-12-04, tried and dropped): A draws the round's Philox words with the
  blocks on one array axis (``gsjax.philox.UNROLLED_BLOCKS = 0``, one fusion for the normals,
  fewer kernels), B is gsjax's one array per word; a speed-up above 1 is gsjax's lead.
* ``noise_packed`` (2026-12-05, tried and dropped): A runs Philox's rounds on two ``uint64``
  lanes per block (``c0:c1`` and ``c2:c3``: a round is one multiply, two shifts and two xors
  per lane, the same words bit for bit), half the arrays of gsjax's four ``uint32`` words; B is
  gsjax's; a speed-up above 1 is gsjax's lead.
* ``noise_inplace`` (2026-12-04): :func:`gsjax.philox.normals`' one-trip loop reads the Philox
  words and makes the uniforms itself; A hands it the uniforms, which XLA may overwrite with
  the normals in place (LinUCB's program does), where LLVM's vectorised loop takes its scalar
  fallback.
* ``elementwise`` (2026-12-04): :func:`gsjax.linalg.apply` writes ``V^{-1} x`` (the ridge
  estimate, the rank-one update's ``V^{-1} x``) as element-wise products and a sum, and the 2x2
  closed-form inverse is built by selects (:func:`gsjax.linalg._inverse2`); A is the matrix
  products (dot kernels) and the stacked inverse they replaced.
* ``first_min`` (2026-12-04): :func:`gsjax.lcb.first_min` finds the first index within the
  tolerance as the least passing index (a plain min); A is the ``argmax`` of the mask it
  replaced (a two-output reduce).
* ``shared`` (2026-12-03): ``lazy`` and ``async_lazy`` decide with traced flags
  (:func:`gsjax.algorithms.base.with_reference`: the reference reading and per-criterion), as
  the command line runs them, so both are one compiled program; A is the static program of
  ``--kind`` (what the cost of sharing is measured against).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import jax  # noqa: E402

jax.config.update("jax_enable_x64", False)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import workloads as W  # noqa: E402
from gsjax import config, experiment, lcb, linalg, philox, runner  # noqa: E402
from gsjax import algorithms  # noqa: E402
from gsjax.algorithms import HARD, AgentSpec, kernel  # noqa: E402
from gsjax.algorithms.base import with_reference  # noqa: E402
from gsjax.problem import seed_rows  # noqa: E402


def _plain_normals(root, seed_id, round_, num, stream=0, precision="float32"):
    u = philox.uniforms(root, seed_id, round_, num, stream, precision)
    return math.sqrt(2.0) * jax.lax.erf_inv(2.0 * u - 1.0)


def _packed_philox(counter, key, rounds=philox.ROUNDS):
    """:func:`gsjax.philox.philox4x32` on two ``uint64`` lanes, ``p = c0:c1``, ``q = c2:c3``:
    ``c0' = hi(c2 M1) ^ c1 ^ k0, c1' = lo(c2 M1)`` is ``p' = (q >> 32) M1 ^ ((p ^ k0) << 32)``
    (the key's carry out of the low half is shifted out), and likewise for ``q``."""
    u32, u64 = jnp.uint32, jnp.uint64
    with jax.enable_x64(True):
        c0, c1, c2, c3 = (jnp.asarray(c, u32).astype(u64) for c in counter)
        k0, k1 = (jnp.asarray(k, u32).astype(u64) for k in key)
        p, q = (c0 << 32) | c1, (c2 << 32) | c3
        for r in range(rounds):
            if r:
                k0, k1 = k0 + u64(philox.WEYL[0]), k1 + u64(philox.WEYL[1])
            p, q = (((q >> 32) * u64(philox.MULTIPLIERS[1])) ^ ((p ^ k0) << 32),
                    ((p >> 32) * u64(philox.MULTIPLIERS[0])) ^ ((q ^ k1) << 32))
        return (p >> 32).astype(u32), p.astype(u32), (q >> 32).astype(u32), q.astype(u32)


def _inplace_normals(root, seed_id, round_, num, stream=0, precision="float32"):
    # the uniforms as gsjax made them before: word by word, then stacked (float32 draws)
    u = jnp.stack([philox._uniform32(w) for w in philox._words(root, seed_id, round_, stream,
                                                                num)])

    def transform(c):
        return c[0] + 1, math.sqrt(2.0) * jax.lax.erf_inv(2.0 * u - 1.0)

    trips = jnp.max(jnp.asarray(round_, jnp.uint32) >> 31) + 1
    return jax.lax.while_loop(lambda c: c[0] < trips, transform,
                              (jnp.zeros((), jnp.uint32), jnp.zeros_like(u)))[1]


_real_vertices = lcb.minimise_vertices


def _scatter_vertices(objective, s_init, free, pick=lcb.first_pick):
    """:func:`gsjax.lcb.minimise_vertices` on disjoint blocks as it was: a scatter."""
    bl = objective.blocks
    if bl is None:
        return _real_vertices(objective, s_init, free, pick)
    bits = jnp.asarray(lcb.bit_table(bl.scopes.shape[1]), s_init.dtype)

    def per_block(idx, smask, th, iv, bt):
        verts = lcb._vertices_from_free(bits, s_init[idx], free[idx] & smask)
        return pick(lcb.lcb_terms(jnp.where(smask, verts, 0.0), th, iv, bt), verts)

    best, vals = jax.vmap(per_block)(bl.scopes, bl.scope_mask, bl.theta_hat, bl.inv, bl.beta)
    n = s_init.shape[-1]
    tgt = jnp.where((bl.scope_mask & free[bl.scopes]).reshape(-1), bl.scopes.reshape(-1), n)
    s = jnp.concatenate([s_init, jnp.zeros((1,), s_init.dtype)]).at[tgt].set(best.reshape(-1))
    return s[:-1], jnp.sum(vals), jnp.zeros((), s_init.dtype)


def _einsum_bonus(phi, inv):
    """:func:`gsjax.lcb._bonus` as it was: one ``einsum``."""
    q = jnp.einsum("...i,...ij,...j->...", phi, inv, phi)
    return jnp.sqrt(jnp.maximum(q, lcb._TINY))


def _scatter_union(truth, scopes, mask, n, slots=None):
    """The hard union as it was: a scatter-max whatever the scopes."""
    hit = (truth[:, None] & mask).astype(jnp.int32).reshape(-1)
    return jnp.zeros((n,), jnp.int32).at[scopes.reshape(-1)].max(hit) > 0


def _matmul_apply(inv, x):
    """:func:`gsjax.linalg.apply` as it was: a (batched) matrix product."""
    return jnp.matmul(inv, x[..., None])[..., 0]


def _stacked_inverse2(a, b, c, lam, det):
    """The 2x2 closed-form inverse as it was: stacked."""
    return jnp.stack([jnp.stack([c + lam, -b]), jnp.stack([-b, a + lam])]) / det


def _sherman_morrison(inv, x):
    """:func:`gsjax.linalg.sherman_morrison` as it was: matrix products."""
    u = inv @ x
    return linalg.symmetrize(inv - jnp.outer(u, u) / (1.0 + x @ u))


def _argmax_first_min(values):
    """:func:`gsjax.lcb.first_min` as it was: an ``argmax`` of the mask."""
    m = jnp.min(values)
    tol = 64 * jnp.finfo(values.dtype).eps * jnp.maximum(1.0, jnp.abs(m))
    return jnp.argmax(values <= m + tol)


def _patched(change: str):
    """``[(module, name, replacement)]`` that rebuilds the program before ``change`` (``None``
    for ``problem``: its "before" is a problem, not code)."""
    if change in ("problem", "shared"):
        return None
    if change == "elementwise":
        return [(linalg, "apply", _matmul_apply), (linalg, "_inverse2", _stacked_inverse2),
                (linalg, "sherman_morrison", _sherman_morrison),
                (linalg, "logdet_increment", lambda inv, x: jnp.log1p(x @ inv @ x))]
    return [_one(change)]


def _one(change: str):
    """The one patch of a change other than ``elementwise``."""
    if change == "first_min":
        return lcb, "first_min", _argmax_first_min
    if change == "inverse":
        real = kernel.ridge_init
        return kernel, "ridge_init", lambda params, problem, d, carry_inverse=True: real(
            params, problem, d, True)
    if change == "union":
        return algorithms, "HARD", HARD._replace(union=_scatter_union)
    if change == "vertex_write":
        return lcb, "minimise_vertices", _scatter_vertices
    if change == "bonus":
        return lcb, "_bonus", _einsum_bonus
    if change == "noise_axis":
        return philox, "UNROLLED_BLOCKS", 0
    if change == "noise_inplace":
        return philox, "normals", _inplace_normals
    if change == "noise_packed":
        return philox, "philox4x32", _packed_philox
    return philox, "normals", _plain_normals


def _workload(change: str, kind: str, seeds: int):
    """``(structure, algo factory, problem, per_seed, params, move_cost)``."""
    if change != "problem":
        w = W.section7_2()
        return (w["structure"], lambda: algorithms.make(kind, w["structure"],
                                                         AgentSpec(**w["spec"]), algorithms.HARD),
                w["problem"], False, W.params(w), jnp.float32(w["move_cost"]))
    cfg = dataclasses.replace(config.load_config("section7_2"), seeds=seeds)
    b = experiment.build(cfg)
    ba = next(a for a in b.algorithms if a.name == kind)
    return (b.structure, lambda: ba.algo, b.problem, True, ba.params,
            jnp.asarray(ba.move_cost, b.dtype))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--change", default="noise",
                    choices=("inverse", "noise", "problem", "vertex_write", "union", "shared",
                             "bonus", "noise_axis", "noise_packed", "noise_inplace",
                             "elementwise", "first_min"))
    ap.add_argument("--kind", default="lazy")
    ap.add_argument("--seeds", type=int, default=1024)
    ap.add_argument("--horizon", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args(argv)
    S, T = args.seeds, args.horizon
    structure, algo, problem, per_seed, p, mc = _workload(args.change, args.kind, S)
    keys = runner.seed_keys(jax.random.key(0), jnp.arange(S, dtype=jnp.uint32))

    def build(before: bool):
        prob = problem
        if before and args.change == "problem":  # every field with the seed axis
            prob = seed_rows(problem, np.zeros(S, int))._replace(
                **{f: getattr(problem, f) for f in ("theta", "s_star", "loss_star",
                                                   "s_star_residual", "rff_omega", "rff_phase")})
        params = p
        if args.change == "shared" and not before:
            params = with_reference(p, AgentSpec(), per_criterion=args.kind == "async_lazy")
        patch = (_patched(args.change) if before else None) or []
        real = [getattr(m, n) for m, n, _ in patch]
        for m, n, v in patch:
            setattr(m, n, v)
        try:
            a = algo()
            fn = runner.make_sweep(a, structure, T, record_every=T, compact=not a.always_solves,
                                   buffer=max(2, S // 16), problem_per_seed=per_seed)
            compiled = fn.lower(keys, prob, params, mc).compile(runner.compiler_options())
            return lambda: jax.block_until_ready(compiled(keys, prob, params, mc))
        finally:
            for (m, n, _), v in zip(patch, real):
                setattr(m, n, v)

    calls = {"before": build(True), f"{args.change} (gsjax)": build(False)}
    outs = [jax.tree.leaves(c()) for c in calls.values()]
    if not all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(*outs)):
        print("outputs differ")
        return 1
    wall = {n: [] for n in calls}
    cpu = {n: [] for n in calls}
    order = list(calls)
    for r in range(args.repeats):
        for n in (order if r % 2 == 0 else order[::-1]):
            t0, c0 = time.perf_counter(), time.process_time()
            calls[n]()
            wall[n].append(time.perf_counter() - t0)
            cpu[n].append(time.process_time() - c0)
    a, b = order
    med = statistics.median
    print(f"section7_2 {args.kind}, change {args.change}, S = {S}, T = {T}, {args.repeats} "
          "repetitions alternated, medians; outputs equal bit for bit")
    print("| variant | wall s | CPU s |")
    print("|---|---|---|")
    for n in order:
        print(f"| {n} | {med(wall[n]):.4f} | {med(cpu[n]):.4f} |")
    print(f"speed-up: {med(wall[a]) / med(wall[b]):.2f}x wall, "
          f"{med(cpu[a]) / med(cpu[b]):.2f}x CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
