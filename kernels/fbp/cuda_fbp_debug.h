/*
 * cuda_fbp_debug.h — a test hook of the CUDA FBP backend: how a plan's kept
 * rows, and the rows of its latest reconstruct call, are shared among its
 * slots (devices, or parts of one device under RTOMO_CUDA_FBP_SPLIT).  For
 * tests that must see the deal itself rather than infer it from timing.
 * Not part of the engine API.  Include config.h first: builds without CUDA
 * get an inline stand-in that reports no CUDA plan.
 */
#ifndef RTOMO_CUDA_FBP_DEBUG_H
#define RTOMO_CUDA_FBP_DEBUG_H

#include "rtomo_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rtomo_cuda_fbp_debug_slot {
    int device;                 /* CUDA ordinal */
    int rows_owned;             /* kept rows whose sinograms it holds */
    int rows_last_call;         /* rows it reconstructed in the latest
                                   rtomo_fbp_reconstruct call */
} rtomo_cuda_fbp_debug_slot;

/* Describe up to `capacity` slots of `plan` in slots[]; returns the number
 * of slots, or -1 when plan is not a CUDA FBP plan. */
#ifdef RTOMO_HAVE_CUDA
int rtomo_cuda_fbp_debug_slots(const rtomo_fbp *plan,
                               rtomo_cuda_fbp_debug_slot *slots, int capacity);
#else
static inline int rtomo_cuda_fbp_debug_slots(const rtomo_fbp *plan,
                                             rtomo_cuda_fbp_debug_slot *slots,
                                             int capacity)
{
    (void)plan;
    (void)slots;
    (void)capacity;
    return -1;
}
#endif

#ifdef __cplusplus
}
#endif

#endif
