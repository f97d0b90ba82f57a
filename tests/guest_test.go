package tests

// Tests under a real kernel with ublk: a guest booted under QEMU/TCG by
// tests/guest/run.sh (see tests/guest/README.md). The machines' own
// kernels have no ublk; `make deps` (mk/guest.mk) installs QEMU and caches
// the guest kernel.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// guestScenario is one part of TestGuest's single guest boot. Files of
// this package add theirs with registerGuestScenario from an init func;
// they run one after the other, after the zram baseline, each in its own
// process group with its own time bound, every swap turned off after it.
type guestScenario struct {
	Name string // tag of its result lines; "zram" is the baseline
	// Script runs in the guest under busybox sh with set -e and
	// tests/guest/lib.sh's functions; guest_workload NAME runs the standard
	// workload, whose times compare with zram's.
	Script string
	Limit  time.Duration // the guest kills it after this long
	// Bins returns host binaries to put in the guest's /bin (with their
	// libraries); nil for none. It may build them (guestS4D).
	Bins func(t *testing.T) []string
	// Check, if set, asserts on the results of the whole boot.
	Check func(t *testing.T, r guestResults)
	// Beside says what the script runs beside its workload that zram's
	// did not have (logged with the ratios: they are not like for like
	// then; tests/guest/speed.sh compares alone, in one boot).
	Beside string
}

var guestScenarios []guestScenario

func registerGuestScenario(s guestScenario) { guestScenarios = append(guestScenarios, s) }

// guestResults holds every "S4D-RESULT k=v ..." line of a boot.
type guestResults []map[string]string

// get returns the result lines with the given tag and kind.
func (r guestResults) get(tag, kind string) []map[string]string {
	var out []map[string]string
	for _, m := range r {
		if m["tag"] == tag && m["kind"] == kind {
			out = append(out, m)
		}
	}
	return out
}

// num is a numeric field; missing or malformed fields fail the test.
func num(t *testing.T, m map[string]string, k string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(m[k], 64)
	if err != nil {
		t.Fatalf("result %v: field %s: %v", m, k, err)
	}
	return v
}

const guestKernelDir = "/var/cache/s4d-guest"

// guestReady skips the test when QEMU or the guest kernel is missing.
func guestReady(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("guest boots take a minute or more; skipped in -short")
	}
	dir := os.Getenv("S4D_GUEST_DIR")
	if dir == "" {
		dir = guestKernelDir
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 not installed: run `make deps-guest` (as root)")
	}
	if _, err := os.Stat(filepath.Join(dir, "vmlinuz")); err != nil {
		t.Skipf("no guest kernel in %s: run `make deps-guest` (as root)", dir)
	}
}

// guestWorkload builds tests/guest/workload.c statically (the guest has no
// libc of its own) into the test's temporary directory.
func guestWorkload(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "workload")
	out, err := exec.Command("cc", "-static", "-O2", "-Wall", "-Wextra", "-Werror",
		"-o", path, "guest/workload.c").CombinedOutput()
	if err != nil {
		t.Fatalf("cc -static guest/workload.c: %v\n%s", err, out)
	}
	return path
}

// guestS4D builds s4d for the guest into the test's temporary directory:
// without the race detector (its shadow memory has no place in a 256 MiB
// guest) and without the symbol table (-s -w; panics still name
// functions): the initramfs stays in the guest's RAM. run.sh copies the
// libraries ldd lists.
func guestS4D(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s4d")
	out, err := exec.Command("go", "build", "-ldflags=-s -w", "-o", path, "../cmd/s4d").CombinedOutput()
	if err != nil {
		t.Fatalf("go build s4d for the guest: %v\n%s", err, out)
	}
	return path
}

// guestLZ4 is run.sh's arguments that put the host's liblz4.so.1 in the
// guest: the native swap path loads it at run time (dlopen), so ldd does
// not list it with s4d's libraries.
func guestLZ4(t *testing.T) []string {
	t.Helper()
	path, err := filepath.EvalSymlinks(guestLZ4Path)
	if err != nil {
		t.Fatalf("liblz4.so.1 (the native swap path's LZ4; apt install liblz4-1): %v", err)
	}
	return []string{"--file", path + ":" + guestLZ4Path}
}

const guestLZ4Path = "/lib/x86_64-linux-gnu/liblz4.so.1"

// guestRun is one finished boot: run.sh's exit status, the console, the
// result lines and when (since run.sh started) the marker lines came.
type guestRun struct {
	rc       int
	console  []string
	results  guestResults
	qemuAt   time.Duration // run.sh starts qemu (initramfs built)
	bootedAt time.Duration // the guest's init runs
	bootUp   string        // the guest's uptime then (s): its kernel's boot
	total    time.Duration
}

// runGuest runs tests/guest/run.sh with args and the script, bounded by
// limit on both sides (run.sh's --timeout and a kill here a bit later).
func runGuest(t *testing.T, limit time.Duration, args []string, script string) guestRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit+30*time.Second)
	defer cancel()
	full := append([]string{"guest/run.sh", "--timeout", strconv.Itoa(int(limit.Seconds()))}, args...)
	full = append(full, "--", script)
	cmd := exec.CommandContext(ctx, "bash", full...)
	// A qemu orphaned by a kill of run.sh must not hold Wait on the pipe.
	cmd.WaitDelay = 10 * time.Second
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout // run.sh's own errors, in order with the console
	var r guestRun
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		r.console = append(r.console, line)
		switch {
		case strings.HasPrefix(line, "S4D-HOST qemu-start"):
			r.qemuAt = time.Since(start)
		case strings.HasPrefix(line, "S4D-GUEST-BOOTED"):
			r.bootedAt = time.Since(start)
			if f := strings.Fields(line); len(f) > 1 {
				r.bootUp = strings.TrimPrefix(f[1], "uptime=")
			}
		case strings.HasPrefix(line, "S4D-RESULT "):
			m := map[string]string{}
			for _, f := range strings.Fields(line)[1:] {
				if k, v, ok := strings.Cut(f, "="); ok {
					m[k] = v
				}
			}
			r.results = append(r.results, m)
		}
	}
	err = cmd.Wait()
	r.total = time.Since(start)
	r.rc = cmd.ProcessState.ExitCode()
	if err != nil && r.rc < 0 {
		t.Fatalf("run.sh: %v", err)
	}
	return r
}

// tail is the console's last n lines, for failure messages.
func (r guestRun) tail(n int) string {
	c := r.console
	if len(c) > n {
		c = c[len(c)-n:]
	}
	return strings.Join(c, "\n")
}

// The zram baseline: swap on zram under the standard workload (twice the
// guest's RAM), then swapoff, which must bring every page back.
var zramScenario = guestScenario{
	Name: "zram",
	// About 50 s on an idle 2-core machine; room for a loaded one.
	Limit: 180 * time.Second,
	Script: `guest_zram_swap 1G
guest_workload zram
guest_zram_stats "$GUEST_ZRAM" zram
guest_zram_off "$GUEST_ZRAM"
`,
	Check: func(t *testing.T, r guestResults) {
		checkSwapWorkload(t, r, "zram")
	},
}

// The kernel's ublk: its control device appears once the module is in.
var ublkModuleScenario = guestScenario{
	Name:   "ublk-module",
	Limit:  15 * time.Second,
	Script: "guest_load ublk_drv\ntest -c /dev/ublk-control\n",
}

// checkSwapWorkload asserts that the standard workload under tag ran to
// completion with every page right and really went through swap.
func checkSwapWorkload(t *testing.T, r guestResults, tag string) {
	t.Helper()
	totals := r.get(tag, "workload-total")
	if len(totals) != 1 || totals[0]["ok"] != "1" {
		t.Errorf("%s: workload did not complete with every page right: %v", tag, totals)
	}
	for _, w := range r.get(tag, "workload") {
		if num(t, w, "bad") != 0 {
			t.Errorf("%s: %v wrong pages (%v misplaced, %v stale)", tag, w["bad"], w["misplaced"], w["stale"])
		}
	}
	sw := r.get(tag, "swap")
	if len(sw) != 1 {
		t.Fatalf("%s: want one swap line, got %v", tag, sw)
	}
	// Twice the RAM cannot fit without swap: a run that swapped nothing
	// did not test anything.
	if num(t, sw[0], "pswpout") == 0 || num(t, sw[0], "pswpin") == 0 {
		t.Errorf("%s: no swap traffic (%v): the workload fit in RAM?", tag, sw[0])
	}
}

// guestMem is TestGuest's guest RAM: room for the swap daemon's locked
// memory beside a workload of twice the RAM (swap_guest_test.go).
const guestMem = "384M"

// guestCPUs is TestGuest's guest CPUs (S4D_GUEST_SMP overrides): two, so
// the swap device has two queues served by two threads, as on any real
// machine. TestGuestRecovery keeps one.
const guestCPUs = "2"

// TestGuest boots the guest once and runs the zram baseline, the ublk
// module check and every registered scenario; it logs boot time, each
// workload's times, swap throughput and swap-in latency, and the ratios
// of each scenario's workload to zram's.
func TestGuest(t *testing.T) {
	guestReady(t)
	all := append([]guestScenario{zramScenario, ublkModuleScenario}, guestScenarios...)
	dir := t.TempDir()
	cpus := guestCPUs
	if v := os.Getenv("S4D_GUEST_SMP"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("S4D_GUEST_SMP=%q: want a positive number", v)
		}
		cpus = v
	}
	// A disk (sparse, /dev/nvme0n1 in the guest): where the ublk-device
	// scenario's store writes pages back; the guest's root is RAM.
	disk := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(disk, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 64<<20); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--mem", guestMem, "--smp", cpus, "--disk", disk, "--bin", guestWorkload(t)}, guestLZ4(t)...)
	var script strings.Builder
	// The standard workload's shape for every scenario alike, so ratios
	// hold: S4D_GUEST_JOBS=3 runs three processes at once (same total).
	for _, k := range []string{"JOBS", "MIB", "PASSES"} {
		if v := os.Getenv("S4D_GUEST_" + k); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n <= 0 {
				t.Fatalf("S4D_GUEST_%s=%q: want a positive number", k, v)
			}
			fmt.Fprintf(&script, "export S4D_WL_%s=%s\n", k, v)
		}
	}
	limit := 30 * time.Second // boot and power-off
	for _, s := range all {
		f := filepath.Join(dir, s.Name+".sh")
		if err := os.WriteFile(f, []byte(s.Script), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--file", f+":/scenarios/"+s.Name+".sh")
		if s.Bins != nil {
			for _, b := range s.Bins(t) {
				args = append(args, "--bin", b)
			}
		}
		fmt.Fprintf(&script, "guest_scenario %s %d /scenarios/%s.sh\n", s.Name, int(s.Limit.Seconds()), s.Name)
		limit += s.Limit
	}
	script.WriteString("[ -z \"$GUEST_FAILED\" ] || { echo \"failed:$GUEST_FAILED\"; exit 1; }\n")
	run := runGuest(t, limit, args, script.String())
	if run.rc != 0 {
		t.Errorf("guest exit %d; console tail:\n%s", run.rc, run.tail(60))
	}
	for _, s := range all {
		sc := run.results.get(s.Name, "scenario")
		if len(sc) != 1 || sc[0]["rc"] != "0" {
			t.Errorf("scenario %s: %v", s.Name, sc)
		}
		if s.Check != nil {
			s.Check(t, run.results)
		}
	}
	t.Logf("boot: initramfs built in %.1fs, guest init after %.1fs more (guest uptime %ss); whole run %.1fs",
		run.qemuAt.Seconds(), (run.bootedAt - run.qemuAt).Seconds(), run.bootUp, run.total.Seconds())
	logSwapResults(t, run.results, all)
}

// logSwapResults logs each scenario's workload figures and, for all but
// zram, their ratio to zram's (time: theirs over zram's, lower is better;
// throughput: theirs over zram's, higher is better).
func logSwapResults(t *testing.T, r guestResults, all []guestScenario) {
	base := r.get("zram", "swap")
	baseW := r.get("zram", "workload")
	for _, s := range all {
		sw, ws := r.get(s.Name, "swap"), r.get(s.Name, "workload")
		if len(sw) != 1 {
			continue
		}
		for _, w := range ws {
			t.Logf("%s proc %s: %s MiB, write %ss (swap-out %s MiB/s), verify %ss (swap-in %s MiB/s), swap-in latency p50 %sus p99 %sus max %sus (%s samples), %s major faults",
				s.Name, w["proc"], w["mib"], w["write_s"], w["write_out_mib_s"], w["verify_s"], w["verify_in_mib_s"],
				w["swapin_p50_us"], w["swapin_p99_us"], w["swapin_max_us"], w["swapin_n"], w["majflt"])
		}
		t.Logf("%s: %ss in all, %s pages in (%s MiB/s), %s out (%s MiB/s)", s.Name, sw[0]["wall_s"],
			sw[0]["pswpin"], sw[0]["in_mib_s"], sw[0]["pswpout"], sw[0]["out_mib_s"])
		for _, z := range r.get(s.Name, "zram") {
			t.Logf("%s: zram used at most %s MiB, %s pages stored uncompressed", s.Name, z["used_max_mib"], z["huge_pages"])
		}
		if s.Name == "zram" || len(base) != 1 || len(ws) == 0 || len(baseW) == 0 {
			continue
		}
		ratio := func(a, b map[string]string, k string) float64 { return num(t, a, k) / max(num(t, b, k), 1e-9) }
		// Process 0 against process 0: with several, lines come in the
		// order they finish.
		ws, baseW := proc0(ws), proc0(baseW)
		if s.Beside != "" {
			t.Logf("%s ran with %s beside its workload, zram alone: the ratios below are not like for like (tests/guest/speed.sh compares alone)", s.Name, s.Beside)
		}
		t.Logf("%s / zram: time %.2fx, write %.2fx, verify %.2fx, swap-in MiB/s %.2fx, swap-out MiB/s %.2fx, swap-in p50 %.2fx, p99 %.2fx",
			s.Name, ratio(sw[0], base[0], "wall_s"), ratio(ws[0], baseW[0], "write_s"), ratio(ws[0], baseW[0], "verify_s"),
			ratio(ws[0], baseW[0], "verify_in_mib_s"), ratio(ws[0], baseW[0], "write_out_mib_s"),
			ratio(ws[0], baseW[0], "swapin_p50_us"), ratio(ws[0], baseW[0], "swapin_p99_us"))
	}
}

// proc0 puts the line of the workload's process 0 first.
func proc0(ws []map[string]string) []map[string]string {
	for i, w := range ws {
		if w["proc"] == "0" {
			return append([]map[string]string{w}, append(ws[:i:i], ws[i+1:]...)...)
		}
	}
	return ws
}

// The workload's checker must be able to fail: one byte changed behind
// its back is a wrong page and a nonzero exit. Runs on the host.
func TestGuestWorkloadCatchesCorruption(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler")
	}
	w := guestWorkload(t)
	if out, err := exec.Command(w, "-m", "4", "-p", "2").CombinedOutput(); err != nil {
		t.Fatalf("clean run failed: %v\n%s", err, out)
	}
	out, err := exec.Command(w, "-m", "4", "-p", "2", "-x", "100").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "bad=1 ") || !strings.Contains(string(out), "page 100 wrong") {
		t.Fatalf("a spoiled page went unnoticed (err %v):\n%s", err, out)
	}
	if out, err := exec.Command(w, "-m", "0").CombinedOutput(); err == nil || !strings.Contains(string(out), "usage") {
		t.Fatalf("-m 0 accepted (err %v):\n%s", err, out)
	}
}

// run.sh's own contract: a missing kernel is a clear error with the
// remedy; the script's exit status comes back; a guest that runs past
// --timeout is killed and reported as 124.
func TestGuestRunContract(t *testing.T) {
	cmd := exec.Command("bash", "guest/run.sh", "--", "true")
	cmd.Env = append(os.Environ(), "S4D_GUEST_DIR=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "make deps-guest") {
		t.Errorf("missing kernel: err %v, output %q (want the remedy)", err, out)
	}
	guestReady(t)
	if r := runGuest(t, 30*time.Second, nil, "echo hello from the guest; exit 7"); r.rc != 7 ||
		!strings.Contains(strings.Join(r.console, "\n"), "hello from the guest") {
		t.Errorf("exit 7 came back as %d; console:\n%s", r.rc, r.tail(20))
	}
	if r := runGuest(t, 8*time.Second, nil, "sleep 600"); r.rc != 124 {
		t.Errorf("a guest past its bound: exit %d, want 124; console:\n%s", r.rc, r.tail(20))
	}
}
