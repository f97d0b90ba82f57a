package daemoncmd

// How `s4d daemon --help` presents the settings: grouped by topic, each in
// a line or two with a real placeholder (SIZE, not "value"). A usage
// string starts with its placeholder in back quotes, which urfave/cli takes
// as the flag's placeholder; Placeholder strips it from the text that
// follows (FlagStringer in main, the man pages in cmd/s4d/docs).
// The full text of each setting, from settings.Table, is in s4d.toml(5)
// and docs/reference/config.md; the man page of `s4d daemon` says so.

const (
	catSocket  = "Socket and clients:"
	catMemory  = "Memory and limits:"
	catEngines = "Engines and GPUs:"
	catCold    = "Cold pages, backing file, persist:"
	catRemote  = "Remote tier (Valkey):"
	catOps     = "Logging and metrics:"
	catOther   = "Other:"
)

type flagHelp struct{ cat, usage string }

// daemonHelp is the short help of each setting. A setting missing here
// still gets a flag, under "Other:", with its full usage (TestDaemonHelp
// lists the ones missing, so none is forgotten for long).
var daemonHelp = map[string]flagHelp{
	"socket":                   {catSocket, "`PATH` Unix socket to listen on when not started by s4d.socket"},
	"socket-mode":              {catSocket, "`MODE` permissions of the socket file, in octal"},
	"max-connections":          {catSocket, "`N` connections served at once"},
	"max-connections-per-user": {catSocket, "`N` connections one user may hold; 0 = a quarter of --max-connections, at least 16"},
	"idle-timeout":             {catSocket, "`DURATION` close a connection idle this long"},
	"frame-timeout":            {catSocket, "`DURATION` time for a request to arrive whole, and for a reply to be read"},
	"poll-wait":                {catSocket, "`DURATION` time a connection polls for its next request before sleeping; 0 = never"},
	"max-batch-pages":          {catSocket, "`N` most keys in one request"},

	"mem-limit":          {catMemory, "`SIZE` RAM for compressed pages (K/M/G/T suffix); 0 = no limit"},
	"user-quota":         {catMemory, "`SIZE` compressed bytes one user may store; 0 = no limit"},
	"max-pools-per-user": {catMemory, "`N` pools one user may create; 0 = no limit"},
	"io-budget":          {catMemory, "`SIZE` memory for requests in flight; 0 = 1/16 of RAM (256M-4G)"},
	"user-io-budget":     {catMemory, "`SIZE` part of --io-budget one user may take; 0 = half"},

	"backend":             {catEngines, "`ENGINE` engine to prefer: auto, cpu, webgpu or cuda (the others stay as fallbacks)"},
	"codec":               {catEngines, "`CODEC` codec for new pages: lz4 (fast) or zstd (smaller)"},
	"page-size":           {catEngines, "`BYTES` page size: a power of two from 4096 to 65536"},
	"workers":             {catEngines, "`N` CPU compression goroutines per batch; 0 = one per core"},
	"coalesce-wait":       {catEngines, "`DURATION` time a small batch may wait to travel with others to a GPU; 0 = never"},
	"gpus":                {catEngines, "`LIST` GPUs cuda may use, ordinals after CUDA_VISIBLE_DEVICES (0,2); empty = all"},
	"gpu-mem-limit":       {catEngines, "`SIZE` device memory cuda may use on each GPU; 0 = 2G"},
	"gpu-pin-limit":       {catEngines, "`SIZE` host memory registered with the GPUs; 0 = a quarter of RAM"},
	"nvcomp-lib":          {catEngines, "`PATH` libnvcomp.so.N to load; default: searched"},
	"webgpu-lib":          {catEngines, "`PATH` webgpu.h library to load (Dawn, wgpu-native); default: searched"},
	"webgpu-cpu":          {catEngines, "`true|false` let webgpu run on a CPU adapter (lavapipe): correct but slower than cpu"},
	"wgsl-runtime":        {catEngines, "`auto|vulkan|webgpu` what runs the WGSL kernels: vulkan imports client memory; auto takes it on GPUs that can"},
	"webgpu-no-subgroups": {catEngines, "`true|false` webgpu: workgroup-memory scans even with subgroups (testing)"},

	"idle-epoch":            {catCold, "`DURATION` unit in which page ages are counted"},
	"recompress-every":      {catCold, "`DURATION` interval of background recompression of idle pages; 0 = only when asked"},
	"recompress-idle":       {catCold, "`DURATION` idle time after which the background recompression takes a page"},
	"recompress-huge":       {catCold, "`true|false` the background recompression also takes pages stored raw"},
	"recompress-min-saving": {catCold, "`PERCENT` saving a recompression must reach to be kept"},
	"backing-file":          {catCold, "`PATH` preallocated file or block device for cold pages past --mem-limit"},
	"backing-verify":        {catCold, "`true|false` read every write to the backing file back before its pages leave RAM"},
	"writeback-headroom":    {catCold, "`PERCENT` share of --mem-limit kept free by writing cold pages ahead; 0 = only when needed"},
	"persist":               {catCold, "`true|false` keep every page across a planned restart, on --backing-file"},
	"checkpoint-interval":   {catCold, "`DURATION` interval of records against a crash, with --persist; 0 = only at a stop"},
	"swap-takeover":         {catCold, "`true|false` swap devices outlive the daemon; the next start takes them over (s4d.toml(5))"},

	"remote-tier":        {catRemote, "`URL` Valkey cluster below the backing file: valkey://host:port[,host:port...] (valkeys:// for TLS)"},
	"remote-ca-file":     {catRemote, "`PATH` PEM certificates the cluster's must chain to (valkeys://)"},
	"remote-credentials": {catRemote, "`PATH` file with the cluster's ACL user and password; default: systemd credential s4d-remote-credentials"},
	"remote-key-file":    {catRemote, "`PATH` file with the 32-byte encryption key; default: systemd credential s4d-remote-key"},
	"remote-host":        {catRemote, "`NAME` name of this daemon's blocks, unique per daemon; default: the host name"},
	"remote-quota":       {catRemote, "`SIZE` bytes this host may keep in the cluster; 0 = no limit"},
	"remote-noeviction":  {catRemote, "`true|false` state that every node's maxmemory-policy is noeviction (for an ACL user that may not check)"},
	"remote-timeout":     {catRemote, "`DURATION` time after which a silent node is marked down and its pages fail at once"},

	"log-level":      {catOps, "`LEVEL` debug, info, warn or error"},
	"metrics-listen": {catOps, "`ADDRESS` serve /metrics on a Unix socket path or a loopback host:port; off by default"},
}
