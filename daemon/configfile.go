package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// DefaultConfigFile is read when no other file is named.
const DefaultConfigFile = "/etc/s4d/s4d.toml"

// File is the configuration file: the same settings as the daemon's flags,
// with dashes as underscores. A key left out keeps its default.
type File struct {
	Socket        *string `toml:"socket"`
	SocketMode    *string `toml:"socket_mode"`
	MemLimit      *string `toml:"mem_limit"`
	Backend       *string `toml:"backend"`
	Codec         *string `toml:"codec"`
	PageSize      *int    `toml:"page_size"`
	Workers       *int    `toml:"workers"`
	WebGPULib     *string `toml:"webgpu_lib"`
	NvcompLib     *string `toml:"nvcomp_lib"`
	GPUMemLimit   *string `toml:"gpu_mem_limit"`
	LogLevel      *string `toml:"log_level"`
	IdleTimeout   *string `toml:"idle_timeout"`
	FrameTimeout  *string `toml:"frame_timeout"`
	MaxConns      *int    `toml:"max_connections"`
	MaxConnsUser  *int    `toml:"max_connections_per_user"`
	IOBudget      *string `toml:"io_budget"`
	UserIOBudget  *string `toml:"user_io_budget"`
	MaxBatchPages *int    `toml:"max_batch_pages"`
	PoolsPerUser  *int    `toml:"max_pools_per_user"`
	UserQuota     *string `toml:"user_quota"`
	CoalesceWait  *string `toml:"coalesce_wait"`
	PollWait      *string `toml:"poll_wait"`
	MetricsListen *string `toml:"metrics_listen"`
}

// LoadFile reads a configuration file. A missing file is an error only when
// mustExist (it was named explicitly); otherwise it yields an empty File.
func LoadFile(path string, mustExist bool) (*File, error) {
	var f File
	md, err := toml.DecodeFile(path, &f)
	if errors.Is(err, fs.ErrNotExist) && !mustExist {
		return &f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		sort.Strings(keys)
		return nil, fmt.Errorf("config %s: unknown setting %s", path, strings.Join(keys, ", "))
	}
	return &f, nil
}

// Apply writes the settings present in f into c.
func (f *File) Apply(c *Config) error {
	var errs []error
	set := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if f.Socket != nil {
		c.Socket = *f.Socket
	}
	if f.SocketMode != nil {
		m, err := strconv.ParseUint(*f.SocketMode, 8, 32)
		if err == nil && m > 0o777 {
			err = errors.New("not a permission mode")
		}
		set("socket_mode", err)
		c.SocketMode = uint32(m)
	}
	if f.MemLimit != nil {
		v, err := ParseSize(*f.MemLimit)
		set("mem_limit", err)
		c.MemLimit = v
	}
	if f.Backend != nil {
		c.Backend = *f.Backend
	}
	if f.Codec != nil {
		c.Codec = *f.Codec
	}
	if f.PageSize != nil {
		c.PageSize = *f.PageSize
	}
	if f.Workers != nil {
		c.Workers = *f.Workers
	}
	if f.WebGPULib != nil {
		c.WebGPULib = *f.WebGPULib
	}
	if f.NvcompLib != nil {
		c.NvcompLib = *f.NvcompLib
	}
	if f.GPUMemLimit != nil {
		v, err := ParseSize(*f.GPUMemLimit)
		set("gpu_mem_limit", err)
		c.GPUMemLimit = int64(v)
	}
	if f.LogLevel != nil {
		var l slog.Level
		set("log_level", l.UnmarshalText([]byte(*f.LogLevel)))
		c.LogLevel = l
	}
	if f.IdleTimeout != nil {
		d, err := time.ParseDuration(*f.IdleTimeout)
		set("idle_timeout", err)
		c.IdleTimeout = d
	}
	if f.FrameTimeout != nil {
		d, err := time.ParseDuration(*f.FrameTimeout)
		set("frame_timeout", err)
		c.FrameTimeout = d
	}
	if f.MaxConns != nil {
		c.MaxConns = *f.MaxConns
	}
	if f.MaxConnsUser != nil {
		c.MaxConnsPerUser = *f.MaxConnsUser
	}
	if f.IOBudget != nil {
		v, err := ParseSize(*f.IOBudget)
		set("io_budget", err)
		c.IOBudget = int64(v)
	}
	if f.UserIOBudget != nil {
		v, err := ParseSize(*f.UserIOBudget)
		set("user_io_budget", err)
		c.UserIOBudget = int64(v)
	}
	if f.MaxBatchPages != nil {
		c.MaxBatchPages = *f.MaxBatchPages
	}
	if f.CoalesceWait != nil {
		d, err := time.ParseDuration(*f.CoalesceWait)
		set("coalesce_wait", err)
		c.CoalesceWait = d
	}
	if f.PollWait != nil {
		d, err := time.ParseDuration(*f.PollWait)
		set("poll_wait", err)
		c.PollWait = d
	}
	if f.PoolsPerUser != nil {
		c.PoolsPerUser = *f.PoolsPerUser
	}
	if f.MetricsListen != nil {
		c.MetricsListen = *f.MetricsListen
	}
	if f.UserQuota != nil {
		v, err := ParseSize(*f.UserQuota)
		set("user_quota", err)
		c.UserQuota = v
	}
	return errors.Join(errs...)
}

// restartOnly lists what a reload cannot change, as config keys.
func restartOnly(old, new Config) []string {
	var keys []string
	add := func(changed bool, key string) {
		if changed {
			keys = append(keys, key)
		}
	}
	add(old.Socket != new.Socket, "socket")
	add(old.SocketMode != new.SocketMode, "socket_mode")
	add(old.Codec != new.Codec, "codec")
	add(old.PageSize != new.PageSize, "page_size")
	add(old.Workers != new.Workers, "workers")
	add(old.WebGPULib != new.WebGPULib, "webgpu_lib")
	add(old.NvcompLib != new.NvcompLib, "nvcomp_lib")
	add(old.GPUMemLimit != new.GPUMemLimit, "gpu_mem_limit")
	add(old.IdleTimeout != new.IdleTimeout, "idle_timeout")
	add(old.FrameTimeout != new.FrameTimeout, "frame_timeout")
	add(old.MaxConns != new.MaxConns, "max_connections")
	add(old.MaxConnsPerUser != new.MaxConnsPerUser, "max_connections_per_user")
	add(old.IOBudget != new.IOBudget, "io_budget")
	add(old.UserIOBudget != new.UserIOBudget, "user_io_budget")
	add(old.MaxBatchPages != new.MaxBatchPages, "max_batch_pages")
	add(old.CoalesceWait != new.CoalesceWait, "coalesce_wait")
	add(old.PollWait != new.PollWait, "poll_wait")
	add(old.MetricsListen != new.MetricsListen, "metrics_listen")
	return keys
}
