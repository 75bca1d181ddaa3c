//! Requests not in whole blocks, from clients that did not negotiate block sizes: served
//! through the blocks they touch (read, and for a change written back with the new bytes),
//! and the submission of a request's bios.

use super::*;

/// Marks the bios of [`serve_unaligned`], which waits for them itself.
pub(super) const UNALIGNED: u64 = u64::MAX;

/// Serves a request that does not start and end on the export's block boundaries, from a
/// client that did not negotiate block sizes: through the whole blocks it touches, read and
/// (for a change) written back with the new bytes in place, synchronously and under the
/// export's lock for such changes, so two of them on one block never interleave. A TRIM
/// keeps to the whole blocks inside its range (it is only a hint). Returns the NBD error (0
/// for success) and, for a read, the bytes asked for. Completions of the connection's other
/// requests that come meanwhile stay in `h.done()` for the caller.
pub(super) fn serve_unaligned(
    h: &mut SubmitterHandle,
    e: &Export,
    r: &Request,
    data: Option<IoBuf>,
) -> (u32, Option<Vec<u8>>) {
    let b = e.min_block as u64;
    let (start, end) = (r.offset / b * b, (r.offset + r.length).div_ceil(b) * b);
    let fua = r.flags & cflag::FUA != 0;
    let mut wait = |h: &mut SubmitterHandle, bio: Bio| -> Bio {
        h.submit(bio.with_private(UNALIGNED));
        loop {
            if let Some(i) = h.done().iter().position(|x| x.private == UNALIGNED) {
                return h.done().swap_remove(i);
            }
            let held = h.done().len();
            h.reap(held + 1, 200_000);
        }
    };
    let sectors = ((end - start) / 512) as u32;
    let read_span = |h: &mut SubmitterHandle,
                     wait: &mut dyn FnMut(&mut SubmitterHandle, Bio) -> Bio| {
        let bio = wait(
            h,
            Bio::new(ReqOp::Read, start / 512, sectors)
                .with_buf(IoBuf::new((end - start) as usize)),
        );
        (nbd_error(bio.status), bio.buf)
    };
    let skip = (r.offset - start) as usize;
    let len = r.length as usize;
    match r.kind {
        cmd::READ => {
            let (code, buf) = read_span(h, &mut wait);
            if code != 0 {
                return (code, None);
            }
            let buf = buf.expect("a read carries its buffer");
            (0, Some(buf.as_slice()[skip..skip + len].to_vec()))
        }
        cmd::WRITE | cmd::WRITE_ZEROES => {
            let _one_at_a_time = e.rmw.lock();
            let (code, buf) = read_span(h, &mut wait);
            if code != 0 {
                return (code, None);
            }
            let mut buf = buf.expect("a read carries its buffer");
            let dst = &mut buf.as_mut_slice()[skip..skip + len];
            match &data {
                Some(d) if r.kind == cmd::WRITE => dst.copy_from_slice(d.as_slice()),
                _ => dst.fill(0),
            }
            let mut bio = Bio::new(ReqOp::Write, start / 512, sectors).with_buf(buf);
            if fua {
                bio = bio.with_flags(ReqFlags::FUA);
            }
            (nbd_error(wait(h, bio).status), None)
        }
        cmd::TRIM => {
            let (inner_start, inner_end) =
                (r.offset.div_ceil(b) * b, (r.offset + r.length) / b * b);
            if inner_end <= inner_start {
                return (0, None);
            }
            let bio = Bio::new(
                ReqOp::Discard,
                inner_start / 512,
                ((inner_end - inner_start) / 512) as u32,
            );
            (nbd_error(wait(h, bio).status), None)
        }
        _ => (err::EINVAL, None),
    }
}

/// Submits the bios of one request; returns how many.
pub(super) fn submit(
    h: &mut SubmitterHandle,
    e: &Export,
    r: &Request,
    data: Option<IoBuf>,
    slot: u64,
    chunk: u64,
) -> u32 {
    let fua = r.flags & cflag::FUA != 0;
    let sector = r.offset / 512;
    let mk = |op: ReqOp, sector: u64, sectors: u32| {
        let mut b = Bio::new(op, sector, sectors).with_private(slot);
        if fua && op != ReqOp::Flush && op != ReqOp::Read {
            b = b.with_flags(ReqFlags::FUA);
        }
        b
    };
    match r.kind {
        cmd::READ => {
            let buf = data.unwrap_or_else(|| IoBuf::new(r.length as usize));
            let bio = mk(ReqOp::Read, sector, (r.length / 512) as u32).with_buf(buf);
            h.submit(bio);
            1
        }
        cmd::WRITE => {
            let mut bio = mk(ReqOp::Write, sector, (r.length / 512) as u32);
            if let Some(d) = data {
                bio = bio.with_buf(d);
            }
            h.submit(bio);
            1
        }
        cmd::FLUSH => {
            h.submit(mk(ReqOp::Flush, 0, 0));
            1
        }
        _ => {
            // TRIM and WRITE_ZEROES may cover gigabytes: one bio per `chunk`.
            let op = if r.kind == cmd::TRIM {
                ReqOp::Discard
            } else {
                ReqOp::WriteZeroes
            };
            let mut n = 0;
            let mut off = r.offset;
            let end = r.offset + r.length;
            while off < end {
                let len = chunk.min(end - off);
                h.submit(mk(op, off / 512, (len / 512) as u32));
                off += len;
                n += 1;
            }
            let _ = e;
            n
        }
    }
}
