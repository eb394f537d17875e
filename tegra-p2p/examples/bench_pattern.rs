//! Benchmark of the per-frame checks the QEMU suites run on every frame:
//! test-pattern verification and CRC-32 of a 4 MiB and a 16 KiB frame, and
//! the simulator's consumer-side cost of `next_frame` + `release` at full speed.
//! Prints p50/p99/p99.9/max and throughput; writes JSON with `--json PATH`.
//!
//!     cargo run --release -p tegra-p2p --example bench_pattern -- --json target/bench-pattern.json

use std::time::{Duration, Instant};

use radar_stats::Percentiles;
use tegra_p2p::*;

struct Stats {
    name: String,
    bytes: usize,
    /// Nearest-rank figures (radar_stats, the project's one rule) in ns.
    pct: Percentiles<u64>,
    mean_ns: f64,
}

impl Stats {
    fn json(&self) -> String {
        let p = &self.pct;
        format!(
            "{{\"name\":\"{}\",\"bytes\":{},\"iterations\":{},\"p50_ns\":{},\"p99_ns\":{},\"p999_ns\":{},\"max_ns\":{},\"throughput_gib_s\":{:.3}}}",
            self.name,
            self.bytes,
            p.samples,
            p.p50,
            p.p99,
            p.p999,
            p.max,
            self.bytes as f64 / self.mean_ns / 1.073_741_824
        )
    }
    fn print(&self) {
        let p = &self.pct;
        println!(
            "{:<28} p50 {:>9} ns  p99 {:>9} ns  p99.9 {:>9} ns  max {:>9} ns  {:>7.2} GiB/s",
            self.name,
            p.p50,
            p.p99,
            p.p999,
            p.max,
            self.bytes as f64 / self.mean_ns / 1.073_741_824
        );
    }
}

fn time(name: &str, bytes: usize, iters: usize, mut f: impl FnMut(usize)) -> Stats {
    for i in 0..iters.min(10) {
        f(i);
    }
    let mut ns: Vec<u64> = (0..iters)
        .map(|i| {
            let t = Instant::now();
            f(i);
            t.elapsed().as_nanos() as u64
        })
        .collect();
    ns.sort_unstable();
    let mean_ns = ns.iter().sum::<u64>() as f64 / ns.len().max(1) as f64;
    Stats {
        name: name.into(),
        bytes,
        pct: Percentiles::of_sorted(&ns).unwrap_or_default(),
        mean_ns,
    }
}

fn main() {
    let json = std::env::args().skip_while(|a| a != "--json").nth(1);
    let mut all = Vec::new();
    for (label, frame, chunk, iters) in [
        ("4MiB", 4usize << 20, 256usize << 10, 300),
        ("16KiB", 16 << 10, 4 << 10, 20000),
    ] {
        let mut buf = vec![0u8; frame];
        pattern::fill_frame(&mut buf, 12345, chunk);
        all.push(time(
            &format!("verify_test_pattern {label}"),
            frame,
            iters,
            |_| {
                verify_test_pattern(std::hint::black_box(&buf), 12345, chunk).expect("pattern");
            },
        ));
        all.push(time(&format!("crc32 {label}"), frame, iters, |_| {
            std::hint::black_box(crc32(std::hint::black_box(&buf)));
        }));
        let mut out = vec![0u8; frame];
        all.push(time(
            &format!("fill (simulator) {label}"),
            frame,
            iters,
            |i| {
                pattern::fill_frame(std::hint::black_box(&mut out), i as u64, chunk);
            },
        ));
    }
    // Simulator consumer side: wait + release, producer unpaced.
    let ring =
        RingMemory::new(&RingConfig::new(4, 16 << 10).with_memory(MemoryKind::Host)).expect("ring");
    let mut src = SimSource::new(ring, SimConfig::with_chunk_bytes(4 << 10)).expect("sim");
    src.start(&StartParams::test_pattern().with_chunk_period(Duration::ZERO))
        .expect("start");
    all.push(time(
        "sim next_frame+release 16KiB",
        16 << 10,
        20000,
        |_| {
            let f = src.next_frame(None).expect("frame");
            f.release().expect("release");
        },
    ));
    for s in &all {
        s.print();
    }
    if let Some(path) = json {
        let body = format!(
            "[{}]\n",
            all.iter().map(Stats::json).collect::<Vec<_>>().join(",\n")
        );
        std::fs::write(&path, body).expect("write json");
        println!("wrote {path}");
    }
}
