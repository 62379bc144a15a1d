# bench/: the side-by-side comparisons with NVIDIA Warp (bench/warp-side-by-side)
# and with Newton's VBD solver (bench/newton-compare), not part of `make bench`
# or `make check`: they need a private Python environment with warp-lang or
# newton. Their dsim half, built by `make check` for tests/test_bench_newton.sh
# (and on demand by the scripts: make bench/side_by_side_dsim):
check_PROGRAMS += bench/side_by_side_dsim
bench_side_by_side_dsim_SOURCES = bench/side_by_side_dsim.c
EXTRA_DIST += bench/warp-side-by-side bench/warp_side_by_side.py
EXTRA_DIST += bench/newton-compare bench/newton_compare.py
TESTS += tests/test_bench_newton.sh
EXTRA_DIST += tests/test_bench_newton.sh
# Articulated bodies: forward steps/s and the time to a 1,000-step gradient,
# double pendulum and 16-link chain, one thread.
BENCH_PROGS += bench/bench_artic
bench_bench_artic_SOURCES = bench/bench_artic.c
# MJCF models through dsim's loader: forward steps/s and gradient time of the
# bundled double pendulum, 16-link chain and runner; with arguments, dsim's
# half of the side by side with MuJoCo (bench/mujoco-compare, not part of
# `make bench` or `make check`: it needs a private Python environment with
# the mujoco package).
BENCH_PROGS += bench/bench_artic_mjcf
bench_bench_artic_mjcf_SOURCES = bench/bench_artic_mjcf.c
EXTRA_DIST += bench/mujoco-compare bench/mujoco_compare.py
# Fluids: dsim's half of the side by side with PhiFlow (bench/phiflow-compare,
# not part of `make bench` or `make check`: it needs a private Python
# environment with phiflow); with no arguments, a 128^2 plume's forward and
# forward + backward time per step.
BENCH_PROGS += bench/bench_fluid_phiflow
bench_bench_fluid_phiflow_SOURCES = bench/bench_fluid_phiflow.c
EXTRA_DIST += bench/phiflow-compare bench/phiflow_compare.py
