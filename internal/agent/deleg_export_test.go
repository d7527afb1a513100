package agent

import "time"

// Test hooks of the changes answered here (deleg_test.go).

// SetDeferDelay sets how long a queued removal waits before it is sent.
func SetDeferDelay(a *Agent, d time.Duration) { a.pend.delay = d }
