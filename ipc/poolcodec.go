package ipc

import (
	"fmt"
)

// OpPoolCodec sets the codec a pool's pages are compressed with when
// written (PROTOCOL.md, "23 POOL_CODEC").
const OpPoolCodec Op = 23

func init() { opNames[OpPoolCodec] = "POOL_CODEC" }

// EncodePoolCodec is POOL_CODEC's body: the pool, and "lz4", "zstd" or ""
// (the daemon's codec).
func EncodePoolCodec(pool, codec string) []byte { return appendStr(appendStr(nil, pool), codec) }

// DecodePoolCodec parses POOL_CODEC's body.
func DecodePoolCodec(body []byte) (pool, codec string, err error) {
	r := reader{b: body}
	pool, codec = r.str(), r.str()
	if err = r.done(); err != nil {
		return "", "", err
	}
	if codec != "" && codec != "lz4" && codec != "zstd" {
		return "", "", fmt.Errorf("codec %q: want lz4, zstd, or empty for the daemon's", codec)
	}
	return pool, codec, nil
}
