package ctl

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
)

var codecCommand = &cli.Command{
	Name:  "codec",
	Usage: "choose the codec a pool's new pages are compressed with",
	Description: "lz4 is the fastest to write and read; zstd stores in fewer bytes. default follows the\n" +
		"daemon's --codec. Pages already stored keep their form (s4d ctl recompress changes idle ones).\n" +
		"The pool is created if there is none; `s4d ctl pools --output +codec` shows each pool's choice.",
	UsageText: "s4d ctl codec --pool P lz4|zstd|default",
	Flags:     withSocket(poolFlag),
	Action: func(cx *cli.Context) error {
		name := cx.Args().First()
		if cx.NArg() != 1 || (name != "lz4" && name != "zstd" && name != "default") {
			return exitcode.UsageErr(fmt.Errorf("give one codec: lz4, zstd or default"))
		}
		if name == "default" {
			name = ""
		}
		return withClient(func(ctx context.Context, c *client.Client) error {
			if err := c.SetPoolCodec(ctx, cx.String("pool"), name); err != nil {
				return err
			}
			fmt.Printf("pool %s: new pages compressed with %s\n", cx.String("pool"), map[bool]string{true: "the daemon's codec", false: name}[name == ""])
			return nil
		})(cx)
	},
}
