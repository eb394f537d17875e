// Radar processing chain, spec v1 (docs/processing-chain.md): the kernels around
// the three cuFFT transforms. Compiled by NVRTC at start-up; the geometry,
// CFAR window and caps arrive as #defines prepended by the host, so every
// division and loop bound below is a compile-time constant.
//
// Buffers (all device memory unless noted):
//   x      complex float [chirp m][rx j][n] -> after the range FFT [l][p][r]
//          (p = i * N_RX + j since m = l * N_TX + i), after the Doppler FFT
//          [d][p][r] with d already fftshifted (see convert_window).
//   pmap   float [d][r], the non-coherently integrated power map.
//   state  u32[4]: [0] candidate count (reset by power_map).
//   cand   Candidate[N_LOOPS * N_SAMPLES]: every CFAR hit that is a peak, in
//          the order the hits were counted. cand[0 .. min(count, MAX_DET))
//          are the kept detections (over the cap after select_overflow).
//   keys   u32[MAX_DET]: the output-order key of cand[i].
//   angle  complex float [MAX_DET][ANGLE_N]: row i is the angle snapshot of
//          cand[i], zero-padded (the padding written once, at allocation).
//   spectra complex float [MAX_DET][ANGLE_N]: the angle FFT of each row.
//   rows   u32[MAX_DET]: scratch of select_overflow.
//   out    mapped host memory: OutHeader then GpuDetection[MAX_DET].
//
// Kernel order: convert_window, range FFT, [clutter_doppler_window],
// Doppler FFT, power_map, cfar_peaks, [select_overflow], angle FFT,
// refine_output. Without select_overflow in the frame's graph, a frame over
// the cap gets select_overflow, angle FFT and refine_output again in a
// second graph (the host launches it when the output header shows a cut).
// On sm_90 power_map, cfar_peaks, select_overflow and refine_output may be
// launched as programmatic dependents (PDL): they may start before the
// kernel ahead of them has finished, and wait in pdl_wait() before reading
// anything it wrote.
// Chunk-streamed mode: convert_window and the range FFT run once per DMA
// chunk as the chunk lands (a chunk is whole chirps, so its range rows are
// a contiguous part of x); after the frame completes only the last chunk's
// pair of them and the rest of the chain remain.

typedef unsigned int u32;
typedef unsigned long long u64;

#define N_VIRT (N_TX * N_RX)
#define N_CHIRPS (N_TX * N_LOOPS)
#define N_CELLS (N_LOOPS * N_SAMPLES)
// Half-widths of the CFAR window (guard plus training) in each dimension.
#define WIN_D (GUARD_D + TRAIN_D)
#define WIN_R (GUARD_R + TRAIN_R)

struct Candidate {
    u32 cell;    // d * N_SAMPLES + r
    float power; // P[d][r]
    double mu;   // mean of the training cells
    // P at (d, r - 1), (d, r + 1), (d - 1, r), (d + 1, r), Doppler cyclic,
    // 0 outside the range axis: the parabolic refinement's neighbours.
    float nb[4];
};

struct OutHeader {
    u32 count;
    u32 cut;
    u32 reserved[2];
};

// Field for field the same as radar_dsp::Detection (spec v1 step 10).
struct GpuDetection {
    u32 range_bin;
    u32 doppler_bin;
    float range_m;
    float velocity_mps;
    float azimuth_deg;
    float snr_db;
    float power_db;
    float range_bin_refined;
    float doppler_bin_refined;
    float angle_bin_refined;
};

// Programmatic dependent launch (sm_90 and later; compiled out for Orin's
// sm_87, where every launch is an ordinary stream-ordered one). Without
// the launch attribute griddepcontrol.wait returns at once.
__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Let the next kernel's blocks be scheduled now (they wait in pdl_wait()).
__device__ __forceinline__ void pdl_release_dependents()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Step 1 (and the Doppler window of step 3): int16 I/Q to complex float,
// times the range window w_r[n] and the Doppler window w_d[l]. Both windows
// are applied here because the range FFT is linear: windowing over l before
// it equals windowing after it. w_d also carries (-1)^l, which moves the
// Doppler spectrum by N_LOOPS/2: the FFT output index is then the fftshifted
// bin d directly. With clutter removal the mean over l must be taken after
// the range FFT and before the Doppler window, so w_d is all ones here and
// clutter_doppler_window applies it.
// Every store instruction of a warp is contiguous (512 bytes): a thread
// converts a pair of samples (8-byte load from the slot, 16-byte store)
// CONVERT_UNROLL times (a #define from the host), all loads issued before
// the first store. The slot is mapped host memory read over PCIe on a
// discrete GPU, DRAM on Orin.
// Pairs [pair_begin, pair_end) are converted: the whole frame, or one DMA
// chunk of it as it lands (chunk-streamed mode); indices are the frame's.
#define CONVERT_PAIRS (N_CHIRPS * N_RX * N_SAMPLES / 2)

extern "C" __global__ void __launch_bounds__(256)
convert_window(const uint2 *__restrict__ frame, float4 *__restrict__ x,
                     const float *__restrict__ w_range, const float *__restrict__ w_doppler,
                     u64 pair_begin, u64 pair_end)
{
    const u32 stride = gridDim.x * blockDim.x;
    const u32 end = (u32)pair_end;
    for (u32 base = (u32)pair_begin + blockIdx.x * blockDim.x + threadIdx.x; base < end;
         base += stride * CONVERT_UNROLL) {
        // Samples and window values all requested before the first use.
        uint2 v[CONVERT_UNROLL];
        float wd[CONVERT_UNROLL];
        float2 wr[CONVERT_UNROLL];
#pragma unroll
        for (int k = 0; k < CONVERT_UNROLL; ++k) {
            const u32 t = min(base + k * stride, end - 1);
            const u32 s = t * 2;
            v[k] = frame[t];
            wd[k] = w_doppler[s / (N_SAMPLES * N_RX * N_TX)];
            wr[k] = *(const float2 *)&w_range[s % N_SAMPLES];
        }
#pragma unroll
        for (int k = 0; k < CONVERT_UNROLL; ++k) {
            const u32 t = base + k * stride;
            if (t < end) {
                const float w0 = wr[k].x * wd[k];
                const float w1 = wr[k].y * wd[k];
                x[t] = make_float4((float)(short)(v[k].x & 0xffffu) * w0,
                                   (float)(short)(v[k].x >> 16) * w0,
                                   (float)(short)(v[k].y & 0xffffu) * w1,
                                   (float)(short)(v[k].y >> 16) * w1);
            }
        }
    }
}

// Step 2, optional static clutter removal: subtract the mean over loops of
// each (virtual channel, range bin), then apply the Doppler window (with its
// (-1)^l shift). One thread per column; neighbouring threads read
// neighbouring range bins.
extern "C" __global__ void __launch_bounds__(256)
clutter_doppler_window(float2 *__restrict__ x, const float *__restrict__ w_doppler)
{
    const u32 cols = N_VIRT * N_SAMPLES;
    const u32 c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) {
        return;
    }
    double sr = 0.0, si = 0.0;
    for (u32 l = 0; l < N_LOOPS; ++l) {
        const float2 v = x[(size_t)l * cols + c];
        sr += v.x;
        si += v.y;
    }
    const float mr = (float)(sr / N_LOOPS);
    const float mi = (float)(si / N_LOOPS);
    for (u32 l = 0; l < N_LOOPS; ++l) {
        float2 v = x[(size_t)l * cols + c];
        const float w = w_doppler[l];
        v.x = (v.x - mr) * w;
        v.y = (v.y - mi) * w;
        x[(size_t)l * cols + c] = v;
    }
}

// Step 4: P[d][r] = sum over p of |X[d][p][r]|^2, accumulated in double and
// rounded once to float, as the CPU reference does (the products of float
// components are exact in double, so only the summation order differs).
// Work item i sums two range bins (one 16-byte load per channel), split
// over POWER_SPLIT consecutive lanes (a power of two, a #define from the
// host): lane q of the group takes channels q, q + POWER_SPLIT, ..., and
// the partial sums meet by shuffles. More lanes per item, more loads in
// flight per SM. X comes from the kernel ahead of this one, which may still
// be running when this one starts (PDL): L2 loads, not the read-only data
// path. It also starts the frame's candidate count: every frame's work
// passes here exactly once, after the previous frame's tail and before
// cfar_peaks counts (the range work of a frame may be split over several
// launches as its chunks land, so it cannot be done there).
#define POWER_ITEMS (N_LOOPS * N_SAMPLES / 2)
#define POWER_PER_LANE ((N_VIRT + POWER_SPLIT - 1) / POWER_SPLIT)

extern "C" __global__ void __launch_bounds__(256)
power_map(const float4 *x, float2 *__restrict__ pmap, u32 *__restrict__ state)
{
    pdl_wait();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        state[0] = 0;
    }
    // cfar_peaks may be scheduled alongside: it waits for this grid.
    pdl_release_dependents();
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 item = t / POWER_SPLIT;
    const u32 q = t % POWER_SPLIT;
    const u32 half = N_SAMPLES / 2;
    // Every lane of a group stays for the shuffles; items past the end
    // read item 0 and write nothing.
    const u32 it = item < POWER_ITEMS ? item : 0;
    const float4 *base = x + (size_t)(it / half) * N_VIRT * half + it % half;
    float4 v[POWER_PER_LANE];
#pragma unroll
    for (u32 j = 0; j < POWER_PER_LANE; ++j) {
        const u32 p = q + j * POWER_SPLIT;
        v[j] = p < N_VIRT ? __ldcg(&base[p * half]) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    double a0 = 0.0, a1 = 0.0;
#pragma unroll
    for (u32 j = 0; j < POWER_PER_LANE; ++j) {
        a0 += (double)v[j].x * (double)v[j].x + (double)v[j].y * (double)v[j].y;
        a1 += (double)v[j].z * (double)v[j].z + (double)v[j].w * (double)v[j].w;
    }
#pragma unroll
    for (u32 m = 1; m < POWER_SPLIT; m <<= 1) {
        a0 += __shfl_xor_sync(0xffffffffu, a0, m);
        a1 += __shfl_xor_sync(0xffffffffu, a1, m);
    }
    if (q == 0 && item < POWER_ITEMS) {
        pmap[item] = make_float2((float)a0, (float)a1);
    }
}

// Output order: ascending range bin, then Doppler bin.
__device__ __forceinline__ u32 order_key(u32 cell)
{
    const u32 d = cell / N_SAMPLES;
    const u32 r = cell % N_SAMPLES;
    return r * N_LOOPS + d;
}

// Candidates are read with L2-only loads: other blocks wrote them.
__device__ __forceinline__ Candidate load_candidate(const Candidate *c)
{
    const uint4 a = __ldcg((const uint4 *)c);
    const uint4 b = __ldcg((const uint4 *)c + 1);
    Candidate k;
    k.cell = a.x;
    k.power = __uint_as_float(a.y);
    k.mu = __hiloint2double((int)a.w, (int)a.z);
    k.nb[0] = __uint_as_float(b.x);
    k.nb[1] = __uint_as_float(b.y);
    k.nb[2] = __uint_as_float(b.z);
    k.nb[3] = __uint_as_float(b.w);
    return k;
}

// Step 8's snapshot: z_p = X[d][p][r] times the TDM Doppler compensation
// tdm[d][i] (the CPU's float32 phasor table), times (-1)^p so that the
// angle FFT's output comes out fftshifted.
__device__ __forceinline__ void load_snapshot(const float2 *x, const float2 *__restrict__ tdm,
                                              u32 d, u32 r, float2 z[N_VIRT])
{
    float2 v[N_VIRT];
    float2 w[N_TX];
#pragma unroll
    for (u32 p = 0; p < N_VIRT; ++p) {
        v[p] = __ldcg(&x[((size_t)d * N_VIRT + p) * N_SAMPLES + r]);
    }
#pragma unroll
    for (u32 i = 0; i < N_TX; ++i) {
        w[i] = tdm[d * N_TX + i];
    }
#pragma unroll
    for (u32 p = 0; p < N_VIRT; ++p) {
        const float2 c = w[p / N_RX];
        // Rounded like the CPU's complex multiply (no FMA contraction).
        float re = __fsub_rn(__fmul_rn(v[p].x, c.x), __fmul_rn(v[p].y, c.y));
        float im = __fadd_rn(__fmul_rn(v[p].x, c.y), __fmul_rn(v[p].y, c.x));
        if (p & 1u) {
            re = -re;
            im = -im;
        }
        z[p] = make_float2(re, im);
    }
}

// Angle row: the snapshot; its zero padding to ANGLE_N was written once
// (the angle FFT runs out of place and leaves its input as it was).
__device__ __forceinline__ void write_angle_row(float2 *__restrict__ row, const float2 z[N_VIRT])
{
#pragma unroll
    for (u32 p = 0; p < N_VIRT; ++p) {
        row[p] = z[p];
    }
}

// Over the cap, rank by P/mu as a double (descending; the bits of a
// non-negative double order like its value), ties by output order
// (ascending): a 96-bit key, unique per cell, so the top MAX_DET are exactly
// defined and are the ones the CPU reference keeps.
__device__ __forceinline__ u64 rank_hi(const Candidate &k)
{
    return (u64)__double_as_longlong((double)k.power / k.mu);
}

__device__ __forceinline__ u32 rank_lo(const Candidate &k)
{
    return 0xffffffffu - order_key(k.cell);
}

// Where radix-select pass `pass` finds its 8-bit digit: passes 0-7 in
// the 64-bit ratio key (most significant first), 8-11 in the 32-bit
// tie-break key.
__device__ __forceinline__ u32 digit_shift(int pass)
{
    return pass < 8 ? 56 - 8 * pass : 24 - 8 * (pass - 8);
}

// Step 7 over the cap, by one block (any size, a multiple of 32): when more
// than MAX_DET candidates were found, find the MAX_DET with the highest
// rank key (an exact radix select, 8 bits a pass: 8 passes over the
// ratio's bits, then 4 over the tie-break key) and make cand[0 .. MAX_DET)
// exactly those: each kept candidate counted at or after MAX_DET moves,
// with its key and angle snapshot, into a row whose candidate is not kept.
// Both sets have the same size. Output order is refine_output's business.
__device__ void select_overflow_block(Candidate *cand, const u32 *state, u32 *keys,
                                      float2 *angle, u32 *rows, const float2 *x,
                                      const float2 *__restrict__ tdm)
{
    __shared__ u32 s_hist[256];
    __shared__ u64 s_prefix_hi;
    __shared__ u32 s_prefix_lo;
    __shared__ u32 s_need;
    __shared__ u32 s_free;
    __shared__ u32 s_moved;
    const u32 tid = threadIdx.x;
    const u32 n = min(__ldcg(&state[0]), (u32)N_CELLS);
    if (n <= MAX_DET) {
        return;
    }
    u64 mask_hi = 0;
    u32 mask_lo = 0;
    if (tid == 0) {
        s_prefix_hi = 0;
        s_prefix_lo = 0;
        s_need = MAX_DET;
        s_free = 0;
        s_moved = 0;
    }
    for (int pass = 0; pass < 12; ++pass) {
        for (u32 b = tid; b < 256; b += blockDim.x) {
            s_hist[b] = 0;
        }
        __syncthreads();
        const u64 prefix_hi = s_prefix_hi;
        const u32 prefix_lo = s_prefix_lo;
        for (u32 i = tid; i < n; i += blockDim.x) {
            const Candidate k = load_candidate(&cand[i]);
            const u64 hi = rank_hi(k);
            const u32 lo = rank_lo(k);
            if ((hi & mask_hi) == prefix_hi && (lo & mask_lo) == prefix_lo) {
                const u32 digit =
                    (pass < 8 ? (u32)(hi >> digit_shift(pass)) : lo >> digit_shift(pass)) & 255u;
                atomicAdd(&s_hist[digit], 1u);
            }
        }
        __syncthreads();
        if (tid < 32) {
            // Warp 0 finds the digit: lane L holds bins 255 - 8L - j,
            // j = 0..7 (descending), and the count of all bins above them.
            const u32 lane = tid;
            u32 c[8];
            u32 sum = 0;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                c[j] = s_hist[255 - 8 * lane - j];
                sum += c[j];
            }
            u32 incl = sum;
#pragma unroll
            for (u32 off = 1; off < 32; off <<= 1) {
                const u32 v = __shfl_up_sync(0xffffffffu, incl, off);
                if (lane >= off) {
                    incl += v;
                }
            }
            const u32 need = s_need;
            const u32 hit = __ballot_sync(0xffffffffu, incl >= need);
            if (lane == (u32)(__ffs(hit) - 1)) {
                u32 above = incl - sum;
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    if (above + c[j] >= need) {
                        const u32 b = 255 - 8 * lane - j;
                        if (pass < 8) {
                            s_prefix_hi = prefix_hi | ((u64)b << digit_shift(pass));
                        } else {
                            s_prefix_lo = prefix_lo | (b << digit_shift(pass));
                        }
                        s_need = need - above;
                        break;
                    }
                    above += c[j];
                }
            }
        }
        if (pass < 8) {
            mask_hi |= (u64)255 << digit_shift(pass);
        } else {
            mask_lo |= 255u << digit_shift(pass);
        }
        __syncthreads();
    }
    // Keys are unique: exactly MAX_DET candidates rank at or above
    // (t_hi, t_lo).
    const u64 t_hi = s_prefix_hi;
    const u32 t_lo = s_prefix_lo;
    for (u32 i = tid; i < MAX_DET; i += blockDim.x) {
        const Candidate k = load_candidate(&cand[i]);
        const u64 hi = rank_hi(k);
        if (!(hi > t_hi || (hi == t_hi && rank_lo(k) >= t_lo))) {
            rows[atomicAdd(&s_free, 1u)] = i;
        }
    }
    // Makes the rows visible to the whole block.
    __syncthreads();
    for (u32 i = MAX_DET + tid; i < n; i += blockDim.x) {
        const Candidate k = load_candidate(&cand[i]);
        const u64 hi = rank_hi(k);
        if (hi > t_hi || (hi == t_hi && rank_lo(k) >= t_lo)) {
            const u32 row = __ldcg(&rows[atomicAdd(&s_moved, 1u)]);
            float2 z[N_VIRT];
            load_snapshot(x, tdm, k.cell / N_SAMPLES, k.cell % N_SAMPLES, z);
            cand[row] = k;
            keys[row] = order_key(k.cell);
            write_angle_row(angle + (size_t)row * ANGLE_N, z);
        }
    }
}

// Steps 5 and 6: cell-averaging CFAR and the 3x3 peak test, then compaction
// of the survivors with an atomic counter. A block works on a tile of
// CFAR_TILE_D x CFAR_TILE_R cells (one thread a cell) and loads it with its
// window halo into shared memory (Doppler wraps; range cells outside
// [0, N_SAMPLES) are stored as zero, which leaves both the sums and the peak
// test right because P >= 0). The training sum is separable and, like the
// CPU reference's (cfar.rs), a sum of non-negative float64 terms only: per
// halo row the "full" sum over |dr| <= WIN_R and the "side" sum over
// GUARD_R < |dr| <= WIN_R; per cell the full sums of the training rows
// (GUARD_D < |dd| <= WIN_D) plus the side sums of the guard rows
// (|dd| <= GUARD_D). No rectangle-minus-guard subtraction, which would
// cancel next to a target far above the noise.
// A hit that is a peak takes a slot from the counter and writes its
// candidate (with the four neighbour powers refinement needs); slots below
// MAX_DET also write their output key and angle snapshot, so that when the
// frame is under the cap nothing has to be gathered later.
#define HALO_D (CFAR_TILE_D + 2 * WIN_D)
#define HALO_R (CFAR_TILE_R + 2 * WIN_R)
#define CFAR_THREADS (CFAR_TILE_D * CFAR_TILE_R)
#define HALO_CELLS (HALO_D * HALO_R)
#define HALO_PER_THREAD ((HALO_CELLS + CFAR_THREADS - 1) / CFAR_THREADS)

extern "C" __global__ void __launch_bounds__(CFAR_THREADS)
cfar_peaks(const float *pmap, const float2 *x,
           const double *__restrict__ alpha_by_range, const u32 *__restrict__ n_eff_by_range,
           const float2 *__restrict__ tdm, u32 *state, Candidate *cand, u32 *keys,
           float2 *angle)
{
    // P as double: each value is converted once here, not in every sum.
    __shared__ double sp[HALO_D][HALO_R];
    __shared__ double row_full[HALO_D][CFAR_TILE_R];
    __shared__ double row_side[HALO_D][CFAR_TILE_R];
    const int tid = threadIdx.x;
    const int d0 = blockIdx.y * CFAR_TILE_D;
    const int r0 = blockIdx.x * CFAR_TILE_R;
    const int td = tid / CFAR_TILE_R;
    const int c = tid % CFAR_TILE_R;
    const int d = d0 + td;
    const int r = r0 + c;
    const bool inside = d < N_LOOPS && r < N_SAMPLES;
    // The per-range tables are constant: read them before the wait.
    const double alpha = inside ? alpha_by_range[r] : 0.0;
    const u32 n_eff = inside ? n_eff_by_range[r] : 1u;

    pdl_wait();
    pdl_release_dependents();

    // All of a thread's halo loads first (unconditional, from a valid
    // address), then the shared-memory stores: a load and its store in one
    // branch would make the loads wait for each other.
    float hv[HALO_PER_THREAD];
#pragma unroll
    for (int j = 0; j < HALO_PER_THREAD; ++j) {
        const int i = tid + j * CFAR_THREADS;
        const int hd = i / HALO_R;
        const int rh = r0 - WIN_R + i % HALO_R;
        // N_LOOPS is a power of two: & wraps negative rows too.
        const int dh = (d0 - WIN_D + hd) & (N_LOOPS - 1);
        const bool ok = i < HALO_CELLS && rh >= 0 && rh < N_SAMPLES;
        hv[j] = __ldcg(&pmap[ok ? dh * N_SAMPLES + rh : 0]);
    }
#pragma unroll
    for (int j = 0; j < HALO_PER_THREAD; ++j) {
        const int i = tid + j * CFAR_THREADS;
        const int rh = r0 - WIN_R + i % HALO_R;
        if (i < HALO_CELLS) {
            sp[i / HALO_R][i % HALO_R] = (rh >= 0 && rh < N_SAMPLES) ? (double)hv[j] : 0.0;
        }
    }
    __syncthreads();

#pragma unroll
    for (int j = 0; j < (HALO_D * CFAR_TILE_R + CFAR_THREADS - 1) / CFAR_THREADS; ++j) {
        const int i = tid + j * CFAR_THREADS;
        if (i >= HALO_D * CFAR_TILE_R) {
            break;
        }
        const int hd = i / CFAR_TILE_R;
        const int cc = i % CFAR_TILE_R;
        double side = 0.0, mid = 0.0;
#pragma unroll
        for (int k = GUARD_R + 1; k <= WIN_R; ++k) {
            side += sp[hd][cc + WIN_R - k] + sp[hd][cc + WIN_R + k];
        }
#pragma unroll
        for (int k = -GUARD_R; k <= GUARD_R; ++k) {
            mid += sp[hd][cc + WIN_R + k];
        }
        row_side[hd][cc] = side;
        row_full[hd][cc] = side + mid;
    }
    __syncthreads();

    bool keep = inside;
    double mu = 0.0;
    double p = 0.0;
    if (keep) {
        double sum = 0.0;
#pragma unroll
        for (int k = GUARD_D + 1; k <= WIN_D; ++k) {
            sum += row_full[td + WIN_D - k][c] + row_full[td + WIN_D + k][c];
        }
#pragma unroll
        for (int k = -GUARD_D; k <= GUARD_D; ++k) {
            sum += row_side[td + WIN_D + k][c];
        }
        mu = sum / (double)n_eff;
        p = sp[td + WIN_D][c + WIN_R];
        keep = p > alpha * mu;
    }
    if (keep) {
#pragma unroll
        for (int dd = -1; dd <= 1; ++dd) {
#pragma unroll
            for (int dr = -1; dr <= 1; ++dr) {
                if ((dd != 0 || dr != 0) && sp[td + WIN_D + dd][c + WIN_R + dr] > p) {
                    keep = false;
                }
            }
        }
    }
    if (keep) {
        // The snapshot's loads and the counter's atomic are independent:
        // both round trips overlap.
        float2 z[N_VIRT];
        load_snapshot(x, tdm, (u32)d, (u32)r, z);
        const u32 slot = atomicAdd(&state[0], 1u);
        Candidate k;
        k.cell = (u32)(d * N_SAMPLES + r);
        k.power = (float)p; // exact: p came from a float
        k.mu = mu;
        // Exact as well; the range neighbours outside the map are 0.
        k.nb[0] = (float)sp[td + WIN_D][c + WIN_R - 1];
        k.nb[1] = (float)sp[td + WIN_D][c + WIN_R + 1];
        k.nb[2] = (float)sp[td + WIN_D - 1][c + WIN_R];
        k.nb[3] = (float)sp[td + WIN_D + 1][c + WIN_R];
        if (slot < N_CELLS) {
            cand[slot] = k;
        }
        if (slot < MAX_DET) {
            keys[slot] = order_key(k.cell);
            write_angle_row(angle + (size_t)slot * ANGLE_N, z);
        }
    }
}

// Step 7 over the cap as its own kernel (one block).
extern "C" __global__ void __launch_bounds__(1024)
select_overflow(Candidate *cand, const u32 *state, u32 *keys, float2 *angle, u32 *rows,
                const float2 *x, const float2 *__restrict__ tdm)
{
    pdl_wait();
    select_overflow_block(cand, state, keys, angle, rows, x, tdm);
}

// Parabolic interpolation on power (spec v1 step 9), in double, clamped to
// half a bin, 0 when the points do not bend down: refine.rs's rule.
__device__ __forceinline__ float parabolic(float ym, float y0, float yp)
{
    const double a = ym, b = y0, c = yp;
    const double den = a - 2.0 * b + c;
    if (!(den < 0.0)) {
        return 0.0f;
    }
    const double delta = 0.5 * (a - c) / den;
    if (!isfinite(delta)) {
        return 0.0f;
    }
    return (float)fmin(0.5, fmax(-0.5, delta));
}

// |z|^2 in float, rounded like the CPU's norm_sqr (no FMA contraction).
__device__ __forceinline__ float norm_sqr(float2 z)
{
    return __fadd_rn(__fmul_rn(z.x, z.x), __fmul_rn(z.y, z.y));
}

// Steps 7 (output order), 8 (peak of the angle spectrum: the first
// maximum, neighbours cyclic), 9 and 10, with the unit conversions of
// refine.rs: one warp per kept detection s (cand[s], spectra row s). Its
// place in the output is the number of kept detections with a smaller
// output key (keys are unique), so no sort is needed. Every load is issued
// before the count of kept detections is known (all addresses are valid),
// so the kernel waits for one round trip to memory, not three. Results go
// straight to mapped host memory.
#define REFINE_WARPS 8
#define ANGLE_PER_LANE ((ANGLE_N + 31) / 32)
#define KEYS_PER_THREAD ((MAX_DET + REFINE_WARPS * 32 - 1) / (REFINE_WARPS * 32))

extern "C" __global__ void __launch_bounds__(REFINE_WARPS * 32)
refine_output(const u32 *__restrict__ state, const Candidate *__restrict__ cand,
              const u32 *__restrict__ keys, const float2 *__restrict__ spectra,
              OutHeader *out_header, GpuDetection *out_det, double range_bin_m,
              double velocity_bin_mps)
{
    __shared__ u32 s_keys[MAX_DET];
    pdl_wait();
    const u32 lane = threadIdx.x & 31u;
    const u32 s = blockIdx.x * REFINE_WARPS + (threadIdx.x >> 5);
    const u32 total = __ldcg(&state[0]);
    // Every load before any use (a load and its store in one loop
    // iteration would make the loads wait for each other).
    u32 kv[KEYS_PER_THREAD];
#pragma unroll
    for (u32 j = 0; j < KEYS_PER_THREAD; ++j) {
        const u32 i = threadIdx.x + j * REFINE_WARPS * 32;
        kv[j] = __ldcg(&keys[i < MAX_DET ? i : 0]);
    }
    const bool row = s < MAX_DET; // the same for the whole warp
    const float2 *a = spectra + (size_t)(row ? s : 0) * ANGLE_N;
    float2 spec[ANGLE_PER_LANE];
#pragma unroll
    for (u32 j = 0; j < ANGLE_PER_LANE; ++j) {
        const u32 q = lane + 32 * j;
        spec[j] = q < ANGLE_N ? __ldcg(&a[q]) : make_float2(0.0f, 0.0f);
    }
    const Candidate k = load_candidate(&cand[row ? s : 0]);
#pragma unroll
    for (u32 j = 0; j < KEYS_PER_THREAD; ++j) {
        const u32 i = threadIdx.x + j * REFINE_WARPS * 32;
        if (i < MAX_DET) {
            s_keys[i] = kv[j];
        }
    }
    __syncthreads();

    const u32 n = min(total, (u32)N_CELLS);
    const u32 n_out = min(n, (u32)MAX_DET);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        OutHeader h;
        h.count = n_out;
        h.cut = total - n_out;
        h.reserved[0] = 0;
        h.reserved[1] = 0;
        *out_header = h;
    }
    if (s >= n_out) {
        return; // the whole warp
    }

    const u32 key = order_key(k.cell);
    u32 below = 0;
    for (u32 i = lane; i < n_out; i += 32) {
        below += s_keys[i] < key ? 1u : 0u;
    }
    const u32 place = __reduce_add_sync(0xffffffffu, below);

    float best = -1.0f;
    u32 kb = 0;
#pragma unroll
    for (u32 j = 0; j < ANGLE_PER_LANE; ++j) {
        const u32 q = lane + 32 * j;
        if (q < ANGLE_N) {
            const float pw = norm_sqr(spec[j]);
            if (pw > best) {
                best = pw;
                kb = q;
            }
        }
    }
    // First maximum over the warp: larger power, or equal power at a lower bin.
#pragma unroll
    for (u32 off = 16; off > 0; off >>= 1) {
        const float ob = __shfl_down_sync(0xffffffffu, best, off);
        const u32 ok = __shfl_down_sync(0xffffffffu, kb, off);
        if (ob > best || (ob == best && ok < kb)) {
            best = ob;
            kb = ok;
        }
    }
    best = __shfl_sync(0xffffffffu, best, 0);
    kb = __shfl_sync(0xffffffffu, kb, 0);
    // The spectrum's neighbours of the peak, from the lanes that hold them.
    const u32 qm = (kb + ANGLE_N - 1) % ANGLE_N;
    const u32 qp = (kb + 1) % ANGLE_N;
    float2 am = make_float2(0.0f, 0.0f), ap = make_float2(0.0f, 0.0f);
#pragma unroll
    for (u32 j = 0; j < ANGLE_PER_LANE; ++j) {
        const float mx = __shfl_sync(0xffffffffu, spec[j].x, qm % 32);
        const float my = __shfl_sync(0xffffffffu, spec[j].y, qm % 32);
        const float px = __shfl_sync(0xffffffffu, spec[j].x, qp % 32);
        const float py = __shfl_sync(0xffffffffu, spec[j].y, qp % 32);
        if (qm / 32 == j) {
            am = make_float2(mx, my);
        }
        if (qp / 32 == j) {
            ap = make_float2(px, py);
        }
    }
    // Lanes 0-2 each evaluate one of the three double-precision functions.
    if (lane > 2) {
        return;
    }
    const u32 d = k.cell / N_SAMPLES;
    const u32 r = k.cell % N_SAMPLES;
    const float p0 = k.power;
    const float da = parabolic(norm_sqr(am), best, norm_sqr(ap));
    // Range is not cyclic: no refinement at the first and last bin.
    const float dr = (r > 0 && r + 1 < N_SAMPLES) ? parabolic(k.nb[0], p0, k.nb[1]) : 0.0f;
    const float dd = parabolic(k.nb[2], p0, k.nb[3]);

    const float rb = (float)r + dr;
    const float db = (float)d + dd;
    const float ab = (float)kb + da;
    const double n_a = (double)ANGLE_N;
    const double p = (double)p0;
    double f;
    if (lane == 0) {
        const double sine = fmin(1.0, fmax(-1.0, 2.0 * ((double)ab - n_a / 2.0) / n_a));
        f = asin(sine) * (180.0 / 3.14159265358979323846);
    } else if (lane == 1) {
        f = 10.0 * log10(p / k.mu);
    } else {
        f = 10.0 * log10(p);
    }
    const double snr_db = __shfl_sync(0x7u, f, 1);
    const double power_db = __shfl_sync(0x7u, f, 2);
    if (lane != 0) {
        return;
    }

    GpuDetection o;
    o.range_bin = r;
    o.doppler_bin = d;
    o.range_m = (float)((double)rb * range_bin_m);
    o.velocity_mps = (float)(((double)db - (double)(N_LOOPS / 2)) * velocity_bin_mps);
    o.azimuth_deg = (float)f;
    o.snr_db = (float)snr_db;
    o.power_db = (float)power_db;
    o.range_bin_refined = rb;
    o.doppler_bin_refined = db;
    o.angle_bin_refined = ab;
    out_det[place] = o;
}

// --- GPU-triggered processing (docs/processing-chain.md, section 10) ------
// Each ring slot's graph waits, before each chunk's range work, until the
// slot's completion count (written by the card after the chunk) says the
// chunk landed; these three kernels are the rest of it.

// At a frame's first chunk: the CFAR scale table the host chose last. The
// host writes the table it does not point at, then flips the index; a block
// reads the index once, so one frame uses one table.
extern "C" __global__ void __launch_bounds__(256)
alpha_sync(const double *alpha_host, const volatile u32 *index, double *__restrict__ alpha)
{
    __shared__ u32 s_table;
    if (threadIdx.x == 0) {
        s_table = *index & 1u;
    }
    __syncthreads();
    const double *src = alpha_host + (size_t)s_table * N_SAMPLES;
    for (u32 r = threadIdx.x; r < N_SAMPLES; r += blockDim.x) {
        alpha[r] = src[r];
    }
}

// What frame_done writes for the host, per slot (mapped host memory).
struct TriggerRecord {
    u32 ready;       // 1: the slot's detections are in its output buffer
    u32 slot;
    u64 gpu_done_ns; // %globaltimer when they were
    u64 reserved[6];
};

// After the frame's last kernel: the consumer's reset of the slot's
// completion count (the slot's bytes are no longer read; the card refills
// it only after the host has seen `ready` and released it) unless the host
// is cancelling (it then holds every count at a whole frame, so that all
// the work queued for the slot runs out), then the detections-ready flag,
// after a system-scope fence so that the host sees the output buffer
// (written by refine_output, an earlier kernel) first.
extern "C" __global__ void frame_done(volatile u32 *completion_count, volatile TriggerRecord *rec,
                                      u64 slot, const volatile u32 *cancelling)
{
    if (*cancelling == 0u) {
        *completion_count = 0u;
    }
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    rec->slot = (u32)slot;
    rec->gpu_done_ns = t;
    __threadfence_system();
    rec->ready = 1u;
}

// The frame's power map, to the slot's own buffer in mapped host memory,
// every frame (the host publishes one now and then; 256 KiB a frame at the
// default geometry): a grid-stride copy in 16-byte pieces.
#define MAP_EXPORT_THREADS 256

extern "C" __global__ void __launch_bounds__(MAP_EXPORT_THREADS)
map_export(const float4 *pmap, float4 *host_map)
{
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < N_CELLS / 4;
         i += gridDim.x * blockDim.x) {
        host_map[i] = __ldcg(&pmap[i]);
    }
}
