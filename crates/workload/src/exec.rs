//! fio's `exec_prerun` and `exec_postrun`: a shell command run as a job starts and after
//! it ends (fio's `exec_string`). Both runners call it from their job's own context: the
//! threaded runtime from the job's thread, the simulator as the job starts and ends in
//! virtual time (the command itself runs in host time and is not part of the simulation).

/// Runs `sh -c "CMD > NAME.MODE.txt 2>&1"` in the current directory, the command line fio
/// builds (so with `a; b` only `b`'s output goes to the file), saying so on stderr as fio
/// says it on stdout; what the command writes elsewhere goes to stderr, not into the
/// report. `true` when it ran and exited 0: fio runs a job whose `exec_prerun` fails
/// without any I/O and without an error, and the callers do the same.
pub fn run_hook(job: &str, cmd: &str, mode: &str) -> bool {
    let out = format!("{job}.{mode}.txt");
    eprintln!("{job} : Saving output of {mode} in {out}");
    match std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{cmd} > {out} 2>&1"))
        .stdin(std::process::Stdio::null())
        .stdout(std::io::stderr())
        .status()
    {
        Ok(s) => s.success(),
        Err(e) => {
            eprintln!("{job}: exec_{mode}: sh: {e}");
            false
        }
    }
}
