//! Block drivers.
