//! The transpose of a 2D block-cyclic matrix on its own grid (PBLAS's
//! `PxTRAN`), layer exec: what [`crate::DistMatrix::transpose`] and
//! op(A) = T / op(B) = T of [`crate::Gemm::run_distributed`] run.
//!
//! An `m x n` matrix in `mb x nb` blocks over a `P_r x P_c` grid has its
//! block (J, I) on rank (J mod P_r, I mod P_c); its transpose (`n x m` in
//! `nb x mb` blocks on the same grid) needs that block, transposed, as its
//! block (I, J) on rank (I mod P_r, J mod P_c). Each rank:
//! 1. transposes its local matrix on its GPU (the tiled transpose of
//!    packing, `transpose_b64` and the other widths): its rows are now the
//!    global block columns I it holds, its columns the block rows J;
//! 2. packs, for each destination rank, the rows whose I goes there and the
//!    columns whose J goes there into one row-major message
//!    (`cuMemcpy2DAsync` per rectangle of consecutive blocks with one
//!    destination: one rectangle per rank pair on a square grid);
//! 3. sends each message to its rank and receives one from each source
//!    (`ncclSend` / `ncclRecv` on the grid's world communicator, in one NCCL
//!    group; a rank's message to itself is not sent);
//! 4. unpacks each received message into its local matrix of the transpose.
//!
//! Both sides order a message by increasing global row, then column, so the
//! sender's packing and the receiver's unpacking agree
//! ([`transpose_messages`], checked on the CPU by the tests below).

use crate::device::memory::{address, alloc_scratch, copy_2d_device};
use crate::device::nccl::{grouped, recv, send, CommGroup};
use crate::element::Scalar;
use crate::error::{DriverContext, Error};
use crate::exec::tensor_core::launch_transpose;
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use gemm_core::distribution::Grid;
use gemm_core::KernelLayouts;

/// Consecutive local blocks along one dimension that all go to (or come
/// from) the same coordinate `peer` of the other grid dimension: `len`
/// elements from local index `local`, at `packed` in that peer's message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    peer: usize,
    local: usize,
    packed: usize,
    len: usize,
}

/// The runs of one dimension of extent `n` in blocks of `nb` dealt over
/// `p` grid coordinates, seen from coordinate `me`: its local blocks
/// (global blocks `me, me + p, ..`) grouped by `global block mod q`, and
/// each peer's total in elements (`q` entries).
fn runs(n: usize, nb: usize, me: usize, p: usize, q: usize) -> (Vec<Run>, Vec<usize>) {
    let mut out: Vec<Run> = Vec::new();
    let mut totals = vec![0usize; q];
    let (mut g, mut local) = (me, 0usize);
    while g.saturating_mul(nb) < n {
        let len = nb.min(n - g * nb);
        let peer = g % q;
        match out.last_mut() {
            // The last run is this peer's latest, so the packed places run on too.
            Some(r) if r.peer == peer => r.len += len,
            _ => out.push(Run { peer, local, packed: totals[peer], len }),
        }
        totals[peer] += len;
        local += len;
        g += p;
    }
    (out, totals)
}

/// A `rows x cols` rectangle copied between two row-major matrices, from
/// (row, column) `src` to `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rect {
    pub src: (usize, usize),
    pub dst: (usize, usize),
    pub rows: usize,
    pub cols: usize,
}

/// What a rank exchanges with one `peer` rank in a transpose: a packed
/// row-major `rows x cols` message, and the rectangles between it and the
/// rank's matrix (sent: from the locally transposed local matrix into the
/// message; received: from the message into the local matrix of the
/// transpose).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Message {
    pub peer: usize,
    pub rows: usize,
    pub cols: usize,
    pub rects: Vec<Rect>,
}

/// The messages `rank` sends and receives when an `m x n` matrix in
/// `mb x nb` blocks over `grid` is transposed onto the same grid (see the
/// module docs), empty messages left out, in peer order.
pub(crate) fn transpose_messages(
    (m, n, mb, nb): (usize, usize, usize, usize),
    grid: Grid,
    rank: usize,
) -> (Vec<Message>, Vec<Message>) {
    let (pr, pc) = (grid.rows, grid.cols);
    let (row, col) = grid.coords(rank);
    let pair = |rows: &(Vec<Run>, Vec<usize>), cols: &(Vec<Run>, Vec<usize>), to_message: bool| {
        let mut out = Vec::new();
        for (rp, &h) in rows.1.iter().enumerate() {
            for (cp, &w) in cols.1.iter().enumerate() {
                if h == 0 || w == 0 {
                    continue;
                }
                let mut rects = Vec::new();
                for r in rows.0.iter().filter(|r| r.peer == rp) {
                    for c in cols.0.iter().filter(|c| c.peer == cp) {
                        let (local, packed) = ((r.local, c.local), (r.packed, c.packed));
                        let (src, dst) = if to_message { (local, packed) } else { (packed, local) };
                        rects.push(Rect { src, dst, rows: r.len, cols: c.len });
                    }
                }
                // Sent: rows go to grid row rp, columns to grid column cp.
                // Received: rows come from grid column rp, columns from grid row cp.
                let peer = if to_message { grid.rank(rp, cp) } else { grid.rank(cp, rp) };
                out.push(Message { peer, rows: h, cols: w, rects });
            }
        }
        out.sort_by_key(|msg| msg.peer);
        out
    };
    // Sent: the transposed local matrix's rows are this rank's block
    // columns I of A (dealt over the grid columns), going to grid row
    // I mod P_r; its columns are the block rows J (dealt over the grid
    // rows), going to grid column J mod P_c.
    let sends = pair(&runs(n, nb, col, pc, pr), &runs(m, mb, row, pr, pc), true);
    // Received: the transpose's local rows are its block rows I (dealt over
    // the grid rows), from grid column I mod P_c; its columns the block
    // columns J (dealt over the grid columns), from grid row J mod P_r.
    let recvs = pair(&runs(n, nb, row, pr, pc), &runs(m, mb, col, pc, pr), false);
    (sends, recvs)
}

/// One local rank's part of a transpose: its local matrix (`rows x cols`,
/// row-major, ld `cols`) and the local matrix of the transpose it writes
/// (row-major, ld its columns).
pub(crate) struct TransposeParts<'a, T> {
    pub src: CudaView<'a, T>,
    pub rows: usize,
    pub cols: usize,
    pub dst: CudaViewMut<'a, T>,
    pub dst_cols: usize,
}

/// Enqueues the transpose of an `m x n` matrix in `mb x nb` blocks over
/// `group`'s grid on every rank this process drives (rank i of the group:
/// `parts[i]`), on each rank's communication stream; nothing is waited for.
/// Returns the scratch buffers, to keep until the caller has waited
/// ([`CommGroup::wait`]; it aborts on any error).
pub(crate) fn enqueue_transpose<T: Scalar>(
    group: &CommGroup,
    (m, n, mb, nb): (usize, usize, usize, usize),
    parts: &mut [TransposeParts<'_, T>],
) -> Result<Vec<CudaSlice<T>>, Error> {
    use gemm_core::pack::transpose_entry;
    let elem = size_of::<T>();
    let mut keep = Vec::new();
    let mut plans = Vec::with_capacity(parts.len());
    // Steps 1 and 2: the local transposes and the packed messages.
    let mut outgoing: Vec<Vec<(usize, CudaSlice<T>)>> = Vec::with_capacity(parts.len());
    for (s, part) in group.ranks.iter().zip(parts.iter()) {
        s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let (sends, recvs) = transpose_messages((m, n, mb, nb), group.grid, s.rank);
        let (rows, cols) = (part.rows, part.cols);
        let mut messages = Vec::new();
        if rows > 0 && cols > 0 {
            // SAFETY: the transpose writes all of it before the copies read it.
            let mut local_t = unsafe { alloc_scratch::<T>(&s.comm, rows * cols) }?;
            let func =
                s.device.function(transpose_entry(elem).expect("elements of 1, 2, 4 or 8 bytes"), KernelLayouts::NN)?;
            let (r32, c32) = (rows as u32, cols as u32);
            // SAFETY: the source holds `rows` lines of `cols` elements (ld
            // `cols`), the destination `cols` lines of `rows` (ld `rows`);
            // separate buffers.
            unsafe { launch_transpose(&func, &s.comm, (r32, c32, c32), &part.src, (&mut local_t.slice_mut(..), r32)) }?;
            let base = address(&local_t);
            for msg in &sends {
                // SAFETY: every element is written by the rectangles below
                // (they tile the message) before it is sent.
                let buf = unsafe { alloc_scratch::<T>(&s.comm, msg.rows * msg.cols) }?;
                let to = address(&buf);
                for r in &msg.rects {
                    let from = base + ((r.src.0 * rows + r.src.1) * elem) as u64;
                    let into = to + ((r.dst.0 * msg.cols + r.dst.1) * elem) as u64;
                    copy_2d_device(&s.comm, (from, rows * elem), (into, msg.cols * elem), r.cols * elem, r.rows)?;
                }
                messages.push((msg.peer, buf));
            }
            keep.push(local_t);
        }
        outgoing.push(messages);
        plans.push(recvs);
    }
    // Step 3: every message sent, one from each source received (a rank's
    // own message is used in place).
    let mut incoming: Vec<Vec<(usize, u64)>> = Vec::with_capacity(parts.len());
    let mut receive_buffers = Vec::new();
    for ((s, recvs), out) in group.ranks.iter().zip(&plans).zip(&outgoing) {
        let mut addrs = Vec::new();
        for msg in recvs {
            if msg.peer == s.rank {
                let own = out.iter().find(|(peer, _)| *peer == s.rank).expect("a rank's message to itself");
                addrs.push((msg.peer, address(&own.1)));
            } else {
                // SAFETY: the receive writes all of it before the unpacking reads it.
                let buf = unsafe { alloc_scratch::<T>(&s.comm, msg.rows * msg.cols) }?;
                addrs.push((msg.peer, address(&buf)));
                receive_buffers.push(buf);
            }
        }
        incoming.push(addrs);
    }
    let remote = group.grid.size() > 1;
    if remote {
        let sent = grouped(|| {
            for ((s, out), (recvs, addrs)) in group.ranks.iter().zip(&outgoing).zip(plans.iter().zip(&incoming)) {
                let world = s.world.as_ref().expect("a grid of more than one rank has a world communicator");
                for (peer, buf) in out.iter().filter(|(peer, _)| *peer != s.rank) {
                    // SAFETY: a live buffer of its message's bytes on the rank's device.
                    unsafe { send(world, address(buf), buf.len() * elem, *peer, &s.comm) }?;
                }
                for (msg, &(peer, at)) in recvs.iter().zip(addrs).filter(|(msg, _)| msg.peer != s.rank) {
                    // SAFETY: a live buffer of the message's bytes.
                    unsafe { recv(world, at, msg.rows * msg.cols * elem, peer, &s.comm) }?;
                }
            }
            Ok(())
        });
        sent.map_err(|why| Error::Collective { rank: group.ranks[0].rank, call: "ncclSend/ncclRecv", why })?;
    }
    // Step 4: the messages unpacked into the transpose's local matrices.
    for ((s, part), (recvs, addrs)) in group.ranks.iter().zip(parts.iter_mut()).zip(plans.iter().zip(&incoming)) {
        s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let base = address(&part.dst);
        let ld = part.dst_cols;
        for (msg, &(_, at)) in recvs.iter().zip(addrs) {
            for r in &msg.rects {
                let from = at + ((r.src.0 * msg.cols + r.src.1) * elem) as u64;
                let into = base + ((r.dst.0 * ld + r.dst.1) * elem) as u64;
                copy_2d_device(&s.comm, (from, msg.cols * elem), (into, ld * elem), r.cols * elem, r.rows)?;
            }
        }
    }
    keep.extend(outgoing.into_iter().flatten().map(|(_, b)| b));
    keep.extend(receive_buffers);
    Ok(keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The local matrices of an `m x n` matrix (element (i, j) = i * n + j)
    /// in `mb x nb` blocks over `grid`, row-major, by the layout's index maps.
    fn locals(
        m: usize,
        n: usize,
        mb: usize,
        nb: usize,
        grid: Grid,
        value: impl Fn(usize, usize) -> u64,
    ) -> Vec<Vec<u64>> {
        use gemm_core::distribution::{local_count, local_to_global};
        (0..grid.size())
            .map(|rank| {
                let (pr, pc) = grid.coords(rank);
                let (rows, cols) = (local_count(m, mb, pr, grid.rows), local_count(n, nb, pc, grid.cols));
                let mut v = Vec::with_capacity(rows * cols);
                for li in 0..rows {
                    for lj in 0..cols {
                        let i = local_to_global(li, mb, pr, grid.rows);
                        let j = local_to_global(lj, nb, pc, grid.cols);
                        v.push(value(i, j));
                    }
                }
                v
            })
            .collect()
    }

    /// The whole exchange simulated on the CPU: every rank's messages
    /// packed from its transposed local matrix, delivered, unpacked; the
    /// result must be the transpose's own local matrices, every element
    /// written once.
    fn simulate(m: usize, n: usize, mb: usize, nb: usize, grid: Grid) {
        let what = format!("{m}x{n} in {mb}x{nb} blocks on {grid}");
        let value = |i: usize, j: usize| (i * n + j) as u64 + 1;
        let a = locals(m, n, mb, nb, grid, value);
        let want = locals(n, m, nb, mb, grid, |i, j| value(j, i));
        let mut got: Vec<Vec<u64>> = want.iter().map(|w| vec![0; w.len()]).collect();
        let mut mail: Vec<(usize, usize, Vec<u64>)> = Vec::new(); // (from, to, message)
        for (rank, local) in a.iter().enumerate() {
            let (pr, pc) = grid.coords(rank);
            let rows = gemm_core::distribution::local_count(m, mb, pr, grid.rows);
            let cols = gemm_core::distribution::local_count(n, nb, pc, grid.cols);
            // The local transpose: cols x rows.
            let t: Vec<u64> = (0..cols * rows).map(|x| local[(x % rows) * cols + x / rows]).collect();
            for msg in transpose_messages((m, n, mb, nb), grid, rank).0 {
                let mut buf = vec![0u64; msg.rows * msg.cols];
                let mut written = 0;
                for r in &msg.rects {
                    for y in 0..r.rows {
                        for x in 0..r.cols {
                            buf[(r.dst.0 + y) * msg.cols + r.dst.1 + x] = t[(r.src.0 + y) * rows + r.src.1 + x];
                            written += 1;
                        }
                    }
                }
                assert_eq!(written, buf.len(), "{what}: rank {rank}'s message to {} is tiled once", msg.peer);
                mail.push((rank, msg.peer, buf));
            }
        }
        for (rank, out) in got.iter_mut().enumerate() {
            let (_, pc) = grid.coords(rank);
            let ld = gemm_core::distribution::local_count(m, mb, pc, grid.cols);
            let recvs = transpose_messages((m, n, mb, nb), grid, rank).1;
            for msg in &recvs {
                let idx = mail
                    .iter()
                    .position(|(from, to, _)| *from == msg.peer && *to == rank)
                    .unwrap_or_else(|| panic!("{what}: rank {rank} expects a message from {}", msg.peer));
                let (_, _, buf) = mail.swap_remove(idx);
                assert_eq!(buf.len(), msg.rows * msg.cols, "{what}: message {} -> {rank}", msg.peer);
                for r in &msg.rects {
                    for y in 0..r.rows {
                        for x in 0..r.cols {
                            let at = (r.dst.0 + y) * ld + r.dst.1 + x;
                            assert_eq!(out[at], 0, "{what}: rank {rank} local {at} written twice");
                            out[at] = buf[(r.src.0 + y) * msg.cols + r.src.1 + x];
                        }
                    }
                }
            }
        }
        assert!(mail.is_empty(), "{what}: {} messages were never received", mail.len());
        assert_eq!(got, want, "{what}");
    }

    #[test]
    fn the_exchange_transposes_every_grid_and_blocking() {
        for grid in [
            Grid::new(1, 1),
            Grid::new(1, 2),
            Grid::new(2, 1),
            Grid::new(2, 2),
            Grid::new(2, 3),
            Grid::new(3, 2),
            Grid::new(1, 4),
            Grid::new(4, 1),
            Grid::new(3, 3),
        ] {
            for (m, n, mb, nb) in [
                (10, 7, 3, 4),
                (257, 131, 64, 48),
                (5, 9, 8, 2),
                (1, 1, 1, 1),
                (0, 5, 2, 2),
                (64, 64, 16, 16),
                (33, 100, 100, 7),
            ] {
                simulate(m, n, mb, nb, grid);
            }
        }
    }

    #[test]
    fn a_square_grid_sends_one_rectangle_per_pair() {
        let (sends, recvs) = transpose_messages((1000, 800, 64, 32), Grid::new(2, 2), 1);
        assert_eq!(sends.len(), 1);
        assert_eq!(sends[0].peer, 2);
        assert_eq!(sends[0].rects.len(), 1);
        assert_eq!(recvs.len(), 1);
        assert_eq!(recvs[0].peer, 2);
    }

    #[test]
    fn runs_merge_consecutive_blocks_of_one_peer() {
        let (r, totals) = runs(100, 10, 0, 2, 1);
        assert_eq!(r, vec![Run { peer: 0, local: 0, packed: 0, len: 50 }]);
        assert_eq!(totals, vec![50]);
        let (r, totals) = runs(35, 10, 0, 1, 2);
        assert_eq!(r.len(), 4);
        assert_eq!(r[3], Run { peer: 1, local: 30, packed: 10, len: 5 });
        assert_eq!(totals, vec![20, 15]);
    }
}
