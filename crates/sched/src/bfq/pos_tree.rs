//! A group's position tree (`bfqg->rq_pos_tree`): its queues keyed by where their next
//! requests start, a red-black tree shaped as the kernel's `lib/rbtree.c` shapes it.
//!
//! The shape matters: `bfqq_find_close` looks first at the parent of the leaf where a
//! sector would go, which is one of the sector's two neighbours, depending on how insertions
//! and erasures balanced the tree; an ordered set has no parents. Insertion links a leaf
//! and recolours or rotates upwards (`__rb_insert`); erasure replaces a node with two
//! children by its successor and rebalances from where a black node went missing
//! (`__rb_erase_augmented`, `____rb_erase_color`), the textbook red-black algorithm in the
//! same cases and order. Nodes live in an arena indexed by `u32`; one key holds one queue
//! (`bfq_pos_tree_add_move` leaves a queue out when its key is taken).

use std::collections::HashMap;

const NIL: u32 = u32::MAX;
/// Child slots; a direction's mirror is `1 - d`.
const L: usize = 0;
const R: usize = 1;

#[derive(Clone, Copy, Debug)]
struct Node {
    key: u64,
    queue: u32,
    parent: u32,
    child: [u32; 2],
    red: bool,
}

/// Where a lookup of a sector ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A queue keyed at exactly that sector.
    Exact(u32),
    /// No such key: the node whose empty child the sector would take, if the tree is not
    /// empty.
    Parent(Option<NodeRef>),
}

/// A node of the tree, for walking to its neighbours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeRef(u32);

/// The red-black tree of queue positions (`bfqg->rq_pos_tree`): one node per queue, keyed by where its next request starts.
#[derive(Debug, Default)]
pub struct PosTree {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: Option<u32>,
    /// Each queue's node.
    of_queue: HashMap<u32, u32>,
}

impl PosTree {
    /// True with no queue in it.
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    /// Queues in it.
    pub fn len(&self) -> usize {
        self.of_queue.len()
    }

    /// Whether `queue` is in the tree under `key`.
    pub fn contains(&self, key: u64, queue: u32) -> bool {
        self.of_queue
            .get(&queue)
            .is_some_and(|&n| self.n(n).key == key)
    }

    /// Node `r`'s key, a sector.
    pub fn key(&self, r: NodeRef) -> u64 {
        self.n(r.0).key
    }

    /// Node `r`'s queue.
    pub fn queue(&self, r: NodeRef) -> u32 {
        self.n(r.0).queue
    }

    fn n(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    fn m(&mut self, i: u32) -> &mut Node {
        &mut self.nodes[i as usize]
    }

    fn opt(i: u32) -> Option<u32> {
        (i != NIL).then_some(i)
    }

    fn is_red(&self, i: u32) -> bool {
        i != NIL && self.n(i).red
    }

    /// `bfq_rq_pos_tree_lookup`: walk down from the root, right for a larger sector, left
    /// for a smaller one, until the key or an empty child.
    pub fn lookup(&self, sector: u64) -> Lookup {
        let mut parent = None;
        let mut at = self.root.unwrap_or(NIL);
        while at != NIL {
            let node = self.n(at);
            parent = Some(NodeRef(at));
            at = match sector.cmp(&node.key) {
                std::cmp::Ordering::Greater => node.child[R],
                std::cmp::Ordering::Less => node.child[L],
                std::cmp::Ordering::Equal => return Lookup::Exact(node.queue),
            };
        }
        Lookup::Parent(parent)
    }

    /// `rb_next`.
    pub fn next(&self, r: NodeRef) -> Option<NodeRef> {
        self.step(r, R)
    }

    /// `rb_prev`.
    pub fn prev(&self, r: NodeRef) -> Option<NodeRef> {
        self.step(r, L)
    }

    /// The neighbour on side `d`: the far end of that subtree, else the first ancestor
    /// reached from its other side.
    fn step(&self, r: NodeRef, d: usize) -> Option<NodeRef> {
        let mut i = r.0;
        if self.n(i).child[d] != NIL {
            i = self.n(i).child[d];
            while self.n(i).child[1 - d] != NIL {
                i = self.n(i).child[1 - d];
            }
            return Some(NodeRef(i));
        }
        loop {
            let p = Self::opt(self.n(i).parent)?;
            if self.n(p).child[1 - d] == i {
                return Some(NodeRef(p));
            }
            i = p;
        }
    }

    /// Puts `queue` in under `key` unless that key is taken; false if it is. A queue in the
    /// tree must be removed first.
    pub fn insert(&mut self, key: u64, queue: u32) -> bool {
        debug_assert!(!self.of_queue.contains_key(&queue), "q{queue} twice");
        let parent = match self.lookup(key) {
            Lookup::Exact(_) => return false,
            Lookup::Parent(p) => p.map_or(NIL, |p| p.0),
        };
        let node = Node {
            key,
            queue,
            parent,
            child: [NIL; 2],
            red: true,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() as u32 - 1
            }
        };
        if parent == NIL {
            self.root = Some(i);
        } else {
            let d = if key < self.n(parent).key { L } else { R };
            self.m(parent).child[d] = i;
        }
        self.of_queue.insert(queue, i);
        self.insert_fixup(i);
        true
    }

    /// Takes `queue` out, if it is in.
    pub fn remove(&mut self, queue: u32) {
        if let Some(i) = self.of_queue.remove(&queue) {
            self.erase(i);
            self.free.push(i);
        }
    }

    /// Makes `new` take `old`'s place under `old`'s parent (`__rb_change_child`).
    fn replace_child(&mut self, old: u32, new: u32, parent: u32) {
        if parent == NIL {
            self.root = Self::opt(new);
        } else {
            let d = if self.n(parent).child[L] == old { L } else { R };
            self.m(parent).child[d] = new;
        }
    }

    /// Rotates `x` down to side `d`, its child on the other side taking its place
    /// (`rotate(x, L)` is the textbook left rotation).
    fn rotate(&mut self, x: u32, d: usize) {
        let y = self.n(x).child[1 - d];
        let b = self.n(y).child[d];
        self.m(x).child[1 - d] = b;
        if b != NIL {
            self.m(b).parent = x;
        }
        let p = self.n(x).parent;
        self.m(y).parent = p;
        self.replace_child(x, y, p);
        self.m(y).child[d] = x;
        self.m(x).parent = y;
    }

    /// `__rb_insert`: a red leaf under a red parent; a red uncle flips colours and moves
    /// the problem up, a black one ends it with one or two rotations.
    fn insert_fixup(&mut self, mut node: u32) {
        loop {
            let parent = self.n(node).parent;
            if parent == NIL {
                self.m(node).red = false;
                return;
            }
            if !self.n(parent).red {
                return;
            }
            let gparent = self.n(parent).parent;
            // The parent's side under the grandparent.
            let d = if self.n(gparent).child[L] == parent {
                L
            } else {
                R
            };
            let uncle = self.n(gparent).child[1 - d];
            if self.is_red(uncle) {
                self.m(uncle).red = false;
                self.m(parent).red = false;
                self.m(gparent).red = true;
                node = gparent;
                continue;
            }
            let mut parent = parent;
            if self.n(parent).child[1 - d] == node {
                self.rotate(parent, d);
                parent = node;
            }
            self.rotate(gparent, 1 - d);
            self.m(parent).red = false;
            self.m(gparent).red = true;
            return;
        }
    }

    /// `__rb_erase_augmented`: a node with at most one child is replaced by it (which takes
    /// its colour); one with two by its successor (which takes its place and colour), whose
    /// own right child takes the successor's place. If a black node left a path, rebalance
    /// from where it was.
    fn erase(&mut self, node: u32) {
        let Node {
            parent,
            child: [left, right],
            red,
            ..
        } = *self.n(node);
        let rebalance;
        if left == NIL || right == NIL {
            let child = if left == NIL { right } else { left };
            self.replace_child(node, child, parent);
            if child != NIL {
                // A lone child is red under a black node: it takes the node's colour.
                self.m(child).parent = parent;
                self.m(child).red = red;
                rebalance = NIL;
            } else {
                rebalance = if red { NIL } else { parent };
            }
        } else {
            // The successor: the right child, or the leftmost node of the right subtree.
            let (mut succ, mut succ_parent) = (right, node);
            while self.n(succ).child[L] != NIL {
                succ_parent = succ;
                succ = self.n(succ).child[L];
            }
            let child2 = self.n(succ).child[R];
            let succ_red = self.n(succ).red;
            let at = if succ_parent == node {
                succ
            } else {
                self.m(succ_parent).child[L] = child2;
                self.m(succ).child[R] = right;
                self.m(right).parent = succ;
                succ_parent
            };
            self.m(succ).child[L] = left;
            self.m(left).parent = succ;
            self.replace_child(node, succ, parent);
            self.m(succ).parent = parent;
            self.m(succ).red = red;
            if child2 != NIL {
                self.m(child2).parent = at;
                self.m(child2).red = false;
                rebalance = NIL;
            } else {
                rebalance = if succ_red { NIL } else { at };
            }
        }
        if rebalance != NIL {
            self.erase_fixup(rebalance);
        }
    }

    /// `____rb_erase_color`: the paths through `parent`'s child `node` (NIL at first) are
    /// one black short.
    fn erase_fixup(&mut self, mut parent: u32) {
        let mut node = NIL;
        loop {
            // The short side, `d`; with `node` NIL, the side whose child is missing.
            let d = if self.n(parent).child[R] != node {
                L
            } else {
                R
            };
            let mut sibling = self.n(parent).child[1 - d];
            if self.n(sibling).red {
                // Case 1: rotate the red sibling above the parent.
                self.rotate(parent, d);
                self.m(sibling).red = false;
                self.m(parent).red = true;
                sibling = self.n(parent).child[1 - d];
            }
            let (far, near) = (self.n(sibling).child[1 - d], self.n(sibling).child[d]);
            if !self.is_red(far) {
                if !self.is_red(near) {
                    // Case 2: flip the sibling red; a red parent absorbs the deficit,
                    // else it moves up.
                    self.m(sibling).red = true;
                    if self.n(parent).red {
                        self.m(parent).red = false;
                        return;
                    }
                    node = parent;
                    parent = self.n(node).parent;
                    if parent == NIL {
                        return;
                    }
                    continue;
                }
                // Case 3: rotate the near red nephew above the sibling.
                self.rotate(sibling, 1 - d);
                self.m(near).red = false;
                self.m(sibling).red = true;
                sibling = near;
            }
            // Case 4: rotate the sibling above the parent; it takes the parent's colour.
            let far = self.n(sibling).child[1 - d];
            self.rotate(parent, d);
            self.m(sibling).red = self.n(parent).red;
            self.m(parent).red = false;
            if far != NIL {
                self.m(far).red = false;
            }
            return;
        }
    }

    /// The red-black rules, the order of the keys, the parent links and the queue index;
    /// panics on a breach.
    pub fn check(&self) {
        fn walk(t: &PosTree, i: u32, lo: Option<u64>, hi: Option<u64>, parent: u32) -> usize {
            if i == NIL {
                return 1;
            }
            let n = t.n(i);
            assert_eq!(n.parent, parent, "pos tree: node {i}'s parent link");
            assert!(lo.is_none_or(|l| n.key > l) && hi.is_none_or(|h| n.key < h));
            assert!(
                !(n.red && (t.is_red(n.child[L]) || t.is_red(n.child[R]))),
                "red under red"
            );
            assert_eq!(t.of_queue.get(&n.queue), Some(&i), "pos tree: queue index");
            let l = walk(t, n.child[L], lo, Some(n.key), i);
            let r = walk(t, n.child[R], Some(n.key), hi, i);
            assert_eq!(l, r, "pos tree: black heights differ at node {i}");
            l + usize::from(!n.red)
        }
        if let Some(r) = self.root {
            assert!(!self.n(r).red, "pos tree: red root");
            walk(self, r, None, None, NIL);
        }
        let count = |t: &PosTree| {
            let mut n = 0;
            let mut stack: Vec<u32> = self.root.into_iter().collect();
            while let Some(i) = stack.pop() {
                n += 1;
                for c in t.n(i).child {
                    if c != NIL {
                        stack.push(c);
                    }
                }
            }
            n
        };
        assert_eq!(count(self), self.of_queue.len(), "pos tree: node count");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn inorder(t: &PosTree) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        let Lookup::Parent(Some(mut at)) = t.lookup(0).min_node(t) else {
            return out;
        };
        loop {
            out.push((t.key(at), t.queue(at)));
            match t.next(at) {
                Some(n) => at = n,
                None => return out,
            }
        }
    }

    impl Lookup {
        /// The leftmost node (test helper).
        fn min_node(self, t: &PosTree) -> Lookup {
            let mut i = t.root.unwrap_or(NIL);
            if i == NIL {
                return Lookup::Parent(None);
            }
            while t.n(i).child[L] != NIL {
                i = t.n(i).child[L];
            }
            Lookup::Parent(Some(NodeRef(i)))
        }
    }

    /// Random inserts and removals keep the red-black rules, the order and every neighbour
    /// an ordered map would give; a taken key is refused.
    #[test]
    fn the_tree_stays_a_red_black_tree_in_key_order() {
        let mut t = PosTree::default();
        let mut want: BTreeMap<u64, u32> = BTreeMap::new();
        let mut keys: HashMap<u32, u64> = HashMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let queue = (x % 200) as u32;
            if let Some(k) = keys.remove(&queue) {
                t.remove(queue);
                want.remove(&k);
            } else {
                let key = (x >> 20) % 500;
                let fresh = !want.contains_key(&key);
                assert_eq!(t.insert(key, queue), fresh, "step {step}");
                if fresh {
                    want.insert(key, queue);
                    keys.insert(queue, key);
                }
            }
            t.check();
            if step % 97 == 0 {
                let got = inorder(&t);
                let exp: Vec<(u64, u32)> = want.iter().map(|(&k, &q)| (k, q)).collect();
                assert_eq!(got, exp, "step {step}");
                // The lookup's parent is a neighbour of the sector.
                let s = (x >> 40) % 520;
                match t.lookup(s) {
                    Lookup::Exact(q) => assert_eq!(want.get(&s), Some(&q)),
                    Lookup::Parent(None) => assert!(want.is_empty()),
                    Lookup::Parent(Some(p)) => {
                        let below = want.range(..s).next_back().map(|(&k, _)| k);
                        let above = want.range(s..).next().map(|(&k, _)| k);
                        assert!(Some(t.key(p)) == below || Some(t.key(p)) == above);
                    }
                }
            }
        }
        assert_eq!(t.len(), want.len());
    }

    /// Keys 10..=70 inserted in order shape the tree as `__rb_insert` does (worked by hand:
    /// a rotation at 10, a colour flip at 40, a rotation at 30, a flip at 60, a rotation at
    /// 50): 20 at the root, 10 and 40 under it, 30 and 60 under 40, 50 and 70 under 60. So
    /// a lookup of 45 ends at 50's empty left child, one of 35 at 30's empty right one.
    #[test]
    fn ascending_inserts_give_the_textbook_shape() {
        let mut t = PosTree::default();
        for k in 1..=7u64 {
            assert!(t.insert(k * 10, k as u32));
        }
        t.check();
        let root = t.root.unwrap();
        assert_eq!(t.n(root).key, 20);
        assert_eq!(t.n(t.n(root).child[R]).key, 40);
        match t.lookup(45) {
            Lookup::Parent(Some(p)) => assert_eq!(t.key(p), 50),
            other => panic!("{other:?}"),
        }
        match t.lookup(35) {
            Lookup::Parent(Some(p)) => assert_eq!(t.key(p), 30),
            other => panic!("{other:?}"),
        }
    }
}
