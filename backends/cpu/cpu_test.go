package cpu_test

import (
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/backendtest"
	"github.com/s4d-project/s4d/backends/cpu"
)

func TestConformance(t *testing.T) {
	b, err := cpu.New(backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	backendtest.Run(t, b, backendtest.Config{PageSizes: []int{4096, 16384, 65536}})
}

func TestOneWorker(t *testing.T) {
	b, err := cpu.New(backends.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	backendtest.Run(t, b, backendtest.Config{})
}
