package tests

// Clients that try to exhaust the daemon: each test attacks the real
// binary through local sockets, measures its memory and descriptors from
// /proc, and checks that a well-behaved client is served meanwhile.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

// rssMiB is the daemon's resident memory.
func (d *daemon) rssMiB() float64 {
	d.t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(d.cmd.Process.Pid) + "/status")
	if err != nil {
		d.t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	d.t.Fatal("no VmRSS")
	return 0
}

// fds counts the daemon's open files: descriptors to distinct files, as a
// connection waiting in the runtime's poller holds a second descriptor of
// its socket for the while.
func (d *daemon) fds() int {
	d.t.Helper()
	dir := "/proc/" + strconv.Itoa(d.cmd.Process.Pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		d.t.Fatal(err)
	}
	n, sockets := 0, map[string]bool{}
	for _, e := range ents {
		l, _ := os.Readlink(filepath.Join(dir, e.Name()))
		if strings.HasPrefix(l, "socket:") {
			if sockets[l] {
				continue
			}
			sockets[l] = true
		}
		n++
	}
	return n
}

// fdList names the daemon's open descriptors, for failure messages.
func (d *daemon) fdList() string {
	dir := "/proc/" + strconv.Itoa(d.cmd.Process.Pid) + "/fd"
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		l, _ := os.Readlink(filepath.Join(dir, e.Name()))
		names = append(names, e.Name()+"->"+l)
	}
	return strings.Join(names, " ")
}

// settle waits until cond holds, up to limit, and says whether it did.
func settle(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// prober is a well-behaved client doing one-page round trips while an
// attack runs; it records its slowest.
type prober struct {
	stop  chan struct{}
	done  chan error
	worst time.Duration
	n     int
}

func probe(t *testing.T, d *daemon) *prober {
	p := &prober{stop: make(chan struct{}), done: make(chan error, 1)}
	c := d.client()
	page := corpus.Pages(corpus.Text, 1, 4096, 7)
	go func() {
		for {
			select {
			case <-p.stop:
				p.done <- nil
				return
			default:
			}
			t0 := time.Now()
			if _, err := c.Put(ctx(t), "probe", []uint64{1}, page); err != nil {
				p.done <- err
				return
			}
			got, _, err := c.Get(ctx(t), "probe", []uint64{1})
			if err != nil || !bytes.Equal(got, page) {
				p.done <- errors.Join(errors.New("probe GET differs"), err)
				return
			}
			p.worst = max(p.worst, time.Since(t0))
			p.n++
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return p
}

// end stops the prober and checks it was served throughout.
func (p *prober) end(t *testing.T, limit time.Duration) {
	t.Helper()
	close(p.stop)
	if err := <-p.done; err != nil {
		t.Fatalf("well-behaved client: %v", err)
	}
	t.Logf("well-behaved client: %d round trips, worst %v", p.n, p.worst)
	if p.n == 0 || p.worst > limit {
		t.Fatalf("well-behaved client: %d round trips, worst %v (limit %v)", p.n, p.worst, limit)
	}
}

// admitted dials until the daemon admits the connection (a probe of the
// harness may still hold a slot a moment) and says hello on it.
func admitted(t *testing.T, d *daemon) net.Conn {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		nc, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		nc.Write(req(ipc.OpHello, 1, ipc.EncodeHelloRequest("hostile")))
		h, _, err := ipc.ReadFrame(nc, 1<<20, nil)
		nc.SetDeadline(time.Time{})
		if err == nil && h.Status == ipc.OK {
			return nc
		}
		nc.Close()
	}
	t.Fatal("no connection admitted")
	return nil
}

// A header that claims an 80 MiB body, three bytes of it and a hang-up,
// from 40 connections at once, eight times: the daemon must not take
// memory for bytes that never came, and must give back what it took.
func TestHostileClaimedBody(t *testing.T) {
	d := start(t, "--backend", "cpu")
	p := probe(t, d)
	time.Sleep(300 * time.Millisecond)
	base, fd0 := d.rssMiB(), d.fds()
	claim := make([]byte, 4+ipc.HeaderSize+3)
	binary.LittleEndian.PutUint32(claim, uint32(ipc.DefaultMaxFrame))
	claim[4], claim[5] = ipc.Version, byte(ipc.OpPut)
	peak := base
	for round := 0; round < 8; round++ {
		var conns []net.Conn
		for i := 0; i < 40; i++ {
			c, err := net.Dial("unix", d.socket)
			if err != nil {
				t.Fatal(err)
			}
			c.Write(claim)
			conns = append(conns, c)
		}
		time.Sleep(100 * time.Millisecond)
		peak = max(peak, d.rssMiB())
		for _, c := range conns {
			c.Close()
		}
	}
	p.end(t, 2*time.Second)
	back := settle(10*time.Second, func() bool { return d.fds() <= fd0 })
	after := d.rssMiB()
	t.Logf("RSS base %.0f MiB, peak %.0f (+%.0f), after %.0f; descriptors %d before, %d after", base, peak, peak-base, after, fd0, d.fds())
	if peak-base > 64 {
		t.Errorf("claimed bodies took %.0f MiB", peak-base)
	}
	if !back {
		t.Errorf("descriptors: %d before the attack, %d after: %s", fd0, d.fds(), d.fdList())
	}
}

// Connections that pass descriptors with every byte of a frame they never
// finish: the daemon must not keep them (it would run out of descriptors
// for everyone else); each such connection is told MALFORMED and closed.
func TestHostileDescriptorFlood(t *testing.T) {
	d := start(t, "--backend", "cpu")
	p := probe(t, d)
	time.Sleep(300 * time.Millisecond)
	fd0 := d.fds()
	f, err := os.CreateTemp(t.TempDir(), "fd")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rights := unix.UnixRights(int(f.Fd()), int(f.Fd()), int(f.Fd()), int(f.Fd()))
	head := make([]byte, 4+ipc.HeaderSize)
	binary.LittleEndian.PutUint32(head, uint32(ipc.HeaderSize+1<<20))
	head[4], head[5] = ipc.Version, byte(ipc.OpPutFD)
	peak := fd0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func(uc *net.UnixConn) {
			defer wg.Done()
			msg := append(append([]byte{}, head...), make([]byte, 4096)...)
			for j := range msg {
				if _, _, err := uc.WriteMsgUnix(msg[j:j+1], rights, nil); err != nil {
					return // closed by the daemon, as it should be
				}
			}
		}(c.(*net.UnixConn))
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for watching := true; watching; {
		select {
		case <-done:
			watching = false
		case <-time.After(20 * time.Millisecond):
			peak = max(peak, d.fds())
		}
	}
	p.end(t, 2*time.Second)
	back := settle(10*time.Second, func() bool { return d.fds() <= fd0 })
	t.Logf("descriptors %d before, peak %d, %d after", fd0, peak, d.fds())
	if peak-fd0 > 8*(16+4)+16 {
		t.Errorf("the daemon held %d descriptors more during the flood", peak-fd0)
	}
	if !back {
		t.Errorf("descriptors: %d before the attack, %d after: %s", fd0, d.fds(), d.fdList())
	}
}

// Sixteen connections that each ask for 64 MiB of pages and never read:
// the replies are produced as the sockets drain, so they cost little,
// and the write deadline closes the connections.
func TestHostileUnreadReplies(t *testing.T) {
	d := start(t, "--backend", "cpu", "--frame-timeout", "3s")
	c := d.client()
	ks := keys(0, 16384)
	if _, err := c.Put(ctx(t), "zeros", ks, make([]byte, len(ks)*4096)); err != nil {
		t.Fatal(err)
	}
	p := probe(t, d)
	time.Sleep(300 * time.Millisecond)
	base, fd0 := d.rssMiB(), d.fds()
	req := req(ipc.OpGet, 1, getBody("zeros", ks...))
	var conns []net.Conn
	for i := 0; i < 16; i++ {
		nc, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := nc.Write(req); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
	}
	time.Sleep(time.Second)
	peak := d.rssMiB()
	// The write deadline (the frame timeout) ends them while the attacker
	// still holds its sockets open.
	closed := settle(10*time.Second, func() bool { return d.fds() <= fd0 })
	p.end(t, 2*time.Second)
	// What the replies held goes back to the kernel within a few sweeps
	// (with the race detector, some of its shadow memory stays).
	var after float64
	settle(15*time.Second, func() bool { after = d.rssMiB(); return after-base < 64 })
	t.Logf("RSS base %.0f MiB, with 16 unread 64 MiB replies %.0f (+%.0f), %.0f once closed; descriptors %d before, %d after the deadline",
		base, peak, peak-base, after, fd0, d.fds())
	// A reply costs its snapshot (nothing for zero pages), its keys and two
	// 512 KiB pieces: 4-5 MiB a connection in a plain build, and the race
	// detector's shadow memory about triples that (before streaming: 60).
	if peak-base > 16*12 {
		t.Errorf("16 unread replies took %.0f MiB", peak-base)
	}
	if after-base >= 64 {
		t.Errorf("%.0f MiB more than before the attack once it ended", after-base)
	}
	if !closed {
		t.Errorf("connections that do not read were not closed: %d descriptors, %d before", d.fds(), fd0)
	}
}

// A connection over --max-connections is told why and closed, and its
// descriptor goes with it.
func TestHostileRefusedConnections(t *testing.T) {
	d := start(t, "--backend", "cpu", "--max-connections", "1")
	// The harness's own probe of the socket may hold the one slot a moment.
	var keep *client.Client
	if !settle(5*time.Second, func() bool {
		keep = &client.Client{Socket: d.socket}
		_, err := keep.Stats(ctx(t), "")
		return err == nil
	}) {
		t.Fatal("no connection admitted")
	}
	defer keep.Close()
	fd0 := d.fds()
	for i := 0; i < 100; i++ {
		nc, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		h, body, err := ipc.ReadFrame(nc, 1<<20, nil)
		if err != nil || h.Status != ipc.CodeLimit {
			t.Fatalf("refused connection %d: status %v, %v", i, h.Status, err)
		}
		if msg, _ := ipc.DecodeString(body); !strings.Contains(msg, "too many connections") {
			t.Fatalf("refusal says %q", msg)
		}
		if _, err := nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("refused connection %d left open: %v", i, err)
		}
		nc.Close()
	}
	if !settle(5*time.Second, func() bool { return d.fds() <= fd0 }) {
		t.Fatalf("descriptors: %d with one client, %d after 100 refusals: %s", fd0, d.fds(), d.fdList())
	}
	if _, err := keep.Stats(ctx(t), ""); err != nil {
		t.Fatalf("the admitted client: %v", err)
	}
	// The Go client reports the refusal, whether its hello went out first
	// or not.
	for i := 0; i < 20; i++ {
		c := &client.Client{Socket: d.socket}
		_, err := c.Stats(ctx(t), "")
		c.Close()
		if !errors.Is(err, ipc.ErrLimit) || !strings.Contains(err.Error(), "too many connections") {
			t.Fatalf("refused client %d: %v", i, err)
		}
	}
}

// One user holding all its connections, and as much request memory as it
// may, does not keep another user out.
func TestHostileFairShares(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	d := start(t, "--backend", "cpu", "--socket-mode", "0666", "--max-connections", "16",
		"--max-connections-per-user", "4", "--io-budget", "240M", "--user-io-budget", "150M", "--frame-timeout", "20s")
	var mine []net.Conn
	for i := 0; i < 4; i++ {
		nc := admitted(t, d)
		defer nc.Close()
		mine = append(mine, nc)
	}
	// The fifth of this user is refused, naming the per-user limit.
	nc, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, body, err := ipc.ReadFrame(nc, 1<<20, nil)
	msg, _ := ipc.DecodeString(body)
	nc.Close()
	if err != nil || h.Status != ipc.CodeLimit || !strings.Contains(msg, "per user") {
		t.Fatalf("fifth connection: %v %q %v", h.Status, msg, err)
	}
	// Three of them claim 76 MiB bodies and send a little: the first takes
	// half the user's request memory, the others wait for it. Without the
	// user's share they would hold 228 of the 240 MiB.
	claim := make([]byte, 4+ipc.HeaderSize+100)
	binary.LittleEndian.PutUint32(claim, 76<<20)
	claim[4], claim[5] = ipc.Version, byte(ipc.OpPut)
	for _, c := range mine[:3] {
		c.Write(claim)
	}
	time.Sleep(200 * time.Millisecond)

	dir, err := os.MkdirTemp("", "s4d-fair-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	file := filepath.Join(dir, "other.bin")
	pages := make([]byte, 16<<20) // its body and output take 32 MiB of request memory
	os.WriteFile(file, pages, 0o644)
	t0 := time.Now()
	cmd := exec.Command(s4dBin, "ctl", "--socket", d.socket, "put", "--pool", "other", "--file", file)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 4545, Gid: 4545}}
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	took := time.Since(t0)
	t.Logf("another user's 16 MiB PUT while the first holds its share: %v", took)
	if err != nil {
		t.Fatalf("another user was refused: %v\n%s", err, out)
	}
	if took > 5*time.Second {
		t.Fatalf("another user waited %v", took)
	}
}

// The hostile inputs the fuzzers found: a frame that claims more than it
// brings, and a GET reply whose page size is absurd, must not allocate
// for what they claim.
func TestHostileDecoderAllocations(t *testing.T) {
	claim := make([]byte, 4+ipc.HeaderSize+3)
	binary.LittleEndian.PutUint32(claim, uint32(ipc.DefaultMaxFrame))
	getReply := binary.LittleEndian.AppendUint32(nil, 1<<31) // page size
	getReply = binary.LittleEndian.AppendUint32(getReply, 60)
	getReply = append(getReply, make([]byte, 60)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 20; i++ {
		if _, _, err := ipc.ReadFrame(bytes.NewReader(claim), ipc.DefaultMaxFrame, nil); err == nil {
			t.Fatal("a frame short of its length was accepted")
		}
		if _, _, _, err := ipc.DecodeGet(getReply, 60); err == nil {
			t.Fatal("a GET reply with a 2 GiB page size was accepted")
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
		t.Fatalf("20 hostile frames allocated %d MiB", got>>20)
	}
}

// SIGTERM while a large reply is being written: the client still gets it
// whole, then the daemon exits.
func TestHostileShutdownFinishesReply(t *testing.T) {
	d := start(t, "--backend", "cpu")
	c := d.client()
	ks := keys(0, 2048)
	pages := corpus.Pages(corpus.Text, len(ks), 4096, 11)
	if _, err := c.Put(ctx(t), "big", ks, pages); err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(req(ipc.OpGet, 9, getBody("big", ks...))); err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 64<<10)
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(nc, first); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond) // the daemon is stopping while the reply waits
	// Read the rest slowly.
	var rest bytes.Buffer
	buf := make([]byte, 256<<10)
	for {
		n, err := nc.Read(buf)
		rest.Write(buf[:n])
		if err != nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	h, body, err := ipc.ReadFrame(io.MultiReader(bytes.NewReader(first), &rest), 1<<30, nil)
	if err != nil {
		t.Fatalf("reply cut short after %d bytes: %v", len(first)+rest.Len(), err)
	}
	_, got, codes, err := ipc.DecodeGet(body, len(ks))
	if err != nil || h.Status != ipc.OK || h.ID != 9 {
		t.Fatalf("reply: status %v id %d: %v", h.Status, h.ID, err)
	}
	allOK(t, "GET during shutdown", ks, codes)
	if !bytes.Equal(got, pages) {
		t.Fatal("GET during shutdown returned other bytes")
	}
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			t.Fatalf("daemon exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not exit after the reply")
	}
}

// Request memory is handed back after every request: many large requests
// in a row through the socket, each near the user's share, never find the
// budget taken, and nothing stays reserved afterwards.
func TestRequestMemoryReturned(t *testing.T) {
	d := start(t, "--backend", "cpu", "--io-budget", "300M", "--user-io-budget", "150M")
	c := d.client()
	ks := keys(0, 4096) // 16 MiB: body and output take 32 MiB of the 150
	pages := corpus.Pages(corpus.Mixed, len(ks), 4096, 5)
	for i := 0; i < 12; i++ { // 12 x 32 MiB: over twice the share if any leaked
		codes, err := c.Put(ctx(t), "again", ks, pages)
		if err != nil {
			t.Fatalf("PUT %d: %v", i, err)
		}
		allOK(t, "put", ks, codes)
		got, codes, err := c.Get(ctx(t), "again", ks)
		if err != nil || !bytes.Equal(got, pages) {
			t.Fatalf("GET %d: %v", i, err)
		}
		allOK(t, "get", ks, codes)
	}
	st, err := c.Stats(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if st.IO.RequestBytes != 0 || st.IO.Busy != 0 || st.IO.RequestBytesMax == 0 || st.IO.RequestBudget != 300<<20 {
		t.Fatalf("request memory: %d reserved now, %d at most, budget %d, %d busy", st.IO.RequestBytes, st.IO.RequestBytesMax, st.IO.RequestBudget, st.IO.Busy)
	}
}
