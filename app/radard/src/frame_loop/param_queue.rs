//! The loop's parameter queue: changes to what the loop does (the CFAR
//! Pfa, the console's frame lines) come in from another thread (the
//! diagnostics server) through a bounded lock-free queue, and the loop's
//! answers go back through another. The sender validates a change and does
//! the slow part (the CFAR scale factors) on its own thread; the loop
//! applies what is queued between two frames and answers. A change carries
//! its table in a buffer the loop hands back with the answer, so the loop
//! neither allocates nor frees.

use heapless::spsc::{Consumer, Producer, Queue};
use radar_dsp::Backend;

/// Changes in flight at once (heapless queues hold one less than N).
pub const PARAM_QUEUE: usize = 4;

pub type ChangeQueue = Queue<ParamChange, PARAM_QUEUE>;
pub type ReplyQueue = Queue<ParamReply, PARAM_QUEUE>;

/// A parameter the loop applies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoopParam {
    /// A new Pfa; the change's `alpha` holds its scale factors.
    CfarPfa(f64),
    /// The console's frame lines on or off.
    ConsoleSink(bool),
}

#[derive(Debug)]
pub struct ParamChange {
    /// The sender's number for this change (echoed in the reply).
    pub id: u64,
    pub param: LoopParam,
    /// CFAR scale factors per range bin for [`LoopParam::CfarPfa`].
    pub alpha: Option<Box<[f64]>>,
}

#[derive(Debug)]
pub struct ParamReply {
    pub id: u64,
    pub param: LoopParam,
    /// Frames the loop had finished when it applied the change.
    pub at_frame: u64,
    /// None when applied; else why not (the backend refused the table).
    pub refused: Option<&'static str>,
    /// The change's buffer, handed back to be freed off the loop.
    pub alpha: Option<Box<[f64]>>,
}

/// The loop's ends of the two queues: changes in, answers out.
pub struct ParamReceiver<'q> {
    pub changes: Consumer<'q, ParamChange>,
    pub replies: Producer<'q, ParamReply>,
}

/// The sender's ends (the diagnostics server's): changes out, answers in.
pub struct ParamSender<'q> {
    pub changes: Producer<'q, ParamChange>,
    pub replies: Consumer<'q, ParamReply>,
}

/// Splits the two queues into the loop's and the sender's ends.
pub fn split<'q>(
    changes: &'q mut ChangeQueue,
    replies: &'q mut ReplyQueue,
) -> (ParamReceiver<'q>, ParamSender<'q>) {
    let (cp, cc) = changes.split();
    let (rp, rc) = replies.split();
    (
        ParamReceiver {
            changes: cc,
            replies: rp,
        },
        ParamSender {
            changes: cp,
            replies: rc,
        },
    )
}

/// What the loop's own settings are that a change can touch.
pub struct LoopSettings {
    pub print_every: u32,
    /// `print_every` to restore when the console sink is turned on again.
    pub print_every_on: u32,
}

impl ParamReceiver<'_> {
    /// Applies every queued change (called by the loop between frames).
    /// Only waits for nothing: a full reply queue cannot happen, as the
    /// server never has more changes in flight than the queue holds.
    pub fn apply_pending(
        &mut self,
        backend: Option<&mut (dyn Backend + '_)>,
        settings: &mut LoopSettings,
        frames: u64,
    ) {
        let mut backend = backend;
        while let Some(change) = self.changes.dequeue() {
            let refused = match change.param {
                LoopParam::CfarPfa(_) => match (backend.as_deref_mut(), change.alpha.as_deref()) {
                    (Some(b), Some(alpha)) => b
                        .set_cfar_alpha(alpha)
                        .err()
                        .map(|_| "the backend refused the CFAR table"),
                    (None, _) => Some("no processing chain runs (test-pattern content)"),
                    (_, None) => Some("no CFAR table came with the change"),
                },
                LoopParam::ConsoleSink(on) => {
                    settings.print_every = if on {
                        settings.print_every_on.max(1)
                    } else {
                        0
                    };
                    None
                }
            };
            // The queue has room: at most PARAM_QUEUE - 1 changes are in flight.
            let _ = self.replies.enqueue(ParamReply {
                id: change.id,
                param: change.param,
                at_frame: frames,
                refused,
                alpha: change.alpha,
            });
        }
    }
}
