package proxy

import (
	"context"
	"sync"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

// A write-back proxy is the write-delegation authority of the clients
// behind it. A write-back mount behind it declares its unflushed writes
// (DelegateWrite) to the proxy, not to the upstream: the proxy records the
// client as the file's holder and holds the delegation upstream itself, on
// its own connection (session.go), together with the delegations of its
// own dirty files. So the proxy's own write-back of a file — its open, its
// writes, its declaration upstream — never recalls a delegation of its
// clients (the upstream sees one holder, the proxy, and never recalls a
// holder for its own requests), and a client's write-back to the proxy,
// which makes the file dirty here, never breaks the client's own
// delegation.
//
// When the upstream recalls a file from the proxy (another client's open:
// a direct one, one behind another proxy, or one behind this proxy, whose
// open is relayed on its own upstream connection), the proxy recalls it
// from its holders first (recall: each writes the file back, to the proxy,
// then acks), then writes the file back upstream (the engine's Recall) and
// acks. The client whose own request caused the recall is not recalled
// (the upstream does not recall the requester either): the break names it
// (CallbackBreak.Cause, the upstream's id of the client's own upstream
// connection, which is also the id the client was welcomed with); it keeps
// its delegation, which the proxy declares upstream again.
//
// The upstream delegation is returned once neither the engine nor a client
// holds the file. A client that goes away holding delegations hands them
// to its own upstream connection before that closes (handOff): the
// upstream keeps them as the orphans of the client's name, exactly as for
// a client connected directly, until it comes back and declares them
// again (the proxy then clears the orphan, adopt) or says it holds nothing
// else (DelegateReturn of wire.SettledIno, relayed).

// recallDownTimeout bounds a client's write-back of a file the upstream
// recalled from the proxy: below the server's default recall timeout
// (20 s), so that the proxy still acks in time; a client that takes
// longer is disconnected, and its delegations become orphans (handOff).
const recallDownTimeout = 15 * time.Second

// delegs is the write-delegation table of a write-back proxy.
type delegs struct {
	w *writeBack

	mu      sync.Mutex
	cond    *sync.Cond // signalled when a DelegateWrite or DelegateReturn upstream is answered
	files   map[uint64]*delegFile
	orphans map[uint64]string // file → name of a client that left holding it (handOff)
	seq     uint64            // counts the clients' declarations (holding.seq)
}

// delegFile is what the proxy holds of one file.
type delegFile struct {
	engine    bool                // the proxy's own dirty data
	holders   map[*client]holding // the clients holding it
	sending   int                 // DelegateWrites upstream in flight
	returning bool                // a DelegateReturn upstream in flight
	// decl is the last declaration of the file sent upstream: a
	// DelegateWrite with the file's path, in the identity of its writer
	// (the upstream grants a delegation only to a writer that may write
	// the file, and the proxy's own connection opened nothing). Declared
	// again, on a new connection or after a recall, it is sent as it was.
	decl wire.Msg
}

// holding is a client's hold of a file: which declaration made it (a
// recall drops only the hold it recalled: the client may declare the file
// again before it acks).
type holding struct {
	seq uint64
}

func newDelegs(w *writeBack) *delegs {
	d := &delegs{w: w, files: map[uint64]*delegFile{}, orphans: map[uint64]string{}}
	d.cond = sync.NewCond(&d.mu)
	return d
}

// fileLocked returns ino's entry, made if needed. Called with d.mu held.
func (d *delegs) fileLocked(ino uint64) *delegFile {
	f := d.files[ino]
	if f == nil {
		f = &delegFile{holders: map[*client]holding{}}
		d.files[ino] = f
	}
	return f
}

// held reports whether anyone here holds f. Called with d.mu held.
func (f *delegFile) held() bool { return f.engine || len(f.holders) > 0 }

// declare marks ino held (by the engine, or by cl) and declares it
// upstream. A return of it on its way is waited for: it would undo the
// declaration.
func (d *delegs) declare(ctx context.Context, ino uint64, cl *client, decl wire.Msg) (wire.Msg, error) {
	d.mu.Lock()
	f := d.fileLocked(ino)
	for f.returning {
		d.cond.Wait()
		f = d.fileLocked(ino) // the entry goes once the return is answered
	}
	var h holding
	if cl == nil {
		f.engine = true
	} else {
		d.seq++
		h = holding{seq: d.seq}
		f.holders[cl] = h
	}
	f.decl = decl
	f.sending++
	d.mu.Unlock()
	r, _, err := d.w.up.call(ctx, decl)
	d.mu.Lock()
	f.sending--
	if err != nil && cl != nil && f.holders[cl] == h {
		delete(f.holders, cl) // the client is told; it holds nothing here
	}
	d.forgetLocked(ino, f)
	d.cond.Broadcast()
	d.mu.Unlock()
	return r, err
}

// release drops the engine's (cl nil) or cl's hold of ino and returns the
// delegation upstream when nobody here holds the file any more.
func (d *delegs) release(ctx context.Context, ino uint64, cl *client) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.files[ino]
	if f == nil {
		return nil
	}
	if cl == nil {
		f.engine = false
	} else {
		delete(f.holders, cl)
	}
	return d.returnFreeLocked(ctx, ino, f)
}

// returnFreeLocked returns ino's delegation upstream once nothing here
// holds it and no declaration of it is on its way. Called with d.mu held.
func (d *delegs) returnFreeLocked(ctx context.Context, ino uint64, f *delegFile) error {
	for f.sending > 0 || f.returning {
		d.cond.Wait()
		if d.files[ino] != f {
			return nil // forgotten meanwhile: returned, and perhaps held anew
		}
	}
	if f.held() {
		return nil
	}
	f.returning = true
	d.mu.Unlock()
	_, _, err := d.w.up.call(ctx, &wire.DelegateReturn{Ino: ino})
	d.mu.Lock()
	f.returning = false
	d.forgetLocked(ino, f)
	d.cond.Broadcast()
	return err
}

// forgetLocked drops f's entry once nothing is held or on its way.
func (d *delegs) forgetLocked(ino uint64, f *delegFile) {
	if !f.held() && f.sending == 0 && !f.returning && d.files[ino] == f {
		delete(d.files, ino)
	}
}

// holdersOf returns the clients holding ino, with their holds, but the one
// whose request caused the recall (upstream client id cause).
func (d *delegs) holdersOf(ino uint64, cause uint32) map[*client]holding {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.files[ino]
	if f == nil {
		return nil
	}
	out := map[*client]holding{}
	for cl, h := range f.holders {
		if cause == 0 || cl.id != cause {
			out[cl] = h
		}
	}
	return out
}

// stillHeld reports whether a client still holds ino (one spared by a
// recall).
func (d *delegs) stillHeld(ino uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.files[ino]
	return f != nil && len(f.holders) > 0
}

// recall answers the upstream's recall of ino from the proxy, before the
// engine writes its own dirty data back: every holder but the requester
// writes the file back to the proxy and acks (the break names the cause,
// for a proxy below). A holder that fails to is disconnected.
func (d *delegs) recall(ctx context.Context, ino uint64, cause uint32) {
	var wg sync.WaitGroup
	for cl, h := range d.holdersOf(ino, cause) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			down := cl.down.Load()
			if down == nil {
				return
			}
			_, err := down.CallTimeout(ctx, &wire.CallbackBreak{Kind: wire.CallbackWrite, Cause: cause, Items: []wire.BreakItem{{Ino: ino}}}, recallDownTimeout)
			if err != nil {
				d.w.p.log.Warn("a client did not write back a file the upstream recalled: disconnecting it", "client", cl.name, "path", d.w.p.pathOf(cl, ino), "err", err)
				d.w.p.drop(cl) // its delegations become orphans upstream
				return
			}
			d.mu.Lock()
			if f := d.files[ino]; f != nil && f.holders[cl].seq == h.seq {
				delete(f.holders, cl)
				d.forgetLocked(ino, f)
			}
			d.mu.Unlock()
		}()
	}
	wg.Wait()
}

// handOff gives the delegations cl holds to its own upstream connection,
// which then closes: the upstream keeps them as orphans of cl's name.
// Those the proxy then holds for nobody are returned upstream.
func (d *delegs) handOff(cl *client) {
	d.mu.Lock()
	var inos []uint64
	decls := map[uint64]wire.Msg{}
	for ino, f := range d.files {
		if _, ok := f.holders[cl]; ok {
			delete(f.holders, cl) // a recall no longer asks cl
			inos = append(inos, ino)
			decls[ino] = f.declOf(ino)
		}
	}
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), d.w.p.cfg.RequestTimeout)
	defer cancel()
	for _, ino := range inos {
		if cl.up != nil && cl.up.Err() == nil {
			if _, err := cl.up.CallTimeout(ctx, decls[ino], d.w.p.cfg.RequestTimeout); err == nil {
				d.mu.Lock()
				d.orphans[ino] = cl.name
				d.mu.Unlock()
			}
		}
		d.mu.Lock()
		if f := d.files[ino]; f != nil {
			d.returnFreeLocked(ctx, ino, f)
		}
		d.mu.Unlock()
	}
}

// serve answers a client's DelegateWrite and DelegateReturn; done is false
// for any other message.
func (d *delegs) serve(ctx context.Context, cl *client, outer wire.Msg) (rep wire.Msg, done bool, err error) {
	switch m := unwrapAs(outer).(type) {
	case *wire.DelegateWrite:
		rep, err := relayReply(d.declare(ctx, m.Ino, cl, outer))
		if err == nil {
			d.adopt(ctx, cl, m.Ino)
		}
		return rep, true, err
	case *wire.DelegateReturn:
		if m.Ino == wire.SettledIno {
			d.settled(cl)
			return nil, false, nil // relayed: the upstream clears the orphans of cl's name
		}
		return &wire.OK{}, true, d.release(ctx, m.Ino, cl)
	}
	return nil, false, nil
}

// adopt clears the upstream's orphan of ino when cl's name left it
// (handOff): cl declared it again, here.
func (d *delegs) adopt(ctx context.Context, cl *client, ino uint64) {
	d.mu.Lock()
	name, ok := d.orphans[ino]
	if ok && name == cl.name {
		delete(d.orphans, ino)
	}
	d.mu.Unlock()
	if ok && name == cl.name {
		cl.call(ctx, &wire.DelegateReturn{Ino: ino})
	}
}

// settled forgets the orphans of cl's name: its DelegateReturn of
// wire.SettledIno, relayed, clears them upstream.
func (d *delegs) settled(cl *client) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for ino, name := range d.orphans {
		if name == cl.name {
			delete(d.orphans, ino)
		}
	}
}

// recallAll answers a break of the proxy's own upstream connection: a
// recall (kind write) is recalled from the clients holding the files
// first, then the engine writes its own dirty data back. A file a client
// still holds (it caused the recall) is declared upstream again before
// the ack, as the engine does for data written during the recall.
func (d *delegs) recallAll(ctx context.Context, m *wire.CallbackBreak) {
	if m.Kind != wire.CallbackWrite {
		return
	}
	for _, it := range m.Items {
		d.recall(ctx, it.Ino, m.Cause)
	}
	d.w.e.Recall(ctx, m)
	for _, it := range m.Items {
		if d.stillHeld(it.Ino) {
			d.redeclare(ctx, it.Ino)
		}
	}
}

// redeclare declares ino upstream again for the holders it still has.
func (d *delegs) redeclare(ctx context.Context, ino uint64) {
	d.mu.Lock()
	f := d.files[ino]
	for f != nil && f.returning {
		d.cond.Wait()
		f = d.files[ino]
	}
	if f == nil || !f.held() {
		d.mu.Unlock()
		return
	}
	f.sending++
	decl := f.declOf(ino)
	d.mu.Unlock()
	d.w.up.call(ctx, decl)
	d.mu.Lock()
	f.sending--
	d.forgetLocked(ino, f)
	d.cond.Broadcast()
	d.mu.Unlock()
}

// redeclareClients declares upstream, on a new connection, every file a
// client holds, before the engine says that nothing else is unflushed
// here (wire.SettledIno).
func (d *delegs) redeclareClients(ctx context.Context) {
	d.mu.Lock()
	var inos []uint64
	for ino, f := range d.files {
		if len(f.holders) > 0 {
			inos = append(inos, ino)
		}
	}
	d.mu.Unlock()
	for _, ino := range inos {
		d.redeclare(ctx, ino)
	}
}

// engineCall takes the engine's delegation messages (writeback.Frontend's
// Call): its declarations and returns are combined with the clients'
// holds; done is false for any other message.
func (d *delegs) engineCall(ctx context.Context, outer wire.Msg) (wire.Msg, bool, error) {
	switch m := unwrapAs(outer).(type) {
	case *wire.DelegateWrite:
		r, err := d.declare(ctx, m.Ino, nil, outer)
		return r, true, err
	case *wire.DelegateReturn:
		if m.Ino == wire.SettledIno {
			d.redeclareClients(ctx)
			return nil, false, nil
		}
		return &wire.OK{}, true, d.release(ctx, m.Ino, nil)
	}
	return nil, false, nil
}

// declOf is the declaration to send of f, file ino. Called with d.mu held.
func (f *delegFile) declOf(ino uint64) wire.Msg {
	if f.decl != nil {
		return f.decl
	}
	return &wire.DelegateWrite{Ino: ino}
}

// unwrapAs is m, or the request an As wraps.
func unwrapAs(m wire.Msg) wire.Msg {
	if as, ok := m.(*wire.As); ok {
		return as.Msg
	}
	return m
}
