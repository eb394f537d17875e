//! The one-item hand-over between the calling thread and a worker.

use std::sync::{Condvar, Mutex, PoisonError};

/// A one-item hand-over between two threads: a mutex and a condition
/// variable (futex waits: no allocation, ever, unlike a channel's lazily
/// built waiter lists). Closing it wakes the other side for good.
pub(super) struct Mailbox<T> {
    state: Mutex<MailboxState<T>>,
    ready: Condvar,
}

enum MailboxState<T> {
    Empty,
    Full(T),
    Closed,
}

impl<T> Mailbox<T> {
    pub(super) fn new() -> Self {
        Mailbox {
            state: Mutex::new(MailboxState::Empty),
            ready: Condvar::new(),
        }
    }

    /// Leave `item`; gives it back when the mailbox is closed.
    pub(super) fn put(&self, item: T) -> Result<(), T> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*s, MailboxState::Closed) {
            return Err(item);
        }
        *s = MailboxState::Full(item);
        drop(s);
        self.ready.notify_one();
        Ok(())
    }

    /// Wait for an item; `None` once the mailbox is closed.
    pub(super) fn take(&self) -> Option<T> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match std::mem::replace(&mut *s, MailboxState::Empty) {
                MailboxState::Full(item) => return Some(item),
                MailboxState::Closed => {
                    *s = MailboxState::Closed;
                    return None;
                }
                MailboxState::Empty => {
                    s = self.ready.wait(s).unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }

    /// The item if one is there (`Err(())` once the mailbox is closed);
    /// never waits for one.
    pub(super) fn try_take(&self) -> Result<Option<T>, ()> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *s, MailboxState::Empty) {
            MailboxState::Full(item) => Ok(Some(item)),
            MailboxState::Closed => {
                *s = MailboxState::Closed;
                Err(())
            }
            MailboxState::Empty => Ok(None),
        }
    }

    pub(super) fn close(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        *s = MailboxState::Closed;
        drop(s);
        self.ready.notify_all();
    }
}
