/* Fluid model and data internals (engine/fluid.c and its operator headers). */
#ifndef DSIM_ENGINE_FLUID_PRIV_H
#define DSIM_ENGINE_FLUID_PRIV_H

#include "base/internal.h"
#include "dsim/fluid.h"
#include "engine/fluid_body.h"

#define FL_PNAME 48
/* the parameter slots (FL_P_*, engine/fluid_body.h) of soft obstacle k */
#define FL_P_SOFT(m, k) (FL_P_SRC + FL_P_PER_SRC * (m)->def.nsource + 4 * (k))

struct dsFluidModel {
  dsFluidDef def;
  int dim, ncell, nvel, nf[3], foff[3];
  FGrid cellg, faceg[3];
  unsigned char* solid;    /* ncell */
  unsigned char* active;   /* nvel: face carries flow (not a wall, not touching a solid) */
  unsigned char* src_cell; /* ncell: bit s set when source s's box holds the cell centre */
  signed char* src_face;   /* nvel: last velocity source whose box holds the face, or -1 */
  int* nbr;                /* ncell x 6: (axis, low/high) coupled neighbour in the pressure matrix, or -1 */
  int* diag;               /* ncell: the pressure matrix diagonal (active faces of the cell) */
  unsigned char* insys;    /* ncell: cell is an unknown of the pressure solve */
  double* precon;          /* ncell: MIC(0) factor */
  int nparam;
  char (*pname)[FL_PNAME];
  double** pptr; /* nparam pointers into def */
  struct FluidFFT* fft; /* the FFT pressure solve (engine/fluid_fft.c), or NULL: PCG */
  /* the axis-d weights of face grid a at the coordinate of node i along
   * axis d of grid G (G: face grids 0..2, cells 3), a, d < dim, at
   * vtab_mem + view.vtoff[G][a][d] + i; sampling the velocity at the nodes
   * of G reads them (engine/fluid_advect.h) */
  FAxis* vtab_mem;
  /* the model's arrays and sizes as the operator bodies read them
   * (engine/fluid_body.h); view.par is NULL: a step gives it the values
   * (ds__fluid_view) */
  dsFluidView view;
};

/* A state is one array: velocity (nvel), density (ncell), temperature (ncell). */
struct dsFluidData {
  int steps, every, t, nslot, ssize, seg_start;
  int nvel, ncell, dim;
  double* slots; /* nslot x ssize: states 0, K, 2K, ... */
  double* seg;   /* (K + 1) x ssize: a recomputed segment */
  double* cur;   /* ssize */
  double* nxt;   /* ssize */
  double* forces; /* steps x ncell x dim (def.force_field) */
  double *hat, *back, *ghat, *gback; /* advection scratch, max points of a grid */
  double *pi, *r, *z, *s, *as, *blk;  /* pressure solve */
  double *g0, *g1, *gf, *gpar;        /* adjoints */
  double* spen;                       /* ssize: a state after the soft obstacles' damping (stage 0) */
  unsigned char* setmark;             /* steps + 1: 1 where ds_fluid_set_state put a state off a checkpoint */
  unsigned char* setat;               /* steps + 1: 1 where it put one at all (the tape there is not the
                                         output of the step before, which a backward then recomputes) */
  int iters;
  double resid;
  dsErrBuf err;
};

/* v = m's view with the parameter values in par (FL_P_MAX) */
void ds__fluid_view(const dsFluidModel* m, double* par, dsFluidView* v);

/* engine/fluid_fft.c. Build: sets m->fft when the build has FFTW and the
 * domain allows the FFT solve (no solid cell, closed or periodic walls),
 * else leaves it NULL; 0 or DS_ERR_NOMEM. Solve: x = A'^+ b (A' the scaled
 * pressure matrix of engine/fluid_project.h; the constant mode of x is 0),
 * work: ncell scratch; b is kept. */
int ds__fluid_fft_build(dsFluidModel* m);
void ds__fluid_fft_free(dsFluidModel* m);
void ds__fluid_fft_solve(const dsFluidModel* m, const double* b, double* x, double* work);

#endif
