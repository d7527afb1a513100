package wire

// Encodings of attributes and directory listings for a client's disk
// cache of metadata (agent, disk.MetaStore): the wire encoding, without a
// frame.

// EncodeAttr encodes a's fields.
func EncodeAttr(a *Attr) []byte {
	e := &encoder{}
	encodeAttr(e, a)
	return e.b
}

// DecodeAttr decodes what EncodeAttr encoded, from the start of b; it
// returns the bytes after it.
func DecodeAttr(b []byte) (Attr, []byte, error) {
	d := &decoder{b: b}
	var a Attr
	decodeAttr(d, &a)
	return a, d.b, d.err
}

// EncodeEntries encodes a listing's entries.
func EncodeEntries(ents []DirEntryPlus) []byte {
	e := &encoder{}
	(&ReadDirPlusReply{Entries: ents}).encode(e)
	return e.b
}

// DecodeEntries decodes what EncodeEntries encoded, all of b.
func DecodeEntries(b []byte) ([]DirEntryPlus, error) {
	d := &decoder{b: b}
	var r ReadDirPlusReply
	r.decode(d)
	if err := d.done(); err != nil {
		return nil, err
	}
	return r.Entries, nil
}
