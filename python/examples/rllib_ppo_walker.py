"""PPO from RLlib on dsim/Walker-v0 with 2 env runners, each stepping the
native batched env (DsimVectorEnv) rather than copies of a single env.
Needs `pip install "ray[rllib]"` (not installed by scripts/install-deps).

    python3 python/examples/rllib_ppo_walker.py [--iterations 20] [--envs 8]

Prints the mean episode return after each training iteration.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dsim.ray  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--envs", type=int, default=8, help="envs per env runner (one batched env)")
    ap.add_argument("--runners", type=int, default=2)
    a = ap.parse_args()
    from ray.rllib.algorithms.ppo import PPOConfig

    dsim.ray.init(None, num_cpus=a.runners + 1)
    dsim.ray.register_rllib()
    config = (PPOConfig()
              .environment("dsim/Walker-v0", env_config={"reward": "dense"})
              .env_runners(num_env_runners=a.runners, num_envs_per_env_runner=a.envs,
                           gym_env_vectorize_mode="vector_entry_point", rollout_fragment_length="auto")
              .training(train_batch_size_per_learner=2048, minibatch_size=256, num_epochs=5, lr=3e-4, gamma=0.99)
              .debugging(seed=0))
    algo = config.build_algo()
    for i in range(a.iterations):
        res = algo.train()
        er = res.get("env_runners", {})
        print(f"iteration {i}: env steps {er.get('num_env_steps_sampled_lifetime', 0)}, "
              f"mean return {er.get('episode_return_mean', float('nan')):.3f}", flush=True)
    algo.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
