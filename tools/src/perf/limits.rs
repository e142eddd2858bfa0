//! What one `rondo perf server` gives its clients: the memory one run may take, how
//! many runs go at once, and how long a client that is not one waits for its turn.

use super::exchange::{Hello, Refusal, Transport};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Default `--max-bytes-per-client`: one message of the largest size (`-s 1 GiB`)
/// with its context fits, two do not.
pub const DEFAULT_MAX_BYTES: u64 = 3 << 29;
/// Default `--max-clients`.
pub const DEFAULT_MAX_CLIENTS: u32 = 4;
/// Connections the server holds at once beyond its runs: clients still sending their
/// hello or waiting for a run slot. More are closed at once.
pub const MAX_WAITING: usize = 64;

/// Bytes the server side of run `h` allocates for it: the message slots of every
/// queue pair and, for Rondo, the context's reorder buffer; the allocations that
/// grow with what a hello asks for (sockets, completion queues and headers do not).
pub fn server_bytes(h: &Hello) -> u64 {
    let slots = super::rondo::slots(h) as u64;
    let message_slots = u64::from(h.qps)
        .saturating_mul(slots)
        .saturating_mul(h.size);
    match h.transport {
        Transport::Engine(_) => {
            let reorder = match h.reorder_buffer {
                0 => rondo_verbs::ContextAttr::default().reorder_buffer_bytes as u64,
                n => n,
            };
            message_slots.saturating_add(reorder)
        }
        Transport::Rc => message_slots,
        // One datagram buffer per path; messages are not held.
        Transport::RawUdp => u64::from(h.paths).saturating_mul(u64::from(h.mtu)),
    }
}

/// Refuses run `h` when it needs more than `cap` bytes of the server's memory.
pub fn check_memory(h: &Hello, cap: u64) -> Result<(), Refusal> {
    let needed = server_bytes(h);
    if needed > cap {
        return Err(Refusal::Memory { needed, cap });
    }
    Ok(())
}

/// The server's run slots: at most `max` runs at once.
pub struct RunSlots {
    running: Mutex<u32>,
    freed: Condvar,
    max: u32,
}

/// One run's slot, given back when dropped.
pub struct RunSlot(Arc<RunSlots>);

impl RunSlots {
    /// Slots for `max` runs at once (at least one).
    pub fn new(max: u32) -> Arc<RunSlots> {
        Arc::new(RunSlots {
            running: Mutex::new(0),
            freed: Condvar::new(),
            max: max.max(1),
        })
    }

    /// A slot, waiting at most `wait` for a run to end; [`Refusal::Busy`] when none did.
    pub fn take(self: &Arc<Self>, wait: Duration) -> Result<RunSlot, Refusal> {
        let start = Instant::now();
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        while *running >= self.max {
            let left = wait.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(Refusal::Busy {
                    running: *running,
                    waited_ms: wait.as_millis() as u64,
                });
            }
            running = self
                .freed
                .wait_timeout(running, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *running += 1;
        Ok(RunSlot(Arc::clone(self)))
    }
}

impl Drop for RunSlot {
    fn drop(&mut self) {
        let mut running = self
            .0
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *running -= 1;
        self.0.freed.notify_one();
    }
}

/// Parses a byte count with an optional binary suffix: `1048576`, `512K`, `64M`,
/// `1.5G` (K, M, G, T: powers of 1024; a trailing `B` or `iB` is allowed).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let upper = s.trim().to_ascii_uppercase();
    let t = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (number, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("{s:?}: unknown unit {c:?}; use K, M, G or T")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a byte count (examples: 1048576, 512K, 1.5G)"))?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes >= u64::MAX as f64 {
        return Err(format!("{s:?} is out of range: give at least 1 byte"));
    }
    Ok(bytes as u64)
}

/// Parses a positive number of seconds, at most an hour (`--control-timeout`,
/// `--stall-timeout`).
pub fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v.is_finite() && v > 0.0 && v <= 3600.0) {
        return Err(format!(
            "{s:?} is out of range: use above 0, at most 3600 seconds"
        ));
    }
    Ok(Duration::from_secs_f64(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse_with_binary_units_and_refuse_nonsense() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("512K"), Ok(512 << 10));
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("1.5G"), Ok(3 << 29));
        assert_eq!(parse_bytes("2gb"), Ok(2 << 30));
        for bad in ["", "0", "-1", "1X", "G", "abc", "1e30T"] {
            assert!(parse_bytes(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn seconds_parse_within_range() {
        assert_eq!(parse_seconds("0.25"), Ok(Duration::from_millis(250)));
        for bad in ["0", "-1", "nan", "inf", "3601", "x"] {
            assert!(parse_seconds(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn a_slot_is_refused_after_the_wait_and_given_back_on_drop() {
        let slots = RunSlots::new(1);
        let first = slots.take(Duration::ZERO).unwrap();
        assert_eq!(
            slots.take(Duration::from_millis(20)).err(),
            Some(Refusal::Busy {
                running: 1,
                waited_ms: 20
            })
        );
        drop(first);
        assert!(slots.take(Duration::ZERO).is_ok());
    }

    #[test]
    fn a_waiting_client_gets_the_slot_a_run_gives_back() {
        let slots = RunSlots::new(1);
        let first = slots.take(Duration::ZERO).unwrap();
        let other = Arc::clone(&slots);
        let waiter = std::thread::spawn(move || other.take(Duration::from_secs(60)).is_ok());
        drop(first);
        assert!(waiter.join().unwrap());
    }
}
