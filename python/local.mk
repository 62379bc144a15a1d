# python/: the Python package over the C API (Gymnasium envs, the batched
# vector env, the torch bridge), its tests (run by tests/test_python.sh under
# make check), examples, and the vector-env benchmark of `make bench`.
PY_FILES = python/pyproject.toml python/setup.py python/README.md python/dsim/__init__.py python/dsim/_lib.py \
  python/dsim/env.py python/dsim/gym.py python/dsim/vector.py python/dsim/torch.py python/dsim/sb3.py \
  python/dsim/lockstep.py python/dsim/_spaces.py python/dsim/run.py python/tests/test_lockstep.py \
  python/tests/conftest.py python/tests/test_gym.py python/tests/test_vector.py \
  python/tests/test_errors.py python/tests/test_torch.py python/tests/test_ppo.py \
  python/tests/test_abi.py python/tests/test_binding.py python/tests/test_run.py \
  python/tests/test_plugins.py python/tests/test_rl.py python/dsim/sysid.py python/tests/test_sysid.py \
  python/examples/ppo_walker.py python/examples/mpc_control_fem.py python/examples/sysid_from_frames.py \
  python/bench_vector.py python/dsim/ray.py python/tests/test_ray.py python/examples/ray_sweep.py \
  python/examples/rllib_ppo_walker.py python/examples/tune_lr_control_fem.py \
  python/dsim/learn.py python/tests/test_learn.py python/examples/learn_walker.py python/examples/visuomotor_fem.py \
  python/tests/test_artic.py python/dsim/residual.py python/tests/test_residual.py python/examples/residual_drag.py \
  python/examples/closed_vs_open.py python/examples/ppo_runner.py
PY_FILES += python/tests/test_batch_artic.py python/tests/test_batch_implicit.py python/tests/test_implicit_tolerance.py
# The ABI table the bindings check their copies of structs and constants
# against (include/dsim/abi.h). Its source sits in controllers/ by the include
# order (it reaches env.h, batch.h and run.h); it is listed here, with the
# binding it serves.
libdsim_core_la_SOURCES += controllers/abi.c
dsiminclude_HEADERS += include/dsim/abi.h
EXTRA_DIST += $(PY_FILES) tests/test_python.sh bench/bench_python.sh docs/ppo_walker.png docs/shac_walker.png docs/shac_walker_noise.png docs/shac_walker_1600.png docs/shac_walker_8x8.png docs/shac_runner.png docs/shac_cloth.png docs/shac_control_fem.png docs/visuomotor_fem.png docs/visuomotor_fem_400.png
TESTS += tests/test_python.sh
BENCH_SHELLS += bench/bench_python.sh
