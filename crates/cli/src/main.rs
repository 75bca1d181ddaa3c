//! `mqblk`: the command-line front end.

mod bench;
mod replay;
mod replay_real;
mod serve;
mod sim;
mod trace_cmd;

const USAGE: &str = "\
usage: mqblk <command> [args]

commands:
  bench        run fio-compatible jobs through the block layer (mqblk bench --help)
  sim          run the same jobs in the deterministic simulator (mqblk sim --help)
  scenario     reproduce a seed's experiment in the simulator (mqblk scenario list)
  replay       replay a blktrace capture through the stack (mqblk replay --help)
  trace        capture a block device's requests as blktrace files; dump trace files
  serve        export a device over NBD, one software queue per connection (mqblk serve --help)
  schedulers   list the I/O schedulers and their tunables
  version      print the version
";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("bench") => bench::main(&args[1..]),
        Some("sim") => sim::main(&args[1..]),
        Some("scenario") => sim::scenario_main(&args[1..]),
        Some("replay") => replay::main(&args[1..]),
        Some("trace") => trace_cmd::main(&args[1..]),
        Some("serve") => serve::main(&args[1..]),
        Some("schedulers") => {
            print_schedulers();
            0
        }
        Some("version" | "--version" | "-V") => {
            println!("mqblk {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Some("help" | "--help" | "-h") | None => {
            print!("{USAGE}");
            0
        }
        Some(other) => {
            eprintln!("mqblk: unknown command '{other}'\n{USAGE}");
            2
        }
    };
    std::process::exit(code);
}

fn print_schedulers() {
    for e in mqblk_sched::REGISTRY {
        let alias = e.alias.map(|a| format!(" (alias {a})")).unwrap_or_default();
        let mq = if e.features.contains(mqblk_core::ElvFeatures::MQ_AWARE) {
            ", MQ_AWARE"
        } else {
            ""
        };
        println!("{}{alias}{mq}", e.name);
        for t in e.tunables {
            println!(
                "  {:<20} default {:<10} {:<10} range {}..={}  {}",
                t.name, t.default, t.unit, t.min, t.max, t.help
            );
        }
        for a in e.aliases {
            println!("  {:<20} the same as {} in {}", a.name, a.target, a.unit);
        }
    }
}
