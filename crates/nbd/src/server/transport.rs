//! The byte streams to clients and the listeners they come from: TCP, Unix sockets, and
//! TLS over either.

use super::*;

/// A byte stream to a client.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// Inside TLS (after STARTTLS), over one of the others.
    Tls(crate::tls::TlsStream),
}

impl Stream {
    pub(super) fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) {
        let _ = match self {
            Stream::Tcp(s) => s.set_read_timeout(read).and(s.set_write_timeout(write)),
            Stream::Unix(s) => s.set_read_timeout(read).and(s.set_write_timeout(write)),
            Stream::Tls(t) => {
                t.socket().set_timeouts(read, write);
                Ok(())
            }
        };
    }
    pub(super) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tls(t) => Stream::Tls(t.try_clone()),
        })
    }
    pub(crate) fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tls(t) => {
                t.shutdown();
                Ok(())
            }
        };
    }
    /// Reads the socket itself (under TLS: its records), from any thread holding a clone.
    pub(crate) fn raw_read(&self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).read(b),
            Stream::Unix(s) => (&*s).read(b),
            Stream::Tls(t) => t.socket().raw_read(b),
        }
    }
    /// Writes the socket itself (under TLS: records rustls made).
    pub(crate) fn raw_write(&self, b: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).write(b),
            Stream::Unix(s) => (&*s).write(b),
            Stream::Tls(t) => t.socket().raw_write(b),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(b),
            Stream::Unix(s) => s.read(b),
            Stream::Tls(t) => t.read(b),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(b),
            Stream::Unix(s) => s.write(b),
            Stream::Tls(t) => t.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
            Stream::Tls(t) => t.flush(),
        }
    }
}

/// Where the server listens.
pub enum Listener {
    Tcp(TcpListener),
    /// A Unix socket and the path it was bound at, removed at exit if still ours.
    Unix(UnixListener, mqblk_runtime::unix_socket::OwnedSocket),
}
