// Package prefetch issues processor prefetches: the simulators' touches
// ahead (sim.Toucher) ask for the lines their next accesses will use
// without waiting for them.
package prefetch
