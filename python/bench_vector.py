"""Benchmark (make bench): env steps per second of the native batched env
(dsim.vector.DsimVectorEnv, one C call for N envs, OpenMP across envs)
against Gymnasium's SyncVectorEnv over N single envs, in the same run, and
the Python-side cost of a step beyond the C call.

    python3 python/bench_vector.py [--env walker] [--seconds 1.5] [--sizes 1,16,64]

The envs use the class's bundled defaults (walker: 32 substeps per step, a
256 x 256 frame with 2x supersampling every 240 substeps). Each env first
runs one whole episode (so that every buffer, the gradient tape above all,
is touched before timing); figures are the median of 3 timed runs of about
`seconds` each; actions are uniform in [-0.3, 0.3], drawn once.
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


def rate(step, seconds):
    """steps/s of step() (which returns how many env steps it made), median of 3."""
    out = []
    for _ in range(3):
        n, t0 = 0, time.perf_counter()
        while True:
            n += step()
            t = time.perf_counter() - t0
            if t >= seconds:
                break
        out.append(n / t)
    return float(np.median(out))


def vec_rate(venv, n, seconds, acts, steps):
    venv.reset(seed=0)
    for _ in range(steps + 1):  # one whole episode first: every buffer (the tape) touched
        venv.step(acts)
    return rate(lambda: (venv.step(acts), n)[1], seconds)


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
    reward, done = _lib.REAL(), __import__("ctypes").c_int()
    f, p, ap, op = _lib.lib.ds_env_step, env.handle, a.ctypes.data, obs.ctypes.data
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


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", default="walker")
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--sizes", default="1,16,64")
    args = ap.parse_args(argv)
    gid = dsim.env_id(args.env)
    threads = dsim.build_info()["max_threads"]
    print(f"bench_vector: {gid}, bundled defaults, {threads} OpenMP threads, dsim {dsim.__version__}")
    single = gymnasium.make(gid).unwrapped
    single.reset(seed=0)
    a1 = np.random.default_rng(0).uniform(-0.3, 0.3, single.action_space.shape)

    def one():
        _, _, _, trunc, _ = single.step(a1)
        if trunc:
            single.reset()
        return 1

    for _ in range(single.env.num_steps):  # one whole episode first
        one()
    r1 = rate(one, args.seconds)
    single.close()
    print(f"  single env (gymnasium.make): {r1:10.0f} steps/s")
    print(f"  {'N':>4} {'native batched':>16} {'SyncVectorEnv':>15} {'native/sync':>12} {'native/single':>14}")
    for n in [int(s) for s in args.sizes.split(",")]:
        nat = gymnasium.make_vec(gid, num_envs=n)
        syn = gymnasium.make_vec(gid, num_envs=n, vectorization_mode="sync")
        acts = np.random.default_rng(1).uniform(-0.3, 0.3, nat.action_space.shape)
        steps = _lib.lib.ds_env_num_steps(nat.unwrapped.env(0))
        rn = vec_rate(nat, n, args.seconds, acts, steps)
        rs = vec_rate(syn, n, args.seconds, acts, steps)
        nat.close()
        syn.close()
        print(f"  {n:4d} {rn:11.0f} st/s {rs:10.0f} st/s {rn / rs:11.2f}x {rn / r1:13.2f}x", flush=True)
    raw, oe, og = overhead_us(args.seconds)
    print(f"  Python cost per step beyond the C call (walker-springs, 1 substep/step; C call {raw:.1f} us incl. "
          f"ctypes): dsim.Env.step {oe:.1f} us, gymnasium env step (unwrapped, with info metric) {og:.1f} us")


if __name__ == "__main__":
    main()
