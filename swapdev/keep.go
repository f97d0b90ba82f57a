package swapdev

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/ublk"
)

// Swap devices across restarts (#28). Every device is made with ublk's
// user recovery, so it outlives the daemon: its I/O waits until the next
// daemon takes it over (ublk.Recover), and the processes swapping on it
// wait rather than die. What the next daemon can serve:
//
//   - After a stop with --persist (SIGTERM: the queues stop answering, the
//     pages go to the backing file, then this record says "clean"), every
//     page as last written: nothing is lost.
//   - After kill -9 or a crash, or a stop without persist, it cannot prove
//     a page is the last version written: a block it holds is served only
//     if it was written or discarded since the takeover, and any other read
//     fails (EIO: the process touching it gets SIGBUS). Never zeros, never
//     an older version. Once the device is not swap (swapoff, or found
//     so), nothing on it is in use: it is emptied and trusted whole, and
//     fresh for mkswap (followSwapoff).
//
// Without --persist a stop swaps the devices off first (every page goes
// back to its process) and removes them, as before; only a crash leaves
// one behind.

// record is what the next daemon needs to take a device over.
type record struct {
	ID      uint32 `json:"id"`
	N       int    `json:"n"` // pool number: poolName(N)
	Size    uint64 `json:"size"`
	Queues  int    `json:"queues"`
	Depth   int    `json:"depth"`
	Reserve uint64 `json:"reserve,omitempty"`
	// MemLimit and Writeback: a new file there at a takeover (the old
	// one's pages came through the daemon's store, as the others).
	MemLimit  uint64 `json:"mem_limit,omitempty"`
	Writeback string `json:"writeback,omitempty"`
	Codec     string `json:"codec,omitempty"`
	Prio      int    `json:"prio"`
	Spec      int    `json:"spec"` // the [[swap]] table it came from, -1 for `swap add`
	// IO: the path that served it, "native". "go" or "" (older
	// daemons): the Go path, removed (issue 40); such a device is not
	// taken over (recover).
	IO string `json:"io,omitempty"`
}

type records struct {
	// Clean: written after a stop that persisted every page, with the
	// queues stopped first. Anything else is a crash to the next start.
	Clean bool `json:"clean"`
	// Seq: with Clean, the backing file's checkpoint that holds those
	// pages (cold.Tier.Seq). A start trusts the file only if it finds
	// that very checkpoint there: any other (a daemon that ran since
	// without taking the devices over, another file) may hold older pages.
	Seq     uint64   `json:"seq,omitempty"`
	Devices []record `json:"devices"`
}

// statePath is where the records live: beside the socket, in the
// runtime directory, which outlives a restart and, like the devices,
// not a reboot.
func (s *Set) statePath() string {
	return filepath.Join(s.cfg.Dir, "s4d-swap.json")
}

// save writes the records of the devices served now, atomically; clean
// ones name seq, the backing file's last checkpoint (its Close has run).
func (s *Set) save(clean bool, seq uint64) error {
	recs := records{Clean: clean, Devices: []record{}}
	if clean {
		recs.Seq = seq
	}
	for _, sd := range s.devs {
		recs.Devices = append(recs.Devices, sd.rec)
	}
	recs.Devices = append(recs.Devices, s.orphans...)
	return s.write(recs)
}

// write writes recs in place of the records, atomically.
func (s *Set) write(recs records) error {
	b, err := json.Marshal(recs)
	if err != nil {
		return err
	}
	path := s.statePath()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// load reads the records a previous daemon left (none: no file).
func (s *Set) load() (records, error) {
	var recs records
	b, err := os.ReadFile(s.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return recs, nil
	}
	if err != nil {
		return recs, err
	}
	if err := json.Unmarshal(b, &recs); err != nil {
		return recs, fmt.Errorf("%s: %w", s.statePath(), err)
	}
	return recs, nil
}

// recover takes over the devices a previous daemon left, and returns the
// [[swap]] tables they came from (not to be made again). seq is the
// backing file's checkpoint number as this start found it.
func (s *Set) recover(seq uint64) []int {
	recs, err := s.load()
	if err != nil {
		s.log.Error("swap devices of the last run not read: left as they are", "err", err)
		return nil
	}
	if len(recs.Devices) == 0 {
		return nil
	}
	take := s.take
	if take == nil {
		if err := ublk.Available(); err != nil {
			s.log.Error("swap devices of the last run not taken over", "err", err)
			return nil
		}
		take = s.takeOverNative
	}
	trusted := s.beginTakeover(recs, seq)
	var specs []int
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs.Devices {
		s.next = max(s.next, r.N)
		var sd *device
		var err error
		if r.IO != "native" {
			// A device this daemon cannot serve, left untouched (its
			// pages are in the old path's form) for the s4d that made it.
			if r.IO == "" || r.IO == "go" {
				s.log.Error("swap device of the last run not taken over: it was served by the Go swap path, which this s4d no longer has (under the s4d that made it: swapoff it, `s4d swap del` it; then add it again under this one)", "id", r.ID, "io", r.IO)
			} else {
				s.log.Error("swap device of the last run not taken over: it was served by a newer s4d's swap path (start that version again, or swapoff it under that version first)", "id", r.ID, "io", r.IO)
			}
			s.orphans = append(s.orphans, r)
			continue
		}
		sd, err = take(r, trusted)
		if errors.Is(err, ublk.ErrNoDevice) {
			s.log.Warn("swap device of the last run is gone", "id", r.ID)
			continue
		}
		if err != nil {
			// Kept in the records for the next start: deleting it would
			// fail every process with pages on it.
			s.log.Error("swap device of the last run not taken over", "id", r.ID, "err", err)
			s.orphans = append(s.orphans, r)
			continue
		}
		s.devs = append(s.devs, sd)
		if r.Spec >= 0 {
			specs = append(specs, r.Spec)
		}
		afterTakeover() // a crash here must not leave a record that says clean
	}
	if err := s.save(false, 0); err != nil {
		s.log.Error("swap records not written: a crash now would leave devices the next start does not know", "err", err)
	}
	return specs
}

// afterTakeover runs once a device serves again, before the records are
// rewritten: the fault build kills the daemon there (fault_on.go).
var afterTakeover = faultSwapTakeover

// beginTakeover decides, before any device serves, whether every page of
// the last run may be served, and says so. A clean record is trusted only
// with persist and the backing file at the checkpoint it names. Then the
// records are marked not clean: from the first takeover on, a device
// serves writes the backing file does not hold, and a crash before the
// records are written again must leave the next start distrusting the
// file. If the mark cannot be written, nothing is trusted now either.
func (s *Set) beginTakeover(recs records, seq uint64) bool {
	trusted := recs.Clean && s.cfg.Persist && recs.Seq != 0 && recs.Seq == seq
	if recs.Clean && !trusted {
		s.log.Warn("swap records say clean, but not for this start: pages not written since are refused (EIO)",
			"persist", s.cfg.Persist, "records_checkpoint", recs.Seq, "file_checkpoint", seq)
	}
	if err := s.write(records{Devices: recs.Devices}); err != nil {
		s.log.Error("swap records not marked in use: pages not written since the takeover are refused (EIO)", "err", err)
		return false
	}
	return trusted
}

// keep, at a stop with persist, stops the devices' queues (a batch being
// served is answered first) and leaves the devices to the next daemon,
// swap on; the pages then go to the backing file with the rest. It says
// whether there were any.
func (s *Set) keep() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.devs) > 0 {
		s.holdResident()
	}
	for _, sd := range s.devs {
		if err := s.export(sd); err != nil {
			s.log.Error("swap pages not kept: the next start fails reads of those it cannot vouch for", "err", err)
			s.keepErr = errors.Join(s.keepErr, err)
		}
		s.log.Info("swap device left for the next start", "device", sd.dev.BlockPath())
		sd.dev.Detach()
	}
	if len(s.devs) > 0 {
		// From now on nothing may swap in: a log line written to a pipe
		// whose reader waits on a swapped-out page would hold the stop
		// for good (in the guest, a log file on tmpfs did). Such a line
		// is dropped instead of waited for.
		for _, fd := range []int{1, 2} {
			unix.SetNonblock(fd, true)
		}
	}
	return len(s.devs) > 0
}

// Persisted, after a Stop that left devices (it returned true), is told
// how the daemon's persist went (err) and the backing file's checkpoint
// now (seq): only if every page reached it may the next start serve every
// page it finds, and only then do the records say clean. It takes no
// lock: a request the daemon gave up waiting for may still hold it.
func (s *Set) Persisted(err error, seq uint64) {
	if err == nil {
		err = s.keepErr
	}
	if err != nil {
		s.log.Error("swap devices left without their pages persisted: the next start fails reads of pages it cannot vouch for", "err", err)
	} else if err := s.save(true, seq); err != nil {
		s.log.Error("swap records not written", "err", err)
	}
}
