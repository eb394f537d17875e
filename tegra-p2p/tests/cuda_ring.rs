//! CUDA ring memory on a real GPU: mapped host memory with a device pointer
//! per slot, written by the simulator, read back by the GPU through those
//! device pointers. Prints "skipped: no CUDA" where there is none.
#![cfg(feature = "cuda")]

use std::time::Duration;

use cudarc::driver::result;
use tegra_p2p::*;

fn cuda_or_skip() -> bool {
    if let Err(e) = cuda_mem::primary_context() {
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
    let ctx = cuda_mem::primary_context().unwrap();
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
        unsafe { result::memcpy_dtoh_sync(&mut back, dev) }.expect("cuMemcpyDtoH");
        assert!(back == f.data(), "GPU sees the bytes the FPGA wrote");
        verify_test_pattern(&back, f.sequence(), 64 << 10).unwrap();
    }
    println!("CUDA ring: 20 frames read back through device pointers");
}
