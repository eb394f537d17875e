//! Endpoints and topics (postcard-rpc keys: FNV-1a of path and schema) and
//! the frame-size bound every message fits.

use postcard::experimental::max_size::MaxSize;
use postcard_rpc::{Endpoint, Topic, endpoint, topic};
use postcard_schema::Schema;
use postcard_schema::schema::NamedType;

use crate::bounded::Text;
use crate::messages::*;

/// Protocol version of this crate. Bump on any change of an existing
/// message or path (the keys change with the schema, so an old client gets
/// `UnknownKey` everywhere but on [`VersionEndpoint`], whose types never
/// change). A new endpoint or topic keeps the version: an older client
/// never calls it, and a newer client takes `UnknownKey` from an older
/// unit as "not reported" (`radar/time` was added so; the keys of the
/// others are pinned by a test).
pub const PROTOCOL_VERSION: u16 = 1;
/// Oldest client protocol version the unit answers.
pub const OLDEST_SUPPORTED: u16 = 1;

/// Largest frame (header and body, before COBS) either end sends or accepts.
pub const MAX_FRAME: usize = 1024;
/// Largest postcard-rpc header: discriminant, 8-byte key, 4-byte sequence number.
pub const MAX_HEADER: usize = 13;
/// Largest COBS-encoded frame including the 0 delimiter.
pub const MAX_WIRE_FRAME: usize = MAX_FRAME + MAX_FRAME / 254 + 2;

endpoint!(VersionEndpoint, u16, VersionInfo, "radar/version");
endpoint!(IdentityEndpoint, (), Identity, "radar/identity");
endpoint!(StatusEndpoint, (), Status, "radar/status");
endpoint!(StatsEndpoint, (), Stats, "radar/stats");
endpoint!(LogEndpoint, LogRequest, LogPage, "radar/log");
endpoint!(
    ParamListEndpoint,
    ParamListRequest,
    ParamPage,
    "radar/params/list"
);
endpoint!(
    ParamGetEndpoint,
    ParamName,
    Result<ParamInfo, ParamError>,
    "radar/params/get"
);
endpoint!(
    ParamSetEndpoint,
    SetParam,
    Result<Applied, ParamError>,
    "radar/params/set"
);
endpoint!(
    SnapshotInfoEndpoint,
    (),
    Result<SnapshotInfo, SnapshotError>,
    "radar/snapshot/info"
);
endpoint!(
    SnapshotPieceEndpoint,
    PieceRequest,
    Result<Piece, SnapshotError>,
    "radar/snapshot/piece"
);
endpoint!(SubscribeEndpoint, Subscribe, Subscribe, "radar/subscribe");
endpoint!(TimeEndpoint, (), TimeStatus, "radar/time");

topic!(StatusTopic, Status, "radar/status/push");
topic!(TelemetryTopic, Telemetry, "radar/telemetry/push");

pub use postcard_rpc::standard_icd::{
    ERROR_KEY, ERROR_PATH, GetAllSchemasEndpoint, PingEndpoint, WireError,
};

/// Every endpoint of the protocol (postcard-rpc's standard ones first):
/// path, request key, response key.
pub const ENDPOINTS: [(&str, postcard_rpc::Key, postcard_rpc::Key); 14] = [
    ep::<PingEndpoint>(),
    ep::<GetAllSchemasEndpoint>(),
    ep::<VersionEndpoint>(),
    ep::<IdentityEndpoint>(),
    ep::<StatusEndpoint>(),
    ep::<StatsEndpoint>(),
    ep::<LogEndpoint>(),
    ep::<ParamListEndpoint>(),
    ep::<ParamGetEndpoint>(),
    ep::<ParamSetEndpoint>(),
    ep::<SnapshotInfoEndpoint>(),
    ep::<SnapshotPieceEndpoint>(),
    ep::<SubscribeEndpoint>(),
    ep::<TimeEndpoint>(),
];

/// Topics the unit publishes: path and key.
pub const TOPICS_OUT: [(&str, postcard_rpc::Key); 2] =
    [tp::<StatusTopic>(), tp::<TelemetryTopic>()];

/// The request and response types of [`ENDPOINTS`], in its order, and the
/// message types of [`TOPICS_OUT`]: the schema report sends them, as a
/// postcard-rpc host client finds each endpoint's types by its key.
pub const ENDPOINT_SCHEMAS: [(&NamedType, &NamedType); 14] = [
    eps::<PingEndpoint>(),
    eps::<GetAllSchemasEndpoint>(),
    eps::<VersionEndpoint>(),
    eps::<IdentityEndpoint>(),
    eps::<StatusEndpoint>(),
    eps::<StatsEndpoint>(),
    eps::<LogEndpoint>(),
    eps::<ParamListEndpoint>(),
    eps::<ParamGetEndpoint>(),
    eps::<ParamSetEndpoint>(),
    eps::<SnapshotInfoEndpoint>(),
    eps::<SnapshotPieceEndpoint>(),
    eps::<SubscribeEndpoint>(),
    eps::<TimeEndpoint>(),
];

/// See [`ENDPOINT_SCHEMAS`].
pub const TOPIC_SCHEMAS: [&NamedType; 2] = [
    <StatusTopic as Topic>::Message::SCHEMA,
    <TelemetryTopic as Topic>::Message::SCHEMA,
];

const fn eps<E: Endpoint>() -> (&'static NamedType, &'static NamedType) {
    (E::Request::SCHEMA, E::Response::SCHEMA)
}

const fn ep<E: Endpoint>() -> (&'static str, postcard_rpc::Key, postcard_rpc::Key) {
    (E::PATH, E::REQ_KEY, E::RESP_KEY)
}

const fn tp<T: Topic>() -> (&'static str, postcard_rpc::Key) {
    (T::PATH, T::TOPIC_KEY)
}

// Used only by the const assertions below, which rustc 1.88's dead-code
// lint does not see.
#[allow(dead_code)]
const fn fits<T: MaxSize>() -> bool {
    MAX_HEADER + T::POSTCARD_MAX_SIZE <= MAX_FRAME
}

// Every message fits one frame: checked when the crate compiles.
const _: () = {
    assert!(fits::<VersionInfo>());
    assert!(fits::<Identity>());
    assert!(fits::<Status>());
    assert!(fits::<Stats>());
    assert!(fits::<LogRequest>());
    assert!(fits::<LogPage>());
    assert!(fits::<ParamListRequest>());
    assert!(fits::<ParamPage>());
    assert!(fits::<Text<24>>());
    assert!(fits::<Result<ParamInfo, ParamError>>());
    assert!(fits::<SetParam>());
    assert!(fits::<Result<Applied, ParamError>>());
    assert!(fits::<Result<SnapshotInfo, SnapshotError>>());
    assert!(fits::<PieceRequest>());
    assert!(fits::<Result<Piece, SnapshotError>>());
    assert!(fits::<Subscribe>());
    assert!(fits::<Telemetry>());
    assert!(fits::<TimeStatus>());
};

/// The largest encoded size of each message, for documentation and tests.
pub const MAX_SIZES: [(&str, usize); 9] = [
    ("Identity", Identity::POSTCARD_MAX_SIZE),
    ("Status", Status::POSTCARD_MAX_SIZE),
    ("Stats", Stats::POSTCARD_MAX_SIZE),
    ("LogPage", LogPage::POSTCARD_MAX_SIZE),
    ("ParamPage", ParamPage::POSTCARD_MAX_SIZE),
    ("SnapshotInfo", SnapshotInfo::POSTCARD_MAX_SIZE),
    ("Piece", Piece::POSTCARD_MAX_SIZE),
    ("Telemetry", Telemetry::POSTCARD_MAX_SIZE),
    ("TimeStatus", TimeStatus::POSTCARD_MAX_SIZE),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Protocol 1 as first released: every endpoint's and topic's keys.
    /// A radarctl of that release calls these; they must not change while
    /// the version stays 1 (a change of a message is a new version).
    #[test]
    fn the_keys_of_protocol_1_are_unchanged() {
        const V1: [(&str, [u8; 8], [u8; 8]); 13] = [
            (
                "postcard-rpc/ping",
                [145, 124, 108, 242, 36, 239, 237, 232],
                [145, 124, 108, 242, 36, 239, 237, 232],
            ),
            (
                "postcard-rpc/schemas/get",
                [32, 232, 43, 24, 89, 95, 41, 122],
                [70, 143, 78, 109, 58, 209, 156, 35],
            ),
            (
                "radar/version",
                [41, 32, 59, 26, 14, 113, 46, 241],
                [92, 210, 198, 199, 220, 155, 28, 65],
            ),
            (
                "radar/identity",
                [195, 222, 22, 222, 59, 169, 183, 108],
                [203, 227, 77, 110, 51, 141, 47, 73],
            ),
            (
                "radar/status",
                [19, 163, 178, 136, 94, 165, 110, 167],
                [31, 24, 120, 239, 30, 97, 144, 111],
            ),
            (
                "radar/stats",
                [176, 115, 6, 88, 147, 66, 135, 127],
                [105, 139, 86, 108, 159, 88, 220, 145],
            ),
            (
                "radar/log",
                [77, 150, 139, 105, 49, 171, 236, 47],
                [126, 64, 236, 20, 6, 56, 192, 25],
            ),
            (
                "radar/params/list",
                [17, 97, 253, 52, 208, 23, 66, 148],
                [223, 94, 194, 132, 134, 28, 190, 34],
            ),
            (
                "radar/params/get",
                [20, 9, 116, 0, 43, 46, 211, 89],
                [124, 120, 210, 245, 78, 66, 138, 221],
            ),
            (
                "radar/params/set",
                [47, 178, 126, 145, 144, 214, 201, 64],
                [40, 148, 192, 209, 198, 116, 245, 129],
            ),
            (
                "radar/snapshot/info",
                [150, 124, 85, 233, 212, 232, 141, 15],
                [64, 111, 136, 3, 157, 70, 40, 63],
            ),
            (
                "radar/snapshot/piece",
                [84, 218, 153, 112, 161, 108, 44, 107],
                [250, 50, 13, 199, 216, 171, 200, 122],
            ),
            (
                "radar/subscribe",
                [136, 18, 168, 248, 91, 22, 17, 111],
                [136, 18, 168, 248, 91, 22, 17, 111],
            ),
        ];
        for (path, req, resp) in V1 {
            let (_, q, r) = ENDPOINTS
                .iter()
                .find(|(p, _, _)| *p == path)
                .unwrap_or_else(|| panic!("{path} is gone"));
            assert_eq!((q.to_bytes(), r.to_bytes()), (req, resp), "{path}");
        }
        assert_eq!(TOPICS_OUT[0].1.to_bytes(), [88, 26, 79, 94, 169, 21, 3, 89]);
        assert_eq!(
            TOPICS_OUT[1].1.to_bytes(),
            [116, 56, 96, 90, 226, 129, 226, 64]
        );
        assert_eq!(PROTOCOL_VERSION, 1);
    }

    /// Each type of the schema report goes out in one frame.
    #[test]
    fn schema_types_fit_a_frame() {
        let mut buf = [0u8; MAX_FRAME - MAX_HEADER];
        for (req, resp) in ENDPOINT_SCHEMAS {
            for t in [req, resp] {
                // SchemaData::Type's variant index is one byte.
                assert!(
                    postcard::to_slice(t, &mut buf[1..]).is_ok(),
                    "{} does not fit a frame",
                    t.name
                );
            }
        }
        for t in TOPIC_SCHEMAS {
            assert!(
                postcard::to_slice(t, &mut buf[1..]).is_ok(),
                "{} does not fit a frame",
                t.name
            );
        }
    }
}
