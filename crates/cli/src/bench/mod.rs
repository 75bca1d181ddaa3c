//! `mqblk bench`: fio-compatible jobs through the stack.

pub mod device;
pub mod pattern;
pub mod runner;
pub mod verify;
