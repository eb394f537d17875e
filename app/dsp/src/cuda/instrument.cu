// Kernels of the instrumented runs only (the `instrument` feature): NVRTC
// compiles this after kernels.cu, whose types and PDL helpers it uses.

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

// An empty kernel (one warp), to measure the kernel-to-kernel gap of a graph.
extern "C" __global__ void empty_kernel(u64 unused)
{
    pdl_wait();
    pdl_release_dependents();
}
