package sim

// keyIndex maps keys to their numbers for IDs: open addressing with linear
// probing over 8-byte slots (a 32-bit tag from the key's hash and the
// number; number 0 marks an empty slot), the keys themselves in IDs.keys,
// by number. A slot is a quarter of a table slot that holds the key (and
// the whole index fits in a processor cache four times as often); a slot
// whose tag matches is confirmed in keys (a second load, to memory the
// popular blocks, numbered early, keep warm). Keys are never removed.
type keyIndex struct {
	slots []kslot
	n     int
	mask  uint64
}

type kslot struct {
	tag uint32 // the high half of the key's hash
	id  uint32 // 0: empty
}

// touch reads the first slot a key of hash h probes (see IDs.Number).
func (x *keyIndex) touch(h uint64) uint32 {
	if len(x.slots) == 0 {
		return 0
	}
	return x.slots[h&x.mask].id
}

// first returns k's number if the first slot a key of hash h probes holds
// it, else 0 (then get or intern probes on): the usual case, inlined.
func (x *keyIndex) first(k Key, h uint64, keys []Key) uint32 {
	if len(x.slots) == 0 {
		return 0
	}
	s := x.slots[h&x.mask]
	if s.tag != uint32(h>>32) || s.id == 0 || keys[s.id] != k {
		return 0
	}
	return s.id
}

// get returns the number of key k of hash h, 0 if none.
func (x *keyIndex) get(k Key, h uint64, keys []Key) uint32 {
	if x.n == 0 {
		return 0
	}
	tag := uint32(h >> 32)
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		s := x.slots[i]
		if s.id == 0 {
			return 0
		}
		if s.tag == tag && keys[s.id] == k {
			return s.id
		}
	}
}

// intern returns k's number, or gives it id (which the caller then appends
// to keys) and reports found false.
func (x *keyIndex) intern(k Key, h uint64, id uint32, keys []Key) (_ uint32, found bool) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.grow(keys)
	}
	tag := uint32(h >> 32)
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		s := &x.slots[i]
		if s.id == 0 {
			*s = kslot{tag, id}
			x.n++
			return id, false
		}
		if s.tag == tag && keys[s.id] == k {
			return s.id, true
		}
	}
}

func (x *keyIndex) grow(keys []Key) {
	old := x.slots
	size := max(1024, 2*len(old))
	x.slots = make([]kslot, size)
	x.mask = uint64(size - 1)
	for _, s := range old {
		if s.id == 0 {
			continue
		}
		i := keys[s.id].Hash() & x.mask
		for x.slots[i].id != 0 {
			i = (i + 1) & x.mask
		}
		x.slots[i] = s
	}
}
