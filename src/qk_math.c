/*
 * qk_math.c - the exponential of the Q/K scorer out of line, for the
 * tests: pb__exp_core (runtime_internal.h) is a fixed sequence of IEEE
 * double operations (docs/spec.md §15.5), without libm, so that the
 * softmax, and with it every victim, is the same on every platform and
 * build. Built with floating-point contraction off: no fused multiply-add
 * may merge two of its roundings.
 */
#include "runtime_internal.h"

double pb__exp_nonpos(double x) { return pb__exp_core(x); }
