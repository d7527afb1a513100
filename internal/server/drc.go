package server

import "github.com/coopfs/coopfs/internal/wire"

// writeSeq applies a write with a sequence number (exactly-once: drc.go).
func (s *Server) writeSeq(c *wire.Conn, m *wire.WriteSeq) (wire.Msg, error) {
	return s.write(c, &wire.Write{Handle: m.Handle, Offset: m.Offset, Data: m.Data})
}
