/*
 * cuda_common.h — helpers shared by every CUDA source of the engines:
 * turning CUDA and cuFFT errors into rtomo_error values.  Every CUDA call and
 * kernel launch in kernels/ goes through these macros, so that no failure is
 * ignored and every message names the call and the place.
 */
#ifndef RTOMO_CUDA_COMMON_H
#define RTOMO_CUDA_COMMON_H

#include <cuda_runtime.h>

#include "engine_internal.h"

/* Evaluate a CUDA runtime call; on failure record it in `err` and return
 * RTOMO_E_BACKEND (RTOMO_E_NOMEM for allocation failures) from the
 * enclosing function. */
#define RTOMO_CUDA_TRY(err, call)                                              \
    do {                                                                       \
        cudaError_t rtomo_cuda_rc_ = (call);                                   \
        if (rtomo_cuda_rc_ != cudaSuccess)                                     \
            return rtomo_cuda_error((err), rtomo_cuda_rc_, #call, __FILE__,    \
                                    __LINE__);                                 \
    } while (0)

/* After a kernel launch: check the launch itself (not its completion). */
#define RTOMO_CUDA_CHECK_LAUNCH(err, what)                                     \
    RTOMO_CUDA_TRY(err, (cudaGetLastError()))

#ifdef __cplusplus
extern "C" {
#endif

/* Record a CUDA failure in err; returns RTOMO_E_NOMEM for
 * cudaErrorMemoryAllocation, RTOMO_E_BACKEND otherwise. */
rtomo_status rtomo_cuda_error(rtomo_error *err, cudaError_t rc,
                              const char *call, const char *file, int line);

/* Record a cuFFT failure (its integer result code) in err. */
rtomo_status rtomo_cufft_error(rtomo_error *err, int rc, const char *call,
                               const char *file, int line);

/* The device ordinals a plan should use: opt->device_ids when n_devices > 0
 * (each checked to exist), else all visible devices.  Returns the count in
 * *n and the ordinals in ids[RTOMO_MAX_DEVICES]. */
rtomo_status rtomo_cuda_plan_devices(const rtomo_engine_options *opt,
                                     int *ids, int *n, rtomo_error *err);

#ifdef __cplusplus
}
#endif

#define RTOMO_CUFFT_TRY(err, call)                                             \
    do {                                                                       \
        int rtomo_cufft_rc_ = (int)(call);                                     \
        if (rtomo_cufft_rc_ != 0)                                              \
            return rtomo_cufft_error((err), rtomo_cufft_rc_, #call, __FILE__,  \
                                     __LINE__);                                \
    } while (0)

#endif
