package remote

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, in string, lim Limits) (Value, error) {
	t.Helper()
	return newReader(strings.NewReader(in), lim).next()
}

func TestRESPTypes(t *testing.T) {
	cases := []struct {
		in   string
		want func(Value) bool
	}{
		{"+OK\r\n", func(v Value) bool { return string(v.Str) == "OK" }},
		{"-MOVED 1 h:1\r\n", func(v Value) bool { return v.Err().(ServerError).Code() == "MOVED" }},
		{":-42\r\n", func(v Value) bool { return v.Int == -42 }},
		{"$5\r\nab\r\nc\r\n", func(v Value) bool { return string(v.Str) == "ab\r\nc" }},
		{"$0\r\n\r\n", func(v Value) bool { return v.Kind == '$' && !v.Null && len(v.Str) == 0 }},
		{"$-1\r\n", func(v Value) bool { return v.Null }},
		{"*-1\r\n", func(v Value) bool { return v.Null }},
		{"_\r\n", func(v Value) bool { return v.Null }},
		{"#t\r\n", func(v Value) bool { return v.Int == 1 }},
		{",1.5\r\n", func(v Value) bool { return string(v.Str) == "1.5" }},
		{"=8\r\ntxt:abcd\r\n", func(v Value) bool { return string(v.Str) == "abcd" }},
		{"!3\r\nERR\r\n", func(v Value) bool { return v.Err() != nil }},
		{"%1\r\n+maxmemory-policy\r\n$10\r\nnoeviction\r\n", func(v Value) bool {
			return len(v.Elems) == 2 && string(v.Elems[1].Str) == "noeviction"
		}},
		{"*2\r\n:1\r\n*1\r\n$1\r\nx\r\n", func(v Value) bool { return string(v.Elems[1].Elems[0].Str) == "x" }},
		// An attribute is dropped; a push is skipped: neither is the reply.
		{"|1\r\n+a\r\n+b\r\n:7\r\n", func(v Value) bool { return v.Int == 7 }},
		{">2\r\n+invalidate\r\n_\r\n:9\r\n", func(v Value) bool { return v.Int == 9 }},
	}
	for _, c := range cases {
		v, err := parse(t, c.in, DefaultLimits)
		if err != nil || !c.want(v) {
			t.Errorf("%q: got %+v, %v", c.in, v, err)
		}
	}
}

// A server that claims huge sizes must not make us allocate them, and
// malformed framing is a protocol error, never a value.
func TestRESPLimits(t *testing.T) {
	lim := Limits{MaxBulk: 100, MaxElems: 10, MaxDepth: 3, MaxReply: 300}
	bad := []string{
		"$101\r\n",                       // bulk over the limit
		"$9223372036854775807\r\n",       // absurd claim
		"$999999999999999999999\r\n",     // overflow
		"*11\r\n",                        // too many elements
		"%6\r\n",                         // a map counts twice
		"*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", // too deep
		"*3\r\n$100\r\n" + strings.Repeat("x", 100) + "\r\n$100\r\n" + strings.Repeat("x", 100) + "\r\n$100\r\n" + strings.Repeat("x", 100) + "\r\n", // reply budget
		"$3\r\nabcd\r\n", // no CRLF after the bulk
		"+OK\n",          // bare LF
		":12a\r\n",       // bad integer
		"$-2\r\n",        // negative length
		"?\r\n",          // unknown type
		"#x\r\n",         // bad boolean
		"+" + strings.Repeat("a", readBufSize) + "\r\n", // endless line
	}
	for _, in := range bad {
		if _, err := parse(t, in, lim); !errors.Is(err, ErrProtocol) {
			t.Errorf("%.40q: err %v, want ErrProtocol", in, err)
		}
	}
	// A truncated reply is an I/O error, not a value.
	if _, err := parse(t, "$10\r\nabc", lim); err == nil {
		t.Error("truncated bulk accepted")
	}
}

func TestWriteCmd(t *testing.T) {
	big := bytes.Repeat([]byte{'z'}, 10000)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if _, err := writeCmd(w, nil, [][]byte{[]byte("SET"), []byte("k"), big}); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	want := appendCmd(nil, [][]byte{[]byte("SET"), []byte("k"), big})
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("writeCmd and appendCmd differ")
	}
	v, err := newReader(&buf, DefaultLimits).next()
	if err != nil || len(v.Elems) != 3 || !bytes.Equal(v.Elems[2].Str, big) {
		t.Fatalf("round trip: %v", err)
	}
}

func TestSlot(t *testing.T) {
	// Reference values from the cluster specification's CRC16 (XMODEM).
	for key, want := range map[string]int{"123456789": 0x31C3 % numSlots, "foo": 12182, "{user1000}.following": Slot([]byte("user1000")), "a{}b": Slot([]byte("a{}b"))} {
		if got := Slot([]byte(key)); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestParseURL(t *testing.T) {
	addrs, tls, err := ParseURL("valkeys://10.0.0.1:6379,[::1]:7000")
	if err != nil || !tls || len(addrs) != 2 || addrs[1] != "[::1]:7000" {
		t.Fatalf("%v %v %v", addrs, tls, err)
	}
	for _, bad := range []string{"valkey://u:p@h:1", "http://h:1", "valkey://h", "valkey://h:1/0", "valkey://h:1,"} {
		if _, _, err := ParseURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	w := func(name, s string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	if u, p, err := ReadCredentials(w("c1", "s4d\npa ss\n", 0o600)); err != nil || u != "s4d" || p != "pa ss" {
		t.Errorf("two lines: %q %q %v", u, p, err)
	}
	if u, p, err := ReadCredentials(w("c2", "secret", 0o400)); err != nil || u != "default" || p != "secret" {
		t.Errorf("one line: %q %q %v", u, p, err)
	}
	for _, bad := range []string{"", "\n", "a\nb\nc\n", "a b\npw\n"} {
		if _, _, err := ReadCredentials(w("c3", bad, 0o600)); err == nil {
			t.Errorf("credentials %q accepted", bad)
		}
	}
	if _, _, err := ReadCredentials(w("c4", "pw\n", 0o644)); err == nil || !strings.Contains(err.Error(), "o-rwx") {
		t.Errorf("world-readable credentials: %v", err)
	}
	k := strings.Repeat("ab", 32)
	if key, err := ReadKey(w("k1", k+"\n", 0o600)); err != nil || len(key) != 32 || key[0] != 0xab {
		t.Errorf("hex key: %v", err)
	}
	if _, err := ReadKey(w("k2", strings.Repeat("x", 32), 0o600)); err != nil {
		t.Errorf("raw key: %v", err)
	}
	for _, bad := range []string{"short", k[:62] + "zz", strings.Repeat("x", 33)} {
		if _, err := ReadKey(w("k3", bad, 0o600)); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
}

// Arbitrary bytes never panic the reader, and what it accepts stays
// within its limits.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "$3\r\nabc\r\n", "*2\r\n:1\r\n%1\r\n+a\r\n_\r\n", "|1\r\n+a\r\n+b\r\n:7\r\n", "=8\r\ntxt:abcd\r\n"} {
		f.Add([]byte(s))
	}
	lim := Limits{MaxBulk: 1000, MaxElems: 50, MaxDepth: 4, MaxReply: 4000}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := newReader(bytes.NewReader(in), lim)
		for range 4 {
			v, err := r.next()
			if err != nil {
				return
			}
			var walk func(Value, int)
			walk = func(v Value, d int) {
				if d > lim.MaxDepth || len(v.Str) > lim.MaxBulk || len(v.Elems) > lim.MaxElems {
					t.Fatalf("reply over the limits: depth %d, %d bytes, %d elements", d, len(v.Str), len(v.Elems))
				}
				for _, e := range v.Elems {
					walk(e, d+1)
				}
			}
			walk(v, 0)
		}
	})
}

// A server that accepts and never answers, or answers without end, costs
// the client one IOTimeout and bounded memory, not a hang.
func TestSilentAndEndlessServers(t *testing.T) {
	for name, serve := range map[string]func(net.Conn){
		"silent":  func(c net.Conn) { io.Copy(io.Discard, c) },
		"endless": func(c net.Conn) { c.Write([]byte("*65536\r\n")); c.Write(bytes.Repeat([]byte("*65536\r\n"), 1<<16)) },
		"huge": func(c net.Conn) {
			c.Write([]byte("$16777216\r\n"))
			c.Write(make([]byte, 1<<20))
			io.Copy(io.Discard, c)
		},
	} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); serve(c) }()
			}
		}()
		start := time.Now()
		_, err = Dial(context.Background(), Options{Addrs: []string{l.Addr().String()}, IOTimeout: 300 * time.Millisecond,
			Limits: Limits{MaxBulk: 1 << 20, MaxElems: 1000, MaxDepth: 4, MaxReply: 1 << 20}})
		l.Close()
		if err == nil {
			t.Fatalf("%s server: Dial succeeded", name)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s server: Dial took %v", name, d)
		}
		if name != "silent" && !errors.Is(err, ErrProtocol) {
			t.Fatalf("%s server: %v, want ErrProtocol", name, err)
		}
		t.Logf("%s server: %v", name, err)
	}
}
