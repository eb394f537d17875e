//! Deterministic fuzz harness for the diagnostics server's decoder: the
//! whole input path (link decoder, COBS, postcard-rpc header, request
//! bodies, the text console) fed hostile inputs, with a status board that
//! has frames on it. Inputs come from a seeded generator (random bytes,
//! frames with valid headers and mutated bodies, broken COBS, oversize and
//! half frames, console lines), so a failure names the seed and input
//! number that reproduce it.
//!
//! `DIAG_FUZZ_INPUTS` (default 300000) sets the count, `DIAG_FUZZ_SEED` the
//! seed. The long run (10,000,000 inputs):
//!
//! ```text
//! DIAG_FUZZ_INPUTS=10000000 nice cargo test --release -p radard --test diag_fuzz -- --nocapture
//! ```

use std::sync::Arc;
use std::time::Instant;

use diag_proto::link::MAX_LINE;
use diag_proto::*;
use postcard_rpc::header::{VarHeader, VarKey, VarSeq};
use radar_dsp::ChainConfig;
use radard::diag::Server;
use radard::diag::answers::UnitInfo;
use radard::diag::params::Params;
use radard::status::{EventKind, StatusBoard};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// Every request key the unit knows, and a few it does not.
fn keys() -> Vec<postcard_rpc::Key> {
    vec![
        PingEndpoint::REQ_KEY,
        GetAllSchemasEndpoint::REQ_KEY,
        VersionEndpoint::REQ_KEY,
        IdentityEndpoint::REQ_KEY,
        StatusEndpoint::REQ_KEY,
        StatsEndpoint::REQ_KEY,
        LogEndpoint::REQ_KEY,
        ParamListEndpoint::REQ_KEY,
        ParamGetEndpoint::REQ_KEY,
        ParamSetEndpoint::REQ_KEY,
        SnapshotInfoEndpoint::REQ_KEY,
        SnapshotPieceEndpoint::REQ_KEY,
        SubscribeEndpoint::REQ_KEY,
        StatusTopic::TOPIC_KEY,
        ERROR_KEY,
    ]
}

/// Valid bodies of the requests, to be mutated.
fn bodies() -> Vec<Vec<u8>> {
    let enc = |v: &dyn erased::Enc| v.enc();
    let names = [
        "cfar.pfa",
        "cfar.train_range",
        "sink.console",
        "nonsense",
        "",
    ];
    let mut out: Vec<Vec<u8>> = vec![
        vec![],
        enc(&42u32),
        enc(&1u16),
        enc(&LogRequest { from: 0, max: 8 }),
        enc(&LogRequest {
            from: u64::MAX,
            max: 255,
        }),
        enc(&ParamListRequest { first: 0 }),
        enc(&ParamListRequest { first: 250 }),
        enc(&PieceRequest {
            generation: 0,
            index: 0,
        }),
        enc(&PieceRequest {
            generation: 3,
            index: u16::MAX,
        }),
        enc(&Subscribe {
            status_period_ms: 0,
            telemetry_period_ms: 1,
        }),
        enc(&Subscribe {
            status_period_ms: u32::MAX,
            telemetry_period_ms: 100,
        }),
    ];
    for n in names {
        out.push(enc(&ParamName::truncate_from(n)));
        for value in [
            ParamValue::Real(1e-3),
            ParamValue::Real(f64::NAN),
            ParamValue::Real(f64::INFINITY),
            ParamValue::Real(-0.0),
            ParamValue::Real(5e-324),
            ParamValue::Int(i64::MIN),
            ParamValue::Int(3),
            ParamValue::Bool(true),
        ] {
            out.push(enc(&SetParam {
                name: ParamName::truncate_from(n),
                value,
            }));
        }
    }
    out
}

mod erased {
    pub trait Enc {
        fn enc(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Enc for T {
        fn enc(&self) -> Vec<u8> {
            postcard::to_allocvec(self).expect("encode a sample body")
        }
    }
}

const WORDS: [&str; 14] = [
    "help",
    "status",
    "stats",
    "log",
    "get",
    "set",
    "cfar.pfa",
    "sink.console",
    "1e-3",
    "-1",
    "true",
    "nan",
    "99999999999999999999",
    "\u{7f}",
];

fn cobs(raw: &[u8]) -> Vec<u8> {
    let mut wire = vec![0u8; raw.len() + raw.len() / 254 + 2];
    let n = diag_proto::cobs::encode(raw, &mut wire).expect("COBS room");
    wire.truncate(n);
    wire
}

/// One hostile input.
fn input(rng: &mut Rng, keys: &[postcard_rpc::Key], bodies: &[Vec<u8>]) -> Vec<u8> {
    let mut v = Vec::new();
    match rng.below(8) {
        // Random bytes, any value.
        0 => v.extend((0..rng.below(300)).map(|_| rng.byte())),
        // Random bytes without 0 (one long frame or line), sometimes oversize.
        1 => {
            let n = if rng.below(4) == 0 {
                MAX_WIRE_FRAME as u64 + rng.below(600)
            } else {
                rng.below(200)
            };
            v.extend((0..n).map(|_| rng.byte() | 1));
            if rng.below(2) == 0 {
                v.push(0);
            }
        }
        // A frame with a valid header and a (mutated) body.
        2..=4 => {
            let key = VarKey::Key8(keys[rng.below(keys.len() as u64) as usize]);
            let mut key = key;
            match rng.below(6) {
                0 => key.shrink_to(postcard_rpc::header::VarKeyKind::Key1),
                1 => key.shrink_to(postcard_rpc::header::VarKeyKind::Key2),
                2 => key.shrink_to(postcard_rpc::header::VarKeyKind::Key4),
                _ => {}
            }
            let seq_no = match rng.below(3) {
                0 => VarSeq::Seq1(rng.byte()),
                1 => VarSeq::Seq2(rng.next() as u16),
                _ => VarSeq::Seq4(rng.next() as u32),
            };
            let mut raw = [0u8; 16];
            let hdr = VarHeader { key, seq_no };
            let (used, _) = hdr.write_to_slice(&mut raw).expect("header fits");
            let mut frame = used.to_vec();
            let mut b = bodies[rng.below(bodies.len() as u64) as usize].clone();
            for _ in 0..rng.below(4) {
                match rng.below(4) {
                    0 if !b.is_empty() => {
                        let i = rng.below(b.len() as u64) as usize;
                        b[i] = rng.byte();
                    }
                    1 if !b.is_empty() => {
                        b.truncate(rng.below(b.len() as u64) as usize);
                    }
                    2 => b.push(rng.byte()),
                    _ => b.extend((0..rng.below(1100)).map(|_| rng.byte())),
                }
            }
            frame.extend_from_slice(&b);
            let mut wire = cobs(&frame);
            match rng.below(10) {
                // A half frame: cut, no 0 (the next input ends it).
                0 => wire.truncate(rng.below(wire.len() as u64) as usize),
                // Broken COBS: a code byte pointing past the end.
                1 if wire.len() > 2 => {
                    let i = rng.below(wire.len() as u64 - 1) as usize;
                    wire[i] = 0xFF;
                }
                _ => {}
            }
            v.extend_from_slice(&wire);
        }
        // A console line: words, sometimes too long, sometimes with control bytes.
        5 | 6 => {
            let mut line = String::new();
            for _ in 0..rng.below(5) {
                line.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
                line.push(' ');
            }
            if rng.below(8) == 0 {
                line.extend((0..MAX_LINE + rng.below(50) as usize).map(|_| 'x'));
            }
            let mut b = line.into_bytes();
            if rng.below(4) == 0 && !b.is_empty() {
                let i = rng.below(b.len() as u64) as usize;
                b[i] = [0x08, 0x7f, 0x1b, 0x03, 0x80, 0xff][rng.below(6) as usize];
            }
            b.push([b'\r', b'\n'][rng.below(2) as usize]);
            if rng.below(3) == 0 {
                b.push(b'\n');
            }
            v.extend_from_slice(&b);
        }
        // A lone byte (a person's first key), or 0s.
        _ => {
            v.extend((0..rng.below(3) + 1).map(|_| [0u8, b'h', 0xE0, b'\r'][rng.below(4) as usize]))
        }
    }
    v
}

fn board_with_frames() -> Arc<StatusBoard> {
    let board = Arc::new(StatusBoard::new());
    board.post(EventKind::Started, 0, 0);
    board.post(EventKind::DeadlineMiss, 7, 9_000);
    board.post(EventKind::ParameterChange, 1, 3);
    board
}

fn server(board: &Arc<StatusBoard>) -> Server<'static> {
    let info = UnitInfo {
        kmod: "none (simulator)".into(),
        fpga: "simulator".into(),
        boot_slot: "A".into(),
        source: "simulator".into(),
        backend: "cpu".into(),
        frame_period_ns: Some(8_000_000),
        sink_names: vec!["jsonl".into()],
        time_clock: None,
    };
    Server::new(
        board.clone(),
        info,
        Params::new(ChainConfig::default(), true),
        None,
        None,
    )
}

/// After any input and a 0, a ping is answered with its value.
fn ping_answered(server: &mut Server<'_>, value: u32, out: &mut Vec<u8>) -> bool {
    out.clear();
    server.on_bytes(&[0], out);
    out.clear();
    let mut wire = [0u8; MAX_WIRE_FRAME];
    let n = rpc::encode_frame(
        PingEndpoint::REQ_KEY,
        VarSeq::Seq4(value),
        &VarKey::Key8(PingEndpoint::REQ_KEY),
        &value,
        &mut wire,
    )
    .expect("ping frame");
    server.on_bytes(&wire[..n], out);
    let Some(end) = out.iter().position(|&b| b == 0) else {
        return false;
    };
    let mut frame = out[..end].to_vec();
    let Some(m) = diag_proto::cobs::decode_in_place(&mut frame) else {
        return false;
    };
    match rpc::split_frame(&frame[..m]) {
        Some((hdr, body)) => {
            hdr.seq_no == VarSeq::Seq4(value)
                && hdr.key == VarKey::Key8(PingEndpoint::RESP_KEY)
                && postcard::from_bytes::<u32>(body).ok() == Some(value)
        }
        None => false,
    }
}

#[test]
fn decoder_survives_hostile_inputs() {
    let count: u64 = std::env::var("DIAG_FUZZ_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    let seed: u64 = std::env::var("DIAG_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_d1a6);
    let keys = keys();
    let bodies = bodies();
    let board = board_with_frames();
    let mut rng = Rng(seed | 1);
    let mut srv = server(&board);
    let mut out = Vec::with_capacity(1 << 16);
    let mut bytes_in = 0u64;
    let mut bytes_out = 0u64;
    let t0 = Instant::now();
    for i in 0..count {
        // A fresh server now and then: state from earlier inputs carries
        // within a run of inputs, as it does on a real link.
        if i % 50_000 == 0 && i > 0 {
            srv = server(&board);
        }
        let v = input(&mut rng, &keys, &bodies);
        bytes_in += v.len() as u64;
        out.clear();
        let feed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // Split as a serial read would: pieces of random size.
            let mut rest = &v[..];
            while !rest.is_empty() {
                let n = (rng.below(64) as usize + 1).min(rest.len());
                srv.on_bytes(&rest[..n], &mut out);
                rest = &rest[n..];
            }
            if rng.below(16) == 0 {
                srv.on_idle(&mut out);
            }
        }));
        assert!(
            feed.is_ok(),
            "the server panicked on input {i} of seed {seed:#x}: {v:02x?}"
        );
        // Answers are bounded: a frame or a console page per request.
        assert!(
            out.len() <= 64 * 1024,
            "input {i} of seed {seed:#x} made {} bytes of answers",
            out.len()
        );
        bytes_out += out.len() as u64;
        if i % 1000 == 999 {
            assert!(
                ping_answered(&mut srv, i as u32, &mut out),
                "no ping answer after input {i} of seed {seed:#x}: {v:02x?}"
            );
        }
    }
    let counters = srv.counters();
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "diag fuzz: {count} inputs (seed {seed:#x}), {bytes_in} bytes in, {bytes_out} bytes out, \
         {:.0} inputs/s, no panic; last server: {} frames, {} bad frames, {} lines",
        count as f64 / secs,
        counters.frames,
        counters.bad_frames,
        counters.lines
    );
    assert!(counters.frames > 0 && counters.bad_frames > 0 && counters.lines > 0);
}
