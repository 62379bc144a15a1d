"""Ray Tune over the built-in controller's learning rate on control-fem:
each trial is a `dsim run` (dsim.Run) reporting its loss every iteration;
the best learning rate and its final loss are printed.

    python3 python/examples/tune_lr_control_fem.py [--iterations 10] [--cpus 2]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dsim  # noqa: E402
import dsim.ray  # noqa: E402


def trial(config):
    from ray import tune

    ov = {"controller.lr": config["lr"], "run.iterations": config["iterations"], "run.threads": 1}
    with dsim.Run("control-fem", ov) as run:
        while not run.done:
            r = run.step()
            tune.report({"loss": r["last_loss"], "metric": r["last_metric"]})
        run.finish()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--cpus", type=int, default=2)
    a = ap.parse_args()
    from ray import tune

    dsim.ray.init(None, num_cpus=a.cpus)
    space = {"lr": tune.grid_search([0.03, 0.1, 0.3, 1.0]), "iterations": a.iterations}
    tuner = tune.Tuner(tune.with_resources(trial, {"cpu": 1}), param_space=space,
                       tune_config=tune.TuneConfig(metric="loss", mode="min"))
    results = tuner.fit()
    for r in results:
        print(f"lr {r.config['lr']}: final loss {r.metrics['loss']:.5g}, metric {r.metrics['metric']:.4g}")
    best = results.get_best_result()
    print(f"best lr {best.config['lr']}: loss {best.metrics['loss']:.5g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
