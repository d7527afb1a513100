// Package classic holds the simulator's classic cooperative caching
// algorithms, as seed 002 chapter 3 describes them: baseline (no
// cooperation), N-chance (with the xFS refinement), GMS, and the two ideal
// bounds, Global LRU and Optimal (Belady). Each is a deterministic
// sim.Algorithm; all but Optimal do O(1) work per access (hash maps and
// intrusive lists), Optimal O(log n) (heaps over next-use positions).
//
// All share the consistency model of seed 002's simulators: write-through
// and block-based write-invalidate through the manager (a write costs one
// message to the manager and one per invalidated copy).
package classic
