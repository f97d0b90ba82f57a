package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A daemon serving swap restarts, planned and with kill -9, while a
// process's pages are out on its device (#28, point 3; daemon/swapkeep.go).
// The device stays (ublk user recovery) and the next daemon takes it over.
//
//   - Stopped with persist (SIGTERM): the pages go to the backing file and
//     come back; the process waiting on them goes on and every page is right.
//   - kill -9: the next daemon cannot vouch for the pages it lost, so the
//     process gets SIGBUS on the first such page, or, if it had none out,
//     every page right: never a wrong page. The device then serves new
//     pages as before.
//
// The process writes its pages, waits (workload -w) while a second one
// pushes them out to the device and the daemon restarts, then checks them.
// The daemon's binary, log and backing file live on a tmpfs that is never
// swapped (noswap): while the daemon is down its device holds swap I/O,
// and a page the daemon needs to stop (a log line: the log's last page
// was out on the device in one boot) or the next one needs to start must
// not be out on it.
var swapRecoveryScenario = guestScenario{
	Name:  "s4d-recovery",
	Limit: 330 * time.Second,
	Script: `guest_load ublk_drv
ulimit -s 256
mkdir -p /keep
mount -t tmpfs -o noswap,size=200M tmpfs /keep
cp /bin/s4d /bin/workload /bin/restart /keep/
S=/keep/s4d W=/keep/workload
truncate -s 160M /keep/back
export S4D_SOCKET=/run/s4d-rec.sock
args="daemon --socket $S4D_SOCKET --backing-file /keep/back --persist true --swap-takeover true --checkpoint-interval 0"
$S $args >>/keep/rec.log 2>&1 &
daemon=$!
for i in $(seq 600); do $S ctl stats >/dev/null 2>&1 && break; sleep 0.1; done
written() {
	for i in $(seq 1200); do grep -q S4D-WORKLOAD-WRITTEN $1 && return 0; sleep 0.1; done
	echo "workload never wrote its pages"; return 1
}
# takeover N: wait for the Nth "taken over" line of the log.
takeover() {
	for i in $(seq 600); do [ $(grep -c "taken over" /keep/rec.log) -ge $1 ] && { grep "taken over" /keep/rec.log | tail -1; return 0; }; sleep 0.1; done
	echo "no takeover"; tail -30 /keep/rec.log; return 1
}
dev=$($S swap add --size 1G --depth 32 --reserve 16M)
mkswap $dev >/dev/null
swapon $dev

# 1. A planned restart with persist. The restart is done by a program
# locked in memory: this shell may have pages out on the device, which
# waits while no daemon serves it.
$W -m 160 -t rec-restart -w /tmp/goA >/tmp/wA.out 2>&1 &
wa=$!
written /tmp/wA.out
$W -m 300 -t rec-hog >/dev/null
echo "recovery: pages out, restarting ($(awk '/^pswpout/ {print $2}' /proc/vmstat) pages swapped out)"
t0=$(guest_uptime)
daemon=$(/keep/restart 15 $daemon $S4D_SOCKET /keep/rec.log -- $S $args)
takeover 1 | grep -q "every_page_served=true"
echo "S4D-RESULT tag=s4d-recovery kind=takeover how=restart up_s=$(awk -v a=$t0 -v b=$(guest_uptime) 'BEGIN { printf "%.2f", b - a }')"
grep -q "left for the next start" /keep/rec.log
$S ctl swap | grep -q "$dev"
touch /tmp/goA
rc=0; wait $wa || rc=$?
grep S4D-RESULT /tmp/wA.out
[ $rc -eq 0 ] || { echo "after the restart the workload exited $rc"; cat /tmp/wA.out; exit 1; }

# 2. kill -9.
$W -m 160 -t rec-crash -w /tmp/goC >/tmp/wC.out 2>&1 &
wc=$!
written /tmp/wC.out
$W -m 300 -t rec-hog >/dev/null
echo "recovery: pages out, kill -9"
daemon=$(/keep/restart 9 $daemon $S4D_SOCKET /keep/rec.log -- $S $args)
takeover 2 | grep -q "every_page_served=false"
touch /tmp/goC
rc=0; wait $wc || rc=$?
grep S4D-RESULT /tmp/wC.out || true
echo "S4D-RESULT tag=s4d-recovery kind=takeover how=kill9 workload_rc=$rc"
# SIGBUS (128+7) on a lost page, or every page right; a wrong page fails.
if grep -q "wrong" /tmp/wC.out; then echo "a wrong page after kill -9"; cat /tmp/wC.out; exit 1; fi
[ $rc -eq 0 ] || [ $rc -eq 135 ] || { echo "after kill -9 the workload exited $rc"; exit 1; }
$W -m 300 -t rec-after
swapoff $dev
$S swap del $dev
kill $daemon
`,
	Bins: func(t *testing.T) []string { return []string{guestS4D(t), guestRestart(t)} },
	Check: func(t *testing.T, r guestResults) {
		var restart, crash bool
		for _, m := range r.get("s4d-recovery", "takeover") {
			restart = restart || m["how"] == "restart"
			crash = crash || m["how"] == "kill9"
		}
		if !restart || !crash {
			t.Errorf("s4d-recovery: takeovers seen: restart %v, kill -9 %v", restart, crash)
		}
		for _, tag := range []string{"rec-restart", "rec-after"} {
			for _, m := range r.get(tag, "workload") {
				if m["bad"] != "0" {
					t.Errorf("%s: %s wrong pages", tag, m["bad"])
				}
			}
		}
		// Pages must have come back from the device after the restart, or
		// the restart proved nothing.
		if w := r.get("rec-restart", "workload"); len(w) != 1 {
			t.Errorf("rec-restart: %v", w)
		} else if n, _ := strconv.Atoi(w[0]["verify_pswpin"]); n == 0 {
			t.Errorf("rec-restart: no page swapped in after the restart: %v", w[0])
		}
	},
}

// Not in TestGuest's boot unless S4D_GUEST_RECOVERY=1: the planned restart
// does not complete yet (the stopping daemon waits, after its devices are
// detached, on something not yet found; see README "Restarts and crashes").
func init() {
	if os.Getenv("S4D_GUEST_RECOVERY") == "1" {
		registerGuestScenario(swapRecoveryScenario)
	}
}

// guestRestart builds tests/guest/restart.c static, for the guest.
func guestRestart(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "restart")
	if out, err := exec.Command("cc", "-static", "-O2", "-o", path, "guest/restart.c").CombinedOutput(); err != nil {
		t.Fatalf("cc -static guest/restart.c: %v\n%s", err, out)
	}
	return path
}
