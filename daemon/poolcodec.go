package daemon

import (
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagefmt"
)

// poolCodec sets the codec a pool's later writes are compressed with.
func (c *conn) poolCodec(body []byte) ([]byte, error) {
	pool, name, err := ipc.DecodePoolCodec(body)
	if err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	if !ipc.ValidPool(pool) {
		return nil, badPool(pool)
	}
	var codec pagefmt.Codec
	if name != "" {
		codec, _ = pagefmt.ParseCodec(name) // checked by DecodePoolCodec
	}
	if err := c.pages.SetPoolCodec(c.uid, pool, codec); err != nil {
		return nil, storeErr(err, pool)
	}
	c.d.log.Info("pool codec", "pool", pool, "uid", c.uid, "codec", codecName(codec))
	return c.reply(nil), nil
}

// codecName is a pool's codec as STATS shows it: "" for the daemon's.
func codecName(c pagefmt.Codec) string {
	if c == 0 {
		return ""
	}
	return c.String()
}
