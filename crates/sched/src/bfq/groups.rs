//! BFQ's groups (`block/bfq-cgroup.c`): the H-WF2Q+ hierarchy.
//!
//! Every group has its own three service trees (RT, BE, IDLE) holding its queues and its
//! child groups; a group is itself an entity, of class BE, in its parent's tree, weighted by
//! its cgroup weight (`io.bfq.weight`, 1..=1000, default 100). Selection walks from the root
//! down, taking at each level the entity B-WF2Q+ picks, until it reaches a queue. Service
//! given to a queue is charged to every tree on the way up, so each group gets its weight's
//! share of its parent's service, whatever the number of queues inside it.
//!
//! Groups are created when the first bio naming them arrives and live as long as the
//! scheduler (the cgroup registry is bounded by what the user created). Weights are read from
//! the registry when its generation changes and apply from a group's next turn.

use super::engine::ServiceTree;
use super::pos_tree::PosTree;
use mqblk_core::Blkcg;
use std::collections::HashMap;

/// Entity ids of groups in their parent's tree carry this bit; queue ids never do.
pub const GROUP_BIT: u32 = 1 << 31;
/// The budget a group entity is scheduled with. It only orders group turns: a group is
/// charged the service its queues actually received.
const GROUP_BUDGET: u64 = 16 * 1024;
/// Groups are entities of the BE class of their parent.
pub(super) const GROUP_CLASS: usize = 1;

/// One BFQ group (`struct bfq_group`): an entity of its parent's tree, with a service tree per class of its own.
pub struct Group {
    /// The cgroup it stands for.
    pub blkcg_id: u32,
    /// Parent slot (the root is its own parent).
    pub parent: u32,
    /// Its weight (`io.bfq.weight`).
    pub weight: u32,
    /// Its service trees, one per class (RT, BE, IDLE).
    pub trees: [ServiceTree; 3],
    /// Queues of this group with requests queued or in flight.
    pub pending_queues: u32,
    /// Where its queues' next requests start, for queue merging (`rq_pos_tree`).
    pub pos_tree: PosTree,
    /// The sync queue created last in this group, for stable merging (`last_bfqq_created`).
    pub last_created: Option<u32>,
    /// Requests of its queues and subgroups from insertion to finish (`entity.allocated`).
    pub allocated: u32,
}

impl Group {
    fn new(blkcg_id: u32, parent: u32, weight: u32) -> Group {
        Group {
            blkcg_id,
            parent,
            weight,
            trees: Default::default(),
            pending_queues: 0,
            pos_tree: PosTree::default(),
            last_created: None,
            allocated: 0,
        }
    }

    /// True when any of its trees has an active entity.
    pub fn has_active(&self) -> bool {
        self.trees.iter().any(|t| !t.is_empty())
    }
}

/// Every group of the scheduler, the root first (slot 0), as the H-WF2Q+ hierarchy.
pub struct Groups {
    /// The groups, by slot.
    pub slots: Vec<Group>,
    by_blkcg: HashMap<u32, u32>,
    generation: u64,
    /// Groups (the root included) with a pending queue.
    pub with_pending: u32,
}

impl Default for Groups {
    fn default() -> Groups {
        Groups::new()
    }
}

impl Groups {
    /// The root group alone.
    pub fn new() -> Groups {
        Groups {
            slots: vec![Group::new(0, 0, mqblk_core::blkcg::DEFAULT_WEIGHT)],
            by_blkcg: HashMap::new(),
            generation: u64::MAX,
            with_pending: 0,
        }
    }

    /// The slot of cgroup `id`, created with its ancestors on first use.
    pub fn slot_of(&mut self, blkcg: &Blkcg, id: u32) -> u32 {
        if id == 0 {
            return 0;
        }
        if let Some(&s) = self.by_blkcg.get(&id) {
            return s;
        }
        // An id the registry does not know comes back as its own ancestry: a child of the
        // root at the default weight.
        let mut parent = 0;
        for anc in blkcg.ancestry(id) {
            parent = match self.by_blkcg.get(&anc) {
                Some(&s) => s,
                None => {
                    let w = blkcg.info(anc).weight;
                    self.slots.push(Group::new(anc, parent, w));
                    let s = self.slots.len() as u32 - 1;
                    self.by_blkcg.insert(anc, s);
                    s
                }
            };
        }
        parent
    }

    /// The slot of cgroup `id` if it has one already.
    pub fn find_slot(&self, id: u32) -> Option<u32> {
        if id == 0 {
            Some(0)
        } else {
            self.by_blkcg.get(&id).copied()
        }
    }

    /// Re-reads the weights if the registry changed since the last look.
    pub fn refresh_weights(&mut self, blkcg: &Blkcg) {
        let g = blkcg.generation();
        if g == self.generation {
            return;
        }
        self.generation = g;
        for grp in self.slots.iter_mut().skip(1) {
            grp.weight = blkcg.info(grp.blkcg_id).weight;
        }
    }

    /// The service tree of group `slot` for `class`.
    pub fn tree(&mut self, slot: u32, class: usize) -> &mut ServiceTree {
        &mut self.slots[slot as usize].trees[class]
    }

    /// Queue `q` of group `slot`, queued and not in service, gets a new budget
    /// ([`ServiceTree::rebudget`]). The groups above keep theirs: a group's turns here are
    /// of a fixed budget, not its next queue's.
    pub fn rebudget(&mut self, slot: u32, q: u32, class: usize, budget: u64) {
        self.tree(slot, class).rebudget(q, budget);
    }

    /// Queue `q` of group `slot` becomes backlogged; its ancestors become active as needed.
    /// With `backshift` every entity activated on the way up starts at its old finish time
    /// (`bfq_activate_requeue_entity` passing `non_blocking_wait_rq` up the hierarchy).
    pub fn activate(
        &mut self,
        slot: u32,
        q: u32,
        class: usize,
        weight: u32,
        budget: u64,
        backshift: bool,
    ) {
        self.tree(slot, class)
            .activate(q, weight, budget, backshift);
        let mut g = slot;
        while g != 0 {
            let (parent, w) = (self.slots[g as usize].parent, self.slots[g as usize].weight);
            let tree = self.tree(parent, GROUP_CLASS);
            if tree.is_active(GROUP_BIT | g) {
                break;
            }
            tree.activate(GROUP_BIT | g, w, GROUP_BUDGET, backshift);
            g = parent;
        }
    }

    /// Entities (queues and groups) on the idle trees of every group.
    pub fn idle_entities(&self) -> usize {
        self.slots
            .iter()
            .flat_map(|g| g.trees.iter())
            .map(ServiceTree::idle_len)
            .sum()
    }

    /// The weight of group `slot`'s entity in its parent.
    pub fn weight_of(&self, slot: u32) -> u32 {
        self.slots[slot as usize].weight
    }

    /// `next_queue_may_preempt`: whether the root's next entity to serve differs from the
    /// one in service there for queue `q` of group `slot`. The kernel takes a queue out of
    /// its tree while it is in service, so for a queue of the root group that always holds;
    /// a group stays in its parent's tree, and may still be the next to serve.
    pub fn next_may_preempt(&self, slot: u32) -> bool {
        if slot == 0 {
            return true;
        }
        let mut top = slot;
        while self.slots[top as usize].parent != 0 {
            top = self.slots[top as usize].parent;
        }
        let root = &self.slots[0];
        [0, 1, 2].iter().find_map(|&c| root.trees[c].next_pick()) != Some(GROUP_BIT | top)
    }

    /// Queue `q` leaves its tree without its turn ending (it is not in service), charged the
    /// `used` sectors it got meanwhile; groups left with nothing active leave theirs,
    /// charged the same. Where we differ: the kernel charges a group's entity its own
    /// `entity->service`, the service of all its queues in its turn, which ours does not
    /// keep per group.
    pub fn deactivate(&mut self, slot: u32, q: u32, class: usize, used: u64) {
        self.tree(slot, class).deactivate(q, used);
        let mut g = slot;
        while g != 0 && !self.slots[g as usize].has_active() {
            let parent = self.slots[g as usize].parent;
            self.tree(parent, GROUP_CLASS)
                .deactivate(GROUP_BIT | g, used);
            g = parent;
        }
    }

    /// The queue to serve next: at every level the class chosen by `class_order` (strict
    /// priority, or IDLE first when it is due), then B-WF2Q+ within it.
    pub fn select(&mut self, idle_first: bool) -> Option<u32> {
        let order: [usize; 3] = if idle_first { [2, 0, 1] } else { [0, 1, 2] };
        let mut g = 0u32;
        loop {
            let grp = &mut self.slots[g as usize];
            let id = order.iter().find_map(|&c| grp.trees[c].select())?;
            if id & GROUP_BIT == 0 {
                return Some(id);
            }
            g = id & !GROUP_BIT;
        }
    }

    /// `sectors` of service went to queue `q` of group `slot`: every tree on the way up
    /// advances its virtual time.
    pub fn served(&mut self, slot: u32, class: usize, sectors: u64) {
        self.tree(slot, class).served(sectors);
        let mut g = slot;
        while g != 0 {
            let parent = self.slots[g as usize].parent;
            self.tree(parent, GROUP_CLASS).served(sectors);
            g = parent;
        }
    }

    /// Queue `q`'s turn ends after `used` sectors; `next` is its next turn if it is still
    /// backlogged. The groups above it end their turns too, charged the same service.
    pub fn expire(&mut self, slot: u32, q: u32, class: usize, used: u64, next: Option<(u64, u32)>) {
        self.tree(slot, class).expire(q, used, next);
        let mut g = slot;
        while g != 0 {
            let grp = &self.slots[g as usize];
            let (parent, w, active) = (grp.parent, grp.weight, grp.has_active());
            self.tree(parent, GROUP_CLASS).expire(
                GROUP_BIT | g,
                used,
                active.then_some((GROUP_BUDGET, w)),
            );
            g = parent;
        }
    }

    /// Panics when a group's trees or counts disagree (the invariants the simulator checks).
    pub fn check(&self) {
        for (i, g) in self.slots.iter().enumerate() {
            for t in &g.trees {
                t.check();
            }
            g.pos_tree.check();
            if i != 0 {
                let active = self.slots[g.parent as usize].trees[GROUP_CLASS]
                    .is_active(GROUP_BIT | i as u32);
                assert_eq!(
                    active,
                    g.has_active(),
                    "bfq: group {i} active in its parent out of step with its children"
                );
            }
        }
        let pending = self.slots.iter().filter(|g| g.pending_queues > 0).count() as u32;
        assert_eq!(
            pending, self.with_pending,
            "bfq: groups with pending out of step"
        );
    }
}
