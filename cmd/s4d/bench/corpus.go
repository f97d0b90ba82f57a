package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/settings/bytesize"
)

// region is one line of /proc/PID/maps that we keep.
type region struct {
	Start, End uint64
	Perms      string
	Path       string
}

// parseMaps returns the writable private mappings listed in a
// /proc/PID/maps text. Those hold what a process has written itself (heap,
// stacks, anonymous memory, data segments): the pages zram would see under
// memory pressure. Read-only and shared mappings are file-backed or shared
// with others and are never swapped out by a compressor. [vvar] and
// [vsyscall] belong to the kernel and cannot be read.
func parseMaps(r io.Reader) ([]region, error) {
	var out []region
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			return nil, fmt.Errorf("maps line %d: %q: too few fields", line, sc.Text())
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end < start || len(f[1]) != 4 {
			return nil, fmt.Errorf("maps line %d: %q: bad address range or permissions", line, sc.Text())
		}
		path := ""
		if len(f) >= 6 {
			path = strings.Join(f[5:], " ")
		}
		if f[1][1] != 'w' || f[1][3] != 'p' || path == "[vvar]" || path == "[vsyscall]" || path == "[vvar_vclock]" {
			continue
		}
		out = append(out, region{Start: start, End: end, Perms: f[1], Path: path})
	}
	return out, sc.Err()
}

// snapshotPID copies up to max bytes of whole pages from the writable
// private memory of process pid. Pages that cannot be read (guard pages,
// regions unmapped meanwhile, device memory) are skipped, not fatal: the
// process keeps running while we read it.
func snapshotPID(pid, pageSize int, max int64) ([]byte, error) {
	mf, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	regions, err := parseMaps(mf)
	mf.Close()
	if err != nil {
		return nil, err
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return nil, fmt.Errorf("%w (reading another process's memory needs its uid or CAP_SYS_PTRACE)", err)
	}
	defer mem.Close()
	max -= max % int64(pageSize)
	out := make([]byte, 0, min(max, 64<<20))
	// Read a chunk at a time; a chunk that fails is retried page by page so
	// one bad page does not cost the rest of the chunk.
	const chunk = 1 << 20
	buf := make([]byte, chunk)
	for _, rg := range regions {
		for a := rg.Start; a < rg.End && int64(len(out)) < max; {
			n := min(rg.End-a, chunk, uint64(max-int64(len(out))))
			n -= n % uint64(pageSize)
			if n == 0 {
				break
			}
			if got, err := mem.ReadAt(buf[:n], int64(a)); err == nil && got == int(n) {
				out = append(out, buf[:n]...)
			} else {
				for p := uint64(0); p < n; p += uint64(pageSize) {
					pg := buf[:pageSize]
					if got, err := mem.ReadAt(pg, int64(a+p)); err == nil && got == pageSize {
						out = append(out, pg...)
					}
				}
			}
			a += n
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("process %d: no readable writable memory", pid)
	}
	return out, nil
}

// readFilePages reads whole pages from the start of a file, up to max bytes;
// a partial last page is dropped, since the store only takes whole pages.
func readFilePages(name string, pageSize int, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	max -= max % int64(pageSize)
	data, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, err
	}
	data = data[:len(data)-len(data)%pageSize]
	if len(data) == 0 {
		return nil, fmt.Errorf("%s: shorter than one %d-byte page", name, pageSize)
	}
	return data, nil
}

// syntheticPages builds size bytes of pages of a backends/corpus kind.
func syntheticPages(kind string, pageSize int, size int64) ([]byte, error) {
	known := false
	for _, k := range corpus.Kinds {
		known = known || string(k) == kind
	}
	if !known {
		return nil, fmt.Errorf("--synthetic %q: want one of %v", kind, corpus.Kinds)
	}
	n := int(size / int64(pageSize))
	if n == 0 {
		return nil, errors.New("--size is smaller than one page")
	}
	// A fixed seed: the same command measures the same pages every time.
	return corpus.Pages(corpus.Kind(kind), n, pageSize, 1), nil
}

// parseSize reads a size as every flag of s4d does (bytesize.Parse),
// as the int64 the corpus code counts in.
func parseSize(s string) (int64, error) {
	n, err := bytesize.Parse(s)
	return int64(n), err
}
