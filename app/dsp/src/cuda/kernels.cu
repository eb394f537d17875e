// Radar processing chain, spec v1 (docs/processing-chain.md): every kernel
// of the chain, FFTs included (no cuFFT: its transforms cannot take the
// conversion, the windows or the power sum with them, and each of those was
// a pass over the frame). Compiled by NVRTC at start-up; the geometry,
// CFAR window and caps arrive as #defines prepended by the host, so every
// division and loop bound below is a compile-time constant.
//
// Buffers (all device memory unless noted):
//   frame  int16 I/Q [chirp m][rx j][sample n], the ring slot (mapped host
//          memory read over PCIe on a discrete GPU, DRAM on Orin).
//   x      the range spectra [p][r][l]: after the range FFT, channel p (=
//          i * N_RX + j for chirp m = l * N_TX + i), range bin r, loop l; the
//          Doppler window and its (-1)^l (the fftshift) already applied
//          unless clutter removal is on. Column (p, r) is contiguous: the
//          Doppler FFT reads it in one piece, and a detection's angle
//          snapshot reads 16 such columns. The Doppler spectra are never
//          stored: doppler_power keeps only the power map, and refine_output
//          computes a detection's snapshot from x again (one DFT bin).
//          Stored spectra (spec step 1): each float32 component rounded to
//          16 significant bits, 6 bytes a value in two planes (x_store).
//   pmap   float [r][d], the non-coherently integrated power map (range-
//          major: doppler_power writes a range bin's row in one piece).
//   state  u32[4]: [0] candidate count (reset by doppler_power).
//   cand   Candidate[N_LOOPS * N_SAMPLES]: every CFAR hit that is a peak, in
//          the order the hits were counted. cand[0 .. min(count, MAX_DET))
//          are the kept detections (over the cap after select_overflow).
//   keys   u32[MAX_DET]: the output-order key of cand[i].
//   rows   u32[MAX_DET]: scratch of select_overflow.
//   out    mapped host memory: OutHeader then GpuDetection[MAX_DET].
//
// Kernel order: range_fft, doppler_power, cfar_peaks, [select_overflow],
// refine_output. Without select_overflow in the frame's graph, a frame over
// the cap gets select_overflow and refine_output again in a second graph
// (the host launches it when the output header shows a cut). On sm_90 the
// kernels after range_fft may be launched as programmatic dependents (PDL):
// they may start before the kernel ahead of them has finished, and wait in
// pdl_wait() before reading anything it wrote.
// Chunk-streamed and GPU-triggered modes: range_fft runs once per DMA chunk
// as the chunk lands (a chunk is whole chirps); after the frame completes
// only the last chunk's and the rest of the chain remain.

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define N_VIRT (N_TX * N_RX)
#define N_CHIRPS (N_TX * N_LOOPS)
#define N_CELLS (N_LOOPS * N_SAMPLES)
#define X_CELLS ((size_t)N_VIRT * N_SAMPLES * N_LOOPS)
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

// --- The stored range spectra ---------------------------------------------
// Spec step 1 stores each component of a range spectrum value rounded to
// nearest (ties to even) at 16 significant bits: the float32's sign,
// exponent and top 15 fraction bits, 24 bits in all, exactly what
// radar_dsp::spectra::round_stored does on the CPU. x holds them in two
// planes, so that every access is a plain aligned load or store: x[i] (u32)
// the top 16 bits of re and of im (re in the low half), then after X_CELLS
// of those the next 8 bits of each (u16: re in the low byte). 6 bytes a
// value instead of 8: the chain's largest buffer, written once and read
// once a frame, is 6 MiB at the default geometry.
__device__ __forceinline__ u32 round_stored(float f)
{
    const u32 u = __float_as_uint(f);
    return (u + 0x7fu + ((u >> 8) & 1u)) & 0xffffff00u;
}

__device__ __forceinline__ void x_store(u32 *x, size_t i, float2 v)
{
    const u32 re = round_stored(v.x);
    const u32 im = round_stored(v.y);
    x[i] = (re >> 16) | (im & 0xffff0000u);
    ((u16 *)(x + X_CELLS))[i] = (u16)(((re >> 8) & 0xffu) | (im & 0xff00u));
}

// x comes from an earlier kernel: L2 loads, not the read-only path.
__device__ __forceinline__ float2 x_load(const u32 *x, size_t i)
{
    const u32 h = __ldcg(&x[i]);
    const u32 l = __ldcg(&((const u16 *)(x + X_CELLS))[i]);
    return make_float2(__uint_as_float((h << 16) | ((l & 0xffu) << 8)),
                       __uint_as_float((h & 0xffff0000u) | (l & 0xff00u)));
}

// --- FFTs ----------------------------------------------------------------
// A forward transform of N points (a power of two, >= 4) in shared memory,
// Stockham autosort (natural order in and out), radix 4 with one radix-2
// pass last when log2(N) is odd: N/4 threads (t = 0 .. N/4-1) of the
// calling group work on it, every thread of the block calls it (the
// passes are separated by __syncthreads). tw[k] = exp(-2 pi i k / N),
// k < N, computed in double on the host. Each pass reads a thread's
// inputs into registers, syncs, and writes its outputs to the same buffer.
__device__ __forceinline__ float2 cmul(float2 a, float2 b)
{
    return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

template <int N>
__device__ __forceinline__ void fft_shared(float2 *a, const float2 *tw, u32 t, bool active)
{
    // Radix-4 passes: Ns = 1, 4, 16, ... while 4 * Ns <= N.
#pragma unroll
    for (int ns = 1; ns * 4 <= N; ns *= 4) {
        float2 v[4];
        const u32 j = t; // one butterfly per thread: N/4 of them
        const u32 k = j % ns;
        if (active) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                v[r] = a[j + r * (N / 4)];
            }
            const u32 step = k * (N / (4 * ns));
            v[1] = cmul(v[1], tw[step]);
            v[2] = cmul(v[2], tw[(2 * step) & (N - 1)]);
            v[3] = cmul(v[3], tw[(3 * step) & (N - 1)]);
            const float2 s02 = make_float2(v[0].x + v[2].x, v[0].y + v[2].y);
            const float2 d02 = make_float2(v[0].x - v[2].x, v[0].y - v[2].y);
            const float2 s13 = make_float2(v[1].x + v[3].x, v[1].y + v[3].y);
            const float2 d13 = make_float2(v[1].x - v[3].x, v[1].y - v[3].y);
            v[0] = make_float2(s02.x + s13.x, s02.y + s13.y);
            v[2] = make_float2(s02.x - s13.x, s02.y - s13.y);
            // -i * d13 and +i * d13
            v[1] = make_float2(d02.x + d13.y, d02.y - d13.x);
            v[3] = make_float2(d02.x - d13.y, d02.y + d13.x);
        }
        __syncthreads();
        if (active) {
            const u32 base = (j / ns) * ns * 4 + k;
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                a[base + r * ns] = v[r];
            }
        }
        __syncthreads();
    }
    // A last radix-2 pass when log2(N) is odd (Ns = N / 2): two butterflies
    // per thread.
    if ((N & 0x55555555) == 0) {
        float2 y[2][2];
        if (active) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const u32 j = t + h * (N / 4);
                const float2 v0 = a[j];
                const float2 v1 = cmul(a[j + N / 2], tw[j]);
                y[h][0] = make_float2(v0.x + v1.x, v0.y + v1.y);
                y[h][1] = make_float2(v0.x - v1.x, v0.y - v1.y);
            }
        }
        __syncthreads();
        if (active) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const u32 j = t + h * (N / 4);
                a[j] = y[h][0];
                a[j + N / 2] = y[h][1];
            }
        }
        __syncthreads();
    }
}

// 256 points, the default geometry's range and Doppler FFTs, in registers:
// 256 = 16 x 16. A group of 16 threads (t = 0 .. 15) takes one transform:
// thread t holds x[16 n1 + t] (n1 = 0 .. 15), does a 16-point DFT over n1
// in registers, multiplies by W256^(t k1), and the group exchanges the
// values through shared memory once (a 16 x 17 padded square: no bank
// conflicts); thread t then holds Y[k1 = t][n2] and its 16-point DFT over
// n2 gives X[t + 16 k2], k2 = 0 .. 15. Two register passes, one exchange,
// against four passes and eight barriers of fft_shared.
__device__ __forceinline__ void dft4(float2 &a0, float2 &a1, float2 &a2, float2 &a3)
{
    const float2 s02 = make_float2(a0.x + a2.x, a0.y + a2.y);
    const float2 d02 = make_float2(a0.x - a2.x, a0.y - a2.y);
    const float2 s13 = make_float2(a1.x + a3.x, a1.y + a3.y);
    const float2 d13 = make_float2(a1.x - a3.x, a1.y - a3.y);
    a0 = make_float2(s02.x + s13.x, s02.y + s13.y);
    a2 = make_float2(s02.x - s13.x, s02.y - s13.y);
    a1 = make_float2(d02.x + d13.y, d02.y - d13.x);
    a3 = make_float2(d02.x - d13.y, d02.y + d13.x);
}

// v[n] -> X[k] in place, forward, 16 points (16 = 4 x 4).
__device__ __forceinline__ void dft16(float2 v[16])
{
    const float c1 = 0.92387953251128674f; // cos(pi/8)
    const float s1 = 0.38268343236508978f; // sin(pi/8)
    const float c2 = 0.70710678118654752f; // cos(pi/4)
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        dft4(v[m], v[4 + m], v[8 + m], v[12 + m]);
    }
    // v[4q + m] *= W16^(m q): exponents 1, 2, 3 (q = 1), 2, 4, 6 (q = 2),
    // 3, 6, 9 (q = 3).
    const float2 w[10] = {
        make_float2(1.0f, 0.0f), make_float2(c1, -s1), make_float2(c2, -c2),
        make_float2(s1, -c1),    make_float2(0.0f, -1.0f), make_float2(-s1, -c1),
        make_float2(-c2, -c2),   make_float2(-c1, -s1), make_float2(-1.0f, 0.0f),
        make_float2(-c1, s1)};
#pragma unroll
    for (int q = 1; q < 4; ++q) {
#pragma unroll
        for (int m = 1; m < 4; ++m) {
            v[4 * q + m] = cmul(v[4 * q + m], w[m * q]);
        }
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        dft4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
    }
    // v[4q + s] is X[q + 4s]: transpose the 4 x 4 (compile-time indices).
#pragma unroll
    for (int q = 0; q < 4; ++q) {
#pragma unroll
        for (int s = q + 1; s < 4; ++s) {
            const float2 tmp = v[4 * q + s];
            v[4 * q + s] = v[4 * s + q];
            v[4 * s + q] = tmp;
        }
    }
}

// The 256-point transform of the group whose thread t holds v[n1] =
// x[16 n1 + t]; `sq` is the group's 16 x 17 exchange square in shared
// memory, `tw` the 256-point twiddles. Every thread of the block calls it
// (one __syncthreads inside, and one after); threads not `active` leave
// the square alone. On return v[k2] = X[t + 16 k2].
__device__ __forceinline__ void fft256_regs(float2 v[16], float2 *sq, const float2 *tw, u32 t,
                                            bool active)
{
    dft16(v);
    if (active) {
#pragma unroll
        for (u32 k1 = 0; k1 < 16; ++k1) {
            sq[k1 * 17 + t] = cmul(v[k1], tw[t * k1]);
        }
    }
    __syncthreads();
    if (active) {
#pragma unroll
        for (u32 n2 = 0; n2 < 16; ++n2) {
            v[n2] = sq[t * 17 + n2];
        }
    }
    __syncthreads();
    dft16(v);
}

// --- Step 1 (and the Doppler window of step 3): range_fft ------------------
// int16 I/Q to complex float, times the range window w_r[n] and the Doppler
// window w_d[l], then the range FFT, then x[p][r][l]: one kernel, one read of
// the frame, one write of x. Both windows are applied before the range FFT
// because it is linear: windowing over l before it equals windowing after
// it. w_d also carries (-1)^l, which moves the Doppler spectrum by N_LOOPS/2:
// the Doppler FFT's output index is then the fftshifted bin d directly.
// With clutter removal the mean over l must be taken after the range FFT
// and before the Doppler window, so w_d is all ones here and doppler_power
// applies it.
// A block holds RANGE_ROWS consecutive loops of one channel p (its rows are
// 1 KiB apart in the frame, each read in one piece), so that every range
// bin's RANGE_ROWS values of l go to x as one contiguous run. Chirps
// [chirp_begin, chirp_end) are transformed: the whole frame, or one DMA
// chunk of it as it lands; rows outside are neither read nor written.
#if N_SAMPLES == 256
// The default geometry: 16 loops a block (each range bin's run of 16 loops
// is a whole 128-byte line of x), 16 threads a row, the transform in
// registers (fft256_regs). A row's 16 x 17 exchange square and its output
// reuse the row's buffer (rows padded to 273 values: no bank conflicts
// between the two rows of a warp).
#define RANGE_ROWS 16
#define RANGE_THREADS (16 * RANGE_ROWS)
#define RANGE_ROW_STRIDE 273

extern "C" __global__ void __launch_bounds__(RANGE_THREADS)
range_fft(const uint2 *__restrict__ frame, u32 *__restrict__ x,
          const float *__restrict__ w_range, const float *__restrict__ w_doppler,
          const float2 *__restrict__ tw_range, u64 chirp_begin, u64 chirp_end, u64 *stamp)
{
    // GPU-triggered mode's last chunk: when the GPU started it.
    if (stamp != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
        u64 t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        *(volatile u64 *)stamp = t;
    }
    __shared__ float2 buf[RANGE_ROWS * RANGE_ROW_STRIDE];
    __shared__ float2 tw[256];
    const u32 p = blockIdx.y;
    const u32 i = p / N_RX;
    const u32 j = p % N_RX;
    const u32 row = threadIdx.x / 16;
    const u32 t = threadIdx.x % 16;
    const u32 cb = (u32)chirp_begin, ce = (u32)chirp_end;
    const u32 l_first = cb > i ? (cb - i + N_TX - 1) / N_TX : 0;
    const u32 l_end = ce > i ? (ce - i + N_TX - 1) / N_TX : 0;
    const u32 l0 = l_first + blockIdx.x * RANGE_ROWS;
    const u32 l = l0 + row;
    const bool active = l < l_end;
    float2 *rb = buf + row * RANGE_ROW_STRIDE;
    for (u32 k = threadIdx.x; k < 256; k += RANGE_THREADS) {
        tw[k] = tw_range[k];
    }
    // Thread t's 16 samples x[16 n1 + t] of the row, converted and windowed
    // straight into registers: 16 threads read 64 contiguous bytes a step,
    // and no pass through shared memory precedes the transform.
    float2 v[16];
    if (active) {
        const u32 m = l * N_TX + i;
        const u32 *src = (const u32 *)frame + (size_t)(m * N_RX + j) * 256;
        const float wd = w_doppler[l];
        u32 q[16];
#pragma unroll
        for (int n1 = 0; n1 < 16; ++n1) {
            q[n1] = src[16 * n1 + t];
        }
#pragma unroll
        for (int n1 = 0; n1 < 16; ++n1) {
            const float w = w_range[16 * n1 + t] * wd;
            v[n1] = make_float2((float)(short)(q[n1] & 0xffffu) * w,
                                (float)(short)(q[n1] >> 16) * w);
        }
    } else {
#pragma unroll
        for (int n1 = 0; n1 < 16; ++n1) {
            v[n1] = make_float2(0.0f, 0.0f);
        }
    }
    __syncthreads(); // the block's twiddle table, read in the exchange
    fft256_regs(v, rb, tw, t, true);
    // X[t + 16 k2] back into the row's buffer, then out by range bin.
#pragma unroll
    for (int k2 = 0; k2 < 16; ++k2) {
        rb[t + 16 * k2] = v[k2];
    }
    __syncthreads();
    // Thread (r0, rr) writes loop l0 + rr of range bins r0, r0 + 16, ...:
    // 16 threads fill one bin's 64-byte run. With the row and the first bin
    // fixed per thread the 16 stores unroll with constant offsets (a loop
    // over a flat index cost about 0.6 us a frame on the H100).
    const u32 valid = l_end > l0 ? min((u32)RANGE_ROWS, l_end - l0) : 0u;
    const u32 rr = threadIdx.x % RANGE_ROWS;
    const u32 r0 = threadIdx.x / RANGE_ROWS;
    if (rr < valid) {
        const size_t dst = (size_t)p * 256 * N_LOOPS + l0 + rr;
        const float2 *col = buf + rr * RANGE_ROW_STRIDE;
#pragma unroll
        for (u32 k = 0; k < 256 / 16; ++k) {
            const u32 r = r0 + 16 * k;
            x_store(x, dst + (size_t)r * N_LOOPS, col[r]);
        }
    }
}
#else
#define RANGE_T (N_SAMPLES / 4)
#define RANGE_ROWS_MAX ((6000 / N_SAMPLES) < 8 ? (6000 / N_SAMPLES) : 8)
#define RANGE_ROWS (RANGE_ROWS_MAX < 1 ? 1 : RANGE_ROWS_MAX)
#define RANGE_THREADS (RANGE_T * RANGE_ROWS)
#define RANGE_PAIRS_PER_THREAD (N_SAMPLES / 2 / RANGE_T)

extern "C" __global__ void __launch_bounds__(RANGE_THREADS)
range_fft(const uint2 *__restrict__ frame, u32 *__restrict__ x,
          const float *__restrict__ w_range, const float *__restrict__ w_doppler,
          const float2 *__restrict__ tw_range, u64 chirp_begin, u64 chirp_end, u64 *stamp)
{
    // GPU-triggered mode's last chunk: when the GPU started it.
    if (stamp != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
        u64 t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        *(volatile u64 *)stamp = t;
    }
    // A row padded by one value: the write-out reads down columns.
    __shared__ float2 buf[RANGE_ROWS][N_SAMPLES + 1];
    __shared__ float2 tw[N_SAMPLES];
    const u32 p = blockIdx.y;
    const u32 i = p / N_RX;
    const u32 j = p % N_RX;
    const u32 row = threadIdx.x / RANGE_T;
    const u32 t = threadIdx.x % RANGE_T;
    // The loops of TX i whose chirps l * N_TX + i lie in the range.
    const u32 cb = (u32)chirp_begin, ce = (u32)chirp_end;
    const u32 l_first = cb > i ? (cb - i + N_TX - 1) / N_TX : 0;
    const u32 l_end = ce > i ? (ce - i + N_TX - 1) / N_TX : 0;
    const u32 l0 = l_first + blockIdx.x * RANGE_ROWS;
    const u32 l = l0 + row;
    const bool active = l < l_end;
    for (u32 k = threadIdx.x; k < N_SAMPLES; k += RANGE_THREADS) {
        tw[k] = tw_range[k];
    }
    if (active) {
        const u32 m = l * N_TX + i;
        const uint2 *src = frame + ((size_t)(m * N_RX + j) * N_SAMPLES) / 2;
        const float wd = w_doppler[l];
        uint2 v[RANGE_PAIRS_PER_THREAD];
#pragma unroll
        for (int q = 0; q < RANGE_PAIRS_PER_THREAD; ++q) {
            v[q] = src[t + q * RANGE_T];
        }
#pragma unroll
        for (int q = 0; q < RANGE_PAIRS_PER_THREAD; ++q) {
            const u32 n = 2 * (t + q * RANGE_T);
            const float2 wr = *(const float2 *)&w_range[n];
            const float w0 = wr.x * wd;
            const float w1 = wr.y * wd;
            buf[row][n] = make_float2((float)(short)(v[q].x & 0xffffu) * w0,
                                      (float)(short)(v[q].x >> 16) * w0);
            buf[row][n + 1] = make_float2((float)(short)(v[q].y & 0xffffu) * w1,
                                          (float)(short)(v[q].y >> 16) * w1);
        }
    }
    __syncthreads();
    fft_shared<N_SAMPLES>(buf[row], tw, t, active);
    // x[p][r][l0 .. l0 + RANGE_ROWS): consecutive threads take consecutive
    // loops of one range bin, then the next bin.
    const u32 valid = l_end > l0 ? min((u32)RANGE_ROWS, l_end - l0) : 0u;
    const size_t dst = (size_t)p * N_SAMPLES * N_LOOPS + l0;
    for (u32 e = threadIdx.x; e < N_SAMPLES * RANGE_ROWS; e += RANGE_THREADS) {
        const u32 r = e / RANGE_ROWS;
        const u32 rr = e % RANGE_ROWS;
        if (rr < valid) {
            x_store(x, dst + (size_t)r * N_LOOPS + rr, buf[rr][r]);
        }
    }
}
#endif

// --- Steps 2 to 4: doppler_power -------------------------------------------
// One block per range bin r: the columns x[p][r][0 .. N_LOOPS) of every
// channel (contiguous, each read in one piece), [clutter removal: the mean
// over l subtracted, then the Doppler window with its (-1)^l], the Doppler
// FFT of each (its output index is the fftshifted Doppler bin), and
// P[d][r] = sum over p of |X[d][p][r]|^2: the float32 components squared
// and summed in double in channel order, rounded once to float, as the CPU
// reference does (the products of float components are exact in double).
// The spectra stay in shared memory; pmap[r][...] is written in one piece.
// It also starts the frame's candidate count: every frame's work passes
// here exactly once, after the previous frame's tail and before cfar_peaks
// counts.
#if N_LOOPS == 256
// The default geometry: 16 threads a column (fft256_regs), its 16 loads
// straight from x (16 consecutive loops per load instruction: 128-byte
// lines), N_VIRT columns at a time.
#define DOPPLER_COLS (N_VIRT < 16 ? N_VIRT : 16)
#define DOPPLER_THREADS_FFT (16 * DOPPLER_COLS)
#define DOPPLER_THREADS (DOPPLER_THREADS_FFT > 256 ? DOPPLER_THREADS_FFT : 256)
#define DOPPLER_COL_STRIDE 273

extern "C" __global__ void __launch_bounds__(DOPPLER_THREADS)
doppler_power(const u32 *x, float *__restrict__ pmap, u32 *__restrict__ state,
              const float2 *__restrict__ tw_doppler, const float *__restrict__ w_clutter)
{
    __shared__ float2 buf[DOPPLER_COLS * DOPPLER_COL_STRIDE];
    __shared__ float2 tw[256];
    const u32 r = blockIdx.x;
    const u32 col = threadIdx.x / 16;
    const u32 t = threadIdx.x % 16;
    float2 *cb = buf + (col < DOPPLER_COLS ? col : 0) * DOPPLER_COL_STRIDE;
    for (u32 k = threadIdx.x; k < 256; k += DOPPLER_THREADS) {
        tw[k] = tw_doppler[k];
    }
    pdl_wait();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        state[0] = 0;
    }
    pdl_release_dependents();
    double acc = 0.0; // P[d = threadIdx.x][r]
    for (u32 p0 = 0; p0 < N_VIRT; p0 += DOPPLER_COLS) {
        const u32 p = p0 + col;
        const bool active = col < DOPPLER_COLS && p < N_VIRT;
        float2 v[16];
        const size_t src = ((size_t)(active ? p : 0) * N_SAMPLES + r) * 256;
#pragma unroll
        for (int n1 = 0; n1 < 16; ++n1) {
            v[n1] = active ? x_load(x, src + 16 * n1 + t) : make_float2(0.0f, 0.0f);
        }
#if CLUTTER
        // The column's mean over l (double, over the group's 16 lanes),
        // rounded to float, subtracted, then the window, in float.
        {
            double sr = 0.0, si = 0.0;
#pragma unroll
            for (int n1 = 0; n1 < 16; ++n1) {
                sr += v[n1].x;
                si += v[n1].y;
            }
#pragma unroll
            for (u32 m = 1; m < 16; m <<= 1) {
                sr += __shfl_xor_sync(0xffffffffu, sr, m);
                si += __shfl_xor_sync(0xffffffffu, si, m);
            }
            const float mr = (float)(sr / 256.0), mi = (float)(si / 256.0);
#pragma unroll
            for (int n1 = 0; n1 < 16; ++n1) {
                const float w = w_clutter[16 * n1 + t];
                v[n1] = make_float2((v[n1].x - mr) * w, (v[n1].y - mi) * w);
            }
        }
#endif
        fft256_regs(v, cb, tw, t, active);
        // X[t + 16 k2] of column p into its buffer; then P[d][r] for
        // d = threadIdx.x, this pass's channels in order.
        if (active) {
#pragma unroll
            for (int k2 = 0; k2 < 16; ++k2) {
                cb[t + 16 * k2] = v[k2];
            }
        }
        __syncthreads();
        if (threadIdx.x < 256) {
            const u32 d = threadIdx.x;
            for (u32 c = 0; c < DOPPLER_COLS && p0 + c < N_VIRT; ++c) {
                const float2 y = buf[c * DOPPLER_COL_STRIDE + d];
                acc += (double)y.x * (double)y.x + (double)y.y * (double)y.y;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x < 256) {
        pmap[(size_t)r * 256 + threadIdx.x] = (float)acc;
    }
}
#else
#define DOPPLER_T (N_LOOPS / 4)
#define DOPPLER_COLS_MAX (1024 / DOPPLER_T)
#define DOPPLER_COLS_SMEM (6144 / N_LOOPS)
#define DOPPLER_COLS_A (DOPPLER_COLS_MAX < DOPPLER_COLS_SMEM ? DOPPLER_COLS_MAX : DOPPLER_COLS_SMEM)
#define DOPPLER_COLS (N_VIRT < DOPPLER_COLS_A ? N_VIRT : DOPPLER_COLS_A)
#define DOPPLER_FFT_THREADS (DOPPLER_COLS * DOPPLER_T)
#define DOPPLER_THREADS (DOPPLER_FFT_THREADS > N_LOOPS ? DOPPLER_FFT_THREADS : N_LOOPS)

extern "C" __global__ void __launch_bounds__(DOPPLER_THREADS)
doppler_power(const u32 *x, float *__restrict__ pmap, u32 *__restrict__ state,
              const float2 *__restrict__ tw_doppler, const float *__restrict__ w_clutter)
{
    __shared__ float2 buf[DOPPLER_COLS][N_LOOPS];
    __shared__ float2 tw[N_LOOPS];
#if CLUTTER
    __shared__ double part[DOPPLER_COLS][DOPPLER_T];
    __shared__ float mean_re[DOPPLER_COLS], mean_im[DOPPLER_COLS];
#endif
    const u32 r = blockIdx.x;
    const u32 col = threadIdx.x / DOPPLER_T;
    const u32 t = threadIdx.x % DOPPLER_T;
    const bool fft_thread = threadIdx.x < DOPPLER_FFT_THREADS;
    for (u32 k = threadIdx.x; k < N_LOOPS; k += DOPPLER_THREADS) {
        tw[k] = tw_doppler[k];
    }
    pdl_wait();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        state[0] = 0;
    }
    pdl_release_dependents();
    double acc = 0.0; // P[d = threadIdx.x][r]
    for (u32 p0 = 0; p0 < N_VIRT; p0 += DOPPLER_COLS) {
        const u32 p = p0 + col;
        const bool active = fft_thread && p < N_VIRT;
        if (active) {
            // Column (p, r): N_LOOPS contiguous values.
            const size_t src = ((size_t)p * N_SAMPLES + r) * N_LOOPS;
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const u32 l = t + q * DOPPLER_T;
                buf[col][l] = x_load(x, src + l);
            }
        }
#if CLUTTER
        // The mean over l of the column, in double, rounded to float, the
        // real part then the imaginary part through one array of partial
        // sums; then (v - mean) * w, in float (the CPU reference's order).
        __syncthreads();
#pragma unroll
        for (int part_of = 0; part_of < 2; ++part_of) {
            if (active) {
                double sum = 0.0;
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const float2 v = buf[col][t + q * DOPPLER_T];
                    sum += part_of == 0 ? v.x : v.y;
                }
                part[col][t] = sum;
            }
            __syncthreads();
            if (active && t == 0) {
                double sum = 0.0;
                for (u32 k = 0; k < DOPPLER_T; ++k) {
                    sum += part[col][k];
                }
                if (part_of == 0) {
                    mean_re[col] = (float)(sum / N_LOOPS);
                } else {
                    mean_im[col] = (float)(sum / N_LOOPS);
                }
            }
            __syncthreads();
        }
        if (active) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const u32 l = t + q * DOPPLER_T;
                float2 v = buf[col][l];
                const float w = w_clutter[l];
                v.x = (v.x - mean_re[col]) * w;
                v.y = (v.y - mean_im[col]) * w;
                buf[col][l] = v;
            }
        }
#endif
        __syncthreads();
        fft_shared<N_LOOPS>(buf[col], tw, t, active);
        // P[d][r] for d = threadIdx.x: this pass's channels in order.
        if (threadIdx.x < N_LOOPS) {
            const u32 d = threadIdx.x;
            for (u32 c = 0; c < DOPPLER_COLS && p0 + c < N_VIRT; ++c) {
                const float2 v = buf[c][d];
                acc += (double)v.x * (double)v.x + (double)v.y * (double)v.y;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x < N_LOOPS) {
        pmap[(size_t)r * N_LOOPS + threadIdx.x] = (float)acc;
    }
}
#endif

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
// with its key, into a row whose candidate is not kept.
// Both sets have the same size. Output order is refine_output's business.
__device__ void select_overflow_block(Candidate *cand, const u32 *state, u32 *keys, u32 *rows)
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
            cand[row] = k;
            keys[row] = order_key(k.cell);
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
// MAX_DET also write their output key, so that when the frame is under the
// cap nothing has to be gathered later.
#define HALO_D (CFAR_TILE_D + 2 * WIN_D)
#define HALO_R (CFAR_TILE_R + 2 * WIN_R)
#define CFAR_THREADS (CFAR_TILE_D * CFAR_TILE_R)
#define HALO_CELLS (HALO_D * HALO_R)
#define HALO_PER_THREAD ((HALO_CELLS + CFAR_THREADS - 1) / CFAR_THREADS)

extern "C" __global__ void __launch_bounds__(CFAR_THREADS)
cfar_peaks(const float *pmap, const double *__restrict__ alpha_by_range,
           const u32 *__restrict__ n_eff_by_range, u32 *state, Candidate *cand, u32 *keys)
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
    // branch would make the loads wait for each other. pmap is range-major
    // (pmap[r][d]): consecutive threads take consecutive Doppler bins.
    float hv[HALO_PER_THREAD];
#pragma unroll
    for (int j = 0; j < HALO_PER_THREAD; ++j) {
        const int i = tid + j * CFAR_THREADS;
        const int hd = i % HALO_D;
        const int rh = r0 - WIN_R + i / HALO_D;
        // N_LOOPS is a power of two: & wraps negative rows too.
        const int dh = (d0 - WIN_D + hd) & (N_LOOPS - 1);
        const bool ok = i < HALO_CELLS && rh >= 0 && rh < N_SAMPLES;
        hv[j] = __ldcg(&pmap[ok ? rh * N_LOOPS + dh : 0]);
    }
#pragma unroll
    for (int j = 0; j < HALO_PER_THREAD; ++j) {
        const int i = tid + j * CFAR_THREADS;
        const int rh = r0 - WIN_R + i / HALO_D;
        if (i < HALO_CELLS) {
            sp[i % HALO_D][i / HALO_D] = (rh >= 0 && rh < N_SAMPLES) ? (double)hv[j] : 0.0;
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
        }
    }
}

// Step 7 over the cap as its own kernel (one block).
extern "C" __global__ void __launch_bounds__(1024)
select_overflow(Candidate *cand, const u32 *state, u32 *keys, u32 *rows)
{
    pdl_wait();
    select_overflow_block(cand, state, keys, rows);
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

// Steps 7 (output order), 8 (the snapshot, its angle spectrum and the
// peak: the first maximum, neighbours cyclic), 9 and 10, with the unit
// conversions of refine.rs: one warp per kept detection s (cand[s]). The
// snapshot z_p = X[d][p][r] is the Doppler bin d of column x[p][r][...]:
// one DFT bin, the warp's lanes taking every 32nd loop (16 columns of
// contiguous loads), summed across the warp. With clutter removal the
// column's mean comes off first and the window goes on, as doppler_power
// does. Then the TDM compensation and (-1)^p (the angle spectrum comes out
// fftshifted) and the ANGLE_N-point zero-padded spectrum as a direct DFT of
// the N_VIRT values (lanes take every 32nd bin). Its place in the output
// is the number of kept detections with a smaller output key (keys are
// unique), so no sort is needed. Results go straight to mapped host memory.
#define REFINE_WARPS 8
#define ANGLE_PER_LANE ((ANGLE_N + 31) / 32)
#define SNAP_PER_LANE ((N_LOOPS + 31) / 32)
#define KEYS_PER_THREAD ((MAX_DET + REFINE_WARPS * 32 - 1) / (REFINE_WARPS * 32))
#define SNAP_CH_PER_WARP ((N_VIRT + REFINE_WARPS - 1) / REFINE_WARPS)

__device__ __forceinline__ float2 warp_sum(float2 v)
{
#pragma unroll
    for (u32 m = 16; m > 0; m >>= 1) {
        v.x += __shfl_xor_sync(0xffffffffu, v.x, m);
        v.y += __shfl_xor_sync(0xffffffffu, v.y, m);
    }
    return v;
}

// One block per kept detection s (blocks past the kept count return at
// once): the block's warps share the snapshot's channels (warp w takes
// p = w, w + REFINE_WARPS, ...; every load issued before the first use),
// then warp 0 does the rest.
extern "C" __global__ void __launch_bounds__(REFINE_WARPS * 32)
refine_output(const u32 *__restrict__ state, const Candidate *__restrict__ cand,
              const u32 *__restrict__ keys, const u32 *x, const float2 *__restrict__ tdm,
              const float2 *__restrict__ tw_doppler, const float2 *__restrict__ tw_angle,
              const float *__restrict__ w_clutter, OutHeader *out_header, GpuDetection *out_det,
              double range_bin_m, double velocity_bin_mps)
{
    __shared__ u32 s_keys[MAX_DET];
    __shared__ float2 s_tw[N_LOOPS];
    __shared__ float2 s_twa[ANGLE_N];
    __shared__ float2 s_z[N_VIRT];
    // The twiddles are constant: read them before the wait, so that after
    // it only the count and the candidate (together), then x, are round
    // trips. (Every block reads them, kept or not: a few KiB a block, from
    // L1 after the SM's first block; ncu counts 0.3 MiB more SM<->L2 a frame.)
    for (u32 k = threadIdx.x; k < N_LOOPS; k += REFINE_WARPS * 32) {
        s_tw[k] = tw_doppler[k];
    }
    for (u32 k = threadIdx.x; k < ANGLE_N; k += REFINE_WARPS * 32) {
        s_twa[k] = tw_angle[k];
    }
    pdl_wait();
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    const u32 s = blockIdx.x;
    // Read with the count, not after it: row s is a kept detection only
    // when s < the count (checked below); cand has N_CELLS rows, which a
    // small geometry may have fewer of than MAX_DET blocks.
    const u32 total = __ldcg(&state[0]);
    const Candidate k = load_candidate(&cand[s < (u32)N_CELLS ? s : 0]);
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
        return; // the whole block
    }
    __syncthreads();
    const u32 d = k.cell / N_SAMPLES;
    const u32 r = k.cell % N_SAMPLES;
    // Warp 0's TDM phasors for bin d (a constant table), loaded here with
    // x rather than after the barrier below: one round trip fewer.
    float2 c_tdm[N_TX];
#pragma unroll
    for (u32 i = 0; i < N_TX; ++i) {
        c_tdm[i] = warp == 0 ? tdm[d * N_TX + i] : make_float2(0.0f, 0.0f);
    }
    // This warp's channels of the snapshot: all loads first.
    float2 v[SNAP_CH_PER_WARP][SNAP_PER_LANE];
#pragma unroll
    for (u32 c = 0; c < SNAP_CH_PER_WARP; ++c) {
        const u32 p = warp + c * REFINE_WARPS;
        const size_t col = ((size_t)(p < N_VIRT ? p : 0) * N_SAMPLES + r) * N_LOOPS;
#pragma unroll
        for (u32 j = 0; j < SNAP_PER_LANE; ++j) {
            const u32 l = lane + 32 * j;
            v[c][j] = l < N_LOOPS ? x_load(x, col + l) : make_float2(0.0f, 0.0f);
        }
    }
    u32 kv[KEYS_PER_THREAD];
#pragma unroll
    for (u32 j = 0; j < KEYS_PER_THREAD; ++j) {
        const u32 i = threadIdx.x + j * REFINE_WARPS * 32;
        kv[j] = __ldcg(&keys[i < MAX_DET ? i : 0]);
    }
#pragma unroll
    for (u32 c = 0; c < SNAP_CH_PER_WARP; ++c) {
        const u32 p = warp + c * REFINE_WARPS;
#if CLUTTER
        double sr = 0.0, si = 0.0;
#pragma unroll
        for (u32 j = 0; j < SNAP_PER_LANE; ++j) {
            sr += v[c][j].x;
            si += v[c][j].y;
        }
#pragma unroll
        for (u32 m = 16; m > 0; m >>= 1) {
            sr += __shfl_xor_sync(0xffffffffu, sr, m);
            si += __shfl_xor_sync(0xffffffffu, si, m);
        }
        const float mr = (float)(sr / N_LOOPS), mi = (float)(si / N_LOOPS);
#pragma unroll
        for (u32 j = 0; j < SNAP_PER_LANE; ++j) {
            const u32 l = lane + 32 * j;
            const float w = l < N_LOOPS ? w_clutter[l] : 0.0f;
            v[c][j] = make_float2((v[c][j].x - mr) * w, (v[c][j].y - mi) * w);
        }
#endif
        float2 acc = make_float2(0.0f, 0.0f);
#pragma unroll
        for (u32 j = 0; j < SNAP_PER_LANE; ++j) {
            const u32 l = lane + 32 * j;
            const float2 t = cmul(v[c][j], s_tw[(l * d) & (N_LOOPS - 1)]);
            acc.x += t.x;
            acc.y += t.y;
        }
        acc = warp_sum(acc);
        if (lane == 0 && p < N_VIRT) {
            s_z[p] = acc;
        }
    }
#pragma unroll
    for (u32 j = 0; j < KEYS_PER_THREAD; ++j) {
        const u32 i = threadIdx.x + j * REFINE_WARPS * 32;
        if (i < MAX_DET) {
            s_keys[i] = kv[j];
        }
    }
    __syncthreads();
    if (warp != 0) {
        return;
    }

    const u32 key = order_key(k.cell);
    u32 below = 0;
    for (u32 i = lane; i < n_out; i += 32) {
        below += s_keys[i] < key ? 1u : 0u;
    }
    const u32 place = __reduce_add_sync(0xffffffffu, below);

    // TDM compensation tdm[d][i] (the CPU's float32 phasor table, rounded
    // like the CPU's complex multiply: no FMA contraction) and (-1)^p.
    float2 z[N_VIRT];
#pragma unroll
    for (u32 p = 0; p < N_VIRT; ++p) {
        const float2 zp = s_z[p];
        const float2 c = c_tdm[p / N_RX];
        float re = __fsub_rn(__fmul_rn(zp.x, c.x), __fmul_rn(zp.y, c.y));
        float im = __fadd_rn(__fmul_rn(zp.x, c.y), __fmul_rn(zp.y, c.x));
        if (p & 1u) {
            re = -re;
            im = -im;
        }
        z[p] = make_float2(re, im);
    }
    // The angle spectrum, zero-padded to ANGLE_N: bins lane, lane + 32, ...
    float2 spec[ANGLE_PER_LANE];
#pragma unroll
    for (u32 j = 0; j < ANGLE_PER_LANE; ++j) {
        const u32 q = lane + 32 * j;
        float2 f = make_float2(0.0f, 0.0f);
        if (q < ANGLE_N) {
#pragma unroll
            for (u32 p = 0; p < N_VIRT; ++p) {
                const float2 t = cmul(z[p], s_twa[(p * q) % ANGLE_N]);
                f.x += t.x;
                f.y += t.y;
            }
        }
        spec[j] = f;
    }

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

// GPU-triggered mode's other way to wait for a chunk (CudaOptions'
// `twait`): one thread polls the slot's completion count until it reaches
// `target` (the cyclic compare of a stream wait's GEQ), sleeping a little
// between reads; the kernels behind it start when it returns. It keeps one
// SM's thread busy for the wait, where a stream wait leaves the GPU idle.
extern "C" __global__ void wait_count(const volatile u32 *completion_count, u64 target)
{
    while ((int)(*completion_count - (u32)target) < 0) {
        __nanosleep(200);
    }
}

// What frame_done writes for the host, per slot (mapped host memory).
struct TriggerRecord {
    u32 ready;       // 1: the slot's detections are in its output buffer
    u32 slot;
    u64 gpu_done_ns; // %globaltimer when they were
    u64 gpu_start_ns; // %globaltimer when the last chunk's work started
    u64 reserved[5];
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

// The frame's power map for the host, Doppler-major (host[d][r] =
// pmap[r][d]; the host's maps are P[d][r]): to a slot's own buffer in
// mapped host memory every frame in GPU-triggered mode (the host publishes
// one now and then; 256 KiB at the default geometry), or to the pipeline's
// buffer for power_map(). Writes go in host order; the reads come from L2.
#define MAP_EXPORT_THREADS 256

extern "C" __global__ void __launch_bounds__(MAP_EXPORT_THREADS)
map_export(const float *pmap, float4 *host_map)
{
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < N_CELLS / 4;
         i += gridDim.x * blockDim.x) {
        const u32 d = (4 * i) / N_SAMPLES;
        const u32 r = (4 * i) % N_SAMPLES;
        host_map[i] = make_float4(__ldcg(&pmap[(size_t)r * N_LOOPS + d]),
                                  __ldcg(&pmap[(size_t)(r + 1) * N_LOOPS + d]),
                                  __ldcg(&pmap[(size_t)(r + 2) * N_LOOPS + d]),
                                  __ldcg(&pmap[(size_t)(r + 3) * N_LOOPS + d]));
    }
}
