//! The report of an invocation in KTAP, the kernel's test output format
//! (Documentation/dev-tools/ktap.rst in the kernel source), so that the
//! kernel's tools (`tools/testing/kunit/kunit.py parse`) read it as they read
//! a kselftest's: one test, named after the suite, whose diagnostic lines
//! carry the detail and the figures (the [`Outcome`] as one JSON object)
//! that tests/qemu/harness.py counts.

use std::fmt::Write as _;

use crate::common::Outcome;

/// The prefix of the diagnostic line that carries the figures.
pub const FIGURES: &str = "# figures: ";

/// The whole KTAP document of an invocation, ending in a newline.
pub fn document(out: &Outcome) -> String {
    let json = serde_json::to_string(out).unwrap_or_else(|e| {
        // Only a map key that is not a string could fail; keep the line
        // parsable and the verdict a failure.
        format!(
            "{{\"suite\":{:?},\"passed\":false,\"detail\":\"json: {e}\"}}",
            out.suite
        )
    });
    let mut doc = String::from("KTAP version 1\n1..1\n");
    for line in out.detail.lines() {
        let _ = writeln!(doc, "# {}: {line}", out.suite);
    }
    let _ = writeln!(doc, "{FIGURES}{json}");
    let verdict = if out.passed { "ok" } else { "not ok" };
    let _ = writeln!(doc, "{verdict} 1 {}", out.suite);
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passed_suite_is_one_ok_test_with_its_figures() {
        let out = Outcome {
            suite: "stream".into(),
            passed: true,
            frames_verified: 3,
            detail: "ok".into(),
            ..Default::default()
        };
        let doc = document(&out);
        let lines: Vec<&str> = doc.lines().collect();
        assert_eq!(lines[0], "KTAP version 1");
        assert_eq!(lines[1], "1..1");
        assert_eq!(lines[2], "# stream: ok");
        let json = lines[3].strip_prefix(FIGURES).expect("figures line");
        let v: serde_json::Value = serde_json::from_str(json).expect("JSON");
        assert_eq!(v["suite"], "stream");
        assert_eq!(v["passed"], true);
        assert_eq!(v["frames_verified"], 3);
        assert_eq!(lines[4], "ok 1 stream");
        assert_eq!(lines.len(), 5);
    }

    #[test]
    fn a_failed_suite_is_not_ok_and_every_detail_line_a_diagnostic() {
        let out = Outcome {
            suite: "badinput".into(),
            passed: false,
            detail: "register: EINVAL expected\ngot 0".into(),
            ..Default::default()
        };
        let doc = document(&out);
        let lines: Vec<&str> = doc.lines().collect();
        assert_eq!(lines[2], "# badinput: register: EINVAL expected");
        assert_eq!(lines[3], "# badinput: got 0");
        assert!(lines[4].starts_with(FIGURES));
        assert_eq!(*lines.last().expect("lines"), "not ok 1 badinput");
        assert!(doc.ends_with('\n'));
    }
}
