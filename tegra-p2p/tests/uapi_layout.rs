//! The Rust mirror of `fpga_p2p.h` against the header itself: a C probe is
//! generated from the header's own struct and `#define` lists and compiled
//! with the C compiler of the architecture the test was built for (the
//! machine's `cc`, or `CC_aarch64_unknown_linux_gnu` for the aarch64 tests
//! under qemu-user); every struct size, field offset and size, constant and
//! ioctl number must match the Rust side (the compiler checks them with
//! `_Static_assert`), and every field and constant of the header must have a
//! Rust counterpart.

use std::collections::{BTreeMap, BTreeSet};
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use tegra_p2p::uapi::*;

/// The C compiler for the architecture this test runs on, as cc-rs looks it
/// up: `CC_<target>` (.cargo/config.toml sets it for aarch64), then `CC`,
/// then `cc`; and where it came from.
fn c_compiler() -> (String, String) {
    let var = cc_variable();
    for name in [var.as_str(), "CC"] {
        if let Ok(cc) = std::env::var(name) {
            if !cc.trim().is_empty() {
                return (cc, name.to_string());
            }
        }
    }
    ("cc".into(), "the default".into())
}

/// cc-rs's name for the C compiler of this test's target: `CC_<target>`.
fn cc_variable() -> String {
    let env = if cfg!(target_env = "musl") {
        "musl"
    } else {
        "gnu"
    };
    format!("CC_{}_unknown_linux_{env}", std::env::consts::ARCH)
}

/// The C compiler's macro for this test's architecture, and the architecture.
fn arch_macro() -> (&'static str, &'static str) {
    match std::env::consts::ARCH {
        "x86_64" => ("__x86_64__", "x86_64"),
        "aarch64" => ("__aarch64__", "aarch64"),
        other => panic!("no C macro known for architecture {other}"),
    }
}

fn header_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../kmod/include/uapi/fpga_p2p.h")
}

fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// (struct, C field name, offset, size) for every field the Rust side has.
macro_rules! fields {
    ($( $s:ident { $( $cf:ident => $rf:ident ),* $(,)? } )*) => {{
        let mut v: Vec<(String, String, usize, usize)> = Vec::new();
        $( $(
            v.push((
                stringify!($s).to_string(),
                stringify!($cf).to_string(),
                offset_of!($s, $rf),
                field_size(|x: &$s| &x.$rf),
            ));
        )* )*
        v
    }};
}

fn rust_fields() -> Vec<(String, String, usize, usize)> {
    fields! {
        fpga_p2p_info { uapi_version => uapi_version, caps => caps, hw_id => hw_id,
            hw_version => hw_version, max_slots => max_slots,
            max_chunks_per_frame => max_chunks_per_frame, max_slot_bytes => max_slot_bytes,
            slot_align => slot_align, event_bytes => event_bytes,
            max_playback_frames => max_playback_frames, reserved0 => reserved0,
            reserved => reserved }
        fpga_p2p_ring { addr => addr, slot_bytes => slot_bytes, nr_slots => nr_slots,
            direction => direction, chunk_bytes => chunk_bytes, handle => handle,
            flags => flags, reserved0 => reserved0, reserved => reserved }
        fpga_p2p_completion { chunks => chunks, magic => magic, sequence => sequence,
            chunk => chunk, reserved0 => reserved0, timestamp_ns => timestamp_ns }
        fpga_p2p_start { handle => handle, source => source, chunk_period_ns => chunk_period_ns,
            flags => flags, playback_frames => playback_frames,
            event_timeout_ms => event_timeout_ms, reserved => reserved }
        fpga_p2p_release { handle => handle, slot => slot }
        fpga_p2p_tx { handle => handle, slot => slot, bytes => bytes, target => target,
            index => index, reserved0 => reserved0, cookie => cookie }
        fpga_p2p_event { type => type_, handle => handle, slot => slot, flags => flags,
            sequence => sequence, timestamp_ns => timestamp_ns, bytes => bytes,
            crc32 => crc32, dropped => dropped, chunk => chunk, cookie => cookie,
            host_ns => host_ns }
        fpga_p2p_wait { release_handle => release_handle, release_slot => release_slot,
            timeout_ms => timeout_ms, reserved0 => reserved0, event => event }
        fpga_p2p_counters { frames => frames, chunks => chunks, drops_no_slot => drops_no_slot,
            drops_fault => drops_fault, short_frames => short_frames, crc_errors => crc_errors,
            desc_errors => desc_errors, irqs => irqs, revocations => revocations,
            tx_submitted => tx_submitted, tx_completed => tx_completed,
            event_overflows => event_overflows, dma_timeouts => dma_timeouts,
            lost_irqs => lost_irqs, quarantined => quarantined, reserved => reserved }
    }
}

fn rust_constants() -> BTreeMap<&'static str, u64> {
    let c: &[(&str, u64)] = &[
        ("FPGA_P2P_UAPI_VERSION", FPGA_P2P_UAPI_VERSION.into()),
        ("FPGA_P2P_SLOT_ALIGN", FPGA_P2P_SLOT_ALIGN.into()),
        ("FPGA_P2P_CAP_CAPTURE", FPGA_P2P_CAP_CAPTURE.into()),
        ("FPGA_P2P_CAP_TRANSMIT", FPGA_P2P_CAP_TRANSMIT.into()),
        (
            "FPGA_P2P_CAP_TEST_PATTERN",
            FPGA_P2P_CAP_TEST_PATTERN.into(),
        ),
        ("FPGA_P2P_CAP_PLAYBACK", FPGA_P2P_CAP_PLAYBACK.into()),
        (
            "FPGA_P2P_CAP_CHUNK_EVENTS",
            FPGA_P2P_CAP_CHUNK_EVENTS.into(),
        ),
        ("FPGA_P2P_CAP_COMPLETION", FPGA_P2P_CAP_COMPLETION.into()),
        ("FPGA_P2P_RING_COMPLETION", FPGA_P2P_RING_COMPLETION.into()),
        ("FPGA_P2P_STATUS_BYTES", FPGA_P2P_STATUS_BYTES.into()),
        (
            "FPGA_P2P_COMPLETION_MAGIC",
            FPGA_P2P_COMPLETION_MAGIC.into(),
        ),
        ("FPGA_P2P_DIR_C2H", FPGA_P2P_DIR_C2H.into()),
        ("FPGA_P2P_DIR_H2C", FPGA_P2P_DIR_H2C.into()),
        ("FPGA_P2P_SRC_ADC", FPGA_P2P_SRC_ADC.into()),
        (
            "FPGA_P2P_SRC_TEST_PATTERN",
            FPGA_P2P_SRC_TEST_PATTERN.into(),
        ),
        ("FPGA_P2P_SRC_PLAYBACK", FPGA_P2P_SRC_PLAYBACK.into()),
        (
            "FPGA_P2P_START_CHUNK_EVENTS",
            FPGA_P2P_START_CHUNK_EVENTS.into(),
        ),
        ("FPGA_P2P_TX_DETECTIONS", FPGA_P2P_TX_DETECTIONS.into()),
        ("FPGA_P2P_TX_WAVEFORM", FPGA_P2P_TX_WAVEFORM.into()),
        ("FPGA_P2P_TX_PLAYBACK", FPGA_P2P_TX_PLAYBACK.into()),
        ("FPGA_P2P_EV_FRAME", FPGA_P2P_EV_FRAME.into()),
        ("FPGA_P2P_EV_CHUNK", FPGA_P2P_EV_CHUNK.into()),
        ("FPGA_P2P_EV_TX_DONE", FPGA_P2P_EV_TX_DONE.into()),
        ("FPGA_P2P_EV_REVOKED", FPGA_P2P_EV_REVOKED.into()),
        ("FPGA_P2P_EV_FAULT", FPGA_P2P_EV_FAULT.into()),
        ("FPGA_P2P_EV_OVERFLOW", FPGA_P2P_EV_OVERFLOW.into()),
        ("FPGA_P2P_EVF_SHORT", FPGA_P2P_EVF_SHORT.into()),
        (
            "FPGA_P2P_EVF_CRC_MISMATCH",
            FPGA_P2P_EVF_CRC_MISMATCH.into(),
        ),
        ("FPGA_P2P_EVF_LINK_ERROR", FPGA_P2P_EVF_LINK_ERROR.into()),
        ("FPGA_P2P_EVF_TX_ERROR", FPGA_P2P_EVF_TX_ERROR.into()),
        ("FPGA_P2P_FAULT_ENGINE", FPGA_P2P_FAULT_ENGINE.into()),
        ("FPGA_P2P_FAULT_STREAM", FPGA_P2P_FAULT_STREAM.into()),
        (
            "FPGA_P2P_FAULT_DMA_TIMEOUT",
            FPGA_P2P_FAULT_DMA_TIMEOUT.into(),
        ),
        (
            "FPGA_P2P_FAULT_DEVICE_GONE",
            FPGA_P2P_FAULT_DEVICE_GONE.into(),
        ),
        ("FPGA_P2P_NO_SLOT", FPGA_P2P_NO_SLOT.into()),
        ("FPGA_P2P_IOC_MAGIC", FPGA_P2P_IOC_MAGIC.into()),
        ("FPGA_P2P_IOC_INFO", ioc::INFO.into()),
        ("FPGA_P2P_IOC_REGISTER", ioc::REGISTER.into()),
        ("FPGA_P2P_IOC_UNREGISTER", ioc::UNREGISTER.into()),
        ("FPGA_P2P_IOC_START", ioc::START.into()),
        ("FPGA_P2P_IOC_STOP", ioc::STOP.into()),
        ("FPGA_P2P_IOC_RELEASE", ioc::RELEASE.into()),
        ("FPGA_P2P_IOC_COUNTERS", ioc::COUNTERS.into()),
        ("FPGA_P2P_IOC_TX_SUBMIT", ioc::TX_SUBMIT.into()),
        ("FPGA_P2P_IOC_WAIT", ioc::WAIT.into()),
    ];
    c.iter().copied().collect()
}

/// Struct name -> field names, in order, as the header declares them.
fn header_structs(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut cur: Option<(String, Vec<String>)> = None;
    for raw in text.lines() {
        let line = raw.split("/*").next().unwrap_or("").trim();
        if let Some((name, fields)) = cur.as_mut() {
            if line.starts_with("};") {
                out.insert(name.clone(), std::mem::take(fields));
                cur = None;
            } else if let Some(decl) = line.strip_suffix(';') {
                let last = decl.split_whitespace().last().expect("field declaration");
                let field = last.split('[').next().unwrap().to_string();
                fields.push(field);
            }
        } else if let Some(name) = line
            .strip_prefix("struct ")
            .and_then(|rest| rest.strip_suffix('{'))
        {
            cur = Some((name.trim().to_string(), Vec::new()));
        }
    }
    out
}

fn header_defines(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("FPGA_P2P_") && !n.starts_with("_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn rust_mirror_matches_the_c_header() {
    let header = header_path();
    let text = std::fs::read_to_string(&header).expect("read fpga_p2p.h");
    let structs = header_structs(&text);
    let defines = header_defines(&text);
    assert!(structs.len() >= 8, "parsed too few structs: {structs:?}");

    // Every field of the header must exist on the Rust side, in the same order.
    let rf = rust_fields();
    for (s, cfields) in &structs {
        let rnames: Vec<&str> = rf
            .iter()
            .filter(|f| &f.0 == s)
            .map(|f| f.1.as_str())
            .collect();
        assert_eq!(
            rnames, *cfields,
            "field list of struct {s} differs between fpga_p2p.h and uapi.rs"
        );
    }
    let rstructs: BTreeSet<&str> = rf.iter().map(|f| f.0.as_str()).collect();
    let cstructs: BTreeSet<&str> = structs.keys().map(String::as_str).collect();
    assert_eq!(rstructs, cstructs, "struct sets differ");

    let rconst = rust_constants();
    let cconst: BTreeSet<&str> = defines.iter().map(String::as_str).collect();
    let rnames: BTreeSet<&str> = rconst.keys().copied().collect();
    assert_eq!(rnames, cconst, "#define sets differ (header vs uapi.rs)");

    // The C probe: the C compiler of the architecture this test was built
    // for checks every size, offset and value against the Rust side while it
    // compiles (_Static_assert), so nothing has to run on the target: the
    // same test holds when the tests are cross-built and run under an
    // emulator (the aarch64 tests under qemu-user, where a probe executable
    // would be an aarch64 program the host cannot start).
    let (cc, cc_from) = c_compiler();
    let (arch_macro, arch) = arch_macro();
    let rsizes: BTreeMap<&str, usize> = STRUCT_SIZES.iter().copied().collect();
    let mut c = String::from("#include <stddef.h>\n");
    c += &format!("#include \"{}\"\n", header.display());
    c += &format!(
        "#ifndef {arch_macro}\n#error \"{cc} (from {cc_from}) does not compile for {arch}, the \
         architecture of this test: set {}\"\n#endif\n",
        cc_variable()
    );
    let (mut nsize, mut nfield, mut nconst) = (0, 0, 0);
    for (s, cfields) in &structs {
        let size = rsizes
            .get(s.as_str())
            .unwrap_or_else(|| panic!("no STRUCT_SIZES entry for struct {s}"));
        c += &format!(
            "_Static_assert(sizeof(struct {s}) == {size}, \"sizeof(struct {s}): uapi.rs says {size}\");\n"
        );
        nsize += 1;
        for f in cfields {
            let r = rf
                .iter()
                .find(|x| &x.0 == s && &x.1 == f)
                .unwrap_or_else(|| panic!("no Rust field {s}.{f}"));
            let (off, sz) = (r.2, r.3);
            c += &format!(
                "_Static_assert(offsetof(struct {s}, {f}) == {off}, \"offset of {s}.{f}: uapi.rs says {off}\");\n\
                 _Static_assert(sizeof(((struct {s} *)0)->{f}) == {sz}, \"size of {s}.{f}: uapi.rs says {sz}\");\n"
            );
            nfield += 1;
        }
    }
    for d in &defines {
        let v = rconst[d.as_str()];
        c += &format!(
            "_Static_assert((unsigned long long)({d}) == {v}ULL, \"value of {d}: uapi.rs says {v}\");\n"
        );
        nconst += 1;
    }

    let dir = std::env::temp_dir().join(format!("tegra-p2p-uapi-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    std::fs::write(&src, c).unwrap();
    let out = Command::new(&cc)
        .args(["-std=gnu11", "-Wall", "-Werror", "-c", "-o"])
        .arg(dir.join("probe.o"))
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("run the C compiler {cc} (from {cc_from}): {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "the C probe did not compile with {cc} for {arch} (each failed assertion is a \
         disagreement between fpga_p2p.h and uapi.rs):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(nsize, structs.len());
    assert_eq!(nfield, rf.len());
    assert_eq!(nconst, defines.len());
    println!(
        "uapi layout: {nsize} structs, {nfield} fields, {nconst} constants match ({cc} for {arch})"
    );
}
