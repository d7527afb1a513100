package directory

// clientMap holds the per-client state by id: a slice for the small ids a
// server hands out (from 1, as the simulator's), a map beyond. The lookups
// of every request are then an index, not a hash.
type clientMap struct {
	small []*clientState
	large map[ClientID]*clientState
	n     int
}

// smallClients bounds the ids kept in the slice.
const smallClients = 1 << 12

// get returns c's state, nil if none.
func (m *clientMap) get(c ClientID) *clientState {
	if c < smallClients {
		if int(c) < len(m.small) {
			return m.small[c]
		}
		return nil
	}
	return m.large[c]
}

// set gives c the state cl (not nil).
func (m *clientMap) set(c ClientID, cl *clientState) {
	if m.get(c) == nil {
		m.n++
	}
	if c < smallClients {
		for int(c) >= len(m.small) {
			m.small = append(m.small, nil)
		}
		m.small[c] = cl
		return
	}
	if m.large == nil {
		m.large = make(map[ClientID]*clientState)
	}
	m.large[c] = cl
}

func (m *clientMap) del(c ClientID) {
	if m.get(c) == nil {
		return
	}
	m.n--
	if c < smallClients {
		m.small[c] = nil
		return
	}
	delete(m.large, c)
}

func (m *clientMap) len() int { return m.n }

// each calls f for every client (in no particular order); f must not
// change the map.
func (m *clientMap) each(f func(ClientID, *clientState)) {
	for c, cl := range m.small {
		if cl != nil {
			f(ClientID(c), cl)
		}
	}
	for c, cl := range m.large {
		f(c, cl)
	}
}
