//! `mqblk twin`: the options to [`mqblk_twin::TwinOptions`] (or, with `--resim`,
//! [`mqblk_twin::ResimOptions`]), the run interruptible by SIGINT/SIGTERM, the report printed
//! as a table or JSON.

use crate::args::TwinArgs;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Runs `mqblk twin`; returns the process exit code.
pub fn main(a: TwinArgs) -> i32 {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("mqblk twin: installing the signal handler: {e}");
            return 2;
        }
    }
    let mqblk = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("mqblk twin: finding the mqblk binary: {e}");
            return 2;
        }
    };
    // The kernel's costs are read by each simulator run; a bad file is said once, now.
    if let Err(e) = mqblk_sim::cost::KernelCosts::read(&a.kernel_costs) {
        eprintln!("mqblk twin: {e}");
        return 2;
    }
    let result = match (a.resim, a.profile, a.filename) {
        (Some(saved), Some(profile), _) => mqblk_twin::resim(
            &mqblk_twin::ResimOptions {
                saved,
                profile,
                tunables: a.tunables,
                kernel_costs: a.kernel_costs,
                mqblk,
                run_timeout: std::time::Duration::from_secs(a.run_timeout),
            },
            &stop,
        ),
        (_, profile, Some(filename)) => mqblk_twin::run(
            &mqblk_twin::TwinOptions {
                jobfile: a.jobfile,
                suite: a.suite,
                filename,
                schedulers: a.schedulers,
                repeats: a.repeats,
                tunables: a.tunables,
                fio: a.fio,
                sim: a.sim || profile.is_some(),
                profile,
                kernel_costs: a.kernel_costs,
                mqblk,
                run_timeout: std::time::Duration::from_secs(a.run_timeout),
            },
            &stop,
        ),
        // clap requires --filename without --resim, and --profile with it; said in one
        // line all the same rather than trusted to never happen.
        _ => {
            eprintln!("mqblk twin: --filename is needed, or --resim with --profile");
            return 2;
        }
    };
    match result {
        Ok(outcome) if a.output_format == "json" => {
            match serde_json::to_string_pretty(&outcome.json()) {
                Ok(s) => {
                    println!("{s}");
                    0
                }
                Err(e) => {
                    eprintln!("mqblk twin: internal: report JSON: {e}");
                    2
                }
            }
        }
        Ok(outcome) => {
            print!("{}", outcome.table());
            0
        }
        Err(mqblk_twin::TwinError::Interrupted) => {
            eprintln!("mqblk twin: interrupted; the device's scheduler is restored");
            130
        }
        Err(e) => {
            crate::args::print_error("twin", &e);
            2
        }
    }
}
