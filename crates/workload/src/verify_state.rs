//! fio's verify state (`verify_state_save`, `verify_state_load`): a writing job with verify
//! leaves, as it ends, how far its writes went: how many it issued and, per file, the
//! offsets of the last `iodepth` that completed. A later run of the same job with
//! `verify_only` and `verify_state_load` reads back no further than that (fio's
//! `verify_state_should_stop`), so a run cut short (a runtime, an error, a power cut
//! after `--trigger`) is verified up to where it was, not failed on blocks it never
//! wrote.
//!
//! The file is named as fio names it, `local-NAME-INDEX-verify.state` in the current
//! directory (`/` in the name turned to `.`, INDEX the clone's place among all the run's
//! job clones, from 0), and holds mqblk's own JSON: fio's is a binary dump of its own
//! structures, and its verify headers are not mqblk's either, so a file written by one
//! tool is verified by that tool.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The format's version, refused when another.
const VERSION: u32 = 1;

/// How far one job clone's writes went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyState {
    /// Which format this is.
    pub version: u32,
    /// The job and clone that wrote it.
    pub job: String,
    pub index: usize,
    /// fio's `numberio`: the writes the job issued.
    pub writes_issued: u64,
    /// The job's `iodepth`: how many writes at the end may not have completed.
    pub depth: u32,
    /// Per file of the job, the offsets in the file of the last `depth` writes that
    /// completed, oldest first.
    pub completed: Vec<Vec<u64>>,
}

impl VerifyState {
    pub fn new(
        job: &str,
        index: usize,
        writes_issued: u64,
        depth: u32,
        completed: Vec<Vec<u64>>,
    ) -> VerifyState {
        VerifyState {
            version: VERSION,
            job: job.to_string(),
            index,
            writes_issued,
            depth,
            completed,
        }
    }

    /// fio's `verify_state_should_stop`: whether the verify pass ends before reading back
    /// the block at `offset` of file `file`, having completed `reads_done` reads. Outside
    /// the last `depth` writes every block was written; inside, only the ones seen
    /// complete were.
    pub fn stops_before(&self, reads_done: u64, file: usize, offset: u64) -> bool {
        let depth = u64::from(self.depth);
        let n = self.writes_issued;
        let in_window = reads_done >= depth && n.wrapping_sub(reads_done) <= depth;
        if !in_window && n > depth {
            return false;
        }
        !self
            .completed
            .get(file)
            .is_some_and(|offs| offs.contains(&offset))
    }

    /// Where fio keeps the state of clone `index` of job `name`, in `dir` (the runners
    /// give the current directory, `""`).
    pub fn path(dir: &Path, name: &str, index: usize) -> PathBuf {
        dir.join(format!(
            "local-{}-{index}-verify.state",
            name.replace('/', ".")
        ))
    }

    /// Writes the state in `dir` where [`path`](Self::path) says; the error names the
    /// file.
    pub fn save(&self, dir: &Path) -> Result<PathBuf, String> {
        let path = Self::path(dir, &self.job, self.index);
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(&path, text + "\n")
            .map(|()| path.clone())
            .map_err(|e| format!("cannot write verify state {}: {e}", path.display()))
    }

    /// The state clone `index` of job `name` left; the error names the file and says what
    /// is wrong with it.
    pub fn load(dir: &Path, name: &str, index: usize) -> Result<VerifyState, String> {
        let path = Self::path(dir, name, index);
        let shown = path.display();
        let bytes = std::fs::read(&path).map_err(|e| {
            format!(
                "verify_state_load: cannot read {shown}: {e} (a run of the writing job leaves it, with verify= and verify_state_save=1, the default)"
            )
        })?;
        let state: VerifyState = serde_json::from_slice(&bytes).map_err(|e| {
            format!("verify_state_load: {shown} is not a verify state mqblk wrote (fio's own are binary): {e}")
        })?;
        if state.version != VERSION {
            return Err(format!(
                "verify_state_load: {shown} has version {}, this build reads {VERSION}",
                state.version
            ));
        }
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pass_stops_at_the_first_block_in_the_last_depth_not_seen_complete() {
        // Ten writes at depth 2; the last two issued were at 40 and 50, and only 50 and
        // the one before (at 30) completed.
        let s = VerifyState::new("w", 0, 10, 2, vec![vec![30, 50]]);
        // Before the window every block goes.
        assert!(!s.stops_before(0, 0, 0));
        assert!(!s.stops_before(7, 0, 70));
        // In it, only what completed.
        assert!(!s.stops_before(8, 0, 30));
        assert!(s.stops_before(8, 0, 40));
        assert!(!s.stops_before(9, 0, 50));
        // Past the writes issued, nothing.
        assert!(s.stops_before(10, 0, 60));
        // Fewer writes than the depth: only what completed.
        let short = VerifyState::new("w", 0, 1, 4, vec![vec![8]]);
        assert!(!short.stops_before(0, 0, 8));
        assert!(short.stops_before(0, 0, 16));
        assert!(short.stops_before(0, 1, 8));
    }

    #[test]
    fn a_state_file_round_trips_and_a_foreign_one_gets_one_line() {
        assert_eq!(
            VerifyState::path(Path::new(""), "a/b", 3),
            PathBuf::from("local-a.b-3-verify.state")
        );
        let dir = std::env::temp_dir().join(format!("mqblk-vstate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = VerifyState::new("a/b", 3, 12, 4, vec![vec![1, 2], vec![]]);
        assert_eq!(s.save(&dir).unwrap(), dir.join("local-a.b-3-verify.state"));
        assert_eq!(VerifyState::load(&dir, "a/b", 3).unwrap(), s);
        std::fs::write(dir.join("local-x-0-verify.state"), [3u8, 0, 0, 0]).unwrap();
        let e = VerifyState::load(&dir, "x", 0).unwrap_err();
        assert!(e.contains("not a verify state mqblk wrote"), "{e}");
        let e = VerifyState::load(&dir, "y", 0).unwrap_err();
        assert!(e.contains("local-y-0-verify.state: No such file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
