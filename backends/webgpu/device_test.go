package webgpu

import (
	"testing"
	"time"
)

// The device thread's poll sleeps grow from 20 us and stay capped, so a
// long wait neither spins a core nor adds more than ~80 us to a round.
func TestPollSleep(t *testing.T) {
	prev := time.Duration(0)
	for idle := pollSpins + 1; idle < 10000; idle++ {
		d := pollSleep(idle)
		if d < prev || d < 20*time.Microsecond || d > 80*time.Microsecond {
			t.Fatalf("pollSleep(%d) = %v after %v", idle, d, prev)
		}
		prev = d
	}
	if prev != 80*time.Microsecond {
		t.Fatalf("long waits sleep %v between polls, want 80us", prev)
	}
}
