package ctl

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/ipc"
)

// TestTalksOnlyThroughTheClient keeps the control tool a pure client: it must not link
// the daemon, the store or any backend.
func TestTalksOnlyThroughTheClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 2 {
		t.Fatalf("go list found too little: %v", deps)
	}
	for _, dep := range deps {
		// exitcode maps ipc's errors to exit statuses: itself a pure client.
		// bytesize prints sizes as every command does; it imports nothing of ours.
		switch strings.TrimPrefix(dep, "github.com/s4d-project/s4d/") {
		case "ipc", "client", "cmd/s4d/ctl", "cmd/s4d/exitcode", "settings/bytesize":
			continue
		}
		if strings.HasPrefix(dep, "github.com/s4d-project/s4d/") {
			t.Errorf("s4d ctl depends on %s", dep)
		}
	}
}

func TestParseKeys(t *testing.T) {
	r, err := parseKeys("5-9")
	k := r.keys(nil, 0, r.n)
	if err != nil || len(k) != 5 || k[0] != 5 || k[4] != 9 {
		t.Fatalf("%v %v", k, err)
	}
	if r, err := parseKeys("18446744073709551615"); err != nil || r.n != 1 || r.keys(nil, 0, 1)[0] != 1<<64-1 {
		t.Fatalf("max key: %v %v", r, err)
	}
	// The largest range is a count, not a slice of 16M keys.
	if r, err := parseKeys("0-16777215"); err != nil || r.n != 1<<24 {
		t.Fatalf("largest range: %v %v", r, err)
	}
	for _, bad := range []string{"", "x", "9-5", "1-", "0-99999999"} {
		if _, err := parseKeys(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestBatches(t *testing.T) {
	h := &ipc.Hello{PageSize: 65536, MaxFrame: 1 << 20, MaxBatchPages: 16384}
	total := 0
	for _, b := range batches(h, 100) {
		n := b[1] - b[0]
		if ipc.HeaderSize+ipc.PutBodySize(strings.Repeat("p", ipc.MaxPoolName), n, 65536) > 1<<20 {
			t.Fatalf("batch of %d pages overflows the frame", n)
		}
		total += n
	}
	if total != 100 {
		t.Fatalf("batches cover %d keys", total)
	}
}

func TestHuman(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 1023: "1023B", 4096: "4K", 1536: "1.5K", 10 << 20: "10M", 3 << 30: "3G"} {
		if got := human(n); got != want {
			t.Errorf("human(%d) = %s, want %s", n, got, want)
		}
	}
}

// A --socket typed on `ctl` beats $S4D_SOCKET: the variable is only the
// default. urfave/cli used to count the variable as set on the subcommand,
// so it won over the parent's flag.
func TestSocketFlagBeatsEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("S4D_SOCKET", dir+"/from-env.sock")
	for _, args := range [][]string{
		{"s4d", "ctl", "--socket", dir + "/typed.sock", "stats"},
		{"s4d", "ctl", "stats", "--socket", dir + "/typed.sock"},
	} {
		app := &cli.App{Name: "s4d", Commands: []*cli.Command{Command}, ExitErrHandler: func(*cli.Context, error) {}}
		err := app.Run(args)
		if err == nil || !strings.Contains(err.Error(), "typed.sock") || strings.Contains(err.Error(), "from-env") {
			t.Errorf("%v: got %v, want an error naming typed.sock", args, err)
		}
	}
	app := &cli.App{Name: "s4d", Commands: []*cli.Command{Command}, ExitErrHandler: func(*cli.Context, error) {}}
	if err := app.Run([]string{"s4d", "ctl", "stats"}); err == nil || !strings.Contains(err.Error(), "from-env.sock") {
		t.Errorf("no --socket: got %v, want an error naming $S4D_SOCKET's path", err)
	}
}
