package ipc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// HelloMagic opens a HELLO request: "S4DP".
const HelloMagic = 0x50443453

// Hello is what the daemon announces.
type Hello struct {
	Version       uint16
	PageSize      uint32
	MaxFrame      uint32
	MaxBatchPages uint32
	Server        string // daemon name and version
	Codec         string // codec used for compressible pages
}

// PutRequest stores pages under keys.
type PutRequest struct {
	Pool     string
	PageSize uint32
	Keys     []uint64
	Pages    []byte // len(Keys) * PageSize
}

// KeysRequest names keys of a pool (GET, DEL, INSPECT).
type KeysRequest struct {
	Pool     string
	Keys     []uint64
	WithData bool // INSPECT only: include stored bytes
}

// PageInfo is INSPECT's answer for one key.
type PageInfo struct {
	Key     uint64
	Status  Code
	Class   string // zero, same, lz4, zstd, raw
	Size    uint32 // stored bytes
	Fill    uint64 // the word of a same-filled page
	Backend string // which backend compressed it
	Data    []byte // stored bytes, when asked for
}

// Class numbers on the wire (INSPECT).
var classNames = []string{1: "zero", 2: "same", 3: "lz4", 4: "zstd", 5: "raw"}

// ClassName names a wire class number.
func ClassName(c uint8) string {
	if int(c) < len(classNames) && classNames[c] != "" {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", c)
}

func classNumber(name string) uint8 {
	for i, n := range classNames {
		if n == name && n != "" {
			return uint8(i)
		}
	}
	return 0
}

// ErrMalformed wraps every error about a body that does not parse.
var ErrMalformed = errors.New("malformed body")

// reader walks a body with bounds checks; the first overrun sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.err = ErrMalformed
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *reader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}
func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}
func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}
func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}
func (r *reader) str() string { return string(r.take(int(r.u16()))) }

// strAs reads a string, returning old when it holds the same bytes: a
// server decoding request after request for the same pool allocates nothing.
func (r *reader) strAs(old string) string {
	b := r.take(int(r.u16()))
	if string(b) == old {
		return old
	}
	return string(b)
}

// keys reads a count and that many keys into dst's memory when it is large
// enough, refusing counts the body cannot hold.
func (r *reader) keys(dst []uint64) []uint64 {
	n := int(r.u32())
	if r.err != nil || n > len(r.b)/8 {
		r.err = ErrMalformed
		return nil
	}
	ks := dst[:0]
	if cap(ks) < n {
		ks = make([]uint64, n)
	}
	ks = ks[:n]
	for i := range ks {
		ks[i] = binary.LittleEndian.Uint64(r.b[8*i:])
	}
	r.b = r.b[8*n:]
	return ks
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	return r.err
}

func appendStr(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendKeys(b []byte, keys []uint64) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(keys)))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint64(b, k)
	}
	return b
}

// EncodeHelloRequest builds a HELLO body.
func EncodeHelloRequest(client string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, HelloMagic)
	b = binary.LittleEndian.AppendUint16(b, Version)
	b = binary.LittleEndian.AppendUint16(b, Version)
	return appendStr(b, client)
}

// DecodeHelloRequest parses a HELLO body into the version range asked for.
func DecodeHelloRequest(body []byte) (minV, maxV uint16, client string, err error) {
	r := reader{b: body}
	if r.u32() != HelloMagic && r.err == nil {
		return 0, 0, "", fmt.Errorf("%w: bad magic", ErrMalformed)
	}
	minV, maxV, client = r.u16(), r.u16(), r.str()
	return minV, maxV, client, r.done()
}

// Encode builds a HELLO response body.
func (h *Hello) Encode() []byte {
	b := binary.LittleEndian.AppendUint16(nil, h.Version)
	b = binary.LittleEndian.AppendUint32(b, h.PageSize)
	b = binary.LittleEndian.AppendUint32(b, h.MaxFrame)
	b = binary.LittleEndian.AppendUint32(b, h.MaxBatchPages)
	b = appendStr(b, h.Server)
	return appendStr(b, h.Codec)
}

// DecodeHello parses a HELLO response body.
func DecodeHello(body []byte) (*Hello, error) {
	r := reader{b: body}
	h := &Hello{Version: r.u16(), PageSize: r.u32(), MaxFrame: r.u32(), MaxBatchPages: r.u32()}
	h.Server, h.Codec = r.str(), r.str()
	return h, r.done()
}

// PutFDRequest stores pages that sit in a sealed memfd sent with the frame.
type PutFDRequest struct {
	Pool     string
	PageSize uint32
	Keys     []uint64
	Offset   uint64 // where the first page starts in the memfd
}

// AppendPutFD appends a PUT_FD body.
func AppendPutFD(b []byte, p *PutFDRequest) []byte {
	b = appendStr(b, p.Pool)
	b = binary.LittleEndian.AppendUint32(b, p.PageSize)
	b = appendKeys(b, p.Keys)
	return binary.LittleEndian.AppendUint64(b, p.Offset)
}

// DecodePutFD parses a PUT_FD body.
func DecodePutFD(body []byte) (*PutFDRequest, error) {
	p := new(PutFDRequest)
	return p, p.Decode(body)
}

// Decode parses a PUT_FD (or GET_FD) body into p, reusing p's key slice.
func (p *PutFDRequest) Decode(body []byte) error {
	r := reader{b: body}
	p.Pool = r.strAs(p.Pool)
	p.PageSize = r.u32()
	p.Keys = r.keys(p.Keys)
	p.Offset = r.u64()
	return r.done()
}

// PutBodySize is the size of a PUT body, so callers can build it in place.
func PutBodySize(pool string, n, pageSize int) int { return 2 + len(pool) + 8 + 8*n + n*pageSize }

// AppendPut appends a PUT body.
func AppendPut(b []byte, p *PutRequest) []byte {
	b = appendStr(b, p.Pool)
	b = binary.LittleEndian.AppendUint32(b, p.PageSize)
	b = appendKeys(b, p.Keys)
	return append(b, p.Pages...)
}

// DecodePut parses a PUT body. Pages aliases body.
func DecodePut(body []byte) (*PutRequest, error) {
	p := new(PutRequest)
	if err := p.Decode(body); err != nil {
		return nil, err
	}
	return p, nil
}

// Decode parses a PUT body into p, reusing p's key slice. Pages aliases body.
func (p *PutRequest) Decode(body []byte) error {
	r := reader{b: body}
	p.Pool = r.strAs(p.Pool)
	p.PageSize = r.u32()
	p.Keys = r.keys(p.Keys)
	if r.err == nil && uint64(len(r.b)) != uint64(len(p.Keys))*uint64(p.PageSize) {
		return fmt.Errorf("%w: %d page bytes for %d keys of %d bytes", ErrMalformed, len(r.b), len(p.Keys), p.PageSize)
	}
	p.Pages = r.take(len(r.b))
	return r.done()
}

// AppendKeys appends a GET/DEL/INSPECT body. flags is written only for INSPECT.
func AppendKeys(b []byte, op Op, k *KeysRequest) []byte {
	b = appendStr(b, k.Pool)
	if op == OpInspect {
		var f uint8
		if k.WithData {
			f = 1
		}
		b = append(b, f)
	}
	return appendKeys(b, k.Keys)
}

// DecodeKeys parses a GET/DEL/INSPECT body.
func DecodeKeys(op Op, body []byte) (*KeysRequest, error) {
	k := new(KeysRequest)
	if err := k.Decode(op, body); err != nil {
		return nil, err
	}
	return k, nil
}

// Decode parses a GET/DEL/INSPECT body into k, reusing k's key slice.
func (k *KeysRequest) Decode(op Op, body []byte) error {
	r := reader{b: body}
	k.Pool = r.strAs(k.Pool)
	k.WithData = false
	if op == OpInspect {
		f := r.u8()
		if f&^1 != 0 {
			return fmt.Errorf("%w: unknown INSPECT flags %#x", ErrMalformed, f)
		}
		k.WithData = f&1 != 0
	}
	k.Keys = r.keys(k.Keys)
	return r.done()
}

// AppendCodes appends a per-page status list (PUT/DEL responses).
func AppendCodes(b []byte, codes []Code) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(codes)))
	for _, c := range codes {
		b = append(b, uint8(c))
	}
	return b
}

// DecodeCodes parses a per-page status list of exactly n entries.
func DecodeCodes(body []byte, n int) ([]Code, error) {
	r := reader{b: body}
	codes := readCodes(&r, n)
	return codes, r.done()
}

func readCodes(r *reader, n int) []Code {
	if int(r.u32()) != n && r.err == nil {
		r.err = fmt.Errorf("%w: status count differs from key count", ErrMalformed)
	}
	raw := r.take(n)
	if raw == nil {
		return nil
	}
	codes := make([]Code, n)
	for i, c := range raw {
		codes[i] = Code(c)
	}
	return codes
}

// GetResponseSize is the size of a GET response with ok pages present.
func GetResponseSize(n, ok, pageSize int) int { return getHeadSize(n) + ok*pageSize }

// getHeadSize is the size of what precedes the pages in a GET response:
// the page size, the status count and a status a key.
func getHeadSize(n int) int { return 8 + n }

// GetHeadSize is the length of a GET reply's head for n keys: what comes
// before the pages.
func GetHeadSize(n int) int { return getHeadSize(n) }

// DecodeGetHead parses a GET reply's head for n keys, given the length of
// the pages that follow it, and says how many pages came.
func DecodeGetHead(head []byte, n, pagesLen int) (pageSize int, codes []Code, ok int, err error) {
	r := reader{b: head}
	return decodeGetHead(&r, n, pagesLen)
}

// DecodeGet parses a GET response into pages (zeroed where a key failed).
func DecodeGet(body []byte, n int) (pageSize int, pages []byte, codes []Code, err error) {
	head := min(len(body), getHeadSize(n))
	r := reader{b: body[:head]}
	pageSize, codes, ok, err := decodeGetHead(&r, n, len(body)-head)
	if err != nil {
		return 0, nil, nil, err
	}
	r.b = body[head:]
	if ok == n {
		// Every page is there: hand out the body itself, no copy.
		pages = r.take(n * pageSize)
		return pageSize, pages, codes, r.done()
	}
	pages = make([]byte, n*pageSize)
	for i, c := range codes {
		if c == OK {
			copy(pages[i*pageSize:], r.take(pageSize))
		}
	}
	return pageSize, pages, codes, r.done()
}

// decodeGetHead reads a GET response's page size and codes from r, and
// checks that the pages following them, of pagesLen bytes, are exactly
// the ones the codes announce. It returns how many there are.
func decodeGetHead(r *reader, n, pagesLen int) (pageSize int, codes []Code, ok int, err error) {
	pageSize = int(r.u32())
	codes = readCodes(r, n)
	if r.err != nil {
		return 0, nil, 0, r.err
	}
	for _, c := range codes {
		if c == OK {
			ok++
		}
	}
	// The page size comes from the peer: nothing is allocated for it until
	// the body is seen to hold exactly the pages it announces.
	if pageSize <= 0 || pageSize > MaxPageSize || pagesLen != ok*pageSize {
		return 0, nil, 0, fmt.Errorf("%w: GET response holds %d bytes for %d pages of %d bytes", ErrMalformed, pagesLen, ok, pageSize)
	}
	return pageSize, codes, ok, nil
}

// AppendPageInfo appends one INSPECT entry.
func AppendPageInfo(b []byte, p *PageInfo, withData bool) []byte {
	b = append(b, uint8(p.Status), classNumber(p.Class))
	b = binary.LittleEndian.AppendUint32(b, p.Size)
	b = binary.LittleEndian.AppendUint64(b, p.Fill)
	b = appendStr(b, p.Backend)
	if withData {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Data)))
		b = append(b, p.Data...)
	}
	return b
}

// DecodeInspect parses an INSPECT response for keys.
func DecodeInspect(body []byte, keys []uint64, withData bool) ([]PageInfo, error) {
	r := reader{b: body}
	if int(r.u32()) != len(keys) && r.err == nil {
		return nil, fmt.Errorf("%w: entry count differs from key count", ErrMalformed)
	}
	out := make([]PageInfo, len(keys))
	for i := range out {
		p := &out[i]
		p.Key, p.Status = keys[i], Code(r.u8())
		if c := r.u8(); c != 0 {
			p.Class = ClassName(c)
		}
		p.Size, p.Fill, p.Backend = r.u32(), r.u64(), r.str()
		if withData {
			p.Data = append([]byte(nil), r.take(int(r.u32()))...)
		}
	}
	return out, r.done()
}

// DecodeString parses a body holding one string (error messages, a STATS pool).
func DecodeString(body []byte) (string, error) {
	r := reader{b: body}
	s := r.str()
	return s, r.done()
}

// EncodeString builds a body holding one string.
func EncodeString(s string) []byte { return appendStr(nil, s) }

// ValidPool reports whether name is an acceptable pool name: 1 to
// MaxPoolName printable ASCII bytes, no spaces.
func ValidPool(name string) bool {
	if len(name) == 0 || len(name) > MaxPoolName {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= ' ' || name[i] > '~' {
			return false
		}
	}
	return true
}
