//! `radard decode-record --input FILE`: one detections record as the
//! `fpga` sink sends it (board/fpga/detections-record.md), printed as a
//! detections line (docs/detections-format.md; latency_ns null).

use std::io::Write;
use std::path::Path;

use radar_dsp::detection::DetectionsLine;
use radard::RadardError;
use radard::sinks::detections_record;

pub fn decode_record(input: &Path) -> Result<u8, RadardError> {
    let bytes = std::fs::read(input).map_err(|source| RadardError::ReadRecord {
        path: input.to_path_buf(),
        source,
    })?;
    let r = detections_record::decode(&bytes).map_err(|source| RadardError::NotARecord {
        path: input.to_path_buf(),
        source,
    })?;
    let mut line = Vec::new();
    DetectionsLine {
        sequence: r.sequence,
        timestamp_ns: Some(r.timestamp_ns),
        utc: None,
        latency_ns: None,
        detections: &r.detections,
        cut: r.cut,
    }
    .write_to(&mut line);
    let mut out = std::io::stdout().lock();
    // A closed stdout: nothing to tell, but not a success.
    Ok(match out.write_all(&line).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(_) => 1,
    })
}
