// Command tintgen compiles the kernels' WGSL to SPIR-V with Tint, as Dawn
// runs it on Vulkan: `make vulkan-spirv-tint`. Dawn's library (the npm
// package that `make deps` installs) opens a device on whatever Vulkan
// driver is here (lavapipe without a GPU) with the toggles the webgpu
// runtime asks for plus dump_shaders, builds each kernel's pipeline and
// logs the module Tint generated as disassembly; the SPIRV-Tools linked
// into the same library assemble it again (checked to disassemble to the
// same text) and validate it. Tint's output depends on the device only
// through toggles, see backends/vulkan/README.md.
//
// Usage: tintgen [-asm] [-dawn NAME] [-toggles T] LIB DIR writes DIR/NAME.spv for
// each variant and DIR/inputs.sha256 (the WGSL's hashes, the toggles and
// the Dawn package named by -dawn); -asm also writes the disassembly
// Dawn logged (NAME.spvasm) and the device and toggles it used (dump.txt).
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/s4d-project/s4d/backends/vulkan/spirv/wgslsrc"
	"github.com/s4d-project/s4d/backends/webgpu"
)

func main() {
	asm := flag.Bool("asm", false, "also write the disassembly Dawn logged and dump.txt")
	dawn := flag.String("dawn", "", "the Dawn package, recorded in inputs.sha256")
	toggles := flag.String("toggles", wgslsrc.TintToggles, "Dawn toggles (!name disables one): for experiments only, the committed modules use the default")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: tintgen [-asm] [-dawn NAME] LIB DIR")
		os.Exit(2)
	}
	lib, dir := flag.Arg(0), flag.Arg(1)
	if err := run(lib, dir, *dawn, *toggles, *asm); err != nil {
		fmt.Fprintln(os.Stderr, "tintgen:", err)
		os.Exit(1)
	}
}

func run(lib, dir, dawn, toggles string, asm bool) error {
	vs := wgslsrc.TintVariants()
	ks := make([]webgpu.DumpKernel, len(vs))
	for i, v := range vs {
		entry, _, _ := strings.Cut(v.Name, "_") // compress_sg: compress
		if entry == "" {
			return fmt.Errorf("variant %q", v.Name)
		}
		ks[i] = webgpu.DumpKernel{Name: v.Name, WGSL: v.WGSL, Entry: entry}
	}
	d, err := webgpu.DumpSPIRV(lib, strings.Split(toggles, ","), ks)
	if err != nil {
		return err
	}
	sums := wgslsrc.TintInputs(dawn)
	if toggles != wgslsrc.TintToggles {
		sums = strings.Replace(sums, "# dawn toggles: "+wgslsrc.TintToggles, "# dawn toggles: "+toggles, 1)
	}
	for _, v := range vs {
		text := d.Text[v.Name]
		m, err := webgpu.AssembleDump(lib, text, "vulkan1.2")
		if err != nil {
			return fmt.Errorf("%s: %w", v.Name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, v.Name+".spv"), m, 0o644); err != nil {
			return err
		}
		if asm {
			if err := os.WriteFile(filepath.Join(dir, v.Name+".spvasm"), []byte(text), 0o644); err != nil {
				return err
			}
		}
		fmt.Printf("%s: %d bytes, sha256 %x\n", v.Name, len(m), sha256.Sum256(m))
	}
	if asm {
		info := fmt.Sprintf("device: %s\ntoggles used: %s\n", d.Device, d.Toggles)
		if err := os.WriteFile(filepath.Join(dir, "dump.txt"), []byte(info), 0o644); err != nil {
			return err
		}
		fmt.Print(info)
	}
	return os.WriteFile(filepath.Join(dir, "inputs.sha256"), []byte(sums), 0o644)
}
