/*
 * cuda_fbp_half.h — half acquisition in the CUDA FBP backend
 * (cuda_fbp_half.cu): the bin weights of fbp_half.h applied on the device.
 * Private to the CUDA backend (only .cu files include it).
 */
#ifndef RTOMO_CUDA_FBP_HALF_H
#define RTOMO_CUDA_FBP_HALF_H

#include "cuda_fbp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* With half acquisition: multiply the `frames` frames just packed into the
 * slot's filter spectrum (line integrals, two rows per complex row) by
 * the bin weights, on its compute stream; nothing without. */
rtomo_status cuda_fbp_half_weigh(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                 int frames, rtomo_error *err);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_CUDA_FBP_HALF_H */
