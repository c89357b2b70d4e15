/*
 * cuda_fbp_backend.cu — the CUDA FBP backend (interim: the engine API
 * entry points exist so that CUDA builds link; the kernels land with the GPU
 * FBP engine and until then plans on this backend are refused).
 */
#include "config.h"

#include "cuda_common.h"

static rtomo_status create_unavailable(rtomo_fbp *plan, rtomo_error *err)
{
    (void)plan;
    return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                           "the CUDA FBP backend is not implemented in this "
                           "build; use the CPU backend");
}

extern "C" const rtomo_fbp_backend_ops rtomo_cuda_fbp_ops = {
    "cuda", create_unavailable,
};
