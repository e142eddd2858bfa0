//! A sender built when it is first needed (issue 10). In an all-to-all half the
//! connections only receive, and a sender with its paths is most of a
//! connection's memory; each event of such a connection read its cold fields
//! to learn that it had nothing to do.
//!
//! Only a sender that, until a message is posted to it, does nothing waits: no
//! timer, nothing to send or probe, no state that a timeout changes, so that
//! built later (for the time the connection started) it is what it would have
//! been ([`may_wait`]; `tests::an_idle_sender_that_waits_does_nothing` checks it).
//! What is asked of it meanwhile is answered as it would answer; questions
//! about its state (its paths, its controller) build it.

use super::Sender;
use crate::config::{FlowConfig, LossRecoveryKind};
use crate::time::Instant;
use crate::transport::Transport;
use std::cell::OnceCell;

/// A connection's sender, built at connect or when first needed. It is kept
/// inline, not boxed: a sending connection's events reach its fields from the
/// connection's address, without waiting for one more pointer to come from
/// memory.
#[derive(Debug)]
pub(crate) struct LazySender {
    built: OnceCell<Sender>,
    /// What it is built from while it is not (dropped once it is, where that
    /// happens with `&mut`).
    recipe: Option<Box<Recipe>>,
}

#[derive(Debug)]
struct Recipe {
    cfg: FlowConfig,
    /// When the connection started: the sender is built for that time.
    created: Instant,
}

/// Whether a sender of `cfg` may wait to be built: Rondo's with selective
/// repeat, whose controller, scheduler and recovery have no timer and change
/// nothing before the first ACK or post.
fn may_wait(cfg: &FlowConfig) -> bool {
    cfg.transport == Transport::RONDO && cfg.loss_recovery == LossRecoveryKind::SelectiveRepeat
}

impl LazySender {
    /// The sender of a flow configured by `cfg`, started at `now`.
    pub(crate) fn new(cfg: &FlowConfig, now: Instant) -> LazySender {
        if may_wait(cfg) {
            LazySender {
                built: OnceCell::new(),
                recipe: Some(Box::new(Recipe {
                    cfg: cfg.clone(),
                    created: now,
                })),
            }
        } else {
            LazySender {
                built: OnceCell::from(Sender::new(cfg, now)),
                recipe: None,
            }
        }
    }

    fn build(recipe: &Option<Box<Recipe>>) -> Sender {
        let r = recipe.as_ref().expect("an unbuilt sender keeps its recipe");
        Sender::new(&r.cfg, r.created)
    }

    /// The sender, built now if it was not.
    pub(crate) fn get(&self) -> &Sender {
        self.built.get_or_init(|| Self::build(&self.recipe))
    }

    /// The sender, built now if it was not.
    pub(crate) fn get_mut(&mut self) -> &mut Sender {
        if self.built.get().is_none() {
            let _ = self.built.set(Self::build(&self.recipe));
        }
        self.recipe = None;
        self.built.get_mut().expect("built above")
    }

    /// The sender if it is built: one that is not has nothing to do.
    pub(crate) fn built(&self) -> Option<&Sender> {
        self.built.get()
    }

    /// The sender if it is built, mutable.
    pub(crate) fn built_mut(&mut self) -> Option<&mut Sender> {
        self.built.get_mut()
    }

    /// The flow's configuration.
    pub(crate) fn cfg(&self) -> &FlowConfig {
        match (self.built.get(), &self.recipe) {
            (Some(s), _) => &s.core.cfg,
            (None, Some(r)) => &r.cfg,
            (None, None) => unreachable!("an unbuilt sender keeps its recipe"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PathSelection;
    use crate::time::Duration;
    use std::collections::VecDeque;

    /// What `LazySender` relies on: a sender that may wait and was never
    /// posted to does nothing and changes nothing, whatever the time.
    #[test]
    fn an_idle_sender_that_waits_does_nothing() {
        let configs = [
            FlowConfig::default(),
            FlowConfig {
                paths: 16,
                ..FlowConfig::default()
            },
            FlowConfig {
                paths: 4,
                path_selection: PathSelection::Random,
                probing: false,
                base_rtt: Some(vec![Duration::from_us(10); 4]),
                ..FlowConfig::default()
            },
        ];
        for cfg in configs {
            assert!(may_wait(&cfg));
            let start = Instant::from_us(3);
            let mut s = Sender::new(&cfg, start);
            let fresh = format!("{s:?}");
            let mut events = VecDeque::new();
            let mut buf = vec![0u8; 4096];
            for us in [3, 4, 50, 1_000, 1_000_000, 100_000_000] {
                let now = Instant::from_us(us);
                assert_eq!(s.poll_timeout(), None);
                s.handle_timeout(now, &mut events);
                assert!(s.poll_transmit(now, &mut buf[..], 1).is_none());
                assert!(!s.wants_probe(now));
                assert!(s.poll_probe(now, &mut buf[..], 1).is_none());
            }
            assert!(events.is_empty());
            assert_eq!(format!("{s:?}"), fresh, "{cfg:?}");
        }
    }
}
