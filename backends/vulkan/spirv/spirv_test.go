package spirv

import (
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/s4d-project/s4d/backends/vulkan/spirv/wgslsrc"
)

//go:embed inputs.sha256
var inputs string

//go:embed tint/inputs.sha256
var tintInputs string

// TestInputsCurrent: the WGSL the committed modules were compiled from is
// the WGSL the kernels give today. Editing wgsl/ without `make
// vulkan-spirv` fails here (no naga needed).
func TestInputsCurrent(t *testing.T) {
	var want strings.Builder
	for _, v := range wgslsrc.Variants() {
		fmt.Fprintf(&want, "%x  %s.wgsl\n", sha256.Sum256([]byte(v.WGSL)), v.Name)
	}
	if want.String() != inputs {
		t.Fatalf("the SPIR-V is stale: run make vulkan-spirv (builds naga-cli with cargo once) and commit backends/vulkan/spirv\nnow:\n%s\ncompiled from:\n%s", want.String(), inputs)
	}
	// Tint's: the same WGSL (subgroups enabled) and toggles; the Dawn
	// line names the package, which only vulkan-spirv-tint-check checks.
	got, _, _ := strings.Cut(tintInputs, "# dawn: ")
	now, _, _ := strings.Cut(wgslsrc.TintInputs(""), "# dawn: ")
	if got != now {
		t.Fatalf("Tint's SPIR-V is stale: run make vulkan-spirv-tint (Dawn on lavapipe, seconds) and commit backends/vulkan/spirv/tint\nnow:\n%s\ncompiled from:\n%s", now, got)
	}
}

// TestModules: each module is SPIR-V 1.3 (subgroup arithmetic needs it),
// whole words, with the compute entry point its set names.
func TestModules(t *testing.T) {
	type mod struct {
		name, entry string
		m           []byte
	}
	var mods []mod
	for _, s := range Sets() {
		mods = append(mods, mod{s.Name + "/compress", s.CompressEntry, s.Compress}, mod{s.Name + "/compress_sg", s.CompressEntry, s.CompressSubgroups},
			mod{s.Name + "/compress_exact", s.CompressEntry, s.CompressExact}, mod{s.Name + "/decompress", s.DecompressEntry, s.Decompress},
			mod{s.Name + "/gather", s.GatherEntry, s.Gather})
	}
	for _, c := range mods {
		name, m := c.name, c.m
		if len(m) < 20 || len(m)%4 != 0 {
			t.Errorf("%s: %d bytes, not a SPIR-V module", name, len(m))
			continue
		}
		if magic := binary.LittleEndian.Uint32(m); magic != 0x07230203 {
			t.Errorf("%s: magic %#x", name, magic)
		}
		if v := binary.LittleEndian.Uint32(m[4:]); v != 0x00010300 {
			t.Errorf("%s: version %#x, want 1.3", name, v)
		}
		if !entryPoint(m, 5 /* GLCompute */, c.entry) {
			t.Errorf("%s: no GLCompute entry point %s", name, c.entry)
		}
	}
}

// entryPoint reports whether m has an OpEntryPoint of the model and name.
func entryPoint(m []byte, model uint32, name string) bool {
	w := make([]uint32, len(m)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(m[4*i:])
	}
	for i := 5; i < len(w); {
		op, n := w[i]&0xffff, int(w[i]>>16)
		if n == 0 || i+n > len(w) {
			return false
		}
		if op == 15 && n >= 4 && w[i+1] == model { // OpEntryPoint model id name...
			var b []byte
			for _, x := range w[i+3 : i+n] {
				b = binary.LittleEndian.AppendUint32(b, x)
			}
			if s, _, _ := strings.Cut(string(b), "\x00"); s == name {
				return true
			}
		}
		i += n
	}
	return false
}

// TestSelected: the environment picks the set.
func TestSelected(t *testing.T) {
	for v, want := range map[string]string{"": Default.Name, "naga": "naga", "tint": "tint"} {
		t.Setenv(EnvCompiler, v)
		if s, err := Selected(); err != nil || s.Name != want {
			t.Errorf("%s=%q: %s, %v; want %s", EnvCompiler, v, s.Name, err, want)
		}
	}
	t.Setenv(EnvCompiler, "glslang")
	if _, err := Selected(); err == nil {
		t.Error("an unknown compiler was taken")
	}
}
