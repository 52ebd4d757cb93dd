//! Waiting with a deadline on the compositions' [`Clock`]: [`within`] runs a future until it
//! finishes or the clock passes a duration, whichever is first. (The logs run on no async
//! runtime, and a simulation's clock moves only when the simulation moves it, so the
//! deadline is a sleep of that clock raced against the work.)

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use sealog_logdrive::Clock;

/// `future`'s output, or `None` once `duration` has passed on `clock` (counted from the
/// first time the work is not ready).
pub async fn within<F: Future>(
    clock: &dyn Clock,
    duration: Duration,
    future: F,
) -> Option<F::Output> {
    let mut future = pin!(future);
    // Made on the first pending poll: work that is ready at once (a slot handed out from a
    // window with room) costs no sleep.
    let mut sleep = None;
    poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        let sleep = sleep.get_or_insert_with(|| clock.sleep(duration));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use sealog_logdrive::{wait, SystemClock};

    #[test]
    fn the_work_wins_when_it_is_ready_and_the_deadline_when_it_never_is() {
        let clock = SystemClock;
        assert_eq!(
            wait(within(&clock, Duration::from_secs(5), async { 7 })),
            Some(7)
        );
        let never = std::future::pending::<()>();
        assert_eq!(wait(within(&clock, Duration::from_millis(10), never)), None);
    }
}
