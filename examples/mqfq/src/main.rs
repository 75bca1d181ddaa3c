//! `mqblk-mqfq`: the `mqblk` command with MQFQ registered, so that every subcommand
//! (`bench`, `sim`, `serve`, `replay`, `schedulers`) takes `ioscheduler=mqfq`.

fn main() {
    if let Err(e) = mqblk_mqfq::register() {
        eprintln!("mqblk-mqfq: {e}");
        std::process::exit(2);
    }
    std::process::exit(mqblk::run(std::env::args().collect()));
}
