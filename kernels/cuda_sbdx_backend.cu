/*
 * cuda_sbdx_backend.cu — the CUDA SBDX backend (interim: the engine API
 * entry points exist so that CUDA builds link; the kernels land with the GPU
 * SBDX engine and until then plans on this backend are refused).
 */
#include "config.h"

#include "cuda_common.h"

static rtomo_status create_unavailable(rtomo_sbdx *plan, rtomo_error *err)
{
    (void)plan;
    return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                           "the CUDA SBDX backend is not implemented in this "
                           "build; use the CPU backend");
}

extern "C" const rtomo_sbdx_backend_ops rtomo_cuda_sbdx_ops = {
    "cuda", create_unavailable,
};
