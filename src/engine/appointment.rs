//! Appointments on a starved key (docs/SPEC.md, 11.11): the object's queue of callers, kept
//! as one time per key, and the turn a holder that asks for them gets. A turn grants nothing:
//! it only tells the holder when to call again.

use super::bucket::Bucket;
use super::leasing::lease_units;
use super::limiter::Limiter;
use super::share::main_period_beside;
use super::time::Instant;
use super::view::View;

impl Limiter {
    /// The appointment of a holder that asked for appointments, after its call left the main
    /// bucket at `state` and moved `moved` units into its lease (`denied`: its cost was
    /// denied): nanoseconds until its turn in the key's queue, when the key is starved or its
    /// queue has not ended (docs/SPEC.md, 11.11).
    pub(super) fn appointment(
        &mut self,
        key: &[u8],
        view: &View,
        (state, moved): (Option<Bucket>, u64),
        denied: bool,
        now: Instant,
    ) -> Option<u64> {
        let options = &view.options;
        let queue = self.leases.queue_end(key).filter(|&end| end > now);
        let left = state.map_or(options.capacity_units(), |b| b.units());
        let room = options.capacity_units().saturating_sub(view.leased);
        if left >= options.unit() && left >= room / 4 {
            // Tokens left over: the queue's callers did not come for them, and it ends.
            if queue.is_some() {
                self.leases.set_queue(key, now);
            }
            return None;
        }
        if queue.is_none() {
            // Starved: less than a token left beside the lease just granted (a fraction of
            // each makes one at the holder's next call), and not because plain leases hold
            // the tokens.
            let plain: u64 = view
                .live
                .iter()
                .filter(|l| !l.is_share())
                .map(|l| lease_units(l, options))
                .sum();
            if !(plain < room / 2 && (denied || left.saturating_add(moved) < options.unit())) {
                return None;
            }
        }
        let period =
            main_period_beside(&view.live, options, now).unwrap_or(options.interval_nanos());
        let turn = u64::try_from(period).unwrap_or(u64::MAX);
        let at = queue.unwrap_or(now).saturating_add(turn);
        self.leases.set_queue(key, at);
        Some(at.saturating_since(now))
    }
}
