/* Seeded random numbers for the controllers: xoshiro256** seeded through
 * splitmix64, uniform doubles in [0, 1) from the top 53 bits, normals by
 * Box-Muller. Deterministic across platforms and thread counts. */
#ifndef DSIM_CTRL_RNG_H
#define DSIM_CTRL_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct dsCtrlRng {
  uint64_t s[4];
} dsCtrlRng;

static inline uint64_t ctrl_splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline void ctrl_rng_seed(dsCtrlRng* r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = ctrl_splitmix64(&x);
}

static inline uint64_t ctrl_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t ctrl_rng_next(dsCtrlRng* r) {
  uint64_t* s = r->s;
  const uint64_t res = ctrl_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = ctrl_rotl(s[3], 45);
  return res;
}

/* uniform in [0, 1) */
static inline double ctrl_rng_uniform(dsCtrlRng* r) { return (double)(ctrl_rng_next(r) >> 11) * 0x1.0p-53; }

/* standard normal (Box-Muller; one value per call, the partner is dropped) */
static inline double ctrl_rng_normal(dsCtrlRng* r) {
  double u1 = ctrl_rng_uniform(r), u2 = ctrl_rng_uniform(r);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
