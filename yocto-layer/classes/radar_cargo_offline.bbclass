# Build a Cargo workspace offline from crates that bitbake fetched.
#
# meta-rust-bin's cargo_bin class runs a plain `cargo build` with
# CARGO_HOME = ${WORKDIR}/cargo_home. bitbake's crate fetcher unpacks each
# crate:// SRC_URI entry into ${WORKDIR}/cargo_home/bitbake/<name>-<version>/
# with a .cargo-checksum.json (the .crate's sha256, checked at fetch time
# against SRC_URI[<name>-<version>.sha256sum]). That is the layout of a Cargo
# directory source: this class points crates.io at it and runs cargo with
# --frozen (Cargo.lock as is, no network), so do_compile never downloads.
inherit cargo_bin

EXTRA_CARGO_FLAGS += "--frozen"

do_configure:append() {
    if [ ! -d "${CARGO_HOME}/bitbake" ]; then
        bbfatal "no crates in ${CARGO_HOME}/bitbake: SRC_URI needs the crate:// entries (radar-crates.inc)"
    fi
    cat >"${CARGO_HOME}/config.toml" <<EOF_CONFIG
[source.bitbake]
directory = "${CARGO_HOME}/bitbake"

[source.crates-io]
replace-with = "bitbake"

[net]
offline = true
EOF_CONFIG
}
