//! Detection sinks in the configuration: a `[[sink]]` table per sink, or
//! `--sink KIND[:WHERE]` on the command line (docs/detections-format.md).
//!
//! ```toml
//! [[sink]]
//! kind = "jsonl"        # or "udp" with address = "host:port", or "fpga"
//! path = "/var/lib/radard/detections.jsonl"
//!
//! [[sink]]
//! kind = "asterix"      # CAT-010 target reports over UDP (docs/asterix.md)
//! address = "239.10.10.10:8600"   # unicast or a multicast group
//! sac = 0
//! sic = 1
//! max_datagram = 1400   # data block (= datagram) limit in bytes
//! multicast_ttl = 1     # multicast only
//! multicast_loop = true # multicast only
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
    /// ASTERIX CAT-010 target reports over UDP, a frame split over
    /// datagrams on record boundaries.
    #[value(name = "asterix")]
    Asterix,
}

/// Sink kinds, for errors and `--help`.
pub const SINK_KINDS: &str = "jsonl, udp, fpga, asterix";

/// An ASTERIX sink's data-block (= datagram) limit by default: under a
/// 1500-byte Ethernet MTU with IP and UDP headers.
pub const DEFAULT_MAX_DATAGRAM: usize = 1400;
/// The smallest limit: a data block's header and the longest record.
pub const MIN_MAX_DATAGRAM: usize =
    asterix_cat010::BLOCK_HEADER_BYTES + asterix_cat010::MAX_RECORD_BYTES;
/// The largest: an IPv4 UDP payload (65535 - 20 - 8).
pub const MAX_MAX_DATAGRAM: usize = 65_507;
/// SAC/SIC of an ASTERIX sink by default (CAT-010 fixes SAC to 0 for a
/// flow local to the airport).
pub const DEFAULT_SAC: u8 = 0;
pub const DEFAULT_SIC: u8 = 1;

impl SinkKind {
    /// The kind's name in the TOML and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SinkKind::Jsonl => "jsonl",
            SinkKind::Udp => "udp",
            SinkKind::Fpga => "fpga",
            SinkKind::Asterix => "asterix",
        }
    }

    /// As the status board stores it (0 is no sink).
    pub fn code(self) -> u64 {
        match self {
            SinkKind::Jsonl => 1,
            SinkKind::Udp => 2,
            SinkKind::Fpga => 3,
            SinkKind::Asterix => 4,
        }
    }

    /// From [`code`](Self::code).
    pub fn from_code(c: u64) -> Option<Self> {
        Self::value_variants()
            .iter()
            .copied()
            .find(|k| k.code() == c)
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
    /// ASTERIX CAT-010 target reports to `address` (host:port, unicast or
    /// a multicast group), in data blocks of at most `max_datagram` bytes
    /// (default 1400), one per datagram (docs/asterix.md).
    Asterix {
        address: String,
        sac: u8,
        sic: u8,
        #[serde(skip_serializing_if = "Option::is_none")]
        max_datagram: Option<usize>,
        /// Multicast only: the datagrams' TTL (default 1) and whether this
        /// host's own receivers get them (default true).
        #[serde(skip_serializing_if = "Option::is_none")]
        multicast_ttl: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        multicast_loop: Option<bool>,
    },
}

/// A `--sink` argument that names no sink.
#[derive(Debug, Error)]
pub enum SinkArgError {
    #[error("--sink {arg:?}: unknown sink kind {kind:?} ({SINK_KINDS})")]
    UnknownKind { arg: String, kind: String },
    #[error("--sink {arg:?}: expected jsonl:PATH, udp:HOST:PORT, asterix:HOST:PORT or fpga")]
    Malformed { arg: String },
}

impl SinkConfig {
    pub fn kind(&self) -> SinkKind {
        match self {
            SinkConfig::Jsonl { .. } => SinkKind::Jsonl,
            SinkConfig::Udp { .. } => SinkKind::Udp,
            SinkConfig::Fpga => SinkKind::Fpga,
            SinkConfig::Asterix { .. } => SinkKind::Asterix,
        }
    }

    /// Parses a command-line sink: `jsonl:PATH`, `udp:HOST:PORT`,
    /// `asterix:HOST:PORT` (SAC 0, SIC 1, the default datagram limit),
    /// `fpga`.
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
            (SinkKind::Asterix, false) => Ok(SinkConfig::Asterix {
                address: rest.to_string(),
                sac: DEFAULT_SAC,
                sic: DEFAULT_SIC,
                max_datagram: None,
                multicast_ttl: None,
                multicast_loop: None,
            }),
            _ => Err(SinkArgError::Malformed {
                arg: arg.to_string(),
            }),
        }
    }

    /// Checks the values (the address resolves, at least one rotated file
    /// is kept, an ASTERIX record fits a datagram); `index` names the sink
    /// in the error.
    pub fn validate(&self, index: usize) -> Result<(), ConfigError> {
        let bad = |key: &str, reason: String| ConfigError::InvalidAt {
            key: format!("sink[{index}].{key}"),
            reason,
        };
        match self {
            SinkConfig::Udp { address } => {
                resolve(address).map_err(|r| bad("address", r))?;
                Ok(())
            }
            SinkConfig::Asterix {
                address,
                max_datagram,
                multicast_ttl,
                multicast_loop,
                ..
            } => {
                let to = resolve(address).map_err(|r| bad("address", r))?;
                if let Some(m) = *max_datagram {
                    if m < MIN_MAX_DATAGRAM {
                        return Err(bad(
                            "max_datagram",
                            format!(
                                "{m} bytes is too small for one record: a data block's header and the longest record take {MIN_MAX_DATAGRAM}"
                            ),
                        ));
                    }
                    if m > MAX_MAX_DATAGRAM {
                        return Err(bad(
                            "max_datagram",
                            format!("{m} bytes is more than a UDP datagram's {MAX_MAX_DATAGRAM}"),
                        ));
                    }
                }
                if !to.ip().is_multicast() {
                    for (key, set) in [
                        ("multicast_ttl", multicast_ttl.is_some()),
                        ("multicast_loop", multicast_loop.is_some()),
                    ] {
                        if set {
                            return Err(bad(key, format!("{address:?} is not a multicast group")));
                        }
                    }
                }
                match *multicast_ttl {
                    Some(t) if t > 255 => {
                        Err(bad("multicast_ttl", format!("{t} is more than 255")))
                    }
                    Some(_) if to.is_ipv6() => Err(bad(
                        "multicast_ttl",
                        "IPv6 multicast takes the system's hop limit".into(),
                    )),
                    _ => Ok(()),
                }
            }
            SinkConfig::Jsonl { keep: Some(0), .. } => {
                Err(bad("keep", "must be at least 1".into()))
            }
            SinkConfig::Jsonl { .. } | SinkConfig::Fpga => Ok(()),
        }
    }
}

/// The first address `address` (host:port) resolves to, or why none.
pub fn resolve(address: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    match address.to_socket_addrs().map(|mut it| it.next()) {
        Ok(Some(a)) => Ok(a),
        Ok(None) => Err(format!("{address:?} resolves to nothing")),
        Err(e) => Err(format!("{address:?}: {e}")),
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
    // Wider than their fields, so that an out-of-range value is named here
    // rather than by the TOML parser.
    #[serde(default)]
    sac: Option<i64>,
    #[serde(default)]
    sic: Option<i64>,
    #[serde(default)]
    max_datagram: Option<usize>,
    #[serde(default)]
    multicast_ttl: Option<u32>,
    #[serde(default)]
    multicast_loop: Option<bool>,
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
            (SinkKind::Udp | SinkKind::Fpga | SinkKind::Asterix, Some(_)) => {
                return Err(bad("path", format!("a {name} sink takes no path")));
            }
            _ => {}
        }
        if kind != SinkKind::Jsonl && (self.rotate_bytes.is_some() || self.keep.is_some()) {
            return Err(bad(
                "rotate_bytes",
                format!("a sink of kind = \"{name}\" does not rotate"),
            ));
        }
        match (kind, &self.address) {
            (SinkKind::Udp | SinkKind::Asterix, None) => {
                return Err(bad(
                    "address",
                    format!("a sink of kind = \"{name}\" needs an address (host:port)"),
                ));
            }
            (SinkKind::Jsonl | SinkKind::Fpga, Some(_)) => {
                return Err(bad(
                    "address",
                    format!("a sink of kind = \"{name}\" takes no address"),
                ));
            }
            _ => {}
        }
        if kind != SinkKind::Asterix {
            for (key, set) in [
                ("sac", self.sac.is_some()),
                ("sic", self.sic.is_some()),
                ("max_datagram", self.max_datagram.is_some()),
                ("multicast_ttl", self.multicast_ttl.is_some()),
                ("multicast_loop", self.multicast_loop.is_some()),
            ] {
                if set {
                    return Err(bad(key, format!("only an asterix sink takes {key}")));
                }
            }
        }
        let octet = |key: &'static str, v: Option<i64>, default: u8| match v {
            None => Ok(default),
            Some(v) => u8::try_from(v).map_err(|_| {
                bad(
                    key,
                    format!(
                        "{v} is out of range: a {} is one octet, 0 to 255",
                        key.to_uppercase()
                    ),
                )
            }),
        };
        let sac = octet("sac", self.sac, DEFAULT_SAC)?;
        let sic = octet("sic", self.sic, DEFAULT_SIC)?;
        Ok(match (kind, &self.path, &self.address) {
            (SinkKind::Asterix, _, Some(address)) => SinkConfig::Asterix {
                address: address.clone(),
                sac,
                sic,
                max_datagram: self.max_datagram,
                multicast_ttl: self.multicast_ttl,
                multicast_loop: self.multicast_loop,
            },
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
        assert_eq!(
            SinkConfig::from_arg("asterix:127.0.0.1:8600").ok(),
            Some(SinkConfig::Asterix {
                address: "127.0.0.1:8600".into(),
                sac: 0,
                sic: 1,
                max_datagram: None,
                multicast_ttl: None,
                multicast_loop: None,
            })
        );
        for (arg, want) in [
            (
                "smtp:x",
                "--sink \"smtp:x\": unknown sink kind \"smtp\" (jsonl, udp, fpga, asterix)",
            ),
            (
                "jsonl",
                "--sink \"jsonl\": expected jsonl:PATH, udp:HOST:PORT, asterix:HOST:PORT or fpga",
            ),
            (
                "fpga:x",
                "--sink \"fpga:x\": expected jsonl:PATH, udp:HOST:PORT, asterix:HOST:PORT or fpga",
            ),
            (
                "asterix",
                "--sink \"asterix\": expected jsonl:PATH, udp:HOST:PORT, asterix:HOST:PORT or fpga",
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
                SinkConfig::Asterix {
                    address: "239.1.2.3:8600".into(),
                    sac: 3,
                    sic: 200,
                    max_datagram: Some(512),
                    multicast_ttl: Some(4),
                    multicast_loop: None,
                },
            ],
        };
        let text = toml::to_string(&doc).expect("serialise");
        assert_eq!(
            text,
            "[[sink]]\nkind = \"jsonl\"\npath = \"d.jsonl\"\nrotate_bytes = 100\n\n\
             [[sink]]\nkind = \"udp\"\naddress = \"127.0.0.1:9\"\n\n[[sink]]\nkind = \"fpga\"\n\n\
             [[sink]]\nkind = \"asterix\"\naddress = \"239.1.2.3:8600\"\nsac = 3\nsic = 200\n\
             max_datagram = 512\nmulticast_ttl = 4\n"
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
