package metrics

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// exported is every series name the collector can write.
func exported() map[string]bool {
	names := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, d := range all {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	// The histograms' series.
	for _, h := range []string{"s4d_request_duration_seconds", "s4d_backing_read_duration_seconds", "s4d_region_fault_duration_seconds"} {
		if !names[h] {
			panic(h + " is not exported")
		}
		for _, s := range []string{"_bucket", "_count", "_sum"} {
			names[h+s] = true
		}
	}
	return names
}

// checkNames fails for every s4d_ name in text the collector never writes,
// so a renamed series cannot leave the dashboard or an alert silently empty.
func checkNames(t *testing.T, file, text string) {
	t.Helper()
	names := exported()
	seen := 0
	for _, n := range regexp.MustCompile(`\bs4d_[a-z_]+`).FindAllString(text, -1) {
		seen++
		if !names[n] {
			t.Errorf("%s uses %s, which s4d does not export", file, n)
		}
	}
	if seen == 0 {
		t.Errorf("%s names no s4d series", file)
	}
}

func TestDashboardNamesExportedSeries(t *testing.T) {
	const file = "../contrib/grafana/s4d-dashboard.json"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	checkNames(t, file, strings.Join(exprs, "\n"))
}

func TestAlertRules(t *testing.T) {
	const file = "../contrib/prometheus/s4d-alerts.yml"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, file, string(b))
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (make deps installs prometheus)")
	}
	cmd := exec.Command(promtool, "test", "rules", "s4d-alerts_test.yml")
	cmd.Dir = "../contrib/prometheus"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
