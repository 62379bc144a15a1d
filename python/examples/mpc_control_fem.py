"""Gradient-based receding-horizon MPC on control-fem from Python: the
sinusoid-network policy and the Adam optimiser in torch, the episode and its
adjoint (ds_env_backward_loss_from) in libdsim. It follows `dsim run --mpc`
(controllers/trainer.c, mpc_pass) step for step, so the two compare at equal
settings:

    python python/examples/mpc_control_fem.py [CONFIG] [--iterations N] [--horizon H] [--execute E]
        [--inner K] [--set env.KEY=VALUE ...]
    ./dsim run CONFIG --mpc --iterations N --horizon H --execute E --inner K --set env.KEY=VALUE ...

One iteration is one pass over the episode: from the executed state at step
j, roll the window j .. j+H-1 out K times (each: the env's loss at the
window's end, its adjoint back to step j, one optimiser step), then execute
steps j .. j+E-1 with the updated policy and shift j += E; the policy and
the optimiser's moments carry over. The reported loss and metric are the
executed episode's. The policy's initial weights come from torch's RNG (the
C trainer uses its own), so the runs agree in outcome, not bit for bit.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import dsim  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", default=os.path.join(HERE, "..", "..", "configs", "control-fem.json"))
    ap.add_argument("--iterations", type=int)
    ap.add_argument("--horizon", type=int)
    ap.add_argument("--execute", type=int)
    ap.add_argument("--inner", type=int)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--set", action="append", default=[], metavar="env.KEY=VALUE")
    args = ap.parse_args(argv)
    with open(args.config) as f:
        cfg = json.load(f)
    ctl, run = cfg.get("controller", {}), cfg.get("run", {})
    over = {}
    for s in args.set:
        k, v = s.split("=", 1)
        if not k.startswith("env."):
            raise SystemExit(f"--set {k}: only env.* keys here")
        over[k[4:]] = json.loads(v)
    name = cfg["env"]["name"]
    env = dsim.Env(name, config=args.config, **over)
    iters = args.iterations or run.get("iterations", 40)
    seed = args.seed if args.seed is not None else run.get("seed", 0)
    S, A = env.num_steps, env.action_size
    H = args.horizon or ctl.get("horizon", 0) or (S + 3) // 4
    H = min(H, S)
    E = min(args.execute or ctl.get("execute", 0) or (H + 1) // 2, H)
    K = args.inner or ctl.get("inner", 1)
    P, omega, phi = ctl.get("phases", 8), ctl.get("omega", 2.5), ctl.get("phase_step", math.pi / 4)
    strength = ctl.get("strength", 0.3)
    lr = args.lr or ctl.get("lr", 0.5)
    phys = env.config["physics"]
    step_dt = phys["control_interval"] * phys["dt"]

    torch.manual_seed(seed)
    b = ctl.get("init_scale", 0) or 1.0 / math.sqrt(P)
    W = (torch.rand(A, P, dtype=torch.float64) * 2 - 1).mul_(b).requires_grad_(True)
    opt = torch.optim.Adam([W], lr=lr, betas=(ctl.get("beta1", 0.9), ctl.get("beta2", 0.999)),
                           eps=ctl.get("eps", 1e-8))
    t_all = torch.arange(S, dtype=torch.float64) * step_dt
    phases = torch.arange(P, dtype=torch.float64) * phi

    def policy(k0, k1):  # a_k = strength tanh(W s(t_k)), s_p(t) = sin(omega t + p phi): (k1-k0) x A
        s = torch.sin(omega * t_all[k0:k1, None] + phases[None, :])
        return strength * torch.tanh(s @ W.T)

    def run_steps(acts):
        a = np.ascontiguousarray(acts.detach().numpy(), dtype=dsim.real_dtype)
        for row in a:
            env.step(row)

    print(f"MPC {name}: {S} steps, window {H}, execute {E}, inner {K}, {iters} passes, lr {lr}, seed {seed}")
    t0 = time.time()
    for it in range(iters):
        env.reset(seed)
        for j in range(0, S, E):
            state = env.get_state()
            hend = min(j + H, S)
            for _ in range(K):
                env.set_state(state)
                acts = policy(j, hend)
                run_steps(acts)
                _, g = env.backward_loss(first_step=j)  # the C adjoint of the window
                opt.zero_grad()
                acts.backward(torch.from_numpy(g[j:hend]))
                opt.step()
            env.set_state(state)
            with torch.no_grad():
                run_steps(policy(j, min(j + E, S)))
        print(f"pass {it:3d}  loss {env.loss():.6g}  metric {env.metric():.6g}  {time.time() - t0:.1f} s", flush=True)
    print(f"final: loss {env.loss():.6g} metric {env.metric():.6g} ({time.time() - t0:.1f} s)")
    return env.loss(), env.metric()


if __name__ == "__main__":
    main()
