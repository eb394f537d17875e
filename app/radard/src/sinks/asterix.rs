//! The `asterix` sink: each frame's detections as ASTERIX CAT-010 target
//! reports (the `asterix-cat010` crate) over UDP, unicast or to a multicast
//! group (docs/asterix.md). A frame's records fill data blocks of at most
//! `max_datagram` bytes, one block per datagram: a frame with more reports
//! than one block holds spans several datagrams, split on record
//! boundaries.

use std::net::{SocketAddr, UdpSocket};

use asterix_cat010::item::Descriptor;
use asterix_cat010::{DataBlock, TargetReport};

use super::FrameDetections;
use crate::config::DEFAULT_MAX_DATAGRAM;

/// How an ASTERIX sink is set up (from its `[[sink]]` table).
#[derive(Clone, Debug, PartialEq)]
pub struct AsterixSetup {
    pub address: String,
    pub sac: u8,
    pub sic: u8,
    pub max_datagram: usize,
    pub multicast_ttl: Option<u32>,
    pub multicast_loop: Option<bool>,
    /// I010/020 SIM: the frames are synthetic.
    pub simulated: bool,
}

/// An open ASTERIX sink: a connected UDP socket and a datagram buffer.
pub struct AsterixSender {
    socket: UdpSocket,
    sac: u8,
    sic: u8,
    descriptor: Descriptor,
    buf: Vec<u8>,
}

/// What sending one frame did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameSent {
    /// Datagrams sent, and the records in them.
    pub datagrams: u64,
    pub records: u64,
    /// Datagrams whose send failed.
    pub send_errors: u64,
    /// Records with a value saturated to fit its field.
    pub clamped: u64,
}

impl AsterixSender {
    /// Resolves the address, binds and connects a socket (multicast TTL
    /// and loop set for a group); the error says why it cannot.
    pub fn open(s: &AsterixSetup) -> Result<Self, String> {
        let to = crate::config::resolve(&s.address)?;
        let bind = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
        let socket = UdpSocket::bind(bind).map_err(|e| format!("bind {bind}: {e}"))?;
        if to.ip().is_multicast() {
            let set = match to {
                SocketAddr::V4(_) => socket
                    .set_multicast_ttl_v4(s.multicast_ttl.unwrap_or(1))
                    .and_then(|()| socket.set_multicast_loop_v4(s.multicast_loop.unwrap_or(true))),
                SocketAddr::V6(_) => socket.set_multicast_loop_v6(s.multicast_loop.unwrap_or(true)),
            };
            set.map_err(|e| format!("{}: multicast options: {e}", s.address))?;
        }
        // Connected, so that an unreachable destination is reported
        // (ECONNREFUSED, ENETUNREACH) and counted.
        socket
            .connect(to)
            .map_err(|e| format!("{:?}: {e}", s.address))?;
        Ok(AsterixSender {
            socket,
            sac: s.sac,
            sic: s.sic,
            descriptor: Descriptor {
                simulated: s.simulated,
                test_target: false,
            },
            buf: vec![
                0;
                s.max_datagram.clamp(
                    crate::config::MIN_MAX_DATAGRAM,
                    crate::config::MAX_MAX_DATAGRAM
                )
            ],
        })
    }

    /// Sends a frame's detections as target reports; a frame without any
    /// sends nothing. Allocates nothing.
    pub fn send_frame(&mut self, rec: &FrameDetections) -> FrameSent {
        let AsterixSender {
            socket,
            sac,
            sic,
            descriptor,
            buf,
            ..
        } = self;
        let mut sent = FrameSent::default();
        let mut send = |block: &[u8], records: usize| match socket.send(block) {
            Ok(_) => {
                sent.datagrams += 1;
                sent.records += records as u64;
            }
            Err(_) => sent.send_errors += 1,
        };
        let Ok(mut block) = DataBlock::new(buf) else {
            return FrameSent::default();
        };
        for d in &rec.detections {
            let report = TargetReport {
                sac: *sac,
                sic: *sic,
                descriptor: *descriptor,
                utc_ns: rec.utc_ns,
                range_m: f64::from(d.range_m),
                azimuth_deg: f64::from(d.azimuth_deg),
                radial_velocity_mps: Some(f64::from(d.velocity_mps)),
                amplitude_db: Some(f64::from(d.snr_db)),
            };
            let pushed = match block.push(&report) {
                Some(e) => Some(e),
                None => {
                    // Full: this datagram goes, the record starts the next.
                    let records = block.records();
                    send(block.finish(), records);
                    let Ok(next) = DataBlock::new(buf) else {
                        return sent;
                    };
                    block = next;
                    block.push(&report)
                }
            };
            // None: a record longer than the datagram limit, which the
            // configuration's check (max_datagram) rules out.
            if pushed.is_some_and(|e| e.clamped) {
                sent.clamped += 1;
            }
        }
        if !block.is_empty() {
            let records = block.records();
            send(block.finish(), records);
        }
        sent
    }
}

impl Default for AsterixSetup {
    fn default() -> Self {
        AsterixSetup {
            address: String::new(),
            sac: crate::config::DEFAULT_SAC,
            sic: crate::config::DEFAULT_SIC,
            max_datagram: DEFAULT_MAX_DATAGRAM,
            multicast_ttl: None,
            multicast_loop: None,
            simulated: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::test_detection as det;
    use asterix_cat010::read;

    fn frame(n: u32) -> FrameDetections {
        FrameDetections {
            sequence: 9,
            utc_ns: 1_795_651_200_000_000_000 + 49_530_500_000_000,
            detections: (0..n).map(det).collect(),
            ..FrameDetections::default()
        }
    }

    /// 150 reports of 20 bytes in 1400-byte datagrams: (1400 - 3) / 20 =
    /// 69 per datagram, so 69 + 69 + 12 in three, each a whole data block
    /// whose records read back in order.
    #[test]
    fn a_frame_over_the_datagram_limit_is_split_on_record_boundaries() {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .expect("timeout");
        let setup = AsterixSetup {
            address: rx.local_addr().expect("addr").to_string(),
            sac: 7,
            sic: 42,
            ..AsterixSetup::default()
        };
        let mut tx = AsterixSender::open(&setup).expect("open");
        let sent = tx.send_frame(&frame(150));
        assert_eq!(
            sent,
            FrameSent {
                datagrams: 3,
                records: 150,
                send_errors: 0,
                clamped: 0
            }
        );
        let mut buf = [0u8; 2048];
        let mut ranges = Vec::new();
        for want in [69usize, 69, 12] {
            let n = rx.recv(&mut buf).expect("datagram");
            assert_eq!(n, 3 + want * 20);
            assert!(n <= 1400);
            for r in read::records(&buf[..n]).expect("block") {
                let r = r.expect("record");
                assert_eq!((r.sac, r.sic, r.message_type), (7, 42, 1));
                assert_eq!(r.time_of_day, 6_339_904);
                ranges.push(r.rho);
            }
        }
        // test_detection(i) is at i * 0.5 m: RHO rounds half away from 0.
        let want: Vec<u16> = (0..150u32)
            .map(|i| (i as f64 * 0.5).round() as u16)
            .collect();
        assert_eq!(ranges, want);
        assert_eq!(tx.send_frame(&frame(0)), FrameSent::default());
    }

    /// The smallest limit holds exactly one of the longest records.
    #[test]
    fn the_smallest_datagram_holds_one_record() {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let setup = AsterixSetup {
            address: rx.local_addr().expect("addr").to_string(),
            max_datagram: crate::config::MIN_MAX_DATAGRAM,
            simulated: true,
            ..AsterixSetup::default()
        };
        let mut tx = AsterixSender::open(&setup).expect("open");
        let sent = tx.send_frame(&frame(3));
        assert_eq!((sent.datagrams, sent.records), (3, 3));
    }

    /// To a multicast group: the TTL and loop keys are applied, and a
    /// receiver on this host that joined the group gets the datagrams (loop
    /// on). Needs a route for the group (the default route does).
    #[test]
    fn multicast_groups_get_the_datagrams_with_the_ttl_asked() {
        use std::net::Ipv4Addr;
        let group = Ipv4Addr::new(239, 255, 10, 10);
        let rx = UdpSocket::bind("0.0.0.0:0").expect("bind");
        rx.join_multicast_v4(&group, &Ipv4Addr::UNSPECIFIED)
            .expect("join the group");
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .expect("timeout");
        let port = rx.local_addr().expect("addr").port();
        let setup = AsterixSetup {
            address: format!("{group}:{port}"),
            multicast_ttl: Some(3),
            ..AsterixSetup::default()
        };
        let mut tx = AsterixSender::open(&setup)
            .unwrap_or_else(|e| panic!("{e} (no route for {group}: this host needs one)"));
        assert_eq!(tx.socket.multicast_ttl_v4().ok(), Some(3));
        assert_eq!(tx.socket.multicast_loop_v4().ok(), Some(true));
        assert_eq!(tx.send_frame(&frame(2)).datagrams, 1);
        let mut buf = [0u8; 256];
        let n = rx.recv(&mut buf).expect("the group's datagram");
        assert_eq!(n, 3 + 2 * 20);
        assert_eq!(buf[..3], [10, 0, 43]);
    }

    /// A closed port: the sends fail and are counted, nothing panics.
    #[test]
    fn send_failures_are_counted() {
        let port = {
            let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
            s.local_addr().expect("addr").port()
        };
        let setup = AsterixSetup {
            address: format!("127.0.0.1:{port}"),
            ..AsterixSetup::default()
        };
        let mut tx = AsterixSender::open(&setup).expect("open");
        let mut errors = 0;
        for _ in 0..4 {
            // ICMP port unreachable makes a later send fail (ECONNREFUSED).
            errors += tx.send_frame(&frame(2)).send_errors;
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(errors >= 1, "no send error reported");
    }
}
