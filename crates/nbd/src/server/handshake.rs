//! The fixed-newstyle handshake (the NBD spec's option haggling): the options a client
//! sends until it chooses an export, and the replies to each.

use super::*;

pub(super) fn read_u32(s: &mut Stream) -> io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

/// Sends the reply of kind `kind` with `data` to option `option` (`NBD_REP_*`).
fn reply(s: &mut Stream, option: u32, kind: u32, data: &[u8]) -> io::Result<()> {
    s.write_all(&proto::option_reply(option, kind, data))
}

pub(super) fn protocol(e: ProtoError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// What the handshake agreed on.
#[derive(Copy, Clone, Debug)]
pub(super) struct Session {
    pub(super) framing: Framing,
    /// `base:allocation` was selected (BLOCK_STATUS allowed).
    pub(super) meta: bool,
    /// The client asked for `NBD_INFO_BLOCK_SIZE`, so it keeps to the block sizes we gave.
    /// One that did not may send requests at any byte offset and length (the protocol's
    /// default minimum block size is 1), served through whole blocks.
    pub(super) sizes: bool,
}

/// The export a client chose, how it talks, and the software queue its session holds.
pub(super) type Chosen = (Arc<Export>, Session, u16);

/// The handshake; `Ok(None)` when the client aborted or left. After STARTTLS, `s` is the
/// TLS session on the client's socket.
pub(super) fn handshake(
    s: &mut Stream,
    exports: &[Arc<Export>],
    tls: Option<&Tls>,
) -> io::Result<Option<Chosen>> {
    s.write_all(&proto::greeting())?;
    let no_zeroes = proto::client_flags(read_u32(s)?).map_err(protocol)?;
    let mut structured = false;
    let mut extended = false;
    let mut meta = false;
    let mut sizes = false;
    let mut secure = false;
    let offered = tls.filter(|t| t.mode != TlsMode::Off);
    let required = offered.is_some_and(|t| t.mode == TlsMode::Require);
    loop {
        let mut h = [0u8; 16];
        s.read_exact(&mut h)?;
        let (option, len) = proto::option_header(&h).map_err(protocol)?;
        let mut data = vec![0u8; len as usize];
        s.read_exact(&mut data)?;
        if required && !secure && option != opt::STARTTLS && option != opt::ABORT {
            // Forced TLS: nothing but the upgrade (or leaving) in the clear. EXPORT_NAME
            // cannot carry the error, so the connection ends.
            if option == opt::EXPORT_NAME {
                return Ok(None);
            }
            reply(
                s,
                option,
                rep::ERR_TLS_REQD,
                b"this server requires TLS: send NBD_OPT_STARTTLS first",
            )?;
            continue;
        }
        let framing = if extended {
            Framing::Extended
        } else if structured {
            Framing::Structured
        } else {
            Framing::Simple
        };
        let find = |name: &str| {
            exports
                .iter()
                .find(|e| e.name == name || (name.is_empty() && exports.len() == 1))
                .cloned()
        };
        let mut session = Session {
            framing,
            meta,
            sizes,
        };
        match option {
            opt::EXPORT_NAME => {
                let name = String::from_utf8_lossy(&data).into_owned();
                // This option cannot carry an error: an unknown export (or the option after
                // extended headers, which forbid it) ends the connection.
                let Some(e) = find(&name).filter(|_| !extended) else {
                    return Ok(None);
                };
                // Nor can it say the export is full: the connection ends.
                let Some(ctx) = e.take_ctx() else {
                    return Ok(None);
                };
                let sent = s.write_all(&proto::export_name_reply(
                    e.size,
                    e.flags(framing),
                    no_zeroes,
                ));
                if let Err(err) = sent {
                    e.put_ctx(ctx);
                    return Err(err);
                }
                return Ok(Some((e, session, ctx)));
            }
            opt::ABORT => {
                let _ = reply(s, option, rep::ACK, &[]);
                return Ok(None);
            }
            opt::LIST => {
                if !data.is_empty() {
                    reply(s, option, rep::ERR_INVALID, b"LIST takes no data")?;
                    continue;
                }
                for e in exports {
                    reply(
                        s,
                        option,
                        rep::SERVER,
                        &proto::rep_server(&e.name, &e.description),
                    )?;
                }
                reply(s, option, rep::ACK, &[])?;
            }
            opt::STRUCTURED_REPLY | opt::EXTENDED_HEADERS => {
                if !data.is_empty() {
                    reply(s, option, rep::ERR_INVALID, b"takes no data")?;
                    continue;
                }
                if option == opt::STRUCTURED_REPLY {
                    structured = true;
                } else {
                    extended = true;
                }
                reply(s, option, rep::ACK, &[])?;
            }
            opt::LIST_META_CONTEXT | opt::SET_META_CONTEXT => {
                let set = option == opt::SET_META_CONTEXT;
                if set && framing == Framing::Simple {
                    reply(
                        s,
                        option,
                        rep::ERR_INVALID,
                        b"negotiate structured replies first",
                    )?;
                    continue;
                }
                let (name, queries) = match proto::parse_meta_request(&data) {
                    Ok(x) => x,
                    Err(e) => {
                        reply(s, option, rep::ERR_INVALID, e.to_string().as_bytes())?;
                        continue;
                    }
                };
                if find(&name).is_none() {
                    reply(s, option, rep::ERR_UNKNOWN, b"no such export")?;
                    continue;
                }
                let wanted = (!set && queries.is_empty())
                    || queries.iter().any(|q| {
                        q == proto::BASE_ALLOCATION || (!set && (q == "base:" || q == "base"))
                    });
                if set {
                    meta = wanted;
                }
                if wanted {
                    reply(
                        s,
                        option,
                        rep::META_CONTEXT,
                        &proto::rep_meta_context(proto::BASE_ALLOCATION_ID, proto::BASE_ALLOCATION),
                    )?;
                }
                reply(s, option, rep::ACK, &[])?;
            }
            opt::INFO | opt::GO => {
                let (name, wanted) = match proto::parse_info_request(&data) {
                    Ok(x) => x,
                    Err(e) => {
                        reply(s, option, rep::ERR_INVALID, e.to_string().as_bytes())?;
                        continue;
                    }
                };
                let Some(e) = find(&name) else {
                    reply(
                        s,
                        option,
                        rep::ERR_UNKNOWN,
                        format!("no export named '{name}'").as_bytes(),
                    )?;
                    continue;
                };
                if wanted.contains(&info::BLOCK_SIZE) {
                    sizes = true;
                    session.sizes = true;
                }
                // GO starts a session: it needs a free slot of the export, held from here.
                let ctx = if option == opt::GO {
                    let Some(ctx) = e.take_ctx() else {
                        reply(
                            s,
                            option,
                            rep::ERR_POLICY,
                            format!(
                                "export '{}' has as many sessions as it takes; try again later",
                                e.name
                            )
                            .as_bytes(),
                        )?;
                        continue;
                    };
                    Some(ctx)
                } else {
                    None
                };
                match (info_replies(s, option, &e, &wanted, framing), ctx) {
                    (Err(err), Some(c)) => {
                        e.put_ctx(c);
                        return Err(err);
                    }
                    (Err(err), None) => return Err(err),
                    (Ok(()), Some(c)) => return Ok(Some((e, session, c))),
                    (Ok(()), None) => {}
                }
            }
            opt::STARTTLS => {
                let Some(t) = offered else {
                    reply(s, option, rep::ERR_POLICY, b"TLS is not offered")?;
                    continue;
                };
                if !data.is_empty() || secure {
                    reply(
                        s,
                        option,
                        rep::ERR_INVALID,
                        if secure {
                            &b"TLS is already on"[..]
                        } else {
                            &b"STARTTLS takes no data"[..]
                        },
                    )?;
                    continue;
                }
                reply(s, option, rep::ACK, &[])?;
                *s = crate::tls::wrap(t.config.clone(), s.try_clone()?)?;
                secure = true;
                // What was agreed in the clear is forgotten (the spec; nbdkit's
                // CVE-2021-3716 was a structured-reply state kept across STARTTLS).
                (structured, extended, meta, sizes) = (false, false, false, false);
            }
            _ => {
                reply(s, option, rep::ERR_UNSUP, &[])?;
            }
        }
    }
}

/// The replies to INFO or GO for export `e`: the information asked for, the block sizes and
/// size and flags always (our constraints differ from the defaults), then the ACK.
pub(super) fn info_replies(
    s: &mut Stream,
    option: u32,
    e: &Export,
    wanted: &[u16],
    framing: Framing,
) -> io::Result<()> {
    if wanted.contains(&info::NAME) {
        reply(s, option, rep::INFO, &proto::info_text(info::NAME, &e.name))?;
    }
    if wanted.contains(&info::DESCRIPTION) && !e.description.is_empty() {
        reply(
            s,
            option,
            rep::INFO,
            &proto::info_text(info::DESCRIPTION, &e.description),
        )?;
    }
    reply(
        s,
        option,
        rep::INFO,
        &proto::info_block_size(e.min_block, e.min_block.max(4096), e.max_payload),
    )?;
    reply(
        s,
        option,
        rep::INFO,
        &proto::info_export(e.size, e.flags(framing)),
    )?;
    reply(s, option, rep::ACK, &[])
}
