/*
 * row_copy.c - the copy of a row of weights into the ring, written past
 * the caches where the target can (non-temporal stores on x86), and the
 * fence that must follow a batch of them. Not a kernel variant: the values
 * are those of memcpy on every target.
 */
#include <stdint.h>
#include <string.h>

#include "kernels.h"

#if !defined(PB_NO_SIMD) && (defined(__GNUC__) || defined(__clang__)) && \
    (defined(__x86_64__) || defined(__i386__)) && defined(__SSE__)
#include <xmmintrin.h>
#define PB__STREAM_STORES 1
#else
#define PB__STREAM_STORES 0
#endif

void pb__copy_floats(float *dst, const float *src, size_t n, int streamed) {
#if PB__STREAM_STORES
    if (streamed) {
        /* 16-byte aligned non-temporal stores (the baseline SSE of every
         * x86-64). */
        size_t i = 0;
        for (; i < n && ((uintptr_t)(dst + i) & 15u) != 0u; ++i)
            dst[i] = src[i];
        for (; i + 4u <= n; i += 4u)
            _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
        for (; i < n; ++i) dst[i] = src[i];
        return;
    }
#else
    (void)streamed;
#endif
    if (n > 0u) memcpy(dst, src, n * sizeof *dst);
}

void pb__copy_fence(int streamed) {
#if PB__STREAM_STORES
    /* Orders the non-temporal stores before whatever the caller does
     * next, as ordinary stores would be. */
    if (streamed) _mm_sfence();
#else
    (void)streamed;
#endif
}
