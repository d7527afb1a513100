// Package cachetest is the shared test suite every cache.Tier must pass:
// version tagging, replacement, removal, the capacity bound (checked after
// every operation), agreement with a simple reference model under random
// operations, concurrent use (run it with -race) and, for tiers that promise
// them, exact LRU eviction order and persistence across a reopen.
//
// A tier's test calls it like this:
//
//	func TestSuite(t *testing.T) {
//		cachetest.Run(t, func(capacity int64) cache.Tier { return mem.New(...) }, cachetest.WithLRU())
//	}
package cachetest
