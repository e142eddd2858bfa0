//! The server's side of an RC run: it answers, counts and checks what arrives,
//! returns credits for verified WRITEs, and echoes pings (`perf::slotted`).

use super::nic::RcNic;
use super::run::Side;
use crate::perf::exchange::{Control, Hello, Report};
use crate::perf::slotted;
use anyhow::ensure;

/// Server side of an RC run on `side` (`Err`: this side could not be opened; the
/// client is told why, as when its run cannot be set up here).
pub fn server_on<N: RcNic>(
    side: anyhow::Result<Side<N>>,
    ctrl: &mut Control,
    h: &Hello,
) -> anyhow::Result<Report> {
    let side = side.and_then(|side| {
        ensure!(
            side.params.mtu == h.mtu,
            "this server's port carries {} bytes per packet, the client asked for {}: rerun the client with -m {}",
            side.params.mtu,
            h.mtu,
            side.params.mtu
        );
        Ok(side)
    });
    slotted::server_on(side, ctrl, h)
}
