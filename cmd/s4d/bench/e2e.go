package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

// userHZ is the unit of utime and stime in /proc/PID/stat. The kernel
// reports them in USER_HZ, which is 100 on every Linux architecture Go
// supports, whatever the kernel's own tick rate.
const userHZ = 100

// daemonPID asks the kernel which process listens on socket: SO_PEERCRED
// on a connected Unix socket names the peer from either end, so a client
// can find the daemon whose CPU time it is about to read.
func daemonPID(socket string) (int, error) {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return 0, &client.DialError{Socket: socket, Err: err}
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return int(cred.Pid), nil
}

// pidCPU returns the CPU time process pid has used, in seconds: the sum
// of its threads' run times from /proc/PID/task/*/schedstat, counted in
// nanoseconds. /proc/PID/stat counts 10 ms ticks, a tenth of what the
// daemon spends on a GiB at GPU speed; it is the fallback where schedstat
// is missing. Threads that ended drop out of the sum; the daemon's threads
// live as long as it does.
func pidCPU(pid int) (float64, error) {
	if t, err := schedCPU(pid); err == nil {
		return t, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

func schedCPU(pid int) (float64, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var ns uint64
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, task.Name()))
		if os.IsNotExist(err) {
			continue // the thread ended meanwhile
		}
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, fmt.Errorf("schedstat of task %s: %q", task.Name(), b)
		}
		run, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("schedstat of task %s: %w", task.Name(), err)
		}
		ns += run
	}
	return float64(ns) / 1e9, nil
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line. The command name (field 2) is in parentheses and may
// itself hold spaces and parentheses, so fields are counted after the last ')'.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	f := strings.Fields(stat[i+1:])
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc stat line too short: %q", stat)
	}
	// f[0] is field 3 (state), so field 14 is f[11].
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc stat: bad utime/stime %q %q", f[11], f[12])
	}
	return float64(ut+st) / userHZ, nil
}

// daemonTarget is a running daemon and the connections that load it.
type daemonTarget struct {
	socket  string
	pid     int
	hello   *ipc.Hello
	clients []*client.Client // one connection each: the daemon serves connections in parallel
	pool    string
	memfd   bool // hand pages over in shared memory (PUT_FD/GET_FD), not through the socket
	// The shared buffers pages go out from and come back into with memfd,
	// made once and reused by every run, as a client keeps its buffer.
	in, out *client.PageBuffer
}

func openDaemon(ctx context.Context, socket string, clients int, poll time.Duration) (*daemonTarget, error) {
	pid, err := daemonPID(socket)
	if err != nil {
		return nil, err
	}
	t := &daemonTarget{socket: socket, pid: pid, pool: fmt.Sprintf("bench-%d", os.Getpid())}
	for range clients {
		c := &client.Client{Socket: socket, Name: "s4d-bench", PollWait: poll}
		h, err := c.Hello(ctx) // dials now, so no request below pays for it
		if err != nil {
			t.close()
			return nil, err
		}
		t.hello = h
		t.clients = append(t.clients, c)
	}
	return t, nil
}

func (t *daemonTarget) close() {
	for _, c := range t.clients {
		c.Close()
	}
	for _, b := range []*client.PageBuffer{t.in, t.out} {
		if b != nil {
			b.Close()
		}
	}
}

// buffers returns the shared buffers for a corpus of n bytes, with the
// pages copied into the first and the second cleared, so that a GET that
// writes nothing cannot pass for one that worked. Either way every page
// of them is in memory before the clock starts.
func (t *daemonTarget) buffers(pages []byte) (in, out *client.PageBuffer, err error) {
	if t.in == nil || len(t.in.Bytes()) != len(pages) {
		for _, b := range []*client.PageBuffer{t.in, t.out} {
			if b != nil {
				b.Close()
			}
		}
		t.in, t.out = nil, nil
		if t.in, err = client.NewPageBuffer(len(pages)); err != nil {
			return nil, nil, err
		}
		if t.out, err = client.NewPageBuffer(len(pages)); err != nil {
			return nil, nil, err
		}
	}
	copy(t.in.Bytes(), pages)
	clear(t.out.Bytes())
	return t.in, t.out, nil
}

// maxBatch is the most pages one PUT may carry: the daemon's batch limit,
// or fewer if its frame limit is the tighter one.
func (t *daemonTarget) maxBatch() int {
	fit := (int(t.hello.MaxFrame) - ipc.HeaderSize - ipc.PutBodySize(t.pool, 0, 0)) / (8 + int(t.hello.PageSize))
	return max(1, min(int(t.hello.MaxBatchPages), fit))
}

// poolBytes returns the pool's original and stored bytes from STATS. The
// pool is ours alone, so other clients of the same daemon do not disturb
// the ratio the way store-wide totals would.
func (t *daemonTarget) poolBytes(ctx context.Context) (orig, stored uint64, err error) {
	s, err := t.clients[0].Stats(ctx, t.pool)
	if ipc.CodeOf(err) == ipc.CodeNotFound {
		return 0, 0, nil // not created yet, or emptied and removed
	}
	if err != nil {
		return 0, 0, err
	}
	for _, p := range s.Pools {
		if p.Name == t.pool {
			return p.OrigBytes, p.StoredBytes, nil
		}
	}
	return 0, 0, nil
}

// cpuNow reads the daemon's and this process's CPU time together.
func (t *daemonTarget) cpuNow() (daemon, self float64, err error) {
	daemon, err = pidCPU(t.pid)
	return daemon, processCPU(), err
}

// run PUTs every page in batches of `batch` pages over all connections,
// GETs them back and compares them, then deletes them. Times cover the
// round trips only; the daemon's CPU is read from /proc around each phase.
func (t *daemonTarget) run(ctx context.Context, pages []byte, batch int, prog *progress) (Result, error) {
	ps := int(t.hello.PageSize)
	n := len(pages) / ps
	nb := (n + batch - 1) / batch
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(i)
	}
	span := func(i int) (lo, hi int) { return i * batch, min((i+1)*batch, n) }
	// One goroutine per connection, each sending its next request when the
	// last one is answered, as that many independent clients would.
	conns := len(t.clients)
	mode := "e2e"
	var in, out *client.PageBuffer
	if t.memfd {
		mode = "e2e-memfd"
		var err error
		if in, out, err = t.buffers(pages); err != nil {
			return Result{}, err
		}
	}
	res := Result{Mode: mode, Backend: "daemon", Codec: t.hello.Codec, Batch: batch, Clients: conns,
		Pages: n, OrigBytes: int64(n) * int64(ps)}
	defer t.deleteAll(context.WithoutCancel(ctx), keys)

	orig0, stored0, err := t.poolBytes(ctx)
	if err != nil {
		return res, err
	}
	label := fmt.Sprintf("e2e %s batch %d", t.hello.Codec, batch)
	prog.phase(label+" PUT", int64(n))
	runtime.GC()
	d0, s0, err := t.cpuNow()
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	putLat, err := fanOutConns(nb, conns, func(c *client.Client, i int) error {
		lo, hi := span(i)
		var codes []ipc.Code
		var err error
		if in != nil {
			codes, err = c.PutBuffer(ctx, t.pool, keys[lo:hi], in, lo*ps, ps)
		} else {
			codes, err = c.Put(ctx, t.pool, keys[lo:hi], pages[lo*ps:hi*ps])
		}
		if err == nil {
			err = ipc.PageError(keys[lo:hi], codes)
		}
		prog.add(int64(hi - lo))
		return err
	}, t.clients)
	res.PutSeconds = time.Since(t0).Seconds()
	d1, _, cerr := t.cpuNow()
	if err != nil {
		return res, fmt.Errorf("put: %w", err)
	}
	if cerr != nil {
		return res, cerr
	}
	orig1, stored1, err := t.poolBytes(ctx)
	if err != nil {
		return res, err
	}
	if orig1-orig0 != uint64(res.OrigBytes) {
		return res, fmt.Errorf("pool %s grew by %d bytes, not the %d put", t.pool, orig1-orig0, res.OrigBytes)
	}
	res.StoredBytes = int64(stored1 - stored0)

	// Pages come back into memory allocated and touched beforehand, as the
	// in-process reference decodes into: a client reading into its own
	// pages pays for the transfer, not for fresh memory.
	var back []byte
	if out == nil {
		back = make([]byte, len(pages))
		touch(back)
	}
	prog.phase(label+" GET", int64(n))
	runtime.GC()
	t0 = time.Now()
	getLat, err := fanOutConns(nb, conns, func(c *client.Client, i int) error {
		lo, hi := span(i)
		var codes []ipc.Code
		var err error
		if out != nil {
			codes, err = c.GetBuffer(ctx, t.pool, keys[lo:hi], out, lo*ps, ps)
		} else {
			codes, err = c.GetInto(ctx, t.pool, keys[lo:hi], back[lo*ps:hi*ps])
		}
		if err == nil {
			err = ipc.PageError(keys[lo:hi], codes)
		}
		prog.add(int64(hi - lo))
		return err
	}, t.clients)
	res.GetSeconds = time.Since(t0).Seconds()
	d2, s2, cerr := t.cpuNow()
	if err != nil {
		return res, fmt.Errorf("get: %w", err)
	}
	if cerr != nil {
		return res, cerr
	}
	if out != nil {
		back = out.Bytes()
	}
	for i := range nb {
		lo, hi := span(i)
		if !bytes.Equal(back[lo*ps:hi*ps], pages[lo*ps:hi*ps]) {
			return res, fmt.Errorf("get: pages %d-%d came back different from what was put", lo, hi-1)
		}
	}
	res.PutLatency, res.GetLatency = summarise(putLat), summarise(getLat)
	res.finish(d1-d0, d2-d1)
	res.ClientCPUPerGB = div(s2-s0, 2*float64(res.OrigBytes)/1e9)
	return res, nil
}

// fanOutConns is fanOut with one connection per goroutine.
func fanOutConns(n, conns int, do func(c *client.Client, i int) error, clients []*client.Client) ([]time.Duration, error) {
	ch := make(chan *client.Client, conns)
	for _, c := range clients {
		ch <- c
	}
	return fanOut(n, conns, func(i int) error {
		// Each goroutine holds a connection for one request at a time;
		// with as many goroutines as connections none ever waits here.
		c := <-ch
		defer func() { ch <- c }()
		return do(c, i)
	})
}

// deleteAll removes the pages again so the daemon is left as it was.
func (t *daemonTarget) deleteAll(ctx context.Context, keys []uint64) {
	per := t.maxBatch()
	for lo := 0; lo < len(keys); lo += per {
		t.clients[0].Del(ctx, t.pool, keys[lo:min(lo+per, len(keys))])
	}
}
