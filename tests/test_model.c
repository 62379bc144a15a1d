/* Builder, finalize and named parameters: validation errors name the
 * element; mesh helpers give the expected counts, masses and faces; the
 * incidence lists cover every slot once in ascending order; every
 * differentiable name resolves in model and gradient with the same count;
 * the setter validates and keeps inverse masses in step. */
#include "config.h"

#include <math.h>

#include "dsim/mesh.h"
#include "dsim/scenes.h"
#include "tests/dstest.h"
#include "tests/enginetest.h"
#include "engine/forces.h"

static void test_errors(void) {
  dsBuilder* b;
  CHECK_INT_EQ(ds_builder_create(&b), 0);
  dsReal x[4][3] = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {0, 1, 0}};
  for (int i = 0; i < 4; i++) CHECK_INT_EQ(ds_builder_add_particle(b, x[i], NULL, 1), i);
  dsReal bad[3] = {0, NAN, 0};
  CHECK_INT_EQ(ds_builder_add_particle(b, bad, NULL, 1), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "particle 4");
  CHECK_INT_EQ(ds_builder_add_particle(b, x[0], NULL, -1), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "mass -1");
  CHECK_INT_EQ(ds_builder_add_spring(b, 0, 9, 1, 0, -1), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "spring 0: particle index 9 out of range");
  CHECK_INT_EQ(ds_builder_add_spring(b, 2, 2, 1, 0, -1), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "particle 2 repeated");
  CHECK_INT_EQ(ds_builder_add_spring(b, 0, 2, 1, 0, -1), 0);
  dsTriMaterial tm = {1, 1, 0};
  dsTetMaterial te = {1, 1, 0};
  CHECK_INT_EQ(ds_builder_add_tri(b, 0, 1, 3, &tm), 0);
  CHECK_INT_EQ(ds_builder_add_tri(b, 0, 1, 2, &tm), 1); /* collinear: caught at finalize */
  dsModel* m = NULL;
  CHECK_INT_EQ(ds_builder_finalize(b, &m), DS_ERR_MESH);
  CHECK(m == NULL);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "tri 1 (particles 0, 1, 2): degenerate");
  ds_builder_free(b);

  ds_builder_create(&b);
  dsReal y[4][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, -1}};
  for (int i = 0; i < 4; i++) ds_builder_add_particle(b, y[i], NULL, 1);
  ds_builder_add_tet(b, 0, 1, 2, 3, &te);
  CHECK_INT_EQ(ds_builder_finalize(b, &m), DS_ERR_MESH);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "tet 0 (particles 0, 1, 2, 3): inverted rest tet (signed volume -0.16");
  ds_builder_free(b);

  /* a hinge whose wing is collapsed (x1 on the edge line) */
  ds_builder_create(&b);
  dsReal h[4][3] = {{0.5, 0, 0}, {0, 1, 1}, {0, 0, 0}, {1, 0, 0}};
  for (int i = 0; i < 4; i++) ds_builder_add_particle(b, h[i], NULL, 1);
  dsBendMaterial bm = {1, 0};
  CHECK_INT_EQ(ds_builder_add_bend(b, 0, 1, 2, 3, &bm), 0);
  CHECK_INT_EQ(ds_builder_finalize(b, &m), DS_ERR_MESH);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "bend 0 (particles 0, 1, 2, 3): degenerate hinge");
  ds_builder_free(b);

  ds_builder_create(&b);
  ds_builder_add_particle(b, y[0], NULL, 1);
  ds_builder_set_dt(b, 0);
  CHECK_INT_EQ(ds_builder_finalize(b, &m), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_builder_last_error(b), "dt 0");
  ds_builder_set_dt(b, 1e-3); /* the builder stays usable */
  CHECK_INT_EQ(ds_builder_finalize(b, &m), 0);
  CHECK_STR_EQ(ds_builder_last_error(b), "");
  ds_model_free(m);
  ds_builder_free(b);
}

static void test_cloth_and_csr(void) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsTriMaterial tm = {10, 100, 1};
  dsBendMaterial bm = {1, 0.1};
  dsReal o[3] = {1, 2, 3}, v[3] = {0.5, 0, 0};
  CHECK_INT_EQ(ds_builder_add_cloth_grid(b, 4, 4, 0.25, o, 2, v, &tm, &bm), 0);
  CHECK_INT_EQ(ds_builder_add_spring(b, 0, 24, 5, 0, -1), 0);
  dsModel* m;
  CHECK_INT_EQ(ds_builder_finalize(b, &m), 0);
  ds_builder_free(b);
  CHECK_INT_EQ(m->nparticle, 25);
  CHECK_INT_EQ(m->ntri, 32);
  CHECK_INT_EQ(m->nface, 32);
  CHECK_INT_EQ(m->nbend, 3 * 16 - 2 * 4);
  CHECK_INT_EQ(m->nact, 32 + 1); /* [tri | tet | spring] */
  CHECK_INT_EQ(m->nslot, 2 + 3 * 32 + 4 * 40);
  CHECK_CLOSE(m->spring_rest[0], sqrt(2.0), 1e-12, 0);
  CHECK_CLOSE(m->x0[3 * 24], 2, 1e-12, 0);
  CHECK_CLOSE(m->x0[3 * 24 + 1], 3, 1e-12, 0);
  CHECK(m->v0[3] == 0.5);
  CHECK_CLOSE(m->tri_area[5], 0.25 * 0.25 / 2, 1e-12, 0);
  double maxrest = 0;
  for (int e = 0; e < m->nbend; e++) maxrest = fmax(maxrest, fabs(m->bend_rest[e]));
  CHECK(maxrest < 1e-12); /* flat sheet */
  /* CSR: every slot once, ascending per particle, slot belongs to the particle */
  int* seen = (int*)calloc((size_t)m->nslot, sizeof(int));
  const int* cat[4] = {m->spring_idx, m->tri_idx, m->bend_idx, m->tet_idx};
  const int len[4] = {2 * m->nspring, 3 * m->ntri, 4 * m->nbend, 4 * m->ntet};
  int* owner = (int*)calloc((size_t)m->nslot, sizeof(int));
  int s = 0;
  for (int p = 0; p < 4; p++)
    for (int k = 0; k < len[p]; k++) owner[s++] = cat[p][k];
  int ok = m->inc_start[0] == 0 && m->inc_start[m->nparticle] == m->nslot;
  for (int i = 0; i < m->nparticle; i++)
    for (int k = m->inc_start[i]; k < m->inc_start[i + 1]; k++) {
      int sl = m->inc_slot[k];
      ok &= sl >= 0 && sl < m->nslot && owner[sl] == i;
      if (k > m->inc_start[i]) ok &= m->inc_slot[k - 1] < sl;
      if (sl >= 0 && sl < m->nslot) seen[sl]++;
    }
  for (int k = 0; k < m->nslot; k++) ok &= seen[k] == 1;
  CHECK(ok);
  free(seen);
  free(owner);
  ds_model_free(m);
}

/* The force table's layout: slot bases are running sums in list order
 * (springs, triangles, bending edges, tets; aero writes into the
 * triangles' slots), activation blocks are [tri | tet | spring], and the
 * per-particle and scratch sizes follow the flags. */
static void test_force_layout(void) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsTriMaterial tm = {10, 100, 1};
  dsBendMaterial bm = {1, 0.1};
  dsTetMaterial te = {1e3, 1e3, 1};
  dsReal o[3] = {0, 1, 0}, o2[3] = {2, 1, 0};
  CHECK(ds_builder_add_cloth_grid(b, 2, 2, 0.25, o, 1, NULL, &tm, &bm) >= 0);
  CHECK(ds_builder_add_spring(b, 0, 8, 5, 0, -1) >= 0);
  CHECK(ds_builder_add_spring(b, 1, 7, 5, 0, -1) >= 0);
  CHECK(ds_builder_add_tet_grid(b, 1, 1, 1, 0.1, 0.1, 0.1, o2, 1000, NULL, &te) >= 0);
  dsModel* m;
  CHECK_INT_EQ(ds_builder_finalize(b, &m), 0);
  dsForceLayout L;
  ds__force_layout(m, &L);
  CHECK_INT_EQ(L.slot[DS__F_SPRING], 0);
  CHECK_INT_EQ(L.slot[DS__F_TRI], 2 * m->nspring);
  CHECK_INT_EQ(L.slot[DS__F_BEND], 2 * m->nspring + 3 * m->ntri);
  CHECK_INT_EQ(L.slot[DS__F_TET], 2 * m->nspring + 3 * m->ntri + 4 * m->nbend);
  CHECK(L.nslot == m->nslot && m->nslot == 2 * m->nspring + 3 * m->ntri + 4 * m->nbend + 4 * m->ntet);
  CHECK_INT_EQ(L.act[DS__F_TRI], 0);
  CHECK_INT_EQ(L.act[DS__F_TET], m->ntri);
  CHECK_INT_EQ(L.act[DS__F_SPRING], m->ntri + m->ntet);
  CHECK_INT_EQ(L.act[DS__F_BEND], -1);
  CHECK(L.nact == m->nact && m->nact == m->ntri + m->ntet + m->nspring);
  CHECK_INT_EQ(L.count[DS__F_AERO], 0);
  CHECK_INT_EQ(L.count[DS__F_CONTACT], 0);
  CHECK(L.nscratch == 0);
  ds_model_free(m);
  /* aero and ground on: aero adds into the triangles' slots; scratch 2 per
   * triangle and 5 per particle; slots and activations unchanged */
  ds_builder_set_aero(b, 0.5, 0.2);
  dsGroundDef gd = {1e3, 1, 1, 0.5, 0.01};
  ds_builder_set_ground(b, &gd);
  CHECK_INT_EQ(ds_builder_finalize(b, &m), 0);
  ds_builder_free(b);
  dsForceLayout L2;
  ds__force_layout(m, &L2);
  CHECK_INT_EQ(L2.count[DS__F_AERO], m->ntri);
  CHECK_INT_EQ(L2.slot[DS__F_AERO], L.slot[DS__F_TRI]);
  CHECK_INT_EQ(L2.count[DS__F_CONTACT], m->nparticle);
  CHECK(L2.nscratch == 2 * (size_t)m->ntri + 5 * (size_t)m->nparticle);
  CHECK(L2.nslot == L.nslot && L2.nact == L.nact);
  ds_model_free(m);
}

static void test_soft(void) {
  dsBuilder* b;
  ds_builder_create(&b);
  dsTetMaterial te = {1e3, 1e3, 1};
  dsReal o[3] = {0, 1, 0};
  CHECK_INT_EQ(ds_builder_add_tet_grid(b, 2, 2, 2, 0.1, 0.2, 0.3, o, 500, NULL, &te), 0);
  /* a gear from the mesh generator, as the control-fem scene */
  dsMesh gear;
  memset(&gear, 0, sizeof gear);
  dsGearDef gd = ds_default_gear_def();
  CHECK_INT_EQ(ds_mesh_gear(&gd, &gear), 0);
  dsReal t[3] = {-4, 2, 0}, v[3] = {1.5, 0, 0};
  ds_mesh_translate(&gear, t);
  /* without its triangles: the boundary is extracted */
  int ntri = gear.ntri;
  int* tri = gear.tri;
  gear.ntri = 0;
  gear.tri = NULL;
  CHECK_INT_EQ(ds_builder_add_soft_mesh(b, &gear, 1, v, &te), 27);
  gear.ntri = ntri;
  gear.tri = tri;
  dsModel* m;
  CHECK_INT_EQ(ds_builder_finalize(b, &m), 0);
  ds_builder_free(b);
  CHECK_INT_EQ(m->nparticle, 27 + gear.nvert);
  CHECK_INT_EQ(m->ntet, 48 + gear.ntet);
  CHECK_INT_EQ(m->nface, 4 * (4 + 4 + 4) + ntri);
  CHECK_INT_EQ(m->nact, 48 + gear.ntet);
  double mbox = 0, mgear = 0, vgear = 0;
  for (int i = 0; i < 27; i++) mbox += m->mass[i];
  for (int i = 27; i < m->nparticle; i++) mgear += m->mass[i];
  for (int e = 48; e < m->ntet; e++) vgear += m->tet_vol[e];
  CHECK_CLOSE(mbox, 500 * 0.2 * 0.4 * 0.6, 1e-12, 0);
  CHECK_CLOSE(mgear, vgear, 1e-12, 0);
  CHECK_CLOSE(vgear, 9.68, 0.01, 0);
  CHECK(m->v0[3 * 30] == 1.5 && m->v0[0] == 0);
  fprintf(stderr, "gear: %d particles, %d tets, volume %.4g\n", gear.nvert, gear.ntet, vgear);
  ds_mesh_free(&gear);
  ds_model_free(m);
}

static void test_names(void) {
  dsModel* m = et_cloth_model(2, 2, 1e-3);
  dsGrad* g;
  CHECK_INT_EQ(ds_grad_create(m, &g), 0);
  CHECK(ds_param_count() == 38); /* 35, then artic.initial_q, artic.initial_qd, artic.param */
  CHECK(ds_param_name(ds_param_count()) == NULL);
  for (int i = 0; i < ds_param_count(); i++) {
    const char* name = ds_param_name(i);
    const dsReal* mp;
    dsReal* gp;
    int mc = -1, gc = -2;
    CHECK_INT_EQ(ds_model_param(m, name, &mp, &mc), 0);
    CHECK_INT_EQ(ds_grad_param(g, name, &gp, &gc), 0);
    CHECK_INT_EQ(mc, gc);
    CHECK((mc == 0) == (gp == NULL));
  }
  const dsReal* p;
  int n;
  CHECK_INT_EQ(ds_model_param(m, "tri.k_mu", &p, &n), 0);
  CHECK(p == m->tri_k_mu && n == m->ntri);
  CHECK_INT_EQ(ds_model_param(m, "tri.Dm", &p, &n), 0); /* readable, not settable */
  CHECK_INT_EQ(n, 4 * m->ntri);
  CHECK_INT_EQ(ds_model_set_param(m, "tri.Dm", p, n), DS_ERR_NOTFOUND);
  CHECK_INT_EQ(ds_model_param(m, "tri.idx", &p, &n), DS_ERR_INVALID); /* ints */
  CHECK_INT_EQ(ds_model_param(m, "tri.nope", &p, &n), DS_ERR_NOTFOUND);
  CHECK_INT_EQ(ds_grad_param(g, "particle.inv_mass", NULL, NULL), DS_ERR_NOTFOUND);
  dsReal mass[9];
  for (int i = 0; i < 9; i++) mass[i] = 0.5 + i;
  CHECK_INT_EQ(ds_model_set_param(m, "particle.mass", mass, 8), DS_ERR_INVALID);
  CHECK_STR_CONTAINS(ds_model_last_error(m), "8 values given, 9 expected");
  mass[3] = -1;
  CHECK_INT_EQ(ds_model_set_param(m, "particle.mass", mass, 9), DS_ERR_RANGE);
  CHECK_STR_CONTAINS(ds_model_last_error(m), "\"particle.mass\"[3]: expected a number >= 0, got -1");
  {
    /* friction, stiffness and damping must be >= 0; gravity may take any sign */
    const dsReal neg = -0.1;
    const char* const names[] = {"contact.mu", "contact.ke", "contact.kd", "contact.kf"};
    for (int k = 0; k < 4; k++) {
      CHECK_INT_EQ(ds_model_set_param(m, names[k], &neg, 1), DS_ERR_RANGE);
      CHECK_STR_CONTAINS(ds_model_last_error(m), "expected a number >= 0, got -0.1");
    }
  }
  mass[3] = 0;
  CHECK_INT_EQ(ds_model_set_param(m, "particle.mass", mass, 9), 0);
  CHECK(m->inv_mass[3] == 0 && m->inv_mass[4] == 1 / 4.5);
  dsReal g3[3] = {0, -1.6, 0};
  CHECK_INT_EQ(ds_model_set_param(m, "gravity", g3, 3), 0);
  CHECK(m->gravity[1] == (dsReal)-1.6);
  g3[0] = INFINITY;
  CHECK_INT_EQ(ds_model_set_param(m, "gravity", g3, 3), DS_ERR_INVALID);
  /* deep copy: equal arrays, independent storage */
  dsModel* c;
  CHECK_INT_EQ(ds_model_copy(m, &c), 0);
  CHECK(c->nparticle == m->nparticle && c->nslot == m->nslot && c->dt == m->dt && c->aero == m->aero);
  CHECK(c->x0 != m->x0 && memcmp(c->x0, m->x0, 3 * (size_t)m->nparticle * sizeof(dsReal)) == 0);
  CHECK(memcmp(c->inc_slot, m->inc_slot, (size_t)m->nslot * sizeof(int)) == 0);
  CHECK(memcmp(c->tri_Dm, m->tri_Dm, 4 * (size_t)m->ntri * sizeof(dsReal)) == 0);
  CHECK(c->inv_mass[3] == 0 && c->gravity[1] == (dsReal)-1.6);
  g3[0] = 0;
  g3[1] = -9.8;
  ds_model_set_param(c, "gravity", g3, 3);
  CHECK(m->gravity[1] == (dsReal)-1.6);
  ds_model_free(c);
  ds_grad_free(g);
  ds_model_free(m);
}

int main(void) {
  if (DS_SINGLE) DST_SKIP("exact comparisons assume double precision");
  test_errors();
  test_cloth_and_csr();
  test_force_layout();
  test_soft();
  test_names();
  return DST_RESULT();
}
