//! Unix socket paths a server listens on, handled so that it never removes what is not its
//! own: a path that exists is refused unless it is a socket nobody answers on (a server that
//! died without cleaning up) and the user asked for such sockets to be replaced; at exit the
//! path is removed only if it is still the socket this process made.

use crate::error::SocketError;
use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

type FileId = (u64, u64, i64, i64);

fn file_id(path: &Path) -> Option<FileId> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino(), m.ctime(), m.ctime_nsec()))
}

/// A socket path this process bound, with the identity of the file it made there.
#[derive(Debug)]
pub struct OwnedSocket {
    path: PathBuf,
    /// The socket file right after `bind`: device, inode and change time (inode numbers
    /// are reused at once on tmpfs, so a later socket at the path may have ours).
    id: Option<FileId>,
}

impl OwnedSocket {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the socket file if it is still the one this process made: not a file or a
    /// socket someone put there since.
    pub fn remove(&self) {
        let now = file_id(&self.path);
        if now.is_some() && now == self.id {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Binds a listening socket at `path`. `what` names the option for errors
/// (`--listen=unix:/tmp/x`). A path that exists is refused with one line saying why, except
/// a stale socket (connecting is refused) when `replace_stale` is set, which is removed first.
pub fn bind(
    path: &Path,
    what: &str,
    replace_stale: bool,
) -> Result<(UnixListener, OwnedSocket), SocketError> {
    let what = what.to_string();
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(source) => return Err(SocketError::Io { what, source }),
        Ok(m) if !m.file_type().is_socket() => {
            return Err(SocketError::NotASocket {
                what,
                path: path.to_path_buf(),
            })
        }
        Ok(_) => match UnixStream::connect(path) {
            Ok(_) => {
                return Err(SocketError::InUse {
                    what,
                    path: path.to_path_buf(),
                })
            }
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                if !replace_stale {
                    return Err(SocketError::Stale {
                        what,
                        path: path.to_path_buf(),
                    });
                }
                if let Err(source) = std::fs::remove_file(path) {
                    return Err(SocketError::RemoveStale { what, source });
                }
            }
            Err(source) => {
                return Err(SocketError::Unchecked {
                    what,
                    path: path.to_path_buf(),
                    source,
                })
            }
        },
    }
    let l = UnixListener::bind(path).map_err(|source| SocketError::Io { what, source })?;
    let id = file_id(path);
    Ok((
        l,
        OwnedSocket {
            path: path.to_path_buf(),
            id,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mqblk-sock-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_regular_file_is_never_replaced() {
        let d = dir("file");
        let p = d.join("data");
        std::fs::write(&p, b"precious").unwrap();
        for replace in [false, true] {
            let e = bind(&p, "--listen=unix:x", replace).unwrap_err();
            assert!(matches!(e, SocketError::NotASocket { .. }), "{e}");
            assert!(e.to_string().contains("is not a socket"), "{e}");
        }
        assert_eq!(std::fs::read(&p).unwrap(), b"precious");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_live_socket_is_refused_and_a_stale_one_only_when_asked() {
        let d = dir("live");
        let p = d.join("s");
        let (live, owned) = bind(&p, "--listen", false).unwrap();
        let e = bind(&p, "--listen", true).unwrap_err();
        assert!(matches!(e, SocketError::InUse { .. }), "{e}");
        assert!(e.to_string().contains("is listening"), "{e}");
        drop(live);
        // The file stays behind, as after a server killed with SIGKILL.
        let e = bind(&p, "--listen", false).unwrap_err();
        assert!(matches!(e, SocketError::Stale { .. }), "{e}");
        assert!(e.to_string().contains("stale socket"), "{e}");
        let (_l, again) = bind(&p, "--listen", true).unwrap();
        // The first owner's removal must not take the new server's socket.
        owned.remove();
        assert!(p.exists(), "removed a socket that is not ours any more");
        again.remove();
        assert!(!p.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn removal_leaves_a_file_put_in_place_of_our_socket() {
        let d = dir("swap");
        let p = d.join("s");
        let (l, owned) = bind(&p, "--listen", false).unwrap();
        drop(l);
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, b"someone else's").unwrap();
        owned.remove();
        assert_eq!(std::fs::read(&p).unwrap(), b"someone else's");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
