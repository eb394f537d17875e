// Radar processing chain, spec v1 (DESIGN.md section 6): the kernels around
// the three cuFFT transforms. Compiled by NVRTC at start-up; the geometry,
// CFAR window and caps arrive as #defines prepended by the host, so every
// division and loop bound below is a compile-time constant.
//
// Buffers (all device memory unless noted):
//   x      complex float [chirp m][rx j][n] -> after the range FFT [l][p][r]
//          (p = i * N_RX + j since m = l * N_TX + i), after the Doppler FFT
//          [d][p][r] with d already fftshifted (see convert_window).
//   pmap   float [d][r], the non-coherently integrated power map.
//   state  u32[4]: candidate count, detections kept, detections cut.
//   cand   Candidate[N_LOOPS * N_SAMPLES]: every CFAR hit that is a peak.
//   sel    Candidate[MAX_DET]: the kept detections in output order.
//   angle  complex float [MAX_DET][ANGLE_N]: snapshots, then their spectra.
//   out    mapped host memory: OutHeader then GpuDetection[MAX_DET].

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

// Step 1 (and the Doppler window of step 3): int16 I/Q to complex float,
// times the range window w_r[n] and the Doppler window w_d[l]. Both windows
// are applied here because the range FFT is linear: windowing over l before
// it equals windowing after it. w_d also carries (-1)^l, which moves the
// Doppler spectrum by N_LOOPS/2: the FFT output index is then the fftshifted
// bin d directly. With clutter removal the mean over l must be taken after
// the range FFT and before the Doppler window, so w_d is all ones here and
// clutter_doppler_window applies it.
// Each thread converts four samples: one 16-byte load from the slot (mapped
// host memory read over PCIe on a discrete GPU, or DRAM on Orin).
extern "C" __global__ void __launch_bounds__(256)
convert_window(const uint4 *__restrict__ frame, float4 *__restrict__ x,
               const float *__restrict__ w_range, const float *__restrict__ w_doppler,
               u32 *__restrict__ state)
{
    const u32 groups = N_CHIRPS * N_RX * N_SAMPLES / 4;
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t == 0) {
        // This frame's candidate count; the CFAR stage runs after us.
        state[0] = 0;
    }
    for (; t < groups; t += gridDim.x * blockDim.x) {
        const uint4 v = frame[t];
        const u32 s = t * 4;
        const u32 n = s % N_SAMPLES;
        const u32 l = s / (N_SAMPLES * N_RX * N_TX);
        const float wd = w_doppler[l];
        const float w0 = w_range[n] * wd;
        const float w1 = w_range[n + 1] * wd;
        const float w2 = w_range[n + 2] * wd;
        const float w3 = w_range[n + 3] * wd;
        // Little-endian: I is the low half of each 32-bit word, Q the high.
        x[2 * t] = make_float4((float)(short)(v.x & 0xffffu) * w0, (float)(short)(v.x >> 16) * w0,
                               (float)(short)(v.y & 0xffffu) * w1, (float)(short)(v.y >> 16) * w1);
        x[2 * t + 1] = make_float4((float)(short)(v.z & 0xffffu) * w2, (float)(short)(v.z >> 16) * w2,
                                   (float)(short)(v.w & 0xffffu) * w3, (float)(short)(v.w >> 16) * w3);
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
// Work item t sums two range bins (one 16-byte load per channel); the p
// loop is unrolled so all loads are in flight at once.
__device__ __forceinline__ void power_pair(const float4 *__restrict__ x, float2 *pmap, u32 t)
{
    const u32 half = N_SAMPLES / 2;
    const u32 d = t / half;
    const u32 rp = t % half;
    const float4 *base = x + (size_t)d * N_VIRT * half + rp;
    float4 v[N_VIRT];
#pragma unroll
    for (u32 p = 0; p < N_VIRT; ++p) {
        v[p] = base[p * half];
    }
    double a0 = 0.0, a1 = 0.0;
#pragma unroll
    for (u32 p = 0; p < N_VIRT; ++p) {
        a0 += (double)v[p].x * (double)v[p].x + (double)v[p].y * (double)v[p].y;
        a1 += (double)v[p].z * (double)v[p].z + (double)v[p].w * (double)v[p].w;
    }
    pmap[t] = make_float2((float)a0, (float)a1);
}

#define POWER_ITEMS (N_LOOPS * N_SAMPLES / 2)

extern "C" __global__ void __launch_bounds__(256)
power_map(const float4 *__restrict__ x, float2 *__restrict__ pmap)
{
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < POWER_ITEMS) {
        power_pair(x, pmap, t);
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
#define HALO_D (CFAR_TILE_D + 2 * WIN_D)
#define HALO_R (CFAR_TILE_R + 2 * WIN_R)
#define CFAR_THREADS (CFAR_TILE_D * CFAR_TILE_R)
#define CFAR_TILES_R ((N_SAMPLES + CFAR_TILE_R - 1) / CFAR_TILE_R)
#define CFAR_TILES_D ((N_LOOPS + CFAR_TILE_D - 1) / CFAR_TILE_D)

__device__ __forceinline__ void cfar_tile(const float *__restrict__ pmap,
                                          const double *__restrict__ alpha_by_range,
                          const u32 *__restrict__ n_eff_by_range, u32 *state, Candidate *cand,
                          int d0, int r0)
{
    // P as double: each value is converted once here, not in every sum.
    __shared__ double sp[HALO_D][HALO_R];
    __shared__ double row_full[HALO_D][CFAR_TILE_R];
    __shared__ double row_side[HALO_D][CFAR_TILE_R];
    const int tid = threadIdx.x;

    // Fixed trip counts, unrolled: every thread's loads are in flight at once.
#pragma unroll
    for (int j = 0; j < (HALO_D * HALO_R + CFAR_THREADS - 1) / CFAR_THREADS; ++j) {
        const int i = tid + j * CFAR_THREADS;
        if (i < HALO_D * HALO_R) {
            const int hd = i / HALO_R;
            const int hr = i % HALO_R;
            const int d = ((d0 - WIN_D + hd) % N_LOOPS + N_LOOPS) % N_LOOPS;
            const int r = r0 - WIN_R + hr;
            sp[hd][hr] = (r >= 0 && r < N_SAMPLES) ? (double)pmap[d * N_SAMPLES + r] : 0.0;
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
        const int c = i % CFAR_TILE_R;
        double side = 0.0, mid = 0.0;
#pragma unroll
        for (int k = GUARD_R + 1; k <= WIN_R; ++k) {
            side += sp[hd][c + WIN_R - k] + sp[hd][c + WIN_R + k];
        }
#pragma unroll
        for (int k = -GUARD_R; k <= GUARD_R; ++k) {
            mid += sp[hd][c + WIN_R + k];
        }
        row_side[hd][c] = side;
        row_full[hd][c] = side + mid;
    }
    __syncthreads();

    const int td = tid / CFAR_TILE_R;
    const int c = tid % CFAR_TILE_R;
    const int d = d0 + td;
    const int r = r0 + c;
    bool keep = d < N_LOOPS && r < N_SAMPLES;
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
        mu = sum / (double)n_eff_by_range[r];
        p = sp[td + WIN_D][c + WIN_R];
        keep = p > alpha_by_range[r] * mu;
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
        const u32 slot = atomicAdd(&state[0], 1u);
        if (slot < N_CELLS) {
            Candidate k;
            k.cell = (u32)(d * N_SAMPLES + r);
            k.power = (float)p; // exact: p came from a float
            k.mu = mu;
            cand[slot] = k;
        }
    }
}

extern "C" __global__ void __launch_bounds__(CFAR_THREADS)
cfar_peaks(const float *__restrict__ pmap, const double *__restrict__ alpha_by_range,
           const u32 *__restrict__ n_eff_by_range, u32 *__restrict__ state,
           Candidate *__restrict__ cand)
{
    cfar_tile(pmap, alpha_by_range, n_eff_by_range, state, cand, blockIdx.y * CFAR_TILE_D,
              blockIdx.x * CFAR_TILE_R);
}

// Output order: ascending range bin, then Doppler bin.
__device__ __forceinline__ u32 order_key(u32 cell)
{
    const u32 d = cell / N_SAMPLES;
    const u32 r = cell % N_SAMPLES;
    return r * N_LOOPS + d;
}

__device__ __forceinline__ Candidate load_candidate(const Candidate *c)
{
    const uint4 v = __ldcg((const uint4 *)c);
    Candidate k;
    k.cell = v.x;
    k.power = __uint_as_float(v.y);
    k.mu = __hiloint2double((int)v.w, (int)v.z);
    return k;
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

// Step 7 and the first half of step 8, by one block: keep at most MAX_DET
// candidates (the highest P/mu: an exact radix select over the 96-bit rank
// key when over the cap), sort them by output order (bitonic sort in shared
// memory), and write each one's angle snapshot: z_p = X[d][p][r] times the
// TDM Doppler compensation tdm[d][i] (the CPU's float32 phasor table),
// zero-padded to ANGLE_N, times (-1)^p so that the angle FFT's output comes
// out fftshifted.
__device__ void select_block(const Candidate *cand, u32 *state, Candidate *__restrict__ sel,
                             const float2 *__restrict__ x, const float2 *__restrict__ tdm,
                             float2 *__restrict__ angle)
{
    __shared__ u32 s_key[SORT_N];
    __shared__ u32 s_idx[SORT_N];
    __shared__ u32 s_hist[256];
    __shared__ u64 s_prefix_hi;
    __shared__ u32 s_prefix_lo;
    __shared__ u32 s_need;
    __shared__ u32 s_fill;
    const u32 tid = threadIdx.x;
    const u32 total = __ldcg(&state[0]);
    const u32 n = min(total, (u32)N_CELLS);
    const u32 n_out = min(n, (u32)MAX_DET);
    u32 n_sort = 2;
    while (n_sort < n_out) {
        n_sort <<= 1;
    }

    if (n <= MAX_DET) {
        for (u32 i = tid; i < n_sort; i += blockDim.x) {
            s_key[i] = i < n ? order_key(load_candidate(&cand[i]).cell) : 0xffffffffu;
            s_idx[i] = i;
        }
    } else {
        // Radix select, 8 bits a pass: 8 passes over the ratio's bits,
        // then 4 over the tie-break key.
        u64 mask_hi = 0;
        u32 mask_lo = 0;
        if (tid == 0) {
            s_prefix_hi = 0;
            s_prefix_lo = 0;
            s_need = MAX_DET;
            s_fill = 0;
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
                    const u32 digit = pass < 8 ? (u32)(hi >> (56 - 8 * pass)) & 255u
                                               : (lo >> (24 - 8 * (pass - 8))) & 255u;
                    atomicAdd(&s_hist[digit], 1u);
                }
            }
            __syncthreads();
            if (tid == 0) {
                u32 above = 0;
                for (int b = 255; b >= 0; --b) {
                    if (above + s_hist[b] >= s_need) {
                        if (pass < 8) {
                            s_prefix_hi = prefix_hi | ((u64)b << (56 - 8 * pass));
                        } else {
                            s_prefix_lo = prefix_lo | ((u32)b << (24 - 8 * (pass - 8)));
                        }
                        s_need -= above;
                        break;
                    }
                    above += s_hist[b];
                }
            }
            if (pass < 8) {
                mask_hi |= (u64)255 << (56 - 8 * pass);
            } else {
                mask_lo |= 255u << (24 - 8 * (pass - 8));
            }
            __syncthreads();
        }
        // Keys are unique: exactly MAX_DET candidates rank at or above
        // (s_prefix_hi, s_prefix_lo).
        const u64 t_hi = s_prefix_hi;
        const u32 t_lo = s_prefix_lo;
        for (u32 i = tid; i < n; i += blockDim.x) {
            const Candidate k = load_candidate(&cand[i]);
            const u64 hi = rank_hi(k);
            if (hi > t_hi || (hi == t_hi && rank_lo(k) >= t_lo)) {
                const u32 pos = atomicAdd(&s_fill, 1u);
                if (pos < MAX_DET) {
                    s_key[pos] = order_key(k.cell);
                    s_idx[pos] = i;
                }
            }
        }
        __syncthreads();
        for (u32 i = MAX_DET + tid; i < n_sort; i += blockDim.x) {
            s_key[i] = 0xffffffffu;
            s_idx[i] = 0;
        }
    }
    __syncthreads();

    for (u32 k = 2; k <= n_sort; k <<= 1) {
        for (u32 j = k >> 1; j > 0; j >>= 1) {
            for (u32 i = tid; i < n_sort; i += blockDim.x) {
                const u32 ixj = i ^ j;
                if (ixj > i) {
                    const bool ascending = (i & k) == 0;
                    const u32 a = s_key[i];
                    const u32 b = s_key[ixj];
                    if ((a > b) == ascending) {
                        s_key[i] = b;
                        s_key[ixj] = a;
                        const u32 t = s_idx[i];
                        s_idx[i] = s_idx[ixj];
                        s_idx[ixj] = t;
                    }
                }
            }
            __syncthreads();
        }
    }

    for (u32 s = tid; s < n_out; s += blockDim.x) {
        sel[s] = load_candidate(&cand[s_idx[s]]);
    }
    for (u32 e = tid; e < n_out * ANGLE_N; e += blockDim.x) {
        const u32 s = e / ANGLE_N;
        const u32 p = e % ANGLE_N;
        float2 z = make_float2(0.0f, 0.0f);
        if (p < N_VIRT) {
            // The sort key holds the cell: key = r * N_LOOPS + d.
            const u32 d = s_key[s] % N_LOOPS;
            const u32 r = s_key[s] / N_LOOPS;
            const float2 v = x[((size_t)d * N_VIRT + p) * N_SAMPLES + r];
            const float2 w = tdm[d * N_TX + p / N_RX];
            // Rounded like the CPU's complex multiply (no FMA contraction).
            z.x = __fsub_rn(__fmul_rn(v.x, w.x), __fmul_rn(v.y, w.y));
            z.y = __fadd_rn(__fmul_rn(v.x, w.y), __fmul_rn(v.y, w.x));
            if (p & 1u) {
                z.x = -z.x;
                z.y = -z.y;
            }
        }
        angle[e] = z;
    }
    if (tid == 0) {
        state[1] = n_out;
        state[2] = total - n_out;
    }
}

extern "C" __global__ void __launch_bounds__(1024)
select_sort(const Candidate *__restrict__ cand, u32 *__restrict__ state,
            Candidate *__restrict__ sel, const float2 *__restrict__ x,
            const float2 *__restrict__ tdm, float2 *__restrict__ angle)
{
    select_block(cand, state, sel, x, tdm, angle);
}

// For the instrumented (non-graph) timing run: hold the stream until the
// host has queued every stage, so the events between stages time the GPU
// work and not the host's launch calls. Gives up after max_cycles.
extern "C" __global__ void gate_wait(const volatile u32 *flag, u64 max_cycles)
{
    const u64 t0 = clock64();
    while (*flag == 0u && clock64() - t0 < max_cycles) {
        __nanosleep(1000);
    }
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

// Steps 8 (peak of the angle spectrum: the first maximum, neighbours
// cyclic), 9 and 10, with the unit conversions of refine.rs: one warp per
// kept detection (the lanes scan the angle spectrum together), results
// straight to mapped host memory.
extern "C" __global__ void __launch_bounds__(128)
refine_output(const u32 *__restrict__ state, const Candidate *__restrict__ sel,
              const float2 *__restrict__ angle, const float *__restrict__ pmap,
              OutHeader *out_header, GpuDetection *out_det,
              double range_bin_m, double velocity_bin_mps)
{
    const u32 n_out = state[1];
    const u32 lane = threadIdx.x & 31u;
    const u32 s = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        OutHeader h;
        h.count = n_out;
        h.cut = state[2];
        h.reserved[0] = 0;
        h.reserved[1] = 0;
        *out_header = h;
    }
    if (s >= n_out) {
        return; // the whole warp: s is the same for its lanes
    }
    const float2 *a = angle + (size_t)s * ANGLE_N;
    float best = -1.0f;
    u32 kb = 0;
#pragma unroll
    for (u32 q = lane; q < ANGLE_N; q += 32) {
        const float pw = norm_sqr(a[q]);
        if (pw > best) {
            best = pw;
            kb = q;
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
    // Lanes 0-2 each evaluate one of the three double-precision functions.
    if (lane > 2) {
        return;
    }
    best = __shfl_sync(0x7u, best, 0);
    kb = __shfl_sync(0x7u, kb, 0);
    const Candidate k = sel[s];
    const u32 d = k.cell / N_SAMPLES;
    const u32 r = k.cell % N_SAMPLES;
    const u32 dm = (d + N_LOOPS - 1) % N_LOOPS;
    const u32 dp = (d + 1) % N_LOOPS;
    // Independent loads, issued together.
    const float2 am = a[(kb + ANGLE_N - 1) % ANGLE_N];
    const float2 ap = a[(kb + 1) % ANGLE_N];
    const float p0 = k.power;
    const float prm = r > 0 ? pmap[d * N_SAMPLES + r - 1] : 0.0f;
    const float prp = r + 1 < N_SAMPLES ? pmap[d * N_SAMPLES + r + 1] : 0.0f;
    const float pdm = pmap[dm * N_SAMPLES + r];
    const float pdp = pmap[dp * N_SAMPLES + r];

    const float da = parabolic(norm_sqr(am), best, norm_sqr(ap));
    // Range is not cyclic: no refinement at the first and last bin.
    const float dr = (r > 0 && r + 1 < N_SAMPLES) ? parabolic(prm, p0, prp) : 0.0f;
    const float dd = parabolic(pdm, p0, pdp);

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
    out_det[s] = o;
}
