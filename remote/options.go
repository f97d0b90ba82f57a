package remote

import (
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// Options configure a Cluster. Zero fields take the defaults below.
type Options struct {
	Addrs    []string // seed nodes, host:port
	User     string   // ACL user; "default" when empty
	Password string   // empty: no AUTH
	TLS      *tls.Config
	RESP2    bool // speak RESP2 (plain AUTH, no HELLO 3)

	// Timeout is the tier's timeout: the longest one call waits on a
	// node that does not answer (a dial, a reply with no progress, the
	// retries of a redirect or a refusal) before that node's commands
	// fail and the node is marked down. While a node is down, commands
	// for its slots fail at once (ErrNodeDown) until a probe, every
	// ProbeEvery, finds it answering again or finds its slots moved to
	// a live node (a failover). 5 s; the fields below default to it.
	Timeout     time.Duration
	ProbeEvery  time.Duration // 1 s, at most Timeout
	DialTimeout time.Duration // 2 s, at most Timeout
	IOTimeout   time.Duration // Timeout, with no progress on a connection
	RetryFor    time.Duration // Timeout: how long redirects and a failover's refusals (TRYAGAIN, CLUSTERDOWN) are retried
	PoolSize    int           // 4 idle connections kept per node
	Limits      Limits        // DefaultLimits

	// MinReplicas is how many replicas must acknowledge a write (WAIT)
	// before it counts, capped by the replicas its master has: 1 by
	// default, -1 for none.
	MinReplicas int
	WaitTimeout time.Duration // 2 s, at most Timeout/2
}

// DefaultTimeout is Options.Timeout's default (--remote-timeout).
const DefaultTimeout = 5 * time.Second

func (o *Options) user() string {
	if o.User == "" {
		return "default"
	}
	return o.User
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ProbeEvery <= 0 {
		o.ProbeEvery = min(time.Second, o.Timeout)
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = min(2*time.Second, o.Timeout)
	}
	if o.IOTimeout <= 0 {
		o.IOTimeout = o.Timeout
	}
	if o.RetryFor <= 0 {
		o.RetryFor = o.Timeout
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 4
	}
	if o.Limits == (Limits{}) {
		o.Limits = DefaultLimits
	}
	if o.MinReplicas == 0 {
		o.MinReplicas = 1
	}
	// A WAIT must end well within the call's time, or a master whose
	// replica is slow would be taken for a node down.
	if o.WaitTimeout <= 0 || o.WaitTimeout > o.Timeout/2 {
		o.WaitTimeout = min(2*time.Second, o.Timeout/2)
	}
	return o
}

// ParseURL reads valkey://host:port[,host:port...] (valkeys:// for TLS;
// redis:// and rediss:// are accepted too). Credentials in the URL are
// refused: they belong in a file, not on a command line.
func ParseURL(s string) (addrs []string, useTLS bool, err error) {
	// Parsed by hand: net/url refuses several hosts with IPv6 literals.
	scheme, rest, ok := strings.Cut(s, "://")
	switch {
	case !ok:
		return nil, false, fmt.Errorf("remote: %q: want valkey://host:port[,host:port...]", s)
	case scheme == "valkey" || scheme == "redis":
	case scheme == "valkeys" || scheme == "rediss":
		useTLS = true
	default:
		return nil, false, fmt.Errorf("remote: %q: scheme must be valkey:// or valkeys://", s)
	}
	if strings.Contains(rest, "@") {
		return nil, false, fmt.Errorf("remote: %q: no credentials in the URL; give a credentials file", s)
	}
	rest = strings.TrimSuffix(rest, "/")
	if strings.ContainsAny(rest, "/?#") {
		return nil, false, fmt.Errorf("remote: %q: only host:port[,host:port...] after the scheme", s)
	}
	for _, a := range strings.Split(rest, ",") {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return nil, false, fmt.Errorf("remote: %q: %q is not host:port", s, a)
		}
		addrs = append(addrs, a)
	}
	return addrs, useTLS, nil
}

// readSecret reads a small secret file (a systemd credential is one) and
// refuses one that anybody on the machine may read or write.
func readSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() > 4096 {
		return nil, fmt.Errorf("remote: %s: not a small regular file", path)
	}
	if st.Mode().Perm()&0o007 != 0 {
		return nil, fmt.Errorf("remote: %s: mode %v lets others read it; chmod o-rwx", path, st.Mode().Perm())
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("remote: %s: %w", path, err)
	}
	return b, nil
}

// ReadCredentials reads an ACL user and password: two lines, user then
// password; a single line is the password of user "default".
func ReadCredentials(path string) (user, password string, err error) {
	b, err := readSecret(path)
	if err != nil {
		return "", "", err
	}
	lines := strings.Split(strings.TrimRight(string(b), "\r\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	switch {
	case len(lines) == 1 && lines[0] != "":
		return "default", lines[0], nil
	case len(lines) == 2 && lines[0] != "" && lines[1] != "" && !strings.ContainsAny(lines[0], " \t"):
		return lines[0], lines[1], nil
	}
	return "", "", fmt.Errorf("remote: %s: want \"user\\npassword\\n\" or \"password\\n\"", path)
}

// KeySize is the master key's size: AES-256.
const KeySize = 32

// ReadKey reads the master key: 32 raw bytes, or 64 hex digits and an
// optional newline.
func ReadKey(path string) ([]byte, error) {
	b, err := readSecret(path)
	if err != nil {
		return nil, err
	}
	if len(b) == KeySize {
		return b, nil
	}
	s := strings.TrimRight(string(b), "\r\n")
	if len(s) == 2*KeySize {
		if k, err := hex.DecodeString(s); err == nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("remote: %s: want %d raw bytes or %d hex digits (e.g. head -c32 /dev/urandom > FILE)", path, KeySize, 2*KeySize)
}
