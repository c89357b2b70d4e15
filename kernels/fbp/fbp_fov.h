/*
 * fbp_fov.h — the circular field of view's pixel test (rtomo_engine.h,
 * "Circular field of view"), one definition for every back-projector: the
 * CPU reference, the CUDA kernels (cuda_fbp_device.h) and the planes.
 *
 * Why integers: the circle's edge must fall on the same pixels in every
 * backend, and a float test of (x - c)^2 + (y - c)^2 <= R^2 near the edge
 * could round either way.  With dx = 2x - span, span = slice_size - 1
 * (so dx = 2 (x - c) exactly), a pixel is inside iff dx^2 + dy^2 <= limit,
 * limit = floor(4 R^2): both sides are exact in 64-bit integers.
 * limit < 0 means no mask (RTOMO_FOV_FULL).  Plain C and CUDA C++.
 */
#ifndef RTOMO_FBP_FOV_H
#define RTOMO_FBP_FOV_H

#ifdef __CUDACC__
#define FBP_FOV_HD __host__ __device__ __forceinline__
#else
#define FBP_FOV_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Pixel (x, y) of the grid is inside the field of view. */
FBP_FOV_HD int fbp_fov_inside(long long limit, int span, int x, int y)
{
    const long long dx = 2LL * x - span, dy = 2LL * y - span;
    return limit < 0 || dx * dx + dy * dy <= limit;
}

/* The rectangle [x0, x1] x [y0, y1] of grid pixels lies wholly outside:
 * its point nearest the centre is outside. */
FBP_FOV_HD int fbp_fov_rect_outside(long long limit, int span, int x0,
                                    int y0, int x1, int y1)
{
    if (limit < 0)
        return 0;
    const long long ax = 2LL * x0 - span, bx = 2LL * x1 - span;
    const long long ay = 2LL * y0 - span, by = 2LL * y1 - span;
    const long long dx = ax > 0 ? ax : bx < 0 ? bx : 0;
    const long long dy = ay > 0 ? ay : by < 0 ? by : 0;
    return dx * dx + dy * dy > limit;
}

#ifndef __CUDACC__
/* Grid row y's inside pixels: [*first, *end) (empty when *first >= *end),
 * for a grid of span + 1 pixels.  From an integer square root, checked
 * against fbp_fov_inside so that both always agree. */
void fbp_fov_row(long long limit, int span, int y, int *first, int *end);
#endif

#ifdef __cplusplus
}
#endif

#endif
