/* The batched engine's CPU backend (dsim/engine_batch.h) against the
 * single-instance engine: for the model of every registered env without
 * rigid bodies, B instances with their own parameters, activations and
 * external forces, full and checkpointed tapes, 1 and several threads:
 * final states, control adjoints and every parameter's gradient are equal
 * to those of ds_step / ds_backward_step on each instance's own model.
 * Also: the memory plan, refusals (rigid bodies, memory bound, CUDA without
 * a device or a build), per-instance failure reports, and state and
 * parameter round trips. */
#define _DEFAULT_SOURCE 1 /* mmap's MAP_ANONYMOUS in the guarded backend */
#include "config.h"

#ifdef _OPENMP
#  include <omp.h>
#endif

#include "dstest.h"
#include "batchtest.h"
#include "dsim/device.h"
#include "engine/batch_priv.h"

#include <sys/mman.h>
#include <unistd.h>

/* equal as numbers (0 == -0), NaN never */
static int count_diff(const dsReal* a, const dsReal* b, size_t n, size_t* first) {
  int nd = 0;
  for (size_t k = 0; k < n; k++)
    if (!(a[k] == b[k])) {
      if (!nd) *first = k;
      nd++;
    }
  return nd;
}

static void parity_env(const char* name, const dsModel* m) {
  const int B = 3, C = 3, S = 8;
  btEpisode e;
  bt_episode(&e, m, B, C, S, 0.05);
  const size_t len = bt_result_len(m, C);
  dsReal* ref = (dsReal*)calloc((size_t)B * len, sizeof(dsReal));
  dsReal* got = (dsReal*)calloc((size_t)B * len, sizeof(dsReal));
  const int Ks[2] = {1, 5};
  for (int ki = 0; ki < 2; ki++) {
    const int K = Ks[ki];
    for (int b = 0; b < B; b++) bt_run_single(m, &e, b, K, ref + b * len);
    const int threads[2] = {1, 4};
    for (int ti = 0; ti < 2; ti++) {
      ds_set_num_threads(threads[ti]);
      memset(got, 0, (size_t)B * len * sizeof(dsReal));
      bt_run_batch(m, &e, K, ds_device_cpu(), got);
      size_t first = 0;
      const int nd = count_diff(ref, got, (size_t)B * len, &first);
      if (nd)
        DST_FAIL_AT("%s, K %d, %d threads: %d of %zu results differ from the single engine; first at %zu "
                    "(instance %zu, offset %zu): %.17g vs %.17g",
                    name, K, threads[ti], nd, (size_t)B * len, first, first / len, first % len, (double)ref[first],
                    (double)got[first]);
      dst_checks++;
    }
  }
  /* the instances differ (the test would pass trivially otherwise) */
  CHECK(memcmp(ref, ref + len, 6 * (size_t)m->nparticle * sizeof(dsReal)) != 0);
  ds_set_num_threads(0);
  free(ref);
  free(got);
  bt_episode_free(&e);
  printf("%-16s %5d particles %5d tets %5d tris %5d springs %5d bends: bitwise equal (full and checkpointed, 1 and 4 "
         "threads)\n",
         name, m->nparticle, m->ntet, m->ntri, m->nspring, m->nbend);
}

/* ---- the driver never touches backend memory ------------------------------------
 * A CPU backend whose memory is mapped PROT_NONE except while one of its
 * own operations runs: a driver that read or wrote device memory directly
 * (which works on the CPU backend and crashes on a GPU) faults here. */
typedef struct GuardBlock {
  void* p;
  size_t len;
} GuardBlock;
static GuardBlock g_blocks[16];
static int g_nblocks = 0;

static void guard(int prot) {
  for (int i = 0; i < g_nblocks; i++)
    if (mprotect(g_blocks[i].p, g_blocks[i].len, prot)) {
      perror("mprotect");
      exit(1);
    }
}

static void* gd_alloc(void* ctx, size_t bytes) {
  (void)ctx;
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE), len = ((bytes ? bytes : 1) + pg - 1) / pg * pg;
  if (g_nblocks == 16) return NULL;
  void* p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  g_blocks[g_nblocks].p = p;
  g_blocks[g_nblocks++].len = len;
  return p;
}

static void gd_release(void* ctx, void* p) {
  (void)ctx;
  for (int i = 0; i < g_nblocks; i++)
    if (g_blocks[i].p == p) {
      munmap(p, g_blocks[i].len);
      g_blocks[i] = g_blocks[--g_nblocks];
      return;
    }
}

#define GD_WRAP(name, params, args)                              \
  static int gd_##name params {                                  \
    guard(PROT_READ | PROT_WRITE);                               \
    int rc = ds__backend(DS_DEVICE_CPU)->name args;                    \
    guard(PROT_NONE);                                            \
    return rc;                                                   \
  }
GD_WRAP(put, (void* c, void* d, const void* s, size_t n), (c, d, s, n))
GD_WRAP(get, (void* c, void* d, const void* s, size_t n), (c, d, s, n))
GD_WRAP(copy, (void* c, void* d, const void* s, size_t n), (c, d, s, n))
GD_WRAP(zero, (void* c, void* d, size_t n), (c, d, n))
GD_WRAP(run_batch, (void* c, const dsBatchLaunch* l), (c, l))
#undef GD_WRAP

static void test_guarded(const char* name, const dsModel* m) {
  dsBackend gb = *ds__backend(DS_DEVICE_CPU);
  gb.name = "guarded cpu";
  gb.alloc = gd_alloc;
  gb.release = gd_release;
  gb.put = gd_put;
  gb.get = gd_get;
  gb.copy = gd_copy;
  gb.zero = gd_zero;
  gb.run_batch = gd_run_batch;
  const int B = 2, C = 2, S = 6;
  btEpisode e;
  bt_episode(&e, m, B, C, S, 0.05);
  const size_t len = bt_result_len(m, C);
  dsReal* ref = (dsReal*)calloc((size_t)B * len, sizeof(dsReal));
  dsReal* got = (dsReal*)calloc((size_t)B * len, sizeof(dsReal));
  for (int K = 1; K <= 4; K += 3) {
    for (int b = 0; b < B; b++) bt_run_single(m, &e, b, K, ref + b * len);
    bt_backend = &gb;
    bt_run_batch(m, &e, K, ds_device_cpu(), got);
    bt_backend = NULL;
    size_t first = 0;
    const int nd = count_diff(ref, got, (size_t)B * len, &first);
    if (nd) DST_FAIL_AT("%s, guarded backend, K %d: %d results differ from the single engine", name, K, nd);
    dst_checks++;
  }
  /* what a batch of envs sharing one engine calls between steps (one
     instance's state and parameters in, a failure read) touches the
     backend's memory through its operations only */
  {
    dsBatchSimDef def = ds_default_batch_sim_def();
    def.batch = B;
    dsBatchSim* s = NULL;
    char err[256];
    CHECK_INT_EQ(ds__bsim_create_on(m, &def, &gb, &s, err, sizeof err), 0);
    if (s) {
      CHECK_INT_EQ(ds_bsim_step(s, 2, NULL), 0);
      CHECK_INT_EQ(ds_bsim_set_instance(s, 1, m->x0, m->v0), 0);
      CHECK_INT_EQ(ds_bsim_load_params(s, 1, m), 0);
      CHECK_INT_EQ(ds_bsim_step(s, 1, NULL), 0);
      CHECK_INT_EQ(ds_bsim_failure(s, 1, NULL, NULL), 0);
      ds_bsim_free(s);
    }
  }
  CHECK_INT_EQ(g_nblocks, 0);
  free(ref);
  free(got);
  bt_episode_free(&e);
}

static void test_plan(const dsModel* m) {
  dsBatchSimDef def = ds_default_batch_sim_def();
  dsBatchPlan p1, p2, p3;
  char err[512];
  def.batch = 4;
  def.max_substeps = 100;
  CHECK_INT_EQ(ds_bsim_plan(m, &def, &p1, err, sizeof err), 0);
  CHECK_INT_EQ(p1.nstate, 101);
  CHECK_INT_EQ(p1.nseg, 0);
  def.checkpoint_every = 10;
  CHECK_INT_EQ(ds_bsim_plan(m, &def, &p2, err, sizeof err), 0);
  CHECK_INT_EQ(p2.nstate, 11);
  CHECK_INT_EQ(p2.nseg, 11);
  CHECK(p2.device_bytes < p1.device_bytes);
  /* per-instance figures do not depend on the batch; the total grows with it */
  def.batch = 8;
  CHECK_INT_EQ(ds_bsim_plan(m, &def, &p3, err, sizeof err), 0);
  CHECK(p3.tape_reals == p2.tape_reals && p3.param_reals == p2.param_reals);
  CHECK(p3.device_bytes > p2.device_bytes);
  CHECK(p3.device_bytes >= (size_t)8 * (p3.param_reals * 2 + p3.state_reals + p3.tape_reals) * sizeof(dsReal));
  /* parameter block: every differentiable array and the inverse masses */
  size_t P = (size_t)m->nparticle;
  for (int k = 0; k < ds_param_count(); k++) {
    const dsReal* v;
    int n;
    if (!ds_model_param(m, ds_param_name(k), &v, &n)) P += (size_t)n;
  }
  CHECK(p3.param_reals >= P && p3.param_reals < P + 8);
  /* the created batch reports the plan it was made from */
  dsBatchSim* s;
  CHECK_INT_EQ(ds_bsim_create(m, &def, &s, err, sizeof err), 0);
  CHECK(ds_bsim_get_plan(s)->device_bytes == p3.device_bytes);
  ds_bsim_free(s);
  /* bad definitions are refused with a message */
  def.batch = 0;
  CHECK_INT_EQ(ds_bsim_plan(m, &def, &p1, err, sizeof err), DS_ERR_RANGE);
  CHECK(strstr(err, "batch 0") != NULL);
  def.batch = 2;
  def.max_substeps = -1;
  CHECK_INT_EQ(ds_bsim_plan(m, &def, &p1, err, sizeof err), DS_ERR_RANGE);
}

/* The layout (engine/batch_priv.h) behind the plan: every region of the
 * reals buffer is 64-byte aligned, inside the buffer and disjoint from the
 * others; the per-instance parameter block holds every differentiable array
 * and the inverse masses, disjoint; the ints likewise. For a full tape, a
 * checkpointed one and none. */
typedef struct Region {
  size_t o, n;
  const char* name;
} Region;

static void check_regions(Region* r, int n, size_t total, const char* what) {
  for (int i = 0; i < n; i++) {
    if (r[i].n == 0) continue;
    if (r[i].o % 8 || r[i].o + r[i].n > total)
      DST_FAIL_AT("%s: region %s at %zu (+%zu) misaligned or past the end (%zu)", what, r[i].name, r[i].o, r[i].n,
                  total);
    for (int j = 0; j < i; j++)
      if (r[j].n && r[i].o < r[j].o + r[j].n && r[j].o < r[i].o + r[i].n)
        DST_FAIL_AT("%s: regions %s and %s overlap", what, r[i].name, r[j].name);
    dst_checks++;
  }
}

static void test_layout(const dsModel* m) {
  const int Ts[3] = {0, 30, 30}, Ks[3] = {1, 1, 7};
  for (int c = 0; c < 3; c++) {
    dsBatchSimDef def = ds_default_batch_sim_def();
    def.batch = 5;
    def.max_substeps = Ts[c];
    def.checkpoint_every = Ks[c];
    dsBatchLayout L;
    char err[256], what[64];
    snprintf(what, sizeof what, "T %d K %d", Ts[c], Ks[c]);
    CHECK_INT_EQ(ds__bsim_layout(m, &def, &L, err, sizeof err), 0);
    const size_t B = 5, Bn3 = B * L.n3, Bs3 = B * L.s3;
    const int full = L.T > 0 && L.K == 1, ck = L.T > 0 && L.K > 1, bwd = L.T > 0;
    CHECK_INT_EQ(L.nstate, full ? 31 : ck ? 5 : 0);
    size_t shared = 0, P = 0, ishared = 0;
    for (int f = 0; f < DS__MF_COUNT; f++) {
      if (L.where[f] == DS__BL_SHARED_REAL) shared += L.cnt[f];
      if (L.where[f] == DS__BL_SHARED_INT) ishared += L.cnt[f];
      if (L.where[f] == DS__BL_INSTANCE) P += L.cnt[f];
    }
    CHECK(L.P >= P && L.P < P + 8 && L.P % 8 == 0);
    Region r[] = {{0, shared, "shared"},
                  {L.o_param, B * L.P, "param"},
                  {L.o_grad, B * L.P, "grad"},
                  {L.o_cur[0], full ? 0 : Bn3, "cur0x"},
                  {L.o_cur[1], full ? 0 : Bn3, "cur0v"},
                  {L.o_cur[2], full ? 0 : Bn3, "cur1x"},
                  {L.o_cur[3], full ? 0 : Bn3, "cur1v"},
                  {L.o_tape[0], (size_t)L.nstate * Bn3, "tape x"},
                  {L.o_tape[1], (size_t)L.nstate * Bn3, "tape v"},
                  {L.o_seg[0], (size_t)L.nseg * Bn3, "seg x"},
                  {L.o_seg[1], (size_t)L.nseg * Bn3, "seg v"},
                  {L.o_act[0], (size_t)L.act_cap * B * L.nact, "act"},
                  {L.o_fext[0], (size_t)L.fext_cap * Bn3, "fext"},
                  {L.o_ef[0], Bs3, "ef"},
                  {L.o_J[0], B * L.ntet, "J"},
                  {L.o_adj[0], bwd ? Bn3 : 0, "adj x"},
                  {L.o_adj[1], bwd ? Bn3 : 0, "adj v"},
                  {L.o_av[0], bwd ? Bn3 : 0, "av 0"},
                  {L.o_af[0], bwd ? Bn3 : 0, "af 0"},
                  {L.o_av[1], bwd ? Bn3 : 0, "av 1"},
                  {L.o_af[1], bwd ? Bn3 : 0, "af 1"},
                  {L.o_aex[0], bwd ? Bs3 : 0, "aex"},
                  {L.o_aev[0], bwd ? Bs3 : 0, "aev"},
                  {L.o_scr[0], bwd ? B * L.nscr : 0, "scratch 0"},
                  {L.o_scr[1], bwd ? B * L.nscr : 0, "scratch 1"},
                  {L.o_aact_t[0], bwd ? B * L.nact : 0, "adj act (substep) 0"},
                  {L.o_aact_t[1], bwd ? B * L.nact : 0, "adj act (substep) 1"},
                  {L.o_aact[0], bwd ? B * L.nact : 0, "adj act"},
                  {L.o_afext[0], bwd ? Bn3 : 0, "adj fext"}};
    check_regions(r, (int)(sizeof r / sizeof r[0]), L.nreal, what);
    /* parameter block: instance arrays disjoint inside P */
    Region pr[DS__MF_COUNT];
    int np = 0;
    for (int f = 0; f < DS__MF_COUNT; f++)
      if (L.where[f] == DS__BL_INSTANCE) {
        pr[np].o = L.off[f];
        pr[np].n = L.cnt[f];
        pr[np].name = "param array";
        /* check_regions wants 8-aligned starts; compare overlap only */
        np++;
      }
    for (int i = 0; i < np; i++) {
      CHECK(pr[i].o + pr[i].n <= P);
      for (int j = 0; j < i; j++) CHECK(!(pr[i].o < pr[j].o + pr[j].n && pr[j].o < pr[i].o + pr[i].n));
    }
    CHECK(L.where[DS__MF_inv_mass] == DS__BL_INSTANCE && L.where[DS__MF_tet_k_mu] == DS__BL_INSTANCE);
    CHECK(L.where[DS__MF_tet_idx] == DS__BL_SHARED_INT && L.where[DS__MF_tet_B] == DS__BL_SHARED_REAL);
    CHECK(L.o_bad == ishared && L.o_status == L.o_bad + B * (size_t)(L.ntet + L.np) && L.nint == L.o_status + 3 * B);
  }
}

/* Allocation: create fails cleanly (DS_ERR_NOMEM, nothing left allocated)
 * when any one of its allocations fails; step, backward and their helpers
 * allocate nothing once the batch exists. */
static long g_count = 0, g_live = 0, g_fail_at = -1;
static void* a_malloc(size_t n) {
  if (g_fail_at >= 0 && g_count++ == g_fail_at) return NULL;
  void* p = malloc(n);
  if (p) g_live++;
  return p;
}
static void* a_realloc(void* q, size_t n) {
  if (g_fail_at >= 0 && g_count++ == g_fail_at) return NULL;
  void* p = realloc(q, n);
  if (p && !q) g_live++;
  return p;
}
static void* a_calloc(size_t c, size_t n) {
  if (g_fail_at >= 0 && g_count++ == g_fail_at) return NULL;
  void* p = calloc(c, n);
  if (p) g_live++;
  return p;
}
static void a_free(void* p) {
  if (p) g_live--;
  free(p);
}

static void test_alloc(const dsModel* m) {
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = 2;
  def.max_substeps = 12;
  def.checkpoint_every = 4;
  char err[512];
  int created = 0;
  for (long k = 0; k < 100 && !created; k++) {
    dsBatchSim* s = NULL;
    g_count = 0;
    g_live = 0;
    g_fail_at = k;
    ds_replace_allocator(a_malloc, a_realloc, a_calloc, a_free);
    int rc = ds_bsim_create(m, &def, &s, err, sizeof err);
    if (rc == 0) {
      created = 1;
      /* the whole episode allocates nothing */
      g_fail_at = -1;
      g_count = 0;
      const long live = g_live;
      dsReal* a = (dsReal*)calloc(2 * (size_t)m->nact + 1, sizeof(dsReal));
      CHECK_INT_EQ(ds_bsim_set_act(s, a), 0);
      CHECK_INT_EQ(ds_bsim_step(s, 12, NULL), 0);
      CHECK_INT_EQ(ds_bsim_backward_begin(s, NULL, NULL), 0);
      CHECK_INT_EQ(ds_bsim_backward_step(s, 12, a, NULL), 0);
      CHECK_INT_EQ(ds_bsim_backward_finish(s), 0);
      CHECK_INT_EQ(ds_bsim_reset(s), 0);
      CHECK_INT_EQ(g_live, live);
      CHECK_INT_EQ(g_count, 0);
      free(a);
      ds_bsim_free(s);
    } else {
      CHECK_INT_EQ(rc, DS_ERR_NOMEM);
      CHECK(s == NULL);
    }
    ds_replace_allocator(NULL, NULL, NULL, NULL);
    if (g_live != 0) DST_FAIL_AT("create failing at allocation %ld: %ld allocations left", k, g_live);
    dst_checks++;
  }
  CHECK(created);
}

static void test_refusals(const dsModel* m) {
  char err[512];
  dsBatchSimDef def = ds_default_batch_sim_def();
  dsBatchSim* s = NULL;
  /* memory bound */
  def.batch = 64;
  def.max_substeps = 1000;
  ds_set_memory_limit(1 << 20);
  CHECK_INT_EQ(ds_bsim_create(m, &def, &s, err, sizeof err), DS_ERR_NOMEM);
  CHECK(s == NULL);
  CHECK(strstr(err, "per instance") != NULL && strstr(err, "checkpoint") != NULL);
  ds_set_memory_limit(0);
  /* CUDA: not built, or no device here */
  def.batch = 2;
  def.max_substeps = 10;
  def.device.kind = DS_DEVICE_CUDA;
  def.device.index = 0;
  if (ds_cuda_device_count() == 0) {
    CHECK_INT_EQ(ds_bsim_create(m, &def, &s, err, sizeof err), DS_ERR_UNSUPPORTED);
    CHECK(strstr(err, ds_cuda_built() ? "no CUDA device" : "built without CUDA") != NULL);
  }
  /* rigid bodies */
  dsBuilder* b;
  dsModel* mr;
  ds_builder_create(&b);
  dsRigidDef rd = ds_default_rigid_def();
  const dsReal h[3] = {0.1, 0.1, 0.1};
  CHECK(ds_builder_add_rigid_box(b, h, &rd) >= 0);
  CHECK_INT_EQ(ds_builder_finalize(b, &mr), 0);
  ds_builder_free(b);
  def = ds_default_batch_sim_def();
  CHECK_INT_EQ(ds_bsim_create(mr, &def, &s, err, sizeof err), DS_ERR_UNSUPPORTED);
  CHECK(strstr(err, "rigid") != NULL);
  ds_model_free(mr);
}

static void test_api(const dsModel* m) {
  char err[512];
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = 3;
  def.max_substeps = 20;
  def.act_records = 2;
  dsBatchSim* s;
  CHECK_INT_EQ(ds_bsim_create(m, &def, &s, err, sizeof err), 0);
  const size_t n3 = 3 * (size_t)m->nparticle, na = (size_t)m->nact;
  dsReal* x = (dsReal*)calloc(3 * n3, sizeof(dsReal));
  dsReal* v = (dsReal*)calloc(3 * n3, sizeof(dsReal));
  dsReal* a = (dsReal*)calloc(3 * na + 1, sizeof(dsReal));
  /* reset state = initial state of every instance */
  CHECK_INT_EQ(ds_bsim_get_state(s, x, v), 0);
  CHECK(memcmp(x + 2 * n3, m->x0, n3 * sizeof(dsReal)) == 0);
  /* parameters per instance, validated like ds_model_set_param */
  dsReal* p = (dsReal*)malloc(n3 * sizeof(dsReal));
  for (size_t k = 0; k < n3; k++) p[k] = m->x0[k] + (k % 3 == 1 ? 1 : 0);
  CHECK_INT_EQ(ds_bsim_set_param(s, 1, "initial_position", p, (int)n3), 0);
  CHECK_INT_EQ(ds_bsim_get_state(s, x, v), 0);
  CHECK(memcmp(x + n3, p, n3 * sizeof(dsReal)) == 0);
  CHECK(memcmp(x, m->x0, n3 * sizeof(dsReal)) == 0);
  CHECK_INT_EQ(ds_bsim_set_param(s, 1, "initial_position", p, 2), DS_ERR_INVALID);
  CHECK(strstr(ds_bsim_last_error(s), "instance 1") != NULL);
  CHECK_INT_EQ(ds_bsim_set_param(s, 5, "particle.mass", p, 1), DS_ERR_RANGE);
  CHECK_INT_EQ(ds_bsim_get_grad(s, 0, "tet.B", p, 1), DS_ERR_NOTFOUND);
  dsReal g3[3] = {0, -1, 0}, r3[3];
  CHECK_INT_EQ(ds_bsim_set_param(s, -1, "gravity", g3, 3), 0);
  CHECK_INT_EQ(ds_bsim_get_param(s, 2, "gravity", r3, 3), 0);
  CHECK(r3[1] == -1);
  /* the activation tape holds act_records uploads */
  if (na) {
    CHECK_INT_EQ(ds_bsim_set_act(s, a), 0);
    CHECK_INT_EQ(ds_bsim_set_act(s, a), 0);
    CHECK_INT_EQ(ds_bsim_set_act(s, a), DS_ERR_RANGE);
    CHECK(strstr(ds_bsim_last_error(s), "act_records") != NULL);
  }
  /* tape capacity */
  CHECK_INT_EQ(ds_bsim_step(s, 21, NULL), DS_ERR_STATE);
  CHECK_INT_EQ(ds_bsim_step(s, 5, NULL), 0);
  CHECK_INT_EQ(ds_bsim_time(s), 5);
  CHECK_INT_EQ(ds_bsim_set_state(s, x, v), DS_ERR_STATE);
  /* a taped batch: one instance's state or parameters only between episodes */
  CHECK_INT_EQ(ds_bsim_set_instance(s, 0, x, v), DS_ERR_STATE);
  CHECK(strstr(ds_bsim_last_error(s), "without a tape") != NULL);
  CHECK_INT_EQ(ds_bsim_load_params(s, 0, m), DS_ERR_STATE);
  CHECK_INT_EQ(ds_bsim_backward_finish(s), DS_ERR_STATE);
  CHECK_INT_EQ(ds_bsim_backward_begin(s, NULL, NULL), 0);
  CHECK_INT_EQ(ds_bsim_backward_step(s, 6, NULL, NULL), DS_ERR_STATE);
  CHECK_INT_EQ(ds_bsim_backward_step(s, 5, NULL, NULL), 0);
  CHECK_INT_EQ(ds_bsim_backward_finish(s), 0);
  free(p);
  free(x);
  free(v);
  free(a);
  ds_bsim_free(s);
}

/* A tet driven to inversion in one instance only: that instance reports
 * DS_ERR_INVERTED with its substep and tet, the others are untouched. */
static void test_failure(const dsModel* m) {
  if (m->ntet == 0) return;
  char err[512];
  dsBatchSimDef def = ds_default_batch_sim_def();
  def.batch = 3;
  dsBatchSim* s;
  CHECK_INT_EQ(ds_bsim_create(m, &def, &s, err, sizeof err), 0);
  const size_t na = (size_t)m->nact;
  dsReal* a = (dsReal*)calloc(3 * na, sizeof(dsReal));
  for (int e = 0; e < m->ntet; e++) a[na + m->ntri + e] = -50; /* instance 1: volume target far below 0 */
  CHECK_INT_EQ(ds_bsim_set_act(s, a), 0);
  int st[3] = {9, 9, 9};
  int rc = DS_OK;
  for (int k = 0; k < 400 && rc == DS_OK; k++) rc = ds_bsim_step(s, 5, st);
  CHECK(rc == DS_ERR_INVERTED || rc == DS_ERR_DIVERGED);
  CHECK_INT_EQ(st[0], 0);
  CHECK(st[1] == DS_ERR_INVERTED || st[1] == DS_ERR_DIVERGED);
  CHECK_INT_EQ(st[2], 0);
  CHECK(strstr(ds_bsim_last_error(s), "instance 1: substep") != NULL);
  printf("failure report: %s\n", ds_bsim_last_error(s));
  /* the same failure per instance: code, substep and element as reported */
  int sub = -2, el = -2;
  CHECK_INT_EQ(ds_bsim_failure(s, 1, &sub, &el), st[1]);
  char want[128];
  snprintf(want, sizeof want, "instance 1: substep %d: %s %d ", sub, st[1] == DS_ERR_INVERTED ? "tet" : "particle", el);
  CHECK(strstr(ds_bsim_last_error(s), want) != NULL);
  CHECK_INT_EQ(ds_bsim_failure(s, 0, &sub, &el), 0);
  CHECK(sub == -1 && el == -1);
  CHECK_INT_EQ(ds_bsim_failure(s, 3, NULL, NULL), DS_ERR_INVALID);

  /* one instance restarted while the others step on (no tape): its state and
     parameters replaced, its failure cleared, the others' bits untouched */
  const size_t n3 = 3 * (size_t)m->nparticle;
  dsReal* x = (dsReal*)calloc(3 * n3, sizeof(dsReal));
  dsReal* v = (dsReal*)calloc(3 * n3, sizeof(dsReal));
  dsReal* x2 = (dsReal*)calloc(3 * n3, sizeof(dsReal));
  dsReal* v2 = (dsReal*)calloc(3 * n3, sizeof(dsReal));
  CHECK_INT_EQ(ds_bsim_get_state(s, x, v), 0);
  CHECK_INT_EQ(ds_bsim_set_instance(s, 1, m->x0, m->v0), 0);
  dsModel heavy = *m; /* the counts of m, another gravity */
  dsReal g[3] = {0, -30, 0}, gr[3];
  heavy.gravity = g;
  CHECK_INT_EQ(ds_bsim_load_params(s, 1, &heavy), 0); /* substep > 0: allowed without a tape */
  CHECK_INT_EQ(ds_bsim_get_param(s, 1, "gravity", gr, 3), 0);
  CHECK(gr[1] == -30);
  CHECK_INT_EQ(ds_bsim_get_param(s, 0, "gravity", gr, 3), 0);
  CHECK(gr[1] == m->gravity[1]);
  CHECK_INT_EQ(ds_bsim_get_state(s, x2, v2), 0);
  CHECK(memcmp(x, x2, n3 * sizeof(dsReal)) == 0 && memcmp(x + 2 * n3, x2 + 2 * n3, n3 * sizeof(dsReal)) == 0);
  CHECK(memcmp(v + 2 * n3, v2 + 2 * n3, n3 * sizeof(dsReal)) == 0);
  CHECK(memcmp(x2 + n3, m->x0, n3 * sizeof(dsReal)) == 0 && memcmp(v2 + n3, m->v0, n3 * sizeof(dsReal)) == 0);
  CHECK_INT_EQ(ds_bsim_failure(s, 1, NULL, NULL), 0);
  memset(a, 0, 3 * na * sizeof(dsReal));
  CHECK_INT_EQ(ds_bsim_set_act(s, a), 0);
  CHECK_INT_EQ(ds_bsim_step(s, 3, st), 0); /* instance 1 is healthy again */
  CHECK_INT_EQ(st[1], 0);
  dsModel other = *m;
  other.nparticle--;
  CHECK_INT_EQ(ds_bsim_load_params(s, 0, &other), DS_ERR_INVALID);
  CHECK(strstr(ds_bsim_last_error(s), "counts differ") != NULL);
  CHECK_INT_EQ(ds_bsim_set_instance(s, 3, x, v), DS_ERR_RANGE);
  free(x);
  free(v);
  free(x2);
  free(v2);
  CHECK_INT_EQ(ds_bsim_reset(s), 0);
  CHECK_INT_EQ(ds_bsim_step(s, 1, st), 0);
  free(a);
  ds_bsim_free(s);
}

int main(void) {
  const dsModel* fem = NULL;
  dsModel* models[64];
  int nm = 0;
  for (int i = 0; i < ds_env_class_count() && nm < 64; i++) {
    const char* name;
    dsModel* m = bt_env_model(i, &name);
    if (!m) continue;
    if (m->nbody) {
      printf("%-16s rigid bodies: not run by the batched engine (refused, see test_refusals)\n", name);
      ds_model_free(m);
      continue;
    }
    if (m->artic) { /* its actions are not activations: tests/test_batch_artic */
      printf("%-16s an articulation: tests/test_batch_artic\n", name);
      ds_model_free(m);
      continue;
    }
    parity_env(name, m);
    test_guarded(name, m);
    if (m->ntet && !fem) fem = m;
    models[nm++] = m;
  }
  CHECK(nm >= 3);
  CHECK(fem != NULL);
  { /* particles without elements (falling onto the ground): the backward's
       per-control tail then rides with the GATHER launch (engine/batch_sim.c) */
    dsBuilder* pb = NULL;
    CHECK_INT_EQ(ds_builder_create(&pb), 0);
    const dsGroundDef gd = {1e4, 10, 10, (dsReal)0.5, (dsReal)0.01};
    ds_builder_set_gravity(pb, 0, (dsReal)-9.8, 0);
    ds_builder_set_ground(pb, &gd);
    for (int i = 0; i < 4; i++) {
      const dsReal x[3] = {(dsReal)(0.1 * i), (dsReal)(0.002 + 0.001 * i), 0}, v[3] = {(dsReal)0.3, -1, 0};
      CHECK(ds_builder_add_particle(pb, x, v, (dsReal)(1 + i)) >= 0);
    }
    dsModel* pm = NULL;
    CHECK_INT_EQ(ds_builder_finalize(pb, &pm), 0);
    ds_builder_free(pb);
    if (pm) {
      parity_env("particles only", pm);
      ds_model_free(pm);
    }
  }
  if (fem) {
    /* the approach damping's smooth switch (contact.smooth, engine/force_contact.h)
       reaches the batched engine through the per-instance model views */
    dsModel* sm = NULL;
    CHECK_INT_EQ(ds_model_copy(fem, &sm), 0);
    if (sm) {
      sm->contact_smooth = (dsReal)0.01;
      parity_env("smooth contact", sm);
      ds_model_free(sm);
    }
    test_plan(fem);
    test_layout(fem);
    test_alloc(fem);
    test_refusals(fem);
    test_api(fem);
    test_failure(fem);
  }
  for (int i = 0; i < nm; i++) ds_model_free(models[i]);
  return DST_RESULT();
}
