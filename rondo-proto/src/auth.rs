//! Authenticated datagrams (issue 15): a per-connection key agreed from X25519
//! public keys exchanged in the endpoint descriptors, an AEAD tag
//! (ChaCha20-Poly1305) over every datagram's header and payload, and a replay
//! window per path, as IPsec ESP and WireGuard do. `docs/wire.md` ("Authentication
//! trailer") has the layout.
//!
//! The engine never sees a datagram that failed the check: a datapath (or a host
//! wrapper in front of the engine) calls [`Sealer::seal`] on each datagram the
//! engine emitted and [`Sealer::open`] on each one that arrived, and drops and
//! counts what fails ([`AuthError`]).
//!
//! ```
//! use rondo_proto::auth::{AuthMode, KeyPair};
//! let (a, b) = (KeyPair::generate().unwrap(), KeyPair::generate().unwrap());
//! // Each side knows its own flow id and the peer's (from the descriptors).
//! let mut sa = a.agree(7, &b.public(), 9, AuthMode::Auth).unwrap();
//! let mut sb = b.agree(9, &a.public(), 7, AuthMode::Auth).unwrap();
//! let mut d = vec![0u8; 64 + rondo_proto::auth::TRAILER_LEN];
//! d[3] = 6; // header_words of a 24-byte header
//! let n = sa.seal(&mut d, 64).unwrap();
//! assert_eq!(sb.open(&mut d[..n]).unwrap(), 64);
//! assert!(sb.open(&mut d[..n]).is_err()); // a replay
//! ```

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Nonce, Tag};
use hkdf::Hkdf;
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};

/// Bytes the authentication trailer adds to every datagram: the 64-bit per-path
/// sequence number and the 16-byte tag.
pub const TRAILER_LEN: usize = 8 + TAG_LEN;
/// Bytes of the AEAD tag.
pub const TAG_LEN: usize = 16;
/// Sequence numbers a path's replay window remembers below the highest one seen.
pub const REPLAY_WINDOW: u64 = 1024;
/// Bytes of an X25519 public key in a descriptor.
pub const PUBLIC_KEY_LEN: usize = 32;

/// Common header bytes the seal reads (path at 4..6, header_words at 3).
const MIN_HEADER: usize = 24;

/// What a connection does to its datagrams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AuthMode {
    /// No trailer: the behaviour before issue 15 (for measurement, the simulator
    /// and the in-memory fabric).
    None,
    /// Header and payload authenticated, sent in clear (the default).
    #[default]
    Auth,
    /// Header authenticated, payload encrypted too (as PSP or UET's TSS).
    Encrypt,
}

impl AuthMode {
    /// Its number in descriptors: 0 none, 1 auth, 2 encrypt.
    pub fn code(self) -> u8 {
        match self {
            AuthMode::None => 0,
            AuthMode::Auth => 1,
            AuthMode::Encrypt => 2,
        }
    }

    /// The mode numbered `code` ([`AuthMode::code`]).
    pub fn from_code(code: u8) -> Option<AuthMode> {
        match code {
            0 => Some(AuthMode::None),
            1 => Some(AuthMode::Auth),
            2 => Some(AuthMode::Encrypt),
            _ => None,
        }
    }

    /// Bytes this mode adds to each datagram.
    pub fn overhead(self) -> usize {
        match self {
            AuthMode::None => 0,
            AuthMode::Auth | AuthMode::Encrypt => TRAILER_LEN,
        }
    }

    /// Its name on command lines: `none`, `auth`, `encrypt`.
    pub fn name(self) -> &'static str {
        match self {
            AuthMode::None => "none",
            AuthMode::Auth => "auth",
            AuthMode::Encrypt => "encrypt",
        }
    }
}

impl std::str::FromStr for AuthMode {
    type Err = String;
    fn from_str(s: &str) -> Result<AuthMode, String> {
        match s {
            "none" => Ok(AuthMode::None),
            "auth" => Ok(AuthMode::Auth),
            "encrypt" => Ok(AuthMode::Encrypt),
            _ => Err(format!("{s:?}: give auth, encrypt or none")),
        }
    }
}

/// Why a datagram was not sealed or not accepted. Received datagrams that fail
/// are dropped and counted ([`AuthStats`]), never answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// Shorter than a common header plus the trailer, or a header length that
    /// does not fit (`header_words`).
    #[error("datagram too short for a header and the authentication trailer")]
    Truncated,
    /// The tag does not match: forged, mangled, or sealed with another key or mode.
    #[error("authentication tag does not match (forged, mangled, or another key)")]
    BadTag,
    /// The sequence number was already accepted on this path, or lies below the
    /// replay window.
    #[error("replayed datagram (sequence number already seen or below the window)")]
    Replayed,
    /// The path's 64-bit sequence space is used up: the connection must be re-keyed.
    #[error("sequence numbers of this path are exhausted; reconnect")]
    SequenceExhausted,
    /// The peer's public key gives no shared secret (a low-order point).
    #[error("the peer's public key is invalid (low-order point)")]
    WeakPeerKey,
    /// The OS random source could not be read for a key pair.
    #[error("the OS random source failed while generating a key pair")]
    Rng,
}

/// Counters of a datapath's authentication, one per [`AuthError`] that a
/// received datagram can fail with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuthStats {
    /// Datagrams sealed.
    pub sealed: u64,
    /// Datagrams accepted.
    pub opened: u64,
    /// Dropped: too short for the trailer.
    pub truncated: u64,
    /// Dropped: tag mismatch.
    pub bad_tag: u64,
    /// Dropped: replayed.
    pub replayed: u64,
    /// Datagrams not sent because a path's sequence numbers ran out.
    pub seal_failed: u64,
}

impl AuthStats {
    /// Counts the outcome of one [`Sealer::open`].
    pub fn count_open(&mut self, r: &Result<usize, AuthError>) {
        match r {
            Ok(_) => self.opened += 1,
            Err(AuthError::Truncated) => self.truncated += 1,
            Err(AuthError::Replayed) => self.replayed += 1,
            Err(_) => self.bad_tag += 1,
        }
    }

    /// Datagrams dropped by the check.
    pub fn dropped(&self) -> u64 {
        self.truncated + self.bad_tag + self.replayed
    }
}

/// One side's X25519 key pair, made per connection (or per context) from the OS
/// CSPRNG; its public half goes into the endpoint descriptor.
pub struct KeyPair {
    secret: StaticSecret,
    public: PublicKey,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPair")
            .field("public", &self.public.as_bytes())
            .finish_non_exhaustive()
    }
}

impl KeyPair {
    /// A fresh key pair from the OS CSPRNG.
    pub fn generate() -> Result<KeyPair, AuthError> {
        let mut b = [0u8; 32];
        getrandom::fill(&mut b).map_err(|_| AuthError::Rng)?;
        Ok(KeyPair::from_secret_bytes(b))
    }

    /// The key pair of a given secret (tests and deterministic tools only).
    pub fn from_secret_bytes(b: [u8; 32]) -> KeyPair {
        let secret = StaticSecret::from(b);
        let public = PublicKey::from(&secret);
        KeyPair { secret, public }
    }

    /// The public key, for the descriptor.
    pub fn public(&self) -> [u8; PUBLIC_KEY_LEN] {
        *self.public.as_bytes()
    }

    /// The connection's keys: X25519 with the peer's public key, then HKDF-SHA256
    /// binding both public keys, both flow ids and the mode, one key per
    /// direction. `local_flow` is this side's flow id (the one in datagrams that
    /// arrive here), `peer_flow` the peer's.
    pub fn agree(
        &self,
        local_flow: u32,
        peer_public: &[u8; PUBLIC_KEY_LEN],
        peer_flow: u32,
        mode: AuthMode,
    ) -> Result<Sealer, AuthError> {
        let peer = PublicKey::from(*peer_public);
        let shared = self.secret.diffie_hellman(&peer);
        if !shared.was_contributory() {
            return Err(AuthError::WeakPeerKey);
        }
        let hk = Hkdf::<Sha256>::new(Some(b"rondo wire v1 auth"), shared.as_bytes());
        let key = |from: &[u8; 32], to: &[u8; 32], ff: u32, tf: u32| {
            let mut info = Vec::with_capacity(80);
            info.extend_from_slice(b"rondo key");
            info.extend_from_slice(from);
            info.extend_from_slice(to);
            info.extend_from_slice(&ff.to_be_bytes());
            info.extend_from_slice(&tf.to_be_bytes());
            info.push(mode.code());
            let mut k = [0u8; 32];
            // 32 bytes is far below HKDF-SHA256's limit of 8160: cannot fail.
            hk.expand(&info, &mut k).map_err(|_| AuthError::Rng)?;
            Ok::<_, AuthError>(ChaCha20Poly1305::new(&k.into()))
        };
        let mine = self.public();
        Ok(Sealer {
            mode,
            tx: key(&mine, peer_public, local_flow, peer_flow)?,
            rx: key(peer_public, &mine, peer_flow, local_flow)?,
            tx_seq: Vec::new(),
            rx_windows: Vec::new(),
        })
    }
}

/// Seals and opens one connection's datagrams: its two directional keys, the
/// next sequence number of each path and each path's replay window.
pub struct Sealer {
    mode: AuthMode,
    tx: ChaCha20Poly1305,
    rx: ChaCha20Poly1305,
    tx_seq: Vec<u64>,
    rx_windows: Vec<ReplayWindow>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// The nonce of sequence number `seq` on `path`: 2 zero bytes, the path, the
/// sequence number, big-endian. Unique per key: each direction has its own key
/// and each path its own counter, never reused.
fn nonce(path: u16, seq: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[2..4].copy_from_slice(&path.to_be_bytes());
    n[4..].copy_from_slice(&seq.to_be_bytes());
    n.into()
}

/// The header length (`header_words * 4`) of a datagram of `len` bytes, checked
/// against the length.
fn header_len(d: &[u8], len: usize) -> Result<usize, AuthError> {
    let h = usize::from(d[3]) * 4;
    if h < MIN_HEADER || h > len {
        return Err(AuthError::Truncated);
    }
    Ok(h)
}

impl Sealer {
    /// The connection's mode.
    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// Seals the datagram in `buf[..len]` in place (with [`AuthMode::Encrypt`] its
    /// payload is encrypted) and appends the trailer; returns the new length,
    /// `len` for [`AuthMode::None`]. `buf` must hold `len + TRAILER_LEN` bytes.
    pub fn seal(&mut self, buf: &mut [u8], len: usize) -> Result<usize, AuthError> {
        if self.mode == AuthMode::None {
            return Ok(len);
        }
        if len < MIN_HEADER || buf.len() < len + TRAILER_LEN {
            return Err(AuthError::Truncated);
        }
        let path = u16::from_be_bytes([buf[4], buf[5]]);
        let i = usize::from(path);
        if self.tx_seq.len() <= i {
            self.tx_seq.resize(i + 1, 0);
        }
        // Sequence numbers start at 1; u64::MAX is never used.
        let seq = self.tx_seq[i]
            .checked_add(1)
            .ok_or(AuthError::SequenceExhausted)?;
        if seq == u64::MAX {
            return Err(AuthError::SequenceExhausted);
        }
        self.tx_seq[i] = seq;
        let (body, rest) = buf.split_at_mut(len);
        let tag = match self.mode {
            AuthMode::Encrypt => {
                let h = header_len(body, len)?;
                let (head, payload) = body.split_at_mut(h);
                self.tx
                    .encrypt_in_place_detached(&nonce(path, seq), head, payload)
            }
            _ => self
                .tx
                .encrypt_in_place_detached(&nonce(path, seq), body, &mut []),
        }
        .map_err(|_| AuthError::Truncated)?;
        rest[..8].copy_from_slice(&seq.to_be_bytes());
        rest[8..TRAILER_LEN].copy_from_slice(&tag);
        Ok(len + TRAILER_LEN)
    }

    /// Checks the datagram `d` (decrypting its payload in place with
    /// [`AuthMode::Encrypt`]) and its sequence number against the path's replay
    /// window; returns the length without the trailer, the datagram to hand the
    /// engine. A datagram that fails changes no state.
    pub fn open(&mut self, d: &mut [u8]) -> Result<usize, AuthError> {
        if self.mode == AuthMode::None {
            return Ok(d.len());
        }
        let (path, seq, len) = self.precheck(d)?;
        let (body, trailer) = d.split_at_mut(len);
        let tag = Tag::clone_from_slice(&trailer[8..TRAILER_LEN]);
        match self.mode {
            AuthMode::Encrypt => {
                // A header length that does not fit was not sealed by the peer.
                let h = header_len(body, len).map_err(|_| AuthError::BadTag)?;
                let (head, payload) = body.split_at_mut(h);
                self.rx
                    .decrypt_in_place_detached(&nonce(path, seq), head, payload, &tag)
            }
            _ => self
                .rx
                .decrypt_in_place_detached(&nonce(path, seq), body, &mut [], &tag),
        }
        .map_err(|_| AuthError::BadTag)?;
        self.rx_windows[usize::from(path)].accept(seq);
        Ok(len)
    }

    /// [`Sealer::open`] for a datagram that cannot be changed ([`AuthMode::Auth`]
    /// and [`AuthMode::None`] only: an encrypted one is [`AuthError::BadTag`]).
    pub fn verify(&mut self, d: &[u8]) -> Result<usize, AuthError> {
        match self.mode {
            AuthMode::None => Ok(d.len()),
            AuthMode::Encrypt => Err(AuthError::BadTag),
            AuthMode::Auth => {
                let (path, seq, len) = self.precheck(d)?;
                let tag = Tag::clone_from_slice(&d[len + 8..]);
                self.rx
                    .decrypt_in_place_detached(&nonce(path, seq), &d[..len], &mut [], &tag)
                    .map_err(|_| AuthError::BadTag)?;
                self.rx_windows[usize::from(path)].accept(seq);
                Ok(len)
            }
        }
    }

    /// Length, path and sequence number, with the replay check done before the
    /// (costlier) tag check, as ESP does.
    fn precheck(&mut self, d: &[u8]) -> Result<(u16, u64, usize), AuthError> {
        if d.len() < MIN_HEADER + TRAILER_LEN {
            return Err(AuthError::Truncated);
        }
        let len = d.len() - TRAILER_LEN;
        let path = u16::from_be_bytes([d[4], d[5]]);
        let mut s = [0u8; 8];
        s.copy_from_slice(&d[len..len + 8]);
        let seq = u64::from_be_bytes(s);
        let i = usize::from(path);
        if self.rx_windows.len() <= i {
            self.rx_windows.resize(i + 1, ReplayWindow::default());
        }
        if seq == 0 || !self.rx_windows[i].fresh(seq) {
            return Err(AuthError::Replayed);
        }
        Ok((path, seq, len))
    }
}

/// A sliding window over a path's sequence numbers (RFC 4303 §3.4.3): the highest
/// accepted one and a bitmap of the [`REPLAY_WINDOW`] below it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    top: u64,
    bits: [u64; (REPLAY_WINDOW / 64) as usize],
}

impl ReplayWindow {
    /// True when `seq` has not been accepted and is not below the window.
    pub fn fresh(&self, seq: u64) -> bool {
        if seq > self.top {
            return true;
        }
        let back = self.top - seq;
        if back >= REPLAY_WINDOW {
            return false;
        }
        let bit = (seq % REPLAY_WINDOW) as usize;
        self.bits[bit / 64] & (1 << (bit % 64)) == 0
    }

    /// Records `seq` as accepted (after its tag was checked).
    pub fn accept(&mut self, seq: u64) {
        if seq > self.top {
            let shift = seq - self.top;
            if shift >= REPLAY_WINDOW {
                self.bits = Default::default();
            } else {
                for s in self.top + 1..seq {
                    let bit = (s % REPLAY_WINDOW) as usize;
                    self.bits[bit / 64] &= !(1 << (bit % 64));
                }
            }
            self.top = seq;
        }
        let bit = (seq % REPLAY_WINDOW) as usize;
        self.bits[bit / 64] |= 1 << (bit % 64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(mode: AuthMode) -> (Sealer, Sealer) {
        let a = KeyPair::from_secret_bytes([1; 32]);
        let b = KeyPair::from_secret_bytes([2; 32]);
        (
            a.agree(10, &b.public(), 20, mode).unwrap(),
            b.agree(20, &a.public(), 10, mode).unwrap(),
        )
    }

    /// A 48-byte header (header_words 12) on `path` and a payload.
    fn datagram(path: u16, payload: &[u8]) -> (Vec<u8>, usize) {
        let mut d = vec![0u8; 48];
        d[0] = 1;
        d[1] = 1;
        d[3] = 12;
        d[4..6].copy_from_slice(&path.to_be_bytes());
        d.extend_from_slice(payload);
        let n = d.len();
        d.resize(n + TRAILER_LEN, 0);
        (d, n)
    }

    #[test]
    fn auth_round_trip_leaves_the_payload_in_clear_and_encrypt_hides_it() {
        for mode in [AuthMode::Auth, AuthMode::Encrypt] {
            let (mut a, mut b) = pair(mode);
            let (mut d, n) = datagram(3, b"hello rondo");
            let orig = d[..n].to_vec();
            let m = a.seal(&mut d, n).unwrap();
            assert_eq!(m, n + TRAILER_LEN);
            assert_eq!(d[..n] == orig[..], mode == AuthMode::Auth, "{mode:?}");
            assert_eq!(b.open(&mut d[..m]), Ok(n));
            assert_eq!(d[..n], orig[..]);
        }
    }

    #[test]
    fn every_mangled_byte_and_a_replay_are_rejected_without_changing_state() {
        for mode in [AuthMode::Auth, AuthMode::Encrypt] {
            let (mut a, mut b) = pair(mode);
            let (mut d, n) = datagram(0, &[7u8; 40]);
            let m = a.seal(&mut d, n).unwrap();
            for i in 0..m {
                let mut x = d[..m].to_vec();
                x[i] ^= 0x40;
                let r = b.open(&mut x);
                assert!(
                    r == Err(AuthError::BadTag) || r == Err(AuthError::Replayed),
                    "{mode:?} byte {i}: {r:?}"
                );
            }
            let mut x = d[..m].to_vec();
            assert_eq!(b.open(&mut x), Ok(n));
            let mut x = d[..m].to_vec();
            assert_eq!(b.open(&mut x), Err(AuthError::Replayed));
            assert_eq!(b.open(&mut d[..10]), Err(AuthError::Truncated));
        }
    }

    #[test]
    fn a_wrong_key_mode_or_direction_is_rejected() {
        let (mut a, _) = pair(AuthMode::Auth);
        let c = KeyPair::from_secret_bytes([3; 32]);
        let b = KeyPair::from_secret_bytes([2; 32]);
        let mut wrong = b.agree(20, &c.public(), 10, AuthMode::Auth).unwrap();
        let (_, mut other_mode) = pair(AuthMode::Encrypt);
        let (mut d, n) = datagram(1, b"x");
        let m = a.seal(&mut d, n).unwrap();
        assert_eq!(wrong.open(&mut d[..m].to_vec()), Err(AuthError::BadTag));
        assert_eq!(
            other_mode.open(&mut d[..m].to_vec()),
            Err(AuthError::BadTag)
        );
        // The sender's own key does not open what it sent (keys per direction).
        assert_eq!(a.open(&mut d[..m].to_vec()), Err(AuthError::BadTag));
    }

    #[test]
    fn verify_matches_open_in_auth_mode() {
        let (mut a, mut b) = pair(AuthMode::Auth);
        let (mut d, n) = datagram(2, b"abc");
        let m = a.seal(&mut d, n).unwrap();
        assert_eq!(b.verify(&d[..m]), Ok(n));
        assert_eq!(b.verify(&d[..m]), Err(AuthError::Replayed));
    }

    #[test]
    fn low_order_public_key_is_refused() {
        let a = KeyPair::from_secret_bytes([1; 32]);
        assert_eq!(
            a.agree(1, &[0u8; 32], 2, AuthMode::Auth).err(),
            Some(AuthError::WeakPeerKey)
        );
    }

    #[test]
    fn replay_window_accepts_reordering_within_and_refuses_below() {
        let mut w = ReplayWindow::default();
        for s in [5u64, 3, 4, 1, 2000, 1500, 977] {
            assert!(w.fresh(s), "{s}");
            w.accept(s);
            assert!(!w.fresh(s), "{s} again");
        }
        assert!(!w.fresh(976), "below the window");
        assert!(w.fresh(1999));
        w.accept(1999 + 5000);
        assert!(!w.fresh(1999));
        assert!(w.fresh(1999 + 4999));
    }

    #[test]
    fn none_mode_passes_datagrams_unchanged() {
        let (mut a, mut b) = pair(AuthMode::None);
        let (mut d, n) = datagram(0, b"plain");
        assert_eq!(a.seal(&mut d, n), Ok(n));
        assert_eq!(b.open(&mut d[..n]), Ok(n));
    }
}
