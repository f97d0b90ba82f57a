package daemon

import (
	"sync"
	"time"

	"github.com/s4d-project/s4d/backing"
)

// backingSide is the daemon's hold on the backing file: the file, and the
// goroutine that checkpoints it.
type backingSide struct {
	f    *backing.File
	stop chan struct{}
	wg   sync.WaitGroup
}

// openBacking opens the backing file the settings name and, with persist,
// restores every page its last checkpoint recorded. New calls it, so the
// daemon says it is ready only once they are back.
func (d *Daemon) openBacking() error {
	if d.cfg.BackingFile == "" {
		return nil
	}
	t0 := time.Now()
	f, idx, err := backing.Open(d.cfg.BackingFile, d.cfg.PageSize, d.cfg.Persist)
	if err != nil {
		return err
	}
	f.SetVerify(d.cfg.BackingVerify)
	n, err := d.store.AttachBacking(f, idx, d.cfg.Persist)
	if err != nil {
		f.Close()
		return err
	}
	d.back.f = f
	st := f.Stats()
	d.log.Info("backing file", "path", f.Path(), "size", st.Size, "free", st.FreeBytes, "persist", d.cfg.Persist, "verify", d.cfg.BackingVerify,
		"pages_restored", n, "bytes_on_file", st.Bytes, "took", time.Since(t0))
	d.back.stop = make(chan struct{})
	if d.cfg.Persist && d.cfg.CheckpointEvery > 0 {
		d.back.wg.Add(1)
		go d.checkpointEvery(d.cfg.CheckpointEvery)
	}
	if d.cfg.WritebackHeadroom > 0 {
		d.back.wg.Add(1)
		go d.keepRoom(d.cfg.WritebackHeadroom)
	}
	return nil
}

// keepRoom keeps percent of the memory limit free, writing the coldest
// pages back ahead of the PUTs that would otherwise do it while their
// client waits. It looks every few milliseconds: a look costs a read lock
// while there is room.
func (d *Daemon) keepRoom(percent int) {
	defer d.back.wg.Done()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-d.back.stop:
			return
		case <-t.C:
			if err := d.store.KeepRoom(percent); err != nil {
				// Counted and logged where the round failed; a PUT
				// still makes room for itself.
				select {
				case <-d.back.stop:
					return
				case <-time.After(time.Second):
				}
			}
		}
	}
}

// checkpointEvery records the file's pages periodically, so that a crash
// loses only what came after the last round.
func (d *Daemon) checkpointEvery(every time.Duration) {
	defer d.back.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-d.back.stop:
			return
		case <-t.C:
			if err := d.store.Checkpoint(); err != nil {
				d.log.Warn("checkpoint of the backing file failed; the previous one stands", "err", err)
			}
		}
	}
}

// stopBacking runs once requests are answered: with persist, every page
// still in RAM goes to the file and the index is recorded, so the next
// start has them all.
func (d *Daemon) stopBacking() {
	if d.back.f == nil {
		return
	}
	close(d.back.stop)
	d.back.wg.Wait()
	if d.cfg.Persist {
		t0 := time.Now()
		n, err := d.store.PersistAll()
		st := d.back.f.Stats()
		if err != nil {
			d.log.Error("persisting the pages failed: those still in RAM are lost with this stop", "err", err,
				"pages_written", n, "pages_on_file", st.Pages)
		} else {
			d.log.Info("pages persisted", "pages_written", n, "pages_on_file", st.Pages, "took", time.Since(t0))
		}
	}
	d.back.f.Close()
}
