//! KmodSource where the module is absent or the node is something else:
//! clear errors naming the device and the operation, never a panic.

use tegra_p2p::*;

fn ring() -> RingMemory {
    RingMemory::new(&RingConfig::new(2, 4096).with_memory(MemoryKind::Host)).unwrap()
}

#[test]
fn missing_device_node() {
    let e = KmodSource::open_path("/dev/fpga-p2p-does-not-exist", ring(), 1024).unwrap_err();
    assert!(matches!(e, Error::NoDevice { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("/dev/fpga-p2p-does-not-exist") && msg.contains("module"),
        "{msg}"
    );
    // The default index path when no module is loaded here.
    if !std::path::Path::new("/dev/fpga-p2p0").exists() {
        assert!(matches!(
            KmodSource::open(0, ring(), 1024),
            Err(Error::NoDevice { .. })
        ));
    }
}

#[test]
fn a_node_that_is_not_fpga_p2p() {
    // /dev/null accepts open but not our ioctls: reported as a uapi mismatch.
    let e = KmodSource::open_path("/dev/null", ring(), 1024).unwrap_err();
    assert!(matches!(e, Error::UapiMismatch { found: 0, .. }), "{e:?}");
    assert!(e.to_string().contains("/dev/null"));
}

#[test]
fn a_directory_is_an_open_error() {
    let e = KmodSource::open_path("/tmp", ring(), 1024).unwrap_err();
    match &e {
        Error::Device { op, device, .. } => {
            assert_eq!(*op, "open");
            assert_eq!(&**device, "/tmp");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn permission_denied_is_named() {
    // Root bypasses file modes; only meaningful as an unprivileged user.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let e = Error::from_errno(&"/dev/fpga-p2p0".into(), "open", nix::errno::Errno::EACCES);
        assert!(matches!(e, Error::PermissionDenied { .. }));
        assert!(e.to_string().contains("permission denied"));
        return;
    }
    let dir = std::env::temp_dir().join(format!("p2p-perm-{}", std::process::id()));
    std::fs::write(&dir, b"").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o000)).unwrap();
    let e = KmodSource::open_path(&dir, ring(), 1024).unwrap_err();
    let _ = std::fs::remove_file(&dir);
    assert!(matches!(e, Error::PermissionDenied { .. }), "{e:?}");
}

#[test]
fn device_layer_reports_errno_and_operation() {
    let dev = kmod::Device::open("/dev/null").unwrap();
    let e = dev.counters().unwrap_err();
    assert_eq!(e.errno(), Some(nix::errno::Errno::ENOTTY));
    assert!(e.to_string().contains("COUNTERS"), "{e}");
    let e = dev.release(0, 0).unwrap_err();
    assert!(e.to_string().starts_with("/dev/null: RELEASE"), "{e}");
}
