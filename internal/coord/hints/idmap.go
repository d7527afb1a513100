package hints

// idMap maps participant ids to values: a slice for the small ids that
// clusters and the simulator use (no hashing), a map beyond.
type idMap[V any] struct {
	small []V
	has   []bool
	large map[ClientID]V
}

// smallIDs bounds the ids kept in the slices.
const smallIDs = 1 << 12

func (x *idMap[V]) get(id ClientID) (V, bool) {
	if id >= 0 && int(id) < smallIDs {
		if int(id) < len(x.has) && x.has[id] {
			return x.small[id], true
		}
		var zero V
		return zero, false
	}
	v, ok := x.large[id]
	return v, ok
}

func (x *idMap[V]) set(id ClientID, v V) {
	if id >= 0 && int(id) < smallIDs {
		if n := int(id) + 1; n > len(x.has) {
			x.small = append(x.small, make([]V, n-len(x.small))...)
			x.has = append(x.has, make([]bool, n-len(x.has))...)
		}
		x.small[id], x.has[id] = v, true
		return
	}
	if x.large == nil {
		x.large = make(map[ClientID]V)
	}
	x.large[id] = v
}

func (x *idMap[V]) del(id ClientID) {
	if id >= 0 && int(id) < smallIDs {
		if int(id) < len(x.has) {
			var zero V
			x.small[id], x.has[id] = zero, false
		}
		return
	}
	delete(x.large, id)
}
