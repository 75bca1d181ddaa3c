//! Block cgroups: the hierarchy of groups that bios are charged to (`block/blk-cgroup.c`).
//!
//! A group is named by a path (`"db"`, `"db/journal"`), its parent is the path without the
//! last component, and the root (`""`, id 0) always exists. Each group has a BFQ weight
//! (`io.bfq.weight`: 1..=1000, default 100). A [`Bio`](crate::Bio) carries the id of its
//! group in `bio.group`; ids come from [`Blkcg::group`], which creates the group and any
//! missing ancestors.
//!
//! The registry belongs to the queue (`QueueConfig::blkcg`, shared with the elevator through
//! `ElevatorInit::blkcg`). The kernel's cgroup tree is system-wide and devices hold per-group
//! state (`blkcg_gq`); one registry may likewise be shared by several queues by handing the
//! same `Arc` to each. Schedulers cache what they read and compare [`Blkcg::generation`],
//! which changes on every creation or weight change, so the hot path takes no lock.

use parking_lot::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

/// `BFQ_WEIGHT_LEGACY_DFL`: the weight of a group nobody set.
pub const DEFAULT_WEIGHT: u32 = 100;
/// `BFQ_MIN_WEIGHT` and `BFQ_MAX_WEIGHT`.
pub const MIN_WEIGHT: u32 = 1;
/// The highest weight.
pub const MAX_WEIGHT: u32 = 1000;
/// Deepest hierarchy accepted (the root is depth 0).
pub const MAX_DEPTH: usize = 16;

/// Why a cgroup cannot be registered.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum BlkcgError {
    /// A weight outside `MIN_WEIGHT..=MAX_WEIGHT`.
    #[error("cgroup '{path}': weight {weight} out of range {MIN_WEIGHT}..={MAX_WEIGHT}")]
    Weight {
        /// The group's path.
        path: String,
        /// The weight asked for.
        weight: u32,
    },
    /// A path with an empty component (`a//b`, a leading or trailing `/`).
    #[error("cgroup '{path}': an empty component (paths look like 'a' or 'a/b')")]
    EmptyComponent {
        /// The path given.
        path: String,
    },
    /// A path deeper than `MAX_DEPTH`.
    #[error("cgroup '{path}': deeper than {MAX_DEPTH} levels")]
    TooDeep {
        /// The path given.
        path: String,
    },
    /// A group registered again with another weight.
    #[error("cgroup '{path}': weight {weight} conflicts with the weight {was} set before")]
    Conflict {
        /// The group's path.
        path: String,
        /// The weight asked for now.
        weight: u32,
        /// The weight it has.
        was: u32,
    },
}

#[derive(Clone, Debug)]
struct Group {
    path: String,
    parent: u32,
    weight: u32,
    depth: u8,
    /// The weight was set by someone (not the default).
    set: bool,
}

/// The group registry.
#[derive(Debug)]
pub struct Blkcg {
    groups: RwLock<Vec<Group>>,
    generation: AtomicU64,
}

impl Default for Blkcg {
    fn default() -> Blkcg {
        Blkcg::new()
    }
}

/// A snapshot of one group, as schedulers read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupInfo {
    /// Its id, what bios name it by (`Bio::group`).
    pub id: u32,
    /// Its path (`a/b`; empty for the root).
    pub path: String,
    /// The parent's id (the root is its own parent).
    pub parent: u32,
    /// Its weight (`io.bfq.weight`).
    pub weight: u32,
    /// Its depth (the root is 0).
    pub depth: u8,
}

impl Blkcg {
    /// A registry holding only the root group.
    pub fn new() -> Blkcg {
        Blkcg {
            groups: RwLock::new(vec![Group {
                path: String::new(),
                parent: 0,
                weight: DEFAULT_WEIGHT,
                depth: 0,
                set: false,
            }]),
            generation: AtomicU64::new(0),
        }
    }

    /// Normalises a path: surrounding slashes dropped, `"/"` and `""` are the root.
    fn normalise(path: &str) -> Result<&str, BlkcgError> {
        let p = path.trim().trim_matches('/');
        if !p.is_empty() && p.split('/').any(|c| c.trim().is_empty()) {
            return Err(BlkcgError::EmptyComponent { path: path.into() });
        }
        if p.split('/').count() > MAX_DEPTH {
            return Err(BlkcgError::TooDeep { path: path.into() });
        }
        Ok(p)
    }

    /// The id of the group at `path`, created (with its missing ancestors, at the default
    /// weight) if it does not exist yet.
    pub fn group(&self, path: &str) -> Result<u32, BlkcgError> {
        let p = Self::normalise(path)?;
        if p.is_empty() {
            return Ok(0);
        }
        if let Some(id) = self.find(p) {
            return Ok(id);
        }
        let mut g = self.groups.write();
        let mut parent = 0u32;
        let mut end = 0;
        for (depth, comp) in p.split('/').enumerate() {
            end += comp.len() + usize::from(depth > 0);
            let prefix = &p[..end];
            parent = match g.iter().position(|x| x.path == prefix) {
                Some(i) => i as u32,
                None => {
                    g.push(Group {
                        path: prefix.to_string(),
                        parent,
                        weight: DEFAULT_WEIGHT,
                        depth: depth as u8 + 1,
                        set: false,
                    });
                    g.len() as u32 - 1
                }
            };
        }
        self.generation.fetch_add(1, Ordering::Release);
        Ok(parent)
    }

    fn find(&self, path: &str) -> Option<u32> {
        self.groups
            .read()
            .iter()
            .position(|g| g.path == path)
            .map(|i| i as u32)
    }

    /// Sets a group's weight (`io.bfq.weight`), creating the group if need be.
    pub fn set_weight(&self, path: &str, weight: u32) -> Result<u32, BlkcgError> {
        if !(MIN_WEIGHT..=MAX_WEIGHT).contains(&weight) {
            return Err(BlkcgError::Weight {
                path: path.into(),
                weight,
            });
        }
        let id = self.group(path)?;
        let mut g = self.groups.write();
        g[id as usize].weight = weight;
        g[id as usize].set = true;
        self.generation.fetch_add(1, Ordering::Release);
        Ok(id)
    }

    /// A job joins the group at `path` (fio's `cgroup`), setting its weight if it gives one
    /// (`cgroup_weight`). A weight that differs from one set before is refused: two jobs
    /// disagree about one group.
    pub fn join(&self, path: &str, weight: Option<u32>) -> Result<u32, BlkcgError> {
        let id = self.group(path)?;
        let Some(w) = weight else { return Ok(id) };
        let was = {
            let g = self.groups.read();
            let x = &g[id as usize];
            x.set.then_some(x.weight)
        };
        match was {
            Some(was) if was != w => Err(BlkcgError::Conflict {
                path: path.into(),
                weight: w,
                was,
            }),
            _ => self.set_weight(path, w),
        }
    }

    /// Changes with every creation and weight change.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Groups registered, the root included.
    pub fn len(&self) -> usize {
        self.groups.read().len()
    }

    /// Never true: the root is always there.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// One group; ids never registered read as children of the root at the default weight
    /// (a bio may name a group of another registry; it is charged, not refused).
    pub fn info(&self, id: u32) -> GroupInfo {
        let g = self.groups.read();
        match g.get(id as usize) {
            Some(x) => GroupInfo {
                id,
                path: x.path.clone(),
                parent: x.parent,
                weight: x.weight,
                depth: x.depth,
            },
            None => GroupInfo {
                id,
                path: format!("?{id}"),
                parent: 0,
                weight: DEFAULT_WEIGHT,
                depth: 1,
            },
        }
    }

    /// The path of ids from the root's child down to `id` (empty for the root).
    pub fn ancestry(&self, id: u32) -> Vec<u32> {
        let g = self.groups.read();
        let mut out = Vec::new();
        let mut at = id;
        while at != 0 {
            out.push(at);
            at = g.get(at as usize).map_or(0, |x| x.parent);
        }
        out.reverse();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_make_a_hierarchy() {
        let c = Blkcg::new();
        assert_eq!(c.group("").unwrap(), 0);
        assert_eq!(c.group("/").unwrap(), 0);
        let ab = c.group("a/b").unwrap();
        let a = c.group("/a/").unwrap();
        assert_eq!(c.info(ab).parent, a);
        assert_eq!(c.info(a).parent, 0);
        assert_eq!(c.info(ab).depth, 2);
        assert_eq!(c.ancestry(ab), vec![a, ab]);
        assert_eq!(c.group("a/b").unwrap(), ab);
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn weights_are_checked_and_bump_the_generation() {
        let c = Blkcg::new();
        let g0 = c.generation();
        let id = c.set_weight("x", 300).unwrap();
        assert_eq!(c.info(id).weight, 300);
        assert!(c.generation() > g0);
        assert_eq!(
            c.set_weight("x", 0).unwrap_err().to_string(),
            "cgroup 'x': weight 0 out of range 1..=1000"
        );
        assert!(c.set_weight("x", 1001).is_err());
        assert!(matches!(
            c.group("a//b"),
            Err(BlkcgError::EmptyComponent { .. })
        ));
        assert_eq!(c.info(77).weight, DEFAULT_WEIGHT);
    }

    #[test]
    fn jobs_joining_a_group_must_agree_on_its_weight() {
        let c = Blkcg::new();
        let a = c.join("db", None).unwrap();
        assert_eq!(c.join("db", Some(300)).unwrap(), a);
        assert_eq!(c.join("/db", Some(300)).unwrap(), a);
        assert_eq!(c.join("db", None).unwrap(), a);
        assert_eq!(
            c.join("db", Some(200)).unwrap_err().to_string(),
            "cgroup 'db': weight 200 conflicts with the weight 300 set before"
        );
        assert_eq!(c.info(a).weight, 300);
    }
}
