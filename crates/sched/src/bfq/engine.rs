//! B-WF2Q+, the scheduling engine of BFQ (`block/bfq-wf2q.c`): which of the backlogged
//! entities gets the device next, so that each receives service in proportion to its weight.
//!
//! Every active entity has a virtual start time S and finish time F. When it becomes
//! backlogged, S = max(V, its previous F) (an entity does not bank service while idle) and
//! F = S + budget / weight. The system virtual time V advances by the service given divided by
//! the sum of the active weights. Among the *eligible* entities (S <= V) the one with the
//! smallest F is served; when none is eligible, V jumps to the smallest S. When an entity's
//! turn ends it is charged what it actually used (F = S + used / weight), and if it is still
//! backlogged it starts its next turn at that F.
//!
//! An entity whose turn ends with nothing left to do goes to the tree's *idle* set if its
//! finish time is still ahead of V (`bfq_idle_insert`): its weight stays in the sum V
//! advances by, and it is still "on the tree" (`on_st_or_in_serv`, which
//! `bfqq_request_over_limit` asks), until V passes its finish time and it is forgotten, one
//! per update of V (`bfq_forget_idle`), or it becomes backlogged again. So a queue that
//! empties now and then keeps its share of V's pace and of the scheduler's tags, and V
//! does not rush ahead of it while it thinks.
//!
//! Times are fixed-point (`SCALE` units per sector at weight 1) so the engine is exact and
//! deterministic; ids are small integers chosen by the caller.

use std::collections::BTreeSet;

/// Virtual-time units per sector of service at weight 1.
pub const SCALE: u64 = 1 << 16;

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct Stamp {
    start: u64,
    finish: u64,
    weight: u32,
    /// Finish time of the entity's last turn, kept while it is idle.
    last_finish: u64,
    active: bool,
    /// On the idle tree: not backlogged, its weight still in `wsum`, keyed by `finish`.
    idle: bool,
}

/// Timestamps by entity id, in two dense tables: ids below `HIGH_BIT` (queues) and ids with
/// it set (groups), so a lookup is an index, not a tree walk.
#[derive(Default, Debug)]
struct Stamps {
    low: Vec<Option<Stamp>>,
    high: Vec<Option<Stamp>>,
}

const HIGH_BIT: u32 = 1 << 31;

impl Stamps {
    fn slot(&self, id: u32) -> Option<&Option<Stamp>> {
        let (t, i) = if id & HIGH_BIT == 0 {
            (&self.low, id)
        } else {
            (&self.high, id & !HIGH_BIT)
        };
        t.get(i as usize)
    }
    fn slot_mut(&mut self, id: u32) -> &mut Option<Stamp> {
        let (t, i) = if id & HIGH_BIT == 0 {
            (&mut self.low, id)
        } else {
            (&mut self.high, id & !HIGH_BIT)
        };
        let i = i as usize;
        if t.len() <= i {
            t.resize(i + 1, None);
        }
        &mut t[i]
    }
    fn get(&self, id: u32) -> Option<&Stamp> {
        self.slot(id).and_then(|s| s.as_ref())
    }
    fn insert(&mut self, id: u32, st: Stamp) {
        *self.slot_mut(id) = Some(st);
    }
    fn remove(&mut self, id: u32) {
        if self.slot(id).is_some() {
            *self.slot_mut(id) = None;
        }
    }
    fn values(&self) -> impl Iterator<Item = &Stamp> {
        self.low.iter().chain(self.high.iter()).flatten()
    }
}

/// One service tree: the active entities of one class (or of one group), its idle ones,
/// and its virtual time.
#[derive(Default, Debug)]
pub struct ServiceTree {
    vtime: u64,
    wsum: u64,
    stamps: Stamps,
    /// Eligible entities by (finish, id).
    eligible: BTreeSet<(u64, u32)>,
    /// Not yet eligible entities by (start, id).
    waiting: BTreeSet<(u64, u32)>,
    /// Idle entities by (finish, id) (`st->idle`, `first_idle` and `last_idle` its ends).
    idle: BTreeSet<(u64, u32)>,
    /// The entity last selected, until its turn ends: the kernel takes a queue off the
    /// active tree while it is in service (`bfq_get_next_queue`), which decides when the
    /// idle tree is forgotten whole. Where we differ: a group in service stays on its
    /// parent's active tree in the kernel while another of its queues may be next
    /// (`bfq_no_longer_next_in_service`); ours counts a selected group out as a queue.
    in_service: Option<u32>,
}

impl ServiceTree {
    /// An empty tree at virtual time zero.
    pub fn new() -> ServiceTree {
        ServiceTree::default()
    }

    /// The tree's virtual time (`st->vtime`).
    pub fn vtime(&self) -> u64 {
        self.vtime
    }

    /// Active entities.
    pub fn len(&self) -> usize {
        self.eligible.len() + self.waiting.len()
    }

    /// True with no active entity.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The weights of its active entities, the one in service included, and of its idle
    /// ones (`st->wsum`).
    pub fn wsum(&self) -> u64 {
        self.wsum
    }

    /// True while entity `id` is active on this tree (backlogged or in service).
    pub fn is_active(&self, id: u32) -> bool {
        self.stamps.get(id).is_some_and(|s| s.active)
    }

    /// Entities on the idle tree.
    pub fn idle_len(&self) -> usize {
        self.idle.len()
    }

    /// Active or idle: still on the tree (`entity->on_st_or_in_serv`).
    pub fn on_tree(&self, id: u32) -> bool {
        self.stamps.get(id).is_some_and(|s| s.active || s.idle)
    }

    /// Takes `id` off the idle tree, its weight out of the sum.
    fn idle_extract(&mut self, id: u32) {
        if let Some(st) = self.stamps.get(id).copied().filter(|s| s.idle) {
            self.idle.remove(&(st.finish, id));
            self.wsum -= st.weight as u64;
            self.stamps.insert(id, Stamp { idle: false, ..st });
        }
    }

    /// `bfq_forget_idle`, after V moved: with no active entity but the one in service, V
    /// jumps to the last idle finish time (the whole idle tree is behind it); then the
    /// first idle entity, if V has passed its finish time, is forgotten.
    fn forget_idle(&mut self) {
        let others = self.len() - usize::from(self.in_service.is_some_and(|s| self.is_active(s)));
        if others == 0 {
            if let Some(&(f, _)) = self.idle.last() {
                self.vtime = self.vtime.max(f);
            }
        }
        if let Some(&(f, id)) = self.idle.first() {
            if f <= self.vtime {
                self.idle_extract(id);
            }
        }
    }

    /// An entity's turn is over and it has nothing left: on the idle tree if its finish
    /// time is ahead of V, else forgotten (`__bfq_deactivate_entity`).
    fn go_idle(&mut self, id: u32, st: Stamp, end: u64) {
        if self.in_service == Some(id) {
            self.in_service = None;
        }
        let idle = end > self.vtime;
        if idle {
            self.idle.insert((end, id));
        } else {
            self.wsum -= st.weight as u64;
        }
        self.stamps.insert(
            id,
            Stamp {
                finish: end,
                last_finish: end,
                active: false,
                idle,
                ..st
            },
        );
    }

    fn insert(&mut self, id: u32, st: Stamp) {
        if st.start <= self.vtime {
            self.eligible.insert((st.finish, id));
        } else {
            self.waiting.insert((st.start, id));
        }
        self.stamps.insert(id, st);
    }

    fn unlink(&mut self, id: u32) -> Option<Stamp> {
        let st = *self.stamps.get(id)?;
        if !st.active {
            return None;
        }
        self.eligible.remove(&(st.finish, id));
        self.waiting.remove(&(st.start, id));
        Some(st)
    }

    /// Entity `id` becomes backlogged with `weight` and a turn of `budget` sectors. With
    /// `backshift` it starts at its previous finish time even if the virtual time has passed
    /// it: it left with service owed and comes back for it (`__bfq_activate_entity`).
    pub fn activate(&mut self, id: u32, weight: u32, budget: u64, backshift: bool) {
        assert!(weight > 0, "weights are at least 1");
        assert!(!self.is_active(id), "entity {id} activated twice");
        // Off the idle tree if it is there (`bfq_idle_extract`), its old weight with it: a
        // weight that changed while it was idle applies now (`prio_changed`).
        self.idle_extract(id);
        let prev = self.stamps.get(id).map_or(0, |s| s.last_finish);
        let start = if backshift {
            prev
        } else {
            self.vtime.max(prev)
        };
        let finish = start + budget.max(1) * SCALE / weight as u64;
        self.wsum += weight as u64;
        self.insert(
            id,
            Stamp {
                start,
                finish,
                weight,
                last_finish: prev,
                active: true,
                idle: false,
            },
        );
    }

    /// The entity to serve next: the eligible one with the smallest finish time.
    pub fn select(&mut self) -> Option<u32> {
        if self.eligible.is_empty() {
            let &(s, _) = self.waiting.first()?;
            if s > self.vtime {
                // `bfq_update_vtime`: a jump forgets what it passes.
                self.vtime = s;
                self.forget_idle();
            }
        }
        // Everything whose start time has come is eligible now.
        while let Some(&(s, id)) = self.waiting.first() {
            if s > self.vtime {
                break;
            }
            self.waiting.remove(&(s, id));
            let f = self.stamps.get(id).expect("waiting entity").finish;
            self.eligible.insert((f, id));
        }
        let id = self.eligible.first().map(|&(_, id)| id);
        self.in_service = id;
        id
    }

    /// What [`Self::select`] would return, without moving the virtual time.
    pub fn next_pick(&self) -> Option<u32> {
        let v = match self.eligible.first() {
            Some(_) => self.vtime,
            None => self.vtime.max(self.waiting.first()?.0),
        };
        let from_waiting = self
            .waiting
            .iter()
            .take_while(|&&(s, _)| s <= v)
            .map(|&(_, id)| (self.stamps.get(id).expect("waiting entity").finish, id))
            .min();
        let from_eligible = self.eligible.first().copied();
        match (from_eligible, from_waiting) {
            (Some(a), Some(b)) => Some(a.min(b).1),
            (a, b) => a.or(b).map(|x| x.1),
        }
    }

    /// `sectors` of service were given (to whichever entity is in service).
    pub fn served(&mut self, sectors: u64) {
        self.vtime += (sectors * SCALE).checked_div(self.wsum).unwrap_or(0);
        self.forget_idle();
    }

    /// Ends `id`'s turn after it used `used` sectors. If it is still backlogged, its next
    /// turn, of `budget` sectors at `weight` (weights change between turns, as the kernel
    /// applies a new weight when it requeues an entity), starts where this one ended;
    /// otherwise it goes idle.
    pub fn expire(&mut self, id: u32, used: u64, next: Option<(u64, u32)>) {
        let Some(st) = self.unlink(id) else {
            panic!("entity {id} expired while not active");
        };
        let end = st.start + used * SCALE / st.weight as u64;
        match next {
            Some((b, weight)) => {
                assert!(weight > 0, "weights are at least 1");
                if self.in_service == Some(id) {
                    self.in_service = None;
                }
                self.wsum = self.wsum - st.weight as u64 + weight as u64;
                let start = end;
                self.insert(
                    id,
                    Stamp {
                        start,
                        finish: start + b.max(1) * SCALE / weight as u64,
                        weight,
                        last_finish: end,
                        active: true,
                        idle: false,
                    },
                );
            }
            None => self.go_idle(id, st, end),
        }
    }

    /// An active entity that is not in service gets a new budget: it stays where it starts
    /// and finishes where the new budget takes it (`__bfq_requeue_entity` for an entity
    /// queued on its active tree: `bfq_active_extract`, then `bfq_update_fin_time_enqueue`
    /// with the start kept). Nothing for one in service or not active.
    pub fn rebudget(&mut self, id: u32, budget: u64) {
        if self.in_service == Some(id) {
            return;
        }
        let Some(mut st) = self.unlink(id) else {
            return;
        };
        st.finish = st.start + budget.max(1) * SCALE / st.weight as u64;
        self.insert(id, st);
    }

    /// Takes an active entity that is not in service out of the tree, charged the `used`
    /// sectors it got in the meantime (by injection), as `__bfq_deactivate_entity` computes
    /// its finish time from `entity->service` (a queue emptied out of turn, or merged into
    /// another). It goes idle as an expired one does.
    pub fn deactivate(&mut self, id: u32, used: u64) {
        let Some(st) = self.unlink(id) else {
            panic!("entity {id} deactivated while not active");
        };
        let end = st.start + used * SCALE / st.weight as u64;
        self.go_idle(id, st, end);
    }

    /// The entity [`select`](Self::select) would pick if `skip` were not there, without
    /// moving the virtual time (for injection: who else has work).
    pub fn peek(&self, skip: u32) -> Option<u32> {
        let e = self
            .eligible
            .iter()
            .map(|&(_, id)| id)
            .find(|&id| id != skip);
        e.or_else(|| {
            self.waiting
                .iter()
                .map(|&(_, id)| id)
                .find(|&id| id != skip)
        })
    }

    /// Forgets an idle entity (its queue was freed). The kernel's idle tree holds a
    /// reference that keeps the queue until V passes its finish time; ours frees a queue
    /// only after it has been idle for seconds, and takes it off the idle tree then.
    pub fn forget(&mut self, id: u32) {
        if !self.is_active(id) {
            self.idle_extract(id);
            self.stamps.remove(id);
        }
    }

    /// Checks the tree's own bookkeeping.
    pub fn check(&self) {
        let w: u64 = self
            .stamps
            .values()
            .filter(|s| s.active || s.idle)
            .map(|s| s.weight as u64)
            .sum();
        assert_eq!(w, self.wsum, "weight sum out of step");
        assert_eq!(
            self.len(),
            self.stamps.values().filter(|s| s.active).count(),
            "active entities out of step"
        );
        assert_eq!(
            self.idle.len(),
            self.stamps.values().filter(|s| s.idle).count(),
            "idle entities out of step"
        );
        assert!(
            self.stamps.values().all(|s| !(s.active && s.idle)),
            "an entity both active and idle"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves always-backlogged entities for `turns` turns of `budget` sectors each and
    /// returns the sectors each received.
    fn run(weights: &[u32], budget: u64, turns: usize) -> Vec<u64> {
        let mut t = ServiceTree::new();
        for (i, &w) in weights.iter().enumerate() {
            t.activate(i as u32, w, budget, false);
        }
        let mut got = vec![0u64; weights.len()];
        for _ in 0..turns {
            let id = t.select().expect("someone is backlogged");
            t.served(budget);
            got[id as usize] += budget;
            t.expire(id, budget, Some((budget, weights[id as usize])));
            t.check();
        }
        got
    }

    #[test]
    fn service_follows_weights() {
        let got = run(&[200, 100], 1024, 3000);
        let r = got[0] as f64 / got[1] as f64;
        assert!((r - 2.0).abs() < 0.02, "2:1 weights gave {r:.3}");
        let got = run(&[300, 200, 100], 512, 6000);
        let total: u64 = got.iter().sum();
        for (g, w) in got.iter().zip([3.0, 2.0, 1.0]) {
            let share = *g as f64 / total as f64;
            assert!((share - w / 6.0).abs() < 0.01, "{got:?}");
        }
    }

    #[test]
    fn an_idle_entity_banks_no_service() {
        let mut t = ServiceTree::new();
        t.activate(0, 100, 100, false);
        // Entity 0 alone for a long time.
        for _ in 0..100 {
            let id = t.select().unwrap();
            t.served(100);
            t.expire(id, 100, Some((100, 100)));
        }
        // Entity 1 arrives: from now on the two share equally, 1 gets no catch-up burst.
        t.activate(1, 100, 100, false);
        let mut got = [0u64; 2];
        for _ in 0..200 {
            let id = t.select().unwrap();
            t.served(100);
            got[id as usize] += 100;
            t.expire(id, 100, Some((100, 100)));
        }
        assert!(got[0].abs_diff(got[1]) <= 200, "{got:?}");
    }

    #[test]
    fn a_short_turn_is_charged_what_it_used() {
        // Entity 0 uses only a tenth of each budget (a seeky reader timing out): it must not
        // be charged the whole budget, and so comes back sooner.
        let mut t = ServiceTree::new();
        t.activate(0, 100, 1000, false);
        t.activate(1, 100, 1000, false);
        let mut turns = [0u32; 2];
        for _ in 0..1100 {
            let id = t.select().unwrap();
            let used = if id == 0 { 100 } else { 1000 };
            t.served(used);
            turns[id as usize] += 1;
            t.expire(id, used, Some((1000, 100)));
        }
        assert!(turns[0] > 5 * turns[1], "{turns:?}");
    }

    #[test]
    fn entities_come_and_go() {
        let mut t = ServiceTree::new();
        t.activate(3, 50, 64, false);
        t.activate(9, 500, 64, false);
        let id = t.select().unwrap();
        t.served(64);
        t.expire(id, 64, None);
        assert_eq!(t.len(), 1);
        t.check();
        let other = t.select().unwrap();
        assert_ne!(other, id);
        t.expire(other, 10, None);
        assert!(t.is_empty() && t.select().is_none());
        t.activate(id, 50, 64, false);
        t.forget(other);
        t.check();
        t.activate(other, 500, 64, false);
        assert_eq!(t.peek(id), Some(other));
        t.deactivate(other, 0);
        assert_eq!(t.peek(id), None);
        assert_eq!(t.len(), 1);
        t.check();
    }

    /// A tree with entities 0, 1 and 2 active, each of weight 100 with a budget of 1000.
    fn three_of_weight_100() -> ServiceTree {
        let mut t = ServiceTree::new();
        for id in 0..3 {
            t.activate(id, 100, 1000, false);
        }
        t
    }

    /// `bfq_idle_insert` / `bfq_forget_idle`: an entity that runs dry with its finish time
    /// ahead of V stays on the tree, its weight in the sum V advances by, so V moves at the
    /// pace of three weights while two are served; it is forgotten once V passes its finish
    /// time. An entity that runs dry behind V is forgotten at once.
    #[test]
    fn an_entity_that_runs_dry_ahead_of_v_stays_on_the_idle_tree() {
        let mut t = three_of_weight_100();
        assert_eq!(t.select(), Some(0));
        // Entity 0 used 100 sectors and has nothing left: its finish, 100 sectors at weight
        // 100 past its start (0), is ahead of V (100 sectors over three weights).
        t.served(100);
        t.expire(0, 100, None);
        t.check();
        assert!(t.on_tree(0) && !t.is_active(0), "not idle");
        assert_eq!(t.wsum(), 300, "its weight left the sum");
        // Entity 1 is served: V still moves by 100 sectors over three weights.
        assert_eq!(t.select(), Some(1));
        t.served(100);
        assert_eq!(t.vtime(), 2 * 100 * SCALE / 300);
        assert!(t.on_tree(0), "forgotten too soon");
        // A little more (V's steps round down) and V passes its finish time: forgotten,
        // two weights left.
        t.served(110);
        assert!(!t.on_tree(0), "never forgotten");
        assert_eq!(t.wsum(), 200);
        t.check();
        // Behind V: forgotten at once.
        t.expire(1, 1, None);
        assert!(!t.on_tree(1) && t.wsum() == 100);
        t.check();
    }

    /// With no active entity but the one in service, V jumps to the last idle finish time
    /// (`bfq_forget_idle`: "forget the whole idle tree"), and the idle entities go, one per
    /// update of V.
    #[test]
    fn the_idle_tree_is_forgotten_whole_when_only_the_served_entity_is_left() {
        let mut t = three_of_weight_100();
        // Entities 1 and 2 run dry out of turn with a big finish time each (charged 1000).
        t.deactivate(1, 1000);
        t.deactivate(2, 1000);
        assert!(t.on_tree(1) && t.on_tree(2));
        assert_eq!(t.select(), Some(0));
        t.served(1);
        assert_eq!(t.vtime(), 1000 * SCALE / 100, "V did not jump");
        t.served(1);
        assert!(!t.on_tree(1) && !t.on_tree(2), "idle entities kept");
        assert_eq!(t.wsum(), 100);
        t.check();
        // Back with a new weight: the weight it left with is not counted twice.
        t.activate(2, 300, 100, false);
        assert_eq!(t.wsum(), 400);
        t.check();
    }

    #[test]
    fn a_new_budget_moves_a_waiting_entity_finish_not_its_start() {
        // Two entities of one weight start together; the one served first is the one that
        // finishes first. A larger budget for the second moves its finish past the first's
        // (`bfq_updated_next_req` -> `__bfq_requeue_entity`), a smaller one back before it.
        let mut t = ServiceTree::new();
        t.activate(1, 100, 64, false);
        t.activate(2, 100, 32, false);
        assert_eq!(t.next_pick(), Some(2));
        t.rebudget(2, 128);
        assert_eq!(t.next_pick(), Some(1));
        t.rebudget(2, 16);
        assert_eq!(t.next_pick(), Some(2));
        // In service: its turn's budget is fixed.
        assert_eq!(t.select(), Some(2));
        t.rebudget(2, 4096);
        t.expire(2, 16, Some((16, 100)));
        t.check();
    }

    #[test]
    fn a_new_weight_applies_from_the_next_turn() {
        let mut t = ServiceTree::new();
        t.activate(0, 100, 100, false);
        t.activate(1, 100, 100, false);
        let mut got = [0u64; 2];
        for _ in 0..3000 {
            let id = t.select().unwrap();
            t.served(100);
            got[id as usize] += 100;
            // Entity 1 is raised to three times the weight after its first turn.
            let w = if id == 1 { 300 } else { 100 };
            t.expire(id, 100, Some((100, w)));
            t.check();
        }
        let r = got[1] as f64 / got[0] as f64;
        assert!((r - 3.0).abs() < 0.05, "{got:?}");
    }
}
