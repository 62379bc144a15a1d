/* DS_HD marks inline per-element math that compiles both as C (the CPU
 * engine) and as CUDA C++ (cuda/ kernels): one definition, two backends. */
#ifndef DSIM_BASE_HD_H
#define DSIM_BASE_HD_H

#if defined(__CUDACC__)
#  define DS_HD __host__ __device__
#  define DS_INLINE static __forceinline__
#  define DS_RESTRICT __restrict__
#else
#  define DS_HD
#  define DS_INLINE static inline
#  define DS_RESTRICT restrict
#endif

#endif
