//! The diagnostics server: a normal-priority thread on a serial device
//! (`[diag] port`, `baud`) speaking the `diag-proto` protocol (postcard-rpc
//! frames) and a plain-text console on the same link. It reads only the
//! loop's lock-free status board; parameter changes reach the loop through
//! the loop's bounded lock-free parameter queue
//! (`frame_loop::param_queue`) and are applied between frames. The loop
//! never waits on it.
//!
//! `server` is the protocol logic (bytes in, bytes out), `console` the text
//! commands, `state` what both keep over one link, `params` the parameter
//! table, `answers` the answers built from the board; this file the serial
//! port.

pub mod answers;
pub mod console;
pub mod params;
pub mod server;
pub mod state;

use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use server::Server;

/// `[diag]` in radard's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiagConfig {
    /// Serial device of the diagnostics link (e.g. "/dev/ttyTHS0"); none: no server.
    pub port: Option<PathBuf>,
    pub baud: u32,
}

impl Default for DiagConfig {
    fn default() -> Self {
        DiagConfig {
            port: None,
            baud: 115_200,
        }
    }
}

impl DiagConfig {
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(300..=4_000_000).contains(&self.baud) {
            return Err((
                "diag.baud",
                format!("{} is outside 300 .. 4000000", self.baud),
            ));
        }
        if self.port.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            return Err((
                "diag.port",
                "is empty (leave it out for no diagnostics link)".into(),
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Error)]
pub enum DiagError {
    #[error("diag.port {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: serialport::Error,
    },
}

/// After this much silence a lone first byte on the link is a person typing.
pub const IDLE_AFTER: Duration = Duration::from_millis(100);
/// How often the server looks at its clock (topic pushes) when the link is quiet.
const READ_TIMEOUT: Duration = Duration::from_millis(20);

/// Opens the link's serial device (radard does it at start-up, so that a
/// wrong `[diag] port` is named before the loop starts).
pub fn open(cfg: &DiagConfig, path: &std::path::Path) -> Result<serialport::TTYPort, DiagError> {
    serialport::new(path.to_string_lossy(), cfg.baud)
        .timeout(READ_TIMEOUT)
        .open_native()
        .map_err(|source| DiagError::Open {
            path: path.display().to_string(),
            source,
        })
}

/// Serves the link on `port` (opened by [`open`]) until `stop`. Later
/// errors (a USB adapter unplugged) are retried every second.
pub fn serve(
    cfg: &DiagConfig,
    port: serialport::TTYPort,
    server: &mut Server<'_>,
    stop: &AtomicBool,
) {
    let path = cfg.port.clone().unwrap_or_default();
    let mut port = Some(port);
    let mut buf = [0u8; 512];
    let mut last_byte = Instant::now();
    let mut idle_done = true;
    let mut reported = false;
    while !stop.load(Ordering::Relaxed) {
        let Some(p) = port.as_mut() else {
            std::thread::sleep(Duration::from_secs(1));
            match open(cfg, &path) {
                Ok(p) => {
                    println!("radard: diag: {} open again", path.display());
                    port = Some(p);
                    reported = false;
                }
                Err(e) if !reported => {
                    println!("radard: diag: {e}; retrying every second");
                    reported = true;
                }
                Err(_) => {}
            }
            continue;
        };
        match p.read(&mut buf) {
            Ok(0) => std::thread::sleep(READ_TIMEOUT),
            Ok(n) => {
                server.on_bytes(&buf[..n], p);
                last_byte = Instant::now();
                idle_done = false;
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::TimedOut
                    || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                // A pseudo-terminal whose other end is closed reads EIO until
                // it is opened again: wait, keep the port.
                if e.raw_os_error() == Some(libc::EIO) {
                    std::thread::sleep(Duration::from_millis(50));
                } else {
                    println!("radard: diag: {}: {e}", path.display());
                    port = None;
                    continue;
                }
            }
        }
        let now = Instant::now();
        if !idle_done && now.duration_since(last_byte) >= IDLE_AFTER {
            server.on_idle(p);
            idle_done = true;
        }
        server.tick(now, p);
    }
}

/// The boot slot from the kernel command line (`rauc.slot=`), or "unknown".
pub fn boot_slot() -> String {
    std::fs::read_to_string("/proc/cmdline")
        .ok()
        .and_then(|c| {
            c.split_whitespace()
                .find_map(|w| w.strip_prefix("rauc.slot=").map(str::to_string))
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The loaded kernel module's version (sysfs), or why there is none.
pub fn kmod_version(simulated: bool) -> String {
    if simulated {
        return "none (simulator)".into();
    }
    std::fs::read_to_string("/sys/module/fpga_p2p/version")
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}
