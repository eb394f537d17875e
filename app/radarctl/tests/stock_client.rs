//! postcard-rpc's own host client (`HostClient::new_serial_cobs`, the
//! crate's standard ping endpoint and its schema query) talks to radard
//! over a pseudo-terminal pair: the unit speaks the stock wire format.

mod common;

use std::time::Duration;

use common::*;
use diag_proto::{IdentityEndpoint, PROTOCOL_VERSION, VersionEndpoint};
use postcard_rpc::header::VarSeqKind;
use postcard_rpc::host_client::HostClient;
use postcard_rpc::standard_icd::{ERROR_PATH, PingEndpoint, WireError};

#[test]
fn stock_host_client_pings_the_unit() {
    let _g = serial();
    let (a, b) = (Pty::open(), Pty::open());
    let _relay = Relay::join(&a, &b);
    let radard = Radard::start("stock", &a.slave_path);
    wait_ready(&b.slave_path, &radard);
    let port = b.slave_path.to_str().expect("a UTF-8 pty path").to_string();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move {
        let client = HostClient::<WireError>::try_new_serial_cobs(
            &port,
            ERROR_PATH,
            8,
            115_200,
            VarSeqKind::Seq4,
        )
        .expect("the stock client opens the port");
        let within = Duration::from_secs(5);
        for value in [0u32, 1, 0xA5A5_5A5A, u32::MAX] {
            let got = tokio::time::timeout(within, client.send_resp::<PingEndpoint>(&value))
                .await
                .expect("a ping answer within 5 s")
                .expect("ping");
            assert_eq!(got, value, "the ping answer echoes its value");
            println!("stock postcard-rpc HostClient: ping {value:#x} -> {got:#x}");
        }

        // The unit's own endpoints through the same stock client.
        let v = tokio::time::timeout(
            within,
            client.send_resp::<VersionEndpoint>(&PROTOCOL_VERSION),
        )
        .await
        .expect("a version answer within 5 s")
        .expect("version");
        assert_eq!(v.protocol, PROTOCOL_VERSION);
        let id = tokio::time::timeout(within, client.send_resp::<IdentityEndpoint>(&()))
            .await
            .expect("an identity answer within 5 s")
            .expect("identity");
        assert_eq!(id.backend.as_str(), "cpu");
        println!("stock postcard-rpc HostClient: identity {id:?}");

        // The standard schema query: every endpoint and topic of the unit.
        let report = tokio::time::timeout(within, client.get_schema_report())
            .await
            .expect("a schema report within 5 s")
            .expect("schemas");
        let paths: Vec<&str> = report.endpoints.iter().map(|e| e.path.as_str()).collect();
        println!("stock postcard-rpc HostClient: endpoints {paths:?}");
        for want in ["radar/identity", "radar/status", "radar/params/set"] {
            assert!(
                paths.contains(&want),
                "{want} missing from the schema report: {paths:?}"
            );
        }
        let topics: Vec<&str> = report.topics_out.iter().map(|t| t.path.as_str()).collect();
        assert!(topics.contains(&"radar/status/push"), "{topics:?}");
        client.close();
    });
}
