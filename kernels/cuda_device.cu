/*
 * cuda_device.cu — CUDA availability, device enumeration and error
 * reporting for the CUDA backends.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"

extern "C" int rtomo_cuda_built(void) { return 1; }

extern "C" int rtomo_cuda_device_count(void)
{
    int n = 0;
    /* No driver, no device or a broken installation all mean "no GPU" here;
     * plans that ask for CUDA explicitly get the detailed error instead. */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" void *rtomo_host_alloc(size_t bytes, int *locked)
{
    void *p = NULL;
    /* No GPU: locking would only pin pages nobody copies into by DMA. */
    if (bytes > 0 && rtomo_cuda_device_count() > 0 &&
        cudaHostAlloc(&p, bytes, cudaHostAllocPortable) == cudaSuccess) {
        *locked = 1;
        return p;
    }
    cudaGetLastError();         /* a refusal is not an error: fall back */
    *locked = 0;
    return rtomo_host_alloc_plain(bytes);
}

extern "C" void rtomo_host_free(void *p, int locked)
{
    if (!p)
        return;
    if (!locked) {
        free(p);
        return;
    }
    /* Called where no error can be returned (a buffer's last reference);
     * a failure here leaves the pages locked until the process ends, which
     * is all that can be done about it. */
    if (cudaFreeHost(p) != cudaSuccess)
        cudaGetLastError();
}

extern "C" rtomo_status rtomo_cuda_error(rtomo_error *err, cudaError_t rc,
                                         const char *call, const char *file,
                                         int line)
{
    const char *base = strrchr(file, '/');
    return rtomo_set_error(err,
                           rc == cudaErrorMemoryAllocation ? RTOMO_E_NOMEM
                                                           : RTOMO_E_BACKEND,
                           "CUDA error %s (%s) in %s at %s:%d",
                           cudaGetErrorName(rc), cudaGetErrorString(rc), call,
                           base ? base + 1 : file, line);
}

extern "C" rtomo_status rtomo_cufft_error(rtomo_error *err, int rc,
                                          const char *call, const char *file,
                                          int line)
{
    const char *base = strrchr(file, '/');
    return rtomo_set_error(err, rc == 2 /* CUFFT_ALLOC_FAILED */
                                    ? RTOMO_E_NOMEM : RTOMO_E_BACKEND,
                           "cuFFT error %d in %s at %s:%d", rc, call,
                           base ? base + 1 : file, line);
}

extern "C" rtomo_status rtomo_cuda_device_info(int index, rtomo_device_info *out,
                                               rtomo_error *err)
{
    int n = rtomo_cuda_device_count();
    if (index < 0 || index >= n)
        return rtomo_set_error(err, RTOMO_E_RANGE,
                               "CUDA device %d does not exist (%d visible)",
                               index, n);
    cudaDeviceProp prop;
    RTOMO_CUDA_TRY(err, cudaGetDeviceProperties(&prop, index));
    memset(out, 0, sizeof *out);
    out->index = index;
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->memory_total = prop.totalGlobalMem;
    out->multiprocessors = prop.multiProcessorCount;
    out->compute_major = prop.major;
    out->compute_minor = prop.minor;
    int previous = 0;
    RTOMO_CUDA_TRY(err, cudaGetDevice(&previous));
    RTOMO_CUDA_TRY(err, cudaSetDevice(index));
    size_t free_bytes = 0, total = 0;
    cudaError_t rc = cudaMemGetInfo(&free_bytes, &total);
    RTOMO_CUDA_TRY(err, cudaSetDevice(previous));
    RTOMO_CUDA_TRY(err, rc);
    out->memory_free = free_bytes;
    return RTOMO_OK;
}

extern "C" rtomo_status rtomo_cuda_plan_devices(const rtomo_engine_options *opt,
                                                int *ids, int *n,
                                                rtomo_error *err)
{
    int visible = rtomo_cuda_device_count();
    if (visible < 1)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE, "no CUDA device is visible");
    if (opt->n_devices <= 0) {
        *n = visible < RTOMO_MAX_DEVICES ? visible : RTOMO_MAX_DEVICES;
        for (int i = 0; i < *n; i++)
            ids[i] = i;
        return RTOMO_OK;
    }
    if (opt->n_devices > RTOMO_MAX_DEVICES)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "%d devices requested; at most %d are supported",
                               opt->n_devices, RTOMO_MAX_DEVICES);
    for (int i = 0; i < opt->n_devices; i++) {
        if (opt->device_ids[i] < 0 || opt->device_ids[i] >= visible)
            return rtomo_set_error(err, RTOMO_E_RANGE,
                                   "CUDA device %d does not exist (%d visible)",
                                   opt->device_ids[i], visible);
        for (int j = 0; j < i; j++)
            if (opt->device_ids[j] == opt->device_ids[i])
                return rtomo_set_error(err, RTOMO_E_INVALID,
                                       "CUDA device %d is listed twice",
                                       opt->device_ids[i]);
        ids[i] = opt->device_ids[i];
    }
    *n = opt->n_devices;
    return RTOMO_OK;
}
