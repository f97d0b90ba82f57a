package tests

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Swap on s4d (#28), in the guest of guest_test.go: the daemon serves a
// ublk device, which becomes swap under the checksummed workload; swapoff
// empties its pool. TestGuest logs its swap throughput and latency against
// the zram baseline's (a larger workload: per-second figures compare).
//
// The workload is the baseline's, twice the guest's RAM, with a loop
// forking beside it, on a device made as the README says (`swap add
// --size 1G`, no tuning flags: the native path, issue 40). A stall fails
// loudly: lockwatch prints every daemon thread's kernel stack before the
// scenario's limit kills it.
var s4dSwapScenario = guestScenario{
	Name:   "s4d-swap",
	Limit:  300 * time.Second,
	Beside: "a loop forking every 0.2 s and lockwatch",
	Script: `guest_load ublk_drv
s4d daemon --socket /run/s4d.sock >/tmp/s4d.log 2>&1 &
daemon=$!
for i in $(seq 100); do [ -S /run/s4d.sock ] && break; sleep 0.1; done
export S4D_SOCKET=/run/s4d.sock
# Bad input: a size below 1M is a usage error (exit 2).
rc=0; s4d swap add --size 100 2>/dev/null || rc=$?
[ $rc -eq 2 ] || { echo "swap add --size 100: exit $rc, want 2"; exit 1; }
ma() { awk '/^MemAvailable/ { print int($2/1024) }' /proc/meminfo; }
sleep 1; a0=$(ma)
dev=$(s4d swap add --size 1G)
sleep 1; a1=$(ma)
s4d ctl swap | grep -q "^ *$dev "
mkswap $dev >/dev/null
swapon -d $dev
s4d ctl swap | grep -q '\[SWAP\]'
# Stacks of every daemon thread at 270 s, before the limit kills a stall.
lockwatch 15 270 $daemon &
watch=$!
( while :; do cat /proc/meminfo >/dev/null; sleep 0.2; done ) &
forks=$!
guest_workload s4d-swap
kill $forks $watch
s4d ctl swap --batches
swapoff $dev
sleep 1.5
pages=$(s4d ctl swap --json | awk -F'[:,]' '/"pages"/ { print $2 + 0 }')
echo "S4D-RESULT tag=s4d-swap kind=pool pages_after_swapoff=$pages"
# The swap header alone may stay.
[ "$pages" -le 1 ]
s4d swap del $dev
[ ! -e $dev ]
sleep 1; a2=$(ma)
echo "S4D-RESULT tag=s4d-swap kind=mem add_mib=$((a0-a1)) after_del_mib=$((a0-a2))"
kill $daemon; wait $daemon || true
`,
	Bins: func(t *testing.T) []string { return []string{guestS4D(t), guestLockwatch(t)} },
	Check: func(t *testing.T, r guestResults) {
		checkSwapWorkload(t, r, "s4d-swap")
		// What `swap add --size 1G` took of MemAvailable, nothing swapped:
		// the native path's slot table, reserve, buffers and locked code
		// (39-44 MiB in a 2 GiB guest; the removed Go path took 480-844).
		mem := r.get("s4d-swap", "mem")
		if len(mem) != 1 {
			t.Fatalf("s4d-swap: want one mem line, got %v", mem)
		}
		add, del := num(t, mem[0], "add_mib"), num(t, mem[0], "after_del_mib")
		t.Logf("s4d-swap: swap add --size 1G took %v MiB of MemAvailable; %v MiB short after swapoff and delete", add, del)
		if add > 96 {
			t.Errorf("s4d-swap: swap add --size 1G took %v MiB of MemAvailable, want at most 96 (zram: a few)", add)
		}
	},
}

// The ublk package's own device test, under the guest's kernel.
var ublkDeviceScenario = guestScenario{
	Name:  "ublk-device",
	Limit: 60 * time.Second,
	// A test that skips here (no ublk, no liblz4, no memlock) fails the
	// scenario: this guest is where they must run.
	Script: `guest_load ublk_drv
S4D_TEST_WRITEBACK=/dev/nvme0n1 ublk.test -test.run 'DeviceUnderKernel|DeviceHolds|DeviceWriteback|RingNop' -test.v >/tmp/ublk.out 2>&1 || { cat /tmp/ublk.out; exit 1; }
cat /tmp/ublk.out
if grep -- '--- SKIP' /tmp/ublk.out; then echo "ublk-device: a test skipped under the guest's kernel"; exit 1; fi
`,
	Bins: func(t *testing.T) []string {
		bin := filepath.Join(t.TempDir(), "ublk.test")
		if out, err := exec.Command("go", "test", "-c", "-o", bin, "../ublk").CombinedOutput(); err != nil {
			t.Fatalf("go test -c ../ublk: %v\n%s", err, out)
		}
		return []string{bin}
	},
}

func init() {
	registerGuestScenario(ublkDeviceScenario)
	registerGuestScenario(s4dSwapScenario)
}

// guestLockwatch builds tests/guest/lockwatch.c static, for the guest.
func guestLockwatch(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lockwatch")
	if out, err := exec.Command("cc", "-static", "-O2", "-o", path, "guest/lockwatch.c").CombinedOutput(); err != nil {
		t.Fatalf("cc -static guest/lockwatch.c: %v\n%s", err, out)
	}
	return path
}
