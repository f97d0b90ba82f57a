package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/clientmem"
	"github.com/s4d-project/s4d/cold"
	"github.com/s4d-project/s4d/internal/topo"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/latency"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/region"
	"github.com/s4d-project/s4d/remote"
	"github.com/s4d-project/s4d/reqmem"
	"github.com/s4d-project/s4d/routing"
	"github.com/s4d-project/s4d/settings"
	"github.com/s4d-project/s4d/swapdev"
)

// Version is reported in HELLO and STATS.
const Version = "s4d 0.1.0"

// Config is the daemon's settings.
type Config = settings.Config

// Daemon serves the page store on a Unix socket.
type Daemon struct {
	cfg    Config
	log    *slog.Logger
	store  *pagecache.Store
	set    *backends.Set
	router *routing.Router
	codec  pagefmt.Codec
	start  time.Time
	bufs   *reqmem.Pool
	mem    *reqmem.Budget   // memory for requests and replies in flight
	maps   *clientmem.Share // client memfds mapped now, shared by connections
	wake   int              // eventfd that interrupts every connection's waits (shutdown)
	quit   chan struct{}    // closed when the daemon starts stopping
	// ctx is every request's context: it ends when shutdown stops waiting
	// for the requests it had received, cancelling their batches.
	ctx    context.Context
	cancel context.CancelFunc

	ln       net.Listener
	closing  atomic.Bool
	conns    sync.WaitGroup
	active   atomic.Int64
	mu       sync.Mutex
	live     map[*conn]struct{}
	perUser  map[uint32]int // live connections by user
	refused  atomic.Uint64  // connections refused at a limit
	answers  errorCounts    // requests answered with an error, by code (errors.go)
	failedRd atomic.Uint64
	failedWr atomic.Uint64
	noSpace  atomic.Uint64
	corrupt  atomic.Uint64
	cold     *cold.Tier   // idle clock, recompression, the backing file
	remote   *remote.Tier // the Valkey cluster, if any (remote.go); pool export/import (export.go)
	regs     region.Registry
	swaps    *swapdev.Set     // ublk swap devices (package swapdev; swap.go)
	lat      latency.Recorder // request latency by operation (metrics.go)
}

// New opens the backends and the store, and times the engines when there
// is a choice between them; ctx ends that early (a stop asked for while
// starting). It does not listen yet. On error, whatever it had opened is
// closed again, in reverse order, in one place.
func New(ctx context.Context, cfg Config) (_ *Daemon, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	codec, err := pagefmt.ParseCodec(cfg.Codec)
	if err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Backend != "auto" && !slices.Contains(backends.Names(), cfg.Backend) {
		return nil, fmt.Errorf("backend %q: not built in (have auto, %v)", cfg.Backend, backends.Names())
	}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	set := backends.Open(backends.FromEnv(backends.Options{PageSize: cfg.PageSize, Workers: cfg.Workers,
		WebGPULib: cfg.WebGPULib, WebGPUCPU: cfg.WebGPUCPU, WebGPUNoSubgroups: cfg.WebGPUNoSG, NvcompLib: cfg.NvcompLib, GPUMemLimit: cfg.GPUMemLimit,
		GPUs: cfg.GPUs, GPUPinLimit: cfg.GPUPinLimit, WGSLRuntime: cfg.WGSLRuntime}))
	undo = append(undo, func() { set.Close() })
	for _, st := range set.Statuses() {
		cfg.Log.Info("backend", "name", st.Name, "state", st.State, "reason", st.Reason, "describe", st.Describe)
	}
	if cfg.Backend != "auto" {
		if _, ok := set.Get(cfg.Backend); !ok {
			st := statusOf(set, cfg.Backend)
			return nil, fmt.Errorf("backend %s is %s: %s", cfg.Backend, st.State, st.Reason)
		}
	}
	total, perUser := cfg.IOBudgets()
	d := &Daemon{cfg: cfg, log: cfg.Log, set: set, codec: codec, start: time.Now(),
		store: pagecache.New(cfg.PageSize, cfg.MemLimit), live: map[*conn]struct{}{}, perUser: map[uint32]int{},
		bufs: reqmem.NewPool(total / 2), mem: reqmem.NewBudget(total, perUser), quit: make(chan struct{})}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.swaps = d.newSwaps() // swap.go
	undo = append(undo, d.cancel)
	d.maps = clientmem.NewShare(d.pinners, d.log)
	if d.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	undo = append(undo, func() { unix.Close(d.wake) })
	d.store.SetLimits(pagecache.Limits{PoolsPerUser: cfg.PoolsPerUser, BytesPerUser: cfg.UserQuota})
	// A GPU engine writes compressed pages straight into the store's slabs
	// (and the Vulkan runtime reads raw ones from them for a GET).
	if p := d.storePinner(); p != nil {
		d.store.SetPinner(p)
	}
	d.router = routing.New(set, routing.Options{Prefer: cfg.Backend, Codec: codec, PageSize: cfg.PageSize, Log: cfg.Log})
	undo = append(undo, d.router.Close)
	if d.remote, err = openRemote(ctx, &d.cfg); err != nil { // remote.go
		return nil, err
	}
	if d.remote != nil {
		undo = append(undo, d.remote.Close)
	}
	if d.cold, err = cold.Open(&d.cfg, d.store, d.router, d.router.Busy, d.log, d.coldOptions()...); err != nil {
		return nil, err
	}
	undo = append(undo, func() { d.cold.Stop(); d.cold.Close() })
	if usable := set.Usable(); len(usable) > 1 {
		// Only a choice needs measuring: with one backend there is none.
		cal, err := routing.Calibrate(ctx, usable, cfg.PageSize, codec, routing.CalibrationSizes)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("stopped while timing the engines: %w", ctx.Err())
		}
		if err != nil {
			cfg.Log.Warn("calibration failed; using backends in preference order", "err", err)
		} else {
			d.router.SetCalibration(cal, cfg.CoalesceWait)
			cfg.Log.Info("calibrated", "rates", cal.String(), "merge_below_pages", cal.CoalesceBelow())
		}
	}
	return d, nil
}

func statusOf(set *backends.Set, name string) backends.Status {
	for _, st := range set.Statuses() {
		if st.Name == name {
			return st
		}
	}
	return backends.Status{Name: name, State: backends.StateUnavailable, Reason: "not probed"}
}

// Store exposes the page store (for tests and the bench).
func (d *Daemon) Store() *pagecache.Store { return d.store }

// Router exposes the router.
func (d *Daemon) Router() *routing.Router { return d.router }

// Listen opens the configured socket: the parent directory is created, a
// stale socket file is replaced, and a live daemon there is an error.
func (d *Daemon) Listen() error {
	path := d.cfg.Socket
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("another daemon is already serving on %s", path)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("removing stale socket %s: %w", path, err)
		}
		d.log.Info("replaced stale socket", "path", path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	if err := os.Chmod(path, os.FileMode(d.cfg.SocketMode)); err != nil {
		ln.Close()
		return err
	}
	return d.UseListener(ln)
}

// UseListener serves on an already open listener (socket activation).
func (d *Daemon) UseListener(ln net.Listener) error {
	if _, ok := ln.(*net.UnixListener); !ok {
		return fmt.Errorf("listener is %T, want a Unix socket", ln)
	}
	d.ln = ln
	return nil
}

// Serve accepts connections until ctx ends, then stops accepting, finishes
// the requests already received, and returns.
func (d *Daemon) Serve(ctx context.Context) error {
	if d.ln == nil {
		return errors.New("Serve before Listen")
	}
	d.log.Info("serving", "socket", d.ln.Addr().String(), "backend", d.router.InUse(),
		"codec", d.cfg.Codec, "page_size", d.cfg.PageSize, "mem_limit", d.cfg.MemLimit)
	// Every goroutine started here is joined before Serve returns.
	stopping := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(stopping)
		d.closing.Store(true)
		close(d.quit)
		d.ln.Close()
	})
	defer stop()
	var sweeper sync.WaitGroup
	sweeper.Go(func() { d.sweepEvery(2*time.Second, d.quit) })
	d.cold.Start()
	d.startRemoteSweep() // remote.go
	// The swap devices the last run left and the configuration's [[swap]] ones (swap.go).
	d.swaps.Start(d.cold.Seq())
	var err error
	var wait backoff
	for {
		var nc net.Conn
		nc, err = d.ln.Accept()
		if err != nil {
			if d.closing.Load() {
				err = nil
				break
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// EMFILE and friends: back off rather than spin, waking at once
			// when the daemon stops.
			w := wait.next()
			d.log.Warn("accept", "err", err, "retry_in", w)
			select {
			case <-time.After(w):
			case <-d.quit:
			}
			continue
		}
		wait.reset()
		d.accept(nc.(*net.UnixConn))
	}
	<-stopping // the loop ends only once the AfterFunc has run
	sweeper.Wait()
	d.shutdown()
	return err
}

// shutdown stops reading from every connection and waits for the requests
// already read to be answered. A reply being written is finished: its
// client has the write deadline (the frame timeout) to read it.
func (d *Daemon) shutdown() {
	kept := d.swaps.Stop() // while the store still serves their swapoff (swap.go)
	d.regs.ReleaseAll(d.log)
	d.cold.Stop() // a recompression stops before the backends close
	d.mu.Lock()
	for c := range d.live {
		c.sock.Interrupt()
	}
	d.mu.Unlock()
	done := make(chan struct{})
	go func() { d.conns.Wait(); close(done) }()
	grace := d.cfg.FrameTimeout + 5*time.Second
	joined := true
	select {
	case <-done:
	case <-time.After(grace):
		d.log.Warn("requests still running; cancelling them", "after", grace)
		d.cancel()
		// Cancelled batches end at once and a reply's write within the
		// frame timeout: wait once more, then go on without them.
		select {
		case <-done:
		case <-time.After(grace):
			joined = false
			d.log.Error("connections still running after their requests were cancelled; stopping without them")
		}
	}
	d.cancel()
	if joined {
		unix.Close(d.wake) // a connection still running may wait on it
	}
	d.router.Close()             // merged batches finish before the backends close
	persistErr := d.cold.Close() // with persist, every page goes to the backing file
	if kept {
		// Only now may the next start serve every page it finds.
		d.swaps.Persisted(persistErr, d.cold.Seq())
	}
	if d.remote != nil {
		d.remote.Close()
	}
	d.set.Close()
	d.log.Info("stopped")
}

// conn is one client connection. Its requests are read and answered in
// order by one goroutine: a client may pipeline, and the requests it sent
// ahead wait in the socket buffer. Parallelism comes from connections and
// from the backends, which spread each batch over all cores.
type conn struct {
	d       *Daemon
	pages   pageStore  // the daemon's store, as requests use it (ports.go)
	engines compressor // the daemon's router, likewise
	sock    *ipc.Socket
	uid     uint32
	pid     int32
	ctx     context.Context // its requests' context (reqCtx), once looked up

	// Reading (connio.go).
	rd   *ipc.FrameReader
	body []byte // a body too large for rd's buffer, from d.bufs
	spin spinner

	// Writing.
	out    []byte // the connection's response buffer
	bigOut []byte // a larger one from d.bufs, given back once sent

	req request // the request being served

	maps clientmem.Cache // the client's memfds mapped now
	s    scratch         // buffers requests reuse (handlers.go)
}

// request is the request being served: what arrived, the context its
// batches run under (ended when shutdown stops waiting for them), and the
// request memory it holds.
type request struct {
	ctx  context.Context
	h    ipc.Header
	body []byte
	fds  []int // passed with the frame (PUT_FD); closed once answered
	held int64 // bytes of d.mem
}

func (c *conn) loop() {
	defer func() {
		c.sock.Close()
		c.maps.Close()
		c.rd.Close()
		c.done()
		c.d.mu.Lock()
		delete(c.d.live, c)
		c.d.mu.Unlock()
		c.d.leave(c.uid)
		c.d.conns.Done()
	}()
	// Once the daemon is stopping, requests received whole are still answered.
	for !c.d.closing.Load() || c.rd.Buffered() {
		h, body, fds, err := c.rd.Read()
		if err != nil {
			ipc.CloseAll(fds)
			c.readFailed(h, err)
			return
		}
		t0 := time.Now()
		// What Read reserved for the body stays with the request.
		c.req.ctx, c.req.h, c.req.body, c.req.fds = c.reqCtx(), h, body, fds
		ok := c.serve()
		c.spin.served = time.Since(t0)
		c.d.lat.Observe(h.Op, c.spin.served)
		ipc.CloseAll(fds)
		c.done()
		if !ok {
			return // a broken stream: the rest of it cannot be trusted
		}
	}
}

// reqCtx is the context the connection's requests run under: the
// daemon's, carrying the client's NUMA node where the GPUs sit on several
// nodes (looked up once: /proc/PID/numa_maps, else its CPUs), so that a
// batch whose memory tells no node goes to the GPU nearest the client.
func (c *conn) reqCtx() context.Context {
	if c.ctx == nil {
		c.ctx = c.d.ctx
		if c.pid > 0 && c.d.router.Spread() {
			c.ctx = routing.WithClientNode(c.d.ctx, topo.Host.ProcNode(int(c.pid)))
		}
	}
	return c.ctx
}

// done hands back what the request held: nothing holds on to a request
// once it is answered.
func (c *conn) done() {
	if c.body != nil {
		c.d.bufs.Put(c.body)
		c.body = nil
	}
	c.d.mem.Release(c.uid, c.req.held)
	c.req = request{}
}

// reserve takes n more bytes of the request budget for this request,
// waiting for them until deadline.
func (c *conn) reserve(n int64, deadline time.Time) error {
	if err := c.d.mem.Reserve(c.uid, n, deadline, c.d.quit); err != nil {
		return err
	}
	c.req.held += n
	return nil
}

// unreserve gives back n of the bytes reserve took.
func (c *conn) unreserve(n int64) {
	n = min(n, c.req.held)
	c.d.mem.Release(c.uid, n)
	c.req.held -= n
}

// readFailed answers what can be answered about a bad frame; the
// connection then closes, because the stream can no longer be trusted.
func (c *conn) readFailed(h ipc.Header, err error) {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, ipc.ErrInterrupted):
	case errors.As(err, &ne) && ne.Timeout():
		if !c.d.closing.Load() {
			c.d.log.Debug("closing idle or slow connection", "uid", c.uid, "pid", c.pid)
		}
	case errors.Is(err, ipc.ErrFrameTooLarge):
		c.writeError(h, ipc.CodeTooLarge, fmt.Sprintf("frame over the limit of %d bytes", c.d.cfg.MaxFrame))
	case errors.Is(err, ipc.ErrShortFrame), errors.Is(err, ipc.ErrTooManyFDs):
		c.writeError(h, ipc.CodeMalformed, err.Error())
	case errors.As(err, new(*reqmem.BudgetError)):
		c.finish(h, nil, budgetErr(err))
	default:
		c.d.log.Debug("read", "uid", c.uid, "err", err)
	}
}

// serve answers the request in c.req; false means the connection must close.
func (c *conn) serve() bool {
	r := &c.req
	h := r.h
	if h.Version != ipc.Version {
		c.finish(h, nil, errorf(ipc.CodeVersion, "protocol version %d not supported (want %d)", h.Version, ipc.Version))
		return false
	}
	if h.Flags != 0 || h.Status != 0 {
		c.finish(h, nil, errorf(ipc.CodeMalformed, "request header has flags or status set"))
		return false
	}
	var resp []byte
	var err error
	switch {
	case h.Op == ipc.OpGet && len(r.fds) == 0:
		return c.get(h, r.body)
	case h.Op == ipc.OpPutFD && len(r.fds) == 1:
		resp, err = c.putFD(r.body, r.fds[0])
	case h.Op == ipc.OpGetFD && len(r.fds) == 1:
		resp, err = c.getFD(r.body, r.fds[0])
	case h.Op == ipc.OpPutFD || h.Op == ipc.OpGetFD:
		err = errorf(ipc.CodeMalformed, "%v needs exactly one descriptor with the frame, got %d", h.Op, len(r.fds))
	case ipc.IsRegionOp(h.Op): // region.go
		resp, err = c.region(h.Op, r.body, r.fds)
	case len(r.fds) > 0:
		err = errorf(ipc.CodeMalformed, "%v takes no descriptors", h.Op)
	default:
		resp, err = c.handle(h.Op, r.body)
	}
	return c.finish(h, resp, err)
}

// finish sends a handler's response, or its error: the one place where an
// error becomes a status on the wire (an *ipc.Error its own code, any
// other INTERNAL). False means the connection must close.
func (c *conn) finish(h ipc.Header, resp []byte, err error) bool {
	if err != nil {
		var e *ipc.Error
		if !errors.As(err, &e) {
			e = &ipc.Error{Code: ipc.CodeInternal, Msg: err.Error()}
		}
		c.writeError(h, e.Code, e.Msg)
		return true
	}
	return c.respond(ipc.Header{Version: ipc.Version, Op: h.Op, Flags: ipc.FlagResponse, ID: h.ID}, resp) == nil
}

// writeError answers with an error status; every error answer passes here
// and is counted under its code.
func (c *conn) writeError(h ipc.Header, code ipc.Code, msg string) {
	c.d.answers.add(code)
	b := c.startResponse(2 + len(msg))
	b = append(binary.LittleEndian.AppendUint16(b, uint16(len(msg))), msg...)
	c.respond(ipc.Header{Version: ipc.Version, Op: h.Op, Status: code, Flags: ipc.FlagResponse, ID: h.ID}, b)
}

// startResponse returns an empty response with room for bodyLen bytes
// after the frame's length word and header, which respond fills in, so
// that the whole frame goes out in one write.
func (c *conn) startResponse(bodyLen int) []byte {
	need := frameHead + bodyLen
	if need <= outKeep {
		if cap(c.out) < need {
			c.out = make([]byte, 0, max(need, 512))
		}
		return c.out[:frameHead]
	}
	c.bigOut = c.d.bufs.Get(need)
	return c.bigOut[:frameHead]
}

// respond fills in the frame header of resp (from startResponse) and sends it.
func (c *conn) respond(h ipc.Header, resp []byte) error {
	ipc.AppendHeader(resp[:0], h, len(resp)-frameHead)
	err := c.send(resp)
	if c.bigOut != nil {
		c.d.bufs.Put(c.bigOut)
		c.bigOut = nil
	}
	return err
}

// storePinner is the engine the store's slabs are registered with: the
// one --backend names when it can, else the first that can (cuda's comes
// first where it is present).
func (d *Daemon) storePinner() backends.Pinner {
	var first backends.Pinner
	for _, b := range d.set.Usable() {
		p, ok := b.(backends.Pinner)
		if !ok {
			continue
		}
		if b.Name() == d.cfg.Backend {
			return p
		}
		if first == nil {
			first = p
		}
	}
	return first
}

// pinners lists the usable backends that can register host memory.
func (d *Daemon) pinners() []backends.Pinner {
	var out []backends.Pinner
	for _, b := range d.set.Usable() {
		if p, ok := b.(backends.Pinner); ok {
			out = append(out, p)
		}
	}
	return out
}
