/*
 * u128.c - the divisions of the 128-bit kit (u128.h): 128 / 128 by shift
 * and subtract, and 128 / 64 by Knuth's algorithm D on 32-bit digits.
 */
#include "u128.h"

#define PB__LO32(x) ((x) & 0xFFFFFFFFu)

/* Plain shift-and-subtract. */
pb__u128 pb__u128_divmod(pb__u128 n, pb__u128 d, pb__u128 *rem) {
    pb__u128 q = {0u, 0u}, r = {0u, 0u};
    for (int i = 127; i >= 0; --i) {
        const uint64_t bit =
            i >= 64 ? (n.hi >> (i - 64)) & 1u : (n.lo >> i) & 1u;
        r = pb__u128_shl1(r);
        r.lo |= bit;
        q = pb__u128_shl1(q);
        if (!pb__u128_lt(r, d)) {
            r = pb__u128_sub(r, d);
            q.lo |= 1u;
        }
    }
    if (rem != NULL) *rem = r;
    return q;
}

/* Knuth's algorithm D for a two-digit divisor in base 2^32 (the "divlu"
 * form of Hacker's Delight, 9-3): normalise, estimate each 32-bit quotient
 * digit from the top digits, correct it at most twice. */
uint64_t pb__div128(uint64_t hi, uint64_t lo, uint64_t d, uint64_t *rem) {
    const uint64_t b = UINT64_C(1) << 32;
    const int s = pb__leading_zeros(d);
    d <<= s;
    const uint64_t vn1 = d >> 32, vn0 = PB__LO32(d);
    const uint64_t un32 = s == 0 ? hi : (hi << s) | (lo >> (64 - s));
    const uint64_t un10 = lo << s;
    const uint64_t un1 = un10 >> 32, un0 = PB__LO32(un10);

    uint64_t q1 = un32 / vn1, rhat = un32 - q1 * vn1;
    while (q1 >= b || q1 * vn0 > b * rhat + un1) {
        --q1;
        rhat += vn1;
        if (rhat >= b) break;
    }
    const uint64_t un21 = un32 * b + un1 - q1 * d;
    uint64_t q0 = un21 / vn1;
    rhat = un21 - q0 * vn1;
    while (q0 >= b || q0 * vn0 > b * rhat + un0) {
        --q0;
        rhat += vn1;
        if (rhat >= b) break;
    }
    *rem = (un21 * b + un0 - q0 * d) >> s;
    return q1 * b + q0;
}
