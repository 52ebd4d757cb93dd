//! The store's one way to take a mutex. A panic on another thread (a client's, while it held a
//! LogDrive's mutex) must not make every later operation panic too: the state under a mutex is
//! only ever changed by whole steps that leave it consistent, so a poisoned lock is taken as
//! it is.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, whether or not a panic poisoned it.
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
