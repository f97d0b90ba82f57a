// Command s4d is the memory-compression daemon and its control tool.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/cmd/s4d/bench"
	"github.com/s4d-project/s4d/cmd/s4d/ctl"
	"github.com/s4d-project/s4d/cmd/s4d/daemoncmd"
)

func main() {
	app := &cli.App{
		Name:     "s4d",
		Usage:    "keep memory pages compressed in RAM, on the GPU or the CPU",
		Commands: []*cli.Command{daemoncmd.Command, ctl.Command, bench.Command},
		// Errors are printed once, as one line, by main.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "s4d:", err)
		os.Exit(1)
	}
}
