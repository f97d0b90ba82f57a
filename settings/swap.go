package settings

import (
	"github.com/s4d-project/s4d/settings/bytesize"

	"fmt"
	"sort"
	"strconv"
	"strings"
)

// swapKey is the configuration file's array of tables naming the swap
// devices the daemon creates at start:
//
//	[[swap]]
//	size = "50%"      # of RAM, or bytes with K/M/G/T
//	max_size = "8G"   # a cap on a size in percent
//	queues = 2        # 0: one per CPU
//	depth = 64        # requests in flight per queue
//	priority = 100    # for swapon (`s4d swap on` reads it); default 100
//	codec = "lz4"     # the only codec swap devices store; "" = lz4
//	mem_limit = "1G"  # compressed bytes kept in RAM, the coldest past it written back
//	writeback = "/var/lib/s4d"  # where: a directory or a block device
const swapKey = "swap"

// DefaultSwapPriority is a device's swap priority unless its table names
// one: above disk swap (the kernel gives those -2 and below), as
// zram-generator's 100, so the kernel fills s4d's devices first.
const DefaultSwapPriority = 100

// SwapKeys documents the keys of a [[swap]] table, in the order s4d.toml(5)
// lists them; every key ParseSwap takes is here (the tests check).
var SwapKeys = []struct{ Key, Usage, Default string }{
	{"size", "the device's size: a percentage of RAM (\"50%\", at most 400%) or bytes with K/M/G/T suffix (at least 1M); required", ""},
	{"max_size", "a cap on a size given in percent, bytes with K/M/G/T suffix", "none"},
	{"queues", "hardware queues, each served by a thread of its own, 0-64; 0 = one per CPU", "0"},
	{"depth", "requests in flight per queue, 0-1024; 0 = 64", "0"},
	{"priority", "the swap priority s4d swap on gives the device, 0-32767 (higher is used first; disk swap has -2 and below)", "100"},
	{"codec", "lz4 or empty: swap devices store LZ4 only (a device with zstd, which the removed Go swap path took, is not created)", "lz4"},
	{"mem_limit", "compressed bytes kept in RAM, bytes with K/M/G/T suffix; past it the coldest pages are written back to writeback", "none: every page in RAM"},
	{"writeback", "with mem_limit: a directory on a disk (an unnamed file as large as the device is made there) or a block device used whole", "the daemon's state directory"},
}

// SwapSpec is one [[swap]] table.
type SwapSpec struct {
	Size      uint64  // bytes; 0 when Percent is used
	Percent   float64 // of physical memory
	MaxSize   uint64  // cap on a Percent size; 0 = none
	Queues    int
	Depth     int
	Priority  int
	Codec     string
	MemLimit  uint64
	Writeback string
}

// Bytes is the device's size on a machine with ram bytes of memory.
func (s SwapSpec) Bytes(ram uint64) uint64 {
	if s.Percent == 0 {
		return s.Size
	}
	n := uint64(float64(ram) * s.Percent / 100)
	if s.MaxSize > 0 {
		n = min(n, s.MaxSize)
	}
	return n &^ 4095
}

// RAM is the machine's physical memory, for Bytes.
func RAM() uint64 { return uint64(max(physicalMemory(), 0)) }

var swapFields = map[string]func(*SwapSpec, string) error{
	"size": func(s *SwapSpec, v string) error {
		if p, ok := strings.CutSuffix(strings.TrimSpace(v), "%"); ok {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil || f <= 0 || f > 400 {
				return fmt.Errorf("%q: want a percentage of RAM above 0 and at most 400", v)
			}
			s.Percent = f
			return nil
		}
		n, err := bytesize.Parse(v)
		if err == nil && n < 1<<20 {
			err = fmt.Errorf("%q: want at least 1M", v)
		}
		s.Size = n
		return err
	},
	"max_size":  func(s *SwapSpec, v string) (err error) { s.MaxSize, err = bytesize.Parse(v); return err },
	"queues":    swapInt(func(s *SwapSpec) *int { return &s.Queues }, 0, 64),
	"depth":     swapInt(func(s *SwapSpec) *int { return &s.Depth }, 0, 1024),
	"priority":  swapInt(func(s *SwapSpec) *int { return &s.Priority }, 0, 32767),
	"mem_limit": func(s *SwapSpec, v string) (err error) { s.MemLimit, err = bytesize.Parse(v); return err },
	"writeback": func(s *SwapSpec, v string) error {
		if !strings.HasPrefix(v, "/") {
			return fmt.Errorf("%q: want an absolute path", v)
		}
		s.Writeback = v
		return nil
	},
	"codec": func(s *SwapSpec, v string) error {
		if v != "" && v != "lz4" && v != "zstd" {
			return fmt.Errorf("%q: want lz4 or zstd", v)
		}
		s.Codec = v
		return nil
	},
}

func swapInt(f func(*SwapSpec) *int, lo, hi int) func(*SwapSpec, string) error {
	return func(s *SwapSpec, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("%q: want a whole number from %d to %d", v, lo, hi)
		}
		*f(s) = n
		return nil
	}
}

// ParseSwap reads the [[swap]] tables of a decoded configuration file.
func ParseSwap(v any) ([]SwapSpec, error) {
	tables, ok := v.([]map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want [[%s]] tables", swapKey, swapKey)
	}
	var out []SwapSpec
	for i, t := range tables {
		s := SwapSpec{Priority: DefaultSwapPriority}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			f := swapFields[k]
			if f == nil {
				return nil, fmt.Errorf("swap %d: unknown key %s (want size, max_size, queues, depth, priority, codec, mem_limit, writeback)", i+1, k)
			}
			var val string
			switch x := t[k].(type) {
			case string:
				val = x
			case int64:
				val = strconv.FormatInt(x, 10)
			default:
				return nil, fmt.Errorf("swap %d: %s: want a string or a number, not %T", i+1, k, x)
			}
			if err := f(&s, val); err != nil {
				return nil, fmt.Errorf("swap %d: %s: %w", i+1, k, err)
			}
		}
		if s.Size == 0 && s.Percent == 0 {
			return nil, fmt.Errorf("swap %d: size is required", i+1)
		}
		out = append(out, s)
	}
	return out, nil
}
