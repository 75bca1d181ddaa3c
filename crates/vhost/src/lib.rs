//! vhost-user-blk: virtual machines' virtio-blk devices served by mqblk's queues
//! (`mqblk serve --vhost-user-blk=SOCKET`).
//!
//! [`virtio_blk`] is the device's protocol as pure functions (features, configuration space,
//! what a request asks for); [`backend`] moves requests between a guest's virtqueues and the
//! block layer, one submitter per virtqueue; [`server`] serves one socket, one front-end at a
//! time. The vhost-user protocol, the virtqueues and guest memory are rust-vmm's crates
//! (`vhost`, `vhost-user-backend`, `virtio-queue`, `vm-memory`).

pub mod backend;
pub mod server;
pub mod virtio_blk;

pub use backend::{Backend, BlkDevice, VqStats};
pub use server::{serve, ServeReport};
