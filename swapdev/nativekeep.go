package swapdev

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/internal/par"
	"github.com/s4d-project/s4d/swapio"
	"github.com/s4d-project/s4d/ublk"
)

// Devices across restarts (keep.go says what each kind of stop
// leaves). Their store lives in the daemon's process and dies with
// it, so:
//   - a stop with persist hands its pages to the daemon's own store, in
//     the device's pool, before the queues stop (export);
//     they reach the backing file with the rest, and the next start puts
//     them back into a new native store before its queues serve
//     (takeOverNative, trusted);
//   - after a crash every block the next start has not seen written reads
//     as an I/O error (MarkLost), unless the device is no longer swap:
//     then nothing on it is in use and it is fresh.
//
// Blocks lost with an earlier crash and never written since stay lost
// across a persisted stop: they are kept in the pool as zero pages at
// block+blocks (lostKey), which no write of the device can reach.

// holdResident, at a stop that leaves native devices, before their
// queues stop: the daemon's memory is brought back from swap and kept
// (the Go runtime's is not locked while it serves, so some of it may be out
// on the very devices; a fault on it once the queues have stopped would
// wait for the next daemon, which waits for this one to exit). Untouched
// anonymous memory maps the shared zero page: nothing is allocated for it.
func (s *Set) holdResident() {
	if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE | unix.MCL_ONFAULT); err != nil {
		s.log.Warn("memory not locked for the stop: a page of the daemon out on a device left may hold it", "err", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		s.log.Warn("memory not brought back for the stop", "err", err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		var lo, hi uintptr
		if len(fs) < 2 || fs[1][0] != 'r' {
			continue
		}
		if _, err := fmt.Sscanf(fs[0], "%x-%x", &lo, &hi); err != nil || hi <= lo {
			continue
		}
		unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_POPULATE_READ) // [vvar] and the like fail: nothing to do
	}
}

// lostKey is the pool key that records block b of a device of n blocks
// as lost.
func lostKey(b, n uint64) uint64 { return n + b }

// export, at a stop with persist, before the device's queues stop:
// writes are fenced off and its pages go into the pool poolName(sd.n),
// from which the persist writes them to the backing file. Reads are
// served meanwhile: a process faulting a page in does not wait.
func (s *Set) export(sd *device) error {
	name := fmt.Sprintf("/dev/ublkb%d", sd.rec.ID)
	sd.nat.Fence()
	pool := poolName(sd.n)
	s.store.Drop(pool, 2*sd.rec.Size/4096) // an older run's pages, if any
	n := sd.rec.Size / 4096
	var pages, lost atomic.Uint64
	t0 := time.Now()
	err := inRanges(n, func(lo, hi uint64) error {
		st := s.store.Pages(pool)
		zeros := make([]byte, swapio.ExportBatch*4096)
		return sd.nat.Export(lo, hi, func(keys []uint64, data []byte, lostBlocks []uint64) error {
			if len(keys) > 0 {
				if err := st.Put(keys, data); err != nil {
					return err
				}
			}
			if len(lostBlocks) > 0 {
				lk := make([]uint64, len(lostBlocks))
				for i, b := range lostBlocks {
					lk[i] = lostKey(b, n)
				}
				if err := st.Put(lk, zeros[:len(lk)*4096]); err != nil {
					return err
				}
			}
			pages.Add(uint64(len(keys)))
			lost.Add(uint64(len(lostBlocks)))
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("%s: pages not handed to the store for persist: %w", name, err)
	}
	s.log.Info("swap device's pages kept for the next start", "device", name, "pages", pages.Load(),
		"lost_blocks", lost.Load(), "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// inRanges runs fn on a range of blocks 0..n per CPU, at once (par.For),
// and returns the first error: the native store takes writes and reads
// from several threads, as its queues do, and a restart waits for these
// copies.
func inRanges(n uint64, fn func(lo, hi uint64) error) error {
	var mu sync.Mutex
	var first error
	step := (n + uint64(runtime.GOMAXPROCS(0)) - 1) / uint64(runtime.GOMAXPROCS(0))
	par.For(int(n), int(max(step, 1)), 0, func(lo, hi int) {
		if err := fn(uint64(lo), uint64(hi)); err != nil {
			mu.Lock()
			first = cmp.Or(first, err)
			mu.Unlock()
		}
	})
	return first
}

// takeOverNative serves native device r again, from a new store: with
// every page the pool holds when trusted (a stop with persist left them
// there), else with every block lost but on a device no longer swap.
func (s *Set) takeOverNative(r record, trusted bool) (*device, error) {
	if err := swapio.Available(); err != nil {
		return nil, err
	}
	s.guard()
	nat, err := swapio.NewStore(r.Size, swapio.Options{Reserve: r.Reserve, MemLimit: r.MemLimit, Writeback: r.Writeback})
	if err != nil {
		return nil, fmt.Errorf("native swap store: %w", err)
	}
	pool := poolName(r.N)
	path := fmt.Sprintf("/dev/ublkb%d", r.ID)
	fresh := !trusted && !ublk.ActiveSwaps()[path]
	var held uint64
	t0 := time.Now()
	switch {
	case trusted:
		if held, err = importNative(nat, s.store.Pages(pool), r.Size/4096); err != nil {
			nat.Close()
			return nil, err
		}
	case !fresh:
		nat.MarkLost()
	}
	t1 := time.Now()
	opts := ublk.Options{Size: r.Size, Queues: r.Queues, Depth: r.Depth, MaxIO: nativeMaxIO, Recovery: true, Log: s.log, Server: nat}
	dev, err := ublk.Recover(r.ID, opts)
	if err != nil {
		nat.Close()
		return nil, err
	}
	s.store.Drop(pool, 2*r.Size/4096) // the pages now live in the native store
	s.log.Info("swap device taken over", "device", dev.BlockPath(), "pages", held,
		"every_page_served", trusted, "fresh", fresh, "import", t1.Sub(t0).Round(time.Millisecond), "recover", time.Since(t1).Round(time.Millisecond))
	return &device{n: r.N, dev: dev, nat: nat, prio: r.Prio, rec: r, fresh: fresh}, nil
}

// importNative puts the pool's pages of a device of n blocks into nat,
// and the blocks recorded lost back as lost; it returns the pages put.
func importNative(nat *swapio.Store, pool Pages, n uint64) (uint64, error) {
	var held atomic.Uint64
	err := inRanges(2*n, func(lo, hi uint64) error {
		const batch = 1024
		keys := make([]uint64, batch)
		buf := make([]byte, batch*4096)
		scratch := make([]byte, 4096)
		missing, failed := make([]bool, batch), make([]bool, batch)
		for k := lo; k < hi; k += batch {
			m := min(batch, hi-k)
			for i := range m {
				keys[i], missing[i], failed[i] = k+i, false, false
			}
			if err := pool.Get(keys[:m], buf[:m*4096], missing[:m], failed[:m]); err != nil {
				return fmt.Errorf("reading the kept swap pages: %w", err)
			}
			for i := range m {
				b := keys[i]
				switch {
				case missing[i]:
				case b >= n:
					nat.Lose(b - n)
				case failed[i]:
					nat.Lose(b) // a page the store could not give back: never served as zeros
				default:
					if err := nat.Import(b, buf[i*4096:(i+1)*4096], scratch); err != nil {
						return err
					}
					held.Add(1)
				}
			}
		}
		return nil
	})
	return held.Load(), err
}
