//! `mqblk ctl`: the client of a running `mqblk serve`'s control socket (`--admin=PATH`,
//! served by [`mqblk_runtime::admin`]): one request, its reply printed.

use crate::args::CtlArgs;
use mqblk_runtime::admin::{CLIENT_TIMEOUT, DRAIN_TIMEOUT};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// `mqblk ctl`: sends one request to a running server's control socket and prints the reply.
pub fn ctl_main(a: CtlArgs) -> i32 {
    let line = match (a.op.as_str(), &a.value) {
        ("show", None) => format!("show {}", a.path),
        ("store", Some(v)) => format!("store {} {v}", a.path),
        ("show", Some(_)) => {
            eprintln!("mqblk ctl: show takes no value");
            return 2;
        }
        _ => {
            eprintln!("mqblk ctl: store needs a value");
            return 2;
        }
    };
    match ask(&a.admin, &line) {
        Ok(reply) => match reply.strip_prefix("ok") {
            Some(rest) => {
                let rest = rest.trim_start();
                if !rest.is_empty() {
                    println!("{rest}");
                }
                0
            }
            None => {
                eprintln!("mqblk ctl: {}", reply.trim_start_matches("error: "));
                1
            }
        },
        Err(e) => {
            eprintln!("mqblk ctl: --admin={}: {e}", a.admin.display());
            2
        }
    }
}

fn ask(path: &Path, line: &str) -> std::io::Result<String> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(DRAIN_TIMEOUT + CLIENT_TIMEOUT))?;
    s.write_all(line.as_bytes())?;
    s.write_all(b"\n")?;
    let mut reply = String::new();
    BufReader::new(s).read_line(&mut reply)?;
    if reply.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the server closed the connection without a reply",
        ));
    }
    Ok(reply.trim_end().to_string())
}
