// Command wgslgen writes the WGSL each SPIR-V module of package spirv is
// compiled from into the folder it is given, and inputs.sha256 beside
// them: the first step of `make vulkan-spirv`.
package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/s4d-project/s4d/backends/vulkan/spirv/wgslsrc"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: wgslgen DIR")
		os.Exit(2)
	}
	var sums strings.Builder
	for _, v := range wgslsrc.Variants() {
		if err := os.WriteFile(filepath.Join(os.Args[1], v.Name+".wgsl"), []byte(v.WGSL), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintf(&sums, "%x  %s.wgsl\n", sha256.Sum256([]byte(v.WGSL)), v.Name)
	}
	if err := os.WriteFile(filepath.Join(os.Args[1], "inputs.sha256"), []byte(sums.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
