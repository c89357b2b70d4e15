/*
 * bp_hybrid.cu — the hybrid back-projector: texture-path and ALU-path blocks
 * in one grid (section III-E of Chilingaryan et al., SBAC-PAD 2018).
 *
 * The texture units and the cores/shared memory are separate pipelines; a
 * block that interpolates with the texture unit leaves the cores mostly
 * idle and an ALU block the other way round.  Each block therefore asks
 * which SM it landed on (%smid), takes a ticket from that SM's counter and
 * runs the texture path for a fraction `hybrid_ratio` of the tickets, the
 * ALU path otherwise, so that every SM runs the mix that balances its
 * pipelines.  Both paths reconstruct the same N x N tile with the same
 * thread-to-pixel mapping; the texture path here is the simple loop over
 * each thread's pixels (the paper's variant for large tiles), with the
 * projection constants staged in shared memory.  With half texels and
 * nearest interpolation a share of the ALU blocks (cfg.stored_ratio, from
 * the autotuner) also keeps its cache as the texels are stored, which
 * spreads the ALU path's load between shared memory and instruction issue
 * (cuda_fbp_alu_block.h).
 */
#include "config.h"

#include "cuda_fbp_alu_block.h"

/* Texture path: the tile of one block, every thread summing all
 * projections for its PIXELS pixels. */
template <int S, int N> struct texture_tile_block {
    typedef typename slice_vec<S>::type V;
    typedef tile_map<N> map;
    static constexpr size_t SMEM_BYTES = sizeof(float4) * CUDA_FBP_BLOCK_THREADS;

    static __device__ __forceinline__ void run(const cuda_fbp_launch &l,
                                               char *smem, int g, int x0,
                                               int y0)
    {
        float4 *consts = reinterpret_cast<float4 *>(smem);
        const int t = threadIdx.x;
        const float lx = (float)map::col(t), ly = (float)map::row(t);
        const float fx0 = (float)(l.roi_x + x0) - l.center;
        const float fy0 = (float)(l.roi_y + y0) - l.center;
        const cudaTextureObject_t tex = l.tex[g];

        const float scale = half_pack_scale(l.absmax, g);
        const int px = x0 + map::col(t), py = y0 + map::row(t);
        V acc[map::PIXELS];
#pragma unroll
        for (int q = 0; q < map::PIXELS; q++)
            acc[q] = start_pixel<V>(l, g, px, py + q * map::ROW_STEP, scale);

        for (int p0 = 0; p0 < l.n_proj; p0 += CUDA_FBP_BLOCK_THREADS) {
            const int n = min(CUDA_FBP_BLOCK_THREADS, l.n_proj - p0);
            __syncthreads();
            if (t < n) {
                float4 k = tile_constants(l.proj, p0 + t, fx0, fy0, 0.5f);
                k.w = (float)map::ROW_STEP * k.y;
                consts[t] = k;
            }
            __syncthreads();
            for (int i = 0; i < n; i++) {
                const float4 k = consts[i];
                float h = k.z + lx * k.x - ly * k.y;
                const float y = (float)(p0 + i) + 0.5f;
#pragma unroll
                for (int q = 0; q < map::PIXELS; q++) {
                    vadd(acc[q], fetch<S>(tex, h, y));
                    h -= k.w;
                }
            }
        }

#pragma unroll
        for (int q = 0; q < map::PIXELS; q++)
            finish_pixel(l, g, px, py + q * map::ROW_STEP, acc[q], 1.f / scale);
    }
};

template <size_t A, size_t B> struct max_size {
    static constexpr size_t value = A > B ? A : B;
};

/* Which path the block's ticket n takes.  Ticket n gets the texture path
 * when floor((n+1) r) > floor(n r): exactly a fraction r of any run of
 * consecutive tickets.  The others are ALU tickets, numbered m = n -
 * floor(n r); of those, a fraction h (by the same rule on m) keeps its
 * cache as stored (alu_block's STORED). */
enum block_path { PATH_TEXTURE, PATH_ALU, PATH_ALU_STORED };

__device__ __forceinline__ int choose_path(unsigned long long n,
                                           unsigned ratio_q16,
                                           unsigned stored_q16)
{
    if ((((n + 1) * ratio_q16) >> 16) > ((n * ratio_q16) >> 16))
        return PATH_TEXTURE;
    const unsigned long long m = n - ((n * ratio_q16) >> 16);
    return alu_ticket_stored(m, stored_q16) ? PATH_ALU_STORED : PATH_ALU;
}

/* ratio_q16: texture fraction of the tickets, stored_q16: stored-cache
 * fraction of the ALU tickets, both in 1/65536. */
template <int S, bool HALF, int N, bool LINEAR>
__global__ void __launch_bounds__(CUDA_FBP_BLOCK_THREADS,
                                  (alu_occupancy<S, N>::BLOCKS))
hybrid_kernel(const cuda_fbp_launch l, unsigned ratio_q16, unsigned stored_q16)
{
    /* The stored cache only exists for nearest interpolation of half. */
    constexpr bool CAN_STORE = HALF && !LINEAR;
    typedef alu_block<S, HALF, N, LINEAR> alu;
    typedef alu_block<S, HALF, N, LINEAR, CAN_STORE> alu_stored;
    typedef texture_tile_block<S, N> tex;
    __shared__ __align__(16) char smem[max_size<alu::SMEM_BYTES, tex::SMEM_BYTES>::value];
    __shared__ int path;
    if (fov_skip_tile<S>(l, blockIdx.z, blockIdx.x * N, blockIdx.y * N, N))
        return;     /* outside the field of view: takes no ticket */
    if (threadIdx.x == 0) {
        /* Tickets start at the SM's number, so that a grid with one block
         * per SM is mixed too. */
        const unsigned smid = current_smid();
        const unsigned long long n =
            atomicAdd(&l.sm_counters[smid % CUDA_FBP_MAX_SMS], 1u) + smid;
        path = choose_path(n, ratio_q16, CAN_STORE ? stored_q16 : 0u);
    }
    __syncthreads();
    if (path == PATH_TEXTURE)
        tex::run(l, smem, blockIdx.z, blockIdx.x * N, blockIdx.y * N);
    else if (CAN_STORE && path == PATH_ALU_STORED)
        alu_stored::run(l, smem, blockIdx.z, blockIdx.x * N, blockIdx.y * N);
    else
        alu::run(l, smem, blockIdx.z, blockIdx.x * N, blockIdx.y * N);
}

template <int S, bool HALF, int N>
static void launch_interp(const cuda_fbp_launch *l, dim3 grid, unsigned ratio,
                          unsigned stored, cudaStream_t s)
{
    if (l->interp == RTOMO_INTERP_LINEAR)
        hybrid_kernel<S, HALF, N, true><<<grid, CUDA_FBP_BLOCK_THREADS, 0, s>>>(*l, ratio, stored);
    else
        hybrid_kernel<S, HALF, N, false><<<grid, CUDA_FBP_BLOCK_THREADS, 0, s>>>(*l, ratio, stored);
}

template <int S, bool HALF>
static void launch_tile(const cuda_fbp_launch *l, unsigned ratio, unsigned stored,
                        cudaStream_t s)
{
    const int n = cuda_fbp_config_tile(&l->cfg);
    const dim3 grid((l->roi_w + n - 1) / n, (l->roi_h + n - 1) / n, l->n_groups);
    if constexpr (S < 4) {      /* see bp_alu.cu */
        if (n == 64) {
            launch_interp<S, HALF, 64>(l, grid, ratio, stored, s);
            return;
        }
    }
    launch_interp<S, HALF, 32>(l, grid, ratio, stored, s);
}

extern "C" rtomo_status cuda_fbp_bp_hybrid(const cuda_fbp_launch *l,
                                           cudaStream_t stream,
                                           rtomo_error *err)
{
    const double r = l->cfg.hybrid_ratio;
    if (!(r >= 0.0 && r <= 1.0))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "hybrid back-projector: ratio %g is outside "
                               "[0, 1]", r);
    if (!l->sm_counters)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "hybrid back-projector: no per-SM counters");
    const unsigned ratio = (unsigned)(r * 65536.0 + 0.5);
    const unsigned stored = alu_stored_share(l);
    const bool half = l->cfg.format.precision == RTOMO_PRECISION_HALF;
    switch (l->cfg.format.slices) {
    case 1: half ? launch_tile<1, true>(l, ratio, stored, stream) : launch_tile<1, false>(l, ratio, stored, stream); break;
    case 2: half ? launch_tile<2, true>(l, ratio, stored, stream) : launch_tile<2, false>(l, ratio, stored, stream); break;
    case 4: half ? launch_tile<4, true>(l, ratio, stored, stream) : launch_tile<4, false>(l, ratio, stored, stream); break;
    default:
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "hybrid back-projector: %d slices per pass is "
                               "not 1, 2 or 4", l->cfg.format.slices);
    }
    RTOMO_CUDA_CHECK_LAUNCH(err, "hybrid back-projection");
    return RTOMO_OK;
}
