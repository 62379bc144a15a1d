/* Articulated bodies, internal: the model and data layouts shared by
 * engine/artic.c (builder, parameters, step, adjoint) and the dynamics
 * kernels of engine/artic_dyn.h. */
#ifndef DSIM_ENGINE_ARTIC_PRIV_H
#define DSIM_ENGINE_ARTIC_PRIV_H

#include "dsim/artic.h"

#define DS__ARTIC_NAME 64  /* longest body/joint/actuator name + 1 */
#define DS__ARTIC_PNAME 128 /* longest parameter name + 1: prefix, a name (< 64), a key (< 48) */
#define DS__ARTIC_MAXDOF 6 /* dof of a free joint */
#define DS__ARTIC_ERR 320
/* Largest tape of mass-matrix factors ds_artic_data_create keeps, bytes:
 * beyond it the backward refactors M at every step instead. */
#define DS__ARTIC_FACTOR_TAPE_MAX ((size_t)128 << 20)
/* Largest tape of the kinematics (0.48 kB a hinge link a step), bytes:
 * within it the step keeps them and the backward reads them back instead of
 * redoing them (a 1,000-step rollout of 16 links: 7.7 MB); a tape that
 * outgrows the last-level cache costs more time streaming from memory than
 * redoing the kinematics saves (a 17 MB tape made the 16-link chain's
 * gradient 30% slower), so beyond it the backward redoes them. */
#define DS__ARTIC_KIN_TAPE_MAX ((size_t)8 << 20)
/* Largest tape of the RNEA's per-body results at each step's qdd (A, F
 * and P: 144 bytes a body a step; a 1,000-step rollout of 16 links: 2.3 MB),
 * bytes: within it the backward reads them back instead of redoing the
 * RNEA (engine/artic_step.h, rnea_at_qdd). */
#define DS__ARTIC_RNEA_TAPE_MAX ((size_t)4 << 20)

/* Parameter offsets of one body and its joint into dsArticModel.param;
 * -1 where the joint type has no such parameter. */
typedef struct dsArticBodyParams {
  int mass, inertia;      /* inertia: 3 consecutive */
  int anchor_p, anchor_c; /* 3 consecutive each */
  int damping, armature, stiffness, rest, lower, upper;
} dsArticBodyParams;

struct dsArticModel {
  int nbody, nq, nv, nu, nsphere, nparam;
  double dt;
  int ground;
  /* per body, parents first */
  int* parent; /* body index, -1 = world */
  int* jtype;  /* dsJointType */
  int* qadr;
  int* vadr;
  int* limited;
  double* axis;    /* 3 per body, unit */
  double* quat0;   /* 4 per body, unit */
  double* R0;      /* 9 per body: quat0 as a rotation matrix */
  double* limit_k; /* limit stiffness, damping, width */
  double* limit_b;
  double* limit_w;
  dsArticBodyParams* bp;
  char (*body_name)[DS__ARTIC_NAME];
  char (*joint_name)[DS__ARTIC_NAME];
  /* contact spheres (capsules expand to two) */
  int* sph_body;
  double* sph_pos; /* 3 per sphere, body frame */
  double* sph_radius;
  /* actuators */
  int* act_type;
  int* act_body; /* the joint's body */
  double* act_ctrl_limit;
  double* act_force_limit;
  int* act_gear; /* parameter offsets, -1 where absent */
  int* act_kp;
  int* act_kv;
  char (*act_name)[DS__ARTIC_NAME];
  /* global parameter offsets */
  int p_gravity; /* 3 consecutive */
  int p_contact; /* ke, kd, kf, mu consecutive; -1 without the ground */
  double* param; /* nparam */
  char (*param_name)[DS__ARTIC_PNAME];
};

/* Scratch of one dynamics pass over real (double) or complex-step numbers
 * (engine/artic_dyn.h): per body and per dof arrays, sized at creation. */
struct dsArticData {
  int steps, t;
  int nq, nv, nu, nparam;
  double* q;   /* (steps + 1) x nq */
  double* qd;  /* (steps + 1) x nv */
  double* act; /* steps x nu */
  void* wr;    /* real workspace (ws_r, engine/artic_dyn.h) */
  void* wc;    /* complex workspace (ws_c) */
  double* M;   /* nv x nv mass matrix, then its Cholesky factor */
  double* qdd; /* nv */
  double* vec; /* scratch: 6 (nq + nv + nu + nparam) + 2 nv + nq */
  double* adj; /* adjoint of the current state: nq + nv */
  double* rev; /* reverse-mode scratch: nu + nparam + nv doubles, then the bodies' adjoints */
  /* Per step, the factorisation of M the backward solves with (a tree of
   * joints with at most one dof: each body's U and D of the articulated-body
   * algorithm, 7 a body; else the Cholesky factor L, rows of the lower
   * triangle, nv (nv + 1) / 2; factor_len in engine/artic_step.h) and qdd,
   * so the backward does not redo the dynamics: steps x that, and steps x
   * nv; NULL when over DS__ARTIC_FACTOR_TAPE_MAX (or steps = 0). */
  double* Lt;
  double* qddt;
  const double* Lcur; /* the taped factor of the step replayed last; NULL: d->M */
  /* Per step, the kinematics (kin_save in engine/artic.c: kinb bytes a
   * step), with the factor tape when within DS__ARTIC_KIN_TAPE_MAX; else NULL. */
  unsigned char* kt;
  size_t kinb;
  /* Per step, each body's RNEA results A, F, P at the step's qdd (18
   * doubles a body): with the factor tape, when within
   * DS__ARTIC_RNEA_TAPE_MAX; else NULL. */
  double* rt;
  long nfactor; /* factorisations of M so far (the tests count them) */
  long nkin;    /* real kinematics passes of steps and backward passes so far (likewise) */
};

/* Adjoints of one body's kinematic and RNEA quantities (engine/artic_rev.h). */
typedef struct {
  double Rw[9], Rj[9], x[3], jp[3], V[6], A[6], F[6], m, h[3], Ib[9];
  double S[6 * DS__ARTIC_MAXDOF]; /* last: step_vjp zeroes only a joint's columns */
} dsArticAdjBody;

/* ds_artic_backward by forward tangents (nq + nv + nu [+ nparam] sweeps per
 * step) instead of the reverse pass: the same gradient, the tests'
 * reference. */
int ds__artic_backward_tangent(const dsArticModel* m, dsArticData* d, const double* dl_dq, const double* dl_dqd,
                               const dsArticGrad* g);

/* For the particle engine (engine/artic_model.c): a deep copy of the model
 * (its untaped substep is engine/artic_step.h's). */
int ds__artic_model_copy(const dsArticModel* src, dsArticModel** out);
/* m's arrays as one block at base (backend memory; engine/batch_artic.c):
 * out = m with its array pointers into the block, img (NULL: none) the
 * block's contents to upload there; returns its bytes. */
size_t ds__artic_model_layout(const dsArticModel* m, void* base, unsigned char* img, dsArticModel* out);
/* Bytes ds_artic_data_create(m, 0) allocates (for memory plans). */
size_t ds__artic_data_bytes(const dsArticModel* m);
/* The parameter vector itself (ds_artic_param_name order): the particle
 * model's "artic.param" is stepped from here after ds_model_set_param
 * checked each value with ds_artic_param_set. */
double* ds__artic_params(dsArticModel* m);

#endif
