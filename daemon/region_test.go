package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/region"
	"github.com/s4d-project/s4d/settings"
)

func needUffd(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if f, err := os.OpenFile("/dev/userfaultfd", os.O_RDWR, 0); err != nil {
			t.Skip("no userfaultfd for this user")
		} else {
			f.Close()
		}
	}
	// Threads stopped in a fault hold their Ps: keep some for the daemon.
	if runtime.GOMAXPROCS(0) < 16 {
		old := runtime.GOMAXPROCS(16)
		t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	}
}

// fillPattern writes compressible, page-distinct bytes.
func fillPattern(mem []byte, seed uint64) {
	for o := 0; o < len(mem); o += 64 {
		binary.LittleEndian.PutUint64(mem[o:], seed^uint64(o/4096))
	}
}

func checkPattern(mem []byte, seed uint64) error {
	for o := 0; o < len(mem); o += 64 {
		if got, want := binary.LittleEndian.Uint64(mem[o:]), seed^uint64(o/4096); got != want {
			return fmt.Errorf("offset %d: %#x, want %#x", o, got, want)
		}
		for _, b := range mem[o+8 : o+64] {
			if b != 0 {
				return fmt.Errorf("offset %d: stray byte", o)
			}
		}
	}
	return nil
}

func regionOf(t *testing.T, c *client.Client, id uint64) *ipc.RegionStats {
	st, err := c.Stats(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range st.Regions {
		if st.Regions[i].ID == id {
			return &st.Regions[i]
		}
	}
	return nil
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for dl := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(dl) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestRegionMap(t *testing.T) {
	needUffd(t)
	c := serveInProcess(t, "cpu")
	ctx := context.Background()
	const size, budget = 16 << 20, 2 << 20
	m, err := c.Map(ctx, size, budget)
	if err != nil {
		t.Fatal(err)
	}
	mem := m.Bytes()
	fillPattern(mem, 0xfeed)
	waitUntil(t, "eviction to the budget", func() bool { return regionOf(t, c, m.ID()).Resident <= budget })
	rs := regionOf(t, c, m.ID())
	if rs.Evicted < size-budget-(1<<20) || rs.Ratio < 2 {
		t.Fatalf("evicted %d bytes at ratio %.2f: %+v", rs.Evicted, rs.Ratio, rs)
	}
	if err := checkPattern(mem, 0xfeed); err != nil {
		t.Fatal(err)
	}
	rs = regionOf(t, c, m.ID())
	if rs.Faults == 0 || rs.FaultP99 <= 0 {
		t.Fatalf("no faults counted: %+v", rs)
	}
	t.Logf("%+v", *rs)
	// The pages live in the owner's region pool meanwhile.
	pools, _ := c.Pools(ctx)
	if len(pools) != 1 || !strings.HasPrefix(pools[0].Name, "(regions of uid") || pools[0].Pages == 0 {
		t.Fatalf("pools: %+v", pools)
	}
	if err := m.SetBudget(ctx, size); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if rs := regionOf(t, c, m.ID()); rs != nil {
		t.Fatalf("region still there after Close: %+v", rs)
	}
	pools, _ = c.Pools(ctx)
	if len(pools) != 1 || pools[0].Pages != 0 {
		t.Fatalf("pages left behind: %+v", pools)
	}
}

// rawRegister sends REGISTER with fds on a connection of its own and
// returns the response's status and message; the connection stays open
// (the region's lifeline) until the test ends.
func rawRegister(t *testing.T, socket string, req ipc.RegisterRequest, fds ...int) (ipc.Code, string, *net.UnixConn) {
	t.Helper()
	nc, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	uc := nc.(*net.UnixConn)
	t.Cleanup(func() { uc.Close() })
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := uc.WriteMsgUnix(ipc.Frame(ipc.Header{Version: ipc.Version, Op: ipc.OpRegister, ID: 9}, req.Encode()), oob, nil); err != nil {
		t.Fatal(err)
	}
	uc.SetReadDeadline(time.Now().Add(30 * time.Second))
	var hd [20]byte
	if _, err := io.ReadFull(uc, hd[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.LittleEndian.Uint32(hd[:])-16)
	io.ReadFull(uc, body)
	uc.SetReadDeadline(time.Time{})
	h := ipc.DecodeHeader(hd[4:])
	if h.Status != ipc.OK {
		msg, _ := ipc.DecodeString(body)
		return h.Status, msg, uc
	}
	return ipc.OK, "", uc
}

func TestRegionBadDescriptors(t *testing.T) {
	needUffd(t)
	c := serveInProcess(t, "cpu")
	ctx := context.Background()
	// Keep some pages stored, to see that nobody else is harmed.
	page := bytes.Repeat([]byte{7}, 4096)
	if _, err := c.Put(ctx, "bystander", []uint64{1}, page); err != nil {
		t.Fatal(err)
	}
	const size = 1 << 20
	rm, err := client.NewRegionMemory(size)
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	addr := uint64(uintptr(unsafe.Pointer(&rm.Mem[0])))
	good := ipc.RegisterRequest{Addr: addr, Length: size, Budget: 0}
	var p [2]int
	unix.Pipe2(p[:], unix.O_CLOEXEC)
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	efd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
	defer unix.Close(efd)
	other, err := client.NewRegionMemory(size)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	cases := []struct {
		name string
		req  ipc.RegisterRequest
		fds  []int
		code ipc.Code
		msg  string
	}{
		{"no descriptors", good, nil, ipc.CodeMalformed, "two descriptors"},
		{"one descriptor", good, []int{rm.Memfd}, ipc.CodeMalformed, "two descriptors"},
		{"not a memfd", good, []int{p[0], rm.Uffd}, ipc.CodeMalformed, "not a memfd"},
		{"not a userfaultfd", good, []int{rm.Memfd, efd}, ipc.CodeMalformed, "not a userfaultfd"},
		{"swapped", good, []int{rm.Uffd, rm.Memfd}, ipc.CodeMalformed, "not a memfd"},
		{"wrong size", ipc.RegisterRequest{Addr: addr, Length: size / 2}, []int{rm.Memfd, rm.Uffd}, ipc.CodeMalformed, "holds"},
		{"unaligned", ipc.RegisterRequest{Addr: addr + 1, Length: size}, []int{rm.Memfd, rm.Uffd}, ipc.CodeMalformed, "aligned"},
		{"another memfd", good, []int{other.Memfd, rm.Uffd}, ipc.CodeMalformed, "not the memfd"},
		{"elsewhere", ipc.RegisterRequest{Addr: 4096, Length: size}, []int{rm.Memfd, rm.Uffd}, ipc.CodeMalformed, "does not map"},
		{"too large", ipc.RegisterRequest{Addr: addr, Length: 1 << 50}, []int{rm.Memfd, rm.Uffd}, ipc.CodeTooLarge, "limit"},
	}
	for _, tc := range cases {
		code, msg, _ := rawRegister(t, c.Socket, tc.req, tc.fds...)
		if code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %v %q, want %v containing %q", tc.name, code, msg, tc.code, tc.msg)
		} else {
			t.Logf("%s: %v: %s", tc.name, code, msg)
		}
	}
	// A descriptor sent with any other region operation is refused.
	if _, err := c.Stats(ctx, ""); err != nil {
		t.Fatal(err)
	}
	// Nobody else was harmed: the stored page is intact, and the same
	// memory still registers.
	got, codes, err := c.Get(ctx, "bystander", []uint64{1})
	if err != nil || codes[0] != ipc.OK || !bytes.Equal(got, page) {
		t.Fatalf("bystander: %v %v", err, codes)
	}
	if code, msg, _ := rawRegister(t, c.Socket, good, rm.Memfd, rm.Uffd); code != ipc.OK {
		t.Fatalf("good registration refused: %v %s", code, msg)
	}
}

// TestRegionClientExit: a region ends with its registering connection
// (the client's exit closes it) and leaves nothing behind.
func TestRegionClientExit(t *testing.T) {
	needUffd(t)
	c := serveInProcess(t, "cpu")
	ctx := context.Background()
	const size = 4 << 20
	rm, err := client.NewRegionMemory(size)
	if err != nil {
		t.Fatal(err)
	}
	code, msg, life := rawRegister(t, c.Socket, ipc.RegisterRequest{Addr: uint64(uintptr(unsafe.Pointer(&rm.Mem[0]))), Length: size}, rm.Memfd, rm.Uffd)
	if code != ipc.OK {
		t.Fatal(code, msg)
	}
	// Touched only now: registered memory faults, and needs the daemon.
	fillPattern(rm.Mem, 3)
	waitUntil(t, "eviction", func() bool {
		st, _ := c.Stats(ctx, "")
		return len(st.Regions) == 1 && st.Regions[0].Evicted > size/2
	})
	unix.Munmap(rm.Mem)
	rm.Mem = nil
	life.Close()
	waitUntil(t, "the region to go", func() bool {
		st, _ := c.Stats(ctx, "")
		return len(st.Regions) == 0 && (len(st.Pools) == 0 || st.Pools[0].Pages == 0)
	})
	rm.Close()
}

// TestRegionDaemonKilled: a program whose daemon is killed while some of
// its pages are evicted is stopped with a message; it never reads zeros.
func TestRegionDaemonKilled(t *testing.T) {
	needUffd(t)
	if testing.Short() {
		t.Skip("starts processes")
	}
	sock := filepath.Join(t.TempDir(), "s.sock")
	dmn := exec.Command(os.Args[0], "-test.run=^TestRegionHelper$")
	dmn.Env = append(os.Environ(), "S4D_REGION_HELPER=daemon", "S4D_SOCKET="+sock)
	dmn.Stderr = os.Stderr
	if err := dmn.Start(); err != nil {
		t.Fatal(err)
	}
	defer dmn.Process.Kill()
	waitUntil(t, "the daemon", func() bool { _, err := os.Stat(sock); return err == nil })
	cli := exec.Command(os.Args[0], "-test.run=^TestRegionHelper$")
	cli.Env = append(os.Environ(), "S4D_REGION_HELPER=client", "S4D_SOCKET="+sock)
	var stderr bytes.Buffer
	cli.Stderr = &stderr
	out, _ := cli.StdoutPipe()
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	defer cli.Process.Kill()
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "evicted" {
	}
	dmn.Process.Signal(unix.SIGKILL)
	dmn.Wait()
	var rest bytes.Buffer
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	done := make(chan error, 1)
	go func() { done <- cli.Wait() }()
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != client.ExitRegionLost {
			t.Fatalf("client ended with %v, want exit status %d; stderr: %s", err, client.ExitRegionLost, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("client still running a minute after the daemon died; stderr: %s", stderr.String())
	}
	if strings.Contains(rest.String(), "WRONG") {
		t.Fatalf("the client read wrong data: %s", rest.String())
	}
	if !strings.Contains(stderr.String(), "went away") {
		t.Fatalf("no message: %q", stderr.String())
	}
	t.Logf("client: %s", strings.TrimSpace(stderr.String()))
}

// TestRegionHelper is the daemon or the client of TestRegionDaemonKilled.
func TestRegionHelper(t *testing.T) {
	switch os.Getenv("S4D_REGION_HELPER") {
	case "daemon":
		cfg := settings.Defaults()
		cfg.Socket = os.Getenv("S4D_SOCKET")
		cfg.Backend = "cpu"
		cfg.Log = slog.New(slog.DiscardHandler)
		d, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Listen(); err != nil {
			t.Fatal(err)
		}
		d.Serve(context.Background())
	case "client":
		c := &client.Client{Socket: os.Getenv("S4D_SOCKET")}
		const size = 8 << 20
		m, err := c.Map(context.Background(), size, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		mem := m.Bytes()
		fillPattern(mem, 0xabc)
		for {
			if st, err := c.Stats(context.Background(), ""); err == nil && len(st.Regions) == 1 && st.Regions[0].Evicted >= size/2 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Println("evicted")
		for {
			for p := 0; p < size; p += 4096 {
				if got, want := binary.LittleEndian.Uint64(mem[p:]), 0xabc^uint64(p/4096); got != want {
					fmt.Printf("WRONG page %d: %#x\n", p/4096, got)
					os.Exit(3)
				}
			}
		}
	case "fds":
		// Hands its region memory's descriptors to the parent over fd 3
		// and waits for stdin to close.
		rm, err := client.NewRegionMemory(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		addr := binary.LittleEndian.AppendUint64(nil, uint64(uintptr(unsafe.Pointer(&rm.Mem[0]))))
		if err := unix.Sendmsg(3, addr, unix.UnixRights(rm.Memfd, rm.Uffd), nil, 0); err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, os.Stdin)
	default:
		t.Skip("helper process for TestRegionDaemonKilled and TestRegionOtherProcess")
	}
}

// TestRegionReleasedOnShutdown: a daemon that stops hands its regions back
// whole; the program keeps its memory and is not stopped.
func TestRegionReleasedOnShutdown(t *testing.T) {
	needUffd(t)
	c, stop := startDaemon(t, nil)
	defer c.Close()
	const size = 8 << 20
	lost := make(chan struct{}, 1)
	m, err := c.MapWith(context.Background(), size, 0, client.MapOptions{OnLost: func(uintptr, int) { lost <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fillPattern(m.Bytes(), 0x5eed)
	waitUntil(t, "eviction", func() bool { return regionOf(t, c, m.ID()).Evicted >= size/2 })
	c.Close()
	stop()
	waitUntil(t, "the region handed back", m.Released)
	select {
	case <-lost:
		t.Fatal("the program was told its pages were lost")
	default:
	}
	if err := checkPattern(m.Bytes(), 0x5eed); err != nil {
		t.Fatal(err)
	}
	// Ordinary memory now: writes and reads need no daemon.
	fillPattern(m.Bytes(), 0x77)
	if err := checkPattern(m.Bytes(), 0x77); err != nil {
		t.Fatal(err)
	}
}

// startDaemon runs a cpu daemon in this process with the settings edit
// makes; stop stops it (the test's end does too).
func startDaemon(t *testing.T, edit func(*Config)) (c *client.Client, stop func()) {
	d, stop := serveDaemon(t, edit)
	return &client.Client{Socket: d.cfg.Socket}, stop
}

// serveDaemon is startDaemon for tests that use the daemon itself; stop
// also checks that it left no goroutine behind.
func serveDaemon(t testing.TB, edit func(*Config)) (d *Daemon, stop func()) {
	floor := lastGoroutine()
	cfg := settings.Defaults()
	cfg.Socket = filepath.Join(t.TempDir(), "s.sock")
	cfg.Backend = "cpu"
	cfg.Log = slog.New(slog.DiscardHandler)
	if edit != nil {
		edit(&cfg)
	}
	d, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Serve(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done; checkNoLeaks(t, floor) }) }
	t.Cleanup(stop)
	return d, stop
}

// TestRegionQuota: a region's pages count against its owner's quota;
// what the quota refuses stays resident, intact.
func TestRegionQuota(t *testing.T) {
	needUffd(t)
	const quota = 256 << 10
	c, _ := startDaemon(t, func(cfg *Config) { cfg.UserQuota = quota })
	defer c.Close()
	const size = 4 << 20
	m, err := c.Map(context.Background(), size, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mem := m.Bytes()
	// Incompressible: stored raw, so the quota holds about 64 pages.
	rng := rand.New(rand.NewPCG(5, 5))
	for o := 0; o < size; o += 8 {
		binary.LittleEndian.PutUint64(mem[o:], rng.Uint64())
	}
	waitUntil(t, "refusals", func() bool { return regionOf(t, c, m.ID()).Refused > 0 })
	rs := regionOf(t, c, m.ID())
	if rs.Stored > quota || rs.Evicted == 0 || rs.Error != "" {
		t.Fatalf("quota %d: %+v", quota, *rs)
	}
	rng = rand.New(rand.NewPCG(5, 5))
	for o := 0; o < size; o += 8 {
		if binary.LittleEndian.Uint64(mem[o:]) != rng.Uint64() {
			t.Fatalf("offset %d differs", o)
		}
	}
	t.Logf("%+v", *rs)
}

// TestRegionDetach: UNREGISTER with RESTORE leaves the program its memory
// whole, no longer served.
func TestRegionDetach(t *testing.T) {
	needUffd(t)
	c := serveInProcess(t, "cpu")
	ctx := context.Background()
	const size = 8 << 20
	m, err := c.Map(ctx, size, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fillPattern(m.Bytes(), 0xd7)
	waitUntil(t, "eviction", func() bool { return regionOf(t, c, m.ID()).Evicted >= size/2 })
	if err := m.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if rs := regionOf(t, c, m.ID()); rs != nil {
		t.Fatalf("region still served: %+v", rs)
	}
	if err := checkPattern(m.Bytes(), 0xd7); err != nil {
		t.Fatal(err)
	}
	pools, _ := c.Pools(ctx)
	if len(pools) != 1 || pools[0].Pages != 0 {
		t.Fatalf("pages left in the store: %+v", pools)
	}
}

// TestRegionOtherProcess: descriptors of another process's memory are
// refused with a clear error, and nobody is harmed.
func TestRegionOtherProcess(t *testing.T) {
	needUffd(t)
	c := serveInProcess(t, "cpu")
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine := os.NewFile(uintptr(sp[0]), "sp0")
	theirs := os.NewFile(uintptr(sp[1]), "sp1")
	defer mine.Close()
	child := exec.Command(os.Args[0], "-test.run=^TestRegionHelper$")
	child.Env = append(os.Environ(), "S4D_REGION_HELPER=fds")
	child.ExtraFiles = []*os.File{theirs}
	stdin, _ := child.StdinPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	defer func() { stdin.Close(); child.Wait() }()
	buf, oob := make([]byte, 8), make([]byte, unix.CmsgSpace(8))
	_, oobn, _, _, err := unix.Recvmsg(sp[0], buf, oob, 0)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	fds, _ := unix.ParseUnixRights(&msgs[0])
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	addr := binary.LittleEndian.Uint64(buf)
	// The cases need addresses that the other process does not map. Two
	// processes of this binary can lay out their memory alike, so the
	// child's address is sometimes mapped here and ours there (a CI run
	// saw both at once): then another address is taken.
	if mapsAny("self", addr, 1<<20) {
		addr = unmappedHere(t, 1<<20)
	}
	rm, err := client.NewRegionMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	for try := 0; mapsAny(fmt.Sprint(child.Process.Pid), uint64(uintptr(unsafe.Pointer(&rm.Mem[0]))), 1<<20); try++ {
		if try == 8 {
			t.Fatal("every region memory made here lies where the child maps memory too")
		}
		next, err := client.NewRegionMemory(1 << 20) // rm stays mapped meanwhile: next lies elsewhere
		if err != nil {
			t.Fatal(err)
		}
		defer next.Close()
		rm = next
	}
	own := uint64(uintptr(unsafe.Pointer(&rm.Mem[0])))
	for _, tc := range []struct {
		name string
		addr uint64
		fds  []int
		msg  string
	}{
		{"its memfd and userfaultfd", addr, []int{fds[0], fds[1]}, "does not map"},
		{"its memfd at my address", own, []int{fds[0], rm.Uffd}, "not the memfd"},
		{"its userfaultfd over my memory", own, []int{rm.Memfd, fds[1]}, "UFFDIO_REGISTER"},
	} {
		code, msg, _ := rawRegister(t, c.Socket, ipc.RegisterRequest{Addr: tc.addr, Length: 1 << 20}, tc.fds...)
		if code != ipc.CodeMalformed || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %v %q, want MALFORMED containing %q", tc.name, code, msg, tc.msg)
		} else {
			t.Logf("%s: %s", tc.name, msg)
		}
	}
	// My own memory still registers, and serves.
	code, msg, _ := rawRegister(t, c.Socket, ipc.RegisterRequest{Addr: own, Length: 1 << 20}, rm.Memfd, rm.Uffd)
	if code != ipc.OK {
		t.Fatal(code, msg)
	}
	fillPattern(rm.Mem, 9)
	if err := checkPattern(rm.Mem, 9); err != nil {
		t.Fatal(err)
	}
}

// TestRegionLimits: a user's regions are limited in number.
func TestRegionLimits(t *testing.T) {
	needUffd(t)
	c := serveInProcess(t, "cpu")
	for i := 0; i <= region.MaxOfUser; i++ {
		rm, err := client.NewRegionMemory(64 << 10)
		if err != nil {
			t.Fatal(err)
		}
		defer rm.Close()
		code, msg, _ := rawRegister(t, c.Socket, ipc.RegisterRequest{Addr: uint64(uintptr(unsafe.Pointer(&rm.Mem[0]))), Length: 64 << 10}, rm.Memfd, rm.Uffd)
		if want := map[bool]ipc.Code{true: ipc.OK, false: ipc.CodeLimit}[i < region.MaxOfUser]; code != want {
			t.Fatalf("region %d: %v %s, want %v", i, code, msg, want)
		}
		if code != ipc.OK {
			t.Log(msg)
		}
	}
}
