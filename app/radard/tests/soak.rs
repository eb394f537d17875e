//! Soak: radard on the simulator for at least a million frames at an
//! accelerated frame period (small geometry, 40 us frames), the simulator
//! injecting drops, short frames, CRC errors and a stall, the chain failing
//! on some frames, a rotating jsonl sink and a udp sink on. The run must end
//! cleanly (no panic, exit 0 or 3), the ledger must close (produced =
//! processed + dropped by reason) with every injected fault accounted for,
//! and the resident memory at the end must not exceed that after warm-up by
//! more than 1 MiB. Meant for a release build (`cargo test --release`); the frame
//! count can be lowered with RADARD_SOAK_FRAMES for a quick look.

mod common;

use common::*;

#[test]
fn a_million_frames_with_faults_the_ledger_closes_and_memory_stays_flat() {
    let frames: u64 = std::env::var("RADARD_SOAK_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = scratch("soak");
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
    udp.set_nonblocking(true).expect("nonblocking");
    let port = udp.local_addr().expect("addr").port();
    let jsonl = dir.join("detections.jsonl");
    let stall_at = frames / 3;
    let cfg = config(
        &dir,
        &format!(
            r#"
[source]
chunk_period_us = 10
event_timeout_ms = 300
scene_frames = 4
[backend]
kind = "cpu"
[output]
print_every = 0
status_interval_ms = 5000
[loop]
power_map_every = 1000
[health]
state_file = "{health}"
[simulator]
drop_every = 997
short_every = 1009
crc_error_every = 1013
stall_at = {stall_at}
stall_ms = 1200
backend_error_every = 1019
[[sink]]
kind = "jsonl"
path = "{jsonl}"
rotate_bytes = 4194304
keep = 2
[[sink]]
kind = "udp"
address = "127.0.0.1:{port}"
{SMALL_GEOMETRY}"#,
            health = dir.join("health").display(),
            jsonl = jsonl.display()
        ),
    );
    // Drain the udp port meanwhile, so the datagrams are really received.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let receiver = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut n = 0u64;
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            match udp.recv(&mut buf) {
                Ok(_) => n += 1,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
        n
    });
    let stats = dir.join("stats.json");
    let t0 = std::time::Instant::now();
    let out = radard()
        .args(["--no-rt", "--frames", &frames.to_string(), "--config"])
        .arg(&cfg)
        .arg("--stats-json")
        .arg(&stats)
        .output()
        .expect("run radard");
    let elapsed = t0.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let datagrams = receiver.join().expect("receiver");
    let text = show(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{text}");
    // 3: ran to the end, with faults (the injected ones) in the count.
    assert!(matches!(out.status.code(), Some(0) | Some(3)), "{text}");
    let s = summary(&stats);
    println!(
        "soak: {} frame events in {:.1} s ({:.0}/s)",
        frames,
        elapsed.as_secs_f64(),
        frames as f64 / elapsed.as_secs_f64()
    );
    check_ledger(&s);
    let d = &s["dropped"];
    let produced = u(&s["frames_produced"]);
    assert!(produced >= frames, "{text}");
    // Every injected fault shows, under its reason.
    assert!(
        u(&d["at_source"]) >= produced / 997 - 1,
        "drops at source: {text}"
    );
    assert!(u(&d["short"]) >= frames / 1009 / 2, "short frames: {text}");
    assert!(u(&d["crc"]) >= frames / 1013 / 2, "CRC errors: {text}");
    assert!(
        u(&d["error"]) >= frames / 1019 / 2,
        "backend errors: {text}"
    );
    assert!(
        u(&s["source_timeouts"]) >= 2,
        "the stall shows as timeouts: {text}"
    );
    assert_eq!(u(&s["sequence_errors"]), 0, "{text}");
    let counters = &s["source_counters"];
    println!(
        "simulator: frames {} drops_fault {} drops_no_slot {} short {} crc_errors {}",
        counters["frames"],
        counters["drops_fault"],
        counters["drops_no_slot"],
        counters["short_frames"],
        counters["crc_errors"]
    );
    // Sinks: every processed frame went to both, or was counted.
    let processed = u(&s["frames"]);
    for k in s["sinks"].as_array().expect("sinks") {
        println!(
            "sink {}: sent {} queue_full {} errors {}",
            k["name"], k["sent"], k["queue_full"], k["errors"]
        );
        assert_eq!(
            u(&k["sent"]) + u(&k["queue_full"]) + u(&k["errors"]),
            processed,
            "{k}"
        );
    }
    println!("udp: {datagrams} datagrams received");
    assert!(jsonl.exists(), "the jsonl sink's file");
    assert!(!dir.join("detections.jsonl.3").exists(), "keep = 2");
    // Memory: flat after warm-up.
    let warm = u(&s["rss_warm_kib"]);
    let end = u(&s["rss_end_kib"]);
    println!(
        "rss: {warm} KiB after warm-up, {end} KiB at the end ({:+} KiB); loop CPU {} us/frame",
        end as i64 - warm as i64,
        s["loop_cpu_us_per_frame"]
    );
    // Growth is what a leak would show. Resident memory may also shrink
    // (pages handed back, or under qemu-user the emulator's own memory):
    // that is no leak.
    assert!(
        end <= warm + 1024,
        "resident memory grew by more than 1 MiB: {warm} -> {end} KiB"
    );
}
