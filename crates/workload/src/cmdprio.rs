//! fio's priorities per command (`cmdprio_percentage`, `cmdprio_class`, `cmdprio`,
//! `cmdprio_bssplit`; fio's `engines/cmdprio.c`, options of its io_uring and libaio
//! engines): a share of a job's reads and writes carries another I/O priority than the
//! job's own, chosen I/O by I/O from fio's `prio_state` stream (seeded from its
//! `FIO_RAND_PRIO_CMDS` slot), so the same I/Os get it in fio and here. The kernel sees the
//! priority in each request (`bio->bi_ioprio`, an io_uring SQE's `ioprio`), where BFQ and
//! mq-deadline act on it; the report gives each priority's completion latencies apart
//! (fio's `clat_prio`).

use crate::pattern::frand::FRand;
use crate::Ddir;

/// The priority value the kernel and fio write (`ioprio_value`): `class << 13 | level`.
pub fn ioprio_value(class: u8, level: u8) -> u16 {
    u16::from(class) << 13 | u16::from(level)
}

/// fio's `IOPRIO_CLASS_RT`, the class `cmdprio_percentage`/`cmdprio_bssplit` use where
/// `cmdprio_class` is not given.
pub const CLASS_RT: u8 = 1;

/// One priority and the share of I/Os (percent) that carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrioShare {
    pub perc: u32,
    pub ioprio: u16,
}

/// The priorities of one block size (`cmdprio_bssplit`, fio's `cmdprio_bsprio`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BsPrio {
    pub bs: u64,
    pub prios: Vec<PrioShare>,
}

impl BsPrio {
    fn total(&self) -> u32 {
        self.prios.iter().map(|p| p.perc).sum()
    }
}

/// One entry of `cmdprio_bssplit` as written: `bs/perc` or `bs/perc/class/level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BssplitEntry {
    pub bs: u64,
    pub perc: u32,
    /// `(class, level)` when the entry names them; else `cmdprio_class`/`cmdprio`.
    pub prio: Option<(u8, u8)>,
}

/// A job's priorities per command, per direction (reads, writes; fio has none for trims).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmdPrio {
    /// `cmdprio_percentage`: this share of a direction's I/Os at one priority.
    Percentage([Option<PrioShare>; 2]),
    /// `cmdprio_bssplit`: shares by block size, each with its priority.
    Bssplit([Vec<BsPrio>; 2]),
}

/// The cmdprio options of a job section as written (`None` where not given).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CmdPrioOptions {
    pub percentage: Option<[u32; 2]>,
    pub class: Option<[u8; 2]>,
    pub level: Option<[u8; 2]>,
    pub bssplit: Option<[Vec<BssplitEntry>; 2]>,
}

impl CmdPrioOptions {
    /// What the options ask of a job whose directions are `does` (read, write), as
    /// `fio_cmdprio_init` decides it: `None` when no share is asked for; an error when
    /// both `cmdprio_percentage` and `cmdprio_bssplit` are (fio refuses the job).
    pub fn resolve(&self, does: [bool; 2]) -> Result<Option<CmdPrio>, String> {
        let by_perc = self.percentage.is_some_and(|p| p.iter().any(|&v| v > 0));
        let by_bs = self.bssplit.is_some();
        if by_perc && by_bs {
            return Err("cmdprio_percentage and cmdprio_bssplit are mutually exclusive".into());
        }
        // The class defaults to real-time, the level to 0 (`fio_cmdprio_parse_and_gen`).
        let implicit = |d: usize| {
            let class = self.class.map_or(CLASS_RT, |c| c[d]);
            let level = self.level.map_or(0, |l| l[d]);
            ioprio_value(class, level)
        };
        if let Some(lists) = &self.bssplit {
            let per_dir = |d: usize| -> Result<Vec<BsPrio>, String> {
                if !does[d] {
                    return Ok(Vec::new());
                }
                // Sorted by block size, entries of one size together in their order
                // (`fio_split_prio_cmp`), entries of 0% left out.
                let mut entries: Vec<BssplitEntry> =
                    lists[d].iter().copied().filter(|e| e.perc > 0).collect();
                entries.sort_by_key(|e| e.bs);
                let mut out: Vec<BsPrio> = Vec::new();
                for e in entries {
                    let ioprio = e.prio.map_or(implicit(d), |(c, l)| ioprio_value(c, l));
                    let share = PrioShare {
                        perc: e.perc,
                        ioprio,
                    };
                    match out.last_mut() {
                        Some(b) if b.bs == e.bs => b.prios.push(share),
                        _ => out.push(BsPrio {
                            bs: e.bs,
                            prios: vec![share],
                        }),
                    }
                    let last = out.last().expect("just pushed");
                    if last.total() > 100 {
                        return Err(format!(
                            "cmdprio_bssplit: the shares of block size {} add up to more than 100%",
                            last.bs
                        ));
                    }
                }
                Ok(out)
            };
            return Ok(Some(CmdPrio::Bssplit([per_dir(0)?, per_dir(1)?])));
        }
        if !by_perc {
            return Ok(None);
        }
        let perc = self.percentage.unwrap_or_default();
        Ok(Some(CmdPrio::Percentage(std::array::from_fn(|d| {
            (does[d] && perc[d] > 0).then(|| PrioShare {
                perc: perc[d],
                ioprio: implicit(d),
            })
        }))))
    }
}

impl CmdPrio {
    /// The priority an I/O of `dir` and `len` bytes carries instead of the job's, if any
    /// (`fio_cmdprio_set_ioprio`): a number in 0..=99 is drawn from `rng` for every I/O
    /// whose direction and size have a share, and picks the priority whose cumulative
    /// share it falls under. Trims and flushes draw nothing.
    pub fn pick(&self, rng: &mut FRand, dir: Ddir, len: u32) -> Option<u16> {
        let d = match dir {
            Ddir::Read => 0,
            Ddir::Write => 1,
            Ddir::Trim => return None,
        };
        let shares: &[PrioShare] = match self {
            CmdPrio::Percentage(p) => std::slice::from_ref(p[d].as_ref()?),
            CmdPrio::Bssplit(b) => &b[d].iter().find(|b| b.bs == u64::from(len))?.prios,
        };
        let total: u32 = shares.iter().map(|s| s.perc).sum();
        if total == 0 {
            return None;
        }
        let r = rng.between(0, 99) as u32;
        if r >= total {
            return None;
        }
        let mut upto = 0;
        shares.iter().find_map(|s| {
            upto += s.perc;
            (r < upto).then_some(s.ioprio)
        })
    }

    /// The priorities a direction's I/Os may carry besides the job's own, each once, in
    /// the order fio indexes its per-priority statistics (`assign_clat_prio_index`).
    pub fn prios(&self, dir: Ddir) -> Vec<u16> {
        let d = match dir {
            Ddir::Read => 0,
            Ddir::Write => 1,
            Ddir::Trim => return Vec::new(),
        };
        let all: Vec<u16> = match self {
            CmdPrio::Percentage(p) => p[d].iter().map(|s| s.ioprio).collect(),
            CmdPrio::Bssplit(b) => b[d]
                .iter()
                .flat_map(|b| b.prios.iter().map(|s| s.ioprio))
                .collect(),
        };
        let mut out: Vec<u16> = Vec::new();
        for p in all {
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perc(read: u32, write: u32) -> CmdPrioOptions {
        CmdPrioOptions {
            percentage: Some([read, write]),
            ..CmdPrioOptions::default()
        }
    }

    /// fio's defaults: real-time class, level 0, for the directions the job does.
    #[test]
    fn a_percentage_alone_is_real_time_level_0_for_the_directions_the_job_does() {
        let c = perc(30, 30).resolve([true, false]).unwrap().unwrap();
        assert_eq!(
            c,
            CmdPrio::Percentage([
                Some(PrioShare {
                    perc: 30,
                    ioprio: 1 << 13
                }),
                None
            ])
        );
        assert_eq!(c.prios(Ddir::Read), vec![1 << 13]);
        assert!(c.prios(Ddir::Write).is_empty());
        assert_eq!(perc(0, 0).resolve([true, true]).unwrap(), None);
    }

    #[test]
    fn percentage_and_bssplit_together_are_refused() {
        let o = CmdPrioOptions {
            bssplit: Some([Vec::new(), Vec::new()]),
            ..perc(10, 10)
        };
        assert!(o
            .resolve([true, true])
            .unwrap_err()
            .contains("mutually exclusive"));
    }

    /// About the asked share of I/Os carries the priority, and exactly those whose draw is
    /// under it: the same stream gives the same choice.
    #[test]
    fn the_share_drawn_is_the_share_asked() {
        let c = perc(25, 25).resolve([true, true]).unwrap().unwrap();
        let mut rng = FRand::new(12345, false);
        let hits = (0..100_000)
            .filter(|_| c.pick(&mut rng, Ddir::Read, 4096).is_some())
            .count();
        assert!((24_000..26_000).contains(&hits), "{hits}");
        let (mut a, mut b) = (FRand::new(7, false), FRand::new(7, false));
        let mut check = FRand::new(7, false);
        for _ in 0..1000 {
            let picked = c.pick(&mut a, Ddir::Write, 4096);
            assert_eq!(picked, c.pick(&mut b, Ddir::Write, 4096));
            assert_eq!(picked.is_some(), check.between(0, 99) < 25);
        }
        assert_eq!(c.pick(&mut a, Ddir::Trim, 4096), None);
    }

    /// Shares by block size: a size without entries draws nothing; a size's entries split
    /// its draws in order; a 0% entry is left out.
    #[test]
    fn bssplit_shares_follow_the_block_size() {
        let e = |bs, perc, prio| BssplitEntry { bs, perc, prio };
        let o = CmdPrioOptions {
            class: Some([2, 2]),
            level: Some([3, 3]),
            bssplit: Some([
                vec![
                    e(65536, 50, Some((1, 0))),
                    e(4096, 0, Some((1, 1))),
                    e(4096, 20, None),
                    e(65536, 10, Some((3, 0))),
                ],
                Vec::new(),
            ]),
            ..CmdPrioOptions::default()
        };
        let c = o.resolve([true, true]).unwrap().unwrap();
        let be3 = ioprio_value(2, 3);
        let (rt0, idle) = (ioprio_value(1, 0), ioprio_value(3, 0));
        assert_eq!(c.prios(Ddir::Read), vec![be3, rt0, idle]);
        let mut rng = FRand::new(99, false);
        let mut seen = std::collections::HashMap::new();
        for _ in 0..10_000 {
            *seen.entry(c.pick(&mut rng, Ddir::Read, 65536)).or_insert(0) += 1;
        }
        let share = |k| f64::from(*seen.get(&k).unwrap_or(&0)) / 10_000.0;
        assert!((share(Some(rt0)) - 0.5).abs() < 0.03, "{seen:?}");
        assert!((share(Some(idle)) - 0.1).abs() < 0.02, "{seen:?}");
        assert_eq!(c.pick(&mut rng, Ddir::Read, 8192), None);
        assert_eq!(c.pick(&mut rng, Ddir::Write, 65536), None);
        let over = CmdPrioOptions {
            bssplit: Some([vec![e(4096, 60, None), e(4096, 50, None)], Vec::new()]),
            ..CmdPrioOptions::default()
        };
        assert!(over.resolve([true, true]).is_err());
    }
}
