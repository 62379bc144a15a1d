/* dsim engine: model (immutable after build), data (per episode or thread),
 * gradient (one adjoint per differentiable parameter), the semi-implicit
 * Euler step, the tape and the backward pass through an episode.
 *
 * Usage (MuJoCo style: functions take the read-only model and a data):
 *
 *   dsBuilder* b; ds_builder_create(&b);
 *   ... ds_builder_add_particle / add_tri / add_tet / set_ground ...
 *   dsModel* m; ds_builder_finalize(b, &m); ds_builder_free(b);
 *   dsDataDef dd = ds_default_data_def(); dd.max_substeps = T;
 *   dsData* d; ds_data_create(m, &dd, &d);
 *   dsGrad* g; ds_grad_create(m, &g);
 *   ds_data_reset(m, d);
 *   for (t = 0; t < T; t++) { set d->act, d->f_ext; ds_step(m, d); }
 *   ds_backward_begin(m, d);           // d->adj_x, d->adj_v = 0 at substep T
 *   add dL/dx_T into d->adj_x, dL/dv_T into d->adj_v;
 *   while (d->bt > 0) {
 *     ds_backward_step(m, d, g, adj_act, adj_fext);   // pops substep bt-1
 *     optionally add dL/dx_bt, dL/dv_bt into d->adj_x, d->adj_v;
 *   }
 *   ds_backward_finish(m, d, g);       // adds d->adj_x/adj_v to the initial-state gradient
 *
 * Rigid bodies (ds_builder_add_rigid_*): their states are d->body (13 per
 * body), their external wrenches d->body_fext (set per substep like f_ext),
 * the adjoints d->adj_body (add dL/d(body state) there like adj_x) and
 * d->adj_body_fext (the wrench's, after each ds_backward_step).
 *
 * An articulation (ds_builder_set_artic, dsim/artic.h): its state is
 * d->artic_state (q, then qd), its actions d->artic_act (set per substep),
 * the adjoints d->adj_artic and d->adj_artic_act (after each
 * ds_backward_step); its links' meshes are particles posed by the links.
 *
 * Units: SI, y up. Ground plane y = 0 when enabled. */
#ifndef DSIM_ENGINE_H
#define DSIM_ENGINE_H

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- model ------------------------------------------------------------------
 * One list is the single source of truth for the model's arrays:
 *   X(field, type, count, differentiable, name)
 * count is an expression in m_ (a const dsModel*). It drives the struct
 * fields, allocation, freeing, the dsGrad mirror (differentiable rows only)
 * and the name lookup of ds_model_param / ds_grad_param. Scalars (gravity,
 * contact and aerodynamic coefficients) are arrays of 1 or 3 so that every
 * parameter is addressed the same way. Element force slots: springs first
 * (2 per spring), then triangles (3), bending edges (4), tets (4). */
/* tet.M, the tet kernels' rest data (derived from tet.B and tet.vol at
 * finalize), in blocks of DS_TET_LANES tets (the CPU kernels' vector
 * width): DS_TET_MROWS rows per tet, M00 M01 M02 M11 M12 M22 of M = B B^T
 * (1/m^2), det B (1/m^3), V0 (m^3); row k of tet e at DS_TET_M_AT(e, k).
 * The lanes past ntet in the last block are zero. */
#define DS_TET_LANES ((int)(32 / sizeof(dsReal)))
#define DS_TET_MROWS 8
#define DS_TET_PADDED(ntet) (((ntet) + DS_TET_LANES - 1) / DS_TET_LANES * DS_TET_LANES)
#define DS_TET_M_AT(e, k) \
  (((size_t)(e) / DS_TET_LANES * DS_TET_MROWS + (size_t)(k)) * DS_TET_LANES + (size_t)(e) % DS_TET_LANES)
#define DS_MODEL_ARRAYS(X)                                                              \
  /* particles */                                                                       \
  X(x0, dsReal, 3 * (m_)->nparticle, 1, "initial_position") /* nparticle x 3, m */      \
  X(v0, dsReal, 3 * (m_)->nparticle, 1, "initial_velocity") /* nparticle x 3, m/s */    \
  X(mass, dsReal, (m_)->nparticle, 1, "particle.mass")      /* kg; 0 = fixed */         \
  X(inv_mass, dsReal, (m_)->nparticle, 0, "particle.inv_mass") /* 1/kg; 0 = fixed */    \
  /* springs */                                                                         \
  X(spring_idx, int, 2 * (m_)->nspring, 0, "spring.idx")    /* nspring x 2 */           \
  X(spring_ke, dsReal, (m_)->nspring, 1, "spring.ke")       /* N/m */                   \
  X(spring_kd, dsReal, (m_)->nspring, 1, "spring.kd")       /* N s/m */                 \
  X(spring_rest, dsReal, (m_)->nspring, 1, "spring.rest")   /* m */                     \
  /* triangle membranes (also the aerodynamic faces when aero is on) */                 \
  X(tri_idx, int, 3 * (m_)->ntri, 0, "tri.idx")             /* ntri x 3 */              \
  X(tri_Dm, dsReal, 4 * (m_)->ntri, 0, "tri.Dm")            /* ntri x 2x2, 1/m */       \
  X(tri_area, dsReal, (m_)->ntri, 0, "tri.area")            /* rest area, m^2 */        \
  X(tri_k_mu, dsReal, (m_)->ntri, 1, "tri.k_mu")            /* Pa m (per rest area) */  \
  X(tri_k_lambda, dsReal, (m_)->ntri, 1, "tri.k_lambda")                                \
  X(tri_k_damp, dsReal, (m_)->ntri, 1, "tri.k_damp")                                    \
  /* dihedral bending edges: x1, x2 opposite vertices, x3-x4 the shared edge */         \
  X(bend_idx, int, 4 * (m_)->nbend, 0, "bend.idx")          /* nbend x 4 */             \
  X(bend_ke, dsReal, (m_)->nbend, 1, "bend.ke")                                         \
  X(bend_kd, dsReal, (m_)->nbend, 1, "bend.kd")                                         \
  X(bend_rest, dsReal, (m_)->nbend, 1, "bend.rest")         /* rest angle, rad */       \
  /* tets (stable Neo-Hookean) */                                                       \
  X(tet_idx, int, 4 * (m_)->ntet, 0, "tet.idx")             /* ntet x 4 */              \
  X(tet_B, dsReal, 9 * (m_)->ntet, 0, "tet.B")              /* ntet x 3x3 Dm^-1, 1/m */ \
  X(tet_vol, dsReal, (m_)->ntet, 0, "tet.vol")              /* rest volume, m^3 */      \
  X(tet_k_mu, dsReal, (m_)->ntet, 1, "tet.k_mu")            /* Pa (per rest volume) */  \
  X(tet_k_lambda, dsReal, (m_)->ntet, 1, "tet.k_lambda")                                \
  X(tet_k_damp, dsReal, (m_)->ntet, 1, "tet.k_damp")                                    \
  /* render-only faces (boundary of tet meshes, cloth triangles) */                     \
  X(face_idx, int, 3 * (m_)->nface, 0, "face.idx")          /* nface x 3 */             \
  /* global parameters */                                                               \
  X(gravity, dsReal, 3, 1, "gravity")                       /* m/s^2 */                 \
  X(contact_ke, dsReal, 1, 1, "contact.ke")                 /* N/m */                   \
  X(contact_kd, dsReal, 1, 1, "contact.kd")                 /* N s/m */                 \
  X(contact_kf, dsReal, 1, 1, "contact.kf")                 /* N s/m */                 \
  X(contact_mu, dsReal, 1, 1, "contact.mu")                 /* Coulomb coefficient */   \
  X(contact_skin, dsReal, 1, 1, "contact.skin")             /* m */                     \
  X(aero_lift, dsReal, 1, 1, "aero.lift")                                               \
  X(aero_drag, dsReal, 1, 1, "aero.drag")                                               \
  /* particle -> incident element slots (CSR, ascending slot order) */                  \
  X(inc_start, int, (m_)->nparticle + 1, 0, "incidence.start")                          \
  X(inc_slot, int, (m_)->nslot, 0, "incidence.slot")                                    \
  /* rigid bodies (engine/rigid.h): state (p, q, v, w) of the centre of mass */         \
  X(body_mass, dsReal, (m_)->nbody, 1, "body.mass")         /* kg, > 0 */               \
  X(body_com, dsReal, 3 * (m_)->nbody, 1, "body.com")       /* COM in the body frame, m */ \
  X(body_inertia, dsReal, 9 * (m_)->nbody, 1, "body.inertia") /* 3x3 about the COM, body axes, kg m^2 */ \
  X(body_x0, dsReal, 3 * (m_)->nbody, 1, "body.initial_position") /* COM, world, m */    \
  X(body_q0, dsReal, 4 * (m_)->nbody, 1, "body.initial_orientation") /* (w,x,y,z), normalised at reset */ \
  X(body_v0, dsReal, 3 * (m_)->nbody, 1, "body.initial_velocity") /* COM, m/s */        \
  X(body_w0, dsReal, 3 * (m_)->nbody, 1, "body.initial_angular_velocity") /* world, rad/s */ \
  X(body_ke, dsReal, (m_)->nbody, 1, "body.contact_ke")     /* N/m per contact point */ \
  X(body_kd, dsReal, (m_)->nbody, 1, "body.contact_kd")     /* N s/m, approach only */  \
  X(body_kf, dsReal, (m_)->nbody, 1, "body.contact_kf")     /* N s/m */                 \
  X(body_mu, dsReal, (m_)->nbody, 1, "body.contact_mu")                                 \
  X(body_restitution, dsReal, (m_)->nbody, 1, "body.restitution") /* e in (0, 1] */     \
  X(body_zeta, dsReal, (m_)->nbody, 0, "body.zeta") /* damping ratio of e (derived; set_param keeps it) */ \
  X(body_vrange, int, 2 * (m_)->nbody, 0, "body.vertex_range") /* [first, end) particles */ \
  X(body_r, dsReal, (m_)->nbody ? 3 * (m_)->nparticle : 0, 0, "body.vertex") /* body-frame vertex, m */ \
  X(particle_body, int, (m_)->nbody ? (m_)->nparticle : 0, 0, "particle.body") /* body or -1 */ \
  /* an articulation (ds_builder_set_artic; engine/artic_model.c): its initial state, */ \
  /* its named parameters and the link each vertex follows */                            \
  X(artic_q0, dsReal, (m_)->artic_nq, 1, "artic.initial_q")    /* nq (dsim/artic.h) */   \
  X(artic_qd0, dsReal, (m_)->artic_nv, 1, "artic.initial_qd")  /* nv */                  \
  X(artic_param, dsReal, (m_)->artic_nparam, 1, "artic.param") /* ds_artic_param_name order; also by name */ \
  X(artic_link, int, (m_)->artic_nbody ? (m_)->nparticle : 0, 0, "artic.vertex_link") /* link of each vertex */ \
  X(artic_r, dsReal, (m_)->artic_nbody ? 3 * (m_)->nparticle : 0, 0, "artic.vertex") /* link frame, about its COM, z up, m */ \
  X(artic_s, dsReal, (m_)->artic_nbody ? (m_)->nparticle : 0, 0, "artic.vertex_anchor") /* weight of the joint's anchor_child */ \
  /* derived (last, so that the fields above keep their places in the struct) */        \
  X(tet_M, dsReal, DS_TET_MROWS * DS_TET_PADDED((m_)->ntet), 0, "tet.M") /* DS_TET_M_AT */

/* ---- time integrators ---------------------------------------------------------
 * DS_INTEGRATOR_SEMI_IMPLICIT (default): the explicit-force step of ds_step
 * below. DS_INTEGRATOR_IMPLICIT: backward Euler on the velocities,
 *   M (v' - v) = h (f(x + h v', v', act, f_ext) + M g),   x' = x + h v',
 * solved by Newton's method (docs/integrators.md): each iteration takes the
 * exact step J dv = -r, J = M + h Kv + h^2 Kx from the element Jacobians,
 * by BiCGSTAB, or where that fails to decrease |r| the step of A with
 * every element block projected to positive semi-definite, by PCG
 * (block-Jacobi), backtracking on the residual norm |r|. Its adjoint is
 * one transposed solve per substep with the exact Jacobian (implicit
 * function theorem). Particle models only: rigid bodies and lift/drag are
 * refused by ds_builder_finalize (DS_ERR_UNSUPPORTED). Ground contact
 * should have kd = 0 (the approach damping makes the force jump at the
 * skin, where a step can have no solution). */
typedef enum dsIntegrator { DS_INTEGRATOR_SEMI_IMPLICIT = 0, DS_INTEGRATOR_IMPLICIT = 1 } dsIntegrator;

/* Solver settings of the implicit integrator (ds_default_solver_settings). */
typedef struct dsSolverSettings { /* reals first: no padding inside (config structs are compared bytewise) */
  dsReal newton_tol;   /* Newton stops when |r| <= newton_tol max(|r(v)|, |M v|, h |M g|) (or |r| is at
                        * the rounding level of its terms) */
  dsReal cg_tol;       /* Newton's linear solves stop at |b - A dv| <= eta |b|, eta the Eisenstat-Walker
                        * forcing term (at most 0.1) but never below cg_tol (inexact Newton) */
  dsReal adjoint_tol;  /* the adjoint's BiCGSTAB stops at relative residual adjoint_tol, then is refined
                        * until every row's residual is within adjoint_tol of its own terms */
  int newton_max_iter; /* Newton iterations (linear solves) before the step fails */
  int cg_max_iter;     /* iteration cap of every linear solve (PCG, BiCGSTAB) */
  int precond;         /* BiCGSTAB's preconditioner: DS_PRECOND_JACOBI (default) or DS_PRECOND_CHOLMOD */
  int reserved_;       /* 0 (keeps the struct free of tail padding) */
} dsSolverSettings;

/* Preconditioners of the implicit step's BiCGSTAB solves (Newton's and the
 * adjoint's): the inverses of the 3 x 3 diagonal blocks, or a sparse LDL^T
 * of the symmetric part of J from SuiteSparse CHOLMOD, numeric per
 * assembly on a symbolic factorisation done once (ds_builder_set_solver
 * refuses DS_PRECOND_CHOLMOD with DS_ERR_UNSUPPORTED in a build without
 * CHOLMOD; docs/integrators.md has the measured cost). */
typedef enum dsPrecond { DS_PRECOND_JACOBI = 0, DS_PRECOND_CHOLMOD = 1 } dsPrecond;

typedef struct dsModel {
  int nparticle;   /* particles */
  int nspring;     /* springs */
  int ntri;        /* membrane triangles */
  int nbend;       /* bending edges */
  int ntet;        /* tetrahedra */
  int nface;       /* render faces */
  int nslot;       /* element force slots: 2*nspring + 3*ntri + 4*nbend + 4*ntet */
  int nact;        /* activations per substep: [tri | tet | spring] = ntri + ntet + nspring */
  int nbody;       /* rigid bodies (their vertices are particles driven by the body's pose) */
  dsReal dt;       /* substep, s */
  int ground;      /* 1: ground-plane contact at y = 0 */
  int aero;        /* 1: lift and drag on every triangle */
  int integrator;  /* dsIntegrator of ds_step */
  dsReal contact_smooth; /* width of the ground's approach-damping switch inside the skin, m (0: a step) */
  dsSolverSettings solver; /* the implicit integrator's settings */
#define DS__MODEL_FIELD(field, type, count, diff, name) type* field;
  DS_MODEL_ARRAYS(DS__MODEL_FIELD)
#undef DS__MODEL_FIELD
  void* err_;      /* internal: error buffer of ds_model_set_param */
  /* the articulation (NULL: none) and its sizes (dsim/artic.h) */
  struct dsArticModel* artic;
  int artic_nbody, artic_nq, artic_nv, artic_nu, artic_nparam;
} dsModel;

/* ---- building a model ------------------------------------------------------ */
typedef struct dsBuilder dsBuilder;

typedef struct dsTriMaterial { dsReal k_mu, k_lambda, k_damp; } dsTriMaterial;   /* densities per rest area */
typedef struct dsTetMaterial { dsReal k_mu, k_lambda, k_damp; } dsTetMaterial;   /* densities per rest volume */
typedef struct dsBendMaterial { dsReal ke, kd; } dsBendMaterial;
typedef struct dsGroundDef { dsReal ke, kd, kf, mu, skin; } dsGroundDef;

DS_API int ds_builder_create(dsBuilder** out);
DS_API void ds_builder_free(dsBuilder* b);
/* Message of the last failed builder call ("" when none). */
DS_API const char* ds_builder_last_error(const dsBuilder* b);

/* Each add returns the new element's index (>= 0) or a negative DS_ERR_*.
 * mass 0 makes a fixed particle (inverse mass 0, no gravity). v may be NULL. */
DS_API int ds_builder_add_particle(dsBuilder* b, const dsReal x[3], const dsReal v[3], dsReal mass);
/* rest < 0: the distance between the particles' positions. The spring's
 * activation a (its entry in the spring block of d->act) makes its rest
 * length rest (1 + a); a = 0 is the passive spring. */
DS_API int ds_builder_add_spring(dsBuilder* b, int i, int j, dsReal ke, dsReal kd, dsReal rest);
DS_API int ds_builder_add_tri(dsBuilder* b, int i, int j, int k, const dsTriMaterial* mat);
/* Rest angle from the particles' positions (computed at finalize). */
DS_API int ds_builder_add_bend(dsBuilder* b, int i1, int i2, int i3, int i4, const dsBendMaterial* mat);
/* Bending edges for every interior edge shared by two of triangles
 * [tri_begin, tri_end); returns the number added. */
DS_API int ds_builder_add_bending_from_tris(dsBuilder* b, int tri_begin, int tri_end, const dsBendMaterial* mat);
DS_API int ds_builder_add_tet(dsBuilder* b, int i, int j, int k, int l, const dsTetMaterial* mat);
DS_API int ds_builder_add_face(dsBuilder* b, int i, int j, int k);
/* Cloth: nx x ny cells of size cell in the xy plane, shifted by origin; every
 * particle gets mass particle_mass and velocity v (may be NULL); triangles
 * are also render faces; bending edges when bend != NULL. Returns the first
 * particle's index. */
DS_API int ds_builder_add_cloth_grid(dsBuilder* b, int nx, int ny, dsReal cell, const dsReal origin[3],
                                     dsReal particle_mass, const dsReal v[3], const dsTriMaterial* mat,
                                     const dsBendMaterial* bend);
/* Box of nx x ny x nz cells of size hx, hy, hz with its minimum corner at
 * origin; mass lumped from density (V/4 per tet vertex); boundary faces
 * extracted with outward orientation. Returns the first particle's index. */
DS_API int ds_builder_add_tet_grid(dsBuilder* b, int nx, int ny, int nz, dsReal hx, dsReal hy, dsReal hz,
                                   const dsReal origin[3], dsReal density, const dsReal v[3],
                                   const dsTetMaterial* mat);
/* Soft body from a tet mesh (struct dsMesh of dsim/mesh.h: nvert, x, ntet,
 * tet); as the tet grid. Returns the first particle's index. */
struct dsMesh;
DS_API int ds_builder_add_soft_mesh(dsBuilder* b, const struct dsMesh* mesh, dsReal density, const dsReal v[3],
                                    const dsTetMaterial* mat);
DS_API void ds_builder_set_gravity(dsBuilder* b, dsReal gx, dsReal gy, dsReal gz);
DS_API void ds_builder_set_dt(dsBuilder* b, dsReal dt);
/* The time integrator of ds_step (dsIntegrator); DS_ERR_INVALID for an
 * unknown value. Semi-implicit by default. */
DS_API int ds_builder_set_integrator(dsBuilder* b, int integrator);
/* newton_tol 1e-8, newton_max_iter 50, cg_tol 1e-5, cg_max_iter 1000,
 * adjoint_tol 1e-10. */
DS_API dsSolverSettings ds_default_solver_settings(void);
/* The implicit integrator's settings; DS_ERR_INVALID (the builder's error
 * names the field) unless the tolerances are finite and > 0 and the caps
 * >= 1. */
DS_API int ds_builder_set_solver(dsBuilder* b, const dsSolverSettings* s);
/* Ground-plane contact on (def != NULL) or off (NULL). */
DS_API void ds_builder_set_ground(dsBuilder* b, const dsGroundDef* def);
/* Width w >= 0 (m) over which the ground contact's approach damping
 * switches on inside the skin: kd s(c) min(v_y, 0) with s the C1
 * smoothstep of -c / w (c = y - skin < 0), continuous where a particle
 * crosses the skin (engine/force_contact.h; Newton passes it,
 * docs/integrators.md). Rigid bodies' contact then also reaches its
 * friction's Coulomb cap through a tanh (engine/rigid.h's smooth variant).
 * 0 (the default): the step at the skin, today's
 * model. DS_ERR_INVALID unless finite and >= 0. */
DS_API int ds_builder_set_contact_smooth(dsBuilder* b, dsReal width);
/* Lift and drag on every triangle (on when called). */
DS_API void ds_builder_set_aero(dsBuilder* b, dsReal k_lift, dsReal k_drag);
/* ---- rigid bodies (engine/rigid.h has the dynamics and its adjoint) ----------
 * A body is a mesh in its own frame whose vertices become particles (inverse
 * mass 0; particle.mass = body mass / vertices, a weight for centre-of-mass
 * observations only) posed every substep by x = p + R(q) (r - c): p the centre of mass in the
 * world, q the orientation (unit quaternion, w first), r a vertex in the
 * body frame, c the centre of mass in the body frame (body.com). Its faces
 * become render faces, its vertices are its contact points with the ground
 * (the engine's penalty model with the body's own ke, kd, kf, mu and a
 * restitution e, see engine/rigid.h). Rigid vertices may not belong to
 * springs, triangles, bending edges or tets (finalize rejects it). */
typedef struct dsRigidDef {
  dsReal position[3];         /* centre of mass at substep 0, world, m */
  dsReal orientation[4];      /* (w, x, y, z); normalised at reset */
  dsReal velocity[3];         /* of the centre of mass, m/s */
  dsReal angular_velocity[3]; /* world frame, rad/s */
  dsReal density;             /* kg/m^3 over the closed mesh (when mass <= 0 and no vertex masses) */
  dsReal mass;                /* > 0: total mass, kg (inertia scaled to it) */
  dsReal ke, kd, kf, mu;      /* ground contact per contact point (as dsGroundDef) */
  dsReal restitution;         /* e in (0, 1]: 1 = the engine's contact model unchanged */
} dsRigidDef;
/* density 1000, mass 0 (from density), identity orientation, at rest,
 * ke 1e4, kd 0, kf 1e2, mu 0.5, restitution 1. */
DS_API dsRigidDef ds_default_rigid_def(void);
/* Mass properties of a closed, outward-oriented triangle mesh of unit
 * density, exact (signed tetrahedra from the origin, canonical tetrahedron
 * covariance): volume, centre of mass, inertia about the centre of mass
 * (3x3, row-major). DS_ERR_MESH when the volume is not > 0. */
DS_API int ds_mesh_mass_properties(int nvert, const dsReal* x, int ntri, const int* tri, double* volume,
                                   double com[3], double inertia[9]);
/* A body from a closed triangle mesh (mesh->x, mesh->tri in the body frame;
 * e.g. read by ds_mesh_read_obj). vertex_mass == NULL: mass and inertia from
 * def->density over the mesh (exact); else point masses at the vertices
 * (nvert values, inertia of the point cloud). def->mass > 0 rescales both.
 * Returns the body index (>= 0) or a negative DS_ERR_*. */
DS_API int ds_builder_add_rigid(dsBuilder* b, const struct dsMesh* mesh, const dsReal* vertex_mass,
                                const dsRigidDef* def);
/* Primitives centred at their centre of mass: a box of half extents h; a
 * UV sphere with nseg segments around y and nseg/2 bands (poles on the y
 * axis); a cylinder along y of half height hh with nseg sides. Mass and
 * inertia are those of the mesh (exact for the polyhedron). */
DS_API int ds_builder_add_rigid_box(dsBuilder* b, const dsReal h[3], const dsRigidDef* def);
DS_API int ds_builder_add_rigid_sphere(dsBuilder* b, dsReal radius, int nseg, const dsRigidDef* def);
DS_API int ds_builder_add_rigid_cylinder(dsBuilder* b, dsReal radius, dsReal hh, int nseg, const dsRigidDef* def);
/* Validates (indices, masses, degenerate or inverted elements, dt) and builds
 * the model: rest shapes, rest angles, incidence lists. Errors name the
 * element. The builder stays usable. */
/* ---- articulations (dsim/artic.h; docs/articulated.md "In the engine") ------
 * A model may carry one articulation, stepped by ds_step with its own
 * dynamics (reduced coordinates) and differentiated by the backward; its
 * links' meshes are particles driven by the link poses, so rendering,
 * image losses and logs see them as any particle. Frames: the articulation
 * is z up, the particle world y up; a point p of the articulation is the
 * particle position (p_x, p_z, -p_y) (a rotation by -90 degrees about x), so
 * its gravity (0, 0, -g) is the world's (0, -g, 0) and its ground z = 0 the
 * world's y = 0. Its named parameters (ds_artic_param_name, e.g.
 * "joint.hinge.damping") are the model's too (ds_model_param,
 * ds_model_set_param, ds_grad_param: one value each), as are
 * "artic.param" (all of them), "artic.initial_q" and "artic.initial_qd".
 * Only articulation vertices: particles of another kind, elements, rigid
 * bodies, the implicit integrator and single precision are refused by
 * ds_builder_finalize (DS_ERR_UNSUPPORTED), and the batched engine refuses
 * such models. External forces (f_ext) do not act on articulation vertices;
 * the model's own gravity and contact arrays are unused (the
 * articulation's parameters are what acts), so a name both have
 * ("contact.ke", ...) means the articulation's in every lookup (set, read,
 * gradient, the batched engine's).
 * Sets the builder's articulation: a copy of am (its dt must be the
 * model's at finalize), with initial state q0 (nq), qd0 (nv) (NULL: the q = 0
 * pose, at rest). DS_ERR_STATE when one is set already. */
struct dsArticModel;
DS_API int ds_builder_set_artic(dsBuilder* b, const struct dsArticModel* am, const double* q0, const double* qd0);
/* Adds mesh (vertices in the frame of link `link`, z up, relative to its
 * centre of mass; its triangles become render faces) as particles that
 * follow the link: vertex k sits at r_k + anchor_weight[k] anchor_child
 * (anchor_weight NULL: 0), so a vertex of weight 1 stays at the link's joint
 * point whatever the length parameter. mass: the link's render mass spread
 * over the vertices (for centres of mass; it does not act). Returns the first
 * particle's index. */
DS_API int ds_builder_add_artic_mesh(dsBuilder* b, int link, const struct dsMesh* mesh, const dsReal* anchor_weight,
                                     dsReal mass);
DS_API int ds_builder_finalize(dsBuilder* b, dsModel** out);

DS_API void ds_model_free(dsModel* m);
/* Deep copy (e.g. one model per system-identification instance). */
DS_API int ds_model_copy(const dsModel* src, dsModel** out);
/* Any model array by name (see DS_MODEL_ARRAYS): pointer and element count.
 * DS_ERR_NOTFOUND for an unknown name. */
DS_API int ds_model_param(const dsModel* m, const char* name, const dsReal** ptr, int* count);
/* Replace a differentiable parameter between episodes (system
 * identification). count must match; values are validated (mass >= 0,
 * finite). Rest shapes do not follow a new initial_position. */
DS_API int ds_model_set_param(dsModel* m, const char* name, const dsReal* values, int count);
DS_API const char* ds_model_last_error(const dsModel* m);
/* Differentiable parameter names, i = 0 .. ds_param_count()-1. */
DS_API int ds_param_count(void);
DS_API const char* ds_param_name(int i);

/* ---- data ----------------------------------------------------------------- */
typedef struct dsDataDef {
  int max_substeps;     /* tape capacity T (substeps per episode); 0: no tape, forward only */
  int checkpoint_every; /* 0 or 1: store every state; K > 1: every K-th, recompute segments */
  int act_records;      /* distinct activation vectors the tape holds; 0: max_substeps */
  int fext_records;     /* distinct external-force fields the tape holds; 0: max_substeps */
  size_t arena_bytes;   /* scratch arena; 0: what step and backward need */
  int jacobian_mib;     /* implicit integrator with a tape: MiB for the Jacobians the forward keeps for the
                         * backward (each substep's at its start state, the matrix the adjoint of the substep
                         * before solves with; the backward assembles the ones not kept; the same bits either
                         * way); 0: none. ds_default_data_def: 64 */
} dsDataDef;
DS_API dsDataDef ds_default_data_def(void);

/* Arrays of a data, X(field, type, count, name), count in m_ (model) and
 * d_ (data). The first rows are the public state; the rest is the tape.
 * Between substeps a caller writes act and f_ext (and, during backward,
 * adds to adj_x/adj_v); x and v are read-only once the episode has started
 * (the tape and the mass gradient rely on them; use ds_data_set_state at
 * substep 0). The tape records act and f_ext only when they change. */
#define DS_DATA_ARRAYS(X)                                                                  \
  X(x, dsReal, 3 * (size_t)(m_)->nparticle, "x")               /* positions, nparticle x 3 */   \
  X(v, dsReal, 3 * (size_t)(m_)->nparticle, "v")               /* velocities */                 \
  X(f, dsReal, 3 * (size_t)(m_)->nparticle, "f")               /* total force of the last step */ \
  X(f_ext, dsReal, 3 * (size_t)(m_)->nparticle, "f_ext")       /* external force, N, set per substep */ \
  X(act, dsReal, (size_t)(m_)->nact, "act")                    /* activations [tri | tet | spring] */ \
  X(adj_x, dsReal, 3 * (size_t)(m_)->nparticle, "adj_x")       /* dL/dx at substep bt */        \
  X(adj_v, dsReal, 3 * (size_t)(m_)->nparticle, "adj_v")       /* dL/dv at substep bt */        \
  X(tape_x, dsReal, (size_t)(d_)->nstore * 3 * (m_)->nparticle, "tape_x")                        \
  X(tape_v, dsReal, (size_t)(d_)->nstore * 3 * (m_)->nparticle, "tape_v")                        \
  X(seg_x, dsReal, (size_t)(d_)->nseg * 3 * (m_)->nparticle, "seg_x")                            \
  X(seg_v, dsReal, (size_t)(d_)->nseg * 3 * (m_)->nparticle, "seg_v")                            \
  X(act_tape, dsReal, (size_t)(d_)->act_cap * (m_)->nact, "act_tape")                            \
  X(act_rec, int, (size_t)(d_)->max_substeps, "act_rec")                                         \
  X(fext_tape, dsReal, (size_t)(d_)->fext_cap * 3 * (m_)->nparticle, "fext_tape")                \
  X(fext_rec, int, (size_t)(d_)->max_substeps, "fext_rec")                                       \
  X(body, dsReal, 13 * (size_t)(m_)->nbody, "body")            /* body state (p, q, v, w) x nbody */ \
  X(body_fext, dsReal, 6 * (size_t)(m_)->nbody, "body_fext")   /* force, N, and torque about the COM, N m, world; set per substep */ \
  X(adj_body, dsReal, 13 * (size_t)(m_)->nbody, "adj_body")    /* dL/d(body state) at substep bt */ \
  X(adj_body_fext, dsReal, 6 * (size_t)(m_)->nbody, "adj_body_fext") /* dL/d(body_fext) of the substep last popped */ \
  X(tape_body, dsReal, (size_t)(d_)->nstore * 13 * (m_)->nbody, "tape_body")                     \
  X(seg_body, dsReal, (size_t)(d_)->nseg * 13 * (m_)->nbody, "seg_body")                         \
  X(bfext_tape, dsReal, (size_t)(d_)->bfext_cap * 6 * (m_)->nbody, "bfext_tape")                 \
  X(bfext_rec, int, (m_)->nbody ? (size_t)(d_)->max_substeps : 0, "bfext_rec")                   \
  X(artic_state, dsReal, (size_t)((m_)->artic_nq + (m_)->artic_nv), "artic_state") /* articulation: q, then qd */ \
  X(artic_act, dsReal, (size_t)(m_)->artic_nu, "artic_act")  /* its actions, set per substep */ \
  X(adj_artic, dsReal, (size_t)((m_)->artic_nq + (m_)->artic_nv), "adj_artic") /* dL/d(artic_state) at substep bt */ \
  X(adj_artic_act, dsReal, (size_t)(m_)->artic_nu, "adj_artic_act") /* dL/d(artic_act) of the substep last popped */ \
  X(tape_artic, dsReal, (size_t)(d_)->nstore * ((m_)->artic_nq + (m_)->artic_nv), "tape_artic")           \
  X(seg_artic, dsReal, (size_t)(d_)->nseg * ((m_)->artic_nq + (m_)->artic_nv), "seg_artic")               \
  X(artic_act_tape, dsReal, (size_t)(d_)->max_substeps * (m_)->artic_nu, "artic_act_tape")                \
  X(arena, unsigned char, (d_)->arena_size, "arena")

typedef struct dsData {
  int t;              /* substeps taken since reset */
  int bt;             /* backward: adj_x/adj_v are adjoints of the state at substep bt; -1 outside */
  int max_substeps;   /* tape capacity (0: no tape) */
  int ckpt;           /* K: checkpoint interval (1 = full tape) */
  int nstore;         /* states the tape holds */
  int nseg;           /* states of the recompute segment (K+1 in checkpointed mode) */
  int act_cap, act_n; /* activation records: capacity, used */
  int fext_cap, fext_n;
  int bfext_cap, bfext_n; /* body external-wrench records (nbody > 0) */
  int seg_start;      /* first substep held in seg_x/seg_v (-1: none) */
  int failed;         /* 1 after a divergence until reset */
  size_t arena_size, arena_top, arena_peak; /* bytes */
#define DS__DATA_FIELD(field, type, count, name) type* field;
  DS_DATA_ARRAYS(DS__DATA_FIELD)
#undef DS__DATA_FIELD
  void* err_;         /* internal: error buffer */
} dsData;

DS_API int ds_data_create(const dsModel* m, const dsDataDef* def, dsData** out);
DS_API void ds_data_free(dsData* d);
/* x = x0, v = v0, t = 0, act = f_ext = 0, tape and adjoints cleared. */
DS_API int ds_data_reset(const dsModel* m, dsData* d);
/* Replace the state; only at t = 0 (DS_ERR_STATE otherwise). x or v may be NULL. */
DS_API int ds_data_set_state(const dsModel* m, dsData* d, const dsReal* x, const dsReal* v);
/* Rigid body states (nbody x 13: p, q, v, w) at t = 0; q is normalised and
 * the bodies' vertices are re-posed. DS_ERR_STATE after the first step. */
DS_API int ds_data_set_body_state(const dsModel* m, dsData* d, const dsReal* body);
/* An impulse J (N s) at world point `point` on body b over the next substep:
 * d->body_fext[b] = (J/dt, (point - p) x J/dt). The caller clears
 * body_fext after that substep. */
DS_API int ds_body_set_impulse(const dsModel* m, dsData* d, int b, const dsReal J[3], const dsReal point[3]);
/* "substep 123: tet 45 inverted (J = -0.02)", or "" when none. */
DS_API const char* ds_data_last_error(const dsData* d);
/* Bytes held by the data (arrays, tape, arena, the implicit integrator's
 * kept Jacobians). */
DS_API size_t ds_data_bytes(const dsModel* m, const dsData* d);
/* Bytes ds_data_create(m, def) would allocate (0 for a bad def), without
 * allocating: the check before a large tape. */
DS_API size_t ds_data_bytes_needed(const dsModel* m, const dsDataDef* def);

/* ---- step ------------------------------------------------------------------
 * One semi-implicit Euler substep with d->act and d->f_ext held over it:
 *   f  = f_ext + sum of element forces + contact
 *   v' = v + dt*(w*f + g*[w > 0]),  x' = x + dt*v'
 * Records the tape. DS_ERR_INVERTED when a tet has J <= 0 at the start of
 * the substep, DS_ERR_DIVERGED when x' or v' is not finite (the data must
 * then be reset), DS_ERR_STATE when the tape is full.
 * With m->integrator DS_INTEGRATOR_IMPLICIT the substep is backward Euler
 * (dsIntegrator above): DS_ERR_DIVERGED also when Newton does not reach
 * newton_tol in newton_max_iter iterations (the message names the substep
 * and the relative residual; the state is left as it was and the data must
 * be reset), DS_ERR_INVERTED when a tet has J <= 0 at the end of it. */
DS_API int ds_step(const dsModel* m, dsData* d);
/* Forces at the current state into d->f (no integration, no tape). */
DS_API int ds_compute_forces(const dsModel* m, dsData* d);
/* Thread choice of ds_step and ds_backward_step (on by default): a model
 * large enough to be worth threads runs each substep on either one thread
 * or all (ds_set_num_threads), whichever the clock finds faster for this
 * data (re-checked now and then, so a run that shares its cores with other
 * processes falls back to one thread while they run). Results are the same
 * bits either way. Off: always all threads (above a fixed size). */
DS_API void ds_set_adaptive_threads(int on);
DS_API int ds_get_adaptive_threads(void);

/* ---- gradient ------------------------------------------------------------- */
#define DS__GRAD_IF_1(x) x
#define DS__GRAD_IF_0(x)
typedef struct dsGrad {
  const dsModel* model; /* the model it mirrors (must outlive the gradient) */
#define DS__GRAD_FIELD(field, type, count, diff, name) DS__GRAD_IF_##diff(dsReal* field;)
  DS_MODEL_ARRAYS(DS__GRAD_FIELD)
#undef DS__GRAD_FIELD
} dsGrad;

DS_API int ds_grad_create(const dsModel* m, dsGrad** out);
DS_API void ds_grad_free(dsGrad* g);
DS_API void ds_grad_zero(dsGrad* g);
DS_API int ds_grad_param(const dsGrad* g, const char* name, dsReal** ptr, int* count);

/* ---- backward --------------------------------------------------------------
 * Reverse mode through the taped episode. Gradients accumulate (+=) into g. */
/* bt = t; adj_x = adj_v = 0. DS_ERR_STATE after a failed substep
 * (DS_ERR_DIVERGED, DS_ERR_INVERTED) until the data is reset. */
DS_API int ds_backward_begin(const dsModel* m, dsData* d);
/* The same from substep t (0 <= t <= d->t): a backward of the substeps
 * below t only. Allowed after a failed substep: that substep left d->t at
 * itself and the substeps below it are on the tape, so a backward of what
 * came before the failure is the one a run without it would give. */
DS_API int ds_backward_begin_at(const dsModel* m, dsData* d, int t);
/* Pops substep bt-1: turns the adjoints of state bt into those of state
 * bt-1 (implicit integrator: one BiCGSTAB solve with the transposed exact
 * Jacobian, DS_ERR_DIVERGED naming the substep when it does not reach
 * adjoint_tol), accumulates parameter gradients into g, and writes (overwrites)
 * dL/d(act over that substep) into adj_act (nact, laid out as d->act:
 * [tri | tet | spring]) and dL/d(f_ext over that substep) into adj_fext
 * (nparticle x 3) when they are not NULL. */
DS_API int ds_backward_step(const dsModel* m, dsData* d, dsGrad* g, dsReal* adj_act, dsReal* adj_fext);
/* At bt = 0: adds adj_x, adj_v to g->x0, g->v0; ends the backward. */
DS_API int ds_backward_finish(const dsModel* m, dsData* d, dsGrad* g);
/* Whole episode from dL/dx_T, dL/dv_T (either may be NULL); adj_act
 * (t x nact) and adj_fext (t x nparticle x 3) receive every substep's
 * control gradients when not NULL. */
DS_API int ds_backward(const dsModel* m, dsData* d, dsGrad* g, const dsReal* adj_xT, const dsReal* adj_vT,
                       dsReal* adj_act, dsReal* adj_fext);

#ifdef __cplusplus
}
#endif
#endif
