/*
 * allocator.h - the allocator an object of this library uses (internal):
 * the caller's pb_allocator, checked, or malloc and free.
 */
#ifndef PB_SRC_ALLOCATOR_H
#define PB_SRC_ALLOCATOR_H

#include "pyramidkv/pyramidkv.h"

/* *out = *caller, or malloc/free (ctx NULL) for a NULL caller. Returns 0
 * (out untouched) if the caller's allocator lacks a function, else 1. */
int pb__allocator_of(const pb_allocator *caller, pb_allocator *out);

#endif /* PB_SRC_ALLOCATOR_H */
