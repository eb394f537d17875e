//! Endpoints and topics (postcard-rpc keys: FNV-1a of path and schema) and
//! the frame-size bound every message fits.

use postcard::experimental::max_size::MaxSize;
use postcard_rpc::{Endpoint, Topic, endpoint, topic};
use postcard_schema::Schema;
use postcard_schema::schema::NamedType;

use crate::bounded::Text;
use crate::messages::*;

/// Protocol version of this crate. Bump on any change of a message or path
/// (the keys change with the schema, so an old client gets `UnknownKey`
/// everywhere but on [`VersionEndpoint`], whose types never change).
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

topic!(StatusTopic, Status, "radar/status/push");
topic!(TelemetryTopic, Telemetry, "radar/telemetry/push");

pub use postcard_rpc::standard_icd::{
    ERROR_KEY, ERROR_PATH, GetAllSchemasEndpoint, PingEndpoint, WireError,
};

/// Every endpoint of the protocol (postcard-rpc's standard ones first):
/// path, request key, response key.
pub const ENDPOINTS: [(&str, postcard_rpc::Key, postcard_rpc::Key); 13] = [
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
];

/// Topics the unit publishes: path and key.
pub const TOPICS_OUT: [(&str, postcard_rpc::Key); 2] =
    [tp::<StatusTopic>(), tp::<TelemetryTopic>()];

/// The request and response types of [`ENDPOINTS`], in its order, and the
/// message types of [`TOPICS_OUT`]: the schema report sends them, as a
/// postcard-rpc host client finds each endpoint's types by its key.
pub const ENDPOINT_SCHEMAS: [(&NamedType, &NamedType); 13] = [
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
};

/// The largest encoded size of each message, for documentation and tests.
pub const MAX_SIZES: [(&str, usize); 8] = [
    ("Identity", Identity::POSTCARD_MAX_SIZE),
    ("Status", Status::POSTCARD_MAX_SIZE),
    ("Stats", Stats::POSTCARD_MAX_SIZE),
    ("LogPage", LogPage::POSTCARD_MAX_SIZE),
    ("ParamPage", ParamPage::POSTCARD_MAX_SIZE),
    ("SnapshotInfo", SnapshotInfo::POSTCARD_MAX_SIZE),
    ("Piece", Piece::POSTCARD_MAX_SIZE),
    ("Telemetry", Telemetry::POSTCARD_MAX_SIZE),
];

#[cfg(test)]
mod tests {
    use super::*;

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
