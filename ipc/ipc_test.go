package ipc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	h := Header{Version: Version, Op: OpGet, Status: CodeNotFound, Flags: FlagResponse, ID: 0x0102030405060708}
	f := Frame(h, []byte("body"))
	got, body, err := ReadFrame(bytes.NewReader(f), 1<<20, nil)
	if err != nil || got != h || string(body) != "body" {
		t.Fatalf("got %+v %q %v", got, body, err)
	}
	if _, _, err := ReadFrame(bytes.NewReader(f), 10, nil); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("limit: %v", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{3, 0, 0, 0, 1, 2, 3}), 1<<20, nil); !errors.Is(err, ErrShortFrame) {
		t.Fatalf("short: %v", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader(f[:len(f)-1]), 1<<20, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
}

// The worked example in PROTOCOL.md, byte for byte.
func TestProtocolExample(t *testing.T) {
	body := AppendKeys(nil, OpGet, &KeysRequest{Pool: "demo", Keys: []uint64{7}})
	f := Frame(Header{Version: Version, Op: OpGet, ID: 1}, body)
	want := "22000000 01 03 0000 00000000 0100000000000000 0400 64656d6f 01000000 0700000000000000"
	if got := spaced(f); got != strings.ReplaceAll(want, " ", "") {
		t.Fatalf("GET example frame\n got %s\nwant %s", got, want)
	}
}

func spaced(b []byte) string { return fmt.Sprintf("%x", b) }

func TestMessages(t *testing.T) {
	p := &PutRequest{Pool: "p1", PageSize: 8, Keys: []uint64{1, 2}, Pages: []byte("aaaaaaaabbbbbbbb")}
	got, err := DecodePut(AppendPut(nil, p))
	if err != nil || got.Pool != "p1" || got.PageSize != 8 || len(got.Keys) != 2 || string(got.Pages) != string(p.Pages) {
		t.Fatalf("put: %+v %v", got, err)
	}
	bad := AppendPut(nil, p)
	if _, err := DecodePut(bad[:len(bad)-1]); err == nil {
		t.Fatal("short put accepted")
	}
	k := &KeysRequest{Pool: "x", Keys: []uint64{9, 10}, WithData: true}
	gk, err := DecodeKeys(OpInspect, AppendKeys(nil, OpInspect, k))
	if err != nil || !gk.WithData || gk.Keys[1] != 10 {
		t.Fatalf("keys: %+v %v", gk, err)
	}
	if _, err := DecodeKeys(OpGet, append(AppendKeys(nil, OpGet, k), 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
	h := &Hello{Version: 1, PageSize: 4096, MaxFrame: 100, MaxBatchPages: 7, Server: "s", Codec: "lz4"}
	gh, err := DecodeHello(h.Encode())
	if err != nil || *gh != *h {
		t.Fatalf("hello: %+v %v", gh, err)
	}
	infos := []PageInfo{{Key: 1, Status: OK, Class: "lz4", Size: 3, Backend: "cpu", Data: []byte{1, 2, 3}},
		{Key: 2, Status: CodeNotFound}}
	var b []byte
	b = append(b, 2, 0, 0, 0)
	for i := range infos {
		b = AppendPageInfo(b, &infos[i], true)
	}
	gi, err := DecodeInspect(b, []uint64{1, 2}, true)
	if err != nil || gi[0].Class != "lz4" || !bytes.Equal(gi[0].Data, []byte{1, 2, 3}) || gi[1].Status != CodeNotFound {
		t.Fatalf("inspect: %+v %v", gi, err)
	}
}

func TestErrors(t *testing.T) {
	err := error(&Error{Code: CodeNotFound, Msg: "no pool"})
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrPermission) || CodeOf(err) != CodeNotFound {
		t.Fatal("errors.Is on codes")
	}
	if PageError([]uint64{1, 2}, []Code{OK, OK}) != nil {
		t.Fatal("all ok is an error")
	}
	if e := PageError([]uint64{1, 2, 3}, []Code{OK, CodeNoSpace, CodeNoSpace}); !errors.Is(e, ErrNoSpace) || !strings.Contains(e.Error(), "2 of 3") {
		t.Fatalf("page error: %v", e)
	}
}

func TestValidPool(t *testing.T) {
	for _, ok := range []string{"a", "swap-0", "user:1000/x", strings.Repeat("x", MaxPoolName)} {
		if !ValidPool(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "a b", "tab\t", "\x00", "é", strings.Repeat("x", MaxPoolName+1)} {
		if ValidPool(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestImportsNothingOfOurs keeps clients small: ipc depends on the
// standard library and x/sys only.
func TestImportsNothingOfOurs(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		// x/sys for memfd and sealing; nothing of s4d.
		if dep != "github.com/s4d-project/s4d/ipc" && dep != "golang.org/x/sys/unix" {
			t.Errorf("ipc depends on %s", dep)
		}
	}
}
