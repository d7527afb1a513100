package server

// Connections returns how many clients (mounts and proxies) are connected
// now, for the coopfs_server_connections gauge that `coopfs status
// --server` reads.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
