//! CUDA ring memory on a real GPU: mapped host memory with a device pointer
//! per slot, written by the simulator, read back by the GPU through those
//! device pointers. Prints "skipped: no CUDA" where there is none.
#![cfg(feature = "cuda")]

use std::time::Duration;

use cudarc::driver::sys;
use tegra_p2p::*;

fn cuda_or_skip() -> bool {
    if !tegra_p2p::cuda::cuda_library_present() {
        println!("skipped: no CUDA");
        return false;
    }
    if let Err(e) = tegra_p2p::cuda::primary_context() {
        println!("skipped: no CUDA ({e})");
        return false;
    }
    true
}

#[test]
fn cuda_ring_slots_are_device_visible() {
    if !cuda_or_skip() {
        return;
    }
    let slot = 1 << 20;
    let ring = RingMemory::new(&RingConfig::new(4, slot).with_memory(MemoryKind::Cuda))
        .expect("CUDA ring");
    assert!(ring.is_cuda() && ring.is_locked());
    assert_eq!(ring.base() as usize % 4096, 0);
    println!("CUDA ring warnings: {:?}", ring.warnings());
    let d: Vec<u64> = (0..4).map(|s| ring.slot_device_ptr(s).unwrap()).collect();
    for s in 1..4 {
        assert_eq!(
            d[s] - d[s - 1],
            slot as u64,
            "device pointers follow the slots"
        );
    }
    let ctx = tegra_p2p::cuda::primary_context().unwrap();
    let mut src = SimSource::new(ring, SimConfig::with_chunk_bytes(64 << 10)).unwrap();
    src.start(&StartParams::test_pattern().with_chunk_period(Duration::from_micros(20)))
        .unwrap();
    let mut back = vec![0u8; slot];
    for _ in 0..20 {
        let f = src.next_frame(None).unwrap();
        let dev = f.device_ptr().expect("device pointer");
        ctx.bind_to_thread().unwrap();
        // SAFETY: copies slot bytes through the frame's device pointer into a
        // host buffer of the same size; the slot is owned by us while `f` lives.
        unsafe { sys::cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dev, slot) }
            .result()
            .expect("cuMemcpyDtoH");
        assert!(back == f.data(), "GPU sees the bytes the FPGA wrote");
        verify_test_pattern(&back, f.sequence(), 64 << 10).unwrap();
    }
    println!("CUDA ring: 20 frames read back through device pointers");
}
