"""Benchmark (make bench): env steps per second of the native batched env
(dsim.vector.DsimVectorEnv, one C call for N envs, OpenMP across envs)
against Gymnasium's SyncVectorEnv over N single envs, in the same run, and
the Python-side cost of a step beyond the C call.

    python3 python/bench_vector.py [--env walker] [--seconds 0.5] [--rounds 5] [--sizes 1,16,64]

The envs use the class's bundled defaults (walker: 32 substeps per step, a
256 x 256 frame with 2x supersampling every 240 substeps). Each env first
runs one whole episode (so that every buffer, the gradient tape above all,
is touched before timing). Then, for each N, bursts of the single env, the
native batched env and the SyncVectorEnv alternate (`rounds` times), so
that a change in the machine's load hits all three alike; the figures are
medians. Actions are uniform in [-0.3, 0.3], drawn once.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402

import dsim  # noqa: E402
from dsim import _lib  # noqa: E402


def overhead_us(seconds):
    """Per-step time of dsim.Env.step and DsimGymEnv.step minus that of the
    bare ctypes call of ds_env_step (the C step's cost, ctypes' own call
    included), on a step of one substep of a tiny scene so that timer noise
    stays small; medians of 5 interleaved runs."""
    kw = dict(substeps=200000, control_interval=1, render_interval=200000, render_last=False, width=8, height=8,
              supersample=1)
    env = dsim.Env("walker-springs", **kw)
    genv = gymnasium.make("dsim/WalkerSprings-v0", **kw).unwrapped
    a = np.zeros(env.action_size, _lib.real_dtype)
    obs = np.empty(env.obs_size, _lib.real_dtype)
    reward, done = _lib.REAL(), _lib.INT()
    f, p, ap, op = _lib.env_step, env.handle, a.ctypes.data, obs.ctypes.data
    n = 4000

    def t_raw():
        env.reset(0)
        t0 = time.perf_counter()
        for _ in range(n):
            f(p, ap, op, None, reward, done)
        return (time.perf_counter() - t0) / n

    def t_env():
        env.reset(0)
        t0 = time.perf_counter()
        for _ in range(n):
            env.step(a)
        return (time.perf_counter() - t0) / n

    def t_gym():
        genv.reset(seed=0)
        t0 = time.perf_counter()
        for _ in range(n):
            genv.step(a)
        return (time.perf_counter() - t0) / n

    raw, e, g = [], [], []
    for _ in range(5):
        raw.append(t_raw())
        e.append(t_env())
        g.append(t_gym())
    raw, e, g = np.median(raw), np.median(e), np.median(g)
    env.close()
    genv.close()
    return raw * 1e6, (e - raw) * 1e6, (g - raw) * 1e6


def burst(step, n, seconds):
    """steps/s of `step` (n env steps per call) over about `seconds`."""
    k, t0 = 0, time.perf_counter()
    while True:
        step()
        k += 1
        t = time.perf_counter() - t0
        if t >= seconds:
            return k * n / t


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", default="walker")
    ap.add_argument("--seconds", type=float, default=0.5, help="length of one timed burst")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="1,16,64")
    ap.add_argument("--forward-only", action="store_true",
                    help="every env without the gradient tape (env.physics.gradients false), as RL needs")
    args = ap.parse_args(argv)
    gid = dsim.env_id(args.env)
    threads = dsim.build_info()["max_threads"]
    print(f"bench_vector: {gid}, bundled defaults, {threads} OpenMP threads, dsim {dsim.__version__}; "
          f"per N, {args.rounds} rounds of {args.seconds} s bursts of single env / native / sync, interleaved "
          f"(medians; ratios are medians of the per-round ratios)")
    kw = {"physics__gradients": False} if args.forward_only else {}
    if args.forward_only:
        print("  forward only: env.physics.gradients false for every env (no tape)")
    single = gymnasium.make(gid, **kw).unwrapped
    single.reset(seed=0)
    a1 = np.random.default_rng(0).uniform(-0.3, 0.3, single.action_space.shape)

    def one():
        _, _, _, trunc, _ = single.step(a1)
        if trunc:
            single.reset()

    steps = single.env.num_steps
    for _ in range(steps):  # one whole episode first
        one()
    print(f"  {'N':>4} {'single env':>12} {'native batched':>16} {'SyncVectorEnv':>15} {'native/sync':>12} "
          f"{'native/single':>14}")
    for n in [int(s) for s in args.sizes.split(",")]:
        nat = gymnasium.make_vec(gid, num_envs=n, **kw)
        syn = gymnasium.make_vec(gid, num_envs=n, vectorization_mode="sync", **kw)
        acts = np.random.default_rng(1).uniform(-0.3, 0.3, nat.action_space.shape)
        for v in (nat, syn):  # one whole episode first: every buffer (the gradient tape) touched
            v.reset(seed=0)
            for _ in range(steps + 1):
                v.step(acts)
        r1, rn, rs = [], [], []
        for _ in range(args.rounds):
            r1.append(burst(one, 1, args.seconds))
            rn.append(burst(lambda: nat.step(acts), n, args.seconds))
            rs.append(burst(lambda: syn.step(acts), n, args.seconds))
        r1, rn, rs = map(np.array, (r1, rn, rs))
        nat.close()
        syn.close()
        print(f"  {n:4d} {np.median(r1):7.0f} st/s {np.median(rn):11.0f} st/s {np.median(rs):10.0f} st/s "
              f"{np.median(rn / rs):11.2f}x {np.median(rn / r1):13.2f}x", flush=True)
    single.close()
    raw, oe, og = overhead_us(1.0)
    print(f"  Python cost per step beyond the C call (walker-springs, 1 substep/step; C call {raw:.1f} us incl. "
          f"ctypes): dsim.Env.step {oe:.1f} us, gymnasium env step (unwrapped, with info metric) {og:.1f} us")


if __name__ == "__main__":
    main()
