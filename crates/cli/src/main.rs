//! `mqblk`: the command-line front end, a thin shell over the library crates.

fn main() {
    std::process::exit(mqblk::run(std::env::args().collect()));
}
