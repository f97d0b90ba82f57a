package settings

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/s4d-project/s4d/settings/bytesize"
)

// DefaultFile is read when no other configuration file is named.
const DefaultFile = "/etc/s4d/s4d.toml"

// Setting is one thing the daemon can be told. Its flag is --Name, its key
// in the configuration file Name with underscores, and Env (if any) sets
// it too.
type Setting struct {
	Name   string
	Env    string
	Usage  string
	Reload bool // a reload changes it at once; the others need a restart
	Hidden bool
	// Bool settings take true or false; on the command line the flag
	// alone means true.
	Bool  bool
	parse func(c *Config, v string) error
	show  func(c *Config) string
}

// Key is the setting's name in the configuration file.
func (s *Setting) Key() string { return strings.ReplaceAll(s.Name, "-", "_") }

// Default is the text of its default value.
func (s *Setting) Default() string { d := Defaults(); return s.show(&d) }

// Table lists every setting.
var Table = []Setting{
	text("socket", "S4D_SOCKET", "Unix socket to listen on", false, func(c *Config) *string { return &c.Socket }),
	{Name: "socket-mode", Usage: "permissions of the socket file (octal)",
		parse: func(c *Config, v string) error {
			m, err := strconv.ParseUint(v, 8, 32)
			if err != nil || m > 0o777 {
				return fmt.Errorf("%q: want octal permissions like 0660", v)
			}
			c.SocketMode = uint32(m)
			return nil
		},
		show: func(c *Config) string { return fmt.Sprintf("%04o", c.SocketMode) }},
	size("mem-limit", "S4D_MEM_LIMIT", "memory for compressed pages, bytes with K/M/G/T suffix; 0 = no limit", true, func(c *Config) *uint64 { return &c.MemLimit }),
	text("backend", "S4D_BACKEND", "auto, or a backend to prefer: cpu, webgpu, cuda", true, func(c *Config) *string { return &c.Backend }),
	text("codec", "S4D_CODEC", "lz4 or zstd", false, func(c *Config) *string { return &c.Codec }),
	integer("page-size", "", "page size in bytes: a power of two from 4096 to 65536", false, func(c *Config) *int { return &c.PageSize }),
	integer("workers", "", "CPU compression goroutines per batch; 0 = one per core", false, func(c *Config) *int { return &c.Workers }),
	text("webgpu-lib", "S4D_WEBGPU_LIB", "path of a webgpu.h library (Dawn); default: search", false, func(c *Config) *string { return &c.WebGPULib }),
	boolean("webgpu-cpu", "S4D_WEBGPU_ALLOW_CPU", "let webgpu run on a CPU adapter (lavapipe): correct, but slower than the cpu backend", false, func(c *Config) *bool { return &c.WebGPUCPU }),
	hidden(boolean("webgpu-no-subgroups", "S4D_WEBGPU_NO_SUBGROUPS", "webgpu: use the workgroup-memory scans even where the adapter has subgroups (the same bytes; for testing)", false, func(c *Config) *bool { return &c.WebGPUNoSG })),
	text("wgsl-runtime", "S4D_WGSL_RUNTIME", "what runs the WGSL kernels of --backend webgpu: vulkan (client memory imported by the GPU, no staging copies), webgpu (a webgpu.h library: Dawn or wgpu-native), or auto (vulkan on a GPU that imports host memory: it measured faster both ways at less CPU; else webgpu.h)", false, func(c *Config) *string { return &c.WGSLRuntime }),
	text("nvcomp-lib", "S4D_NVCOMP_LIB", "path of libnvcomp.so; default: search", false, func(c *Config) *string { return &c.NvcompLib }),
	size64("gpu-mem-limit", "", "device memory a GPU backend may use; 0 = its default", false, func(c *Config) *int64 { return &c.GPUMemLimit }),
	ordinals("gpus", "", "the GPUs to use, by ordinal after CUDA_VISIBLE_DEVICES (0,2); empty = every visible one", false, func(c *Config) *[]int { return &c.GPUs }),
	size64("gpu-pin-limit", "", "host memory registered with the GPUs at once (client buffers, the store's slabs, the Vulkan runtime's own buffers), across devices (K/M/G/T); 0 = a quarter of RAM", false, func(c *Config) *int64 { return &c.GPUPinLimit }),
	duration("coalesce-wait", "", "how long a small batch may wait to travel with others to a GPU; 0 = never", false, func(c *Config) *time.Duration { return &c.CoalesceWait }),
	duration("poll-wait", "", "how long a connection polls for its next request before sleeping (lower latency for a client that sends small requests back to back, for CPU); 0 = never", false, func(c *Config) *time.Duration { return &c.PollWait }),
	integer("max-connections", "", "connections served at once", false, func(c *Config) *int { return &c.MaxConns }),
	integer("max-connections-per-user", "", "connections one user may hold at once; 0 = a quarter of --max-connections, at least 16", false, func(c *Config) *int { return &c.MaxConnsPerUser }),
	size64("io-budget", "", "memory for requests and replies in flight (K/M/G/T); 0 = 1/16 of RAM, 256M-4G", false, func(c *Config) *int64 { return &c.IOBudget }),
	size64("user-io-budget", "", "the part of --io-budget one user may take; 0 = half", false, func(c *Config) *int64 { return &c.UserIOBudget }),
	integer("max-batch-pages", "", "keys in one request", false, func(c *Config) *int { return &c.MaxBatchPages }),
	integer("max-pools-per-user", "", "pools one user may create; 0 = no limit", true, func(c *Config) *int { return &c.PoolsPerUser }),
	size("user-quota", "", "compressed bytes one user may store (K/M/G/T); 0 = no limit", true, func(c *Config) *uint64 { return &c.UserQuota }),
	duration("idle-timeout", "", "close a connection with no request for this long", false, func(c *Config) *time.Duration { return &c.IdleTimeout }),
	duration("frame-timeout", "", "a request must arrive whole within this once it starts, and a reply be read within this once it is being written", false, func(c *Config) *time.Duration { return &c.FrameTimeout }),
	duration("idle-epoch", "", "how coarsely page ages are counted: a page's age is the epochs since it was last read or written (up to 63)", false, func(c *Config) *time.Duration { return &c.IdleEpoch }),
	duration("recompress-every", "", "recompress idle (and huge) pages in the background this often; 0 = only when asked (s4d ctl recompress)", false, func(c *Config) *time.Duration { return &c.RecompressEvery }),
	duration("recompress-idle", "", "the background recompression takes pages idle for this long", false, func(c *Config) *time.Duration { return &c.RecompressIdle }),
	boolean("recompress-huge", "", "the background recompression also takes pages stored raw (huge), whatever their age", false, func(c *Config) *bool { return &c.RecompressHuge }),
	integer("recompress-min-saving", "", "percent of a page's stored bytes a recompression must save to be kept", false, func(c *Config) *int { return &c.RecompressMinSaving }),
	text("metrics-listen", "S4D_METRICS_LISTEN", "serve Prometheus metrics at /metrics on this Unix socket path or loopback host:port (no other address: the endpoint has no authentication); off by default", false, func(c *Config) *string { return &c.MetricsListen }),
	text("backing-file", "S4D_BACKING_FILE", "a preallocated file (on a filesystem with O_DIRECT) or block device that cold pages go to when --mem-limit is reached, instead of being refused", false, func(c *Config) *string { return &c.BackingFile }),
	boolean("backing-verify", "", "read every write to the backing file back before the pages leave RAM: a device that drops writes while reporting success (a loop device over a full tmpfs does) then loses nothing; false saves the reads", false, func(c *Config) *bool { return &c.BackingVerify }),
	boolean("persist", "", "keep pages across a planned restart: a stop writes every page to --backing-file, the next start restores them", false, func(c *Config) *bool { return &c.Persist }),
	boolean("swap-takeover", "", "swap devices outlive the daemon (ublk user recovery): a stop with persist leaves them, swap on, and the next start takes them over with every page as last written (their swapping waits meanwhile); a stop without persist swaps them off and removes them; after kill -9 or a crash the next start takes them over, and a page not written since fails its read (the process touching it gets SIGBUS), never served older; if no daemon comes back, their swapping waits for good. false: a crash fails their I/O at once and a stop always swaps them off", false, func(c *Config) *bool { return &c.SwapTakeover }),
	integer("writeback-headroom", "", "with --backing-file, the percent of --mem-limit kept free in the background by writing the coldest pages to the file, so that PUTs seldom wait for a writeback; 0 = only when a PUT needs room", false, func(c *Config) *int { return &c.WritebackHeadroom }),
	text("remote-tier", "S4D_REMOTE_TIER", "a Valkey (or Redis 7) cluster for cold pages, as the level below --backing-file (the file's pages spill there while less than half of it is free), and for s4d ctl pool export/import: valkey://host:port[,host:port...], valkeys:// for TLS; no credentials in the URL. The start fails, saying why, when the cluster is unreachable, refuses the credentials, the key is missing or of the wrong size, or maxmemory-policy is not noeviction", false, func(c *Config) *string { return &c.RemoteTier }),
	text("remote-ca-file", "", "with valkeys://, PEM certificates that the cluster's TLS certificate must chain to (default: the system's roots)", false, func(c *Config) *string { return &c.RemoteCAFile }),
	text("remote-credentials", "", "a file (mode without access for others) holding the cluster's ACL user and password, one a line, or only a password for user default; default: the systemd credential s4d-remote-credentials ($CREDENTIALS_DIRECTORY), if present", false, func(c *Config) *string { return &c.RemoteCredentials }),
	text("remote-key-file", "", "the remote tier's encryption key: 32 bytes or 64 hex digits in a file without access for others (head -c32 /dev/urandom); default: the systemd credential s4d-remote-key. Daemons that move pools between them share it", false, func(c *Config) *string { return &c.RemoteKeyFile }),
	text("remote-host", "", "the name this daemon's blocks go under in the cluster, unique per daemon (the periodic sweep deletes blocks of this name that its index does not know); default: the host name", false, func(c *Config) *string { return &c.RemoteHost }),
	size("remote-quota", "", "bytes this host may keep in the cluster, K/M/G/T suffix; 0 = no limit", false, func(c *Config) *uint64 { return &c.RemoteQuota }),
	boolean("remote-noeviction", "", "state that every node's maxmemory-policy is noeviction, for an ACL user that may not read it (CONFIG GET); otherwise the start checks it", false, func(c *Config) *bool { return &c.RemoteNoEviction }),
	duration("remote-timeout", "", "the remote tier's timeout: a cluster node that does not answer within it (or refuses the connection) is marked down, and the pages in its blocks answer FAILED at once, while every other page is served, until a probe (every second) finds it answering again or its slots moved to a replica by a failover. One read or spill waits at most this long", false, func(c *Config) *time.Duration { return &c.RemoteTimeout }),
	duration("checkpoint-interval", "", "with persist, how often the pages are recorded on the backing file (and at a stop). A crash (kill -9) loses every page that was only in RAM at the last record, however old, and every page of a pool changed since the last record (a pool's first change after a record is recorded first, so no page comes back older than last written); the next start counts those pages in its log and in bd_stat's lost_at_start, and GETs of them answer not found. 0 = only at a stop", false, func(c *Config) *time.Duration { return &c.CheckpointEvery }),
	{Name: "log-level", Env: "S4D_LOG_LEVEL", Usage: "debug, info, warn or error", Reload: true,
		parse: func(c *Config, v string) error { return c.LogLevel.UnmarshalText([]byte(v)) },
		show:  func(c *Config) string { return strings.ToLower(c.LogLevel.String()) }},
}

// Find returns the setting with this flag name or file key.
func Find(name string) *Setting {
	for i := range Table {
		if Table[i].Name == name || Table[i].Key() == name {
			return &Table[i]
		}
	}
	return nil
}

// Load builds a Config: the defaults, then the file at path (an error if
// it is missing only when named), then set (flag name to value: the flags
// and environment variables given), which win. It validates the result.
func Load(path string, named bool, set map[string]string) (Config, error) {
	c := Defaults()
	if err := c.applyFile(path, named); err != nil {
		return c, err
	}
	var errs []error
	for _, s := range Table {
		if v, ok := set[s.Name]; ok {
			if err := s.parse(&c, v); err != nil {
				errs = append(errs, fmt.Errorf("--%s: %w", s.Name, err))
			}
		}
	}
	if v, ok := os.LookupEnv(swapIOEnv); ok {
		errs = append(errs, c.removedSwapIO(v, swapIOEnv))
	}
	if err := errors.Join(errs...); err != nil {
		return c, &InvalidError{err}
	}
	if err := c.Validate(); err != nil {
		return c, &InvalidError{err}
	}
	return c, nil
}

// InvalidError is a value the daemon cannot take: a malformed flag,
// environment variable or file setting, or settings that do not go
// together. The command line reports it as a usage error (exit 2); a
// configuration file that cannot be read is not one.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

func (c *Config) applyFile(path string, named bool) error {
	var raw map[string]any
	_, err := toml.DecodeFile(path, &raw)
	if errors.Is(err, fs.ErrNotExist) && !named {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if err != nil {
		return &InvalidError{fmt.Errorf("config %s: %w", path, err)}
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		if k == swapKey { // an array of tables, not a setting (swap.go)
			var err error
			if c.Swap, err = ParseSwap(raw[k]); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if k == swapIOKey {
			if err := c.removedSwapIO(fmt.Sprint(raw[k]), k); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		s := Find(k)
		if s == nil || s.Key() != k {
			errs = append(errs, fmt.Errorf("unknown setting %s", k))
			continue
		}
		var v string
		switch x := raw[k].(type) {
		case string:
			v = x
		case int64:
			v = strconv.FormatInt(x, 10)
		case bool:
			v = strconv.FormatBool(x)
		default:
			errs = append(errs, fmt.Errorf("%s: want a string or a number, not %T", k, x))
			continue
		}
		if err := s.parse(c, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &InvalidError{fmt.Errorf("config %s: %w", path, err)}
	}
	return nil
}

// RestartOnly lists, as file keys, the settings that differ between old
// and new and that a reload cannot change.
func RestartOnly(old, new Config) []string {
	var keys []string
	for _, s := range Table {
		if !s.Reload && s.show(&old) != s.show(&new) {
			keys = append(keys, s.Key())
		}
	}
	return keys
}

// FromEnv returns the settings given by environment variables.
func FromEnv() map[string]string {
	set := map[string]string{}
	for _, s := range Table {
		if v, ok := os.LookupEnv(s.Env); ok && s.Env != "" {
			set[s.Name] = v
		}
	}
	return set
}

// swap_io (S4D_SWAP_IO) chose the swap path, native or go, until the Go
// path was removed (issue 40). Kept so that a configuration written for
// the default still starts; one asking for the Go path must not start
// silently without it.
const (
	swapIOKey = "swap_io"
	swapIOEnv = "S4D_SWAP_IO"
)

// removedSwapIO takes swap_io's value v, given as where.
func (c *Config) removedSwapIO(v, where string) error {
	switch v {
	case "native":
		c.Deprecated = append(c.Deprecated, where+` = "native" is deprecated and does nothing: swap is always served by the native path; remove it`)
		return nil
	case "go":
		return fmt.Errorf(`%s = "go": the Go swap path was removed (swap is always served by the native path: LZ4 only, no writeback of swap pages to the backing file); remove %s`, where, where)
	}
	return fmt.Errorf("%s %q: removed setting; swap is always served by the native path: remove it", where, v)
}

// hidden keeps a setting out of the help (testing knobs).
func hidden(s Setting) Setting { s.Hidden = true; return s }

func text(name, env, usage string, reload bool, f func(*Config) *string) Setting {
	return Setting{Name: name, Env: env, Usage: usage, Reload: reload,
		parse: func(c *Config, v string) error { *f(c) = v; return nil },
		show:  func(c *Config) string { return *f(c) }}
}

func integer(name, env, usage string, reload bool, f func(*Config) *int) Setting {
	return Setting{Name: name, Env: env, Usage: usage, Reload: reload,
		parse: func(c *Config, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("%q: want a whole number", v)
			}
			*f(c) = n
			return nil
		},
		show: func(c *Config) string { return strconv.Itoa(*f(c)) }}
}

func boolean(name, env, usage string, reload bool, f func(*Config) *bool) Setting {
	return Setting{Name: name, Env: env, Usage: usage, Reload: reload, Bool: true,
		parse: func(c *Config, v string) error {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("%q: want true or false", v)
			}
			*f(c) = b
			return nil
		},
		show: func(c *Config) string { return strconv.FormatBool(*f(c)) }}
}

// ordinals is a list of distinct device numbers: "0,2".
func ordinals(name, env, usage string, reload bool, f func(*Config) *[]int) Setting {
	return Setting{Name: name, Env: env, Usage: usage, Reload: reload,
		parse: func(c *Config, v string) error {
			var out []int
			for _, part := range strings.Split(v, ",") {
				if part = strings.TrimSpace(part); part == "" {
					continue
				}
				n, err := strconv.Atoi(part)
				if err != nil || n < 0 {
					return fmt.Errorf("%q: want device numbers, like 0,2", v)
				}
				if slices.Contains(out, n) {
					return fmt.Errorf("%q: device %d named twice", v, n)
				}
				out = append(out, n)
			}
			*f(c) = out
			return nil
		},
		show: func(c *Config) string {
			s := make([]string, len(*f(c)))
			for i, n := range *f(c) {
				s[i] = strconv.Itoa(n)
			}
			return strings.Join(s, ",")
		}}
}

func size(name, env, usage string, reload bool, f func(*Config) *uint64) Setting {
	return Setting{Name: name, Env: env, Usage: usage, Reload: reload,
		parse: func(c *Config, v string) (err error) { *f(c), err = bytesize.Parse(v); return err },
		show:  func(c *Config) string { return strconv.FormatUint(*f(c), 10) }}
}

func size64(name, env, usage string, reload bool, f func(*Config) *int64) Setting {
	return Setting{Name: name, Env: env, Usage: usage, Reload: reload,
		parse: func(c *Config, v string) error {
			n, err := bytesize.Parse(v)
			if err == nil && n > 1<<62 {
				err = fmt.Errorf("size %q is too large", v)
			}
			*f(c) = int64(n)
			return err
		},
		show: func(c *Config) string { return strconv.FormatInt(*f(c), 10) }}
}

func duration(name, env, usage string, reload bool, f func(*Config) *time.Duration) Setting {
	return Setting{Name: name, Env: env, Usage: usage, Reload: reload,
		parse: func(c *Config, v string) (err error) {
			*f(c), err = time.ParseDuration(strings.TrimSpace(v))
			return err
		},
		show: func(c *Config) string { return f(c).String() }}
}
