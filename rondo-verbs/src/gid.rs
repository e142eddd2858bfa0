//! Which GID a Rondo UD queue pair uses on a port: one rule for every caller
//! (`rondo perf --backend verbs`, `rondo doctor`'s advice, the drop-in's
//! `rondo_<dev>`).

/// `ibv_gid_entry::gid_type` of an InfiniBand GID.
pub const GID_TYPE_IB: u32 = 0;
/// `ibv_gid_entry::gid_type` of a RoCE v2 GID.
pub const GID_TYPE_ROCE_V2: u32 = 2;

/// How well a GID table entry of type `kind` (`ibv_gid_entry::gid_type`) with
/// bytes `gid` suits a Rondo UD QP, lower first: RoCE v2 with an IPv4 address
/// (`::ffff:a.b.c.d`) 0, other RoCE v2 1, InfiniBand 2; `None` for an empty
/// entry, RoCE v1 and unknown types.
pub fn gid_rank(kind: u32, gid: &[u8; 16]) -> Option<u8> {
    if *gid == [0; 16] {
        return None;
    }
    match kind {
        GID_TYPE_ROCE_V2 if std::net::Ipv6Addr::from(*gid).to_ipv4_mapped().is_some() => Some(0),
        GID_TYPE_ROCE_V2 => Some(1),
        GID_TYPE_IB => Some(2),
        _ => None,
    }
}

/// The GID index to use among a port's `(index, kind, gid)` entries: `want` when
/// the table has it, else (with no `want`) the best-ranked entry ([`gid_rank`],
/// the lowest index among equals); `None` when neither exists or the index does
/// not fit a `u8` (`ibv_ah_attr`'s `sgid_index`).
pub fn pick_gid_index(
    gids: impl IntoIterator<Item = (u32, u32, [u8; 16])>,
    want: Option<u8>,
) -> Option<u8> {
    let mut gids = gids.into_iter();
    match want {
        Some(i) => gids.any(|(index, _, _)| index == u32::from(i)).then_some(i),
        None => gids
            .filter_map(|(index, kind, gid)| Some((gid_rank(kind, &gid)?, index)))
            .min()
            .and_then(|(_, i)| u8::try_from(i).ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: [u8; 4]) -> [u8; 16] {
        let mut g = [0; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&a);
        g
    }

    #[test]
    fn roce_v2_with_ipv4_first_then_roce_v2_then_ib() {
        let v6 = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        let table = [
            (0, GID_TYPE_IB, v6),
            (1, 1, v4([10, 0, 0, 1])), // RoCE v1: never
            (2, GID_TYPE_ROCE_V2, v6),
            (3, GID_TYPE_ROCE_V2, v4([10, 0, 0, 1])),
            (4, GID_TYPE_ROCE_V2, [0; 16]), // empty: never
        ];
        assert_eq!(pick_gid_index(table, None), Some(3));
        assert_eq!(pick_gid_index(table[..3].iter().copied(), None), Some(2));
        assert_eq!(pick_gid_index(table[..2].iter().copied(), None), Some(0));
        assert_eq!(pick_gid_index(table[1..2].iter().copied(), None), None);
        assert_eq!(pick_gid_index(table[4..].iter().copied(), None), None);
        // An asked-for index is taken whatever its kind, if the table has it.
        assert_eq!(pick_gid_index(table, Some(1)), Some(1));
        assert_eq!(pick_gid_index(table, Some(9)), None);
        // Indexes beyond a u8 cannot be an sgid_index.
        assert_eq!(pick_gid_index([(300, GID_TYPE_IB, v6)], None), None);
    }
}
