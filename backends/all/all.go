// Package all registers every backend compiled into s4d.
package all

import (
	_ "github.com/s4d-project/s4d/backends/cpu"
	_ "github.com/s4d-project/s4d/backends/cuda"
	_ "github.com/s4d-project/s4d/backends/webgpu"
)
