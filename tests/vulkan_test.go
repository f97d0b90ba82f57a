package tests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/vulkan/vk"
	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

// The WGSL engine on the Vulkan runtime through the daemon: pages put
// from a client's memfd are read by the kernel where they lie (the
// mapping imported), come back byte for byte into the socket and into
// another memfd, and s4d ctl stats names the runtime and counts the
// batches read in place. Runs on a GPU; on lavapipe only with
// S4D_VULKAN_KERNELS=1 (it compiles naga's compress module for minutes
// at the first dispatch, see backends/vulkan/README.md).
func TestVulkanRuntimeDaemon(t *testing.T) {
	vulkanKernelsOrSkip(t)
	d := start(t, "--backend", "webgpu", "--wgsl-runtime", "vulkan", "--webgpu-cpu")
	c := d.client()
	const ps, n = 4096, 2048
	var pages []byte
	for _, k := range corpus.Kinds {
		pages = append(pages, corpus.Pages(k, n/len(corpus.Kinds), ps, 41)...)
	}
	m := len(pages) / ps
	buf, err := client.NewPageBuffer(len(pages))
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	copy(buf.Bytes(), pages)
	// The first round is staged while the mapping imports in the
	// background; the second, once the import is in, reads in place.
	for round := range 2 {
		codes, err := c.PutBuffer(ctx(t), "vk", keys(uint64(round*m), m), buf, 0, ps)
		if err != nil {
			t.Fatal(err)
		}
		allOK(t, "put from memfd", keys(uint64(round*m), m), codes)
		for deadline := time.Now().Add(time.Minute); round == 0; time.Sleep(10 * time.Millisecond) {
			if desc := webgpuDescribe(t, c); !strings.Contains(desc, "imports 0 ") {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("the client's mapping was not imported within a minute: %s", desc)
			}
		}
	}
	got, codes, err := c.Get(ctx(t), "vk", keys(0, m))
	if err != nil || ipc.PageError(keys(0, m), codes) != nil || !bytes.Equal(got, pages) {
		t.Fatalf("pages put through the Vulkan runtime come back wrong: %v", err)
	}
	back, err := client.NewPageBuffer(len(pages))
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	codes, err = c.GetBuffer(ctx(t), "vk", keys(uint64(m), m), back, 0, ps)
	if err != nil || ipc.PageError(keys(uint64(m), m), codes) != nil || !bytes.Equal(back.Bytes(), pages) {
		t.Fatalf("get into a memfd: %v", err)
	}
	// That GET started the imports of its memfd and of the store's slabs;
	// once they are in, a GET into the memfd moves its pages on the GPU
	// (the gather kernel), which stats count.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		clear(back.Bytes())
		codes, err = c.GetBuffer(ctx(t), "vk", keys(uint64(m), m), back, 0, ps)
		if err != nil || ipc.PageError(keys(uint64(m), m), codes) != nil || !bytes.Equal(back.Bytes(), pages) {
			t.Fatalf("get into an imported memfd: %v", err)
		}
		desc := webgpuDescribe(t, c)
		if !strings.Contains(desc, "copied there 0)") {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no GET was gathered on the GPU within a minute: %s", desc)
		}
	}
	desc := webgpuDescribe(t, c)
	t.Log(desc)
	if !strings.Contains(desc, "runtime vulkan") || strings.Contains(desc, "batches from imported memory 0,") {
		t.Fatalf("stats do not show the Vulkan runtime reading pages in place: %s", desc)
	}
}

// vulkanKernelsOrSkip skips where the Vulkan runtime's kernels cannot run
// (no Vulkan; lavapipe without S4D_VULKAN_KERNELS=1), and fails instead
// with S4D_REQUIRE_VULKAN=1.
func vulkanKernelsOrSkip(t *testing.T) {
	t.Helper()
	dev, err := vk.Open(vk.Options{Device: -1})
	if err != nil {
		if os.Getenv("S4D_REQUIRE_VULKAN") == "1" {
			t.Fatal(err)
		}
		t.Skipf("no Vulkan here: %v", err)
	}
	info := dev.Info()
	dev.Close()
	if info.CPU && os.Getenv("S4D_VULKAN_KERNELS") != "1" {
		t.Skip("lavapipe compiles the compress kernel for minutes: S4D_VULKAN_KERNELS=1 runs it")
	}
}

// A device lost mid-batch on the Vulkan runtime loses nothing. The fault
// build fails the runtime's kernel waits after the kernel wrote its
// output, while several clients PUT new pages and GET stored ones: each
// batch is redone whole on the cpu engine, the router takes the engine out
// and closes it with other batches still holding its slots, and every
// page comes back byte for byte, those the engine stored before too.
func TestVulkanRuntimeDeviceLost(t *testing.T) {
	vulkanKernelsOrSkip(t)
	bin := faultBinary(t)
	faults := t.TempDir()
	t.Setenv("S4D_FAULT_DIR", faults)
	d := startBin(t, bin, "--backend", "webgpu", "--wgsl-runtime", "vulkan", "--webgpu-cpu")
	c := d.client()
	const ps, n, clients = 4096, 2048, 4
	stored := corpus.Pages(corpus.Mixed, n, ps, 43)
	allOKPut(t, c, "lost", keys(0, n), stored)
	if got := enginePages(t, c, "webgpu"); got < n {
		t.Fatalf("the Vulkan engine stored %d pages of %d before the fault", got, n)
	}

	os.WriteFile(filepath.Join(faults, "vulkan-lost"), nil, 0o644)
	fresh := make([][]byte, clients)
	var wg sync.WaitGroup
	errs := make(chan error, 2*clients)
	for w := range clients {
		// Kinds that reach the kernel in every engine (no all-zero batch).
		kinds := []corpus.Kind{corpus.Text, corpus.Pointers, corpus.Random, corpus.Mixed}
		fresh[w] = corpus.Pages(kinds[w%len(kinds)], n, ps, uint64(50+w))
		wg.Add(2)
		go func() {
			defer wg.Done()
			ks := keys(uint64((w+1)*n), n)
			codes, err := d.client().Put(ctx(t), "lost", ks, fresh[w])
			if err == nil {
				err = ipc.PageError(ks, codes)
			}
			if err != nil {
				errs <- fmt.Errorf("put %d while the device is lost: %w", w, err)
			}
		}()
		go func() {
			defer wg.Done()
			got, codes, err := d.client().Get(ctx(t), "lost", keys(0, n))
			if err == nil {
				err = ipc.PageError(keys(0, n), codes)
			}
			if err == nil && !bytes.Equal(got, stored) {
				err = errors.New("wrong pages")
			}
			if err != nil {
				errs <- fmt.Errorf("get %d while the device is lost: %w", w, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	os.Remove(filepath.Join(faults, "vulkan-lost"))

	for w := range clients {
		ks := keys(uint64((w+1)*n), n)
		got, codes, err := c.Get(ctx(t), "lost", ks)
		if err != nil || ipc.PageError(ks, codes) != nil || !bytes.Equal(got, fresh[w]) {
			t.Fatalf("pages put while the device was lost come back wrong: %v", err)
		}
	}
	st, err := c.Stats(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range st.Backends {
		if b.Name == "webgpu" && (b.State != "failed" || !strings.Contains(b.Reason, "device lost (injected)")) {
			t.Fatalf("the lost engine is not shown failed: %+v", b)
		}
	}
	if got := enginePages(t, c, "cpu"); got < clients*n {
		t.Fatalf("the cpu engine took %d pages, want at least the %d put while the device was lost", got, clients*n)
	}
	if !strings.Contains(d.log.String(), "backend failed; batch goes to the next one") {
		t.Fatalf("the daemon did not log the failover:\n%s", d.log.String())
	}
}

// enginePages is how many pages the engine name compressed.
func enginePages(t *testing.T, c *client.Client, name string) int {
	t.Helper()
	st, err := c.Stats(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range st.Backends {
		if b.Name != name {
			continue
		}
		for _, ct := range b.Counters {
			if ct.Direction == "compress" {
				n += int(ct.Pages)
			}
		}
	}
	return n
}

// webgpuDescribe is the webgpu engine's description in the daemon's stats.
func webgpuDescribe(t *testing.T, c *client.Client) string {
	t.Helper()
	st, err := c.Stats(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range st.Backends {
		if b.Name == "webgpu" {
			return b.Describe
		}
	}
	t.Fatalf("no webgpu engine in the stats: %+v", st.Backends)
	return ""
}
