// Package cache defines Tier, the interface every coopfs block cache tier
// implements (the memory tier in cache/mem, the persistent set-associative
// disk tier in cache/disk), and the Stats they report. The shared test
// suite every tier must pass lives in cache/cachetest.
//
// A tier stores whole blocks keyed by block.ID and tagged with the version of
// the file they belong to: a lookup hits only for the exact version asked, so
// a block of an older file version can never be served for a newer one.
package cache
