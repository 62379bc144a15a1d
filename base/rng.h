/* The one random-number module of the library (internal, ds__ prefix).
 *
 * splitmix64 (Steele, Lea, Flood 2014): a 64-bit counter advanced by the
 * golden-ratio increment and mixed by two xor-shift-multiply rounds. It seeds
 * the generator below, and on its own serves the few draws of an episode
 * (envs: goal position, cloth size and height), where a seed is the stream.
 *
 * dsRng: xoshiro256** (Blackman, Vigna 2018) seeded through splitmix64, for
 * long streams (controller initialisation, random search, CEM). Uniform
 * doubles in [0, 1) from the top 53 bits; normals by Box-Muller.
 * Deterministic across platforms and thread counts. */
#ifndef DSIM_BASE_RNG_H
#define DSIM_BASE_RNG_H

#include <math.h>
#include <stdint.h>

/* next value of the splitmix64 stream whose state is *x */
static inline uint64_t ds__splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* uniform in [0, 1) from the splitmix64 stream *x */
static inline double ds__splitmix64_uniform(uint64_t* x) { return (double)(ds__splitmix64(x) >> 11) * 0x1.0p-53; }

typedef struct dsRng {
  uint64_t s[4];
} dsRng;

static inline void ds__rng_seed(dsRng* r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = ds__splitmix64(&x);
}

static inline uint64_t ds__rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t ds__rng_next(dsRng* r) {
  uint64_t* s = r->s;
  const uint64_t res = ds__rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = ds__rotl64(s[3], 45);
  return res;
}

/* uniform in [0, 1) */
static inline double ds__rng_uniform(dsRng* r) { return (double)(ds__rng_next(r) >> 11) * 0x1.0p-53; }

/* standard normal (Box-Muller; one value per call, the partner is dropped) */
static inline double ds__rng_normal(dsRng* r) {
  double u1 = ds__rng_uniform(r), u2 = ds__rng_uniform(r);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
