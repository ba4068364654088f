/* What the oneDNN kernels of ops/ share (blas.c defines them): one CPU engine for the
 * process, a stream per thread, and the one-thread OpenMP team every calling thread sets. */
#ifndef NPUD_OPS_DNNL_COMMON_H
#define NPUD_OPS_DNNL_COMMON_H

#include <dnnl.h>

/* 0 when NPUD_SGEMM=openblas turns oneDNN off. */
int ops_dnnl_wanted(void);
/* NULL when oneDNN has no CPU engine. */
dnnl_engine_t ops_dnnl_engine(void);
/* This thread's stream (destroyed when the thread exits); NULL on failure. Call
 * ops_dnnl_engine first. */
dnnl_stream_t ops_dnnl_stream(void);
/* oneDNN's OpenMP team of this thread set to one thread (once per thread). */
void ops_dnnl_one_thread(void);
/* A new memory object of layout to_md (oneDNN-allocated) holding src, whose layout is
 * plain_md, reordered on this thread: dnnl_success and *ret, or the failing status. */
dnnl_status_t ops_dnnl_pack(const dnnl_memory_desc_t *plain_md, const void *src, const dnnl_memory_desc_t *to_md,
                            dnnl_memory_t *ret);

#endif
