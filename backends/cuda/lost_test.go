//go:build s4dfault

package cuda_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/routing"
)

// A GPU lost mid-batch (the router's fault injection: the device fails
// after writing its output) hands the batch to another GPU, and the last
// one to the CPU: every page of every batch comes back, and each lost
// device is out of service. No GPU is reset: the device only says it failed.
func TestDeviceLostMidBatch(t *testing.T) {
	faults := t.TempDir()
	t.Setenv("S4D_FAULT_DIR", faults)
	set := backends.Open(backends.FromEnv(backends.Options{PageSize: 4096}), "cuda", "cpu")
	defer set.Close()
	var gpus []string
	for _, st := range set.Statuses() {
		if st.Name != "cpu" {
			if st.State != backends.StateOK {
				t.Skipf("%s: %s %s", st.Name, st.State, st.Reason)
			}
			gpus = append(gpus, st.Name)
		}
	}
	t.Logf("GPUs: %v", gpus)
	r := routing.New(set, routing.Options{Prefer: "cuda", Codec: pagefmt.CodecLZ4, PageSize: 4096, Log: slog.New(slog.DiscardHandler)})
	defer r.Close()
	ref := cpuRef(t)
	var used []string
	for round := range len(gpus) + 1 {
		pages := corpus.Pages(corpus.Mixed, 5000, 4096, uint64(round))
		b := &pagefmt.Batch{PageSize: 4096, Pages: pages}
		// Parts as the store takes them; a redone batch delivers all again.
		stored := make([][]byte, b.Len())
		class := make([]pagefmt.Class, b.Len())
		fill := make([]uint64, b.Len())
		name, err := r.Compress(context.Background(), b, new(pagefmt.Compressed), func(_ string, lo int, part *pagefmt.Compressed) error {
			pb := &pagefmt.Batch{PageSize: 4096, Pages: pages[lo*4096 : (lo+len(part.Class))*4096]}
			// The GPU may write the objects itself (Placed), as into the
			// store: checksum then stored bytes.
			var dst [][]byte
			if part.Place != nil {
				dst = make([][]byte, len(part.Class))
				for i, c := range part.Class {
					if c != pagefmt.ClassZero {
						dst[i] = make([]byte, pagefmt.ObjectHeader+int(part.Size[i]))
					}
				}
				if err := part.Place.Place(dst); err != nil {
					return err
				}
			}
			for i := range part.Class {
				class[lo+i], fill[lo+i] = part.Class[i], part.Fill[i]
				if dst != nil {
					stored[lo+i] = nil
					if dst[i] != nil {
						stored[lo+i] = dst[i][pagefmt.ObjectHeader:]
					}
				} else {
					stored[lo+i] = bytes.Clone(part.Bytes(i, pb))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		page := make([]byte, 4096)
		for i := range b.Len() {
			if !ref.DecodePage(pagefmt.Stored{Class: class[i], Fill: fill[i], Data: stored[i]}, page) || !bytes.Equal(page, b.Page(i)) {
				t.Fatalf("round %d (%s): page %d lost", round, name, i)
			}
		}
		t.Logf("round %d: batch stored by %s after %d fallbacks", round, name, r.Fallbacks())
		if slices.Contains(used, name) {
			t.Fatalf("round %d went to %s, lost before", round, name)
		}
		used = append(used, name)
		if round == len(gpus) {
			if name != "cpu" {
				t.Fatalf("with every GPU lost the batch went to %s", name)
			}
			break
		}
		if name == "cpu" {
			t.Fatalf("round %d went to the CPU with GPUs left", round)
		}
		// The device that took this batch is lost in the middle of the next.
		os.WriteFile(filepath.Join(faults, "backend-"+name), nil, 0o644)
	}
	for _, st := range set.Statuses() {
		if want := map[bool]backends.State{true: backends.StateOK, false: backends.StateFailed}[st.Name == "cpu"]; st.State != want {
			t.Fatalf("%s is %s, want %s", st.Name, st.State, want)
		}
	}
	if int(r.Fallbacks()) != len(gpus) {
		t.Fatalf("%d fallbacks for %d lost GPUs", r.Fallbacks(), len(gpus))
	}
}
