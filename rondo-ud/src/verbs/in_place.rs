//! In-place receive's engine side: the [`Placement`] of a connection received in
//! place, over the flow's landing (`reorder::landing::FlowLanding`, the message
//! buffers the NIC receives payloads into), which it shares with the driver's
//! receive path.
#![allow(unsafe_code)] // one slice over a landing target; the block says why it is sound

use reorder::landing::FlowLanding;
use rondo_proto::placement::Placement;
use std::sync::{Arc, Mutex, MutexGuard};

/// A connection's placement over its flow's landing.
#[derive(Debug)]
pub(crate) struct LandingPlacement {
    pub state: Arc<Mutex<FlowLanding>>,
}

pub(crate) fn lock(state: &Mutex<FlowLanding>) -> MutexGuard<'_, FlowLanding> {
    // A panic while holding it leaves plain data behind; keep going.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for LandingPlacement {
    fn drop(&mut self) {
        // Replaced or its connection gone: no more WRs into its messages.
        lock(&self.state).close();
    }
}

impl Placement for LandingPlacement {
    fn begin(&mut self, msg_id: u64, msg_len: u64) -> bool {
        lock(&self.state).begin(msg_id, msg_len)
    }

    fn target(&mut self, offset: u64, len: usize) -> Option<&mut [u8]> {
        let ptr = lock(&self.state).target(offset, len)?;
        // SAFETY: `len` bytes in bounds of the current message's buffer, with no WR
        // posted over them (FlowLanding::target checked both). The buffer stays
        // allocated while it is current (only released buffers are freed, and it
        // is released by `finish` or `begin`, which need `&mut self` and so end
        // this borrow first); the driver, which posts WRs, does not run while the
        // engine holds this borrow (it calls the engine and waits for it).
        Some(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }

    fn place(&mut self, offset: u64, payload: &[u8]) {
        lock(&self.state).place(offset, payload);
    }

    fn commit(&mut self, offset: u64, len: usize) {
        lock(&self.state).commit(offset, len);
    }

    fn finish(&mut self) -> Vec<u8> {
        lock(&self.state).finish()
    }
}
