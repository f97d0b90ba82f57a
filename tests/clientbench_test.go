package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/client"
)

// BenchmarkClientsMemfd moves the same pages (text, 64 MiB) through a memfd
// with each client in one run, into the same pool and keys so that each
// finds the daemon in the same state: PUT_FD and GET_FD of the whole
// batch, b.N times each, the GB/s each client measures reported as put_GB/s and
// get_GB/s, so that Python and C can be set against Go on the same daemon:
//
//	go test -run '^$' -bench ClientsMemfd -benchtime 20x ./tests
func BenchmarkClientsMemfd(b *testing.B) {
	const n = 16384
	d := start(b)
	ps := 4096
	pages := corpus.Pages(corpus.Text, n, ps, 1)
	file := filepath.Join(b.TempDir(), "pages")
	if err := os.WriteFile(file, pages, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("go", func(b *testing.B) {
		c := d.client()
		buf, err := client.NewPageBuffer(len(pages))
		if err != nil {
			b.Fatal(err)
		}
		defer buf.Close()
		back, err := client.NewPageBuffer(len(pages))
		if err != nil {
			b.Fatal(err)
		}
		defer back.Close()
		copy(buf.Bytes(), pages)
		ks := keys(0, n)
		t0 := time.Now()
		for i := 0; i < b.N; i++ {
			codes, err := c.PutBuffer(ctx(b), "bench", ks, buf, 0, ps)
			if err != nil {
				b.Fatal(err)
			}
			allOK(b, "put", ks, codes)
		}
		t1 := time.Now()
		for i := 0; i < b.N; i++ {
			codes, err := c.GetBuffer(ctx(b), "bench", ks, back, 0, ps)
			if err != nil {
				b.Fatal(err)
			}
			allOK(b, "get", ks, codes)
		}
		t2 := time.Now()
		if string(back.Bytes()) != string(pages) {
			b.Fatal("pages came back different")
		}
		total := float64(len(pages) * b.N)
		b.ReportMetric(total/t1.Sub(t0).Seconds()/1e9, "put_GB/s")
		b.ReportMetric(total/t2.Sub(t1).Seconds()/1e9, "get_GB/s")
	})
	b.Run("python", func(b *testing.B) {
		py, err := exec.LookPath("python3")
		if err != nil {
			b.Skip("no python3")
		}
		src, _ := filepath.Abs("../clients/python")
		cmd := exec.Command(py, filepath.Join(src, "tests", "bench.py"), file, fmt.Sprint(b.N))
		cmd.Env = append(os.Environ(), "S4D_SOCKET="+d.socket, "PYTHONPATH="+src)
		reportExternal(b, cmd)
	})
	b.Run("c", func(b *testing.B) {
		prog := buildCBench(b)
		cmd := exec.Command(prog, file, fmt.Sprint(b.N))
		cmd.Env = append(os.Environ(), "S4D_SOCKET="+d.socket)
		reportExternal(b, cmd)
	})
}

// BenchmarkClientsPerCall makes one-page PUTs and GETs through the socket,
// one at a time, with each client against the same daemon: what one small
// call costs, reported as put_us/call and get_us/call:
//
//	go test -run '^$' -bench ClientsPerCall -benchtime 20000x ./tests
func BenchmarkClientsPerCall(b *testing.B) {
	d := start(b, "--backend", "cpu")
	b.Run("go", func(b *testing.B) {
		c := d.client()
		page := bytes.Repeat([]byte{7, 1, 3}, 4096/3+1)[:4096]
		ks := []uint64{1}
		t0 := time.Now()
		for i := 0; i < b.N; i++ {
			codes, err := c.Put(ctx(b), "callbench", ks, page)
			if err != nil {
				b.Fatal(err)
			}
			allOK(b, "put", ks, codes)
		}
		t1 := time.Now()
		for i := 0; i < b.N; i++ {
			got, codes, err := c.Get(ctx(b), "callbench", ks)
			if err != nil || !bytes.Equal(got, page) {
				b.Fatalf("get: %v (page equal: %v)", err, bytes.Equal(got, page))
			}
			allOK(b, "get", ks, codes)
		}
		t2 := time.Now()
		b.ReportMetric(float64(t1.Sub(t0).Microseconds())/float64(b.N), "put_us/call")
		b.ReportMetric(float64(t2.Sub(t1).Microseconds())/float64(b.N), "get_us/call")
	})
	b.Run("c", func(b *testing.B) {
		cmd := exec.Command(buildCBench(b), "--calls", fmt.Sprint(b.N))
		cmd.Env = append(os.Environ(), "S4D_SOCKET="+d.socket)
		out, err := cmd.Output()
		var put, get float64
		if _, serr := fmt.Sscan(string(out), &put, &get); err != nil || serr != nil {
			b.Fatalf("s4d_bench --calls: %v %v: %q", err, serr, out)
		}
		b.ReportMetric(put, "put_us/call")
		b.ReportMetric(get, "get_us/call")
	})
}

func reportExternal(b *testing.B, cmd *exec.Cmd) {
	b.Helper()
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			b.Fatalf("%s: %v\n%s", cmd.Args[0], err, ee.Stderr)
		}
		b.Fatal(err)
	}
	// put and get through the memfd, then (Python) put and get of a
	// bytearray, copied through the client's scratch memfd.
	names := []string{"put_GB/s", "get_GB/s", "put_copy_GB/s", "get_copy_GB/s"}
	f := strings.Fields(string(out))
	if len(f) < 2 || len(f) > len(names) {
		b.Fatalf("%s said %q", cmd.Args[0], out)
	}
	for i, s := range f {
		var v float64
		if _, err := fmt.Sscan(s, &v); err != nil {
			b.Fatalf("%s said %q", cmd.Args[0], out)
		}
		b.ReportMetric(v, names[i])
	}
}

func buildCBench(b *testing.B) string {
	cc, err := exec.LookPath("cc")
	if err != nil {
		b.Skip("no C compiler")
	}
	src, _ := filepath.Abs("../clients/c")
	dir := b.TempDir()
	prog := filepath.Join(dir, "s4d_bench")
	args := []string{"-O2", "-I" + src, "-o", prog, filepath.Join(src, "tests", "s4d_bench.c"),
		filepath.Join(src, "s4d.c"), filepath.Join(src, "s4d_frame.c"), "-fvisibility=hidden", "-lpthread"}
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		b.Fatalf("cc: %v\n%s", err, out)
	}
	return prog
}
