//! NBD: the wire protocol and the server behind `mqblk serve`.
