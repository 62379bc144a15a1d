"""Stable-Baselines3 PPO on the articulated runner (dsim/Runner-v0), the
picture docs/images/runner_ppo.png of docs/articulated.md.

    python python/examples/ppo_runner.py [--steps 60000] [--seed 0] [--out ppo_runner]
    python python/examples/ppo_runner.py --plot docs/images/runner_ppo.png run_s0.csv ...
    python python/examples/ppo_runner.py --plot-control docs/images/runner_control.png s0.log ... \
        [--whole w0.log ...]

The runner's task is the walker's: the centre of mass's displacement along x
at the episode's end (2 s, 100 control steps of 20 substeps), with the dense
reward (its progress per step, so an episode's rewards sum to the metric).
Everything else is python/examples/ppo_walker.py's: the env's full state
(every render vertex of the capsules) as positions relative to the centre of
mass, velocities and phase features, PPO with an MLP 128-128, 8 envs; the
runner's phase periods are 1, 0.5 and 0.25 s as the walker's, here 50, 25
and 12.5 control steps. The six actions are the motor controls as they are
(each bounded smoothly to +-1 by the model). Writes OUT.csv and OUT.png.

--plot-control: the picture of the built-in controller beside it
(docs/images/runner_control.png): the metric of every iteration of
`dsim run configs/runner.json --seed S` (its printed log, one file a seed),
and of any whole-episode runs (--whole: the same with controller.mpc off).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ppo_walker  # noqa: E402


def read_log(path):
    """(iteration, metric) of every iteration line a `dsim run` printed."""
    its, mets = [], []
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) > 8 and w[0] == "iteration" and w[7] == "metric":
                its.append(int(w[1]))
                mets.append(float(w[8]))
    return its, mets


def plot_control(png, logs, whole):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=90)
    for paths, color, label in ((logs, "tab:blue", "MPC (bundled config)"), (whole, "tab:orange", "whole episode")):
        for i, path in enumerate(paths):
            it, m = read_log(path)
            ax.plot(it, m, "-", color=color, lw=1, alpha=0.6, label=label if i == 0 else None)
    ax.axhline(2.0, color="gray", ls=":", lw=1, label="goal +2 m")
    ax.axhline(0.0, color="gray", ls="-", lw=0.5)
    ax.set_xlabel("iteration")
    ax.set_ylabel("Δx of the centre of mass, m")
    ax.set_title(f"runner, image goal: {len(logs)} seeds (MPC), {len(whole)} (whole episode)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--plot-control" in argv:
        i = argv.index("--plot-control")
        rest = argv[i + 2:]
        j = rest.index("--whole") if "--whole" in rest else len(rest)
        plot_control(argv[i + 1], rest[:j], rest[j + 1:])
        return None
    if "--plot" in argv:
        i = argv.index("--plot")
        png, csvs = argv[i + 1], argv[i + 2:]
        ppo_walker.plot_runs(png, csvs, "SB3 PPO on dsim/Runner-v0 (mean of 40 episodes)")
        return None
    ppo_walker.PERIODS = (50.0, 25.0, 12.5)  # control steps of 20 ms: 1, 0.5, 0.25 s
    defaults = {"--env": "runner", "--steps": "60000", "--out": "ppo_runner"}
    for k, v in defaults.items():
        if k not in argv:
            argv += [k, v]
    return ppo_walker.main(argv)


if __name__ == "__main__":
    main()
