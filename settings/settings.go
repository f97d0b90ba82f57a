// Package settings is what the daemon can be told: one Config, filled from
// defaults, the configuration file, and the flags and environment
// variables that were set (which win), all through one table (table.go)
// that also says what a reload may change.
package settings

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/ipc"
)

// Config is everything the daemon can be told.
type Config struct {
	Socket        string
	SocketMode    uint32 // permissions of a socket we create
	MemLimit      uint64 // bytes of compressed-page memory; 0 = none
	Backend       string // auto, or a backend name to prefer
	Codec         string // lz4 or zstd
	PageSize      int
	MaxFrame      int
	MaxBatchPages int
	MaxConns      int
	// Connections one user may hold at once; 0 = a quarter of MaxConns
	// (at least 16).
	MaxConnsPerUser int
	// Bytes that request bodies, compression outputs and replies in flight
	// may take in all (0 = 1/16 of the machine's memory, 256 MiB-4 GiB),
	// and for one user (0 = half of that).
	IOBudget     int64
	UserIOBudget int64
	IdleTimeout  time.Duration // a connection with no request for this long is closed
	FrameTimeout time.Duration // a request must arrive whole within this
	Workers      int
	WebGPULib    string
	WebGPUCPU    bool // use a CPU adapter (lavapipe) for webgpu
	WebGPUNoSG   bool // webgpu: workgroup-memory scans even with subgroups
	// WGSLRuntime runs the WGSL kernels: "vulkan" (host memory imported,
	// no staging copies), "webgpu" (a webgpu.h library), or "auto".
	WGSLRuntime  string
	NvcompLib    string
	GPUMemLimit  int64
	GPUs         []int         // GPU ordinals to use (--gpus 0,2); nil = every visible one
	GPUPinLimit  int64         // host memory registered with the GPUs, across devices; 0 = a quarter of RAM
	CoalesceWait time.Duration // how long a small batch may wait for others; 0 = never merge
	PollWait     time.Duration // how long a connection polls for its next request before sleeping; 0 = never
	PoolsPerUser int           // pools one user may create; 0 = no limit
	UserQuota    uint64        // stored bytes one user may hold; 0 = no limit
	LogLevel     slog.Level
	Swap         []SwapSpec // [[swap]] tables: devices made at start (swap.go)
	// The cold tier: ages count in epochs of IdleEpoch; every
	// RecompressEvery (0 = never) pages idle for RecompressIdle, and raw
	// ones if RecompressHuge, are recompressed, each kept when it saves
	// RecompressMinSaving percent of its stored bytes.
	IdleEpoch           time.Duration
	RecompressEvery     time.Duration
	RecompressIdle      time.Duration
	RecompressHuge      bool
	RecompressMinSaving int
	// Where /metrics is served: a Unix socket path or a loopback
	// host:port (checked by the metrics package); "" = not served.
	MetricsListen string
	// Where cold pages go under memory pressure ("" = nowhere: pages are
	// refused), whether they outlive a planned restart there, and how
	// often a checkpoint records them against a crash (0 = never).
	BackingFile     string
	BackingVerify   bool // read each write to it back before trusting it
	Persist         bool
	CheckpointEvery time.Duration
	// SwapTakeover makes swap devices outlive the daemon (ublk user
	// recovery; swapdev/keep.go). On by default: shown in the guest
	// (README, "Restarts and crashes"; tests/guest_recovery_test.go).
	SwapTakeover bool
	// Deprecated lists settings given that no longer do anything, for
	// the daemon to log (removedSwapIO).
	Deprecated []string
	// WritebackHeadroom is the percent of MemLimit kept free in the
	// background by writing the coldest pages to the backing file, so
	// that a PUT seldom writes back itself (0 = only when one must).
	WritebackHeadroom int
	// The remote tier (remote/): a Valkey cluster below the backing file,
	// and the cross-host pool export/import. Secrets come from files (or
	// systemd credentials), never from the command line.
	RemoteTier        string // valkey://h:p[,h:p...] or valkeys://; "" = none
	RemoteCAFile      string
	RemoteCredentials string // "user\npassword" file; "" = $CREDENTIALS_DIRECTORY/s4d-remote-credentials if present
	RemoteKeyFile     string // 32-byte key file; "" = $CREDENTIALS_DIRECTORY/s4d-remote-key
	RemoteHost        string // name of this host's blocks; "" = the host name
	RemoteQuota       uint64 // bytes this host may keep in the cluster; 0 = no limit
	RemoteNoEviction  bool   // the operator states maxmemory-policy is noeviction
	// RemoteTimeout bounds one call to the cluster: a node that does not
	// answer within it is marked down and its pages fail at once until a
	// probe finds it back (remote.Options.Timeout).
	RemoteTimeout time.Duration
	Log           *slog.Logger
	// Level, when set, is the log handler's level; a reload changes it.
	Level *slog.LevelVar
}

// Defaults returns the configuration used when nothing is set.
func Defaults() Config {
	return Config{
		Socket:        ipc.DefaultSocketPath,
		SocketMode:    0o660,
		Backend:       "auto",
		Codec:         "lz4",
		PageSize:      4096,
		MaxFrame:      ipc.DefaultMaxFrame,
		MaxBatchPages: ipc.DefaultMaxBatchPages,
		MaxConns:      1024,
		PoolsPerUser:  1024,
		CoalesceWait:  200 * time.Microsecond,
		PollWait:      200 * time.Microsecond,
		IdleTimeout:   10 * time.Minute,
		FrameTimeout:  30 * time.Second,

		IdleEpoch:           time.Minute,
		RecompressIdle:      30 * time.Minute,
		RecompressHuge:      true,
		RecompressMinSaving: 10,
		CheckpointEvery:     time.Minute,
		BackingVerify:       true,
		WritebackHeadroom:   10,
		SwapTakeover:        true,
		WGSLRuntime:         "auto",
		RemoteTimeout:       5 * time.Second, // remote.DefaultTimeout
	}
}

// Validate checks the settings that can be wrong.
func (c *Config) Validate() error {
	if c.PageSize < 4096 || c.PageSize > 65536 || c.PageSize&(c.PageSize-1) != 0 {
		return fmt.Errorf("page size %d: must be a power of two from 4096 to 65536", c.PageSize)
	}
	if c.Codec != "lz4" && c.Codec != "zstd" {
		return fmt.Errorf("codec %q: must be lz4 or zstd", c.Codec)
	}
	if c.Socket == "" {
		return fmt.Errorf("socket path is empty")
	}
	if c.MaxConns < 1 || c.MaxConnsPerUser < 0 {
		return fmt.Errorf("max connections must be at least 1 (per user: 0 for the default)")
	}
	if c.IOBudget < 0 || c.UserIOBudget < 0 {
		return fmt.Errorf("io budgets cannot be negative")
	}
	if err := c.validateCold(); err != nil {
		return err
	}
	switch c.WGSLRuntime {
	case "auto", "vulkan", "webgpu":
	default:
		return fmt.Errorf("wgsl runtime %q: must be auto, vulkan or webgpu", c.WGSLRuntime)
	}
	if c.Persist && c.BackingFile == "" {
		return fmt.Errorf("persist needs a backing file (--backing-file)")
	}
	if c.CheckpointEvery < 0 {
		return fmt.Errorf("checkpoint interval cannot be negative")
	}
	if c.RemoteTimeout < 100*time.Millisecond {
		return fmt.Errorf("remote timeout %v: must be at least 100ms", c.RemoteTimeout)
	}
	if c.WritebackHeadroom < 0 || c.WritebackHeadroom > 50 {
		return fmt.Errorf("writeback headroom %d%%: must be 0 to 50", c.WritebackHeadroom)
	}
	if c.MaxBatchPages < 1 {
		return fmt.Errorf("max batch pages must be at least 1")
	}
	// The largest PUT must fit in a frame.
	if need := ipc.HeaderSize + ipc.PutBodySize(strings.Repeat("x", ipc.MaxPoolName), c.MaxBatchPages, c.PageSize); c.MaxFrame < need {
		return fmt.Errorf("max frame %d is too small for %d pages of %d bytes (needs %d)", c.MaxFrame, c.MaxBatchPages, c.PageSize, need)
	}
	// One user must be able to make the largest request: its body and the
	// compressed output of its pages.
	if need := c.LargestRequest(); c.UserIOBudget > 0 && c.UserIOBudget < need || c.IOBudget > 0 && c.IOBudget < need {
		return fmt.Errorf("io budget (%d, per user %d) is smaller than the largest request needs (%d)", c.IOBudget, c.UserIOBudget, need)
	}
	return nil
}

// LargestRequest is the memory the largest PUT takes in flight.
func (c *Config) LargestRequest() int64 {
	return int64(c.MaxFrame) + int64(c.MaxBatchPages)*int64(c.PageSize)
}

// ConnsPerUser is MaxConnsPerUser with its default filled in: a quarter
// of MaxConns, but never fewer than 16 (or MaxConns), so that a small
// limit does not leave one user a single connection.
func (c *Config) ConnsPerUser() int {
	if c.MaxConnsPerUser > 0 {
		return min(c.MaxConnsPerUser, c.MaxConns)
	}
	return max(c.MaxConns/4, min(c.MaxConns, 16))
}

// IOBudgets are IOBudget and UserIOBudget with their defaults filled in.
func (c *Config) IOBudgets() (total, perUser int64) {
	total, perUser = c.IOBudget, c.UserIOBudget
	if total == 0 {
		total = max(defaultBudget(), 2*c.LargestRequest())
	}
	if perUser == 0 {
		perUser = max(total/2, c.LargestRequest())
	}
	return max(total, perUser), perUser
}

// defaultBudget is 1/16 of the machine's memory, within 256 MiB and 4 GiB:
// room for a few dozen of the largest requests at once.
func defaultBudget() int64 {
	var total int64 = 4 << 30
	if mem := physicalMemory(); mem > 0 {
		total = min(max(mem/16, 256<<20), 4<<30)
	}
	return total
}

func physicalMemory() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// validateCold checks the cold tier's settings.
func (c *Config) validateCold() error {
	if c.IdleEpoch < time.Second {
		return fmt.Errorf("idle epoch %v: must be at least 1s", c.IdleEpoch)
	}
	if c.RecompressEvery < 0 || c.RecompressIdle < 0 {
		return fmt.Errorf("recompress-every and recompress-idle cannot be negative")
	}
	if c.RecompressMinSaving < 0 || c.RecompressMinSaving > 99 {
		return fmt.Errorf("recompress min saving %d%%: must be 0 to 99", c.RecompressMinSaving)
	}
	return nil
}
