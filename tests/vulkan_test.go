package tests

import (
	"bytes"
	"os"
	"strings"
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
	desc := webgpuDescribe(t, c)
	t.Log(desc)
	if !strings.Contains(desc, "runtime vulkan") || strings.Contains(desc, "batches from imported memory 0,") {
		t.Fatalf("stats do not show the Vulkan runtime reading pages in place: %s", desc)
	}
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
