//! Detection sinks in the configuration: a `[[sink]]` table per sink, or
//! `--sink KIND[:WHERE]` on the command line (docs/detections-format.md).
//!
//! ```toml
//! [[sink]]
//! kind = "jsonl"        # or "udp" with address = "host:port", or "fpga"
//! path = "/var/lib/radard/detections.jsonl"
//! ```
//!
//! A [`SinkConfig`] holds what its kind needs and nothing else. The table
//! as written ([`SinkTable`]) is checked key by key, so that an error names
//! the table's index and the key (`sink[1].path: a fpga sink takes no path`).

use std::path::PathBuf;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::error::ConfigError;

/// The kinds of sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SinkKind {
    /// One JSON object per frame to a file, rotated by size.
    #[value(name = "jsonl")]
    Jsonl,
    /// One datagram (the same JSON line) per frame.
    #[value(name = "udp")]
    Udp,
    /// A binary detections record per frame to the FPGA's transmit channel.
    #[value(name = "fpga")]
    Fpga,
}

/// Sink kinds, for errors and `--help`.
pub const SINK_KINDS: &str = "jsonl, udp, fpga";

impl SinkKind {
    /// The kind's name in the TOML and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SinkKind::Jsonl => "jsonl",
            SinkKind::Udp => "udp",
            SinkKind::Fpga => "fpga",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        <Self as ValueEnum>::from_str(name, false).ok()
    }
}

/// One detection sink.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", try_from = "SinkTable")]
pub enum SinkConfig {
    /// JSON Lines to `path`; a new file past `rotate_bytes` (default 64
    /// MiB; 0 = never), `keep` rotated files (default 4).
    Jsonl {
        path: PathBuf,
        #[serde(skip_serializing_if = "Option::is_none")]
        rotate_bytes: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        keep: Option<u32>,
    },
    /// Datagrams to `address` (host:port).
    Udp { address: String },
    /// The FPGA's transmit channel (board/fpga/detections-record.md).
    Fpga,
}

/// A `--sink` argument that names no sink.
#[derive(Debug, Error)]
pub enum SinkArgError {
    #[error("--sink {arg:?}: unknown sink kind {kind:?} ({SINK_KINDS})")]
    UnknownKind { arg: String, kind: String },
    #[error("--sink {arg:?}: expected jsonl:PATH, udp:HOST:PORT or fpga")]
    Malformed { arg: String },
}

impl SinkConfig {
    pub fn kind(&self) -> SinkKind {
        match self {
            SinkConfig::Jsonl { .. } => SinkKind::Jsonl,
            SinkConfig::Udp { .. } => SinkKind::Udp,
            SinkConfig::Fpga => SinkKind::Fpga,
        }
    }

    /// Parses a command-line sink: `jsonl:PATH`, `udp:HOST:PORT`, `fpga`.
    pub fn from_arg(arg: &str) -> Result<Self, SinkArgError> {
        let (name, rest) = arg.split_once(':').unwrap_or((arg, ""));
        let kind = SinkKind::parse(name).ok_or_else(|| SinkArgError::UnknownKind {
            arg: arg.to_string(),
            kind: name.to_string(),
        })?;
        match (kind, rest.is_empty()) {
            (SinkKind::Jsonl, false) => Ok(SinkConfig::Jsonl {
                path: PathBuf::from(rest),
                rotate_bytes: None,
                keep: None,
            }),
            (SinkKind::Udp, false) => Ok(SinkConfig::Udp {
                address: rest.to_string(),
            }),
            (SinkKind::Fpga, true) => Ok(SinkConfig::Fpga),
            _ => Err(SinkArgError::Malformed {
                arg: arg.to_string(),
            }),
        }
    }

    /// Checks the values (the address resolves, at least one rotated file
    /// is kept); `index` names the sink in the error.
    pub fn validate(&self, index: usize) -> Result<(), ConfigError> {
        let bad = |key: &str, reason: String| ConfigError::InvalidAt {
            key: format!("sink[{index}].{key}"),
            reason,
        };
        match self {
            SinkConfig::Udp { address } => {
                use std::net::ToSocketAddrs;
                match address.to_socket_addrs().map(|mut it| it.next()) {
                    Ok(Some(_)) => Ok(()),
                    Ok(None) => Err(bad("address", format!("{address:?} resolves to nothing"))),
                    Err(e) => Err(bad("address", format!("{address:?}: {e}"))),
                }
            }
            SinkConfig::Jsonl { keep: Some(0), .. } => {
                Err(bad("keep", "must be at least 1".into()))
            }
            SinkConfig::Jsonl { .. } | SinkConfig::Fpga => Ok(()),
        }
    }
}

/// A `[[sink]]` table as written: every key any kind takes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SinkTable {
    kind: String,
    #[serde(default)]
    path: Option<PathBuf>,
    #[serde(default)]
    rotate_bytes: Option<u64>,
    #[serde(default)]
    keep: Option<u32>,
    #[serde(default)]
    address: Option<String>,
}

/// What is wrong with a table: the key and why.
struct TableError {
    key: &'static str,
    reason: String,
}

impl SinkTable {
    /// The sink, if the table has the keys its kind needs and no others.
    fn to_sink(&self) -> Result<SinkConfig, TableError> {
        let bad = |key, reason: String| TableError { key, reason };
        let kind = SinkKind::parse(&self.kind).ok_or_else(|| {
            bad(
                "kind",
                format!("unknown sink kind {:?} ({SINK_KINDS})", self.kind),
            )
        })?;
        let name = kind.name();
        match (kind, &self.path) {
            (SinkKind::Jsonl, None) => return Err(bad("path", "a jsonl sink needs a path".into())),
            (SinkKind::Udp | SinkKind::Fpga, Some(_)) => {
                return Err(bad("path", format!("a {name} sink takes no path")));
            }
            _ => {}
        }
        if kind != SinkKind::Jsonl && (self.rotate_bytes.is_some() || self.keep.is_some()) {
            return Err(bad(
                "rotate_bytes",
                format!("a {name} sink does not rotate"),
            ));
        }
        match (kind, &self.address) {
            (SinkKind::Udp, None) => {
                return Err(bad(
                    "address",
                    "a udp sink needs an address (host:port)".into(),
                ));
            }
            (SinkKind::Jsonl | SinkKind::Fpga, Some(_)) => {
                return Err(bad("address", format!("a {name} sink takes no address")));
            }
            _ => {}
        }
        Ok(match (kind, &self.path, &self.address) {
            (SinkKind::Jsonl, Some(path), _) => SinkConfig::Jsonl {
                path: path.clone(),
                rotate_bytes: self.rotate_bytes,
                keep: self.keep,
            },
            (SinkKind::Udp, _, Some(address)) => SinkConfig::Udp {
                address: address.clone(),
            },
            _ => SinkConfig::Fpga,
        })
    }
}

impl TryFrom<SinkTable> for SinkConfig {
    type Error = String;

    fn try_from(table: SinkTable) -> Result<Self, String> {
        table
            .to_sink()
            .map_err(|e| format!("sink.{}: {}", e.key, e.reason))
    }
}

/// The first `[[sink]]` table of `text` that makes no sink, as the error
/// naming it (`sink[i].key`); None when every table makes one, or when the
/// tables cannot be read at all (the TOML parser's error says why).
pub(super) fn first_bad_table(text: &str) -> Option<ConfigError> {
    #[derive(Deserialize)]
    struct Tables {
        #[serde(default)]
        sink: Vec<SinkTable>,
    }
    let tables: Tables = toml::from_str(text).ok()?;
    tables
        .sink
        .iter()
        .enumerate()
        .find_map(|(i, t)| t.to_sink().err().map(|e| (i, e)))
        .map(|(i, e)| ConfigError::InvalidAt {
            key: format!("sink[{i}].{}", e.key),
            reason: e.reason,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_sinks_parse_and_bad_ones_say_why() {
        assert_eq!(
            SinkConfig::from_arg("jsonl:/tmp/d.jsonl").ok(),
            Some(SinkConfig::Jsonl {
                path: "/tmp/d.jsonl".into(),
                rotate_bytes: None,
                keep: None
            })
        );
        assert_eq!(
            SinkConfig::from_arg("udp:10.0.0.1:5005").ok(),
            Some(SinkConfig::Udp {
                address: "10.0.0.1:5005".into()
            })
        );
        assert_eq!(SinkConfig::from_arg("fpga").ok(), Some(SinkConfig::Fpga));
        for (arg, want) in [
            (
                "smtp:x",
                "--sink \"smtp:x\": unknown sink kind \"smtp\" (jsonl, udp, fpga)",
            ),
            (
                "jsonl",
                "--sink \"jsonl\": expected jsonl:PATH, udp:HOST:PORT or fpga",
            ),
            (
                "fpga:x",
                "--sink \"fpga:x\": expected jsonl:PATH, udp:HOST:PORT or fpga",
            ),
        ] {
            let e = SinkConfig::from_arg(arg).err().map(|e| e.to_string());
            assert_eq!(e.as_deref(), Some(want), "{arg}");
        }
    }

    /// The TOML form round-trips: what `--print-config` writes reads back.
    #[test]
    fn sinks_print_as_tables_that_read_back() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Doc {
            sink: Vec<SinkConfig>,
        }
        let doc = Doc {
            sink: vec![
                SinkConfig::Jsonl {
                    path: "d.jsonl".into(),
                    rotate_bytes: Some(100),
                    keep: None,
                },
                SinkConfig::Udp {
                    address: "127.0.0.1:9".into(),
                },
                SinkConfig::Fpga,
            ],
        };
        let text = toml::to_string(&doc).expect("serialise");
        assert_eq!(
            text,
            "[[sink]]\nkind = \"jsonl\"\npath = \"d.jsonl\"\nrotate_bytes = 100\n\n\
             [[sink]]\nkind = \"udp\"\naddress = \"127.0.0.1:9\"\n\n[[sink]]\nkind = \"fpga\"\n"
        );
        assert_eq!(toml::from_str::<Doc>(&text).expect("read back"), doc);
        assert_eq!(
            SinkKind::value_variants()
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", "),
            SINK_KINDS
        );
    }
}
