//! NBD: the wire protocol ([`proto`], pure functions over bytes) and the server behind
//! `mqblk serve` ([`server`]), which exports `RequestQueue`s with one software queue per
//! connection, and TLS for it ([`tls`]).

pub mod proto;
pub mod server;
pub mod tls;

pub use server::{Export, Listener, Server, Stream};
