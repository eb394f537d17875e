use radar_dsp::scene::*;
use radar_dsp::*;
use std::time::Instant;
fn main() {
    let cfg = ChainConfig::default();
    let scene = Scene {
        noise_rms_lsb: 32.0,
        targets: vec![Target::new(20.0, 3.0, 10.0, -20.0)],
    };
    let g = SceneGenerator::new(&cfg, &scene, 1).unwrap();
    let t0 = Instant::now();
    let frames: Vec<Vec<u8>> = (0..8).map(|i| g.frame(i).0).collect();
    eprintln!("gen {:.1} ms/frame", t0.elapsed().as_secs_f64() * 1e3 / 8.0);
    for threads in [1usize, 2] {
        let mut b = CpuBackend::with_threads(&cfg, threads).unwrap();
        let mut d = Detections::with_capacity(512);
        let mut ts = vec![];
        for it in 0..80 {
            let f = &frames[it % 8];
            let t = Instant::now();
            b.process(
                FrameInput {
                    bytes: f,
                    slot: None,
                },
                &mut d,
            )
            .unwrap();
            ts.push(t.elapsed().as_secs_f64() * 1e3);
        }
        ts.sort_by(f64::total_cmp);
        eprintln!(
            "threads {threads}: p50 {:.2} ms min {:.2} max {:.2}",
            ts[40], ts[0], ts[79]
        );
    }
    let mut cf = radar_dsp::cfar::CfarEngine::new(&cfg).unwrap();
    let mut b = CpuBackend::with_threads(&cfg, 1).unwrap();
    let mut d = Detections::with_capacity(512);
    b.process(
        FrameInput {
            bytes: &frames[0],
            slot: None,
        },
        &mut d,
    )
    .unwrap();
    let p = b.power().to_vec();
    let mut peaks = Vec::with_capacity(65536);
    let t = Instant::now();
    for _ in 0..50 {
        cf.run(&p, &mut peaks);
    }
    eprintln!("cfar {:.2} ms", t.elapsed().as_secs_f64() * 1e3 / 50.0);
}
