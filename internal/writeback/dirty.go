package writeback

// DirtyCounts returns how much dirty data waits to be written back: the dirty
// files and their dirty blocks (for `coopfs status`). Each file's lock is
// taken after the engine's is released, so that the lock order of the
// write paths is never reversed.
func (e *Engine) DirtyCounts() (files, blocks int) {
	e.mu.Lock()
	dfs := make([]*File, 0, len(e.files))
	for _, df := range e.files {
		dfs = append(dfs, df)
	}
	e.mu.Unlock()
	for _, df := range dfs {
		df.mu.Lock()
		if !df.gone {
			files++
			blocks += len(df.blocks)
		}
		df.mu.Unlock()
	}
	return files, blocks
}
