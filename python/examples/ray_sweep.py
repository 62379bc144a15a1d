"""A seed sweep of `dsim run` as Ray tasks against the same runs in one
process: the numbers agree bit for bit, and the difference in wall time is
Ray's cost per task (docs/scale.md).

    python3 python/examples/ray_sweep.py [--seeds 8] [--cpus 2] [--iterations 5] [--config walker]

Prints the wall time of both, the overhead per task, and each run's best loss.
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dsim.ray  # noqa: E402

TINY = {"physics": {"substeps": 64, "control_interval": 16, "render_interval": 32, "render_last": True},
        "render": {"width": 16, "height": 16, "supersample": 1, "sigma": 1e-4}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--config", default="tiny", help="'tiny' (a small walker), or a run config / env name")
    a = ap.parse_args()
    config = {"env": dict(TINY, name="walker")} if a.config == "tiny" else a.config
    ov = {"run.iterations": a.iterations}
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        here = dsim.ray.sweep(config, seeds=range(a.seeds), overrides=ov, out_dir=os.path.join(d, "l"), local=True)
        t_local = time.perf_counter() - t0
        t0 = time.perf_counter()
        dsim.ray.init(None, num_cpus=a.cpus)
        t_init = time.perf_counter() - t0
        t0 = time.perf_counter()
        remote = dsim.ray.sweep(config, seeds=range(a.seeds), overrides=ov, out_dir=os.path.join(d, "r"))
        t_cold = time.perf_counter() - t0
        t0 = time.perf_counter()  # again: the workers are up and have loaded dsim
        again = dsim.ray.sweep(config, seeds=range(a.seeds), overrides=ov, out_dir=os.path.join(d, "w"))
        t_ray = time.perf_counter() - t0
    same = all(x["losses"] == y["losses"] == z["losses"] for x, y, z in zip(here, remote, again))
    print(f"{a.seeds} runs of {a.iterations} iterations: one process {t_local:.2f} s; "
          f"Ray ({a.cpus} CPUs) {t_cold:.2f} s with new workers, {t_ray:.2f} s with warm ones, "
          f"after {t_init:.1f} s to start Ray")
    print(f"per task: {t_local / a.seeds * 1e3:.0f} ms in one process; overhead per task (Ray CPU time "
          f"beyond it) {(t_cold * a.cpus - t_local) / a.seeds * 1e3:.0f} ms with new workers, "
          f"{(t_ray * a.cpus - t_local) / a.seeds * 1e3:.0f} ms with warm ones")
    print("bitwise equal:", same)
    for r in remote:
        print(f"  seed {r['seed']}: best loss {r['low_loss']:.6g} at iteration {r['low_iteration']}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
