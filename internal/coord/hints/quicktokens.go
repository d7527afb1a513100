package hints

import "math/bits"

// quickTokens answers Server.Token for a read, and Server.Version, without
// the file's state while that is exact: file ids are dense (the
// simulator's), every client id is below 64, and no file has a second
// version yet (every version is then 1, the version of a file without
// state too). It keeps which clients hold a token for each file as bits,
// 1 << shift a file (the client ids rounded up to a power of two): a
// read-only simulation finds its token in a bitmap (one client: a bit a
// file, where a file's state is 32 bytes) instead of the file states it
// never needs otherwise. While on, the bits are the token holders (the
// files' holder sets stay empty: no list is built per file); they go for
// good, written into the holder sets first (Server.quickOff), when a
// version changes or a token does not fit.
type quickTokens struct {
	on    bool
	shift uint // log2 of the bits a file
	bits  []uint64
}

// init turns the bits on for clients, if their ids fit.
func (q *quickTokens) init(clients []ClientID) {
	top := ClientID(0)
	for _, c := range clients {
		if c < 0 || c >= 64 {
			return
		}
		top = max(top, c)
	}
	q.on, q.shift = len(clients) > 0, uint(bits.Len32(uint32(top)))
}

// off drops the bits for good.
func (q *quickTokens) off() { q.on, q.bits = false, nil }

// has reports whether c holds a token for file f (q.on).
func (q *quickTokens) has(c ClientID, f uint64) bool {
	if uint32(c) >= 1<<q.shift {
		return false // never added: the bits would be off
	}
	i := f<<q.shift + uint64(c)
	return i>>6 < uint64(len(q.bits)) && q.bits[i>>6]&(1<<(i&63)) != 0
}

// fits reports whether the bits can hold c's token for f.
func (q *quickTokens) fits(c ClientID, f uint64) bool {
	return uint32(c) < 1<<q.shift && f < 1<<(58-q.shift)
}

// add records that c holds a token for f (q.on, and it fits).
func (q *quickTokens) add(c ClientID, f uint64) {
	i := f<<q.shift + uint64(c)
	if w := int(i >> 6); w >= len(q.bits) {
		q.bits = append(q.bits, make([]uint64, max(w+1, 2*len(q.bits))-len(q.bits))...)
	}
	q.bits[i>>6] |= 1 << (i & 63)
}

// each calls fn for every token the bits record, by file then client.
func (q *quickTokens) each(fn func(c ClientID, f uint64)) {
	for w, word := range q.bits {
		for ; word != 0; word &= word - 1 {
			i := uint64(w)<<6 + uint64(bits.TrailingZeros64(word))
			fn(ClientID(i&(1<<q.shift-1)), i>>q.shift)
		}
	}
}

// clear records that no client holds a token for f.
func (q *quickTokens) clear(f uint64) {
	if !q.on {
		return
	}
	n := uint64(1) << q.shift // bits a file, all in one word
	i := f << q.shift
	if i>>6 >= uint64(len(q.bits)) {
		return
	}
	mask := ^uint64(0)
	if n < 64 {
		mask = (1<<n - 1) << (i & 63)
	}
	q.bits[i>>6] &^= mask
}
