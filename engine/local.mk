# engine/: physics only. Model/data/gradient structures, builders, the force
# models (forward + adjoint kernels and their loops side by side, one header
# each; the kernels are also compiled by the CUDA kernels), the force table
# (forces.h/.c), the step and its adjoint, the tape, meshes as geometry,
# and the public finite-difference utility.
libdsim_core_la_SOURCES += engine/dsmath.h engine/force_loop.h engine/force_spring.h engine/force_contact.h \
  engine/force_tri.h engine/force_tet.h engine/force_bend.h engine/force_aero.h engine/rigid.h engine/rigid.c engine/forces.h engine/forces.c engine/step_body.h \
  engine/fd.c engine/model.c engine/data.c engine/grad.c engine/step.c engine/engine_priv.h \
  engine/mesh.c
libdsim_core_la_SOURCES += engine/batch_api.c
# Articulated bodies in reduced coordinates (docs/articulated.md): builder,
# step and adjoint (artic.c) over the dynamics kernels written once for
# real and complex-step numbers (artic_dyn.h); the real step and its
# reverse pass (artic_step.h, artic_rev.h) and the substep of a particle
# model or batch instance (artic_model_body.h) are DS_HD, for either backend.
libdsim_core_la_SOURCES += engine/artic.c engine/artic_dyn.h engine/artic_rev.h engine/artic_priv.h \
  engine/artic_step.h
libdsim_core_la_SOURCES += engine/artic_model.c engine/artic_model.h engine/artic_model_body.h
dsiminclude_HEADERS += include/dsim/artic.h
dsiminclude_HEADERS += include/dsim/engine.h include/dsim/fd.h include/dsim/mesh.h

# One test per force model (adjoint vs central differences, forward vs energy
# or reference; forcecheck.h is the shared harness), one per engine file.
EXTRA_DIST += tests/forcecheck.h tests/enginetest.h
check_PROGRAMS += tests/test_force_spring tests/test_force_contact tests/test_force_tri \
  tests/test_force_tet tests/test_force_bend tests/test_force_aero tests/test_fd \
  tests/test_model tests/test_step tests/test_rollout_grad tests/test_checkpoint tests/test_determinism \
  tests/test_alloc tests/test_mesh tests/test_forces
tests_test_forces_SOURCES = tests/test_forces.c
tests_test_force_spring_SOURCES = tests/test_force_spring.c
tests_test_force_contact_SOURCES = tests/test_force_contact.c
tests_test_force_tri_SOURCES = tests/test_force_tri.c
tests_test_force_tet_SOURCES = tests/test_force_tet.c
tests_test_force_bend_SOURCES = tests/test_force_bend.c
tests_test_force_aero_SOURCES = tests/test_force_aero.c
tests_test_fd_SOURCES = tests/test_fd.c
tests_test_model_SOURCES = tests/test_model.c
tests_test_step_SOURCES = tests/test_step.c
tests_test_rollout_grad_SOURCES = tests/test_rollout_grad.c
tests_test_checkpoint_SOURCES = tests/test_checkpoint.c
tests_test_determinism_SOURCES = tests/test_determinism.c
tests_test_alloc_SOURCES = tests/test_alloc.c
tests_test_mesh_SOURCES = tests/test_mesh.c
TESTS += tests/test_force_spring tests/test_force_contact tests/test_force_tri \
  tests/test_force_tet tests/test_force_bend tests/test_force_aero tests/test_fd \
  tests/test_model tests/test_step tests/test_rollout_grad tests/test_checkpoint tests/test_determinism \
  tests/test_alloc tests/test_mesh tests/test_forces
BENCH_PROGS += bench/bench_engine
bench_bench_engine_SOURCES = bench/bench_engine.c
# Rigid bodies: adjoints vs central differences (single substeps and
# rollouts), mass properties and physics checks (momentum, rest, sliding
# distance, restitution).
check_PROGRAMS += tests/test_rigid_grad
tests_test_rigid_grad_SOURCES = tests/test_rigid_grad.c
TESTS += tests/test_rigid_grad
check_PROGRAMS += tests/test_rigid_physics
tests_test_rigid_physics_SOURCES = tests/test_rigid_physics.c
TESTS += tests/test_rigid_physics
BENCH_PROGS += bench/bench_rigid
bench_bench_rigid_SOURCES = bench/bench_rigid.c
# Articulated bodies: adjoint vs central differences per joint type, at
# limits, in and out of ground contact; pendulum period, energy drift,
# momentum of a free chain; refused inputs.
check_PROGRAMS += tests/test_artic
tests_test_artic_SOURCES = tests/test_artic.c
TESTS += tests/test_artic
# base/cplx.h (the articulation's complex steps on either backend) against C99 complex
check_PROGRAMS += tests/test_cplx
tests_test_cplx_SOURCES = tests/test_cplx.c
TESTS += tests/test_cplx
# Element Jacobians (Kx = -df/dx, Kv = -df/dv) of every model against central
# differences, their symmetric parts, the small dense eigen-solver and the
# PSD projection that Newton's method uses (engine/dense_small.h).
libdsim_core_la_SOURCES += engine/dense_small.h
check_PROGRAMS += tests/test_force_jac
tests_test_force_jac_SOURCES = tests/test_force_jac.c
TESTS += tests/test_force_jac
# Block-sparse 3 x 3 matrices for implicit steps: pattern from the element
# incidence, assembly of M + h Kv + h^2 Kx, PCG with block-Jacobi.
libdsim_core_la_SOURCES += engine/sparse.h engine/sparse.c
# The optional sparse LDL^T (SuiteSparse CHOLMOD) that preconditions the
# implicit step's solves; block-Jacobi without it.
libdsim_core_la_SOURCES += engine/cholmod.c
libdsim_core_la_CPPFLAGS += $(CHOLMOD_CFLAGS)
libdsim_core_la_LIBADD += $(CHOLMOD_LIBS)
check_PROGRAMS += tests/test_sparse
tests_test_sparse_SOURCES = tests/test_sparse.c
TESTS += tests/test_sparse
# The implicit (backward Euler) integrator and its adjoint by the implicit
# function theorem: gradients against central differences, checkpoints,
# threads, non-convergence, a stiff beam beyond the explicit stable step.
libdsim_core_la_SOURCES += engine/implicit.h engine/implicit.c
check_PROGRAMS += tests/test_implicit
tests_test_implicit_SOURCES = tests/test_implicit.c
TESTS += tests/test_implicit
# Incompressible smoke on a MAC grid (docs/fluids.md): advection (SL,
# MacCormack), buoyancy, forces, sources, projection by MIC(0)-PCG, each with
# its adjoint; the tape with checkpoints. test_fluid: adjoints against
# central differences, divergence, checkpoints and threads bitwise, refusals.
libdsim_core_la_SOURCES += engine/fluid.c engine/fluid_voxel.c engine/fluid_priv.h engine/fluid_advect.h engine/fluid_project.h engine/fluid_soft.h
# The forward operators as DS_HD bodies (fluid_body.h) for the serial
# engine, the batch's host backend and CUDA; the batch's stages and driver
# (fluid_batch_body.h, fluid_batch.c). test_fluid_batch: every instance
# equals the serial engine bit for bit.
libdsim_core_la_SOURCES += engine/fluid_body.h engine/fluid_batch_body.h engine/fluid_batch.c
check_PROGRAMS += tests/test_fluid_batch
tests_test_fluid_batch_SOURCES = tests/test_fluid_batch.c
TESTS += tests/test_fluid_batch
# test_fluid_batch_window: the batch's set_state, loss terms on earlier
# states and windows bit for bit the serial engine's, refusals, and the
# window's state adjoint against central differences.
check_PROGRAMS += tests/test_fluid_batch_window
tests_test_fluid_batch_window_SOURCES = tests/test_fluid_batch_window.c
TESTS += tests/test_fluid_batch_window
BENCH_PROGS += bench/bench_fluid_batch
bench_bench_fluid_batch_SOURCES = bench/bench_fluid_batch.c
dsiminclude_HEADERS += include/dsim/fluid.h
check_PROGRAMS += tests/test_fluid
tests_test_fluid_SOURCES = tests/test_fluid.c
TESTS += tests/test_fluid
BENCH_PROGS += bench/bench_fluid
bench_bench_fluid_SOURCES = bench/bench_fluid.c
EXTRA_DIST += docs/fluids.md
# The FFT pressure solve (optional FFTW) for boxes without obstacles;
# test_fluid_fft: the same fields as PCG to the tolerance (skips without FFTW).
libdsim_core_la_SOURCES += engine/fluid_fft.c
libdsim_core_la_CPPFLAGS += $(FFTW_CFLAGS)
libdsim_core_la_LIBADD += $(FFTW_LIBS)
check_PROGRAMS += tests/test_fluid_fft
tests_test_fluid_fft_SOURCES = tests/test_fluid_fft.c
TESTS += tests/test_fluid_fft
