package backends

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// State is a backend's standing on this machine.
type State string

const (
	StateOK          State = "ok"
	StateUnavailable State = "unavailable" // library or device missing: skipped
	StateFailed      State = "failed"      // present but broken
)

// Status reports one backend.
type Status struct {
	Name     string
	State    State
	Reason   string // why it is unavailable or failed
	Describe string // what it runs on, when ok
}

// Options are the settings backends read when they are opened.
type Options struct {
	PageSize  int
	Workers   int    // CPU workers; 0 means one per core
	WebGPULib string // path of a webgpu.h implementation; "" searches
	WebGPUCPU bool   // webgpu may use a CPU adapter (lavapipe)
	// webgpu uses workgroup-memory scans even where the adapter offers
	// subgroups (the same bytes; for testing the fallback)
	WebGPUNoSubgroups bool
	NvcompLib         string // path of libnvcomp; "" searches
	GPUMemLimit       int64  // bytes of device memory a GPU backend may hold; 0 = its default
	GPUs              []int  // the GPUs to open (ordinals after CUDA_VISIBLE_DEVICES); nil = all
	// bytes of host memory registered with the GPUs at once (client
	// buffers, the store's slabs, the Vulkan runtime's own buffers),
	// across devices; 0 = a quarter of RAM
	GPUPinLimit int64
	// what runs the WGSL kernels of the webgpu engine: "vulkan",
	// "webgpu" (a webgpu.h library) or "auto"/"" (webgpu.h where one is
	// installed, else vulkan where the GPU imports host memory)
	WGSLRuntime string
	Tuning      Tuning // knobs for comparisons (FromEnv)
}

// Opener opens a backend or says why it cannot. Return an error made by
// Unavailable when a library or device is simply absent.
type Opener func(Options) (Backend, error)

type registration struct {
	name string
	rank int // higher is preferred by "auto"
	open Opener
}

var (
	regMu sync.Mutex
	regs  []registration
)

// Register makes a backend known. Backends register themselves from init.
func Register(name string, rank int, open Opener) {
	regMu.Lock()
	defer regMu.Unlock()
	for _, r := range regs {
		if r.name == name {
			panic("backends: duplicate registration of " + name)
		}
	}
	regs = append(regs, registration{name, rank, open})
	sort.SliceStable(regs, func(i, j int) bool { return regs[i].rank > regs[j].rank })
}

// Names lists registered backends, most preferred first.
func Names() []string {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]string, len(regs))
	for i, r := range regs {
		out[i] = r.name
	}
	return out
}

// UnavailableError marks a backend that is skipped, not broken.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string { return "unavailable: " + e.Reason }

// Unavailable builds an UnavailableError.
func Unavailable(format string, a ...any) error {
	return &UnavailableError{Reason: fmt.Sprintf(format, a...)}
}

// IsUnavailable reports whether err says a backend is absent here.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

// Multi is a backend that stands for several devices of one engine (a
// GPU each). The set lists each device as a backend of its own, named by
// the device (Name), so that routing ranks, balances, falls back and counts
// per device; the Multi itself is what Get returns for the engine's name.
type Multi interface {
	Devices() []Backend
}

// Set holds the backends opened on this machine and their status.
type Set struct {
	mu       sync.Mutex
	opts     Options
	order    []string
	openers  map[string]Opener
	backends map[string]Backend
	status   map[string]*Status
	devices  map[string][]string // a Multi's name: its devices' names
	multi    map[string]Backend  // a Multi, by its name
	// usable is Usable's answer, made again whenever a backend comes or
	// goes (publish): every batch asks, and a swap-in is a batch of one
	// page, for which the lock and a fresh list were a tenth of the cost.
	usable atomic.Pointer[[]Backend]
}

// Open probes every registered backend named in only (all when empty).
// It never fails: each backend ends up ok, unavailable or failed.
func Open(opts Options, only ...string) *Set {
	regMu.Lock()
	rs := append([]registration(nil), regs...)
	regMu.Unlock()
	s := &Set{opts: opts, openers: map[string]Opener{}, backends: map[string]Backend{}, status: map[string]*Status{},
		devices: map[string][]string{}, multi: map[string]Backend{}}
	for _, r := range rs {
		if len(only) > 0 && !slices.Contains(only, r.name) {
			continue
		}
		s.order = append(s.order, r.name)
		s.openers[r.name] = r.open
		s.status[r.name] = &Status{Name: r.name}
		s.open(r.name)
	}
	s.publish()
	return s
}

// open probes one backend and records the outcome; s.mu is held or unneeded.
func (s *Set) open(name string) {
	st := s.status[name]
	b, err := safeOpen(s.openers[name], s.opts)
	switch {
	case err == nil:
		st.State, st.Describe, st.Reason = StateOK, b.Describe(), ""
		if m, ok := b.(Multi); ok && len(m.Devices()) > 1 {
			s.multi[name], s.devices[name] = b, nil
			for _, d := range m.Devices() {
				s.devices[name] = append(s.devices[name], d.Name())
				s.backends[d.Name()] = d
				s.status[d.Name()] = &Status{Name: d.Name(), State: StateOK, Describe: d.Describe()}
			}
			return
		}
		s.backends[name] = b
	case IsUnavailable(err):
		var u *UnavailableError
		errors.As(err, &u)
		st.State, st.Reason = StateUnavailable, u.Reason
	default:
		st.State, st.Reason = StateFailed, err.Error()
	}
}

// Retry probes the failed backends again (a device may come back after a
// reset) and returns the names that are ok again.
func (s *Set) Retry() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var back []string
	for _, n := range s.order {
		// A device of a Multi stays out once failed: its engine is open.
		if s.status[n].State != StateFailed || s.devices[n] != nil {
			continue
		}
		s.open(n)
		if s.status[n].State == StateOK {
			back = append(back, n)
		}
	}
	s.publish()
	return back
}

// safeOpen turns a panicking probe into a failed status: a broken driver
// must not take the daemon down.
func safeOpen(open Opener, opts Options) (b Backend, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("panic while opening: %v", r)
		}
	}()
	return open(opts)
}

// Get returns the named backend if it is ok.
func (s *Set) Get(name string) (Backend, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.multi[name]; ok {
		return m, true
	}
	b, ok := s.backends[name]
	return b, ok
}

// names is s.order with each Multi replaced by its devices; s.mu is held.
func (s *Set) names() []string {
	if len(s.devices) == 0 {
		return s.order
	}
	var out []string
	for _, n := range s.order {
		if d, ok := s.devices[n]; ok {
			out = append(out, d...)
		} else {
			out = append(out, n)
		}
	}
	return out
}

// Usable lists the ok backends, most preferred first. The list is shared:
// callers must not change it.
func (s *Set) Usable() []Backend {
	if p := s.usable.Load(); p != nil {
		return *p
	}
	return nil
}

// publish makes Usable's list again; s.mu is held or unneeded.
func (s *Set) publish() {
	var out []Backend
	for _, n := range s.names() {
		if b, ok := s.backends[n]; ok {
			out = append(out, b)
		}
	}
	s.usable.Store(&out)
}

// MarkFailed takes a backend out of service after a runtime fault.
func (s *Set) MarkFailed(name string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.backends[name]
	if !ok {
		return
	}
	delete(s.backends, name)
	s.publish()
	s.status[name].State = StateFailed
	s.status[name].Reason = err.Error()
	go b.Close() // a wedged driver must not block the caller
}

// Statuses reports every probed backend, most preferred first.
func (s *Set) Statuses() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.order))
	for _, n := range s.names() {
		st := *s.status[n]
		// Described afresh: an engine's description may carry counts
		// (the Vulkan runtime's imports).
		if b, ok := s.backends[n]; ok {
			st.Describe = b.Describe()
		}
		out = append(out, st)
	}
	return out
}

// Close closes every open backend.
func (s *Set) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, b := range s.backends {
		b.Close()
		delete(s.backends, n)
	}
	for n, m := range s.multi {
		m.Close()
		delete(s.multi, n)
	}
	s.publish()
}

// LastResort reports whether name is the least preferred backend of the
// set: the one every chain ends with (the CPU), never taken out of
// service, since its errors belong to the request and not to a device.
func (s *Set) LastResort(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.order) > 0 && s.order[len(s.order)-1] == name
}
