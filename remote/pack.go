package remote

import (
	"encoding/binary"
	"fmt"
)

// A packed block holds several objects (compressed pages, or raw ones for
// an export), as a block of the backing file does: a count, each
// object's key and length, then the objects end to end. The whole block is
// sealed, so the table needs no checksum of its own.

// Pack appends a block of objs under keys to dst.
func Pack(dst []byte, keys []uint64, objs [][]byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(objs)))
	for i, o := range objs {
		dst = binary.LittleEndian.AppendUint64(dst, keys[i])
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(o)))
	}
	for _, o := range objs {
		dst = append(dst, o...)
	}
	return dst
}

// Unpack splits a block made by Pack. The objects alias data.
func Unpack(data []byte) (keys []uint64, objs [][]byte, err error) {
	if len(data) < 4 {
		return nil, nil, fmt.Errorf("remote: packed block of %d bytes", len(data))
	}
	n := int(binary.LittleEndian.Uint32(data))
	if n > (len(data)-4)/12 {
		return nil, nil, fmt.Errorf("remote: packed block says %d objects in %d bytes", n, len(data))
	}
	tbl, body := data[4:4+12*n], data[4+12*n:]
	keys, objs = make([]uint64, n), make([][]byte, n)
	for i := range n {
		keys[i] = binary.LittleEndian.Uint64(tbl[12*i:])
		size := int(binary.LittleEndian.Uint32(tbl[12*i+8:]))
		if size > len(body) {
			return nil, nil, fmt.Errorf("remote: packed block's object %d overruns it", i)
		}
		objs[i], body = body[:size:size], body[size:]
	}
	if len(body) != 0 {
		return nil, nil, fmt.Errorf("remote: packed block has %d bytes past its objects", len(body))
	}
	return keys, objs, nil
}
