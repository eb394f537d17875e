//! Placeholder: filled by the capture-path work (issue 2).
