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
// The workload is 110 MiB, not the baseline's twice the RAM: the daemon
// keeps ~105 MiB of the 212 MiB guest locked (code, Go heap, I/O
// buffers, the memory set aside for compressed pages; see README, "Swap
// on s4d"), and at twice the RAM the guest stalls: alone in a boot it
// passed 3 times of 6, and here, after the zram baseline, it stalled
// and the rest of the boot was lost; with anything forking beside it, it
// always stalls (README has the stacks: a mapping populated in direct
// reclaim while the I/O path waits). (zram run beside the daemon, with
// the same memory left, had its 110 MiB workload killed.)
const swapScenarioMiB = "110"

var s4dSwapScenario = guestScenario{
	Name:  "s4d-swap",
	Limit: 150 * time.Second,
	Script: `guest_load ublk_drv
# Thread stacks of 256 KiB: the daemon's memory is locked whole, and
# glibc gives each thread a stack of RLIMIT_STACK (8 MiB by default).
ulimit -s 256
s4d daemon --socket /run/s4d.sock >/tmp/s4d.log 2>&1 &
daemon=$!
for i in $(seq 100); do [ -S /run/s4d.sock ] && break; sleep 0.1; done
export S4D_SOCKET=/run/s4d.sock
# Bad input: a size below 1M is a usage error (exit 2).
rc=0; s4d swap add --size 100 2>/dev/null || rc=$?
[ $rc -eq 2 ] || { echo "swap add --size 100: exit $rc, want 2"; exit 1; }
dev=$(s4d swap add --size 1G --depth 32 --reserve 16M)
s4d ctl swap | grep -q "^ *$dev "
mkswap $dev >/dev/null
swapon -d $dev
s4d ctl swap | grep -q '\[SWAP\]'
S4D_WL_MIB=` + swapScenarioMiB + ` guest_workload s4d-swap
s4d ctl swap --batches
swapoff $dev
sleep 1.5
pages=$(s4d ctl swap --json | awk -F'[:,]' '/"pages"/ { print $2 + 0 }')
echo "S4D-RESULT tag=s4d-swap kind=pool pages_after_swapoff=$pages"
# The swap header alone may stay.
[ "$pages" -le 1 ]
s4d swap del $dev
[ ! -e $dev ]
kill $daemon; wait $daemon || true
`,
	Bins: func(t *testing.T) []string { return []string{guestS4D(t)} },
	Check: func(t *testing.T, r guestResults) {
		checkSwapWorkload(t, r, "s4d-swap")
	},
}

// The ublk package's own device test, under the guest's kernel.
var ublkDeviceScenario = guestScenario{
	Name:   "ublk-device",
	Limit:  60 * time.Second,
	Script: "guest_load ublk_drv\nublk.test -test.run 'DeviceUnderKernel|RingNop' -test.v\n",
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
